#include "model/tokenizer/unicode.h"

#include <array>

#include "unicode/normalizer2.h"
#include "unicode/uchar.h"
#include "unicode/unistr.h"

namespace banyan::model {

int Utf8SequenceLength(uint8_t lead) {
  if (lead < 0x80) return 1;
  if ((lead & 0xe0) == 0xc0) return lead >= 0xc2 ? 2 : 0;
  if ((lead & 0xf0) == 0xe0) return 3;
  if ((lead & 0xf8) == 0xf0) return lead <= 0xf4 ? 4 : 0;
  return 0;
}

namespace {
// Decodes one valid sequence at text[i]; returns its length or 0.
int DecodeOne(std::string_view text, size_t i, char32_t* out) {
  const auto* s = reinterpret_cast<const uint8_t*>(text.data());
  const int len = Utf8SequenceLength(s[i]);
  if (len == 0 || i + len > text.size()) return 0;
  if (len == 1) {
    *out = s[i];
    return 1;
  }
  char32_t cp = s[i] & (0x7f >> len);
  for (int k = 1; k < len; ++k) {
    if ((s[i + k] & 0xc0) != 0x80) return 0;
    cp = (cp << 6) | (s[i + k] & 0x3f);
  }
  // Reject overlong forms, surrogates and values past U+10FFFF.
  if ((len == 3 && cp < 0x800) || (len == 4 && (cp < 0x10000 || cp > 0x10ffff)) ||
      (cp >= 0xd800 && cp <= 0xdfff)) {
    return 0;
  }
  *out = cp;
  return len;
}
}  // namespace

std::vector<CodePoint> SplitUtf8(std::string_view text) {
  std::vector<CodePoint> out;
  out.reserve(text.size());
  size_t i = 0;
  while (i < text.size()) {
    char32_t cp = 0;
    const int len = DecodeOne(text, i, &cp);
    if (len == 0) {
      out.push_back({static_cast<uint8_t>(text[i]), static_cast<uint32_t>(i),
                     static_cast<uint32_t>(i + 1), false});
      ++i;
    } else {
      out.push_back({cp, static_cast<uint32_t>(i), static_cast<uint32_t>(i + len), true});
      i += len;
    }
  }
  return out;
}

bool IsValidUtf8(std::string_view text) {
  size_t i = 0;
  while (i < text.size()) {
    char32_t cp;
    const int len = DecodeOne(text, i, &cp);
    if (len == 0) return false;
    i += len;
  }
  return true;
}

void AppendUtf8(char32_t cp, std::string* out) {
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xc0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3f)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xe0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3f)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3f)));
  } else {
    out->push_back(static_cast<char>(0xf0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3f)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3f)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3f)));
  }
}

CharClass ClassOf(const CodePoint& cp) {
  if (!cp.valid) return CharClass::kOther;
  const char32_t c = cp.value;
  if (c < 0x80) {
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) return CharClass::kLetter;
    if (c >= '0' && c <= '9') return CharClass::kNumber;
    if (c == ' ' || (c >= 0x09 && c <= 0x0d)) return CharClass::kSpace;
    return CharClass::kOther;
  }
  if (u_isUWhiteSpace(static_cast<UChar32>(c))) return CharClass::kSpace;
  switch (u_charType(static_cast<UChar32>(c))) {
    case U_UPPERCASE_LETTER: case U_LOWERCASE_LETTER: case U_TITLECASE_LETTER:
    case U_MODIFIER_LETTER: case U_OTHER_LETTER:
      return CharClass::kLetter;
    case U_DECIMAL_DIGIT_NUMBER: case U_LETTER_NUMBER: case U_OTHER_NUMBER:
      return CharClass::kNumber;
    default:
      return CharClass::kOther;
  }
}

std::string NormalizeNfc(std::string_view text) {
  bool ascii = true;
  for (char ch : text) ascii = ascii && static_cast<uint8_t>(ch) < 0x80;
  if (ascii || !IsValidUtf8(text)) return std::string(text);
  UErrorCode error = U_ZERO_ERROR;
  const icu::Normalizer2* nfc = icu::Normalizer2::getNFCInstance(error);
  if (U_FAILURE(error)) return std::string(text);
  const icu::UnicodeString source =
      icu::UnicodeString::fromUTF8(icu::StringPiece(text.data(), static_cast<int32_t>(text.size())));
  icu::UnicodeString result = nfc->normalize(source, error);
  if (U_FAILURE(error)) return std::string(text);
  std::string out;
  result.toUTF8String(out);
  return out;
}

namespace {
struct ByteMaps {
  std::array<char32_t, 256> to_unicode{};
  std::array<int16_t, 512> from_unicode{};  // code points < 512 only
  ByteMaps() {
    from_unicode.fill(-1);
    char32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xa1 && b <= 0xac) || (b >= 0xae);
      to_unicode[b] = printable ? static_cast<char32_t>(b) : next++;
      from_unicode[to_unicode[b]] = static_cast<int16_t>(b);
    }
  }
};
const ByteMaps& Maps() {
  static const ByteMaps* maps = new ByteMaps();
  return *maps;
}
}  // namespace

char32_t ByteToUnicode(uint8_t b) { return Maps().to_unicode[b]; }

int UnicodeToByte(char32_t cp) { return cp < 512 ? Maps().from_unicode[cp] : -1; }

std::string BytesToByteLevel(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (char ch : bytes) AppendUtf8(ByteToUnicode(static_cast<uint8_t>(ch)), &out);
  return out;
}

}  // namespace banyan::model

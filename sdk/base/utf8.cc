#include "sdk/base/utf8.h"

namespace banyan {

int Utf8SequenceLength(uint8_t lead) {
  if (lead < 0x80) return 1;
  if ((lead & 0xe0) == 0xc0) return lead >= 0xc2 ? 2 : 0;
  if ((lead & 0xf0) == 0xe0) return 3;
  if ((lead & 0xf8) == 0xf0) return lead <= 0xf4 ? 4 : 0;
  return 0;
}

int DecodeUtf8At(std::string_view text, size_t i, char32_t* cp) {
  const auto* s = reinterpret_cast<const uint8_t*>(text.data());
  const int len = Utf8SequenceLength(s[i]);
  if (len == 0 || i + len > text.size()) return 0;
  if (len == 1) {
    *cp = s[i];
    return 1;
  }
  char32_t value = s[i] & (0x7f >> len);
  for (int k = 1; k < len; ++k) {
    if ((s[i + k] & 0xc0) != 0x80) return 0;
    value = (value << 6) | (s[i + k] & 0x3f);
  }
  // Overlong forms, surrogates and values past U+10FFFF are not UTF-8.
  if ((len == 3 && value < 0x800) || (len == 4 && (value < 0x10000 || value > 0x10ffff)) ||
      (value >= 0xd800 && value <= 0xdfff)) {
    return 0;
  }
  *cp = value;
  return len;
}

bool IsValidUtf8(std::string_view text) {
  char32_t cp;
  for (size_t i = 0; i < text.size();) {
    const int len = DecodeUtf8At(text, i, &cp);
    if (len == 0) return false;
    i += len;
  }
  return true;
}

std::string ToValidUtf8(std::string_view text) {
  if (IsValidUtf8(text)) return std::string(text);
  std::string out;
  out.reserve(text.size() + 8);
  char32_t cp;
  for (size_t i = 0; i < text.size();) {
    const int len = DecodeUtf8At(text, i, &cp);
    if (len == 0) {
      out.append("\xEF\xBF\xBD");  // U+FFFD REPLACEMENT CHARACTER for this byte
      ++i;
    } else {
      out.append(text.substr(i, len));
      i += len;
    }
  }
  return out;
}

}  // namespace banyan

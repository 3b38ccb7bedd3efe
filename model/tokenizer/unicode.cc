#include "model/tokenizer/unicode.h"

#include <algorithm>
#include <array>

#include "model/tokenizer/unicode_tables.h"

namespace banyan::model {

std::vector<CodePoint> SplitUtf8(std::string_view text) {
  std::vector<CodePoint> out;
  out.reserve(text.size());
  size_t i = 0;
  while (i < text.size()) {
    char32_t cp = 0;
    const int len = DecodeUtf8At(text, i, &cp);
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

namespace {

namespace ut = unicode_tables;

bool InRanges(const ut::Range* ranges, size_t n, char32_t c) {
  const ut::Range* end = ranges + n;
  const ut::Range* it = std::upper_bound(ranges, end, static_cast<uint32_t>(c),
                                         [](uint32_t v, const ut::Range& r) { return v < r.first; });
  return it != ranges && c <= (it - 1)->last;
}

uint8_t CombiningClassOf(char32_t c) {
  if (c < 0x300) return 0;
  const ut::CombiningClass* end = ut::kCombiningClasses + ut::kCombiningClassesSize;
  const ut::CombiningClass* it = std::lower_bound(
      ut::kCombiningClasses, end, static_cast<uint32_t>(c),
      [](const ut::CombiningClass& e, uint32_t v) { return e.code_point < v; });
  return it != end && it->code_point == c ? it->ccc : 0;
}

// Hangul syllable arithmetic (Unicode 3.12).
constexpr char32_t kSBase = 0xAC00, kLBase = 0x1100, kVBase = 0x1161, kTBase = 0x11A7;
constexpr char32_t kLCount = 19, kVCount = 21, kTCount = 28, kNCount = kVCount * kTCount,
                   kSCount = kLCount * kNCount;

void Decompose(char32_t c, std::vector<char32_t>* out) {
  if (c >= kSBase && c < kSBase + kSCount) {
    const char32_t s = c - kSBase;
    out->push_back(kLBase + s / kNCount);
    out->push_back(kVBase + (s % kNCount) / kTCount);
    if (s % kTCount != 0) out->push_back(kTBase + s % kTCount);
    return;
  }
  const ut::Decomposition* end = ut::kDecompositions + ut::kDecompositionsSize;
  const ut::Decomposition* it = std::lower_bound(
      ut::kDecompositions, end, static_cast<uint32_t>(c),
      [](const ut::Decomposition& e, uint32_t v) { return e.code_point < v; });
  if (it == end || it->code_point != c) {
    out->push_back(c);
    return;
  }
  Decompose(it->first, out);
  if (it->second != 0) Decompose(it->second, out);
}

// The primary composite of (a, b), or 0.
char32_t Compose(char32_t a, char32_t b) {
  if (a >= kLBase && a < kLBase + kLCount && b >= kVBase && b < kVBase + kVCount) {
    return kSBase + ((a - kLBase) * kVCount + (b - kVBase)) * kTCount;
  }
  if (a >= kSBase && a < kSBase + kSCount && (a - kSBase) % kTCount == 0 && b > kTBase &&
      b < kTBase + kTCount) {
    return a + (b - kTBase);
  }
  const ut::Composition* end = ut::kCompositions + ut::kCompositionsSize;
  const ut::Composition* it = std::lower_bound(
      ut::kCompositions, end, std::pair<uint32_t, uint32_t>(a, b),
      [](const ut::Composition& e, const std::pair<uint32_t, uint32_t>& v) {
        return e.first != v.first ? e.first < v.first : e.second < v.second;
      });
  return it != end && it->first == a && it->second == b ? it->composite : 0;
}

}  // namespace

CharClass ClassOf(const CodePoint& cp) {
  if (!cp.valid) return CharClass::kOther;
  const char32_t c = cp.value;
  if (c < 0x80) {
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) return CharClass::kLetter;
    if (c >= '0' && c <= '9') return CharClass::kNumber;
    if (c == ' ' || (c >= 0x09 && c <= 0x0d)) return CharClass::kSpace;
    return CharClass::kOther;
  }
  if (InRanges(ut::kSpaceRanges, ut::kSpaceRangesSize, c)) return CharClass::kSpace;
  if (InRanges(ut::kLetterRanges, ut::kLetterRangesSize, c)) return CharClass::kLetter;
  if (InRanges(ut::kNumberRanges, ut::kNumberRangesSize, c)) return CharClass::kNumber;
  return CharClass::kOther;
}

std::string NormalizeNfc(std::string_view text) {
  bool ascii = true;
  for (char ch : text) ascii = ascii && static_cast<uint8_t>(ch) < 0x80;
  if (ascii || !IsValidUtf8(text)) return std::string(text);
  // 1. Full canonical decomposition.
  std::vector<char32_t> d;
  d.reserve(text.size());
  for (const CodePoint& cp : SplitUtf8(text)) Decompose(cp.value, &d);
  // 2. Canonical ordering: stable sort of each run of non-starters by class.
  for (size_t i = 0; i < d.size();) {
    if (CombiningClassOf(d[i]) == 0) {
      ++i;
      continue;
    }
    size_t j = i;
    while (j < d.size() && CombiningClassOf(d[j]) != 0) ++j;
    std::stable_sort(d.begin() + i, d.begin() + j, [](char32_t a, char32_t b) {
      return CombiningClassOf(a) < CombiningClassOf(b);
    });
    i = j;
  }
  // 3. Canonical composition (UAX #15): combine each character with the last
  // starter unless a character of equal or higher class blocks it.
  std::vector<char32_t> out;
  out.reserve(d.size());
  size_t starter = 0;
  bool have_starter = false;
  int last_class = -1;
  for (char32_t c : d) {
    const int cls = CombiningClassOf(c);
    if (have_starter && (last_class < cls || last_class == 0)) {
      if (char32_t composite = Compose(out[starter], c)) {
        out[starter] = composite;
        continue;
      }
    }
    if (cls == 0) {
      starter = out.size();
      have_starter = true;
    }
    last_class = cls;
    out.push_back(c);
  }
  std::string result;
  result.reserve(text.size());
  for (char32_t c : out) AppendUtf8(c, &result);
  return result;
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

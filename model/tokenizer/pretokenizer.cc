#include "model/tokenizer/pretokenizer.h"

#include "absl/strings/str_cat.h"
#include "model/tokenizer/unicode.h"

namespace banyan::model {

const char kGpt2Pattern[] =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";
const char kLlama3Pattern[] =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| "
    "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
const char kQwen2Pattern[] =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| "
    "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

absl::StatusOr<PreTokenizerKind> PreTokenizerFromPattern(std::string_view pattern) {
  if (pattern == kGpt2Pattern) return PreTokenizerKind::kGpt2;
  if (pattern == kLlama3Pattern) return PreTokenizerKind::kLlama3;
  if (pattern == kQwen2Pattern) return PreTokenizerKind::kQwen2;
  return absl::UnimplementedError(absl::StrCat("pre-tokenizer regex is not supported: ",
                                               std::string(pattern.substr(0, 200))));
}

absl::StatusOr<PreTokenizerKind> PreTokenizerFromGgufName(std::string_view name) {
  if (name == "default" || name == "gpt-2" || name == "gpt2" || name == "starcoder" ||
      name == "refact") {
    return PreTokenizerKind::kGpt2;
  }
  if (name == "llama3" || name == "llama-bpe" || name == "llama-v3" || name == "dbrx" ||
      name == "smaug-bpe") {
    return PreTokenizerKind::kLlama3;
  }
  if (name == "qwen2") return PreTokenizerKind::kQwen2;
  if (name == "smollm") return PreTokenizerKind::kSmolLm;
  return absl::UnimplementedError(absl::StrCat("GGUF pre-tokenizer '", std::string(name),
                                               "' is not supported"));
}

namespace {

class Matcher {
 public:
  Matcher(const std::vector<CodePoint>& cps) : cps_(cps), n_(cps.size()) {
    cls_.reserve(n_);
    for (const CodePoint& cp : cps) cls_.push_back(ClassOf(cp));
  }
  size_t size() const { return n_; }

  bool Is(size_t i, CharClass c) const { return i < n_ && cls_[i] == c; }
  bool IsNewline(size_t i) const {
    return i < n_ && cps_[i].valid && (cps_[i].value == '\r' || cps_[i].value == '\n');
  }
  bool IsChar(size_t i, char32_t c) const { return i < n_ && cps_[i].valid && cps_[i].value == c; }
  size_t Run(size_t i, CharClass c) const {
    while (i < n_ && cls_[i] == c) ++i;
    return i;
  }

  // 's|'t|'re|'ve|'m|'ll|'d, optionally ignoring case. Returns the end or 0.
  size_t Contraction(size_t i, bool ignore_case) const {
    if (!IsChar(i, '\'') || i + 1 >= n_ || !cps_[i + 1].valid) return 0;
    auto lower = [&](size_t k) -> char32_t {
      if (k >= n_ || !cps_[k].valid) return 0;
      char32_t c = cps_[k].value;
      if (ignore_case) {
        if (c >= 'A' && c <= 'Z') c += 32;
        if (c == 0x17f) c = 's';  // LATIN SMALL LETTER LONG S folds to s
      }
      return c;
    };
    const char32_t a = lower(i + 1), b = lower(i + 2);
    if (a == 's' || a == 't' || a == 'm' || a == 'd') return i + 2;
    if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return i + 3;
    return 0;
  }

  // \s+(?!\S) then \s+, at a whitespace position i.
  size_t Whitespace(size_t i) const {
    const size_t j = Run(i, CharClass::kSpace);
    if (j == n_ || j - i == 1) return j;
    return j - 1;
  }

  size_t Gpt2(size_t i) const {
    if (size_t e = Contraction(i, false)) return e;
    const size_t s = IsChar(i, ' ') ? i + 1 : i;
    if (Is(s, CharClass::kLetter)) return Run(s, CharClass::kLetter);
    if (Is(s, CharClass::kNumber)) return Run(s, CharClass::kNumber);
    if (Is(s, CharClass::kOther)) return Run(s, CharClass::kOther);
    return Whitespace(i);
  }

  size_t Llama3(size_t i, size_t max_digits) const {
    if (size_t e = Contraction(i, true)) return e;
    // [^\r\n\p{L}\p{N}]?\p{L}+
    if (Is(i, CharClass::kLetter)) return Run(i, CharClass::kLetter);
    if (!IsNewline(i) && !Is(i, CharClass::kNumber) && Is(i + 1, CharClass::kLetter)) {
      return Run(i + 1, CharClass::kLetter);
    }
    // \p{N}{1,max}
    if (Is(i, CharClass::kNumber)) {
      size_t e = i;
      while (e < n_ && e - i < max_digits && cls_[e] == CharClass::kNumber) ++e;
      return e;
    }
    // ` ?[^\s\p{L}\p{N}]+[\r\n]*`
    const size_t s = IsChar(i, ' ') ? i + 1 : i;
    if (Is(s, CharClass::kOther)) {
      size_t e = Run(s, CharClass::kOther);
      while (IsNewline(e)) ++e;
      return e;
    }
    // \s*[\r\n]+ : ends after the last newline of the whitespace run.
    const size_t j = Run(i, CharClass::kSpace);
    for (size_t k = j; k > i; --k) {
      if (IsNewline(k - 1)) return k;
    }
    return Whitespace(i);
  }

 private:
  const std::vector<CodePoint>& cps_;
  size_t n_;
  std::vector<CharClass> cls_;
};

}  // namespace

std::vector<std::pair<size_t, size_t>> PreTokenize(PreTokenizerKind kind, std::string_view text) {
  std::vector<std::pair<size_t, size_t>> pieces;
  if (text.empty()) return pieces;
  if (kind == PreTokenizerKind::kNone) {
    pieces.emplace_back(0, text.size());
    return pieces;
  }
  const std::vector<CodePoint> cps = SplitUtf8(text);
  const Matcher m(cps);
  auto emit = [&](size_t a, size_t b) { pieces.emplace_back(cps[a].begin, cps[b - 1].end); };
  if (kind == PreTokenizerKind::kSmolLm) {
    // Digits(individual_digits) isolates each \p{N}; GPT-2 splits the rest.
    size_t start = 0;
    for (size_t i = 0; i <= cps.size(); ++i) {
      if (i == cps.size() || m.Is(i, CharClass::kNumber)) {
        if (i > start) {
          auto sub = PreTokenize(PreTokenizerKind::kGpt2,
                                 text.substr(cps[start].begin, cps[i - 1].end - cps[start].begin));
          for (auto [a, b] : sub) pieces.emplace_back(a + cps[start].begin, b + cps[start].begin);
        }
        if (i < cps.size()) emit(i, i + 1);
        start = i + 1;
      }
    }
    return pieces;
  }
  size_t i = 0;
  while (i < m.size()) {
    size_t e = 0;
    switch (kind) {
      case PreTokenizerKind::kGpt2: e = m.Gpt2(i); break;
      case PreTokenizerKind::kLlama3: e = m.Llama3(i, 3); break;
      case PreTokenizerKind::kQwen2: e = m.Llama3(i, 1); break;
      default: e = i + 1; break;
    }
    if (e <= i) e = i + 1;  // cannot happen; keeps the loop finite regardless
    emit(i, e);
    i = e;
  }
  return pieces;
}

}  // namespace banyan::model

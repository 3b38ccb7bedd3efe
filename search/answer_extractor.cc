#include "search/answer_extractor.h"

#include <re2/re2.h>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"

namespace banyan::search {
namespace {

bool LooksNumeric(std::string_view s) {
  if (s.empty()) return false;
  size_t i = (s[0] == '-' || s[0] == '+') ? 1 : 0;
  bool digit = false, dot = false;
  for (; i < s.size(); ++i) {
    if (s[i] >= '0' && s[i] <= '9') {
      digit = true;
    } else if (s[i] == '.' && !dot) {
      dot = true;
    } else {
      return false;
    }
  }
  return digit;
}

}  // namespace

AnswerExtractor::AnswerExtractor(std::unique_ptr<re2::RE2> regex) : regex_(std::move(regex)) {}
AnswerExtractor::AnswerExtractor(AnswerExtractor&&) noexcept = default;
AnswerExtractor& AnswerExtractor::operator=(AnswerExtractor&&) noexcept = default;
AnswerExtractor::~AnswerExtractor() = default;

absl::StatusOr<AnswerExtractor> AnswerExtractor::Create(std::string_view pattern) {
  re2::RE2::Options options;
  options.set_log_errors(false);
  auto regex = std::make_unique<re2::RE2>(re2::StringPiece(pattern.data(), pattern.size()), options);
  if (!regex->ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("answer pattern '", std::string(pattern), "': ", regex->error()));
  }
  if (regex->NumberOfCapturingGroups() > 1) {
    return absl::InvalidArgumentError(absl::StrCat("answer pattern '", std::string(pattern),
                                                   "' has ", regex->NumberOfCapturingGroups(),
                                                   " capturing groups; use at most one"));
  }
  return AnswerExtractor(std::move(regex));
}

std::optional<std::string> AnswerExtractor::Extract(std::string_view text) const {
  re2::StringPiece input(text.data(), text.size());
  re2::StringPiece groups[2];
  const int n = 1 + regex_->NumberOfCapturingGroups();
  std::optional<std::string> last;
  size_t pos = 0;
  while (pos <= input.size() &&
         regex_->Match(input, pos, input.size(), re2::RE2::UNANCHORED, groups, n)) {
    const re2::StringPiece& answer = groups[n - 1];
    last = Normalize(std::string_view(answer.data(), answer.size()));
    const size_t end = static_cast<size_t>(groups[0].data() - input.data()) + groups[0].size();
    pos = groups[0].empty() ? end + 1 : end;  // never loop on an empty match
  }
  return last;
}

std::string AnswerExtractor::Normalize(std::string_view answer) {
  std::string s(absl::StripAsciiWhitespace(absl::string_view(answer.data(), answer.size())));
  while (!s.empty() && (s.back() == '.' || s.back() == '!' || s.back() == '?')) s.pop_back();
  std::string numeric = absl::StrReplaceAll(s, {{",", ""}});
  if (!LooksNumeric(numeric)) return s;
  if (numeric[0] == '+') numeric.erase(0, 1);
  if (numeric.find('.') != std::string::npos) {
    while (numeric.back() == '0') numeric.pop_back();
    if (numeric.back() == '.') numeric.pop_back();
  }
  const bool negative = numeric[0] == '-';
  std::string digits = negative ? numeric.substr(1) : numeric;
  const size_t first = digits.find_first_not_of('0');
  if (first == std::string::npos || digits[first] == '.') {
    digits = first == std::string::npos ? "0" : digits.substr(first - 1);
  } else {
    digits = digits.substr(first);
  }
  if (digits == "0") return "0";
  return negative ? "-" + digits : digits;
}

}  // namespace banyan::search

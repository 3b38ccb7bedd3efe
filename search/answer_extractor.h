// AnswerExtractor: pulls a final answer out of a sampled completion, so that
// self-consistency can vote over answers rather than over whole texts.
//
//   BANYAN_ASSIGN_OR_RETURN(auto extract, AnswerExtractor::Create(R"(answer is\s*(-?[\d.,]+))"));
//   std::optional<std::string> a = extract.Extract("... so the answer is 391.");  // "391"
//
// The pattern is an RE2 regular expression (linear time: safe on any model
// output). With a capturing group the first group is the answer, otherwise
// the whole match. With several matches the LAST one wins (models restate
// intermediate values before the final answer). Answers are normalized for
// comparison: surrounding whitespace and trailing '.', thousands separators
// in numbers removed, "-0" == "0", and numbers like "12.50" -> "12.5".
// Thread-safe after construction (const methods only).
#ifndef BANYAN_SEARCH_ANSWER_EXTRACTOR_H_
#define BANYAN_SEARCH_ANSWER_EXTRACTOR_H_

#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace re2 {
class RE2;
}

namespace banyan::search {

class AnswerExtractor {
 public:
  // The default pattern: the last number in the text.
  static constexpr std::string_view kLastNumber = R"((-?\d[\d,]*(?:\.\d+)?))";

  // kInvalidArgument for a pattern RE2 rejects (message names the error) or
  // one with more than one capturing group.
  static absl::StatusOr<AnswerExtractor> Create(std::string_view pattern = kLastNumber);

  AnswerExtractor(AnswerExtractor&&) noexcept;
  AnswerExtractor& operator=(AnswerExtractor&&) noexcept;
  ~AnswerExtractor();

  // The normalized last match in `text`, or nullopt when nothing matches.
  std::optional<std::string> Extract(std::string_view text) const;

  // Normalization alone (exposed for policies and tests).
  static std::string Normalize(std::string_view answer);

 private:
  explicit AnswerExtractor(std::unique_ptr<re2::RE2> regex);
  std::unique_ptr<re2::RE2> regex_;
};

}  // namespace banyan::search

#endif  // BANYAN_SEARCH_ANSWER_EXTRACTOR_H_

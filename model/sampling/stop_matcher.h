// StopMatcher: finds stop strings in one branch's generated text as it
// streams in, and says how much of the text is safe to show (a tail that
// could still become a stop string is held back).
//
//   BANYAN_ASSIGN_OR_RETURN(StopMatcher m, StopMatcher::Create({"\n\n", "</s>"}));
//   if (m.Append(detokenized_piece)) { /* stopped; m.text() ends before the stop string */ }
//   Show(m.text().substr(shown, m.SafeLength() - shown));
//
// Matching is on bytes. The earliest occurrence wins (if two stop strings
// start at one position, the text is cut there either way).
// Thread-compatible value type.
#ifndef BANYAN_MODEL_SAMPLING_STOP_MATCHER_H_
#define BANYAN_MODEL_SAMPLING_STOP_MATCHER_H_

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace banyan::model {

class StopMatcher {
 public:
  // kInvalidArgument for an empty stop string.
  [[nodiscard]] static absl::StatusOr<StopMatcher> Create(std::vector<std::string> stop_strings);

  // Appends text; returns true when a stop string occurs in the text (now or
  // before). Once stopped, further pieces are ignored.
  bool Append(std::string_view piece);

  bool stopped() const { return stopped_; }
  // The generated text, cut before the first stop string once stopped.
  const std::string& text() const { return text_; }
  // Index of the stop string that matched, or -1.
  int matched() const { return matched_; }
  // Length of the prefix of text() that can be shown: all of it once stopped,
  // else everything before the earliest suffix that is a proper prefix of a
  // stop string.
  size_t SafeLength() const;

 private:
  explicit StopMatcher(std::vector<std::string> stops);

  std::vector<std::string> stops_;
  size_t longest_ = 0;
  std::string text_;
  bool stopped_ = false;
  int matched_ = -1;
};

}  // namespace banyan::model

#endif  // BANYAN_MODEL_SAMPLING_STOP_MATCHER_H_

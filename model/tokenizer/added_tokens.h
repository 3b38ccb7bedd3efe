// AddedTokenMatcher: finds the text of added/special tokens in input text the
// way Hugging Face tokenizers does by default: leftmost match, the longest
// token when several start at the same place, with the lstrip/rstrip options
// (absorbing whitespace to the token's left/right).
// Thread-safe after construction (const).
#ifndef BANYAN_MODEL_TOKENIZER_ADDED_TOKENS_H_
#define BANYAN_MODEL_TOKENIZER_ADDED_TOKENS_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace banyan::model {

struct AddedToken {
  std::string content;
  int32_t id = 0;
  bool special = true;
  bool lstrip = false;
  bool rstrip = false;
};

// A piece of input: plain text [begin, end) or a matched token.
struct TextSegment {
  size_t begin = 0;
  size_t end = 0;
  int32_t token = -1;  // >= 0: an added token
};

class AddedTokenMatcher {
 public:
  AddedTokenMatcher() = default;
  explicit AddedTokenMatcher(std::vector<AddedToken> tokens);
  // Splits `text` into plain segments and token matches, in order. Empty
  // plain segments are omitted.
  std::vector<TextSegment> Split(std::string_view text) const;
  bool empty() const { return tokens_.empty(); }

 private:
  std::vector<AddedToken> tokens_;
  std::vector<std::vector<int>> by_first_byte_;  // indices, longest first
};

}  // namespace banyan::model

#endif  // BANYAN_MODEL_TOKENIZER_ADDED_TOKENS_H_

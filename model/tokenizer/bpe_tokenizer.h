// Byte-level BPE (GPT-2 family: Llama 3, Qwen2, SmolLM2, GPT-2): text ->
// optional NFC -> added-token split -> pre-tokenizer pieces -> bytes mapped
// to GPT-2's printable alphabet -> BPE merges by rank -> ids.
//
// Built from tokenizer.json (hf_tokenizer_json.h) or a GGUF "gpt2" vocabulary
// (gguf_tokenizer.h). Thread-safe (const after Create).
#ifndef BANYAN_MODEL_TOKENIZER_BPE_TOKENIZER_H_
#define BANYAN_MODEL_TOKENIZER_BPE_TOKENIZER_H_

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "model/tokenizer/added_tokens.h"
#include "model/tokenizer/pretokenizer.h"
#include "model/tokenizer/tokenizer.h"

namespace banyan::model {

struct BpeSpec {
  // Vocabulary text per id (byte-level alphabet for ordinary tokens; added
  // tokens as their plain content). Ids without a token may be empty.
  std::vector<std::string> vocab;
  // Merges in rank order, each a pair of vocabulary strings.
  std::vector<std::pair<std::string, std::string>> merges;
  std::vector<AddedToken> added_tokens;
  PreTokenizerKind pre_tokenizer = PreTokenizerKind::kGpt2;
  bool nfc = false;
  bool ignore_merges = false;  // a piece that is a whole token is not merged
  int32_t unk_id = -1;         // for characters outside the vocabulary
  std::vector<int32_t> prefix_ids;  // added by Encode(add_special_tokens)
  int32_t bos_id = -1;
  int32_t eos_id = -1;
};

class BpeTokenizer final : public Tokenizer {
 public:
  // kInvalidArgument when a merge names an unknown token or
  // an added token's id is out of range.
  static absl::StatusOr<std::unique_ptr<BpeTokenizer>> Create(BpeSpec spec);

  absl::StatusOr<std::vector<int32_t>> Encode(std::string_view text,
                                              bool add_special_tokens = false) const override;

 private:
  BpeTokenizer() = default;
  void EncodeWord(std::string_view mapped, std::vector<int32_t>* out) const;

  struct Merge {
    int32_t rank;
    int32_t result;
  };
  absl::flat_hash_map<uint64_t, Merge> merges_;
  absl::flat_hash_map<std::string, int32_t> word_to_id_;  // ordinary vocabulary only
  AddedTokenMatcher added_;
  PreTokenizerKind pre_ = PreTokenizerKind::kGpt2;
  bool nfc_ = false;
  bool ignore_merges_ = false;
  int32_t unk_id_ = -1;
  std::vector<int32_t> prefix_ids_;
};

}  // namespace banyan::model

#endif  // BANYAN_MODEL_TOKENIZER_BPE_TOKENIZER_H_

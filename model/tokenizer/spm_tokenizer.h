// SentencePiece-style BPE over a scored vocabulary (GGUF tokenizer.ggml.model
// "llama": Llama 2, Mistral v0.1, TinyLlama). Spaces become U+2581 "▁", a "▁"
// is prepended to each text run that starts the input or follows a special
// token (add_space_prefix), adjacent symbols merge greedily by the score of
// the merged piece (highest first, leftmost on ties), and characters outside
// the vocabulary fall back to <0xXX> byte tokens.
// Thread-safe (const after Create).
#ifndef BANYAN_MODEL_TOKENIZER_SPM_TOKENIZER_H_
#define BANYAN_MODEL_TOKENIZER_SPM_TOKENIZER_H_

#include <array>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "model/tokenizer/added_tokens.h"
#include "model/tokenizer/tokenizer.h"

namespace banyan::model {

// GGUF token types (tokenizer.ggml.token_type).
enum class SpmTokenType : int32_t {
  kNormal = 1, kUnknown = 2, kControl = 3, kUserDefined = 4, kUnused = 5, kByte = 6,
};

struct SpmSpec {
  std::vector<std::string> vocab;
  std::vector<float> scores;
  std::vector<int32_t> types;  // SpmTokenType values; empty: all normal
  bool add_space_prefix = true;
  bool add_bos = true;
  int32_t bos_id = -1;
  int32_t eos_id = -1;
  int32_t unk_id = -1;
};

class SpmTokenizer final : public Tokenizer {
 public:
  // kInvalidArgument when sizes disagree or ids are out of range.
  static absl::StatusOr<std::unique_ptr<SpmTokenizer>> Create(SpmSpec spec);

  absl::StatusOr<std::vector<int32_t>> Encode(std::string_view text,
                                              bool add_special_tokens = false) const override;

 private:
  SpmTokenizer() = default;
  void EncodeRun(const std::string& text, std::vector<int32_t>* out) const;
  void Resegment(std::string_view piece, std::vector<int32_t>* out) const;

  std::vector<float> scores_;
  std::array<int32_t, 256> byte_ids_{};
  AddedTokenMatcher added_;
  absl::flat_hash_map<std::string, int32_t> piece_to_id_;  // ordinary pieces
  bool add_space_prefix_ = true;
  bool add_bos_ = true;
  int32_t unk_id_ = -1;
};

}  // namespace banyan::model

#endif  // BANYAN_MODEL_TOKENIZER_SPM_TOKENIZER_H_

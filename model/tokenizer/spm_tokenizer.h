// SentencePiece-style BPE over a scored vocabulary (GGUF tokenizer.ggml.model
// "llama": Llama 2, Mistral v0.1, TinyLlama). Spaces become U+2581 "▁", a "▁"
// is prepended to each text run that starts the input or follows a special
// token (add_space_prefix), adjacent symbols merge greedily by the score of
// the merged piece (highest first, leftmost on ties), and characters outside
// the vocabulary fall back to <0xXX> byte tokens.
//
// The same class runs Hugging Face tokenizer.json BPE with byte_fallback
// (Llama 2 / Mistral HF directories; hf_tokenizer_json.cc): then symbols
// start as the text's characters (a character outside the vocabulary as its
// <0xXX> byte tokens, or <unk>), merge only as the merges list allows, lowest
// rank first (leftmost on ties), and the "▁" prefix follows the file's
// normalizer or Metaspace pre-tokenizer (SpacePrefix).
// Thread-safe (const after Create).
#ifndef BANYAN_MODEL_TOKENIZER_SPM_TOKENIZER_H_
#define BANYAN_MODEL_TOKENIZER_SPM_TOKENIZER_H_

#include <array>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "model/tokenizer/added_tokens.h"
#include "model/tokenizer/tokenizer.h"

namespace banyan::model {

// GGUF token types (tokenizer.ggml.token_type).
enum class SpmTokenType : int32_t {
  kNormal = 1, kUnknown = 2, kControl = 3, kUserDefined = 4, kUnused = 5, kByte = 6,
};

// When a text run (the text between added tokens) gets a "▁" prefix.
enum class SpacePrefix {
  kEveryRun,             // SentencePiece's dummy prefix; tokenizer.json Prepend("▁")
  kEveryRunUnlessSpace,  // Metaspace prepend_scheme "always": unless it starts with a space
  kFirstRunUnlessSpace,  // Metaspace prepend_scheme "first": only a run at the input's start
};

struct SpmSpec {
  std::vector<std::string> vocab;
  std::vector<float> scores;
  std::vector<int32_t> types;  // SpmTokenType values; empty: all normal
  bool add_space_prefix = true;
  SpacePrefix space_prefix = SpacePrefix::kEveryRun;  // with add_space_prefix
  // tokenizer.json BPE: merges in rank order (pairs of vocabulary strings).
  // Empty: merge by score (GGUF). Non-empty: scores are not used.
  std::vector<std::pair<std::string, std::string>> merges;
  bool fuse_unk = true;  // rank mode: consecutive unknown characters give one <unk>
  bool add_bos = true;
  int32_t bos_id = -1;
  int32_t eos_id = -1;
  int32_t unk_id = -1;
};

class SpmTokenizer final : public Tokenizer {
 public:
  // kInvalidArgument when sizes disagree, ids are out of range, or a merge
  // names a token (or makes a piece) outside the vocabulary.
  static absl::StatusOr<std::unique_ptr<SpmTokenizer>> Create(SpmSpec spec);

  absl::StatusOr<std::vector<int32_t>> Encode(std::string_view text,
                                              bool add_special_tokens = false) const override;

 private:
  SpmTokenizer() = default;
  void EncodeRun(const std::string& text, std::vector<int32_t>* out) const;
  void EncodeRunByRank(const std::string& text, std::vector<int32_t>* out) const;
  void Resegment(std::string_view piece, std::vector<int32_t>* out) const;

  std::vector<float> scores_;
  std::array<int32_t, 256> byte_ids_{};
  AddedTokenMatcher added_;
  absl::flat_hash_map<std::string, int32_t> piece_to_id_;  // ordinary pieces
  bool add_space_prefix_ = true;
  SpacePrefix space_prefix_ = SpacePrefix::kEveryRun;
  bool fuse_unk_ = true;
  struct Merge {
    int32_t rank;
    int32_t result;
  };
  absl::flat_hash_map<uint64_t, Merge> merges_;  // (left id << 32 | right id); rank mode
  bool add_bos_ = true;
  int32_t unk_id_ = -1;
};

}  // namespace banyan::model

#endif  // BANYAN_MODEL_TOKENIZER_SPM_TOKENIZER_H_

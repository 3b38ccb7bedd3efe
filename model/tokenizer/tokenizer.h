// Tokenizer: text <-> token ids for a model's vocabulary, and StreamDecoder,
// which turns ids into text one at a time without splitting a UTF-8 character.
//
//   BANYAN_ASSIGN_OR_RETURN(auto tok, LoadTokenizer(path));   // model/loader.h
//   BANYAN_ASSIGN_OR_RETURN(std::vector<int32_t> ids, tok->Encode("Hello"));
//   StreamDecoder stream(*tok);
//   for (int32_t id : ids) { BANYAN_ASSIGN_OR_RETURN(std::string s, stream.Add(id)); print(s); }
//   print(stream.Flush());
//
// Encode recognises the text of added and special tokens (e.g. "<|im_end|>")
// and maps it to the token's id, as Hugging Face tokenizers do by default.
// Decode returns raw bytes: a partial character at the end stays partial.
// Implementations: byte-level BPE (tokenizer.json, GGUF "gpt2") in
// bpe_tokenizer.h and SentencePiece-style BPE (GGUF "llama") in
// spm_tokenizer.h. Thread-safe: all methods are const over immutable tables.
#ifndef BANYAN_MODEL_TOKENIZER_TOKENIZER_H_
#define BANYAN_MODEL_TOKENIZER_TOKENIZER_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace banyan::model {

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  // Token ids of `text` (any bytes; invalid UTF-8 is tokenized byte by byte).
  // With add_special_tokens, adds what the tokenizer adds by default (a BOS
  // for most Llama 2 vocabularies; nothing for Llama 3, Qwen2 and SmolLM2).
  // kInvalidArgument only for text of 2 GiB or more.
  virtual absl::StatusOr<std::vector<int32_t>> Encode(std::string_view text,
                                                      bool add_special_tokens = false) const = 0;

  // Bytes of the tokens, concatenated (special tokens as their text).
  // kOutOfRange when an id is outside [0, vocab_size()).
  absl::StatusOr<std::string> Decode(absl::Span<const int32_t> ids) const;

  // Bytes one token stands for, as it appears after `previous_count` tokens
  // of a decode (SentencePiece drops the leading space of the first piece).
  // kOutOfRange for a bad id.
  absl::StatusOr<std::string> TokenBytes(int32_t id, size_t previous_count = 1) const;

  int32_t vocab_size() const { return static_cast<int32_t>(pieces_.size()); }
  int32_t bos_id() const { return bos_id_; }  // -1 when none
  int32_t eos_id() const { return eos_id_; }  // -1 when none
  // The id of the token whose vocabulary text is exactly `token`, if any.
  std::optional<int32_t> FindToken(std::string_view token) const;
  bool IsSpecial(int32_t id) const;

 protected:
  // Filled by subclasses: decoded bytes and vocabulary text per id.
  std::vector<std::string> pieces_;
  std::vector<bool> special_;
  absl::flat_hash_map<std::string, int32_t> token_to_id_;
  int32_t bos_id_ = -1;
  int32_t eos_id_ = -1;
  bool strip_leading_space_ = false;  // SentencePiece "▁" prefix
};

// Decodes ids one at a time. Add returns the text that became complete,
// holding back the bytes of a UTF-8 character that is not yet finished.
// Bytes that can never form a character are passed through as they are.
// Thread-compatible; borrows the tokenizer, which must outlive it.
class StreamDecoder {
 public:
  explicit StreamDecoder(const Tokenizer& tokenizer) : tokenizer_(tokenizer) {}
  absl::StatusOr<std::string> Add(int32_t id);
  // Whatever is held back (possibly an incomplete character), emptying it.
  std::string Flush();

 private:
  const Tokenizer& tokenizer_;
  std::string pending_;
  size_t count_ = 0;
};

// Length of the longest prefix of `bytes` that does not end inside an
// unfinished UTF-8 sequence (which could still be completed).
size_t CompleteUtf8Prefix(std::string_view bytes);

}  // namespace banyan::model

#endif  // BANYAN_MODEL_TOKENIZER_TOKENIZER_H_

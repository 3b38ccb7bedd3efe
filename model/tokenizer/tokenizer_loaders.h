// Builds Tokenizers from the files models ship them in.
//
// TokenizerFromJson: a Hugging Face tokenizer.json with a byte-level BPE model
// (Llama 3, Qwen2/2.5, SmolLM2, GPT-2 style), optionally with the text of
// tokenizer_config.json (for bos/eos names; may be empty). Supported: NFC
// normalizer (or none), pre-tokenizers Split(GPT-2 / Llama 3 / Qwen2 regex) +
// ByteLevel, ByteLevel(use_regex), Digits(individual) + ByteLevel; merges as
// "a b" strings or ["a", "b"] pairs; ignore_merges; added tokens; a
// TemplateProcessing post-processor's leading special tokens. Also BPE with
// byte_fallback (Llama 2 / Mistral HF directories, run by SpmTokenizer):
// the normalizer Prepend("▁") + Replace(" ", "▁") without a pre-tokenizer,
// or a Metaspace pre-tokenizer (prepend_scheme first / always / never,
// split false); <0xNN> byte tokens; fuse_unk.
// TokenizerFromGguf: tokenizer.ggml.model "gpt2" (byte-level BPE with
// tokenizer.ggml.pre naming the regex) or "llama" (SentencePiece BPE).
//
// Errors: kInvalidArgument for malformed JSON or metadata (missing vocab,
// repeated tokens, merges naming unknown tokens); kUnimplemented for other
// models (WordPiece, Unigram), normalizers or pre-tokenizers (for
// byte-fallback BPE: anything but the two above, e.g. Metaspace with split).
// Thread-safe (pure functions).
#ifndef BANYAN_MODEL_TOKENIZER_TOKENIZER_LOADERS_H_
#define BANYAN_MODEL_TOKENIZER_TOKENIZER_LOADERS_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "model/gguf/gguf_file.h"
#include "model/tokenizer/tokenizer.h"

namespace banyan::model {

absl::StatusOr<std::unique_ptr<Tokenizer>> TokenizerFromJson(const std::string& tokenizer_json,
                                                             const std::string& tokenizer_config_json);

absl::StatusOr<std::unique_ptr<Tokenizer>> TokenizerFromGguf(const GgufFile& gguf);

}  // namespace banyan::model

#endif  // BANYAN_MODEL_TOKENIZER_TOKENIZER_LOADERS_H_

// Pre-tokenizers: split text into the pieces BPE runs on, reproducing the
// Split regexes of GPT-2, Llama 3 and Qwen2 (leftmost-first alternation, as
// the HF tokenizers library's regex engine matches them) without a regex
// engine. Every byte of the input lands in exactly one piece, in order.
//
//   GPT-2:   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
//   Llama 3: (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|
//            ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
//   Qwen2:   as Llama 3 with \p{N} (one digit) instead of \p{N}{1,3}
//   SmolLM:  each \p{N} alone first (Digits(individual_digits)), then GPT-2
// Thread-safe (pure functions).
#ifndef BANYAN_MODEL_TOKENIZER_PRETOKENIZER_H_
#define BANYAN_MODEL_TOKENIZER_PRETOKENIZER_H_

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace banyan::model {

enum class PreTokenizerKind { kNone, kGpt2, kLlama3, kQwen2, kSmolLm };

// The HF Split regex strings of the kinds above (as written in tokenizer.json).
extern const char kGpt2Pattern[];
extern const char kLlama3Pattern[];
extern const char kQwen2Pattern[];

// Which kind a tokenizer.json Split regex is; kUnimplemented for others.
absl::StatusOr<PreTokenizerKind> PreTokenizerFromPattern(std::string_view pattern);
// Which kind a GGUF tokenizer.ggml.pre name is; kUnimplemented for others.
absl::StatusOr<PreTokenizerKind> PreTokenizerFromGgufName(std::string_view name);

// Byte ranges [begin, end) of the pieces of `text`.
std::vector<std::pair<size_t, size_t>> PreTokenize(PreTokenizerKind kind, std::string_view text);

}  // namespace banyan::model

#endif  // BANYAN_MODEL_TOKENIZER_PRETOKENIZER_H_

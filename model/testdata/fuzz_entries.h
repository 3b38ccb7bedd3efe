// Fuzz entry functions for the model file parsers and the tokenizers. The
// libFuzzer targets (fuzz_*.cc, built with -DBANYAN_FUZZ=ON and clang) call
// them, and model/fuzz_replay_test.cc replays them over truncated, mutated
// and random inputs in every CI run. Each returns 0; a violated invariant
// (e.g. decode(encode(x)) != x) traps.
#ifndef BANYAN_MODEL_TESTDATA_FUZZ_ENTRIES_H_
#define BANYAN_MODEL_TESTDATA_FUZZ_ENTRIES_H_

#include <cstddef>
#include <cstdint>

namespace banyan::model::fuzz {

// GgufFile::Parse, then config, weights (when small), tokenizer, chat format.
int FuzzGguf(const uint8_t* data, size_t size);

// SafetensorsFile::Parse + conversion, and the same bytes as config.json,
// tokenizer.json and a chat template.
int FuzzSafetensors(const uint8_t* data, size_t size);

// The bytes as text through the Llama 3, Qwen2.5 (tokenizer.json) and
// llama-spm (GGUF) tokenizers: encode, decode, stream-decode; byte-level
// tokenizers without a normalizer must round-trip exactly. Loads the
// tokenizers from BANYAN_ASSETS_DIR on first use.
int FuzzTokenizer(const uint8_t* data, size_t size);

}  // namespace banyan::model::fuzz

#endif  // BANYAN_MODEL_TESTDATA_FUZZ_ENTRIES_H_

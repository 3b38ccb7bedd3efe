// Test-only: tiny random Llama/Qwen2 models written as a GGUF file (with
// llama.cpp's Q/K row permutation applied, as its converter does) and as a
// Hugging Face safetensors directory, from the same HF-layout weights.
#ifndef BANYAN_MODEL_TESTDATA_TINY_MODELS_H_
#define BANYAN_MODEL_TESTDATA_TINY_MODELS_H_

#include <map>
#include <string>
#include <vector>

#include "model/model_config.h"

namespace banyan::model::testing {

struct TinyModel {
  ModelConfig config;
  // HF name -> (shape, values), HF layout.
  std::map<std::string, std::pair<std::vector<int64_t>, std::vector<float>>> tensors;
};

// A random model: hidden 16, 4 query heads (head_dim 4... or 8), `kv_heads`
// KV heads, 2 layers, vocab 64; Qwen2 gets q/k/v biases.
TinyModel MakeTinyModel(Architecture arch, int kv_heads, bool tied, uint64_t seed);

// llama.cpp's convert permutation of Q/K rows (HF -> GGUF order).
std::vector<float> PermuteForGguf(const std::vector<float>& w, int64_t heads, int64_t cols);

// The model as GGUF bytes (all tensors F32), with a small gpt2 vocabulary.
std::string TinyModelGguf(const TinyModel& m);

// Writes config.json and model.safetensors (or `shards` shards with an
// index) under `dir` (created). Tensors are stored as `dtype` (F32/F16/BF16).
void WriteTinyModelDirectory(const TinyModel& m, const std::string& dir, int shards,
                             const std::string& dtype);

}  // namespace banyan::model::testing

#endif  // BANYAN_MODEL_TESTDATA_TINY_MODELS_H_

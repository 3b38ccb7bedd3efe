// MakeRandomWeights: a randomly initialized model of any config, for tests and
// benchmarks (the CPU backend's tests, cross-backend tests, the CPU bench).
// Values are scaled so activations stay O(1) through the layers: embeddings
// N(0, 1), linears N(0, 1/in_features), norm weights 1 + N(0, 0.1^2), biases
// N(0, 0.1^2). Deterministic in (config, seed). Thread-safe (pure).
#ifndef BANYAN_MODEL_CPU_RANDOM_WEIGHTS_H_
#define BANYAN_MODEL_CPU_RANDOM_WEIGHTS_H_

#include <cstdint>

#include "model/model_weights.h"

namespace banyan::model {

// Every tensor model_weights.h names for `config` (lm_head only when untied,
// q/k/v biases when config.attention_bias or the architecture is Qwen2).
// REQUIRES: positive sizes in config.
ModelWeights MakeRandomWeights(const ModelConfig& config, uint64_t seed);

// The "~1B Llama-shaped model" of the issues' end-to-end benchmarks: hidden
// 2048, 16 layers, 32 query / 8 KV heads of 64, SwiGLU 8192, vocab 32000,
// untied, RoPE theta 500000, positions up to 32768. One definition, so every
// benchmark (model_cuda_bench, engine_bench) times the same shape.
ModelConfig Llama1bShapedConfig();

}  // namespace banyan::model

#endif  // BANYAN_MODEL_CPU_RANDOM_WEIGHTS_H_

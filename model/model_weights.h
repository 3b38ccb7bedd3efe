// ModelWeights: every tensor of a loaded model, dequantized, under Hugging
// Face names, plus its config. The contract between the loaders (GGUF,
// safetensors) and the forward passes (CPU, CUDA).
//
// Names and shapes (row-major, [out_features, in_features] for linears):
//   model.embed_tokens.weight                      [vocab, hidden]
//   model.layers.{i}.input_layernorm.weight        [hidden]
//   model.layers.{i}.self_attn.{q,k,v,o}_proj.weight
//       q: [q_heads*head_dim, hidden]  k, v: [kv_heads*head_dim, hidden]
//       o: [hidden, q_heads*head_dim]
//   model.layers.{i}.self_attn.{q,k,v}_proj.bias   (Qwen2 only)
//   model.layers.{i}.post_attention_layernorm.weight [hidden]
//   model.layers.{i}.mlp.{gate,up}_proj.weight     [intermediate, hidden]
//   model.layers.{i}.mlp.down_proj.weight          [hidden, intermediate]
//   model.norm.weight                              [hidden]
//   lm_head.weight                                 [vocab, hidden] (absent when tied)
//
// RoPE convention: Hugging Face's rotate_half (the first and second halves of
// each head are the pairs). GGUF stores llama Q/K rows permuted for
// interleaved pairs; the GGUF loader undoes that permutation, so every
// backend applies one convention.
// Thread-compatible; move-only (tensors can be hundreds of MB).
#ifndef BANYAN_MODEL_MODEL_WEIGHTS_H_
#define BANYAN_MODEL_MODEL_WEIGHTS_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "model/model_config.h"

namespace banyan::model {

// A dequantized fp32 host tensor.
struct HostTensor {
  std::vector<int64_t> shape;
  std::vector<float> data;  // row-major, size == product of shape
  int64_t NumElements() const {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
  }
};

struct ModelWeights {
  ModelConfig config;
  std::map<std::string, HostTensor> tensors;

  ModelWeights() = default;
  ModelWeights(ModelWeights&&) = default;
  ModelWeights& operator=(ModelWeights&&) = default;
  ModelWeights(const ModelWeights&) = delete;
  ModelWeights& operator=(const ModelWeights&) = delete;
};

}  // namespace banyan::model

#endif  // BANYAN_MODEL_MODEL_WEIGHTS_H_

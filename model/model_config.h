// ModelConfig: the architecture hyper-parameters of a Llama-family model, as
// read from a GGUF file's metadata or a Hugging Face config.json. The loaders
// fill it; the forward passes read it. Thread-compatible value type.
#ifndef BANYAN_MODEL_MODEL_CONFIG_H_
#define BANYAN_MODEL_MODEL_CONFIG_H_

#include <cstdint>
#include <string>

namespace banyan::model {

enum class Architecture : uint8_t { kLlama = 0, kQwen2 = 1, kMistral = 2 };

// RoPE frequency scaling. kNone: plain theta^(-2i/d). kLlama3: Llama 3.1's
// piecewise wavelength scaling (factor, low/high frequency factors, original
// context length).
struct RopeScaling {
  enum class Type : uint8_t { kNone = 0, kLlama3 = 1, kLinear = 2 };
  Type type = Type::kNone;
  float factor = 1.0f;
  float low_freq_factor = 1.0f;
  float high_freq_factor = 4.0f;
  int32_t original_max_position = 8192;
};

struct ModelConfig {
  Architecture architecture = Architecture::kLlama;
  std::string name;  // e.g. "SmolLM2-135M-Instruct", for logs and `banyan info`
  int32_t vocab_size = 0;
  int32_t hidden_size = 0;        // d_model
  int32_t intermediate_size = 0;  // SwiGLU inner width
  int32_t num_layers = 0;
  int32_t num_q_heads = 0;
  int32_t num_kv_heads = 0;
  int32_t head_dim = 0;  // usually hidden_size / num_q_heads
  float rms_norm_eps = 1e-5f;
  float rope_theta = 10000.0f;
  RopeScaling rope_scaling;
  int32_t max_position = 2048;
  bool tie_word_embeddings = false;
  bool attention_bias = false;  // Qwen2: bias on q, k, v projections
  int32_t bos_token_id = -1;    // -1: none
  int32_t eos_token_id = -1;
};

}  // namespace banyan::model

#endif  // BANYAN_MODEL_MODEL_CONFIG_H_

#include "model/cpu/random_weights.h"

#include <cmath>
#include <string>

#include "absl/strings/str_cat.h"
#include "sdk/base/rng.h"

namespace banyan::model {
namespace {

void Add(ModelWeights& w, Rng& rng, const std::string& name, std::vector<int64_t> shape, float mean,
         float stddev) {
  HostTensor t;
  t.shape = std::move(shape);
  t.data.resize(t.NumElements());
  for (float& x : t.data) x = mean + stddev * rng.Normal();
  w.tensors[name] = std::move(t);
}

}  // namespace

ModelWeights MakeRandomWeights(const ModelConfig& c, uint64_t seed) {
  ModelWeights w;
  w.config = c;
  Rng rng(seed);
  const int64_t H = c.hidden_size, I = c.intermediate_size;
  const int64_t q_dim = int64_t{c.num_q_heads} * c.head_dim, kv_dim = int64_t{c.num_kv_heads} * c.head_dim;
  auto inv_sqrt = [](int64_t n) { return static_cast<float>(1.0 / std::sqrt(static_cast<double>(n))); };
  const bool bias = c.attention_bias || c.architecture == Architecture::kQwen2;
  Add(w, rng, "model.embed_tokens.weight", {c.vocab_size, H}, 0.0f, 1.0f);
  for (int32_t i = 0; i < c.num_layers; ++i) {
    const std::string p = absl::StrCat("model.layers.", i, ".");
    Add(w, rng, p + "input_layernorm.weight", {H}, 1.0f, 0.1f);
    Add(w, rng, p + "self_attn.q_proj.weight", {q_dim, H}, 0.0f, inv_sqrt(H));
    Add(w, rng, p + "self_attn.k_proj.weight", {kv_dim, H}, 0.0f, inv_sqrt(H));
    Add(w, rng, p + "self_attn.v_proj.weight", {kv_dim, H}, 0.0f, inv_sqrt(H));
    Add(w, rng, p + "self_attn.o_proj.weight", {H, q_dim}, 0.0f, inv_sqrt(q_dim));
    if (bias) {
      Add(w, rng, p + "self_attn.q_proj.bias", {q_dim}, 0.0f, 0.1f);
      Add(w, rng, p + "self_attn.k_proj.bias", {kv_dim}, 0.0f, 0.1f);
      Add(w, rng, p + "self_attn.v_proj.bias", {kv_dim}, 0.0f, 0.1f);
    }
    Add(w, rng, p + "post_attention_layernorm.weight", {H}, 1.0f, 0.1f);
    Add(w, rng, p + "mlp.gate_proj.weight", {I, H}, 0.0f, inv_sqrt(H));
    Add(w, rng, p + "mlp.up_proj.weight", {I, H}, 0.0f, inv_sqrt(H));
    Add(w, rng, p + "mlp.down_proj.weight", {H, I}, 0.0f, inv_sqrt(I));
  }
  Add(w, rng, "model.norm.weight", {H}, 1.0f, 0.1f);
  if (!c.tie_word_embeddings) Add(w, rng, "lm_head.weight", {c.vocab_size, H}, 0.0f, inv_sqrt(H));
  return w;
}

ModelConfig Llama1bShapedConfig() {
  ModelConfig c;
  c.architecture = Architecture::kLlama;
  c.name = "random-llama-1b";
  c.vocab_size = 32000;
  c.hidden_size = 2048;
  c.intermediate_size = 8192;
  c.num_layers = 16;
  c.num_q_heads = 32;
  c.num_kv_heads = 8;
  c.head_dim = 64;
  c.rms_norm_eps = 1e-5f;
  c.rope_theta = 500000.0f;
  c.max_position = 32768;
  c.tie_word_embeddings = false;
  return c;
}

}  // namespace banyan::model

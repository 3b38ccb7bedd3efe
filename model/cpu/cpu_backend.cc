#include "model/cpu/cpu_backend.h"

#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "attention/attention_args.h"
#include "attention/cpu/cpu_attention.h"
#include "banyan/status_macros.h"
#include "model/ops/cpu_ops.h"
#include "model/ops/thread_pool.h"
#include "sdk/base/half.h"

namespace banyan::model {
namespace {

struct LayerWeights {
  const float* input_norm = nullptr;
  const float* q = nullptr;
  const float* k = nullptr;
  const float* v = nullptr;
  const float* o = nullptr;
  const float* q_bias = nullptr;  // null without QKV bias
  const float* k_bias = nullptr;
  const float* v_bias = nullptr;
  const float* post_norm = nullptr;
  const float* gate = nullptr;
  const float* up = nullptr;
  const float* down = nullptr;
};

// Finds a tensor and checks its shape.
absl::StatusOr<const float*> Tensor(const ModelWeights& w, const std::string& name,
                                    std::vector<int64_t> shape) {
  auto it = w.tensors.find(name);
  if (it == w.tensors.end()) return absl::NotFoundError("CPU backend: missing tensor " + name);
  const HostTensor& t = it->second;
  if (t.shape != shape || static_cast<int64_t>(t.data.size()) != t.NumElements()) {
    return absl::InvalidArgumentError(absl::StrCat("CPU backend: tensor ", name, " has shape [",
                                                   absl::StrJoin(t.shape, ","), "] (", t.data.size(),
                                                   " values), expected [", absl::StrJoin(shape, ","), "]"));
  }
  return t.data.data();
}

absl::Status CheckConfig(const ModelConfig& c) {
  if (c.vocab_size <= 0 || c.hidden_size <= 0 || c.intermediate_size <= 0 || c.num_layers <= 0 ||
      c.num_q_heads <= 0 || c.num_kv_heads <= 0 || c.head_dim <= 0) {
    return absl::InvalidArgumentError("CPU backend: config has a non-positive size");
  }
  if (c.head_dim % 2 != 0) return absl::InvalidArgumentError("CPU backend: odd head_dim (RoPE needs pairs)");
  if (c.num_q_heads % c.num_kv_heads != 0) {
    return absl::InvalidArgumentError(absl::StrCat("CPU backend: ", c.num_q_heads,
                                                   " query heads not a multiple of ", c.num_kv_heads,
                                                   " KV heads"));
  }
  if (!(c.rms_norm_eps > 0) || !(c.rope_theta > 0)) {
    return absl::InvalidArgumentError("CPU backend: rms_norm_eps and rope_theta must be positive");
  }
  if (c.rope_scaling.type != RopeScaling::Type::kNone && !(c.rope_scaling.factor > 0)) {
    return absl::InvalidArgumentError("CPU backend: RoPE scaling factor must be positive");
  }
  if (c.rope_scaling.type == RopeScaling::Type::kLlama3 &&
      (!(c.rope_scaling.high_freq_factor > c.rope_scaling.low_freq_factor) ||
       !(c.rope_scaling.low_freq_factor > 0) || c.rope_scaling.original_max_position <= 0)) {
    return absl::InvalidArgumentError("CPU backend: invalid llama3 RoPE scaling parameters");
  }
  return absl::OkStatus();
}

class CpuBackend final : public Backend {
 public:
  CpuBackend(std::shared_ptr<const ModelWeights> weights, int num_threads)
      : weights_(std::move(weights)), config_(weights_->config), pool_(num_threads) {}

  absl::Status Init() {
    const ModelWeights& w = *weights_;
    const int64_t H = config_.hidden_size, I = config_.intermediate_size;
    const int64_t q_dim = int64_t{config_.num_q_heads} * config_.head_dim;
    const int64_t kv_dim = int64_t{config_.num_kv_heads} * config_.head_dim;
    const bool bias = config_.attention_bias || config_.architecture == Architecture::kQwen2;
    BANYAN_ASSIGN_OR_RETURN(embed_, Tensor(w, "model.embed_tokens.weight", {config_.vocab_size, H}));
    BANYAN_ASSIGN_OR_RETURN(final_norm_, Tensor(w, "model.norm.weight", {H}));
    if (config_.tie_word_embeddings) {
      lm_head_ = embed_;
    } else {
      BANYAN_ASSIGN_OR_RETURN(lm_head_, Tensor(w, "lm_head.weight", {config_.vocab_size, H}));
    }
    layers_.resize(config_.num_layers);
    for (int32_t i = 0; i < config_.num_layers; ++i) {
      const std::string p = absl::StrCat("model.layers.", i, ".");
      LayerWeights& l = layers_[i];
      BANYAN_ASSIGN_OR_RETURN(l.input_norm, Tensor(w, p + "input_layernorm.weight", {H}));
      BANYAN_ASSIGN_OR_RETURN(l.q, Tensor(w, p + "self_attn.q_proj.weight", {q_dim, H}));
      BANYAN_ASSIGN_OR_RETURN(l.k, Tensor(w, p + "self_attn.k_proj.weight", {kv_dim, H}));
      BANYAN_ASSIGN_OR_RETURN(l.v, Tensor(w, p + "self_attn.v_proj.weight", {kv_dim, H}));
      BANYAN_ASSIGN_OR_RETURN(l.o, Tensor(w, p + "self_attn.o_proj.weight", {H, q_dim}));
      if (bias) {
        BANYAN_ASSIGN_OR_RETURN(l.q_bias, Tensor(w, p + "self_attn.q_proj.bias", {q_dim}));
        BANYAN_ASSIGN_OR_RETURN(l.k_bias, Tensor(w, p + "self_attn.k_proj.bias", {kv_dim}));
        BANYAN_ASSIGN_OR_RETURN(l.v_bias, Tensor(w, p + "self_attn.v_proj.bias", {kv_dim}));
      }
      BANYAN_ASSIGN_OR_RETURN(l.post_norm, Tensor(w, p + "post_attention_layernorm.weight", {H}));
      BANYAN_ASSIGN_OR_RETURN(l.gate, Tensor(w, p + "mlp.gate_proj.weight", {I, H}));
      BANYAN_ASSIGN_OR_RETURN(l.up, Tensor(w, p + "mlp.up_proj.weight", {I, H}));
      BANYAN_ASSIGN_OR_RETURN(l.down, Tensor(w, p + "mlp.down_proj.weight", {H, I}));
    }
    inv_freq_ = ops::RopeInverseFrequencies(config_.head_dim, config_.rope_theta, config_.rope_scaling);
    return absl::OkStatus();
  }

  std::string_view name() const override { return "cpu"; }
  const ModelConfig& config() const override { return config_; }
  MemorySpace kv_memory_space() const override { return MemorySpace::kHost; }

  absl::Status Forward(const ForwardBatch& batch, const KvCache& kv, absl::Span<float> logits) override;

 private:
  // Writes rows' K and V (fp32 [rows][kv_heads][head_dim]) into the pool.
  void WriteKv(const ForwardBatch& batch, const KvCache& kv, int32_t layer, const float* k,
               const float* v) const;

  std::shared_ptr<const ModelWeights> weights_;
  const ModelConfig& config_;
  ops::ThreadPool pool_;
  const float* embed_ = nullptr;
  const float* final_norm_ = nullptr;
  const float* lm_head_ = nullptr;
  std::vector<LayerWeights> layers_;
  std::vector<float> inv_freq_;
  // Scratch, grown to the largest batch seen.
  std::vector<float> x_, h_, q_, k_, v_, attn_, gate_, up_;
};

template <typename T>
void StoreRow(const float* src, int32_t n, void* dst) {
  T* out = static_cast<T*>(dst);
  for (int32_t i = 0; i < n; ++i) out[i] = T(src[i]);
}

void CpuBackend::WriteKv(const ForwardBatch& batch, const KvCache& kv, int32_t layer, const float* k,
                         const float* v) const {
  const attention::KvLayout& l = kv.layout;
  const int32_t D = l.head_dim;
  const size_t es = DTypeSize(kv.dtype);
  char* base = static_cast<char*>(kv.data);
  for (size_t r = 0; r < batch.tokens.size(); ++r) {
    for (int32_t head = 0; head < l.num_kv_heads; ++head) {
      for (int32_t plane = 0; plane < 2; ++plane) {
        const float* src = (plane == 0 ? k : v) + (r * l.num_kv_heads + head) * D;
        void* dst = base + es * l.Offset(layer, plane, batch.kv_pages[r], head, batch.kv_slots[r]);
        switch (kv.dtype) {
          case DType::kF32: StoreRow<float>(src, D, dst); break;
          case DType::kBf16: StoreRow<Bf16>(src, D, dst); break;
          case DType::kF16: StoreRow<Fp16>(src, D, dst); break;
        }
      }
    }
  }
}

absl::Status CpuBackend::Forward(const ForwardBatch& batch, const KvCache& kv, absl::Span<float> logits) {
  BANYAN_RETURN_IF_ERROR(ValidateForwardBatch(config_, batch, kv, logits.size()));
  const int64_t n = static_cast<int64_t>(batch.tokens.size());
  if (n == 0) return absl::OkStatus();
  const int64_t H = config_.hidden_size, I = config_.intermediate_size, D = config_.head_dim;
  const int64_t q_dim = config_.num_q_heads * D, kv_dim = config_.num_kv_heads * D;
  x_.resize(n * H);
  h_.resize(n * H);
  q_.resize(n * q_dim);
  attn_.resize(n * q_dim);
  k_.resize(n * kv_dim);
  v_.resize(n * kv_dim);
  gate_.resize(n * I);
  up_.resize(n * I);
  ops::ThreadPool* pool = &pool_;

  attention::AttentionArgs args;
  args.plan = batch.plan;
  args.layout = kv.layout;
  args.kv_dtype = kv.dtype;
  args.kv_pool = kv.data;
  args.q = q_.data();
  args.q_dtype = DType::kF32;
  args.num_q_heads = config_.num_q_heads;
  args.scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(D)));
  args.out = attn_.data();
  args.out_dtype = DType::kF32;

  // Attention's own checks (e.g. a head_dim its kernels lack) before anything
  // is written, so a failing call leaves the pool and logits untouched.
  BANYAN_RETURN_IF_ERROR(attention::ValidateAttentionArgs(args));

  ops::EmbeddingLookup(embed_, batch.tokens.data(), n, H, x_.data());
  for (int32_t layer = 0; layer < config_.num_layers; ++layer) {
    const LayerWeights& w = layers_[layer];
    ops::RmsNorm(x_.data(), w.input_norm, n, H, config_.rms_norm_eps, h_.data());
    ops::MatMul(h_.data(), w.q, w.q_bias, n, H, q_dim, q_.data(), pool);
    ops::MatMul(h_.data(), w.k, w.k_bias, n, H, kv_dim, k_.data(), pool);
    ops::MatMul(h_.data(), w.v, w.v_bias, n, H, kv_dim, v_.data(), pool);
    ops::ApplyRope(q_.data(), n, config_.num_q_heads, config_.head_dim, batch.positions.data(), inv_freq_);
    ops::ApplyRope(k_.data(), n, config_.num_kv_heads, config_.head_dim, batch.positions.data(), inv_freq_);
    WriteKv(batch, kv, layer, k_.data(), v_.data());
    args.layer = layer;
    BANYAN_RETURN_IF_ERROR(attention::CpuAttention(args, pool_.num_threads()));
    ops::MatMul(attn_.data(), w.o, nullptr, n, q_dim, H, h_.data(), pool);
    ops::AddInPlace(x_.data(), h_.data(), n * H);
    ops::RmsNorm(x_.data(), w.post_norm, n, H, config_.rms_norm_eps, h_.data());
    ops::MatMul(h_.data(), w.gate, nullptr, n, H, I, gate_.data(), pool);
    ops::MatMul(h_.data(), w.up, nullptr, n, H, I, up_.data(), pool);
    ops::SwiGlu(gate_.data(), up_.data(), n * I, gate_.data());
    ops::MatMul(gate_.data(), w.down, nullptr, n, I, H, h_.data(), pool);
    ops::AddInPlace(x_.data(), h_.data(), n * H);
  }
  // Final norm and LM head for the requested rows only.
  const int64_t m = static_cast<int64_t>(batch.logit_rows.size());
  if (m == 0) return absl::OkStatus();
  std::vector<float> picked(m * H);
  for (int64_t i = 0; i < m; ++i) {
    std::copy_n(x_.data() + batch.logit_rows[i] * H, H, picked.data() + i * H);
  }
  ops::RmsNorm(picked.data(), final_norm_, m, H, config_.rms_norm_eps, picked.data());
  ops::MatMul(picked.data(), lm_head_, nullptr, m, H, config_.vocab_size, logits.data(), pool);
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<Backend>> CreateCpuBackend(std::shared_ptr<const ModelWeights> weights,
                                                          const CpuBackendOptions& options) {
  if (weights == nullptr) return absl::InvalidArgumentError("CPU backend: null weights");
  BANYAN_RETURN_IF_ERROR(CheckConfig(weights->config));
  auto backend = std::make_unique<CpuBackend>(std::move(weights), options.num_threads);
  BANYAN_RETURN_IF_ERROR(backend->Init());
  return std::unique_ptr<Backend>(std::move(backend));
}

}  // namespace banyan::model

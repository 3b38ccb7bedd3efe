#include "model/cuda/device_weights.h"

#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "banyan/status_macros.h"
#include "sdk/base/half.h"
#include "sdk/gpu/cuda_status.h"

namespace banyan::model::cuda {
namespace {

// Finds a tensor and checks its shape.
absl::StatusOr<const HostTensor*> Find(const ModelWeights& w, const std::string& name,
                                       const std::vector<int64_t>& shape) {
  auto it = w.tensors.find(name);
  if (it == w.tensors.end()) return absl::NotFoundError("CUDA backend: missing tensor " + name);
  const HostTensor& t = it->second;
  if (t.shape != shape || static_cast<int64_t>(t.data.size()) != t.NumElements()) {
    return absl::InvalidArgumentError(absl::StrCat("CUDA backend: tensor ", name, " has shape [",
                                                   absl::StrJoin(t.shape, ","), "] (", t.data.size(),
                                                   " values), expected [", absl::StrJoin(shape, ","), "]"));
  }
  return &t;
}

// Converts the tensors to bf16, concatenated in order (rows of the fused
// matrix), and uploads them into one buffer; with `lo` set, also the
// residuals bf16(x - bf16(x)) into *lo (the two parts' sum carries x to ~16
// significant bits). Waits for the copies, so the host staging vector may
// die on return.
absl::StatusOr<gpu::DeviceBuffer> UploadBf16(const std::vector<const HostTensor*>& parts,
                                             cudaStream_t stream, size_t& bytes,
                                             gpu::DeviceBuffer* lo = nullptr) {
  size_t n = 0;
  for (const HostTensor* t : parts) n += t->data.size();
  std::vector<Bf16> host(n);
  size_t at = 0;
  for (const HostTensor* t : parts) {
    for (float x : t->data) host[at++] = Bf16(x);
  }
  BANYAN_ASSIGN_OR_RETURN(gpu::DeviceBuffer buf, gpu::DeviceBuffer::Allocate(n * sizeof(Bf16)));
  BANYAN_RETURN_IF_ERROR(buf.CopyFromHost(host.data(), n * sizeof(Bf16), stream));
  BANYAN_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
  bytes += buf.size();
  if (lo != nullptr) {
    at = 0;
    for (const HostTensor* t : parts) {
      for (float x : t->data) {
        const float hi = static_cast<float>(host[at]);
        host[at] = Bf16(std::isfinite(hi) ? x - hi : 0.0f);  // the difference is exact in fp32
        ++at;
      }
    }
    BANYAN_ASSIGN_OR_RETURN(*lo, gpu::DeviceBuffer::Allocate(n * sizeof(Bf16)));
    BANYAN_RETURN_IF_ERROR(lo->CopyFromHost(host.data(), n * sizeof(Bf16), stream));
    BANYAN_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
    bytes += lo->size();
  }
  return buf;
}

// Uploads the tensors as they are (fp32), concatenated: the norm weights and
// biases, read once per row by the row kernels, keep full precision.
absl::StatusOr<gpu::DeviceBuffer> UploadF32(const std::vector<const HostTensor*>& parts,
                                            cudaStream_t stream, size_t& bytes) {
  std::vector<float> host;
  for (const HostTensor* t : parts) host.insert(host.end(), t->data.begin(), t->data.end());
  BANYAN_ASSIGN_OR_RETURN(gpu::DeviceBuffer buf, gpu::DeviceBuffer::Allocate(host.size() * sizeof(float)));
  BANYAN_RETURN_IF_ERROR(buf.CopyFromHost(host.data(), host.size() * sizeof(float), stream));
  BANYAN_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
  bytes += buf.size();
  return buf;
}

}  // namespace

absl::StatusOr<DeviceWeights> DeviceWeights::Upload(const ModelWeights& w, cudaStream_t stream, bool split) {
  const ModelConfig& c = w.config;
  const int64_t H = c.hidden_size, I = c.intermediate_size, V = c.vocab_size;
  const int64_t q_dim = int64_t{c.num_q_heads} * c.head_dim;
  const int64_t kv_dim = int64_t{c.num_kv_heads} * c.head_dim;
  const bool bias = c.attention_bias || c.architecture == Architecture::kQwen2;
  DeviceWeights d;
  size_t& bytes = d.bytes;

  BANYAN_ASSIGN_OR_RETURN(const HostTensor* embed, Find(w, "model.embed_tokens.weight", {V, H}));
  BANYAN_ASSIGN_OR_RETURN(d.embed, UploadBf16({embed}, stream, bytes, split ? &d.embed_lo : nullptr));
  BANYAN_ASSIGN_OR_RETURN(const HostTensor* norm, Find(w, "model.norm.weight", {H}));
  BANYAN_ASSIGN_OR_RETURN(d.final_norm, UploadF32({norm}, stream, bytes));
  if (!c.tie_word_embeddings) {
    BANYAN_ASSIGN_OR_RETURN(const HostTensor* head, Find(w, "lm_head.weight", {V, H}));
    BANYAN_ASSIGN_OR_RETURN(d.lm_head, UploadBf16({head}, stream, bytes, split ? &d.lm_head_lo : nullptr));
  }
  d.layers.resize(static_cast<size_t>(c.num_layers));
  for (int32_t i = 0; i < c.num_layers; ++i) {
    const std::string p = absl::StrCat("model.layers.", i, ".");
    DeviceLayer& l = d.layers[static_cast<size_t>(i)];
    BANYAN_ASSIGN_OR_RETURN(const HostTensor* in_norm, Find(w, p + "input_layernorm.weight", {H}));
    BANYAN_ASSIGN_OR_RETURN(const HostTensor* q, Find(w, p + "self_attn.q_proj.weight", {q_dim, H}));
    BANYAN_ASSIGN_OR_RETURN(const HostTensor* k, Find(w, p + "self_attn.k_proj.weight", {kv_dim, H}));
    BANYAN_ASSIGN_OR_RETURN(const HostTensor* v, Find(w, p + "self_attn.v_proj.weight", {kv_dim, H}));
    BANYAN_ASSIGN_OR_RETURN(const HostTensor* o, Find(w, p + "self_attn.o_proj.weight", {H, q_dim}));
    BANYAN_ASSIGN_OR_RETURN(const HostTensor* post, Find(w, p + "post_attention_layernorm.weight", {H}));
    BANYAN_ASSIGN_OR_RETURN(const HostTensor* gate, Find(w, p + "mlp.gate_proj.weight", {I, H}));
    BANYAN_ASSIGN_OR_RETURN(const HostTensor* up, Find(w, p + "mlp.up_proj.weight", {I, H}));
    BANYAN_ASSIGN_OR_RETURN(const HostTensor* down, Find(w, p + "mlp.down_proj.weight", {H, I}));
    BANYAN_ASSIGN_OR_RETURN(l.input_norm, UploadF32({in_norm}, stream, bytes));
    BANYAN_ASSIGN_OR_RETURN(l.qkv, UploadBf16({q, k, v}, stream, bytes, split ? &l.qkv_lo : nullptr));
    if (bias) {
      BANYAN_ASSIGN_OR_RETURN(const HostTensor* qb, Find(w, p + "self_attn.q_proj.bias", {q_dim}));
      BANYAN_ASSIGN_OR_RETURN(const HostTensor* kb, Find(w, p + "self_attn.k_proj.bias", {kv_dim}));
      BANYAN_ASSIGN_OR_RETURN(const HostTensor* vb, Find(w, p + "self_attn.v_proj.bias", {kv_dim}));
      BANYAN_ASSIGN_OR_RETURN(l.qkv_bias, UploadF32({qb, kb, vb}, stream, bytes));
    }
    BANYAN_ASSIGN_OR_RETURN(l.o, UploadBf16({o}, stream, bytes, split ? &l.o_lo : nullptr));
    BANYAN_ASSIGN_OR_RETURN(l.post_norm, UploadF32({post}, stream, bytes));
    BANYAN_ASSIGN_OR_RETURN(l.gate_up, UploadBf16({gate, up}, stream, bytes, split ? &l.gate_up_lo : nullptr));
    BANYAN_ASSIGN_OR_RETURN(l.down, UploadBf16({down}, stream, bytes, split ? &l.down_lo : nullptr));
  }
  BANYAN_ASSIGN_OR_RETURN(d.inv_freq, RopeInvFreq(c));
  BANYAN_ASSIGN_OR_RETURN(d.inv_freq_device, gpu::DeviceBuffer::Allocate(d.inv_freq.size() * sizeof(float)));
  BANYAN_RETURN_IF_ERROR(
      d.inv_freq_device.CopyFromHost(d.inv_freq.data(), d.inv_freq.size() * sizeof(float), stream));
  BANYAN_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
  return d;
}

}  // namespace banyan::model::cuda

#include "model/cuda/attention_call.h"

#include <cmath>

#include "attention/cpu/cpu_attention.h"
#include "banyan/status_macros.h"
#include "sdk/gpu/cuda_status.h"

namespace banyan::model::cuda {

absl::Status AttentionRunner::Prepare(const attention::AttentionPlan& plan, const ModelConfig& config,
                                      const KvCache& kv, const void* q, void* out, cudaStream_t stream,
                                      attention::PlanCheck check) {
  args_ = attention::AttentionArgs();
  args_.plan = &plan;
  args_.layout = kv.layout;
  args_.kv_dtype = kv.dtype;
  args_.kv_pool = kv.data;
  args_.q_dtype = DType::kBf16;
  args_.out_dtype = DType::kBf16;
  args_.num_q_heads = config.num_q_heads;
  args_.scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(config.head_dim)));
  args_.layer = 0;
  args_.q = q;
  args_.out = out;
  if (path_ == AttentionPath::kHost) return attention::ValidateAttentionArgs(args_, check);
  if (device_ == nullptr) {
    BANYAN_ASSIGN_OR_RETURN(device_, attention::TreeAttention::Create());
  }
  return device_->Prepare(args_, attention::PathChoice::kAuto, stream, check);
}

absl::Status AttentionRunner::Run(int32_t layer, cudaStream_t stream) {
  args_.layer = layer;
  if (path_ == AttentionPath::kHost) return RunOnHost(stream);
  if (device_ == nullptr) return absl::FailedPreconditionError("attention Run before Prepare");
  return device_->Run(args_, stream);
}

absl::Status AttentionRunner::PrepareAhead(cudaStream_t stream) {
  if (path_ == AttentionPath::kHost || device_ == nullptr || args_.plan == nullptr) return absl::OkStatus();
  return device_->PrepareAhead(args_, attention::PathChoice::kAuto, stream);
}

absl::Status AttentionRunner::RunOnHost(cudaStream_t stream) {
  const int32_t layer = args_.layer;
  const void* q = args_.q;
  void* out = args_.out;
  const attention::KvLayout& l = args_.layout;
  const int64_t rows = args_.plan->num_queries;
  const size_t q_elems = static_cast<size_t>(rows) * args_.num_q_heads * l.head_dim;
  // The layer's K and V planes are contiguous: [2][num_pages][kv_heads][page][head_dim].
  const size_t kv_elems = static_cast<size_t>(2 * l.num_pages * l.PageElements());
  host_q_.resize(q_elems);
  host_out_.resize(q_elems);
  host_kv_.resize(kv_elems);
  const auto* pool = static_cast<const Bf16*>(args_.kv_pool) + l.PlaneOffset(layer, 0);
  BANYAN_CUDA_RETURN_IF_ERROR(
      cudaMemcpyAsync(host_q_.data(), q, q_elems * 2, cudaMemcpyDeviceToHost, stream));
  BANYAN_CUDA_RETURN_IF_ERROR(
      cudaMemcpyAsync(host_kv_.data(), pool, kv_elems * 2, cudaMemcpyDeviceToHost, stream));
  BANYAN_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
  attention::AttentionArgs a = args_;
  a.layout.num_layers = 1;
  a.layer = 0;
  a.kv_pool = host_kv_.data();
  a.q = host_q_.data();
  a.out = host_out_.data();
  BANYAN_RETURN_IF_ERROR(attention::CpuAttention(a, /*num_threads=*/4));
  BANYAN_CUDA_RETURN_IF_ERROR(
      cudaMemcpyAsync(out, host_out_.data(), q_elems * 2, cudaMemcpyHostToDevice, stream));
  BANYAN_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
  return absl::OkStatus();
}

}  // namespace banyan::model::cuda

// AttentionRunner: the CUDA backend's one door to attention/. Prepare() is
// called once per forward pass with the batch's plan (what attention needs
// per pass: the plan uploaded or turned into work items); Run() once per
// layer with that layer's rotated q.
//
// Two paths:
//   kDevice  attention/'s CUDA runner (TreeAttention: tree, prefill and
//            per-sequence decode are all plans) over the paged pool; the
//            plan is prepared once per pass and run once per layer.
//   kHost    attention/'s CPU path (CpuAttention) on a host copy of q and of
//            the layer's K/V planes: slow, for cross-checking the device
//            path and for running the backend where no device kernel
//            supports a shape.
// Errors: attention's own (kInvalidArgument for an unsupported head_dim or a
// bad plan), CUDA errors as Status. Thread-compatible; owns scratch.
#ifndef BANYAN_MODEL_CUDA_ATTENTION_CALL_H_
#define BANYAN_MODEL_CUDA_ATTENTION_CALL_H_

#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "attention/attention_args.h"
#include "attention/attention_plan.h"
#include "attention/tree_attention.h"
#include "model/forward.h"
#include "model/model_config.h"
#include "sdk/base/half.h"

namespace banyan::model::cuda {

enum class AttentionPath { kDevice = 0, kHost = 1 };

class AttentionRunner {
 public:
  explicit AttentionRunner(AttentionPath path = AttentionPath::kDevice) : path_(path) {}

  // REQUIRES: plan and kv.data stay valid until the last Run of this pass
  // has completed on `stream`. `check`: attention::PlanCheck; kPlanValidated
  // only when ValidateForwardPlan (model/forward.h) has accepted this plan
  // against this pool, so a step validates its plan once.
  [[nodiscard]] absl::Status Prepare(const attention::AttentionPlan& plan, const ModelConfig& config,
                                     const KvCache& kv, const void* q, void* out, cudaStream_t stream,
                                     attention::PlanCheck check = attention::PlanCheck::kFull);
  // out[rows][nq][head_dim] = attention of q[rows][nq][head_dim] (bf16,
  // device; the pointers given to Prepare) over layer `layer` of the pool,
  // as the plan says.
  [[nodiscard]] absl::Status Run(int32_t layer, cudaStream_t stream);
  // After the pass's last Run: plans the next decode pass's attention on the
  // guess that every row's branch grows by one token, while the GPU runs
  // this pass (attention::TreeAttention::PrepareAhead); the next Prepare
  // keeps that work when its plan is the guess. REQUIRES: this pass's plan is
  // still valid. No-op on the host path.
  [[nodiscard]] absl::Status PrepareAhead(cudaStream_t stream);

 private:
  absl::Status RunOnHost(cudaStream_t stream);

  AttentionPath path_;
  attention::AttentionArgs args_;
  std::unique_ptr<attention::TreeAttention> device_;  // created on first use
  // kHost scratch.
  std::vector<Bf16> host_q_, host_out_, host_kv_;
};

}  // namespace banyan::model::cuda

#endif  // BANYAN_MODEL_CUDA_ATTENTION_CALL_H_

// SparqAttention: SparQ attention (sparq_args.h) on the GPU: approximate
// scores from r components of the second (transposed) K copy, the exact top-k
// selection per sequence and KV head, exact attention over the selected
// tokens, the mean-value term. One launch of a thread block cluster per
// sequence and KV head (kernels/sparq_cluster.cuh) where pages hold a
// multiple of 8 slots, a cluster's shared memory holds the longest
// sequence's scores and logits at two CTAs per SM (88 KB: 64K tokens at 4
// query heads per KV head in clusters of 16) and every pair's cluster runs
// at once (about 14 clusters of 16 on the H100), else eight launches on one
// stream (kernels/sparq.cuh) with the scores in global memory.
// Speed (H100, bench/RESULTS.md "SparQ (GPU)"): 0.7-1.6x exact attention
// over the same KV so far; faster only for long sequences.
//
//   BANYAN_ASSIGN_OR_RETURN(auto sparq, SparqAttention::Create());
//   BANYAN_RETURN_IF_ERROR(WriteKTransposed(layout, DType::kBf16, pool, k_t, stream));  // once per fill
//   BANYAN_RETURN_IF_ERROR(sparq->Prepare(args, stream));  // validates and uploads the plan
//   BANYAN_RETURN_IF_ERROR(sparq->Run(args, stream));      // launches only
//
// The plan arrays of SparqArgs (seq_page_indptr, page_indices, seq_length)
// are host pointers, read by Prepare only; every other pointer is a device
// pointer, read by Run.
// Supported: KV and q bf16 or fp16 (the same type), head_dim 64 and 128, up
// to kSparqMaxGroup (16) query heads per KV head, page sizes that are
// multiples of 4, k up to 262,144, any out dtype.
// Errors: kInvalidArgument (ValidateSparqArgs without the plan checks, or an
// unsupported dtype / group / page size / k, a null k_transposed or v_mean), CUDA errors
// (cuda_status.h). Run never synchronizes with the host.
// Thread-compatible: one runner per stream.
#ifndef BANYAN_ATTENTION_SPARQ_H_
#define BANYAN_ATTENTION_SPARQ_H_

#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "attention/kv_layout.h"
#include "attention/reference/sparq_reference.h"
#include "attention/sparq_args.h"
#include "sdk/base/tensor_view.h"
#include "sdk/gpu/device_buffer.h"

namespace banyan::attention::kernels {
struct SparqParams;
}

namespace banyan::attention {

class SparqAttention {
 public:
  static absl::StatusOr<std::unique_ptr<SparqAttention>> Create();
  ~SparqAttention();
  SparqAttention(const SparqAttention&) = delete;
  SparqAttention& operator=(const SparqAttention&) = delete;

  // Validates args with their host plan arrays (ValidateSparqArgs with
  // plan_on_host, so a length past its pages or a bad page id is refused
  // before any kernel reads it), copies the plan to the device and sizes the
  // scratch (allocations synchronize the device). Errors: kInvalidArgument.
  [[nodiscard]] absl::Status Prepare(const SparqArgs& args, cudaStream_t stream);
  // Queues SparQ attention of args on `stream` over the plan of the last
  // Prepare; never synchronizes (CUDA-graph capturable). Returns
  // kFailedPrecondition without a successful Prepare, or when args' sizes
  // (sequences, layout, heads, config, max_length) differ from the prepared
  // ones; kInvalidArgument for a null tensor pointer.
  [[nodiscard]] absl::Status Run(const SparqArgs& args, cudaStream_t stream);

  // The path Prepare takes: 0 (default) picks clusters of 16 CTAs where all
  // of them run at once with their logits in shared memory, else of 8 where
  // so, else the eight launches; 8 or 16 asks for that cluster size
  // (Prepare returns kInvalidArgument where it does not fit or pages hold no
  // multiple of 8 slots); -1 asks for the eight launches. Takes effect at the
  // next Prepare.
  void set_cluster_size(int32_t size) { cluster_request_ = size; }
  // The cluster size the last Prepare chose, 0 for the eight launches.
  int32_t cluster_size() const { return cluster_; }

  // Tests: the last Run's selection of (seq, kv_head) for a sequence of
  // `length` tokens: its min(k, length) positions and alpha per head of the
  // group, copied to the host (synchronizes `stream`).
  [[nodiscard]] absl::Status CopySelection(int32_t seq, int32_t kv_head, int32_t length, SparqSelection* out,
                                           cudaStream_t stream) const;

 private:
  using ClusterKernel = void (*)(kernels::SparqParams);  // a SparqCluster instantiation
  SparqAttention();
  gpu::DeviceBuffer scratch_, plan_;
  SparqArgs prepared_;  // the last successful Prepare's arguments (its plan pointers are not kept)
  bool ready_ = false;
  std::unique_ptr<kernels::SparqParams> params_;  // the launch parameters Prepare filled
  int64_t hist_offset_ = 0, hist_bytes_ = 0;
  int64_t positions_offset_ = 0, alpha_offset_ = 0;  // bytes into scratch_ of the last Run
  int32_t last_k_ = 0, last_group_ = 0, last_kv_heads_ = 0, last_select_chunks_ = 0;
  int32_t cluster_request_ = 0, cluster_ = 0, cluster_cap_ = 0;  // set_cluster_size; the prepared path
  ClusterKernel cluster_kernel_ = nullptr;                       // the prepared cluster kernel
  int64_t cluster_smem_ = 0;                                     // dynamic shared bytes per CTA
  bool cluster_logits_global_ = false;  // the cluster kernel's logits in scratch_, not in shared memory
};

// Writes the second K copy (KvTransposedOffset) of every layer, page and KV
// head of the pool on `stream`. Returns kInvalidArgument for fp32 or a
// layout whose dtype_bytes disagree with `dtype`.
[[nodiscard]] absl::Status WriteKTransposed(const KvLayout& layout, DType dtype, const void* kv_pool,
                                            void* k_transposed, cudaStream_t stream);

}  // namespace banyan::attention

#endif  // BANYAN_ATTENTION_SPARQ_H_

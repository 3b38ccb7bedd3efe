// The persistent attention kernel: one launch runs every work item of a
// WorkPlan (all levels of the tree, batched and flattened items alike) and,
// when the plan allows it, the merge (merge.cuh CompleteItem: the CTA that
// finishes a query row's last item merges that row). CTA b runs items
// cta_item_indptr[b] .. cta_item_indptr[b + 1], the list the host's stream-K
// style planner (work_plan.h) balanced; the grid is fixed per device and
// dtype, so the launch is CUDA-graph capturable.
//
// kVariant (KernelVariant): 0 narrow (tree.cuh, 16 rows per warp, 4 KV
// stages, Q fragments in registers, one CTA per SM); 1 wide (tree_wide.cuh);
// 2 dual (tree.cuh with 2 KV stages and Q in shared memory, registers capped
// at 128 so that two CTAs share an SM).
#ifndef BANYAN_ATTENTION_KERNELS_PERSISTENT_CUH_
#define BANYAN_ATTENTION_KERNELS_PERSISTENT_CUH_

#include <type_traits>

#include "attention/kernels/decode.cuh"
#include "attention/kernels/merge.cuh"
#include "attention/kernels/params.cuh"
#include "attention/kernels/tree.cuh"
#include "attention/kernels/tree_wide.cuh"

namespace banyan::attention::kernels {

inline constexpr int kDualStages = 2;

template <int a, int b>
inline constexpr int kMaxOf = a > b ? a : b;

// fp32 KV runs flattened items only.
template <typename T, int D, int kVariant>
inline constexpr int kPersistentSmemBytes =
    sizeof(T) == 4  ? kFlattenedSmemBytes<T, D>
    : kVariant == 1 ? kMaxOf<kWideSmemBytes<T, D>, kFlattenedSmemBytes<T, D>>
    : kVariant == 2 ? kMaxOf<kBatchedSmemBytes<T, D, kDualStages, true>, kFlattenedSmemBytes<T, D>>
                    : kMaxOf<kBatchedSmemBytes<T, D>, kFlattenedSmemBytes<T, D>>;

template <int kVariant>
inline constexpr int kMinCtasPerSm = kVariant == 2 ? 2 : 1;

template <typename T, int D, int kVariant>
__global__ void __launch_bounds__(kThreads, kMinCtasPerSm<kVariant>) PersistentAttentionKernel(const TreeParams p) {
  extern __shared__ __align__(16) char smem[];
  __shared__ int s_max_limit;
  __shared__ int32_t s_rows[kMaxMergeRows];
  __shared__ int s_count;
  const int32_t begin = p.cta_item_indptr[blockIdx.x], end = p.cta_item_indptr[blockIdx.x + 1];
  for (int32_t i = begin; i < end; ++i) {
    const WorkItem it = p.items[i];
    if constexpr (sizeof(T) == 2) {
      if (it.kind == static_cast<int32_t>(ItemKind::kBatched)) {
        if constexpr (kVariant == 1) {
          RunBatchedItemWide<T, D>(p, it, smem, &s_max_limit);
        } else if constexpr (kVariant == 2) {
          RunBatchedItem<T, D, kDualStages, true>(p, it, smem, &s_max_limit);
        } else {
          RunBatchedItem<T, D>(p, it, smem, &s_max_limit);
        }
      } else {
        RunFlattenedItem<T, D>(p, it, smem);
      }
    } else {
      RunFlattenedItem<T, D>(p, it, smem);  // the planner never emits batched items for fp32
    }
    if (p.query_done != nullptr) CompleteItem<D, kThreads>(p, it, s_rows, &s_count);
    __syncthreads();  // shared memory is reused by the next item
  }
}

}  // namespace banyan::attention::kernels

#endif  // BANYAN_ATTENTION_KERNELS_PERSISTENT_CUH_

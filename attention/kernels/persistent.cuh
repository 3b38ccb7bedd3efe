// The persistent attention kernel: one launch runs every work item of a
// WorkPlan (all levels of the tree, batched and flattened items alike). CTA b
// runs items cta_item_indptr[b] .. cta_item_indptr[b + 1], the list the
// host's stream-K style planner (work_plan.h) balanced; the grid is fixed per
// device and dtype, so the launch is CUDA-graph capturable.
#ifndef BANYAN_ATTENTION_KERNELS_PERSISTENT_CUH_
#define BANYAN_ATTENTION_KERNELS_PERSISTENT_CUH_

#include <type_traits>

#include "attention/kernels/decode.cuh"
#include "attention/kernels/params.cuh"
#include "attention/kernels/tree.cuh"
#include "attention/kernels/tree_wide.cuh"

namespace banyan::attention::kernels {

// fp32 KV runs flattened items only; kWide batched items also hold the query tile.
template <typename T, int D, bool kWide>
inline constexpr int kPersistentSmemBytes =
    sizeof(T) == 4 ? kFlattenedSmemBytes<T, D>
    : kWide        ? (kWideSmemBytes<T, D> > kFlattenedSmemBytes<T, D> ? kWideSmemBytes<T, D> : kFlattenedSmemBytes<T, D>)
                   : (kBatchedSmemBytes<T, D> > kFlattenedSmemBytes<T, D> ? kBatchedSmemBytes<T, D>
                                                                        : kFlattenedSmemBytes<T, D>);

// kWide: batched items use tree_wide.cuh (32 rows per warp), else tree.cuh.
template <typename T, int D, bool kWide>
__global__ void __launch_bounds__(kThreads) PersistentAttentionKernel(const TreeParams p) {
  extern __shared__ __align__(16) char smem[];
  __shared__ int s_max_limit;
  const int32_t begin = p.cta_item_indptr[blockIdx.x], end = p.cta_item_indptr[blockIdx.x + 1];
  for (int32_t i = begin; i < end; ++i) {
    const WorkItem it = p.items[i];
    if constexpr (sizeof(T) == 2) {
      if (it.kind == static_cast<int32_t>(ItemKind::kBatched)) {
        if constexpr (kWide) {
          RunBatchedItemWide<T, D>(p, it, smem, &s_max_limit);
        } else {
          RunBatchedItem<T, D>(p, it, smem, &s_max_limit);
        }
      } else {
        RunFlattenedItem<T, D>(p, it, smem);
      }
    } else {
      RunFlattenedItem<T, D>(p, it, smem);  // the planner never emits batched items for fp32
    }
    __syncthreads();  // shared memory is reused by the next item
  }
}

}  // namespace banyan::attention::kernels

#endif  // BANYAN_ATTENTION_KERNELS_PERSISTENT_CUH_

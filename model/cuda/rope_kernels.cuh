// RoPE in place on q and k (see RopeParams in ops.h). One thread per rotated
// pair (row, head, i < head_dim / 2), q heads first, then k heads. The angle
// is position * inv_freq in fp32 (as Hugging Face computes it), sin and cos
// with the accurate sincosf, the rotation in fp32, rounded once to bf16.
#ifndef BANYAN_MODEL_CUDA_ROPE_KERNELS_CUH_
#define BANYAN_MODEL_CUDA_ROPE_KERNELS_CUH_

#include <cuda_bf16.h>

#include "model/cuda/kernel_util.cuh"
#include "model/cuda/ops.h"

namespace banyan::model::cuda {

// The rotation of one pair, with explicit rounding so every kernel that
// rotates gives the same bits (no compiler-chosen FMA contraction).
__device__ __forceinline__ void RotatePair(float x1, float x2, float cos_a, float sin_a, float& y1, float& y2) {
  y1 = __fmaf_rn(x1, cos_a, -__fmul_rn(x2, sin_a));
  y2 = __fmaf_rn(x2, cos_a, __fmul_rn(x1, sin_a));
}

__global__ void RopeKernel(RopeParams p) {
  const int half = p.head_dim / 2;
  const int heads = p.num_q_heads + p.num_kv_heads;
  const int64_t total = static_cast<int64_t>(p.rows) * heads * half;
  for (int64_t t = GlobalThread(); t < total; t += GridStride()) {
    const int i = static_cast<int>(t % half);
    const int head = static_cast<int>((t / half) % heads);
    const int64_t row = t / (static_cast<int64_t>(half) * heads);
    const bool is_q = head < p.num_q_heads;
    const __nv_bfloat16* x = is_q
        ? reinterpret_cast<const __nv_bfloat16*>(p.q) + row * p.q_row_stride + int64_t{head} * p.head_dim
        : reinterpret_cast<const __nv_bfloat16*>(p.k) + row * p.k_row_stride +
              int64_t{head - p.num_q_heads} * p.head_dim;                          // [head_dim]
    __nv_bfloat16* y = (is_q && p.q_out != nullptr)
        ? reinterpret_cast<__nv_bfloat16*>(p.q_out) + row * p.q_out_row_stride + int64_t{head} * p.head_dim
        : const_cast<__nv_bfloat16*>(x);                                           // [head_dim]
    const float angle = static_cast<float>(p.positions[row]) * p.inv_freq[i];
    float sin_a, cos_a;
    sincosf(angle, &sin_a, &cos_a);
    float y1, y2;
    RotatePair(__bfloat162float(x[i]), __bfloat162float(x[i + half]), cos_a, sin_a, y1, y2);
    y[i] = __float2bfloat16_rn(y1);
    y[i + half] = __float2bfloat16_rn(y2);
  }
}

// One block per row: cos/sin of the row's angles in shared memory, then one
// thread per rotated pair of q and k heads (k straight into the pool), then
// the v heads copied into the pool. REQUIRES: head_dim / 2 <= kMaxHalf.
constexpr int kMaxHalf = 256;

__global__ void RopeKvWriteKernel(RopeParams r, KvWriteParams kv) {
  __shared__ float cos_table[kMaxHalf], sin_table[kMaxHalf];
  const int half = r.head_dim / 2;
  const int64_t row = blockIdx.x;
  for (int i = threadIdx.x; i < half; i += blockDim.x) {
    const float angle = static_cast<float>(r.positions[row]) * r.inv_freq[i];
    sincosf(angle, &sin_table[i], &cos_table[i]);
  }
  __syncthreads();
  const attention::KvLayout& l = kv.layout;
  const int32_t page = kv.page[row], slot = kv.slot[row];
  auto* pool = reinterpret_cast<__nv_bfloat16*>(kv.pool);
  const int pairs = (r.num_q_heads + r.num_kv_heads) * half;
  for (int t = threadIdx.x; t < pairs; t += blockDim.x) {
    const int head = t / half, i = t % half;
    const bool is_q = head < r.num_q_heads;
    const __nv_bfloat16* x = is_q
        ? reinterpret_cast<const __nv_bfloat16*>(r.q) + row * r.q_row_stride + int64_t{head} * r.head_dim
        : reinterpret_cast<const __nv_bfloat16*>(r.k) + row * r.k_row_stride +
              int64_t{head - r.num_q_heads} * r.head_dim;                                   // [head_dim]
    __nv_bfloat16* y = is_q
        ? reinterpret_cast<__nv_bfloat16*>(r.q_out) + row * r.q_out_row_stride + int64_t{head} * r.head_dim
        : pool + l.Offset(kv.layer, 0, page, head - r.num_q_heads, slot);                   // [head_dim]
    float y1, y2;
    RotatePair(__bfloat162float(x[i]), __bfloat162float(x[i + half]), cos_table[i], sin_table[i], y1, y2);
    y[i] = __float2bfloat16_rn(y1);
    y[i + half] = __float2bfloat16_rn(y2);
  }
  const int v_elems = l.num_kv_heads * l.head_dim;
  for (int t = threadIdx.x; t < v_elems; t += blockDim.x) {
    const int head = t / l.head_dim, i = t % l.head_dim;
    pool[l.Offset(kv.layer, 1, page, head, slot) + i] =
        reinterpret_cast<const __nv_bfloat16*>(kv.v)[row * kv.v_row_stride + t];
  }
}

}  // namespace banyan::model::cuda

#endif  // BANYAN_MODEL_CUDA_ROPE_KERNELS_CUH_

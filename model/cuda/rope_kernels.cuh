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
    const float x1 = __bfloat162float(x[i]);
    const float x2 = __bfloat162float(x[i + half]);
    y[i] = __float2bfloat16_rn(x1 * cos_a - x2 * sin_a);
    y[i + half] = __float2bfloat16_rn(x2 * cos_a + x1 * sin_a);
  }
}

}  // namespace banyan::model::cuda

#endif  // BANYAN_MODEL_CUDA_ROPE_KERNELS_CUH_

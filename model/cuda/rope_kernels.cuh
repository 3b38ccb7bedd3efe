// The QKV projection's epilogue (see QkvEpilogueParams in ops.h): bias, RoPE
// and the KV write fused, one block per row. The angle is position *
// inv_freq in fp32 (as Hugging Face computes it), sin and cos with the
// accurate sincosf, the rotation in fp32 with explicit rounding (no
// compiler-chosen FMA contraction), each value rounded once to bf16.
#ifndef BANYAN_MODEL_CUDA_ROPE_KERNELS_CUH_
#define BANYAN_MODEL_CUDA_ROPE_KERNELS_CUH_

#include <cuda_bf16.h>

#include "model/cuda/kernel_util.cuh"
#include "model/cuda/ops.h"

namespace banyan::model::cuda {

constexpr int kMaxHalf = 256;  // head_dim <= 512

// Element c of row `row` of the fp32 QKV output, with the lo half and the
// bias added when present.
__device__ __forceinline__ float QkvValue(const QkvEpilogueParams& p, int64_t row, int64_t row_len, int c) {
  float x = p.qkv[row * row_len + c];
  if (p.qkv_lo != nullptr) x += p.qkv_lo[row * row_len + c];
  if (p.bias != nullptr) x += p.bias[c];
  return x;
}

// REQUIRES: head_dim / 2 <= kMaxHalf; grid = rows.
__global__ void QkvEpilogueKernel(QkvEpilogueParams p) {
  AllowDependentLaunch();  // the attention kernel's prologue may overlap this kernel (TreeAttention::Run)
  __shared__ float cos_table[kMaxHalf], sin_table[kMaxHalf];
  const int half = p.head_dim / 2;
  const int64_t row = blockIdx.x;
  for (int i = threadIdx.x; i < half; i += blockDim.x) {
    const float angle = static_cast<float>(p.positions[row]) * p.inv_freq[i];
    sincosf(angle, &sin_table[i], &cos_table[i]);
  }
  __syncthreads();
  const attention::KvLayout& l = p.layout;
  const int64_t q_dim = int64_t{p.num_q_heads} * p.head_dim;
  const int64_t kv_dim = int64_t{p.num_kv_heads} * p.head_dim;
  const int64_t row_len = q_dim + 2 * kv_dim;
  const int32_t page = p.page[row], slot = p.slot[row];
  auto* pool = reinterpret_cast<__nv_bfloat16*>(p.pool);
  auto* q_out = reinterpret_cast<__nv_bfloat16*>(p.q_out) + row * q_dim;  // [q_dim]
  // RoPE on every (head, i) pair of the q heads, then the k heads.
  const int pairs = (p.num_q_heads + p.num_kv_heads) * half;
  for (int t = threadIdx.x; t < pairs; t += blockDim.x) {
    const int head = t / half, i = t % half;
    const int c = head * p.head_dim + i;  // column in the QKV row (k heads follow the q heads)
    const float x1 = QkvValue(p, row, row_len, c), x2 = QkvValue(p, row, row_len, c + half);
    const float y1 = __fmaf_rn(x1, cos_table[i], -__fmul_rn(x2, sin_table[i]));
    const float y2 = __fmaf_rn(x2, cos_table[i], __fmul_rn(x1, sin_table[i]));
    __nv_bfloat16* y = head < p.num_q_heads
        ? q_out + int64_t{head} * p.head_dim
        : pool + l.Offset(p.layer, 0, page, head - p.num_q_heads, slot);  // [head_dim]
    y[i] = __float2bfloat16_rn(y1);
    y[i + half] = __float2bfloat16_rn(y2);
  }
  // The v heads, unrotated.
  for (int t = threadIdx.x; t < kv_dim; t += blockDim.x) {
    const int head = t / p.head_dim, i = t % p.head_dim;
    pool[l.Offset(p.layer, 1, page, head, slot) + i] =
        __float2bfloat16_rn(QkvValue(p, row, row_len, static_cast<int>(q_dim + kv_dim) + t));
  }
}

}  // namespace banyan::model::cuda

#endif  // BANYAN_MODEL_CUDA_ROPE_KERNELS_CUH_

// Fused residual add + RMSNorm (see RmsNormParams in ops.h). One block per
// row; each thread owns the same kVec-wide chunks in both passes, so it reads
// back only what it wrote itself and no barrier is needed between them.
#ifndef BANYAN_MODEL_CUDA_NORM_KERNELS_CUH_
#define BANYAN_MODEL_CUDA_NORM_KERNELS_CUH_

#include <cuda_bf16.h>

#include "model/cuda/kernel_util.cuh"
#include "model/cuda/ops.h"

namespace banyan::model::cuda {

// REQUIRES: dim % kVec == 0; blockDim.x a multiple of 32; grid = rows.
template <int kVec, bool kAdd>
__global__ void RmsNormKernel(RmsNormParams p) {
  const int64_t row = blockIdx.x;
  float* h = p.residual + row * p.dim;                                              // [dim]
  const float* x = kAdd ? p.add + row * p.dim : nullptr;                            // [dim]
  const float* x_lo = kAdd && p.add_lo != nullptr ? p.add_lo + row * p.dim : nullptr;  // [dim]
  auto* y = reinterpret_cast<__nv_bfloat16*>(p.out) + row * p.dim;                  // [dim]
  auto* y_lo = p.out_lo != nullptr ? reinterpret_cast<__nv_bfloat16*>(p.out_lo) + row * p.dim : nullptr;

  float sum_sq = 0.0f;
  for (int i = threadIdx.x * kVec; i < p.dim; i += blockDim.x * kVec) {
    float hv[kVec];
    LoadF32<kVec>(h + i, hv);
    if constexpr (kAdd) {
      float xv[kVec];
      LoadF32<kVec>(x + i, xv);
      if (x_lo != nullptr) {
        float lv[kVec];
        LoadF32<kVec>(x_lo + i, lv);
#pragma unroll
        for (int j = 0; j < kVec; ++j) xv[j] += lv[j];
      }
#pragma unroll
      for (int j = 0; j < kVec; ++j) hv[j] += xv[j];
      StoreF32<kVec>(h + i, hv);
    }
#pragma unroll
    for (int j = 0; j < kVec; ++j) sum_sq += hv[j] * hv[j];
  }
  const float scale = rsqrtf(BlockSum(sum_sq) / static_cast<float>(p.dim) + p.eps);
  for (int i = threadIdx.x * kVec; i < p.dim; i += blockDim.x * kVec) {
    float hv[kVec], wv[kVec];
    LoadF32<kVec>(h + i, hv);
    LoadF32<kVec>(p.weight + i, wv);
#pragma unroll
    for (int j = 0; j < kVec; ++j) hv[j] = hv[j] * scale * wv[j];
    StoreBf16Split<kVec>(y + i, y_lo != nullptr ? y_lo + i : nullptr, hv);
  }
}

}  // namespace banyan::model::cuda

#endif  // BANYAN_MODEL_CUDA_NORM_KERNELS_CUH_

// SwiGLU over the fused gate|up GEMM's fp32 output (see SwiGluParams in
// ops.h). Grid-stride loop over kVec-wide chunks; fp32 arithmetic, one bf16
// rounding (or a bf16 hi/lo pair).
#ifndef BANYAN_MODEL_CUDA_ELEMENTWISE_KERNELS_CUH_
#define BANYAN_MODEL_CUDA_ELEMENTWISE_KERNELS_CUH_

#include <cuda_bf16.h>

#include "model/cuda/kernel_util.cuh"
#include "model/cuda/ops.h"

namespace banyan::model::cuda {

// REQUIRES: intermediate % kVec == 0.
template <int kVec>
__global__ void SwiGluKernel(SwiGluParams p) {
  const int64_t chunks_per_row = p.intermediate / kVec;
  const int64_t total = chunks_per_row * p.rows;
  for (int64_t t = GlobalThread(); t < total; t += GridStride()) {
    const int64_t row = t / chunks_per_row;
    const int64_t col = (t % chunks_per_row) * kVec;
    const int64_t at = row * 2 * p.intermediate + col;  // gate; up is intermediate further
    float g[kVec], u[kVec];
    LoadF32<kVec>(p.gate_up + at, g);
    LoadF32<kVec>(p.gate_up + at + p.intermediate, u);
    if (p.gate_up_lo != nullptr) {
      float gl[kVec], ul[kVec];
      LoadF32<kVec>(p.gate_up_lo + at, gl);
      LoadF32<kVec>(p.gate_up_lo + at + p.intermediate, ul);
#pragma unroll
      for (int j = 0; j < kVec; ++j) {
        g[j] += gl[j];
        u[j] += ul[j];
      }
    }
#pragma unroll
    for (int j = 0; j < kVec; ++j) g[j] = g[j] / (1.0f + expf(-g[j])) * u[j];
    const int64_t out = row * p.intermediate + col;
    StoreBf16Split<kVec>(reinterpret_cast<__nv_bfloat16*>(p.out) + out,
                         p.out_lo != nullptr ? reinterpret_cast<__nv_bfloat16*>(p.out_lo) + out : nullptr, g);
  }
}

}  // namespace banyan::model::cuda

#endif  // BANYAN_MODEL_CUDA_ELEMENTWISE_KERNELS_CUH_

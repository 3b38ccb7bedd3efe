// Elementwise kernels of the CUDA backend: SwiGLU over the fused gate|up GEMM
// output and the projection-bias add. Grid-stride loops over kVec-wide chunks
// (16-byte accesses when kVec == 8); fp32 arithmetic, one bf16 rounding.
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
    const auto* gate = reinterpret_cast<const __nv_bfloat16*>(p.gate_up) + row * 2 * p.intermediate + col;
    const auto* up = gate + p.intermediate;
    float g[kVec], u[kVec];
    LoadBf16<kVec>(gate, g);
    LoadBf16<kVec>(up, u);
#pragma unroll
    for (int j = 0; j < kVec; ++j) g[j] = g[j] / (1.0f + expf(-g[j])) * u[j];
    StoreBf16<kVec>(reinterpret_cast<__nv_bfloat16*>(p.out) + row * p.intermediate + col, g);
  }
}

// REQUIRES: cols % kVec == 0.
template <int kVec>
__global__ void BiasAddKernel(BiasAddParams p) {
  const int64_t chunks_per_row = p.cols / kVec;
  const int64_t total = chunks_per_row * p.rows;
  for (int64_t t = GlobalThread(); t < total; t += GridStride()) {
    const int64_t row = t / chunks_per_row;
    const int64_t col = (t % chunks_per_row) * kVec;
    auto* x = reinterpret_cast<__nv_bfloat16*>(p.x) + row * p.cols + col;
    float xv[kVec], bv[kVec];
    LoadBf16<kVec>(x, xv);
    LoadBf16<kVec>(reinterpret_cast<const __nv_bfloat16*>(p.bias) + col, bv);
#pragma unroll
    for (int j = 0; j < kVec; ++j) xv[j] += bv[j];
    StoreBf16<kVec>(x, xv);
  }
}

}  // namespace banyan::model::cuda

#endif  // BANYAN_MODEL_CUDA_ELEMENTWISE_KERNELS_CUH_

// Kernels that only move data: embedding gather (with token-id validation
// reported through a device flag) and a row gather. kVec-wide copies (16
// bytes of bf16 when kVec == 8).
#ifndef BANYAN_MODEL_CUDA_MEMORY_KERNELS_CUH_
#define BANYAN_MODEL_CUDA_MEMORY_KERNELS_CUH_

#include <cuda_bf16.h>

#include "model/cuda/kernel_util.cuh"
#include "model/cuda/ops.h"

namespace banyan::model::cuda {

// One block per row. An out-of-range id zeroes its row and records the row.
// REQUIRES: dim % kVec == 0.
template <int kVec>
__global__ void EmbeddingKernel(EmbeddingParams p) {
  const int64_t row = blockIdx.x;
  const int32_t id = p.ids[row];
  float* out = p.out + row * p.dim;  // [dim]
  if (id < 0 || id >= p.vocab) {
    if (threadIdx.x == 0) atomicMin(p.bad_row, static_cast<int32_t>(row));
    for (int i = threadIdx.x; i < p.dim; i += blockDim.x) out[i] = 0.0f;
    return;
  }
  const auto* src = reinterpret_cast<const __nv_bfloat16*>(p.table) + int64_t{id} * p.dim;  // [dim]
  const auto* src_lo = p.table_lo != nullptr
      ? reinterpret_cast<const __nv_bfloat16*>(p.table_lo) + int64_t{id} * p.dim  // [dim]
      : nullptr;
  for (int i = threadIdx.x * kVec; i < p.dim; i += blockDim.x * kVec) {
    float v[kVec];
    LoadBf16<kVec>(src + i, v);
    if (src_lo != nullptr) {
      float lo[kVec];
      LoadBf16<kVec>(src_lo + i, lo);
#pragma unroll
      for (int j = 0; j < kVec; ++j) v[j] += lo[j];
    }
    StoreF32<kVec>(out + i, v);
  }
}

// One block per output row. REQUIRES: cols % kVec == 0.
template <int kVec>
__global__ void GatherRowsKernel(GatherRowsParams p) {
  const int64_t row = blockIdx.x;
  const auto* src = reinterpret_cast<const __nv_bfloat16*>(p.src) + int64_t{p.index[row]} * p.cols;
  auto* dst = reinterpret_cast<__nv_bfloat16*>(p.dst) + row * p.cols;
  for (int i = threadIdx.x * kVec; i < p.cols; i += blockDim.x * kVec) {
    *reinterpret_cast<Bf16Vec<kVec>*>(dst + i) = *reinterpret_cast<const Bf16Vec<kVec>*>(src + i);
  }
}

}  // namespace banyan::model::cuda

#endif  // BANYAN_MODEL_CUDA_MEMORY_KERNELS_CUH_

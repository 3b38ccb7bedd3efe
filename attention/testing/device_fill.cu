#include "attention/testing/device_fill.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "sdk/gpu/cuda_status.h"

namespace banyan::attention::testing {
namespace {

__device__ __forceinline__ float HashUniform(uint64_t seed, int64_t i) {
  uint64_t x = seed ^ (static_cast<uint64_t>(i) * 0x9E3779B97F4A7C15ull);
  x ^= x >> 31;
  x *= 0xBF58476D1CE4E5B9ull;
  x ^= x >> 29;
  x *= 0x94D049BB133111EBull;
  x ^= x >> 32;
  return static_cast<float>(x >> 40) * (4.0f / 16777216.0f) - 2.0f;
}

__global__ void FillKernel(void* data, int dtype, int64_t n, uint64_t seed) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    const float v = HashUniform(seed, i);
    if (dtype == 0) {
      static_cast<float*>(data)[i] = v;
    } else if (dtype == 1) {
      static_cast<__nv_bfloat16*>(data)[i] = __float2bfloat16_rn(v);
    } else {
      static_cast<__half*>(data)[i] = __float2half_rn(v);
    }
  }
}

}  // namespace

absl::Status FillUniformDevice(void* data, DType dtype, int64_t n, uint64_t seed, cudaStream_t stream) {
  if (n <= 0) return absl::OkStatus();
  FillKernel<<<1024, 256, 0, stream>>>(data, static_cast<int>(dtype), n, seed);
  BANYAN_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  return absl::OkStatus();
}

}  // namespace banyan::attention::testing

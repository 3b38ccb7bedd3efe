// Device helpers shared by the model/cuda kernels: vector loads and stores of
// bf16 and fp32 (16-byte wide when N allows), a block-wide sum, and the
// grid-stride launch shape. Header-only; device code only.
#ifndef BANYAN_MODEL_CUDA_KERNEL_UTIL_CUH_
#define BANYAN_MODEL_CUDA_KERNEL_UTIL_CUH_

#include <cuda_bf16.h>

#include <cstdint>

namespace banyan::model::cuda {

// Lets a kernel launched after this one with programmatic stream
// serialization (the attention kernel after the QKV epilogue) start its
// prologue now; it waits for this grid's memory before reading it. A no-op
// before sm_90 and for successors launched without the attribute.
__device__ __forceinline__ void AllowDependentLaunch() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

template <int N>
struct alignas(2 * N) Bf16Vec {
  __nv_bfloat16 v[N];
};

// Loads N consecutive bf16 values as float. REQUIRES: p aligned to 2 * N bytes.
template <int N>
__device__ __forceinline__ void LoadBf16(const __nv_bfloat16* p, float (&out)[N]) {
  const Bf16Vec<N> vec = *reinterpret_cast<const Bf16Vec<N>*>(p);
#pragma unroll
  for (int i = 0; i < N; ++i) out[i] = __bfloat162float(vec.v[i]);
}

// Stores N floats as bf16 (round to nearest even). REQUIRES: aligned as above.
template <int N>
__device__ __forceinline__ void StoreBf16(__nv_bfloat16* p, const float (&in)[N]) {
  Bf16Vec<N> vec;
#pragma unroll
  for (int i = 0; i < N; ++i) vec.v[i] = __float2bfloat16_rn(in[i]);
  *reinterpret_cast<Bf16Vec<N>*>(p) = vec;
}

// Stores N floats as a bf16 pair: hi = bf16(x) and, when lo is not null,
// lo = bf16(x - hi) (exact in fp32), so hi + lo keeps ~16 significant bits.
template <int N>
__device__ __forceinline__ void StoreBf16Split(__nv_bfloat16* hi, __nv_bfloat16* lo, const float (&in)[N]) {
  Bf16Vec<N> h, l;
#pragma unroll
  for (int i = 0; i < N; ++i) {
    h.v[i] = __float2bfloat16_rn(in[i]);
    l.v[i] = __float2bfloat16_rn(in[i] - __bfloat162float(h.v[i]));
  }
  *reinterpret_cast<Bf16Vec<N>*>(hi) = h;
  if (lo != nullptr) *reinterpret_cast<Bf16Vec<N>*>(lo) = l;
}

// Loads / stores N floats; 16-byte accesses when N is a multiple of 4.
// REQUIRES: p aligned to 16 bytes when N % 4 == 0.
template <int N>
__device__ __forceinline__ void LoadF32(const float* p, float (&out)[N]) {
  if constexpr (N % 4 == 0) {
#pragma unroll
    for (int i = 0; i < N; i += 4) {
      const float4 v = *reinterpret_cast<const float4*>(p + i);
      out[i] = v.x; out[i + 1] = v.y; out[i + 2] = v.z; out[i + 3] = v.w;
    }
  } else {
#pragma unroll
    for (int i = 0; i < N; ++i) out[i] = p[i];
  }
}

template <int N>
__device__ __forceinline__ void StoreF32(float* p, const float (&in)[N]) {
  if constexpr (N % 4 == 0) {
#pragma unroll
    for (int i = 0; i < N; i += 4) {
      *reinterpret_cast<float4*>(p + i) = make_float4(in[i], in[i + 1], in[i + 2], in[i + 3]);
    }
  } else {
#pragma unroll
    for (int i = 0; i < N; ++i) p[i] = in[i];
  }
}

// Sum of `value` over the whole block; every thread gets the result.
// REQUIRES: blockDim.x a multiple of 32 and at most 1024; called by all threads.
__device__ __forceinline__ float BlockSum(float value) {
  __shared__ float partial[32];
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) value += __shfl_xor_sync(0xffffffffu, value, offset);
  const int warp = threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (lane == 0) partial[warp] = value;
  __syncthreads();
  const int warps = blockDim.x / 32;
  value = lane < warps ? partial[lane] : 0.0f;
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) value += __shfl_xor_sync(0xffffffffu, value, offset);
  return value;
}

// Global thread index and the stride of a grid-stride loop, in 64 bits.
__device__ __forceinline__ int64_t GlobalThread() {
  return static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ __forceinline__ int64_t GridStride() {
  return static_cast<int64_t>(gridDim.x) * blockDim.x;
}

}  // namespace banyan::model::cuda

#endif  // BANYAN_MODEL_CUDA_KERNEL_UTIL_CUH_

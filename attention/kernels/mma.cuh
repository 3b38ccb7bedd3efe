// Thin wrappers over the PTX the attention kernels use: cp.async (16-byte,
// zero-fill), ldmatrix (x4, plain and transposed) and mma.sync m16n8k16 with
// fp32 accumulation for bf16 and fp16 operands. sm_80 and newer.
//
// Fragment layouts of mma.m16n8k16.row.col (g = lane / 4, t = lane % 4):
//   A 16x16: a0 (g, 2t..2t+1) a1 (g+8, 2t..) a2 (g, 2t+8..) a3 (g+8, 2t+8..)
//   B 16x8:  b0 (k = 2t..2t+1, n = g)  b1 (k = 2t+8.., n = g)
//   C 16x8:  c0,c1 (g, 2t..2t+1)  c2,c3 (g+8, 2t..2t+1)
#ifndef BANYAN_ATTENTION_KERNELS_MMA_CUH_
#define BANYAN_ATTENTION_KERNELS_MMA_CUH_

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

namespace banyan::attention::kernels {

// Copies 16 bytes global -> shared asynchronously; when `valid` is false the
// 16 shared bytes are zero-filled and nothing is read.
__device__ __forceinline__ void CpAsync16(void* smem, const void* gmem, bool valid) {
  const unsigned dst = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  const int src_bytes = valid ? 16 : 0;
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(gmem), "r"(src_bytes));
}
__device__ __forceinline__ void CpAsyncCommit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void CpAsyncWait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N)); }

__device__ __forceinline__ void LdMatrixX4(uint32_t (&r)[4], const void* smem) {
  const unsigned a = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(a));
}
__device__ __forceinline__ void LdMatrixX4Trans(uint32_t (&r)[4], const void* smem) {
  const unsigned a = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(a));
}

// c += a . b for one 16x8x16 tile; T is __nv_bfloat16 or __half.
template <typename T>
__device__ __forceinline__ void Mma16816(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  } else {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
}

// Two floats as one register of two 16-bit values (x in the low half).
template <typename T>
__device__ __forceinline__ uint32_t PackPair(float x, float y) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    const __nv_bfloat162 v = __floats2bfloat162_rn(x, y);
    return *reinterpret_cast<const uint32_t*>(&v);
  } else {
    const __half2 v = __floats2half2_rn(x, y);
    return *reinterpret_cast<const uint32_t*>(&v);
  }
}

// Value j (0: the low half) of a register packed by PackPair<T>, as float.
template <typename T>
__device__ __forceinline__ float UnpackPair(uint32_t bits, int j) {
  const uint16_t h = static_cast<uint16_t>(j == 0 ? bits & 0xffffu : bits >> 16);
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    return __uint_as_float(static_cast<uint32_t>(h) << 16);  // bf16 is the high half of a float
  } else {
    return __half2float(__ushort_as_half(h));
  }
}

// Element conversions for every KV / query / output dtype.
__device__ __forceinline__ float ToFloat(float x) { return x; }
__device__ __forceinline__ float ToFloat(__nv_bfloat16 x) { return __bfloat162float(x); }
__device__ __forceinline__ float ToFloat(__half x) { return __half2float(x); }

// Runtime dtype codes (banyan::DType values): 0 f32, 1 bf16, 2 f16.
template <typename T>
__device__ __forceinline__ constexpr int DTypeCode() {
  return std::is_same_v<T, float> ? 0 : std::is_same_v<T, __nv_bfloat16> ? 1 : 2;
}
__device__ __forceinline__ float LoadAny(const void* p, int dtype, int64_t i) {
  if (dtype == 0) return static_cast<const float*>(p)[i];
  if (dtype == 1) return __bfloat162float(static_cast<const __nv_bfloat16*>(p)[i]);
  return __half2float(static_cast<const __half*>(p)[i]);
}
__device__ __forceinline__ void StoreAny(void* p, int dtype, int64_t i, float v) {
  if (dtype == 0) {
    static_cast<float*>(p)[i] = v;
  } else if (dtype == 1) {
    static_cast<__nv_bfloat16*>(p)[i] = __float2bfloat16_rn(v);
  } else {
    static_cast<__half*>(p)[i] = __float2half_rn(v);
  }
}

}  // namespace banyan::attention::kernels

#endif  // BANYAN_ATTENTION_KERNELS_MMA_CUH_

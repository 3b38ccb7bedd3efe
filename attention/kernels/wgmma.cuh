// Thin wrappers over the Hopper (sm_90a) warpgroup PTX the wgmma tree tile
// uses: shared-memory matrix descriptors, wgmma.mma_async with A from
// registers (m64n64k16, m64n128k16 and m64n8k16, fp32 accumulators, bf16 /
// fp16 operands), its fence / commit / wait, and the generic -> async proxy fence.
// Every function here compiles to nothing outside an sm_90a pass
// (BANYAN_WGMMA_ENABLED); callers guard their use with the same macro.
//
// Register layouts (one warpgroup = 4 warps; warp w of the group owns rows
// 16w..16w+15 of the 64-row tile; g = lane / 4, t = lane % 4):
//   A (16-bit, 64x16): per warp the mma.m16n8k16 A fragment,
//     a0 (g, 2t..2t+1) a1 (g+8, 2t..) a2 (g, 2t+8..) a3 (g+8, 2t+8..).
//   D (fp32, 64xN): d[4j + 0..1] = (g, 8j + 2t..2t+1), d[4j + 2..3] = (g+8, same),
//     j = 0 .. N/8 - 1 (the mma.sync C fragment repeated along N).
//
// Shared-memory layout (128-byte swizzle, both operands): a tile of R rows
// of 16-bit elements is cut into column blocks of 64 elements (128 bytes);
// block b holds rows 0..R-1 at 128-byte pitch (R x 128 bytes, 1024-byte
// aligned), and the 16-byte chunk c of row r sits at chunk c ^ (r % 8).
//   K as B (K-major, "N x K" = tokens x D): start = block of the k-step +
//     32 bytes per k-step inside the block; SBO = 1024 (8 token rows);
//     LBO unused (1).
//   V as B (MN-major, "K x N" = tokens x D, transpose bit set): start = 16
//     token rows per k-step (2048 bytes); SBO = 1024 (next 8 tokens), LBO =
//     R x 128 (next 64-column block along N = D).
#ifndef BANYAN_ATTENTION_KERNELS_WGMMA_CUH_
#define BANYAN_ATTENTION_KERNELS_WGMMA_CUH_

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define BANYAN_WGMMA_ENABLED 1
#endif

namespace banyan::attention::kernels {

// Descriptor of an unswizzled K-major operand starting at `smem` (shared
// address space): core matrices (8 rows x 16 bytes, 128 contiguous bytes)
// `lbo` bytes apart along K and `sbo` apart along M / N (multiples of 16).
__device__ __forceinline__ uint64_t PlainSmemDescriptor(const void* smem, uint32_t lbo, uint32_t sbo) {
  const uint32_t addr = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  uint64_t desc = (addr & 0x3FFFFu) >> 4;
  desc |= uint64_t{(lbo >> 4) & 0x3FFFu} << 16;
  desc |= uint64_t{(sbo >> 4) & 0x3FFFu} << 32;
  return desc;  // layout type 0: no swizzle
}

// Descriptor of a 128-byte-swizzled operand starting at `smem` (shared
// address space). lbo / sbo in bytes (multiples of 16).
__device__ __forceinline__ uint64_t SmemDescriptor(const void* smem, uint32_t lbo, uint32_t sbo) {
  return PlainSmemDescriptor(smem, lbo, sbo) | uint64_t{1} << 62;  // 128-byte swizzle
}

// desc with `units` (16-byte units) added to its start address: a 32-bit add
// on the low word (the start address field never carries into the high
// word for offsets inside the shared window), so no 64-bit arithmetic.
__device__ __forceinline__ uint64_t DescriptorPlus(uint64_t desc, uint32_t units) {
  uint64_t out;
  const uint32_t lo = static_cast<uint32_t>(desc) + units, hi = static_cast<uint32_t>(desc >> 32);
  asm("mov.b64 %0, {%1, %2};" : "=l"(out) : "r"(lo), "r"(hi));
  return out;
}

__device__ __forceinline__ void WgmmaFence() {
#ifdef BANYAN_WGMMA_ENABLED
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void WgmmaCommit() {
#ifdef BANYAN_WGMMA_ENABLED
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
#endif
}
template <int N>
__device__ __forceinline__ void WgmmaWait() {
#ifdef BANYAN_WGMMA_ENABLED
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
#endif
}
// Makes this thread's generic-proxy shared-memory writes (cp.async, stores)
// visible to the async proxy (wgmma operand reads); then a barrier.
__device__ __forceinline__ void FenceProxyAsync() {
#ifdef BANYAN_WGMMA_ENABLED
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
#endif
}
// Pins accumulator registers at this point of the program (no compiler
// motion of their reads/writes across an in-flight wgmma).
template <int N>
__device__ __forceinline__ void FenceRegs(float (&d)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

// Operand lists for the asm statements below.
#define BANYAN_F8(d, i) \
  "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3]), "+f"(d[i + 4]), "+f"(d[i + 5]), "+f"(d[i + 6]), \
      "+f"(d[i + 7])
#define BANYAN_F32(d) BANYAN_F8(d, 0), BANYAN_F8(d, 8), BANYAN_F8(d, 16), BANYAN_F8(d, 24)
#define BANYAN_F64(d) BANYAN_F32(d), BANYAN_F8(d, 32), BANYAN_F8(d, 40), BANYAN_F8(d, 48), BANYAN_F8(d, 56)
// d[64 x 64] (+)= a[64 x 16] . B, B from `desc` (16 x 64 as K x N).
// kTransB: B is MN-major (N contiguous). scale_d 0 overwrites d.
template <typename T, int kTransB>
__device__ __forceinline__ void WgmmaN64(float (&d)[32], const uint32_t (&a)[4], uint64_t desc, int scale_d) {
#ifdef BANYAN_WGMMA_ENABLED
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 "
        "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
        "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, "
        "{%32, %33, %34, %35}, %36, p, 1, 1, %38;\n}\n"
        : BANYAN_F32(d)
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(scale_d), "n"(kTransB));
  } else {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 "
        "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
        "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, "
        "{%32, %33, %34, %35}, %36, p, 1, 1, %38;\n}\n"
        : BANYAN_F32(d)
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(scale_d), "n"(kTransB));
  }
#endif
}

// d[64 x 128] (+)= a[64 x 16] . B, B from `desc` (16 x 128 as K x N).
template <typename T, int kTransB>
__device__ __forceinline__ void WgmmaN128(float (&d)[64], const uint32_t (&a)[4], uint64_t desc, int scale_d) {
#ifdef BANYAN_WGMMA_ENABLED
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 "
        "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
        "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
        "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
        "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, "
        "{%64, %65, %66, %67}, %68, p, 1, 1, %70;\n}\n"
        : BANYAN_F64(d)
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(scale_d), "n"(kTransB));
  } else {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 "
        "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
        "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
        "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
        "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, "
        "{%64, %65, %66, %67}, %68, p, 1, 1, %70;\n}\n"
        : BANYAN_F64(d)
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(scale_d), "n"(kTransB));
  }
#endif
}

// d[64 x 8] (+)= a[64 x 16] . B, B from `desc` (16 x 8 as K x N, K-major).
// TensorRowSums (wgmma_tile.cuh) runs it against a block of ones.
template <typename T>
__device__ __forceinline__ void WgmmaN8(float (&d)[4], const uint32_t (&a)[4], uint64_t desc, int scale_d) {
#ifdef BANYAN_WGMMA_ENABLED
#define BANYAN_WGMMA_N8(type)                                     \
  asm volatile(                                                   \
      "{\n.reg .pred p;\nsetp.ne.b32 p, %9, 0;\n"                 \
      "wgmma.mma_async.sync.aligned.m64n8k16.f32." type "." type  \
      " {%0, %1, %2, %3}, {%4, %5, %6, %7}, %8, p, 1, 1, 0;\n}\n" \
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])            \
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(scale_d))
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    BANYAN_WGMMA_N8("bf16");
  } else {
    BANYAN_WGMMA_N8("f16");
  }
#undef BANYAN_WGMMA_N8
#endif
}

// d[64 x N] (+)= a . B for N in {64, 128} (N = the accumulator size * 2).
template <typename T, int kTransB, int kRegs>
__device__ __forceinline__ void Wgmma(float (&d)[kRegs], const uint32_t (&a)[4], uint64_t desc, int scale_d) {
  static_assert(kRegs == 32 || kRegs == 64, "wgmma tile: N must be 64 or 128");
  if constexpr (kRegs == 32) {
    WgmmaN64<T, kTransB>(d, a, desc, scale_d);
  } else {
    WgmmaN128<T, kTransB>(d, a, desc, scale_d);
  }
}

#undef BANYAN_F8
#undef BANYAN_F32
#undef BANYAN_F64

}  // namespace banyan::attention::kernels

#endif  // BANYAN_ATTENTION_KERNELS_WGMMA_CUH_

// Microbenchmark (session 41, issue 4's D 128 tile): the consumer loop of
// the TMA tree kernel at head dim 128 in four forms, two consumer
// warpgroups of 64 packed rows:
//   step64   today's form (tree_tma.cuh tile()): per 64-token stage, S = Q K^T
//            as 8 x m64n64k16 with q fragments in registers (RS), P . V of
//            the stage before issued with it (4 x m64n128k16), the online
//            softmax over 32 scores per thread (wgmma_tile.cuh's functions).
//   step128  FlashAttention-3's block at D 128: per 128-token stage, S as
//            8 x m64n128k16 with q read from shared memory (SS: no q
//            registers, q read once per 128 keys), P . V of the stage before
//            as 8 x m64n128k16, the softmax over 64 scores per thread (one
//            row max, vote and rescale per 128 keys instead of per 64).
//   step128rs step128 with q fragments in registers (S as RS wgmmas).
//   pairs64  (session 42) step128 over today's 64-token stages and ring: per
//            step two stages, S as two chains of 8 x m64n64k16 SS (one per
//            stage, into the two score halves), P . V over both stages' V;
//            the form the kernel could take with its producer unchanged.
// Each form runs first on stages held in shared memory (the loop alone), then
// with the argument `ring` also fed as in the kernel: a producer warpgroup
// (40 registers; one thread issuing bulk copies from the image in L2) and the
// consumers at 232 registers, a ring of 5 x 32 KB (64-token stages, the TMA
// kernel's D 128 depth; also pairs64's) or 3 x 64 KB (128-token stages) beside q, full /
// empty mbarriers as tree_tma.cuh's (K released after S, V after P . V).
// All run over the same 256 random keys (4 stages of 64 or 2 of 128,
// 128-byte swizzle), `tiles` 64-token tiles in all, then write o / l; the
// host checks each against a double-precision reference of attention over
// those 256 keys (a key sequence repeated whole has the same softmax) and
// prints clocks per 64-token tile (both warpgroups' 128 rows: 4.2 MFLOP,
// 1,024 tensor clocks at 4,096 FLOP per clock). ptxas (sm_90a, -Xptxas -v):
// held step64 176 registers, step128 194, step128rs 226, pairs64 194; none
// spilling and no wgmma serialized, ring forms included. What it answers: whether the
// 128-token block's steady loop is enough faster than today's per tile to
// pay for 128-token stages in the kernel (producer boxes, edge masks, 2-3
// stages: PERF_NOTES session 29 item 6, session 41 item 6). The argument
// `parts` takes the 64-token ring apart instead (RingLoop's kMode: 4 slots
// instead of 5, the kernel's early barrier test, no copies at all, one
// release arrival per warpgroup).
// H100, session 42 (clocks per 64-token tile, 132 CTAs; 1 CTA the same):
// held step64 1,204, step128 1,154, step128rs 1,121; ring64x5 1,360,
// ring128x3 1,236 (0.91x), ring128rsx3 1,187 (0.87x); parts: ring64x4 1,303,
// early64x5 1,350, sync64x4 (no copies) 1,337, group64x5 1,292. So the ring
// costs ~130 clocks per step over the held loop, most of it the barriers
// (no copies: still +133), and the 128-token step saves ~9-13% of the loop.
// The per-warpgroup release did not carry over to the kernel in place (no
// row moved), so the kernel's tile is bound elsewhere (PERF_NOTES session 42).
// pairs64 / ringpairs64x5: not run yet (session 42 ran out of device time).
//   nvcc -O3 -std=c++17 -I. -gencode arch=compute_90a,code=sm_90a -Xptxas -v -o tile128 bench/micro/tile128.cu
//   ./tile128 [tiles=4096] [ctas=132] [ring | parts]   (parts: the 64-token ring taken apart, below)
// Built with the benchmarks as micro_tile128 (bench/micro/CMakeLists.txt) where sm_90a is targeted.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "attention/kernels/tma.cuh"
#include "attention/kernels/wgmma_tile.cuh"
#include "bench/micro/micro_check.h"

namespace k = banyan::attention::kernels;
using T = __nv_bfloat16;
constexpr int D = 128, kRows = 128, kKeys = 256, kKSteps = D / 16;
constexpr int kQBytes = kRows * D * 2;  // 32 KB: 2 warpgroups x [2 blocks][64 rows][128 B]
constexpr int kKvBytes = kKeys * D * 2;  // 64 KB per plane
constexpr int kSmemBytes = kQBytes + 2 * kKvBytes + 1024;

// Byte offset of element (row, col) of a tile of `rows` rows in the
// 128-byte swizzled layout of wgmma.cuh (column blocks of 64 elements).
__host__ __device__ inline int Swizzled(int rows, int row, int col) {
  const int block = col / 64, chunk = (col % 64) / 8, within = col % 8;
  return block * rows * 128 + row * 128 + ((chunk ^ (row % 8)) * 16) + within * 2;
}

// Operand lists (wgmma.cuh undefines its own at its end).
#define F8(d, i) \
  "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3]), "+f"(d[i + 4]), "+f"(d[i + 5]), "+f"(d[i + 6]), "+f"(d[i + 7])
#define F64(d) F8(d, 0), F8(d, 8), F8(d, 16), F8(d, 24), F8(d, 32), F8(d, 40), F8(d, 48), F8(d, 56)

// d[64 x 128] = A . B with A (q) from shared memory too: both K-major.
__device__ __forceinline__ void WgmmaN128SS(float (&d)[64], uint64_t a_desc, uint64_t b_desc, int scale_d) {
#ifdef BANYAN_WGMMA_ENABLED
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
      "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
      "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, "
      "%64, %65, p, 1, 1, 0, 0;\n}\n"
      : F64(d)
      : "l"(a_desc), "l"(b_desc), "r"(scale_d));
#endif
}

#define F32(d) F8(d, 0), F8(d, 8), F8(d, 16), F8(d, 24)
// d[64 x 64] = A . B, both from shared memory (K-major).
__device__ __forceinline__ void WgmmaN64SS(float (&d)[32], uint64_t a_desc, uint64_t b_desc, int scale_d) {
#ifdef BANYAN_WGMMA_ENABLED
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, "
      "%32, %33, p, 1, 1, 0, 0;\n}\n"
      : F32(d)
      : "l"(a_desc), "l"(b_desc), "r"(scale_d));
#endif
}

// The shared-memory images of the inputs in global memory, one per stage size:
// q of warpgroup g at g * 16 KB ([2][64][128 B]), then the KV stages from
// kQBytes on: 4 of 64 tokens (K [2][64][128 B], then V; 32 KB each) or 2 of
// 128 tokens (K [2][128][128 B], then V; 64 KB each). The held forms copy
// their image whole into shared memory, the ring forms stream its stages.
__global__ void FillSmemImage(const T* q, const T* kk, const T* v, char* image64, char* image128) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < kRows * D; i += gridDim.x * blockDim.x) {
    const int row = i / D, col = i % D, g = row / 64;
    const T x = q[i];
    *reinterpret_cast<T*>(image64 + g * 16384 + Swizzled(64, row % 64, col)) = x;
    *reinterpret_cast<T*>(image128 + g * 16384 + Swizzled(64, row % 64, col)) = x;
  }
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < kKeys * D; i += gridDim.x * blockDim.x) {
    const int key = i / D, col = i % D;
    const int s64 = key / 64, r64 = key % 64, s128 = key / 128, r128 = key % 128;
    char* b64 = image64 + kQBytes + s64 * 32768;
    char* b128 = image128 + kQBytes + s128 * 65536;
    *reinterpret_cast<T*>(b64 + Swizzled(64, r64, col)) = kk[i];
    *reinterpret_cast<T*>(b64 + 16384 + Swizzled(64, r64, col)) = v[i];
    *reinterpret_cast<T*>(b128 + Swizzled(128, r128, col)) = kk[i];
    *reinterpret_cast<T*>(b128 + 32768 + Swizzled(128, r128, col)) = v[i];
  }
}

// Copies the first `bytes` of `image` into the CTA's shared memory (1024-byte
// aligned base, returned); every thread, then a barrier.
__device__ __forceinline__ char* LoadImage(const char* image, int bytes) {
  extern __shared__ __align__(1024) char smem_raw[];
  char* smem = reinterpret_cast<char*>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t{1023});
  for (int i = threadIdx.x; i < bytes / 16; i += blockDim.x) {
    reinterpret_cast<uint4*>(smem)[i] = reinterpret_cast<const uint4*>(image)[i];
  }
  k::FenceProxyAsync();
  __syncthreads();
  return smem;
}

// o / l of the consumer thread ct's rows into out[128][128] (fp32), CTA 0
// only; clocks of every warpgroup.
template <int kORegs>
__device__ __forceinline__ void Finish(int ct, long long t0, const float (&o)[kORegs], float (&l)[2], float* out,
                                       long long* clocks) {
  const long long t1 = clock64();
  const int group = ct / 128, warp = (ct % 128) / 32, lane = ct % 32;
  const int gq = lane / 4, tq = lane % 4;
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    l[r] += __shfl_xor_sync(0xffffffffu, l[r], 1);
    l[r] += __shfl_xor_sync(0xffffffffu, l[r], 2);
  }
  if (blockIdx.x == 0) {
#pragma unroll
    for (int j = 0; j < kORegs / 4; ++j) {
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const int row = group * 64 + warp * 16 + gq + 8 * r, col = 8 * j + 2 * tq;
        out[row * D + col] = o[j * 4 + r * 2] / l[r];
        out[row * D + col + 1] = o[j * 4 + r * 2 + 1] / l[r];
      }
    }
  }
  if (ct % 128 == 0) clocks[blockIdx.x * 2 + group] = t1 - t0;
}

// A loop's starting state: o = 0, P = 0 (the first step's P . V adds
// nothing), the rows' running max m at -inf (neg_m its -SafeMax) and sum l 0.
template <int kPSteps>
__device__ __forceinline__ void ZeroState(float (&o)[D / 2], uint32_t (&pa)[kPSteps][4], float (&m)[2],
                                          float (&neg_m)[2], float (&l)[2]) {
#pragma unroll
  for (int j = 0; j < D / 2; ++j) o[j] = 0.0f;
#pragma unroll
  for (int j = 0; j < kPSteps * 4; ++j) pa[j / 4][j % 4] = 0u;
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    m[r] = -CUDART_INF_F;
    neg_m[r] = -0.0f;
    l[r] = 0.0f;
  }
}

// Step t's slot of a ring of kSlots (K of step t) and the slot whose V its
// P . V reads (the step before's; at t = 0, where P = 0, its own landed,
// finite V, never an unfilled slot's), as 16-byte units of slot_units each,
// warp-uniform for the wgmma descriptors.
template <int kSlots>
__device__ __forceinline__ void StepSlots(int t, uint32_t slot_units, uint32_t& k_units, uint32_t& v_units) {
  k_units = __shfl_sync(0xffffffffu, (t % kSlots) * slot_units, 0);
  v_units = __shfl_sync(0xffffffffu, (t > 0 ? (t - 1) % kSlots : 0) * slot_units, 0);
}

// Consumer thread ct's q rows as A fragments (the layout of wgmma.cuh) from
// the swizzled image in shared memory.
__device__ __forceinline__ void LoadQFragments(int ct, const char* smem, uint32_t (&qf)[kKSteps][4]) {
  const int group = ct / 128, warp = (ct % 128) / 32, lane = ct % 32;
  const int gq = lane / 4, tq = lane % 4;
  const char* qs = smem + group * 16384;
#pragma unroll
  for (int ks = 0; ks < kKSteps; ++ks) {
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int row = warp * 16 + gq + (j % 2) * 8, col = ks * 16 + tq * 2 + (j / 2) * 8;
      qf[ks][j] = *reinterpret_cast<const uint32_t*>(qs + Swizzled(64, row, col));
    }
  }
}

// Where a loop's stages come from. Held: the kDistinct stages of the image
// sit in shared memory from the start (no producer, no waits): the loop
// alone. Ring: kSlots stages refilled by a producer thread with bulk copies
// from the image in global memory (L2), full / empty mbarriers as in
// tree_tma.cuh (full: one arrival + the stage's bytes; empty per plane: the
// 8 consumer warps, K after S of its step retired, V after its P . V).
template <int kSlotsN>
struct Held {
  static constexpr int kSlots = kSlotsN;
  static constexpr bool kEarly = false;
  __device__ __forceinline__ bool Test(int) const { return true; }
  __device__ __forceinline__ void Wait(int) const {}
  __device__ __forceinline__ void ReleaseK(int) const {}
  __device__ __forceinline__ void ReleaseV(int) const {}
};
// kEarlyN: the loop tests the next stage's full barrier right after issuing
// its products and skips the blocking wait when it had landed (the TMA
// kernel's kEarlyNext at D 128; Loop64 only). kPerGroup: one arrival per
// consumer warpgroup on the empty barriers (its first thread, once its own
// wgmma wait returned: a wgmma is the whole warpgroup's, so its completion
// is every warp's) instead of one per warp after a __syncwarp.
template <int kSlotsN, bool kEarlyN = false, bool kPerGroup = false>
struct Ring {
  static constexpr int kSlots = kSlotsN;
  static constexpr bool kEarly = kEarlyN;
  uint64_t* bars;  // full[kSlots], empty K[kSlots], empty V[kSlots]
  __device__ __forceinline__ bool Test(int step) const {
    return k::MbarrierTest(bars + step % kSlots, static_cast<uint32_t>(step / kSlots) & 1u);
  }
  __device__ __forceinline__ void Wait(int step) const {
    k::MbarrierWait(bars + step % kSlots, static_cast<uint32_t>(step / kSlots) & 1u);
  }
  static constexpr int kArrivals = kPerGroup ? 2 : 8;
  __device__ __forceinline__ void Release(int plane, int step) const {
    if constexpr (!kPerGroup) __syncwarp();
    if (threadIdx.x % (kPerGroup ? 128 : 32) == 0) k::MbarrierArrive(bars + (1 + plane) * kSlots + step % kSlots);
  }
  __device__ __forceinline__ void ReleaseK(int step) const { Release(0, step); }
  __device__ __forceinline__ void ReleaseV(int step) const { Release(1, step); }
};

// Today's form: tree_tma.cuh tile() at D 128 on the unmasked span (q in
// registers, S of stage t with P . V of t - 1, K released after S). `kv`:
// the feed's stage slots of 32 KB (K then V).
template <class Feed>
__device__ __forceinline__ void Loop64(int ct, const char* smem, char* kv, const Feed& feed, int tiles, float scale,
                                       float* out, long long* clocks) {
  const int tq = ct % 4;
  uint32_t qf[kKSteps][4];
  LoadQFragments(ct, smem, qf);
  const uint64_t k_desc0 = k::SmemDescriptor(kv, 16, 1024);
  const uint64_t v_desc0 = k::SmemDescriptor(kv + 16384, 64 * 128, 1024);
  float o[D / 2], m[2], l[2], neg_m[2];
  uint32_t pa[4][4];
  ZeroState(o, pa, m, neg_m, l);
  const int32_t limit[2] = {INT32_MAX, INT32_MAX};
  const long long t0 = clock64();
  bool landed = false;  // Feed::kEarly: whether step t's stage was seen landed during step t - 1
  for (int t = 0; t < tiles; ++t) {
    float s[32];
    uint32_t k_units, v_units;
    StepSlots<Feed::kSlots>(t, 2048, k_units, v_units);
    if (!(Feed::kEarly && landed)) feed.Wait(t);
    k::IssueTileProducts<T>(s, qf, k_desc0, k_units, o, pa, v_desc0, v_units);
    if constexpr (Feed::kEarly) landed = __all_sync(0xffffffffu, t + 1 < tiles && feed.Test(t + 1));
    k::WgmmaWait<1>();
    k::FenceRegs(s);
    feed.ReleaseK(t);
    float factor[2];
    k::SoftmaxTile64(s, 0, false, 0, limit, tq, scale, m, neg_m, l, factor);
    k::WgmmaWait<0>();
    k::FenceRegs(o);
    if (t > 0) feed.ReleaseV(t - 1);
    k::RescaleAndPackP<T>(o, factor, s, pa);
  }
  k::LastTileProduct<T>(o, pa, v_desc0, ((tiles - 1) % Feed::kSlots) * 2048);
  feed.ReleaseV(tiles - 1);
  Finish(ct, t0, o, l, out, clocks);
}

// The row maxima of a 128-token step's 64 scores per thread (32 per row),
// as a tree, into the lazy running max; the factor o must be scaled by.
__device__ __forceinline__ void MoveRowMax128(const float (&s)[64], float scale, float (&m)[2], float (&l)[2],
                                              float (&factor)[2], float (&neg_m)[2]) {
  // Each half (tokens 0-63, 64-127) is a 64-token tile's 32 scores in the same layout: reduced as the kernel does.
  auto max_op = [](float a, float b) { return fmaxf(a, b); };
  float lo[2], hi[2], tile_max[2];
  k::ReduceRows(reinterpret_cast<const float(&)[32]>(s[0]), max_op, lo);
  k::ReduceRows(reinterpret_cast<const float(&)[32]>(s[32]), max_op, hi);
#pragma unroll
  for (int r = 0; r < 2; ++r) tile_max[r] = fmaxf(lo[r], hi[r]);
  bool keep = true;
#pragma unroll
  for (int r = 0; r < 2; ++r) keep = keep && !(tile_max[r] * scale > m[r] + k::kRescaleSlack);
  if (__all_sync(0xffffffffu, keep)) {
    factor[0] = factor[1] = 1.0f;
    return;
  }
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    tile_max[r] = fmaxf(tile_max[r], __shfl_xor_sync(0xffffffffu, tile_max[r], 1));
    tile_max[r] = fmaxf(tile_max[r], __shfl_xor_sync(0xffffffffu, tile_max[r], 2));
    const float m_new = k::LazyMax(m[r], tile_max[r] * scale);
    factor[r] = m_new == m[r] ? 1.0f : k::RescaleFactor(m[r], m_new);
    m[r] = m_new;
    l[r] *= factor[r];
    neg_m[r] = -k::SafeMax(m_new);
  }
}

// o += P . V over a 128-token step (8 k-steps of 16 tokens, 2048 bytes of V
// each; tokens 0-63 from v_lo, 64-127 from v_hi: one 128-token stage's
// halves, or two 64-token stages), one commit group; after the caller's
// WgmmaFence.
__device__ __forceinline__ void ValueProducts128(float (&o)[D / 2], const uint32_t (&pa)[8][4], uint64_t v_desc0,
                                                 uint32_t v_lo, uint32_t v_hi) {
#pragma unroll
  for (int kk = 0; kk < 8; ++kk) {
    k::Wgmma<T, 1>(o, pa[kk], k::DescriptorPlus(v_desc0, (kk < 4 ? v_lo : v_hi) + (kk % 4) * 128), 1);
  }
  k::WgmmaCommit();
}

// FlashAttention-3's D 128 block: 128 tokens per step, q from shared memory
// (kQInRegs: q fragments in registers instead, S as RS wgmmas: what the SS
// form's shared-memory reads of q cost). `kv`: stage slots of 64 KB; with
// kPairs, today's stages of 64 tokens (32 KB), two per step: S as two chains
// of 8 SS m64n64k16 (one per stage, into the step's two score halves), P . V
// over both stages' V (the kernel's ring and producer unchanged).
template <bool kQInRegs, bool kPairs, class Feed>
__device__ __forceinline__ void Loop128(int ct, const char* smem, char* kv, const Feed& feed, int tiles, float scale,
                                        float* out, long long* clocks) {
  static_assert(!(kQInRegs && kPairs), "the pairs form is SS");
  const int group = ct / 128;
  uint32_t qf[kQInRegs ? kKSteps : 1][4];
  if constexpr (kQInRegs) LoadQFragments(ct, smem, qf);
  const uint64_t q_desc = k::SmemDescriptor(smem + group * 16384, 16, 1024);
  const uint64_t k_desc0 = k::SmemDescriptor(kv, 16, 1024);
  const uint64_t v_desc0 = kPairs ? k::SmemDescriptor(kv + 16384, 64 * 128, 1024)
                                  : k::SmemDescriptor(kv + 32768, 128 * 128, 1024);
  // Stage slot units (16 bytes) of tile / step x's slot.
  auto units = [](int x) { return __shfl_sync(0xffffffffu, (x % Feed::kSlots) * (kPairs ? 2048 : 4096), 0); };
  // A feed action (wait, release) on a step's stages: lo, and with kPairs hi.
  auto each = [](int lo, int hi, auto&& action) {
    action(lo);
    if constexpr (kPairs) action(hi);
  };
  float o[D / 2], m[2], l[2], neg_m[2];
  uint32_t pa[8][4];
  ZeroState(o, pa, m, neg_m, l);
  const int steps = tiles / 2;
  const long long t0 = clock64();
  for (int t = 0; t < steps; ++t) {
    float s[64];
    // Feed steps (stages) of this step's K and of the V its P . V reads (the
    // step before's; at t = 0, where P = 0, its own landed, finite V).
    const int k_lo = kPairs ? 2 * t : t, k_hi = kPairs ? 2 * t + 1 : t;
    const int v_lo = t > 0 ? k_lo - (kPairs ? 2 : 1) : k_lo, v_hi = t > 0 ? k_hi - (kPairs ? 2 : 1) : k_hi;
    const uint32_t k_units = units(k_lo), k_units_hi = units(k_hi);
    const uint32_t v_units = units(v_lo), v_units_hi = kPairs ? units(v_hi) : v_units + 4 * 128;
    each(k_lo, k_hi, [&](int x) { feed.Wait(x); });
    k::WgmmaFence();
#pragma unroll
    for (int half = 0; half < (kPairs ? 2 : 1); ++half) {
#pragma unroll
      for (int ks = 0; ks < kKSteps; ++ks) {  // S = q . K^T: q block ks / 4, 32 bytes per k-step
        const uint32_t a_off = (ks / 4) * (64 * 8) + (ks % 4) * 2;
        if constexpr (kPairs) {  // K of each 64-token stage: [2 blocks][64 rows][128 B], into its score half
          WgmmaN64SS(reinterpret_cast<float(&)[32]>(s[32 * half]), k::DescriptorPlus(q_desc, a_off),
                     k::DescriptorPlus(k_desc0, (half == 0 ? k_units : k_units_hi) + a_off), ks > 0 ? 1 : 0);
        } else {  // K of the 128-token stage: [2 blocks][128 rows][128 B]
          const uint32_t b_off = k_units + (ks / 4) * (128 * 8) + (ks % 4) * 2;
          if constexpr (kQInRegs) {
            k::Wgmma<T, 0>(s, qf[ks], k::DescriptorPlus(k_desc0, b_off), ks > 0 ? 1 : 0);
          } else {
            WgmmaN128SS(s, k::DescriptorPlus(q_desc, a_off), k::DescriptorPlus(k_desc0, b_off), ks > 0 ? 1 : 0);
          }
        }
      }
    }
    k::WgmmaCommit();
    ValueProducts128(o, pa, v_desc0, v_units, v_units_hi);
    k::WgmmaWait<1>();
    k::FenceRegs(s);
    each(k_lo, k_hi, [&](int x) { feed.ReleaseK(x); });
    float factor[2];
    MoveRowMax128(s, scale, m, l, factor, neg_m);
#pragma unroll
    for (int i = 0; i < 64; ++i) s[i] = k::FastExp2(fmaf(s[i], scale, neg_m[(i % 4) / 2]));
    float sum[2] = {0.0f, 0.0f};
#pragma unroll
    for (int i = 0; i < 64; i += 8) {
      sum[0] += (s[i] + s[i + 1]) + (s[i + 4] + s[i + 5]);
      sum[1] += (s[i + 2] + s[i + 3]) + (s[i + 6] + s[i + 7]);
    }
    l[0] += sum[0];
    l[1] += sum[1];
    k::WgmmaWait<0>();
    k::FenceRegs(o);
    if (t > 0) each(v_lo, v_hi, [&](int x) { feed.ReleaseV(x); });
    if (factor[0] != 1.0f || factor[1] != 1.0f) k::MultiplyRows(o, factor);
#pragma unroll
    for (int nt = 0; nt < 16; ++nt) {
      pa[nt / 2][(nt % 2) * 2 + 0] = k::PackPair<T>(s[nt * 4 + 0], s[nt * 4 + 1]);
      pa[nt / 2][(nt % 2) * 2 + 1] = k::PackPair<T>(s[nt * 4 + 2], s[nt * 4 + 3]);
    }
  }
  const int last_lo = kPairs ? 2 * steps - 2 : steps - 1, last_hi = kPairs ? 2 * steps - 1 : steps - 1;
  const uint32_t last = units(last_lo), last_hi_units = kPairs ? units(last_hi) : last + 4 * 128;
  k::FenceRegs(o);
  k::WgmmaFence();
  ValueProducts128(o, pa, v_desc0, last, last_hi_units);
  k::WgmmaWait<0>();
  k::FenceRegs(o);
  each(last_lo, last_hi, [&](int x) { feed.ReleaseV(x); });
  Finish(ct, t0, o, l, out, clocks);
}

// The forms: 0 step64, 1 step128 (q SS), 2 step128rs (q in registers), 3
// pairs64 (128-token steps over 64-token stages, q SS).
template <int kForm>
inline constexpr int kStageTokens = kForm == 0 || kForm == 3 ? 64 : 128;
template <int kForm>
inline constexpr int kStageBytes = 2 * kStageTokens<kForm> * D * 2;
// Ring slots: as many stages as fit beside q (227 KB): 5 x 32 KB (the TMA
// kernel's D 128 depth) or 3 x 64 KB.
template <int kForm>
inline constexpr int kRingSlots = kStageTokens<kForm> == 64 ? 5 : 3;
template <int kForm>
inline constexpr int kRingSmemBytes = kQBytes + kRingSlots<kForm> * kStageBytes<kForm> + 3 * kRingSlots<kForm> * 8 + 1024;
static_assert(kRingSmemBytes<1> <= 227 * 1024);
inline constexpr int kRing64x4SmemBytes = kQBytes + 4 * kStageBytes<0> + 3 * 4 * 8 + 1024;

template <int kForm, class Feed>
__device__ __forceinline__ void RunForm(int ct, const char* smem, char* kv, const Feed& feed, int tiles, float scale,
                                        float* out, long long* clocks) {
  if constexpr (kForm == 0) {
    Loop64(ct, smem, kv, feed, tiles, scale, out, clocks);
  } else {
    Loop128<kForm == 2, kForm == 3>(ct, smem, kv, feed, tiles, scale, out, clocks);
  }
}

// Two consumer warpgroups on the image's distinct stages, held in shared memory.
template <int kForm>
__global__ void __launch_bounds__(256, 1) HeldLoop(const char* image, int tiles, float scale, float* out,
                                                   long long* clocks) {
#ifdef BANYAN_WGMMA_ENABLED
  char* smem = LoadImage(image, kQBytes + 2 * kKvBytes);
  RunForm<kForm>(static_cast<int>(threadIdx.x), smem, smem + kQBytes, Held<kKeys / kStageTokens<kForm>>{}, tiles,
                 scale, out, clocks);
#endif
}

// A producer warpgroup (one thread copies, 40 registers) and two consumer
// warpgroups (232 registers), as the TMA kernel splits them; the producer
// copies the image's distinct stages in turn into the ring.
// kMode (step64 only, to take the ring's cost apart): 0 as above; 1 the
// same with the early test (Ring::kEarly); 2 no copies: the kSlots = 4 slots
// hold the image's 4 stages from the start and the producer only cycles the
// barriers (a plain arrival per full barrier), so only the waits and
// releases remain; 3 copies, one release arrival per warpgroup.
template <int kForm, int kSlots = kRingSlots<kForm>, int kMode = 0>
__global__ void __launch_bounds__(384, 1) RingLoop(const char* image, int tiles, float scale, float* out,
                                                   long long* clocks) {
#ifdef BANYAN_WGMMA_ENABLED
  static_assert(kMode == 0 || kForm == 0, "the parts are step64's");
  static_assert(kMode != 2 || kSlots == kKeys / kStageTokens<kForm>, "no copies: the slots are the image's stages");
  constexpr int kBytes = kStageBytes<kForm>;
  using Feed = Ring<kSlots, kMode == 1, kMode == 3>;
  extern __shared__ __align__(1024) char smem_raw[];
  char* base = reinterpret_cast<char*>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t{1023});
  char* kv = base + kQBytes;
  uint64_t* bars = reinterpret_cast<uint64_t*>(kv + kSlots * kBytes);
  if (threadIdx.x == 0) {
    for (int i = 0; i < kSlots; ++i) {
      k::MbarrierInit(bars + i, 1);
      k::MbarrierInit(bars + kSlots + i, Feed::kArrivals);
      k::MbarrierInit(bars + 2 * kSlots + i, Feed::kArrivals);
    }
    k::FenceMbarrierInit();
  }
  // q (and without copies the stages too); its barrier also publishes the mbarriers
  char* smem = LoadImage(image, kMode == 2 ? kQBytes + kSlots * kBytes : kQBytes);
  const int steps = kStageTokens<kForm> == 64 ? tiles : tiles / 2;  // stages the producer copies
  if (threadIdx.x < 128) {
    k::ShrinkRegisters<40>();
    if (threadIdx.x == 0) {
      constexpr int kDistinct = kKeys / kStageTokens<kForm>;
      for (int v = 0; v < steps; ++v) {
        const int slot = v % kSlots;
        const uint32_t phase = static_cast<uint32_t>(v / kSlots) & 1u;
        k::MbarrierWait(bars + kSlots + slot, phase ^ 1u);
        k::MbarrierWait(bars + 2 * kSlots + slot, phase ^ 1u);
        if constexpr (kMode == 2) {
          k::MbarrierArrive(bars + slot);
          continue;
        }
        k::MbarrierArriveExpectTx(bars + slot, kBytes);
        const char* src = image + kQBytes + (v % kDistinct) * kBytes;
        k::BulkCopyToShared(kv + slot * kBytes, src, kBytes / 2, bars + slot);
        k::BulkCopyToShared(kv + slot * kBytes + kBytes / 2, src + kBytes / 2, kBytes / 2, bars + slot);
      }
    }
    return;
  }
  k::GrowRegisters<232>();
  RunForm<kForm>(static_cast<int>(threadIdx.x) - 128, smem, kv, Feed{bars}, tiles, scale, out, clocks);
#endif
}

int main(int argc, char** argv) {
  const int tiles = argc > 1 ? std::atoi(argv[1]) : 4096, ctas = argc > 2 ? std::atoi(argv[2]) : 132;
  if (tiles < 4 || tiles % 4 != 0) {
    std::fprintf(stderr, "tiles must be a positive multiple of 4 (every form walks all 256 keys)\n");
    return 2;
  }
  std::mt19937 rng(41);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<T> q(kRows * D), kk(kKeys * D), v(kKeys * D);
  std::vector<float> qf(q.size()), kf(kk.size()), vf(v.size());
  for (size_t i = 0; i < q.size(); ++i) qf[i] = __bfloat162float(q[i] = __float2bfloat16(normal(rng)));
  for (size_t i = 0; i < kk.size(); ++i) kf[i] = __bfloat162float(kk[i] = __float2bfloat16(normal(rng)));
  for (size_t i = 0; i < v.size(); ++i) vf[i] = __bfloat162float(v[i] = __float2bfloat16(normal(rng)));
  const float softmax_scale = 1.0f / std::sqrt(static_cast<float>(D));
  // Reference: attention of every row over the 256 keys, in double.
  std::vector<double> ref(kRows * D);
  for (int r = 0; r < kRows; ++r) {
    std::vector<double> w(kKeys);
    double mx = -1e300, sum = 0;
    for (int j = 0; j < kKeys; ++j) {
      double dot = 0;
      for (int c = 0; c < D; ++c) dot += double{qf[r * D + c]} * kf[j * D + c];
      w[j] = dot * softmax_scale;
      mx = std::max(mx, w[j]);
    }
    for (int j = 0; j < kKeys; ++j) sum += (w[j] = std::exp(w[j] - mx));
    for (int c = 0; c < D; ++c) {
      double acc = 0;
      for (int j = 0; j < kKeys; ++j) acc += w[j] * vf[j * D + c];
      ref[r * D + c] = acc / sum;
    }
  }
  T *dq, *dk, *dv;
  char *img64, *img128;
  float* dout;
  long long* dclk;
  MICRO_CHECK(cudaMalloc(&dq, q.size() * 2));
  MICRO_CHECK(cudaMalloc(&dk, kk.size() * 2));
  MICRO_CHECK(cudaMalloc(&dv, v.size() * 2));
  MICRO_CHECK(cudaMalloc(&img64, kQBytes + 2 * kKvBytes));
  MICRO_CHECK(cudaMalloc(&img128, kQBytes + 2 * kKvBytes));
  MICRO_CHECK(cudaMalloc(&dout, kRows * D * 4));
  MICRO_CHECK(cudaMalloc(&dclk, ctas * 2 * sizeof(long long)));
  MICRO_CHECK(cudaMemcpy(dq, q.data(), q.size() * 2, cudaMemcpyHostToDevice));
  MICRO_CHECK(cudaMemcpy(dk, kk.data(), kk.size() * 2, cudaMemcpyHostToDevice));
  MICRO_CHECK(cudaMemcpy(dv, v.data(), v.size() * 2, cudaMemcpyHostToDevice));
  FillSmemImage<<<64, 256>>>(dq, dk, dv, img64, img128);
  MICRO_CHECK(cudaGetLastError());
  const float scale = softmax_scale * 1.4426950408889634f;
  cudaEvent_t e0, e1;
  MICRO_CHECK(cudaEventCreate(&e0));
  MICRO_CHECK(cudaEventCreate(&e1));
  // The variants: each form held in shared memory, then (argument "ring") fed through a ring.
  using Kernel = void (*)(const char*, int, float, float*, long long*);
  struct Variant {
    const char* name;
    Kernel kernel;
    const char* image;
    int threads, smem;
  };
  std::vector<Variant> variants = {{"step64", HeldLoop<0>, img64, 256, kSmemBytes},
                                   {"step128", HeldLoop<1>, img128, 256, kSmemBytes},
                                   {"step128rs", HeldLoop<2>, img128, 256, kSmemBytes},
                                   {"pairs64", HeldLoop<3>, img64, 256, kSmemBytes}};
  if (argc > 3 && std::string(argv[3]) == "ring") {
    variants.push_back({"ring64x5", RingLoop<0>, img64, 384, kRingSmemBytes<0>});
    variants.push_back({"ring128x3", RingLoop<1>, img128, 384, kRingSmemBytes<1>});
    variants.push_back({"ring128rsx3", RingLoop<2>, img128, 384, kRingSmemBytes<2>});
    variants.push_back({"ringpairs64x5", RingLoop<3>, img64, 384, kRingSmemBytes<3>});
  }
  if (argc > 3 && std::string(argv[3]) == "parts") {  // the 64-token ring's cost taken apart
    variants.push_back({"ring64x5", RingLoop<0>, img64, 384, kRingSmemBytes<0>});
    variants.push_back({"ring64x4", RingLoop<0, 4>, img64, 384, kRing64x4SmemBytes});
    variants.push_back({"early64x5", RingLoop<0, 5, 1>, img64, 384, kRingSmemBytes<0>});
    variants.push_back({"sync64x4", RingLoop<0, 4, 2>, img64, 384, kRing64x4SmemBytes});
    variants.push_back({"group64x5", RingLoop<0, 5, 3>, img64, 384, kRingSmemBytes<0>});
    variants.push_back({"group64x4", RingLoop<0, 4, 3>, img64, 384, kRing64x4SmemBytes});
  }
  int failures = 0;
  for (const Variant& var : variants) {
    MICRO_CHECK(cudaFuncSetAttribute(var.kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, var.smem));
    for (int rep = 0; rep < 3; ++rep) {
      MICRO_CHECK(cudaMemset(dout, 0xFF, kRows * D * 4));  // poisoned: NaN unless written
      MICRO_CHECK(cudaEventRecord(e0));
      var.kernel<<<ctas, var.threads, var.smem>>>(var.image, tiles, scale, dout, dclk);
      MICRO_CHECK(cudaEventRecord(e1));
      MICRO_CHECK(cudaGetLastError());
      MICRO_CHECK(cudaEventSynchronize(e1));
      float ms = 0;
      MICRO_CHECK(cudaEventElapsedTime(&ms, e0, e1));
      std::vector<float> out(kRows * D);
      std::vector<long long> clk(ctas * 2);
      MICRO_CHECK(cudaMemcpy(out.data(), dout, out.size() * 4, cudaMemcpyDeviceToHost));
      MICRO_CHECK(cudaMemcpy(clk.data(), dclk, clk.size() * sizeof(long long), cudaMemcpyDeviceToHost));
      double err = 0, norm = 0;
      bool finite = true;
      for (size_t i = 0; i < out.size(); ++i) {
        finite = finite && std::isfinite(out[i]);
        err += (out[i] - ref[i]) * (out[i] - ref[i]);
        norm += ref[i] * ref[i];
      }
      const double rel = std::sqrt(err / norm);
      const bool ok = finite && rel < 1e-2;
      failures += ok ? 0 : 1;
      long long clk_max = 0, clk_sum = 0;
      for (long long c : clk) {
        clk_max = std::max(clk_max, c);
        clk_sum += c;
      }
      std::printf("%-11s rep %d: %7.1f clk per 64-token tile (mean over warpgroups), %7.1f max; %8.3f ms, %.3f us per "
                  "tile per CTA; rel err %.2e %s\n",
                  var.name, rep, static_cast<double>(clk_sum) / clk.size() / tiles,
                  static_cast<double>(clk_max) / tiles, ms, 1000.0 * ms / tiles, rel, ok ? "ok" : "FAILED");
    }
  }
  return failures == 0 ? 0 : 1;
}

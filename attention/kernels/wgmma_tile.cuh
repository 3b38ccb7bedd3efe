// The per-tile math of the wgmma tree items (tree_wgmma.cuh and
// tree_tma.cuh): the two products of a 64-token KV tile and the online
// softmax between them, for the two rows a thread holds of a 64-row score
// tile in the wgmma D layout (wgmma.cuh: s[4j + 0..1] row g, s[4j + 2..3] row
// g + 8, tokens 8j + 2t .. 8j + 2t + 1). The state math is state.cuh's.
#ifndef BANYAN_ATTENTION_KERNELS_WGMMA_TILE_CUH_
#define BANYAN_ATTENTION_KERNELS_WGMMA_TILE_CUH_

#include <math_constants.h>

#include <cstdint>
#include <type_traits>

#include "attention/kernels/mma.cuh"
#include "attention/kernels/state.cuh"
#include "attention/kernels/wgmma.cuh"
#include "attention/work_plan.h"

namespace banyan::attention::kernels {

// The products of a 64-token KV tile, each one commit group, issued after
// the caller's WgmmaFence: S = Q . K^T of the tile whose K starts `k_units`
// (16-byte units) after k_desc0's (K-major B: block ks / 4 of 64 tokens x
// 128 bytes, 32 bytes per k-step inside it), and P . V with P in pa and V at
// `v_units` after v_desc0's (MN-major B: 16 token rows, 2048 bytes, per
// k-step; the next 64 columns of D at the descriptor's LBO). s_scale_d:
// whether S's first k-step adds to s (0 overwrites it, what the kernels
// want; a run-time 0 the compiler cannot see keeps s in registers of its own
// across tiles, bench/micro/tile_loop.cu).
template <typename T, int kKSteps>
__device__ __forceinline__ void ScoreProducts(float (&s)[32], const uint32_t (&qf)[kKSteps][4], uint64_t k_desc0,
                                              uint32_t k_units, int s_scale_d) {
#pragma unroll
  for (int ks = 0; ks < kKSteps; ++ks) {
    const uint32_t off = k_units + (ks / 4) * (kKvTile * 8) + (ks % 4) * 2;
    Wgmma<T, 0>(s, qf[ks], DescriptorPlus(k_desc0, off), ks > 0 ? 1 : s_scale_d);
  }
  WgmmaCommit();
}

// o (a 64-row accumulator in the D layout: P . V's, or TensorRowSums') times
// each row's factor.
template <int kRegs>
__device__ __forceinline__ void MultiplyRows(float (&o)[kRegs], const float (&factor)[2]) {
#pragma unroll
  for (int i = 0; i < kRegs / 4; ++i) {
    o[i * 4 + 0] *= factor[0];
    o[i * 4 + 1] *= factor[0];
    o[i * 4 + 2] *= factor[1];
    o[i * 4 + 3] *= factor[1];
  }
}

// Where a tile's probability row sums are added up. NoTensorSums: on the
// CUDA cores, into the caller's l (AddRowSums, in the softmax).
struct NoTensorSums {
  static constexpr bool kOn = false;
  NoTensorSums() = default;
  __device__ __forceinline__ explicit NoTensorSums(const void*) {}
  template <typename T>
  __device__ __forceinline__ void Issue(const uint32_t (&)[4][4]) {}
  __device__ __forceinline__ void Fence() {}
  __device__ __forceinline__ void Scale(const float (&)[2]) {}
  __device__ __forceinline__ void AddTo(float (&)[2], int) const {}
};

// TensorRowSums: on the tensor cores, as P . 1 in P . V's commit group (four
// m64n8k16 wgmmas against a 16 x 8 block of ones in shared memory, FillOnes)
// into acc, which the caller rescales with o: the 32 FADDs per thread and
// tile leave the softmax. The sums are of P as packed (16-bit): the weights
// P . V multiplies V by. acc holds the m64n8 D layout (acc[0..1] row g,
// acc[2..3] row g + 8), every column the row's whole sum.
struct TensorRowSums {
  static constexpr bool kOn = true;
  static constexpr int kOnesBytes = 256;  // two core matrices (k 0..7, 8..15) of 8 rows x 16 bytes
  float acc[4];
  uint64_t ones;  // OnesDescriptor

  __device__ __forceinline__ explicit TensorRowSums(const void* ones_smem) : acc{}, ones(OnesDescriptor(ones_smem)) {}
  // The ones for `ones_smem` (kOnesBytes, 16-byte aligned), written by
  // threads 0..63 of the caller; each writer then fences the async proxy, and
  // a barrier orders the block before any wgmma reads it.
  template <typename T>
  __device__ __forceinline__ static void FillOnes(void* ones_smem, int thread) {
    static_assert(kOnesBytes == 64 * 4);
    const uint32_t one = std::is_same_v<T, __nv_bfloat16> ? 0x3F803F80u : 0x3C003C00u;
    if (thread < 64) {
      reinterpret_cast<uint32_t*>(ones_smem)[thread] = one;
      FenceProxyAsync();
    }
  }
  __device__ __forceinline__ static uint64_t OnesDescriptor(const void* ones_smem) {
    return PlainSmemDescriptor(ones_smem, 128, 128);  // either stride stays inside the block
  }
  template <typename T>
  __device__ __forceinline__ void Issue(const uint32_t (&pa)[4][4]) {
#pragma unroll
    for (int kk = 0; kk < 4; ++kk) WgmmaN8<T>(acc, pa[kk], ones, 1);
  }
  __device__ __forceinline__ void Fence() { FenceRegs(acc); }
  __device__ __forceinline__ void Scale(const float (&factor)[2]) { MultiplyRows(acc, factor); }
  // Into l, which StoreRowPartialsAt sums over the row's 4 threads: the row's
  // sum once, from the thread with tq == 0.
  __device__ __forceinline__ void AddTo(float (&l)[2], int tq) const {
#pragma unroll
    for (int r = 0; r < 2; ++r) l[r] += tq == 0 ? acc[r * 2] : 0.0f;
  }
};

template <typename T, int kORegs, typename Sums>
__device__ __forceinline__ void ValueProducts(float (&o)[kORegs], const uint32_t (&pa)[4][4], uint64_t v_desc0,
                                              uint32_t v_units, Sums& sums) {
#pragma unroll
  for (int kk = 0; kk < 4; ++kk) Wgmma<T, 1>(o, pa[kk], DescriptorPlus(v_desc0, v_units + kk * 128), 1);
  sums.template Issue<T>(pa);
  WgmmaCommit();
}

// S of this tile, then P . V of the previous one (with sums' P . 1): two
// commit groups, S first. s_scale_d: ScoreProducts'.
template <typename T, int kKSteps, int kORegs, typename Sums = NoTensorSums>
__device__ __forceinline__ void IssueTileProducts(float (&s)[32], const uint32_t (&qf)[kKSteps][4], uint64_t k_desc0,
                                                  uint32_t k_units, float (&o)[kORegs], const uint32_t (&pa)[4][4],
                                                  uint64_t v_desc0, uint32_t v_units, Sums&& sums = Sums{},
                                                  int s_scale_d = 0) {
  WgmmaFence();
  ScoreProducts<T>(s, qf, k_desc0, k_units, s_scale_d);
  ValueProducts<T>(o, pa, v_desc0, v_units, sums);
}

// The two halves of IssueTileProducts on their own, for a loop that issues
// S of the next tile in the middle of this tile's softmax (TmaConsume's
// pipelined span).
template <typename T, int kKSteps>
__device__ __forceinline__ void IssueScores(float (&s)[32], const uint32_t (&qf)[kKSteps][4], uint64_t k_desc0,
                                            uint32_t k_units) {
  WgmmaFence();
  ScoreProducts<T>(s, qf, k_desc0, k_units, 0);
}
template <typename T, int kORegs, typename Sums = NoTensorSums>
__device__ __forceinline__ void IssueValues(float (&o)[kORegs], const uint32_t (&pa)[4][4], uint64_t v_desc0,
                                            uint32_t v_units, Sums&& sums = Sums{}) {
  WgmmaFence();
  ValueProducts<T>(o, pa, v_desc0, v_units, sums);
}

// P . V of an item's last tile (nothing else in flight), retired on return.
template <typename T, int kORegs, typename Sums = NoTensorSums>
__device__ __forceinline__ void LastTileProduct(float (&o)[kORegs], const uint32_t (&pa)[4][4], uint64_t v_desc0,
                                                uint32_t v_units, Sums&& sums = Sums{}) {
  FenceRegs(o);
  sums.Fence();
  IssueValues<T>(o, pa, v_desc0, v_units, sums);
  WgmmaWait<0>();
  FenceRegs(o);
  sums.Fence();
}

// 2^x with one MUFU op (flushes denormal results to 0; 2^-inf = 0). For
// probabilities that end up in 16-bit P anyway.
__device__ __forceinline__ float FastExp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

// The tile's 16 values of each of this thread's two rows (element i is row
// (i % 4) / 2's) reduced by `op` as a tree of four partial results per row:
// depth 5 instead of a chain of 16 dependent ops, which in-order issue would
// leave on the tile's serial path.
template <typename Op>
__device__ __forceinline__ void ReduceRows(const float (&v)[32], Op op, float (&out)[2]) {
  float part[2][4];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
#pragma unroll
    for (int c = 0; c < 4; ++c) part[r][c] = op(v[c * 4 + r * 2], v[c * 4 + r * 2 + 1]);
  }
#pragma unroll
  for (int i = 16; i < 32; ++i) part[(i % 4) / 2][(i / 4) % 4] = op(part[(i % 4) / 2][(i / 4) % 4], v[i]);
#pragma unroll
  for (int r = 0; r < 2; ++r) out[r] = op(op(part[r][0], part[r][1]), op(part[r][2], part[r][3]));
}

// The tile's row maxima (over the 4 threads of a row) into the running max m
// (lazily: LazyMax, state.cuh); l and factor follow. neg_m is the caller's
// -SafeMax(m) (-0 for rows still at -inf), kept beside m from the item's
// start and moved only with it, so that tiles that keep m do not redo it.
__device__ __forceinline__ void MoveRowMax(const float (&s)[32], float scale, float (&m)[2], float (&l)[2],
                                           float (&factor)[2], float (&neg_m)[2]) {
  // A tree, not a chain of 16 dependent FMNMX per row (H100: headline -2%,
  // PERF_NOTES session 30).
  float tile_max[2];
  ReduceRows(s, [](float a, float b) { return fmaxf(a, b); }, tile_max);
  // When no thread's own maximum would move its row's max (LazyMax keeps m:
  // then neither does the row's, the max of its 4 threads'), one vote of the
  // warp replaces the two shuffle rounds; the common case once the item's
  // first tiles have set m (H100: D 64 engine rows 2-8% faster, PERF_NOTES
  // session 31).
  bool keep = true;
#pragma unroll
  for (int r = 0; r < 2; ++r) keep = keep && !(tile_max[r] * scale > m[r] + kRescaleSlack);
  if (__all_sync(0xffffffffu, keep)) {
#pragma unroll
    for (int r = 0; r < 2; ++r) factor[r] = 1.0f;
    return;
  }
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    tile_max[r] = fmaxf(tile_max[r], __shfl_xor_sync(0xffffffffu, tile_max[r], 1));
    tile_max[r] = fmaxf(tile_max[r], __shfl_xor_sync(0xffffffffu, tile_max[r], 2));
    const float m_new = LazyMax(m[r], tile_max[r] * scale);
    factor[r] = m_new == m[r] ? 1.0f : RescaleFactor(m[r], m_new);
    m[r] = m_new;
    l[r] *= factor[r];
    neg_m[r] = -SafeMax(m_new);
  }
}

// The softmax of one tile of raw scores (SoftmaxTile64To below, without its
// mask) in two steps, so that s is free between them: SoftmaxExponents moves
// m, l and factor and writes s * scale - m into pr (pr may be s; s is not
// read after it); SoftmaxProbabilities turns pr into exp2(pr), and
// AddRowSums adds it to l.
__device__ __forceinline__ void SoftmaxExponents(const float (&s)[32], float (&pr)[32], float scale, float (&m)[2],
                                                 float (&neg_m)[2], float (&l)[2], float (&factor)[2]) {
  MoveRowMax(s, scale, m, l, factor, neg_m);
#pragma unroll
  for (int i = 0; i < 32; ++i) pr[i] = fmaf(s[i], scale, neg_m[(i % 4) / 2]);
}
__device__ __forceinline__ void SoftmaxProbabilities(float (&pr)[32]) {
#pragma unroll
  for (int i = 0; i < 32; ++i) pr[i] = FastExp2(pr[i]);
}
// The row sums as a tree (ReduceRows), not two chains of 16 dependent FADDs
// between the tile's exponentials and the next tile's products (H200: D 64
// L1024 P16384 -5%, PERF_NOTES session 31).
__device__ __forceinline__ void AddRowSums(const float (&pr)[32], float (&l)[2]) {
  float sum[2];
  ReduceRows(pr, [](float a, float b) { return a + b; }, sum);
#pragma unroll
  for (int r = 0; r < 2; ++r) l[r] += sum[r];
}

// One tile of raw scores s (token tok0 + column): when `mask`, scores of
// tokens outside [kv_begin, limit[r]) become -inf; then the running max m
// (lazily: LazyMax, state.cuh; neg_m with it, MoveRowMax) and sum l of each
// row move (row max over the 4 threads of a row), s becomes
// exp2(s * scale - m) (one FFMA and one MUFU per score), and factor[r] is what
// the row's accumulator must be multiplied by (1 when its max did not move).
// scale: softmax scale * log2(e) (> 0). SoftmaxTile64To writes the
// probabilities into pr instead (pr may be s).
template <bool kAddSums = true>
__device__ __forceinline__ void SoftmaxTile64To(float (&s)[32], float (&pr)[32], int32_t tok0, bool mask,
                                                int32_t kv_begin, const int32_t (&limit)[2], int tq, float scale,
                                                float (&m)[2], float (&neg_m)[2], float (&l)[2],
                                                float (&factor)[2]) {
  if (mask) {
#pragma unroll
    for (int i = 0; i < 32; ++i) {
      const int32_t tok = tok0 + (i / 4) * 8 + tq * 2 + (i % 2);
      if (tok < kv_begin || tok >= limit[(i % 4) / 2]) s[i] = -CUDART_INF_F;
    }
  }
  MoveRowMax(s, scale, m, l, factor, neg_m);
#pragma unroll
  for (int i = 0; i < 32; ++i) pr[i] = FastExp2(fmaf(s[i], scale, neg_m[(i % 4) / 2]));
  if constexpr (kAddSums) AddRowSums(pr, l);
}

// kAddSums: false when the row sums come from the tensor cores
// (TensorRowSums).
template <bool kAddSums = true>
__device__ __forceinline__ void SoftmaxTile64(float (&s)[32], int32_t tok0, bool mask, int32_t kv_begin,
                                              const int32_t (&limit)[2], int tq, float scale, float (&m)[2],
                                              float (&neg_m)[2], float (&l)[2], float (&factor)[2]) {
  SoftmaxTile64To<kAddSums>(s, s, tok0, mask, kv_begin, limit, tq, scale, m, neg_m, l, factor);
}

// P (16-bit, the A layout of P . V's four k-steps) from the probabilities pr.
template <typename T>
__device__ __forceinline__ void PackP(const float (&pr)[32], uint32_t (&pa)[4][4]) {
#pragma unroll
  for (int nt = 0; nt < 8; ++nt) {
    // n-block nt covers tokens 8nt..8nt+7: k-step nt / 2, low or high half.
    pa[nt / 2][(nt % 2) * 2 + 0] = PackPair<T>(pr[nt * 4 + 0], pr[nt * 4 + 1]);
    pa[nt / 2][(nt % 2) * 2 + 1] = PackPair<T>(pr[nt * 4 + 2], pr[nt * 4 + 3]);
  }
}

// MultiplyRows (and the tensor row sums' rescale), skipped when neither
// row's max moved; then PackP from s.
template <typename T, int kRegs, typename Sums = NoTensorSums>
__device__ __forceinline__ void RescaleAndPackP(float (&o)[kRegs], const float (&factor)[2], const float (&s)[32],
                                                uint32_t (&pa)[4][4], Sums&& sums = Sums{}) {
  if (factor[0] != 1.0f || factor[1] != 1.0f) {
    MultiplyRows(o, factor);
    sums.Scale(factor);
  }
  PackP<T>(s, pa);
}

}  // namespace banyan::attention::kernels

#endif  // BANYAN_ATTENTION_KERNELS_WGMMA_TILE_CUH_

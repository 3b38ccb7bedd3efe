// SparQ attention on the GPU (sparq_args.h for the math; sparq.cu runs these
// eight kernels in order on one stream, after zeroing the histograms). Scores are kept in the log2 domain
// (state.cuh): l2 = log2(e) * scale * q . k.
//   SparqApproxLogits  grid (1024-token chunk, KV head, sequence): step 1 (the
//                      r components of the group's summed |q|, each CTA on
//                      its own) and step 2's logits over the transposed K copy
//                      (r x 2 bytes per token, 4 tokens per 8-byte load), plus
//                      per chunk and head the max and the sum of exp2.
//   SparqScores        same grid: each head's log2-sum-exp from the chunks,
//                      then per token the summed approximate softmax over the
//                      group (+inf in the local window), and a 4096-bin
//                      histogram of its top 12 bits (non-negative floats order
//                      as their bits).
//   SparqRefine x 2, SparqCount, SparqWrite
//                      grid (8192-token chunk, KV head, sequence): the exact
//                      k-th largest score by two more histogram levels (12 +
//                      8 bits, SparqCutAfter), each chunk's counts above and
//                      at it, then each chunk writes its selected positions
//                      ascending at their place (ties at the threshold to the
//                      lower positions) and its share of alpha per head.
//   SparqGatherAttend  grid (position chunk, KV head, sequence): exact
//                      attention of the group's heads over kSparqAttChunk
//                      selected tokens (gathered K and V rows, D / 8 lanes per
//                      token), a partial (m, l, o) per head and chunk.
//   SparqFinalize      grid (query head of the group, KV head, sequence): the
//                      chunks merged, then alpha * y + (1 - alpha) * v_mean.
#ifndef BANYAN_ATTENTION_KERNELS_SPARQ_CUH_
#define BANYAN_ATTENTION_KERNELS_SPARQ_CUH_

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <math_constants.h>

#include <cstdint>
#include <cub/block/block_scan.cuh>
#include <type_traits>

#include "attention/kernels/mma.cuh"
#include "attention/kernels/state.cuh"

namespace banyan::attention::kernels {

inline constexpr int kSparqMaxGroup = 16;      // query heads per KV head the GPU path takes
inline constexpr int kSparqScoreChunk = 1024;  // tokens per CTA of the first two kernels
inline constexpr int kSparqScoreThreads = 256;
inline constexpr int kSparqSelectThreads = 512;
inline constexpr int kSparqSelectChunk = 8192;  // tokens per CTA of the selection kernels
inline constexpr int kSparqBins = 4096;         // 12 bits
inline constexpr int kSparqAttChunk = 256;      // selected tokens per CTA of SparqGatherAttend
inline constexpr int kSparqAttThreads = 256;

// Element steps of the second K copy (the host's KvTransposedOffset) between
// layers, pages, heads and components of one head (slots are contiguous).
struct SparqKtStrides {
  int64_t layer, page, head, dim;
};

struct SparqParams {
  const void* kv_pool;  // KvLayout
  const void* k_t;      // KvTransposedOffset layout
  // Element offsets of the layer's planes (the host's KvLayout::PlaneOffset
  // and KvTransposedOffset) and of one page within a plane.
  int64_t k_plane, v_plane, kt_plane;
  SparqKtStrides kt;
  int64_t page_elems;  // layout.PageElements()
  int32_t num_kv_heads, page_size, group;
  const int32_t* seq_page_indptr;  // [num_seqs + 1]
  const int32_t* page_indices;
  const int32_t* seq_length;  // [num_seqs]
  const void* q;              // [num_seqs][num_kv_heads * group][D]
  int32_t q_dtype;
  float scale_log2;  // softmax scale * log2(e)
  int32_t r, k, window, reallocate_mean;
  const float* v_mean;  // [num_seqs][num_kv_heads][D]
  void* out;            // [num_seqs][num_kv_heads * group][D]
  int32_t out_dtype;
  // Scratch (sparq.cu sizes it): per (sequence, KV head) pair p.
  int32_t max_length;  // row stride of logits and score: the longest sequence, padded to 16 tokens
  int32_t score_chunks, select_chunks, att_chunks;
  int32_t cap;             // the cluster kernel (sparq_cluster.cuh): tokens of shared memory per CTA
  float* logits;           // [p][group][max_length]
  float* chunk_stats;      // [p][score_chunks][group][2]: max, sum of exp2(l - max)
  float* lse2;             // [p][group]
  float* score;            // [p][max_length]
  uint32_t* hist;          // [p][3 levels][kSparqBins], zeroed before SparqScores
  uint32_t* chunk_counts;  // [p][select_chunks][2]: above and equal to the threshold
  int32_t* positions;      // [p][k]
  float* alpha_part;       // [p][select_chunks][group]: alpha per select chunk (per CTA of the cluster kernel)
  float* partial;          // [p][group][att_chunks][D + 2]: m, l, o
};

__device__ __forceinline__ int64_t SparqPair(const SparqParams& p) {
  return int64_t{blockIdx.z} * p.num_kv_heads + blockIdx.y;
}
// Element offset of the K row of (page, slot) of `head` (the V row is at
// v_plane - k_plane past it).
__device__ __forceinline__ int64_t SparqKRow(const SparqParams& p, int32_t page, int32_t head, int32_t slot,
                                             int32_t d) {
  return p.k_plane + page * p.page_elems + (int64_t{head} * p.page_size + slot) * d;
}
__device__ __forceinline__ float BlockMax(float v, float* red) {
  for (int off = 16; off > 0; off /= 2) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, off));
  __syncthreads();
  if (threadIdx.x % 32 == 0) red[threadIdx.x / 32] = v;
  __syncthreads();
  float m = -CUDART_INF_F;
  for (int w = 0; w < static_cast<int>(blockDim.x / 32); ++w) m = fmaxf(m, red[w]);
  return m;
}
__device__ __forceinline__ float BlockSum(float v, float* red) {
  for (int off = 16; off > 0; off /= 2) v += __shfl_xor_sync(0xffffffffu, v, off);
  __syncthreads();
  if (threadIdx.x % 32 == 0) red[threadIdx.x / 32] = v;
  __syncthreads();
  float s = 0.0f;
  for (int w = 0; w < static_cast<int>(blockDim.x / 32); ++w) s += red[w];
  return s;
}

// kN consecutive 16-bit elements (kN * 2 bytes, aligned to that) as floats, one vector load.
template <typename T, int kN>
__device__ __forceinline__ void LoadRow(const T* at, float (&out)[kN]) {
  static_assert(sizeof(T) == 2 && (kN == 2 || kN == 4 || kN == 8));
  using Vec = std::conditional_t<kN == 8, uint4, std::conditional_t<kN == 4, uint2, uint32_t>>;
  const Vec raw = *reinterpret_cast<const Vec*>(at);
  const T* e = reinterpret_cast<const T*>(&raw);
#pragma unroll
  for (int i = 0; i < kN; ++i) out[i] = ToFloat(e[i]);
}

// The pair's query heads (starting at element q0 of p.q) as floats into
// raw[G][D] (0 past the group), all loads in flight at once. Ends with a barrier.
template <int D, int G>
__device__ __forceinline__ void SparqLoadQ(const SparqParams& p, int64_t q0, float (*raw)[D]) {
  for (int i = threadIdx.x; i < G * D; i += blockDim.x) {
    raw[i / D][i % D] = i < p.group * D ? LoadAny(p.q, p.q_dtype, q0 + i) : 0.0f;
  }
  __syncthreads();
}

// Step 1 from the pair's queries raw (SparqLoadQ): comp[0..r) the top r
// components of the group's summed |q| ascending (ties to the lower index),
// and qs[h][j] = q_h[comp[j]] * scale * log2(e) / c_h with
// c_h = sqrt(||q_h[i1]||_1 / ||q_h||_1) (0 for the heads past the group that G
// rounds up to). Every thread of the block calls it (blockDim.x >= D); ends
// with a barrier.
template <int D, int G>
__device__ __forceinline__ void SparqComponents(const SparqParams& p, const float (*raw)[D], float* mag, int32_t* rank,
                                                int32_t* comp, float (*qs)[D]) {
  for (int i = threadIdx.x; i < D; i += blockDim.x) {
    float s = 0.0f;
#pragma unroll
    for (int h = 0; h < G; ++h) s += fabsf(raw[h][i]);
    mag[i] = s;
  }
  __syncthreads();
  for (int i = threadIdx.x; i < D; i += blockDim.x) {
    int32_t n = 0;
#pragma unroll 32
    for (int j = 0; j < D; ++j) n += mag[j] > mag[i] || (mag[j] == mag[i] && j < i);
    rank[i] = n;
  }
  __syncthreads();
  // comp[at] = i for the chosen i, `at` = the chosen dimensions below i: one
  // ballot per 32 dimensions (blockDim.x >= D).
  const bool chosen = threadIdx.x < D && rank[threadIdx.x] < p.r;
  const unsigned votes = __ballot_sync(0xffffffffu, chosen);
  if (threadIdx.x < D && threadIdx.x % 32 == 0) mag[threadIdx.x / 32] = __popc(votes);  // mag is free again
  __syncthreads();
  if (chosen) {
    int32_t at = __popc(votes & ((1u << (threadIdx.x % 32)) - 1u));
    for (int w = 0; w < static_cast<int>(threadIdx.x / 32); ++w) at += static_cast<int32_t>(mag[w]);
    comp[at] = threadIdx.x;
  }
  __syncthreads();
  // The scaled query components (qs above).
  for (int i = threadIdx.x; i < G * D; i += blockDim.x) qs[i / D][i % D] = 0.0f;
  __syncthreads();
  for (int h = threadIdx.x / 32; h < p.group; h += blockDim.x / 32) {
    float all = 0.0f, sel = 0.0f;
    for (int i = threadIdx.x % 32; i < D; i += 32) {
      const float a = fabsf(raw[h][i]);
      all += a;
      sel += rank[i] < p.r ? a : 0.0f;
    }
    for (int off = 16; off > 0; off /= 2) {
      all += __shfl_xor_sync(0xffffffffu, all, off);
      sel += __shfl_xor_sync(0xffffffffu, sel, off);
    }
    const float c = sel > 0.0f ? sqrtf(sel / all) : 1.0f;
    for (int j = threadIdx.x % 32; j < p.r; j += 32) {
      qs[h][j] = raw[h][comp[j]] * p.scale_log2 / c;
    }
  }
  __syncthreads();
}

// G: the group size rounded up to a power of two (<= kSparqMaxGroup), so that
// the per-head registers are sized at compile time.
template <typename T, int D, int G>
__global__ void __launch_bounds__(kSparqScoreThreads) SparqApproxLogits(SparqParams p) {
  __shared__ float mag[D];
  __shared__ int32_t rank[D];
  __shared__ int32_t comp[D];
  __shared__ float qs[G][D], raw[G][D];
  __shared__ float red[kSparqScoreThreads / 32];
  const int32_t seq = blockIdx.z, head = blockIdx.y;
  const int32_t length = p.seq_length[seq];
  const int32_t tok0 = blockIdx.x * kSparqScoreChunk;
  if (tok0 >= length) return;
  const int64_t q0 = (int64_t{seq} * p.num_kv_heads + head) * p.group * D;
  SparqLoadQ<D, G>(p, q0, raw);
  SparqComponents<D, G>(p, raw, mag, rank, comp, qs);
  // Step 2: each thread 4 consecutive tokens of one page (page_size % 4 == 0),
  // one 8-byte load per component (a component's slots of a page are contiguous).
  const T* kt = static_cast<const T*>(p.k_t);
  const int32_t* pages = p.page_indices + p.seq_page_indptr[seq];
  constexpr int kPerThread = kSparqScoreChunk / kSparqScoreThreads;
  static_assert(kPerThread == 4);
  float acc[kPerThread][G];
  int32_t tok[kPerThread];
  const int32_t t0 = tok0 + threadIdx.x * kPerThread;
#pragma unroll
  for (int u = 0; u < kPerThread; ++u) {
    tok[u] = t0 + u;
#pragma unroll
    for (int h = 0; h < G; ++h) acc[u][h] = 0.0f;
  }
  if (t0 < length) {
    const int32_t page = pages[t0 / p.page_size];
    const int64_t base = p.kt_plane + head * p.kt.head + page * p.kt.page + t0 % p.page_size;
#pragma unroll 8
    for (int j = 0; j < p.r; ++j) {
      float kv[4];
      LoadRow<T, 4>(kt + base + comp[j] * p.kt.dim, kv);
#pragma unroll
      for (int u = 0; u < kPerThread; ++u) {
#pragma unroll
        for (int h = 0; h < G; ++h) acc[u][h] += qs[h][j] * kv[u];
      }
    }
  }
  const int64_t pair = SparqPair(p);
#pragma unroll
  for (int h = 0; h < G; ++h) {
    if (h >= p.group) break;
    float m = -CUDART_INF_F;
#pragma unroll
    for (int u = 0; u < kPerThread; ++u) {
      if (tok[u] < length) {
        p.logits[(pair * p.group + h) * p.max_length + tok[u]] = acc[u][h];
        m = fmaxf(m, acc[u][h]);
      }
    }
    m = BlockMax(m, red);
    float s = 0.0f;
#pragma unroll
    for (int u = 0; u < kPerThread; ++u) s += tok[u] < length ? exp2f(acc[u][h] - m) : 0.0f;
    s = BlockSum(s, red);
    if (threadIdx.x == 0) {
      float* st = p.chunk_stats + ((pair * p.score_chunks + blockIdx.x) * p.group + h) * 2;
      st[0] = m;
      st[1] = s;
    }
  }
}

// Each head's log2-sum-exp over the sequence's chunks, into lse2[h].
__device__ __forceinline__ void SparqLse2(const SparqParams& p, int64_t pair, int32_t length, float* lse2) {
  const int32_t chunks = (length + kSparqScoreChunk - 1) / kSparqScoreChunk;
  for (int h = threadIdx.x / 32; h < p.group; h += blockDim.x / 32) {
    float m = -CUDART_INF_F;
    for (int c = threadIdx.x % 32; c < chunks; c += 32)
      m = fmaxf(m, p.chunk_stats[((pair * p.score_chunks + c) * p.group + h) * 2]);
    for (int off = 16; off > 0; off /= 2) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, off));
    float s = 0.0f;
    for (int c = threadIdx.x % 32; c < chunks; c += 32) {
      const float* st = p.chunk_stats + ((pair * p.score_chunks + c) * p.group + h) * 2;
      s += st[1] * exp2f(st[0] - m);
    }
    for (int off = 16; off > 0; off /= 2) s += __shfl_xor_sync(0xffffffffu, s, off);
    if (threadIdx.x % 32 == 0) lse2[h] = m + log2f(s);
  }
}

__global__ void __launch_bounds__(kSparqScoreThreads) SparqScores(SparqParams p) {
  __shared__ float lse2[kSparqMaxGroup];
  __shared__ uint32_t hist[kSparqBins];
  const int32_t seq = blockIdx.z;
  const int32_t length = p.seq_length[seq];
  const int32_t tok0 = blockIdx.x * kSparqScoreChunk;
  if (tok0 >= length) return;
  const int64_t pair = SparqPair(p);
  SparqLse2(p, pair, length, lse2);
  for (int i = threadIdx.x; i < kSparqBins; i += blockDim.x) hist[i] = 0;
  __syncthreads();
  if (blockIdx.x == 0 && threadIdx.x < p.group) p.lse2[pair * p.group + threadIdx.x] = lse2[threadIdx.x];
  const int32_t window_begin = length - min(p.window, length);
  const int32_t end = min(length, tok0 + kSparqScoreChunk);
  for (int base = tok0 + threadIdx.x / 32 * 32; base < end; base += blockDim.x) {  // warp-uniform trips
    const int32_t t = base + threadIdx.x % 32;
    float s = 0.0f;
    if (t < end) {
      for (int h = 0; h < p.group; ++h) s += exp2f(p.logits[(pair * p.group + h) * p.max_length + t] - lse2[h]);
      if (t >= window_begin) s = CUDART_INF_F;
      p.score[pair * p.max_length + t] = s;
    }
    if (t < end) atomicAdd(&hist[__float_as_uint(s) >> 20], 1u);
  }
  __syncthreads();
  for (int i = threadIdx.x; i < kSparqBins; i += blockDim.x) {
    if (hist[i] != 0) atomicAdd(&p.hist[pair * 3 * kSparqBins + i], hist[i]);
  }
}

// The exact selection threshold, found from histograms of the scores' bits
// (non-negative floats order as their bits): level 1 the top 12 bits (from
// SparqScores), level 2 the next 12 among the scores in level 1's crossing
// bin, level 3 the last 8 (spread over the 4096 bins, 16 apart). Each
// selection CTA recomputes the crossings it needs from the global histograms.
struct SparqCut {
  uint32_t prefix;  // the known top bits of the threshold (12, 24 or 32 of them)
  uint32_t want;    // how many tokens to take at or below the known prefix
};
using SparqScan = cub::BlockScan<uint32_t, kSparqSelectThreads>;
struct SparqSelectShared {
  typename SparqScan::TempStorage scan;
  uint32_t hist[kSparqBins];
  uint32_t found, found_above;
  float red[kSparqSelectThreads / 32];
};

// The bin of `hist` (global, kSparqBins counts) where the count from the top
// bin down reaches `want`; *above = the count in higher bins.
__device__ uint32_t SparqCrossing(const uint32_t* hist, uint32_t want, uint32_t* above, SparqSelectShared& sh) {
  constexpr int kPer = kSparqBins / kSparqSelectThreads;
  const int hi = kSparqBins - threadIdx.x * kPer;  // thread i owns bins [hi - kPer, hi): the top ones first
  uint32_t mine = 0;
  for (int b = hi - kPer; b < hi; ++b) mine += hist[b];
  uint32_t before = 0;
  SparqScan(sh.scan).ExclusiveSum(mine, before);
  if (before < want && before + mine >= want) {
    uint32_t run = before;
    for (int b = hi - 1; b >= hi - kPer; --b) {
      if (run + hist[b] >= want) {
        sh.found = b;
        sh.found_above = run;
        break;
      }
      run += hist[b];
    }
  }
  __syncthreads();
  *above = sh.found_above;
  const uint32_t bin = sh.found;
  __syncthreads();
  return bin;
}

// The cut after `levels` (1-3) histogram levels of pair `pair` (k tokens to take).
__device__ SparqCut SparqCutAfter(const SparqParams& p, int64_t pair, uint32_t k, int levels, SparqSelectShared& sh) {
  const uint32_t* hist = p.hist + pair * 3 * kSparqBins;
  SparqCut cut{0, k};
  uint32_t above = 0;
  const uint32_t b1 = SparqCrossing(hist, cut.want, &above, sh);
  cut = {b1, cut.want - above};
  if (levels == 1) return cut;
  const uint32_t b2 = SparqCrossing(hist + kSparqBins, cut.want, &above, sh);
  cut = {(b1 << 12) | b2, cut.want - above};
  if (levels == 2) return cut;
  const uint32_t b3 = SparqCrossing(hist + 2 * kSparqBins, cut.want, &above, sh);
  return {(cut.prefix << 8) | (b3 / (kSparqBins / 256)), cut.want - above};
}

// Level `level` (2 or 3): the histogram of the chunk's scores under the
// previous levels' prefix. grid (select chunk, KV head, sequence).
__global__ void __launch_bounds__(kSparqSelectThreads) SparqRefine(SparqParams p, int level) {
  __shared__ SparqSelectShared sh;
  const int32_t length = p.seq_length[blockIdx.z];
  const int32_t tok0 = blockIdx.x * kSparqSelectChunk;
  if (tok0 >= length) return;
  const int64_t pair = SparqPair(p);
  const SparqCut cut = SparqCutAfter(p, pair, static_cast<uint32_t>(min(p.k, length)), level - 1, sh);
  __shared__ uint32_t hist[kSparqBins];
  for (int i = threadIdx.x; i < kSparqBins; i += blockDim.x) hist[i] = 0;
  __syncthreads();
  const uint32_t* bits = reinterpret_cast<const uint32_t*>(p.score + pair * p.max_length);
  constexpr int kPer = kSparqSelectChunk / kSparqSelectThreads;
  uint32_t v[kPer];  // every load of the thread in flight at once
#pragma unroll
  for (int u = 0; u < kPer; ++u) {
    const int t = tok0 + threadIdx.x + u * kSparqSelectThreads;
    v[u] = t < length ? bits[t] : 0u;
  }
#pragma unroll
  for (int u = 0; u < kPer; ++u) {
    const bool live = tok0 + static_cast<int>(threadIdx.x) + u * kSparqSelectThreads < length;
    if (level == 2 && live && (v[u] >> 20) == cut.prefix) atomicAdd(&hist[(v[u] >> 8) & 0xfff], 1u);
    if (level == 3 && live && (v[u] >> 8) == cut.prefix) atomicAdd(&hist[(v[u] & 0xff) * (kSparqBins / 256)], 1u);
  }
  __syncthreads();
  uint32_t* out = p.hist + (pair * 3 + level - 1) * kSparqBins;
  for (int i = threadIdx.x; i < kSparqBins; i += blockDim.x) {
    if (hist[i] != 0) atomicAdd(&out[i], hist[i]);
  }
}

// Per select chunk: how many of its tokens are above the threshold and how
// many equal it. Same grid.
__global__ void __launch_bounds__(kSparqSelectThreads) SparqCount(SparqParams p) {
  __shared__ SparqSelectShared sh;
  const int32_t length = p.seq_length[blockIdx.z];
  const int32_t tok0 = blockIdx.x * kSparqSelectChunk;
  if (tok0 >= length) return;
  const int64_t pair = SparqPair(p);
  const SparqCut cut = SparqCutAfter(p, pair, static_cast<uint32_t>(min(p.k, length)), 3, sh);
  const uint32_t* bits = reinterpret_cast<const uint32_t*>(p.score + pair * p.max_length);
  uint32_t gt = 0, eq = 0;
#pragma unroll
  for (int u = 0; u < kSparqSelectChunk / kSparqSelectThreads; ++u) {
    const int t = tok0 + threadIdx.x + u * kSparqSelectThreads;
    const uint32_t v = t < length ? bits[t] : 0u;
    gt += t < length && v > cut.prefix;
    eq += t < length && v == cut.prefix;
  }
  uint32_t gt_all = 0, eq_all = 0, unused = 0;
  SparqScan(sh.scan).ExclusiveSum(gt, unused, gt_all);
  __syncthreads();
  SparqScan(sh.scan).ExclusiveSum(eq, unused, eq_all);
  if (threadIdx.x == 0) {
    p.chunk_counts[(pair * p.select_chunks + blockIdx.x) * 2] = gt_all;
    p.chunk_counts[(pair * p.select_chunks + blockIdx.x) * 2 + 1] = eq_all;
  }
}

// The selected positions of the chunk, ascending, at their place in the
// pair's list (after the earlier chunks' selected tokens): above the
// threshold, or equal to it and among the first `want` equal ones of the
// sequence; and the chunk's share of each head's alpha. Same grid; each
// thread owns kPer consecutive tokens.
__global__ void __launch_bounds__(kSparqSelectThreads) SparqWrite(SparqParams p) {
  constexpr int kPer = kSparqSelectChunk / kSparqSelectThreads;
  __shared__ SparqSelectShared sh;
  __shared__ float lse2[kSparqMaxGroup];
  const int32_t length = p.seq_length[blockIdx.z];
  const int32_t tok0 = blockIdx.x * kSparqSelectChunk;
  if (tok0 >= length) return;
  const int64_t pair = SparqPair(p);
  const SparqCut cut = SparqCutAfter(p, pair, static_cast<uint32_t>(min(p.k, length)), 3, sh);
  if (threadIdx.x < p.group) lse2[threadIdx.x] = p.lse2[pair * p.group + threadIdx.x];
  uint32_t sel_before_chunk = 0, eq_before_chunk = 0;
  for (int c = 0; c < static_cast<int>(blockIdx.x); ++c) {
    sel_before_chunk += p.chunk_counts[(pair * p.select_chunks + c) * 2];
    eq_before_chunk += p.chunk_counts[(pair * p.select_chunks + c) * 2 + 1];
  }
  sel_before_chunk += min(eq_before_chunk, cut.want);
  const uint32_t* bits = reinterpret_cast<const uint32_t*>(p.score + pair * p.max_length);
  const int t_first = tok0 + threadIdx.x * kPer;
  uint32_t v[kPer];  // the thread's kPer consecutive scores, 16-byte loads (max_length is padded to 16 tokens)
#pragma unroll
  for (int u = 0; u < kPer; u += 4) {
    const uint4 x = t_first + u < length ? *reinterpret_cast<const uint4*>(bits + t_first + u) : make_uint4(0, 0, 0, 0);
    v[u] = x.x;
    v[u + 1] = x.y;
    v[u + 2] = x.z;
    v[u + 3] = x.w;
  }
  uint32_t eq = 0;
#pragma unroll
  for (int u = 0; u < kPer; ++u) eq += t_first + u < length && v[u] == cut.prefix;
  uint32_t eq_before = 0;
  SparqScan(sh.scan).ExclusiveSum(eq, eq_before);
  __syncthreads();
  eq_before += eq_before_chunk;  // equal tokens of the sequence before this thread's
  auto take = [&](uint32_t v, uint32_t& eq_run) { return v > cut.prefix || (v == cut.prefix && eq_run++ < cut.want); };
  uint32_t run = eq_before, sel = 0;
#pragma unroll
  for (int u = 0; u < kPer; ++u) sel += t_first + u < length && take(v[u], run) ? 1u : 0u;
  uint32_t sel_before = 0;
  SparqScan(sh.scan).ExclusiveSum(sel, sel_before);
  __syncthreads();
  uint32_t at = sel_before_chunk + sel_before;
  run = eq_before;
  uint32_t mask = 0;  // bit u: token t_first + u is selected
#pragma unroll
  for (int u = 0; u < kPer; ++u) {
    const int t = t_first + u;
    if (t >= length || !take(v[u], run)) continue;
    mask |= 1u << u;
    p.positions[pair * p.k + at++] = t;
  }
  // alpha: the selected tokens' approximate probabilities, every load of a head in flight at once.
  float alpha[kSparqMaxGroup];
#pragma unroll
  for (int h = 0; h < kSparqMaxGroup; ++h) {
    alpha[h] = 0.0f;
    if (h >= p.group || mask == 0) continue;
    const float* row = p.logits + (pair * p.group + h) * p.max_length + t_first;
    float x[kPer];
#pragma unroll
    for (int u = 0; u < kPer; ++u) x[u] = (mask >> u) & 1u ? row[u] : -CUDART_INF_F;
#pragma unroll
    for (int u = 0; u < kPer; ++u) alpha[h] += exp2f(x[u] - lse2[h]);
  }
  for (int h = 0; h < p.group; ++h) {
    const float a = BlockSum(alpha[h], sh.red);
    if (threadIdx.x == 0) p.alpha_part[(pair * p.select_chunks + blockIdx.x) * p.group + h] = a;
  }
}

// The gathered attention's lanes: a group of D / 8 lanes attends one token at
// a time, lane s of the group holding dimensions [8 s, 8 s + 8) (one 16-byte
// load of K and of V, a 4- or 3-level shuffle per dot), 256 / D tokens per
// warp step, each lane group with its own online-softmax state per head.
// Eight values of o per head and lane keep the registers low (H100: 16 values
// per lane took 157 registers).
// kDepth: tokens per lane group loaded before their math (more hide more
// latency and take 8 registers each).
template <int D, int G, int kDepth>
struct SparqLanes {
  static constexpr int kDims = 8;              // elements per lane
  static constexpr int kLanes = D / kDims;     // lanes per token: 8 (D 64) or 16 (D 128)
  static constexpr int kTokens = 32 / kLanes;  // tokens per warp step
  float m[G], l[G], o[G][kDims];

  __device__ __forceinline__ void Init() {
#pragma unroll
    for (int h = 0; h < G; ++h) {
      m[h] = -CUDART_INF_F;
      l[h] = 0.0f;
#pragma unroll
      for (int i = 0; i < kDims; ++i) o[h][i] = 0.0f;
    }
  }

  // One token's K and V slices (this lane's 8 dimensions) into the states;
  // every lane of the warp calls it (the dot's shuffles), `valid` false for
  // a lane group without a token.
  template <typename T>
  __device__ __forceinline__ void Attend(const uint4& kr, const uint4& vr, bool valid, const float (*q)[D],
                                         int32_t group) {
    const int sub = threadIdx.x % 32 % kLanes;
    const T* ke = reinterpret_cast<const T*>(&kr);
    const T* ve = reinterpret_cast<const T*>(&vr);
#pragma unroll
    for (int h = 0; h < G; ++h) {
      float dot = 0.0f;
#pragma unroll
      for (int i = 0; i < kDims; ++i) dot += q[h][sub * kDims + i] * ToFloat(ke[i]);
#pragma unroll
      for (int off = 1; off < kLanes; off *= 2) dot += __shfl_xor_sync(0xffffffffu, dot, off);
      if (!valid || h >= group) continue;
      const float m_new = fmaxf(m[h], dot);
      const float factor = RescaleFactor(m[h], m_new);
      const float pr = exp2f(dot - m_new);
      l[h] = l[h] * factor + pr;
#pragma unroll
      for (int i = 0; i < kDims; ++i) o[h][i] = o[h][i] * factor + pr * ToFloat(ve[i]);
      m[h] = m_new;
    }
  }

  // The warp's `count` (1..32) tokens, lane j holding token j's K row offset
  // in `row_at` (the V row is v_delta past it); lane group g takes tokens g,
  // g + kTokens, ..., kDepth of them loaded before their math.
  template <typename T>
  __device__ __forceinline__ void AttendWarp(const T* kv, int64_t v_delta, int64_t row_at, int count,
                                             const float (*q)[D], int32_t group) {
    const int lane = threadIdx.x % 32, grp = lane / kLanes, sub = lane % kLanes;
    for (int j0 = 0; j0 < count; j0 += kDepth * kTokens) {
      uint4 kr[kDepth], vr[kDepth];
#pragma unroll
      for (int x = 0; x < kDepth; ++x) {
        const int j = min(j0 + x * kTokens + grp, count - 1);
        const int64_t at = __shfl_sync(0xffffffffu, row_at, j) + sub * kDims;
        kr[x] = *reinterpret_cast<const uint4*>(kv + at);
        vr[x] = *reinterpret_cast<const uint4*>(kv + at + v_delta);
      }
#pragma unroll
      for (int x = 0; x < kDepth; ++x) Attend<T>(kr[x], vr[x], j0 + x * kTokens + grp < count, q, group);
    }
  }

  // The lane groups merged (shuffles across the group strides: lanes with the
  // same sub hold the same dimensions), then the block's warps through shared
  // memory (wm, wl [warps][G], wo [warps][D]) into per head h: out[h * stride]
  // = m, out[h * stride + 1] = l, out[h * stride + 2 + i] = o[i]. Every thread
  // of the block calls it.
  __device__ __forceinline__ void MergeBlock(int32_t group, float (*wm)[G], float (*wl)[G], float (*wo)[D], float* out,
                                             int64_t stride) {
    const int warps = blockDim.x / 32, warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int grp = lane / kLanes, sub = lane % kLanes;
#pragma unroll
    for (int h = 0; h < G; ++h) {
#pragma unroll
      for (int off = kLanes; off < 32; off *= 2) {
        const float m_other = __shfl_xor_sync(0xffffffffu, m[h], off);
        const float l_other = __shfl_xor_sync(0xffffffffu, l[h], off);
        const float m_new = fmaxf(m[h], m_other);
        const float mine = RescaleFactor(m[h], m_new), theirs = RescaleFactor(m_other, m_new);
        l[h] = l[h] * mine + l_other * theirs;
#pragma unroll
        for (int i = 0; i < kDims; ++i) o[h][i] = o[h][i] * mine + __shfl_xor_sync(0xffffffffu, o[h][i], off) * theirs;
        m[h] = m_new;
      }
    }
#pragma unroll
    for (int h = 0; h < G; ++h) {
      if (h >= group) break;
      if (lane == 0) {
        wm[warp][h] = m[h];
        wl[warp][h] = l[h];
      }
      __syncthreads();
      float big = -CUDART_INF_F;
      for (int w = 0; w < warps; ++w) big = fmaxf(big, wm[w][h]);
      const float mine = RescaleFactor(m[h], big);
      if (grp == 0) {
#pragma unroll
        for (int i = 0; i < kDims; ++i) wo[warp][sub * kDims + i] = o[h][i] * mine;
      }
      __syncthreads();
      float* dst = out + h * stride;
      for (int i = threadIdx.x; i < D; i += blockDim.x) {
        float acc = 0.0f;
        for (int w = 0; w < warps; ++w) acc += wo[w][i];
        dst[2 + i] = acc;
      }
      if (threadIdx.x == 0) {
        float acc = 0.0f;
        for (int w = 0; w < warps; ++w) acc += wl[w][h] * RescaleFactor(wm[w][h], big);
        dst[0] = big;
        dst[1] = acc;
      }
      __syncthreads();
    }
  }
};

// Exact attention of the group's heads over kSparqAttChunk selected tokens
// (SparqLanes), a partial (m, l, o) per head and chunk. Registers allow 3
// CTAs per SM up to 4 heads per group (2 at 8, 1 at 16).
template <typename T, int D, int G>
__global__ void __launch_bounds__(kSparqAttThreads, G <= 4   ? 3
                                                    : G <= 8 ? 2
                                                             : 1) SparqGatherAttend(SparqParams p) {
  constexpr int kWarps = kSparqAttThreads / 32;
  __shared__ float q[G][D];
  __shared__ float wm[kWarps][G], wl[kWarps][G];
  __shared__ float wo[kWarps][D];
  const int32_t seq = blockIdx.z, head = blockIdx.y;
  const int32_t length = p.seq_length[seq];
  const int32_t k = min(p.k, length);
  const int64_t pair = SparqPair(p);
  const int32_t first = blockIdx.x * kSparqAttChunk;
  const int32_t last = min(k, first + kSparqAttChunk);
  const int64_t q0 = pair * p.group * D;
  for (int i = threadIdx.x; i < G * D; i += blockDim.x) {
    q[i / D][i % D] = i < p.group * D ? LoadAny(p.q, p.q_dtype, q0 + i) * p.scale_log2 : 0.0f;
  }
  __syncthreads();
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int32_t* pages = p.page_indices + p.seq_page_indptr[seq];
  SparqLanes<D, G, 1> lanes;  // 3 CTAs per SM: 2 tokens in flight spilled ~300 bytes (G 4, D 128)
  lanes.Init();
  // Warp w takes the chunk's tokens [w * 32, w * 32 + 32) (lane j looks up
  // token j's row: the dependent loads of all 32 at once).
  const int n_lane = first + warp * 32 + lane;
  int64_t row_at = 0;
  if (n_lane < last) {
    const int32_t t = p.positions[pair * p.k + n_lane];
    row_at = SparqKRow(p, pages[t / p.page_size], head, t % p.page_size, D);
  }
  const int count = min(32, last - (first + warp * 32));
  if (count > 0)
    lanes.template AttendWarp<T>(static_cast<const T*>(p.kv_pool), p.v_plane - p.k_plane, row_at, count, q, p.group);
  lanes.MergeBlock(p.group, wm, wl, wo, p.partial + (pair * p.group * p.att_chunks + blockIdx.x) * (D + 2),
                   int64_t{p.att_chunks} * (D + 2));
}

// grid (query head of the group, KV head, sequence), one thread per output
// dimension: the chunks' weights in shared memory first (one load each, in
// parallel), then each dimension's sum with its loads unrolled.
template <int D>
__global__ void __launch_bounds__(D) SparqFinalize(SparqParams p) {
  __shared__ float weight[1024];  // per chunk: exp2(m_c - m) (att_chunks <= 1024: k <= 256K)
  __shared__ float red[D / 32];
  const int32_t seq = blockIdx.z, h = blockIdx.x, d = threadIdx.x;
  const int32_t length = p.seq_length[seq];
  const int32_t chunks = (min(p.k, length) + kSparqAttChunk - 1) / kSparqAttChunk;
  const int64_t pair = SparqPair(p);
  const float* part = p.partial + (pair * p.group + h) * p.att_chunks * (D + 2);
  float m = -CUDART_INF_F;
  for (int c = d; c < chunks; c += D) m = fmaxf(m, part[c * (D + 2)]);
  m = BlockMax(m, red);
  float l = 0.0f;
  for (int c = d; c < chunks; c += D) {
    weight[c] = RescaleFactor(part[c * (D + 2)], m);
    l += part[c * (D + 2) + 1] * weight[c];
  }
  l = BlockSum(l, red);  // its barriers also publish `weight`
  float o = 0.0f;
#pragma unroll 16
  for (int c = 0; c < chunks; ++c) o += part[c * (D + 2) + 2 + d] * weight[c];
  float y = l > 0.0f ? o / l : 0.0f;
  if (p.reallocate_mean) {
    const int32_t select_chunks = (length + kSparqSelectChunk - 1) / kSparqSelectChunk;
    float a = 0.0f;
    for (int c = 0; c < select_chunks; ++c) a += p.alpha_part[(pair * p.select_chunks + c) * p.group + h];
    y = a * y + (1.0f - a) * p.v_mean[pair * D + d];
  }
  StoreAny(p.out, p.out_dtype, (pair * p.group + h) * D + d, y);
}

// The second K copy (KvTransposedOffset, steps kt) of every layer, page and
// head: grid (page, layer), one (head, slot, dim) element of the page's K per
// thread step (coalesced reads).
template <typename T>
__global__ void SparqTransposeK(const T* __restrict__ kv, T* __restrict__ k_t, int64_t num_pages, int32_t num_kv_heads,
                                int32_t page_size, int32_t head_dim, SparqKtStrides kt) {
  const int64_t page = blockIdx.x, layer = blockIdx.y;
  const int64_t tile = int64_t{page_size} * head_dim, page_elems = tile * num_kv_heads;
  const T* src = kv + ((layer * 2) * num_pages + page) * page_elems;  // the K plane
  for (int64_t i = threadIdx.x; i < page_elems; i += blockDim.x) {
    const int64_t head = i / tile, rest = i % tile;
    const int64_t slot = rest / head_dim, d = rest % head_dim;  // i indexes the source
    k_t[layer * kt.layer + page * kt.page + head * kt.head + d * kt.dim + slot] = src[i];
  }
}

}  // namespace banyan::attention::kernels

#endif  // BANYAN_ATTENTION_KERNELS_SPARQ_CUH_

// SparQ attention in one launch: a thread block cluster of C (8 or 16) CTAs
// per (sequence, KV head) pair does all of sparq_args.h's steps, exchanging
// what the eight-launch path (sparq.cuh) passes through global memory over
// distributed shared memory instead. CTA c of a cluster owns the sequence's
// tokens [c * slice, (c + 1) * slice) (slice = its length / C rounded up to
// 8 tokens; pages of a multiple of 8 slots) and keeps their scores (and
// logits, where they fit) in its own shared memory:
//   1. step 1 (each CTA on its own) and the logits of its tokens from the
//      transposed K copy; per head the max and sum of exp2.   cluster barrier
//   2. every head's log2-sum-exp from the C CTAs' (max, sum); per token the
//      summed approximate softmax (+inf in the local window).
//   3. the exact k-th largest score, 8 bits at a time from the top (until a
//      level's crossing bin is taken whole): each CTA a 256-bin histogram of
//      its candidates, every CTA sums the C
//      histograms and finds the crossing bin.   up to 4 cluster barriers
//   4. per CTA the tokens above the threshold, and equal to it in position
//      order while the sequence's `want` lasts (2 cluster barriers): their
//      local indices in shared memory (ascending, by warp ballots) and the
//      CTA's share of alpha.
//   5. the k selected positions split evenly over the C CTAs (read from their
//      owners' lists, all at once): exact attention of the group's heads
//      (SparqLanes), a partial (m, l, o) per head in shared memory. barrier
//   6. CTA c merges heads c, c + C, ...: the C partials, alpha * y +
//      (1 - alpha) * v_mean. A last barrier keeps every CTA's shared memory
//      alive until the others have read it.
// Dynamic shared memory per CTA: group * cap floats of logits (unless in
// global memory), cap scores, cap 16-bit selected indices (cap =
// SparqParams::cap >= every slice).
#ifndef BANYAN_ATTENTION_KERNELS_SPARQ_CLUSTER_CUH_
#define BANYAN_ATTENTION_KERNELS_SPARQ_CLUSTER_CUH_

#include <cooperative_groups.h>

#include <cstdint>
#include <cub/block/block_scan.cuh>

#include "attention/kernels/sparq.cuh"

namespace banyan::attention::kernels {

inline constexpr int kSparqClusterMaxSize = 16;
inline constexpr int kSparqClusterMaxCap = 65536;  // slice tokens a 16-bit selected index can name

inline constexpr int kSparqClusterThreads = 256;

// Dynamic shared-memory bytes of one CTA (the layout the kernel assumes):
// cap scores, cap 16-bit selected indices, and group * cap logits unless
// they live in global memory (SparqParams::logits set).
constexpr int64_t SparqClusterSmemBytes(int32_t group, int32_t cap, bool logits_in_shared) {
  return int64_t{cap} * 6 + (logits_in_shared ? int64_t{group} * cap * 4 : 0);
}

// The slice of tokens each CTA of a cluster of `size` owns for a sequence of `length`.
__host__ __device__ constexpr int32_t SparqClusterSlice(int32_t length, int32_t size) {
  return ((length + size - 1) / size + 7) / 8 * 8;
}

// hist[bin] += 1 for every lane of the warp with `active`, one shared-memory
// atomic per distinct bin (scores crowd into few bins: lane by lane, a warp's
// equal bins would serialize). Every lane of the warp calls it.
__device__ __forceinline__ void WarpHistogramAdd(uint32_t* hist, uint32_t bin, bool active) {
  const unsigned live = __ballot_sync(0xffffffffu, active);
  if (!active) return;
  const unsigned same = __match_any_sync(live, bin);
  if (threadIdx.x % 32 == static_cast<unsigned>(__ffs(same) - 1)) atomicAdd(&hist[bin], __popc(same));
}

// Two CTAs per SM up to 4 query heads per KV head (128 registers; more heads
// spill there: the lanes' o and the logits' accumulators).
template <typename T, int D, int G>
__global__ void __launch_bounds__(kSparqClusterThreads, G <= 4 ? 2 : 1) SparqCluster(SparqParams p) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
  // Thread block clusters need sm_90; below it the host never picks this
  // kernel (sparq.cu ClustersAtOnce finds no cluster can run).
  (void)p;
  __trap();
#else
  namespace cg = cooperative_groups;
  constexpr int kThreads = kSparqClusterThreads;
  constexpr int kC = kSparqClusterMaxSize;
  constexpr int kWarps = kThreads / 32;
  constexpr int kTok = G <= 4 ? 8 : 4;  // tokens per thread step of the logits
  using Scan = cub::BlockScan<uint32_t, kThreads>;
  extern __shared__ __align__(16) unsigned char sparq_dynamic[];
  __shared__ float mag[D];
  __shared__ int32_t rank[D], comp[D];
  __shared__ float qs[G][D], qf[G][D];
  __shared__ float stat_m[G], stat_s[G], lse2[G], alpha_cta[G];
  // Per head and CTA of the cluster: (max, sum of exp2) in step 2; (m, l), alpha and merge weight in step 6.
  __shared__ float from_m[G][kC], from_s[G][kC], from_alpha[G][kC], weight[G][kC];
  __shared__ float merged_l[G], alpha_sum[G];
  __shared__ uint32_t hist[2][256];
  __shared__ typename Scan::TempStorage scan;
  __shared__ bool found_whole;
  __shared__ uint32_t found, found_above, counts[2], eq_prior, their_counts[kC][2], warp_counts[kWarps][2];
  __shared__ int32_t offset[kSparqClusterMaxSize + 1];  // first selected index of each CTA; [C] = the total
  __shared__ float wm[kWarps][G], wl[kWarps][G], wo[kWarps][D];
  __shared__ float part[G][D + 2];  // this CTA's (m, l, o) per head

  cg::cluster_group cluster = cg::this_cluster();

  const int32_t me = static_cast<int32_t>(cluster.block_rank());
  const int32_t size = static_cast<int32_t>(cluster.num_blocks());
  const int32_t seq = blockIdx.z, head = blockIdx.y, group = p.group;
  const int32_t length = p.seq_length[seq];
  const int32_t slice = SparqClusterSlice(length, size);
  const int32_t tok0 = me * slice;
  const int32_t n = max(0, min(length, tok0 + slice) - tok0);  // this CTA's tokens
  const int64_t pair = SparqPair(p);
  // Shared: [logits [group][cap] unless global] [score [cap]] [sel [cap]] (cap % 4 == 0: 16-byte rows).
  const bool shared_logits = p.logits == nullptr;
  float* logits =
      shared_logits ? reinterpret_cast<float*>(sparq_dynamic) : p.logits + (pair * size + me) * group * int64_t{p.cap};
  uint32_t* score = reinterpret_cast<uint32_t*>(sparq_dynamic) + (shared_logits ? int64_t{group} * p.cap : 0);
  uint16_t* sel = reinterpret_cast<uint16_t*>(score + p.cap);
  const int64_t q0 = pair * group * D;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int32_t* pages = p.page_indices + p.seq_page_indptr[seq];

  // 1. Components, the full scaled queries, the logits of this CTA's tokens
  // (kTok tokens of one page per thread step: page_size % kTok == 0).
  // The first step's page id is loaded before the components' barriers.
  const int32_t first_page = threadIdx.x * kTok < n ? pages[(tok0 + threadIdx.x * kTok) / p.page_size] : 0;
  SparqLoadQ<D, G>(p, q0, qf);
  SparqComponents<D, G>(p, qf, mag, rank, comp, qs);
  for (int i = threadIdx.x; i < G * D; i += kThreads) qf[i / D][i % D] *= p.scale_log2;
  float m[G], s[G];
#pragma unroll
  for (int h = 0; h < G; ++h) {
    m[h] = -CUDART_INF_F;
    s[h] = 0.0f;
  }
  const T* kt = static_cast<const T*>(p.k_t) + p.kt_plane + head * p.kt.head;
  for (int i = threadIdx.x * kTok; i < n; i += kThreads * kTok) {
    const int32_t t = tok0 + i;
    const int32_t page = i == static_cast<int>(threadIdx.x) * kTok ? first_page : pages[t / p.page_size];
    const int64_t base = page * p.kt.page + t % p.page_size;
    float acc[kTok][G];
#pragma unroll
    for (int u = 0; u < kTok; ++u) {
#pragma unroll
      for (int h = 0; h < G; ++h) acc[u][h] = 0.0f;
    }
#pragma unroll 8
    for (int j = 0; j < p.r; ++j) {
      float kv[kTok];
      LoadRow<T, kTok>(kt + base + comp[j] * p.kt.dim, kv);
#pragma unroll
      for (int u = 0; u < kTok; ++u) {
#pragma unroll
        for (int h = 0; h < G; ++h) acc[u][h] += qs[h][j] * kv[u];
      }
    }
#pragma unroll
    for (int h = 0; h < G; ++h) {
      if (h >= group) break;
      float big = m[h];
#pragma unroll
      for (int u = 0; u < kTok; ++u) big = i + u < n ? fmaxf(big, acc[u][h]) : big;
      float sum = s[h] * RescaleFactor(m[h], big);
#pragma unroll
      for (int u = 0; u < kTok; ++u) sum += i + u < n ? exp2f(acc[u][h] - big) : 0.0f;
      m[h] = big;
      s[h] = sum;
      float* row = logits + int64_t{h} * p.cap + i;
#pragma unroll
      for (int u = 0; u < kTok; u += 4) {
        *reinterpret_cast<float4*>(row + u) = make_float4(acc[u][h], acc[u + 1][h], acc[u + 2][h], acc[u + 3][h]);
      }
    }
  }
  // Per head the block's (max, sum): lanes by shuffles, then warps.
#pragma unroll
  for (int h = 0; h < G; ++h) {
#pragma unroll
    for (int off = 16; off > 0; off /= 2) {
      const float m_other = __shfl_xor_sync(0xffffffffu, m[h], off);
      const float s_other = __shfl_xor_sync(0xffffffffu, s[h], off);
      const float big = fmaxf(m[h], m_other);
      s[h] = s[h] * RescaleFactor(m[h], big) + s_other * RescaleFactor(m_other, big);
      m[h] = big;
    }
    if (lane == 0) {
      wm[warp][h] = m[h];
      wl[warp][h] = s[h];
    }
  }
  __syncthreads();
  if (threadIdx.x < group) {
    const int h = threadIdx.x;
    float big = -CUDART_INF_F, sum = 0.0f;
    for (int w = 0; w < kWarps; ++w) big = fmaxf(big, wm[w][h]);
    for (int w = 0; w < kWarps; ++w) sum += wl[w][h] * RescaleFactor(wm[w][h], big);
    stat_m[h] = big;
    stat_s[h] = sum;
  }
  cluster.sync();

  // 2. Each head's log2-sum-exp over the cluster, then the scores.
  for (int x = threadIdx.x; x < group * size; x += kThreads) {  // every remote value in flight at once
    const float* their_m = cluster.map_shared_rank(stat_m, x % size);
    const float* their_s = cluster.map_shared_rank(stat_s, x % size);
    from_m[x / size][x % size] = their_m[x / size];
    from_s[x / size][x % size] = their_s[x / size];
  }
  __syncthreads();
  if (threadIdx.x < group) {
    const int h = threadIdx.x;
    float big = -CUDART_INF_F;
    for (int c = 0; c < size; ++c) big = fmaxf(big, from_m[h][c]);
    float sum = 0.0f;
    for (int c = 0; c < size; ++c) sum += from_s[h][c] * RescaleFactor(from_m[h][c], big);
    lse2[h] = big + log2f(sum);
  }
  __syncthreads();
  const int32_t window_begin = length - min(p.window, length);
  for (int i = threadIdx.x; i < n; i += kThreads) {
    float l[G];  // every head's load in flight at once
#pragma unroll
    for (int h = 0; h < G; ++h) l[h] = h < group ? logits[int64_t{h} * p.cap + i] : 0.0f;
    float v = 0.0f;
#pragma unroll
    for (int h = 0; h < G; ++h) v += h < group ? exp2f(l[h] - lse2[h]) : 0.0f;
    score[i] = __float_as_uint(tok0 + i >= window_begin ? CUDART_INF_F : v);
  }

  // 3. The threshold: the k-th largest score's bits, 8 at a time (non-negative
  // floats order as their bits). Histograms alternate between two buffers: a
  // level's buffer is read by the other CTAs before they reach the next
  // level's barrier, so the level after next may clear it.
  // rest: the threshold's low bits left unknown; a level whose crossing bin
  // is taken whole (its count is exactly the tokens still wanted) ends the
  // search early.
  uint32_t prefix = 0, want = static_cast<uint32_t>(min(p.k, length)), rest = 32;
  for (int level = 0; level < 4; ++level) {
    const int shift = 24 - 8 * level;
    uint32_t* hb = hist[level & 1];
    for (int b = threadIdx.x; b < 256; b += kThreads) hb[b] = 0;
    __syncthreads();
    for (int base = threadIdx.x / 32 * 32; base < n; base += kThreads) {  // warp-uniform trips
      const int i = base + threadIdx.x % 32;
      const uint32_t v = i < n ? score[i] : 0u;
      WarpHistogramAdd(hb, (v >> shift) & 0xffu, i < n && (level == 0 || (v >> (shift + 8)) == prefix));
    }
    cluster.sync();
    uint32_t mine = 0;  // thread b: the cluster's count in bin 255 - b (the top bins first)
    if (threadIdx.x < 256) {
      uint32_t got[kC];  // all loads in flight before the sum
#pragma unroll
      for (int c = 0; c < kC; ++c) got[c] = c < size ? cluster.map_shared_rank(hb, c)[255 - threadIdx.x] : 0u;
#pragma unroll
      for (int c = 0; c < kC; ++c) mine += got[c];
    }
    uint32_t before = 0;
    Scan(scan).ExclusiveSum(mine, before);
    if (threadIdx.x < 256 && before < want && before + mine >= want) {
      found = 255 - threadIdx.x;
      found_above = before;
      found_whole = before + mine == want;
    }
    __syncthreads();
    prefix = (prefix << 8) | found;
    want -= found_above;
    rest -= 8;
    const bool whole = found_whole;
    __syncthreads();  // found and the scan's storage are written again next level
    if (whole) break;
  }

  // 4. This CTA's selected tokens, in position order: warp w owns a run of
  // wspan consecutive tokens, its lanes 32 consecutive ones at a time
  // (ballots order them). First the counts above and at the threshold.
  const int wspan = ((n + kWarps - 1) / kWarps + 31) / 32 * 32;
  const int w0 = min(n, warp * wspan), w1 = min(n, w0 + wspan);
  uint32_t gt = 0, eq = 0;
  for (int i = w0 + lane; i < w1; i += 32) {
    gt += (score[i] >> rest) > prefix;
    eq += (score[i] >> rest) == prefix;
  }
#pragma unroll
  for (int off = 16; off > 0; off /= 2) {
    gt += __shfl_xor_sync(0xffffffffu, gt, off);
    eq += __shfl_xor_sync(0xffffffffu, eq, off);
  }
  if (lane == 0) {
    warp_counts[warp][0] = gt;
    warp_counts[warp][1] = eq;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    uint32_t gt_all = 0, eq_all = 0;
    for (int w = 0; w < kWarps; ++w) {
      gt_all += warp_counts[w][0];
      eq_all += warp_counts[w][1];
    }
    counts[0] = gt_all;
    counts[1] = eq_all;
  }
  cluster.sync();
  if (threadIdx.x < size) {
    const uint32_t* their = cluster.map_shared_rank(counts, threadIdx.x);
    their_counts[threadIdx.x][0] = their[0];
    their_counts[threadIdx.x][1] = their[1];
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    // offset[c]: the first list index of CTA c; the equal tokens taken are
    // the first `want` of the sequence.
    int32_t at = 0;
    uint32_t eq_seen = 0;
    for (int c = 0; c < size; ++c) {
      if (c == me) eq_prior = eq_seen;
      offset[c] = at;
      at += static_cast<int32_t>(their_counts[c][0] + (eq_seen >= want ? 0u : min(their_counts[c][1], want - eq_seen)));
      eq_seen += their_counts[c][1];
    }
    offset[size] = at;
    // Per warp: the equal tokens before it, and where its selected ones start in sel.
    uint32_t eq_before = eq_prior, out = 0;
    for (int w = 0; w < kWarps; ++w) {
      const uint32_t w_gt = warp_counts[w][0], w_eq = warp_counts[w][1];
      warp_counts[w][0] = out;
      warp_counts[w][1] = eq_before;
      out += w_gt + (eq_before >= want ? 0u : min(w_eq, want - eq_before));
      eq_before += w_eq;
    }
  }
  __syncthreads();
  float alpha[G];
#pragma unroll
  for (int h = 0; h < G; ++h) alpha[h] = 0.0f;
  {
    uint32_t out = warp_counts[warp][0], eq_run = warp_counts[warp][1];
    const unsigned below = (1u << lane) - 1u;
    for (int i0 = w0; i0 < w1; i0 += 32) {
      const int i = i0 + lane;
      const uint32_t v = i < w1 ? score[i] : 0u;
      const bool is_eq = i < w1 && (v >> rest) == prefix;
      const unsigned eqs = __ballot_sync(0xffffffffu, is_eq);
      const bool take = (i < w1 && (v >> rest) > prefix) || (is_eq && eq_run + __popc(eqs & below) < want);
      const unsigned takes = __ballot_sync(0xffffffffu, take);
      if (take) {
        sel[out + __popc(takes & below)] = static_cast<uint16_t>(i);
#pragma unroll
        for (int h = 0; h < G; ++h) alpha[h] += h < group ? exp2f(logits[int64_t{h} * p.cap + i] - lse2[h]) : 0.0f;
      }
      out += __popc(takes);
      eq_run += __popc(eqs);
    }
  }
#pragma unroll
  for (int h = 0; h < G; ++h) {
#pragma unroll
    for (int off = 16; off > 0; off /= 2) alpha[h] += __shfl_xor_sync(0xffffffffu, alpha[h], off);
    if (lane == 0) wl[warp][h] = alpha[h];
  }
  __syncthreads();
  if (threadIdx.x < group) {
    float a = 0.0f;
    for (int w = 0; w < kWarps; ++w) a += wl[w][threadIdx.x];
    alpha_cta[threadIdx.x] = a;
    p.alpha_part[(pair * size + me) * group + threadIdx.x] = a;
  }
  cluster.sync();

  // 5. Selected indices [offset[C] * me / C, offset[C] * (me + 1) / C) of the
  // pair's ascending list: first every one's pool slot (page * page_size +
  // slot) into the free score array, all lookups at once; then exact
  // attention over them.
  const int32_t total = offset[size];
  const int32_t a = static_cast<int32_t>(int64_t{total} * me / size);
  const int32_t b = static_cast<int32_t>(int64_t{total} * (me + 1) / size);
  int32_t* pool_slot = reinterpret_cast<int32_t*>(score);  // [b - a] <= slice <= cap
  for (int32_t idx = a + threadIdx.x; idx < b; idx += kThreads) {
    int owner = 0;
    while (owner + 1 < size && offset[owner + 1] <= idx) ++owner;
    const int32_t t = owner * slice + cluster.map_shared_rank(sel, owner)[idx - offset[owner]];
    p.positions[pair * p.k + idx] = t;
    pool_slot[idx - a] = pages[t / p.page_size] * p.page_size + t % p.page_size;
  }
  __syncthreads();
  SparqLanes<D, G, G <= 4 ? 4 : 2> lanes;
  lanes.Init();
  for (int32_t first = a + warp * 32; first < b; first += kWarps * 32) {
    int64_t row_at = 0;
    if (first + lane < b) {
      const int32_t ps = pool_slot[first + lane - a];
      row_at = SparqKRow(p, ps / p.page_size, head, ps % p.page_size, D);
    }
    lanes.template AttendWarp<T>(static_cast<const T*>(p.kv_pool), p.v_plane - p.k_plane, row_at, min(32, b - first),
                                 qf, group);
  }
  lanes.MergeBlock(group, wm, wl, wo, &part[0][0], D + 2);
  cluster.sync();

  // 6. Heads me, me + C, ...: the cluster's partials merged, the mean term.
  // Every CTA's (m, l) and alpha of those heads first, then per head the
  // weights exp2(m_c - max), the merged l and alpha.
  for (int x = threadIdx.x; x < group * size; x += kThreads) {
    const int h = x / size, c = x % size;
    if (h % size != me) continue;
    const float* their = cluster.map_shared_rank(&part[0][0], c) + h * (D + 2);
    from_m[h][c] = their[0];
    from_s[h][c] = their[1];
    from_alpha[h][c] = cluster.map_shared_rank(alpha_cta, c)[h];
  }
  __syncthreads();
  for (int h = threadIdx.x; h < group; h += kThreads) {
    if (h % size != me) continue;
    float big = -CUDART_INF_F, l = 0.0f, alpha_h = 0.0f;
    for (int c = 0; c < size; ++c) big = fmaxf(big, from_m[h][c]);
    for (int c = 0; c < size; ++c) {
      weight[h][c] = RescaleFactor(from_m[h][c], big);
      l += from_s[h][c] * weight[h][c];
      alpha_h += from_alpha[h][c];
    }
    merged_l[h] = l;
    alpha_sum[h] = alpha_h;
  }
  __syncthreads();
  for (int h = me + static_cast<int>(threadIdx.x / D) * size; h < group; h += (kThreads / D) * size) {
    const int d = threadIdx.x % D;
    float got[kC];  // all loads in flight before the sum
#pragma unroll
    for (int c = 0; c < kC; ++c)
      got[c] = c < size ? cluster.map_shared_rank(&part[0][0], c)[h * (D + 2) + 2 + d] : 0.0f;
    float o = 0.0f;
#pragma unroll
    for (int c = 0; c < kC; ++c) o += c < size ? got[c] * weight[h][c] : 0.0f;
    const float l = merged_l[h], alpha_h = alpha_sum[h];
    float y = l > 0.0f ? o / l : 0.0f;
    if (p.reallocate_mean) y = alpha_h * y + (1.0f - alpha_h) * p.v_mean[pair * D + d];
    StoreAny(p.out, p.out_dtype, (pair * group + h) * D + d, y);
  }
  cluster.sync();
#endif
}

}  // namespace banyan::attention::kernels

#endif  // BANYAN_ATTENTION_KERNELS_SPARQ_CLUSTER_CUH_

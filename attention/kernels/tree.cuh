// The batched (tree) work item: a tile of up to kTileRows packed query rows
// (entries of one segment x the query heads of one KV group) attends a chunk
// of the segment's KV on tensor cores (hydragen 3.2: the shared KV is read
// once for the whole tile). kWarps warps; warp w owns packed rows
// 16w..16w+15 and the whole head dimension. Per 64-token KV tile (cp.async,
// kStages tiles in flight):
//   S[16 x 64] = Q[16 x D] . K^T     (mma.sync m16n8k16, K via ldmatrix)
//   online softmax per row (state.cuh), P in registers as the next A operand
//   O[16 x D] += P[16 x 64] . V      (V via ldmatrix.trans)
// The partial (o / l, lse2) of every row goes to its (entry, chunk) slot.
#ifndef BANYAN_ATTENTION_KERNELS_TREE_CUH_
#define BANYAN_ATTENTION_KERNELS_TREE_CUH_

#include "attention/kernels/mma.cuh"
#include "attention/kernels/params.cuh"
#include "attention/kernels/state.cuh"

#include <climits>
#include <type_traits>

namespace banyan::attention::kernels {

inline constexpr int kThreads = 32 * kWarps;

// Pipeline depth: KV tiles in flight (cp.async groups) while one is computed.
inline constexpr int kStages = 4;
// Shared memory of a batched item: kStages stages of K and V tiles.
template <typename T, int D>
inline constexpr int kBatchedSmemBytes = kStages * 2 * kKvTile * kSmemStride<T, D> * static_cast<int>(sizeof(T));

// Two consecutive q elements (base even) as one packed register of T: a
// direct 32-bit load when q has the KV's dtype, else a converting load.
template <typename T>
__device__ __forceinline__ uint32_t LoadQPair(const TreeParams& p, int64_t base) {
  if (p.q_dtype == DTypeCode<T>()) return *reinterpret_cast<const uint32_t*>(static_cast<const T*>(p.q) + base);
  return PackPair<T>(LoadAny(p.q, p.q_dtype, base), LoadAny(p.q, p.q_dtype, base + 1));
}

// Number of 64-token KV tiles of an item (its kv_end is already clamped to
// the largest kv limit of its rows, work_plan.h).
__device__ __forceinline__ int NumKvTiles(const WorkItem& it) {
  return it.kv_end > it.kv_begin ? (it.kv_end - it.kv_begin + kKvTile - 1) / kKvTile : 0;
}

// The cp.async pipeline of one CTA across consecutive batched items
// (thread-uniform state, owned by the item loop): an item's loader runs on into
// the next item's first tiles, so a CTA's KV copies never stop between items.
// Every issued tile is one commit group; tiles are issued in order, so tile t
// of the current item is group first_group + t.
struct KvPipeline {
  int32_t committed = 0;    // groups committed so far
  int32_t first_group = 0;  // group of the current item's tile 0 (when preloaded > 0)
  int32_t stage0 = 0;       // stage of the current item's tile 0
  int32_t preloaded = 0;    // the current item's tiles issued by the previous item
};

// Waits until at most `newer` of the most recent commit groups are pending.
__device__ __forceinline__ void CpAsyncWaitNewer(int newer) {
  static_assert(kStages == 4, "one case per possible count below");
  switch (newer) {
    case 0: CpAsyncWait<0>(); break;
    case 1: CpAsyncWait<1>(); break;
    case 2: CpAsyncWait<2>(); break;
    default: CpAsyncWait<3>(); break;
  }
}

// Where a CTA's first item finds its page ids and q rows: the CTA head
// (work_plan.h kHeadStride), loaded with the item itself. Default: nowhere
// (every item reads the plan arrays).
struct ItemHead {
  const int32_t* pages = nullptr;  // pages[i - page_base]: id of the segment's page i
  int32_t page_base = 0;
  int32_t tiles = 0;               // the item's KV tiles [0, tiles) find their page ids in pages
  const int32_t* qrows = nullptr;  // entry_query of the item's first kHeadQrows entries
};

// How a 64-token K or V tile lies in shared memory. kPadded: rows of
// kSmemStride<T, D> elements (cp.async, tree.cuh and decode.cuh). kSwizzled:
// what TMA boxes of 128-byte rows write with 128-byte swizzling (the KV
// tensor maps, kv_tensor_map.h): 16-byte chunk c of row r at chunk c ^ (r % 8)
// of that row; at head dim 128 the tile is two such blocks of 64 columns, one
// after the other (the TMA kernel's stage layout). Both are bank-conflict
// free for ldmatrix.
enum class KvSmem { kPadded, kSwizzled };
template <typename T, int D, KvSmem kLayout>
__device__ __forceinline__ int KvSmemOffset(int row, int col) {  // col: a multiple of 16 bytes
  if constexpr (kLayout == KvSmem::kPadded) {
    return row * kSmemStride<T, D> + col;
  } else {
    constexpr int kBlockCols = 128 / static_cast<int>(sizeof(T));  // one 128-byte box row
    static_assert(D % kBlockCols == 0, "a swizzled row is whole 128-byte TMA box rows");
    constexpr int kPerChunk = 16 / static_cast<int>(sizeof(T));
    if constexpr (D == kBlockCols) {
      return row * D + (((col / kPerChunk) ^ (row % 8)) * kPerChunk);
    } else {
      const int c = col % kBlockCols;
      return (col / kBlockCols) * (kKvTile * kBlockCols) + row * kBlockCols +
             (((c / kPerChunk) ^ (row % 8)) * kPerChunk);
    }
  }
}

// One 64-token KV tile for the 16 rows of this warp: S = Q K^T (K via
// ldmatrix), scale and mask (tokens at or past a row's limit, and before
// `lo`), online softmax (state.cuh), O += P V (V via ldmatrix.trans). qf: Q
// fragments (A layout), o / m / l: the rows' running state (m16n8
// accumulator layout). kPadded tiles hold zeros in rows past the KV; a
// kSwizzled tile's rows outside [lo, max limit) may hold anything (pages not
// loaded, other tokens' KV, NaN): their V values are zeroed in registers,
// since a masked probability of 0 times NaN is not 0. kRows 8: only rows 0-7
// are live (an item of at most 8 rows): the softmax of rows 8-15 is skipped,
// their probabilities are 0 and their o, m and l are left as they are.
template <typename T, int D, KvSmem kLayout = KvSmem::kPadded, int kRows = 16>
__device__ __forceinline__ void ComputeKvTile(const TreeParams& p, const T* sK, const T* sV, int32_t tok0,
                                              const int32_t (&limit)[2], const uint32_t (&qf)[D / 16][4],
                                              float (&o)[D / 8][4], float (&m)[2], float (&l)[2], int lane,
                                              int32_t lo = INT32_MIN) {
  constexpr int kKSteps = D / 16;
  const int tq = lane % 4;
  float s[8][4];
#pragma unroll
  for (int i = 0; i < 8; ++i) s[i][0] = s[i][1] = s[i][2] = s[i][3] = 0.0f;
  const int mat = lane / 8, mrow = lane % 8;
#pragma unroll
  for (int ks = 0; ks < kKSteps; ++ks) {
    uint32_t qa[4];
#pragma unroll
    for (int j = 0; j < 4; ++j) qa[j] = qf[ks][j];
#pragma unroll
    for (int np = 0; np < 4; ++np) {
      uint32_t b[4];
      LdMatrixX4(b, sK + KvSmemOffset<T, D, kLayout>(np * 16 + (mat / 2) * 8 + mrow, ks * 16 + (mat % 2) * 8));
      Mma16816<T>(s[2 * np], qa, b[0], b[1]);
      Mma16816<T>(s[2 * np + 1], qa, b[2], b[3]);
    }
  }
  static_assert(kRows == 8 || kRows == 16);
  constexpr int kHalves = kRows / 8;  // row halves r (rows gq + 8 r) with a softmax
  // Scale, mask, row max over the 4 threads of a row.
  float tile_max[2] = {-CUDART_INF_F, -CUDART_INF_F};
#pragma unroll
  for (int nt = 0; nt < 8; ++nt) {
#pragma unroll
    for (int j = 0; j < 2 * kHalves; ++j) {
      const int r = j / 2;
      const int32_t tok = tok0 + nt * 8 + tq * 2 + (j % 2);
      s[nt][j] = tok < limit[r] && tok >= lo ? s[nt][j] * p.scale_log2 : -CUDART_INF_F;
      tile_max[r] = fmaxf(tile_max[r], s[nt][j]);
    }
  }
  float factor[2] = {1.0f, 1.0f};
#pragma unroll
  for (int r = 0; r < kHalves; ++r) {
    tile_max[r] = fmaxf(tile_max[r], __shfl_xor_sync(0xffffffffu, tile_max[r], 1));
    tile_max[r] = fmaxf(tile_max[r], __shfl_xor_sync(0xffffffffu, tile_max[r], 2));
    const float m_new = fmaxf(m[r], tile_max[r]);
    factor[r] = RescaleFactor(m[r], m_new);
    m[r] = m_new;
    l[r] *= factor[r];
  }
#pragma unroll
  for (int i = 0; i < D / 8; ++i) {
    o[i][0] *= factor[0];
    o[i][1] *= factor[0];
    if constexpr (kHalves == 2) {
      o[i][2] *= factor[1];
      o[i][3] *= factor[1];
    }
  }
  uint32_t pa[4][4];
#pragma unroll
  for (int nt = 0; nt < 8; ++nt) {
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      if (j < 2 * kHalves) {
        s[nt][j] = Prob(s[nt][j], m[j / 2]);
        l[j / 2] += s[nt][j];
      } else {
        s[nt][j] = 0.0f;
      }
    }
    // n-tile nt covers tokens 8nt..8nt+7: k-step nt / 2, low or high half.
    pa[nt / 2][(nt % 2) * 2 + 0] = PackPair<T>(s[nt][0], s[nt][1]);
    pa[nt / 2][(nt % 2) * 2 + 1] = PackPair<T>(s[nt][2], s[nt][3]);
  }
  const int32_t hi = max(limit[0], limit[1]);
#pragma unroll
  for (int kk = 0; kk < 4; ++kk) {
    // V fragments: b[0] / b[2] hold tokens 16 kk + 2 tq + {0, 1}, b[1] / b[3] the same + 8.
    uint32_t keep[2] = {0xffffffffu, 0xffffffffu};
    if constexpr (kLayout == KvSmem::kSwizzled) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int32_t tok = tok0 + kk * 16 + h * 8 + tq * 2;
        keep[h] = (tok >= lo && tok < hi ? 0x0000ffffu : 0u) | (tok + 1 >= lo && tok + 1 < hi ? 0xffff0000u : 0u);
      }
    }
#pragma unroll
    for (int dp = 0; dp < D / 16; ++dp) {
      uint32_t b[4];
      LdMatrixX4Trans(b, sV + KvSmemOffset<T, D, kLayout>(kk * 16 + (mat % 2) * 8 + mrow, dp * 16 + (mat / 2) * 8));
      if constexpr (kLayout == KvSmem::kSwizzled) {
#pragma unroll
        for (int j = 0; j < 4; ++j) b[j] &= keep[j % 2];
      }
      Mma16816<T>(o[2 * dp], pa[kk], b[0], b[1]);
      Mma16816<T>(o[2 * dp + 1], pa[kk], b[2], b[3]);
    }
  }
}

// Q fragments of this thread's two rows (scale applied to S later, in fp32);
// zero for invalid rows.
template <typename T, int D>
__device__ __forceinline__ void LoadQFragments(const TreeParams& p, const int32_t (&qrow)[2], const int32_t (&head)[2],
                                               const bool (&valid)[2], int tq, uint32_t (&qf)[D / 16][4]) {
#pragma unroll
  for (int ks = 0; ks < D / 16; ++ks) {
#pragma unroll
    for (int half = 0; half < 2; ++half) {
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const int64_t base = (int64_t{qrow[r]} * p.num_q_heads + head[r]) * D + ks * 16 + half * 8 + tq * 2;
        qf[ks][half * 2 + r] = valid[r] ? LoadQPair<T>(p, base) : 0u;
      }
    }
  }
}

// One batched item. The item's segment metadata comes from the item itself
// (page_begin, first_slot, entry_begin) and it.kv_end is already clamped, so
// the first KV copies wait only on the page ids. With chain (`next` is the
// CTA's next item, batched too) and a short item (at most kStages KV tiles),
// the last kStages - 1 loads of this item are the next item's first tiles
// (whose page ids are prefetched into L2 at the start) and the item returns
// without draining; otherwise the item ends with an empty pipeline. Long
// items are not chained: on the H100 chaining them measured up to 5% slower
// (h32/8 512-token suffixes, PERF_NOTES.md run S2-1), short ones 2-9% faster.
// ihead: where this item finds its first page ids and q rows (the CTA's
// first item: its head; used by the prologue's tiles only). trace_first: this
// is the CTA's first item (the trace records its first tile's arrival).
// kEarlySlots: the rows' partial slots are loaded when the item starts (two
// more live registers through the tile loop), else after it. ie / next_ie:
// the item's and the next item's WorkPlan::item_entry (w = 0: unknown, the
// rows' entry metadata is loaded from the plan arrays).
template <typename T, int D, bool kEarlySlots = true>
__device__ __forceinline__ void RunBatchedItemChained(const TreeParams& p, const WorkItem& it, char* smem,
                                                      KvPipeline& pl, const WorkItem& next, bool chain,
                                                      const ItemHead& ihead = ItemHead{}, bool trace_first = false,
                                                      int4 ie = int4{0, 0, 0, 0}, int4 next_ie = int4{0, 0, 0, 0}) {
  constexpr int kStagesN = kStages;
  constexpr int kStride = kSmemStride<T, D>;
  constexpr int kTileElems = kKvTile * kStride;
  constexpr int kKSteps = D / 16;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, gq = lane / 4, tq = lane % 4;
  const int32_t seg_entry0 = it.entry_begin;
  const int32_t item_entry0 = seg_entry0 + it.row_begin / p.group;

  // This thread's two rows (r = 0: packed row 16w + g, r = 1: 16w + g + 8).
  int32_t entry[2], head[2], qrow[2], limit[2], slot[2];
  bool valid[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int local = warp * 16 + gq + r * 8;
    valid[r] = local < it.row_count;
    const int32_t packed = it.row_begin + (valid[r] ? local : 0);
    entry[r] = seg_entry0 + packed / p.group;
    head[r] = it.kv_head * p.group + packed % p.group;
    const int32_t e_local = entry[r] - item_entry0;
    if (ie.w != 0) {  // one entry: its metadata came with the item (no dependent loads)
      qrow[r] = ie.x;
      limit[r] = valid[r] ? min(ie.y, it.kv_end) : 0;
      if constexpr (kEarlySlots) slot[r] = valid[r] ? ie.z + it.chunk : 0;
    } else {
      qrow[r] = ihead.qrows != nullptr && e_local < kHeadQrows ? ihead.qrows[e_local] : p.entry_query[entry[r]];
      limit[r] = valid[r] ? min(p.entry_kv_limit[entry[r]], it.kv_end) : 0;
      if constexpr (kEarlySlots) slot[r] = valid[r] ? p.entry_partial_base[entry[r]] + it.chunk : 0;
    }
  }
  const bool warp_active = warp * 16 < it.row_count;

  T* tiles = reinterpret_cast<T*>(smem);
  const int num_tiles = NumKvTiles(it);
  chain = chain && num_tiles <= kStagesN;
  const int next_tiles = chain ? NumKvTiles(next) : 0;
  if (next_tiles > 0 && threadIdx.x < 2) {  // the lines holding the next item's first page ids
    const int32_t pos = next.first_slot + next.kv_begin + threadIdx.x * ((kStagesN - 1) * kKvTile - 1);
    const int32_t last = next.first_slot + next.kv_end - 1;
    const int32_t* line = p.page_indices + next.page_begin + min(pos, last) / p.page_size;
    asm volatile("prefetch.global.L2 [%0];" ::"l"(line));
  }
  int32_t next_qrow[2] = {0, 0};  // the next item's q rows of this thread's two row slots
  if (next_tiles > 0) {
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const int local = warp * 16 + gq + r * 8;
      if (local < next.row_count) {
        next_qrow[r] = next_ie.w != 0 ? next_ie.x : p.entry_query[next.entry_begin + (next.row_begin + local) / p.group];
      }
    }
  }
  // The loader: virtual tile v < num_tiles is this item's tile v, else the
  // next item's tile v - num_tiles; one commit group per tile, in order.
  int vpos = pl.preloaded;
  if (vpos == 0) pl.first_group = pl.committed;
  int32_t next_first_group = pl.committed;
  const int vend = num_tiles + next_tiles;
  auto issue = [&](int v, bool from_head) {
    T* stage = tiles + ((pl.stage0 + v) % kStagesN) * 2 * kTileElems;
    if (from_head && v < ihead.tiles) {  // page ids from the CTA head
      LoadKvTileAnyPage<T, D, kKvTile, kThreads>(p, ihead.pages, it.first_slot, it.kv_head, it.kv_begin + v * kKvTile,
                                                 it.kv_end, stage, stage + kTileElems, ihead.page_base);
    } else if (v < num_tiles) {
      LoadKvTileAnyPage<T, D, kKvTile, kThreads>(p, p.page_indices + it.page_begin, it.first_slot, it.kv_head,
                                                 it.kv_begin + v * kKvTile, it.kv_end, stage, stage + kTileElems);
    } else {
      const int u = v - num_tiles;
      if (u == 0) next_first_group = pl.committed;
      LoadKvTileAnyPage<T, D, kKvTile, kThreads>(p, p.page_indices + next.page_begin, next.first_slot,
                                                 next.kv_head, next.kv_begin + u * kKvTile, next.kv_end, stage,
                                                 stage + kTileElems);
    }
    CpAsyncCommit();
    ++pl.committed;
  };

  // Prologue first: its page-id loads travel with the rows' entry_query loads
  // above (one round trip, not two), then the copies are issued.
  while (vpos < kStagesN - 1 && vpos < vend) issue(vpos++, true);

  // Q fragments in registers (scale applied to S later, in fp32).
  uint32_t qf[kKSteps][4];
  LoadQFragments<T, D>(p, qrow, head, valid, tq, qf);
  // The chained next item's q rows into L2 (their row ids were loaded with ours).
  if (next_tiles > 0) {
    const int32_t row_bytes = D * (p.q_dtype == 0 ? 4 : 2);
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const int local = warp * 16 + gq + r * 8;
      if (local < next.row_count && tq * 128 < row_bytes) {
        const int32_t packed = next.row_begin + local;
        const int32_t h = next.kv_head * p.group + packed % p.group;
        const char* line = static_cast<const char*>(p.q) + (int64_t{next_qrow[r]} * p.num_q_heads + h) * row_bytes + tq * 128;
        asm volatile("prefetch.global.L2 [%0];" ::"l"(line));
      }
    }
  }

  float o[D / 8][4];
#pragma unroll
  for (int i = 0; i < D / 8; ++i) o[i][0] = o[i][1] = o[i][2] = o[i][3] = 0.0f;
  float m[2] = {-CUDART_INF_F, -CUDART_INF_F}, l[2] = {0.0f, 0.0f};

  for (int t = 0; t < num_tiles; ++t) {
    // The stage of virtual tile t + kStages - 1 last held tile t - 1 (done).
    if (vpos < vend && vpos <= t + kStagesN - 1) issue(vpos++, false);
    CpAsyncWaitNewer(pl.committed - (pl.first_group + t) - 1);  // tile t has landed
    __syncthreads();
    if (trace_first && t == 0) TraceRecord(p, 1, 5);
    if (warp_active) {
      const T* sK = tiles + ((pl.stage0 + t) % kStagesN) * 2 * kTileElems;
      ComputeKvTile<T, D>(p, sK, sK + kTileElems, it.kv_begin + t * kKvTile, limit, qf, o, m, l, lane);
    }
    __syncthreads();  // this stage is refilled kStagesN - 1 tiles later
  }
  if (chain) {  // the next item's first tiles stay in flight
    pl.preloaded = vpos - num_tiles;
    pl.first_group = next_first_group;
    pl.stage0 = (pl.stage0 + num_tiles) % kStagesN;
  } else {
    CpAsyncWait<0>();  // no copy may still target shared memory when the item ends
    pl.preloaded = 0;
    pl.stage0 = 0;
  }

  // Finish: row sums, then the partial states (state.cuh).
  if constexpr (!kEarlySlots) {
#pragma unroll
    for (int r = 0; r < 2; ++r) slot[r] = valid[r] ? p.entry_partial_base[entry[r]] + it.chunk : 0;
  }
  StoreRowPartialsAt<D>(p, slot, head, valid, m, l, tq, [&](int i, int k) { return o[i][k]; });
}

// A group of g small items (WorkItem::group: 2 <= g <= kStages items of at
// most kGroupRows rows and one KV tile each). Each thread loads its rows'
// metadata, then the page ids of its rows of all g tiles, then issues every
// copy (one dependent round trip for all g tiles, not g); warp w < g runs
// items[w] on KV stage w, warps g.. only load. REQUIRES: an empty KV pipeline
// (no cp.async in flight); leaves it empty.
template <typename T, int D>
__device__ __forceinline__ void RunGroupedItems(const TreeParams& p, const WorkItem (&items)[kStages],
                                                const int4 (&ies)[kStages], int g, char* smem) {
  constexpr int kStride = kSmemStride<T, D>;
  constexpr int kTileElems = kKvTile * kStride;
  constexpr int kVecs = D * static_cast<int>(sizeof(T)) / 16;
  constexpr int kElemsPerVec = 16 / static_cast<int>(sizeof(T));
  constexpr int kRowStep = kThreads / kVecs;
  constexpr int kRows = kKvTile / kRowStep;
  static_assert(kThreads % kVecs == 0 && kKvTile % kRowStep == 0, "one 16-byte column per thread");
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, gq = lane / 4, tq = lane % 4;
  // This warp's item and this thread's two rows.
  WorkItem it = items[0];
  int4 ie = ies[0];
#pragma unroll
  for (int s = 1; s < kStages; ++s) {
    if (warp == s) {
      it = items[s];
      ie = ies[s];
    }
  }
  const bool active = warp < g;
  int32_t entry[2], head[2], qrow[2], limit[2], slot[2];
  bool valid[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int local = gq + r * 8;
    valid[r] = active && local < it.row_count;
    const int32_t packed = it.row_begin + (valid[r] ? local : 0);
    entry[r] = it.entry_begin + packed / p.group;
    head[r] = it.kv_head * p.group + packed % p.group;
    if (ie.w != 0) {  // one entry: its metadata came with the item
      qrow[r] = ie.x;
      limit[r] = valid[r] ? min(ie.y, it.kv_end) : 0;
      slot[r] = valid[r] ? ie.z + it.chunk : 0;
    } else {
      qrow[r] = p.entry_query[entry[r]];
      limit[r] = valid[r] ? min(p.entry_kv_limit[entry[r]], it.kv_end) : 0;
      slot[r] = valid[r] ? p.entry_partial_base[entry[r]] + it.chunk : 0;
    }
  }
  // Every tile's page ids (independent loads), then every copy.
  const T* pool = static_cast<const T*>(p.kv_pool);
  T* tiles = reinterpret_cast<T*>(smem);
  const int row0 = threadIdx.x / kVecs, vec = threadIdx.x % kVecs;
  int32_t page[kStages][kRows], pos[kStages][kRows];
#pragma unroll
  for (int s = 0; s < kStages; ++s) {
    if (s < g) {
#pragma unroll
      for (int i = 0; i < kRows; ++i) {
        const int32_t tok = items[s].kv_begin + row0 + i * kRowStep;
        pos[s][i] = items[s].first_slot + (tok < items[s].kv_end ? tok : items[s].kv_begin);
        page[s][i] = p.page_indices[items[s].page_begin + pos[s][i] / p.page_size];
      }
    }
  }
#pragma unroll
  for (int s = 0; s < kStages; ++s) {
    if (s < g) {
      T* sK = tiles + s * 2 * kTileElems;
#pragma unroll
      for (int i = 0; i < kRows; ++i) {
        const int row = row0 + i * kRowStep;
        const int64_t offset =
            ((int64_t{page[s][i]} * p.num_kv_heads + items[s].kv_head) * p.page_size + pos[s][i] % p.page_size) * D +
            vec * kElemsPerVec;
        const int sm = row * kStride + vec * kElemsPerVec;
        const bool in = items[s].kv_begin + row < items[s].kv_end;
        CpAsync16(sK + sm, pool + p.k_plane + offset, in);
        CpAsync16(sK + kTileElems + sm, pool + p.v_plane + offset, in);
      }
    }
  }
  CpAsyncCommit();
  uint32_t qf[D / 16][4];
  LoadQFragments<T, D>(p, qrow, head, valid, tq, qf);
  float o[D / 8][4];
#pragma unroll
  for (int i = 0; i < D / 8; ++i) o[i][0] = o[i][1] = o[i][2] = o[i][3] = 0.0f;
  float m[2] = {-CUDART_INF_F, -CUDART_INF_F}, l[2] = {0.0f, 0.0f};
  CpAsyncWait<0>();
  __syncthreads();
  if (active) {
    const T* sK = tiles + warp * 2 * kTileElems;
    ComputeKvTile<T, D>(p, sK, sK + kTileElems, it.kv_begin, limit, qf, o, m, l, lane);
    StoreRowPartialsAt<D>(p, slot, head, valid, m, l, tq, [&](int i, int k) { return o[i][k]; });
  }
}

// One batched item with an empty pipeline before and after (any caller).
// s_max_limit is unused (kept for callers of the older signature).
template <typename T, int D>
__device__ __forceinline__ void RunBatchedItem(const TreeParams& p, const WorkItem& it, char* smem,
                                               int* s_max_limit = nullptr) {
  (void)s_max_limit;
  KvPipeline pipe;
  RunBatchedItemChained<T, D, false>(p, it, smem, pipe, it, false);
}

}  // namespace banyan::attention::kernels

#endif  // BANYAN_ATTENTION_KERNELS_TREE_CUH_

// The batched (tree) work item on Hopper warpgroup MMA (sm_90a): the same
// work item, math (state.cuh) and partial (o / l, lse2) outputs as
// RunBatchedItem (tree.cuh), with the two products on wgmma instead of
// mma.sync. 256 threads = two warpgroups; warpgroup g owns packed rows
// 64g..64g+63 of the kTileRows tile (warp w owns rows 16w..16w+15, as in
// tree.cuh). Per 64-token KV tile (cp.async into the 128-byte-swizzled layout
// of wgmma.cuh, kWgmmaStages<D> stages, prefetch kWgmmaStages<D> - 3 ahead):
//   S[64 x 64] = Q[64 x D] . K^T      Q from registers, K from shared memory
//   online softmax per row in registers, P (16-bit) in registers
//   O[64 x D] += P[64 x 64] . V       P from registers, V from shared memory
//                                     (transposed B, no ldmatrix)
// Per tile t a warpgroup issues Q . K^T of tile t and then P . V of tile
// t - 1, waits for S only, and runs the softmax of tile t while P . V of
// tile t - 1 is still on the tensor cores (FlashAttention-3's intra-warpgroup
// overlap); then it retires P . V, rescales O and packs P of tile t. The page
// ids of the next tile's copies are fetched a tile early (SwizzledKvLoader).
// Shared-memory hazards: tile t + ahead is written (before the barrier of
// tile t) into the stage of tile t + ahead - stages = t - 3; every warpgroup
// had retired P . V of tile t - 3 (read in iteration t - 2) before it passed
// the barrier of tile t - 1, so one barrier per tile suffices. Short items
// chain: their loads run on into the next item's first tiles (one virtual
// tile stream, RunBatchedItemWgmmaPaged).
//
// PersistentWgmmaKernel is PersistentAttentionKernel (persistent.cuh) with
// this item for batched items of more than `narrow_rows` rows (smaller ones
// run tree.cuh's 16-rows-per-warp item; TreeAttention's default sends all to
// wgmma, measured faster). Outside an sm_90a pass the kernels are empty: the
// host runs them only after WgmmaProbeKernel said the loaded image is sm_90a.
#ifndef BANYAN_ATTENTION_KERNELS_TREE_WGMMA_CUH_
#define BANYAN_ATTENTION_KERNELS_TREE_WGMMA_CUH_

#include <climits>

#include "attention/kernels/decode.cuh"
#include "attention/kernels/merge.cuh"
#include "attention/kernels/params.cuh"
#include "attention/kernels/persistent.cuh"
#include "attention/kernels/state.cuh"
#include "attention/kernels/tree.cuh"
#include "attention/kernels/wgmma.cuh"
#include "attention/kernels/wgmma_tile.cuh"

namespace banyan::attention::kernels {

// KV stages: D = 128 6 x 32 KB, D = 64 8 x 16 KB; tiles ahead = stages - 3.
template <int D>
inline constexpr int kWgmmaStages = D == 64 ? 8 : 6;
// Elements of one K or V tile ([D / 64] blocks of [kKvTile][64]).
template <int D>
inline constexpr int kWgmmaTileElems = kKvTile * D;
template <typename T, int D>
inline constexpr int kWgmmaItemBytes = kWgmmaStages<D> * 2 * kWgmmaTileElems<D> * static_cast<int>(sizeof(T));

// Dynamic shared memory of PersistentWgmmaKernel: any of its three items,
// plus 1 KB to align the swizzled tiles to 1024 bytes.
template <typename T, int D>
inline constexpr int kWgmmaSmemBytes =
    kMaxOf<kMaxOf<kWgmmaItemBytes<T, D>, kBatchedSmemBytes<T, D>>, kFlattenedSmemBytes<T, D>> + 1024;

// Copies of one item's KV tiles into the swizzled layout (wgmma.cuh), with
// the page ids of a tile fetched one tile early: Issue(x) uses the ids the
// previous Fetch(x) left in registers, so no copy waits on a page-id load
// (except the item's first). Each thread owns one 16-byte column of kRows
// rows of every tile. Tokens at or past it.kv_end are zero-filled (never
// read). kPageSize > 0: the page size as a constant (== p.page_size); 0 reads
// p.page_size.
template <typename T, int D, int kPageSize>
struct SwizzledKvLoader {
  static constexpr int kVecs = D * static_cast<int>(sizeof(T)) / 16;  // 16-byte vectors per row
  static constexpr int kElemsPerVec = 16 / static_cast<int>(sizeof(T));
  static constexpr int kRowStep = kThreads / kVecs;
  static constexpr int kRows = kKvTile / kRowStep;
  static_assert(kThreads % kVecs == 0 && kRowStep % 8 == 0 && kKvTile % kRowStep == 0);

  const TreeParams& p;
  const int32_t* pages;
  int32_t first_slot, kv_begin, kv_end, page_size;
  int64_t head_off;
  int row0, vec, dst0;
  int32_t page[kRows];  // page ids of the fetched tile's rows

  __device__ __forceinline__ SwizzledKvLoader(const TreeParams& params, const WorkItem& it)
      : p(params),
        pages(params.page_indices + it.page_begin),
        first_slot(it.first_slot),
        kv_begin(it.kv_begin),
        kv_end(it.kv_end),
        page_size(kPageSize > 0 ? kPageSize : params.page_size),
        head_off(int64_t{it.kv_head} * (kPageSize > 0 ? kPageSize : params.page_size)),
        row0(threadIdx.x / kVecs),
        vec(threadIdx.x % kVecs),
        // Block of 64 columns, and the swizzled chunk (row % 8 == row0 % 8 for every row).
        dst0((threadIdx.x % kVecs / 8) * (kKvTile * 64) + ((threadIdx.x % kVecs % 8) ^ (threadIdx.x / kVecs % 8)) *
                                                                 kElemsPerVec) {}

  __device__ __forceinline__ int32_t Pos(int tile, int i) const {
    const int32_t tok = kv_begin + tile * kKvTile + row0 + i * kRowStep;
    return first_slot + (tok < kv_end ? tok : 0);
  }
  __device__ __forceinline__ void Fetch(int tile) {
#pragma unroll
    for (int i = 0; i < kRows; ++i) page[i] = pages[Pos(tile, i) / page_size];
  }
  __device__ __forceinline__ void Issue(int tile, T* sK, T* sV) const {
    const T* pool = static_cast<const T*>(p.kv_pool);
#pragma unroll
    for (int i = 0; i < kRows; ++i) {
      const int row = row0 + i * kRowStep;
      const bool valid = kv_begin + tile * kKvTile + row < kv_end;
      const int64_t offset =
          ((int64_t{page[i]} * p.num_kv_heads) * page_size + head_off + Pos(tile, i) % page_size) * D +
          vec * kElemsPerVec;
      const int s = dst0 + row * 64;
      CpAsync16(sK + s, pool + p.k_plane + offset, valid);
      CpAsync16(sV + s, pool + p.v_plane + offset, valid);
    }
  }
};

// One item. Chaining (the CTA's KV pipeline runs on across items): tiles are
// a virtual stream, the item's own then (chain) the next item's first ones;
// virtual tile v goes to stage (pipe.stage0 + v) % stages, one commit group
// per virtual tile slot (empty past the stream's end), so tile t is always
// complete once at most kAhead newer groups are pending. An item of at most
// kAhead tiles with chain issues the next item's first min(tiles, kAhead)
// tiles and leaves them in flight (pipe.preloaded); the next item skips them.
// pipe: KvPipeline's stage0 / preloaded fields, owned by the CTA's item loop
// (persistent.cuh RunCtaItems). chain: `next` is the CTA's next item and runs
// this function too. REQUIRES: smem 1024-byte aligned, kWgmmaItemBytes<T, D>
// long; T 16-bit.
template <typename T, int D, int kPageSize>
__device__ __forceinline__ void RunBatchedItemWgmmaPaged(const TreeParams& p, const WorkItem& it, char* smem,
                                                         KvPipeline& pipe, const WorkItem& next, bool chain) {
#ifdef BANYAN_WGMMA_ENABLED
  constexpr int kStagesN = kWgmmaStages<D>;
  constexpr int kAhead = kStagesN - 3;
  constexpr int kTileElems = kWgmmaTileElems<D>;
  constexpr int kKSteps = D / 16;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, gq = lane / 4, tq = lane % 4;

  // This thread's two rows (r = 0: packed row 16w + g, r = 1: 16w + g + 8).
  int32_t entry[2], head[2], qrow[2], limit[2];
  bool valid[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int local = warp * 16 + gq + r * 8;
    valid[r] = local < it.row_count;
    const int32_t packed = it.row_begin + (valid[r] ? local : 0);
    entry[r] = it.entry_begin + packed / p.group;
    head[r] = it.kv_head * p.group + packed % p.group;
    qrow[r] = p.entry_query[entry[r]];
    limit[r] = valid[r] ? min(p.entry_kv_limit[entry[r]], it.kv_end) : 0;
  }
  // Warpgroup-uniform: a warpgroup without rows issues no wgmma. A vote makes
  // it uniform to ptxas too (the descriptors under it stay in uniform registers).
  const bool group_active = __all_sync(0xffffffffu, (warp / 4) * 64 < it.row_count);

  T* tiles = reinterpret_cast<T*>(smem);
  const int num_tiles = NumKvTiles(it);
  chain = chain && num_tiles <= kAhead;
  const int next_pre = chain ? min(NumKvTiles(next), kAhead) : 0;  // the next item's tiles issued here
  const int vend = num_tiles + next_pre;
  const int pre = pipe.preloaded;  // own tiles the previous item issued
  const int stage0 = pipe.stage0;
  SwizzledKvLoader<T, D, kPageSize> cur(p, it), nxt(p, next);
  // Page ids of virtual tile v into its loader's registers, used by copy(v)
  // only (always the next copy of that loader).
  auto fetch = [&](int v) {
    if (v < num_tiles) {
      cur.Fetch(v);
    } else if (v < vend) {
      nxt.Fetch(v - num_tiles);
    }
  };
  // The copies of virtual tile v into `stage`.
  auto copy = [&](int v, int stage) {
    T* sK = tiles + stage * 2 * kTileElems;
    if (v < num_tiles) {
      cur.Issue(v, sK, sK + kTileElems);
    } else if (v < vend) {
      nxt.Issue(v - num_tiles, sK, sK + kTileElems);
    }
  };
  fetch(pre);
#pragma unroll
  for (int v = 0; v < kAhead; ++v) {
    if (v >= pre) {
      copy(v, (stage0 + v) % kStagesN);
      fetch(v + 1);
      CpAsyncCommit();
    }
  }

  // Q fragments (the wgmma A layout is the mma.sync one per warp); the scale
  // is applied to S in fp32.
  uint32_t qf[kKSteps][4];
  LoadQFragments<T, D>(p, qrow, head, valid, tq, qf);

  float o[D / 2];
#pragma unroll
  for (int i = 0; i < D / 2; ++i) o[i] = 0.0f;
  // m: running max in the scaled log2 domain (state.cuh); scores are scaled
  // inside the exponent (scale > 0, so the max of raw scores scales too).
  float m[2] = {-CUDART_INF_F, -CUDART_INF_F}, l[2] = {0.0f, 0.0f};
  float neg_m[2] = {-0.0f, -0.0f};  // -SafeMax(m), moved with m (MoveRowMax)
  const float scale = p.scale_log2;
  // Rows past row_count never need masking (their results are not stored).
  const int32_t full_limit = min(valid[0] ? limit[0] : INT_MAX, valid[1] ? limit[1] : INT_MAX);
  uint32_t pa[4][4];  // P of the previous tile (A of its P . V, in flight)
#pragma unroll
  for (int i = 0; i < 16; ++i) pa[i / 4][i % 4] = 0u;
  // Descriptors: the low word holds the start address (16-byte units, the
  // whole shared window fits its 14 bits, so offsets add without carry) and
  // the leading byte offset; the high word the stride and the swizzle mode.
  const uint64_t k_desc0 = SmemDescriptor(tiles, 16, 1024);
  const uint64_t v_desc0 = SmemDescriptor(tiles + kTileElems, kKvTile * 128, 1024);
  constexpr uint32_t kStageUnits = 2 * kTileElems * sizeof(T) / 16;
  int read_stage = stage0, prev_stage = stage0, write_stage = (stage0 + kAhead) % kStagesN;

  for (int t = 0; t < num_tiles; ++t) {
    copy(t + kAhead, write_stage);  // page ids fetched during the previous tile
    write_stage = write_stage + 1 == kStagesN ? 0 : write_stage + 1;
    CpAsyncCommit();
    CpAsyncWait<kAhead>();  // this thread's copies of tile t have landed
    FenceProxyAsync();      // ... and are visible to the tensor cores
    __syncthreads();        // every thread's copies of tile t
    // The next tile's page ids, issued after the proxy fence (a MEMBAR that
    // waits for every outstanding load of the thread): they land during
    // this tile's math instead of stalling its fence.
    fetch(t + kAhead + 1);
    if (group_active) {
      const int32_t tok0 = it.kv_begin + t * kKvTile;
      float s[32];
      // P . V of tile t - 1 runs while this tile's softmax does. For t = 0 it
      // adds P = 0 times tile 0's V (landed, finite): no branch around wgmma.
      // The stage offsets through a shuffle: warp-uniform to ptxas as well.
      const uint32_t k_units = __shfl_sync(0xffffffffu, read_stage * kStageUnits, 0);
      const uint32_t v_units = __shfl_sync(0xffffffffu, prev_stage * kStageUnits, 0);
      IssueTileProducts<T>(s, qf, k_desc0, k_units, o, pa, v_desc0, v_units);
      WgmmaWait<1>();  // S of tile t
      FenceRegs(s);

      // Mask only a tile that crosses a row's limit (its tokens start at kv_begin).
      float factor[2];
      SoftmaxTile64(s, tok0, tok0 + kKvTile > full_limit, it.kv_begin, limit, tq, scale, m, neg_m, l, factor);
      WgmmaWait<0>();  // P . V of tile t - 1: o and pa are free
      FenceRegs(o);
      RescaleAndPackP<T>(o, factor, s, pa);
    }
    prev_stage = read_stage;
    read_stage = read_stage + 1 == kStagesN ? 0 : read_stage + 1;
  }
  const uint32_t last_v_units = __shfl_sync(0xffffffffu, prev_stage * kStageUnits, 0);
  if (group_active && num_tiles > 0) {  // P . V of the last tile
    LastTileProduct<T>(o, pa, v_desc0, last_v_units);
  }
  pipe.stage0 = (stage0 + num_tiles) % kStagesN;
  pipe.preloaded = next_pre;
  // Unless the next item's first tiles are in flight, no copy may still
  // target shared memory when the item ends.
  if (next_pre == 0) CpAsyncWait<0>();

  // Finish: row sums, then the partial states (state.cuh).
  StoreRowPartials<D>(p, it, entry, head, valid, m, l, tq, [&](int i, int k) { return o[i * 4 + k]; });
#else
  (void)p;
  (void)it;
  (void)smem;
#endif
}

// The item with the launch's page size: 16 as a constant, any other at run time.
template <typename T, int D>
__device__ __forceinline__ void RunBatchedItemWgmma(const TreeParams& p, const WorkItem& it, char* smem,
                                                    KvPipeline& pipe, const WorkItem& next, bool chain) {
  if (p.page_size == 16) {
    RunBatchedItemWgmmaPaged<T, D, 16>(p, it, smem, pipe, next, chain);
  } else {
    RunBatchedItemWgmmaPaged<T, D, 0>(p, it, smem, pipe, next, chain);
  }
}

// One launch of every work item (persistent.cuh RunCtaItems) with wgmma
// batched items. narrow_rows: batched items of at most this many rows run
// tree.cuh's item instead. T 16-bit only.
template <typename T, int D>
__global__ void __launch_bounds__(kThreads, 1) PersistentWgmmaKernel(const TreeParams p, int32_t narrow_rows) {
#ifdef BANYAN_WGMMA_ENABLED
  extern __shared__ __align__(1024) char smem_raw[];
  __shared__ int32_t s_rows[kMaxMergeRows];
  __shared__ int s_count;
  const uint32_t raw = static_cast<uint32_t>(__cvta_generic_to_shared(smem_raw));
  char* smem = smem_raw + ((1024u - (raw & 1023u)) & 1023u);
  // wgmma items chain into a next wgmma item; tree.cuh's items (narrow_rows)
  // run unchained with their own pipeline.
  RunCtaItems<T, D>(p, smem, s_rows, &s_count,
                    [&](const WorkItem& it, KvPipeline& pipe, const WorkItem& next, bool chain) {
                      if (it.row_count > narrow_rows) {
                        RunBatchedItemWgmma<T, D>(p, it, smem, pipe, next, chain && next.row_count > narrow_rows);
                      } else {
                        RunBatchedItem<T, D>(p, it, smem);
                      }
                    });
#else
  (void)p;
  (void)narrow_rows;
#endif
}

// Writes 1 to *out when the running image was compiled for sm_90a (the
// wgmma kernels are real), else 0.
template <int kUnused = 0>
__global__ void WgmmaProbeKernel(int32_t* out) {
#ifdef BANYAN_WGMMA_ENABLED
  *out = 1;
#else
  *out = 0;
#endif
}

}  // namespace banyan::attention::kernels

#endif  // BANYAN_ATTENTION_KERNELS_TREE_WGMMA_CUH_

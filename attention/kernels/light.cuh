// Light CTAs of the TMA kernel (WorkShape::light_ctas, work_plan.h): the CTAs
// past TreeParams::light_cta_begin run only light items (at most 16 rows, all
// of one entry: a leaf's own suffix for the query heads of one KV group),
// which are bound by memory and by their own latency chains, on an SM of
// their own beside the heavy CTAs' tensor-core work. Same partial states as
// any other item.
//
// Every light warp (LightCtaWarps(D): all twelve at D 64; six of the consumer
// warpgroups at D 128, which take the producer warpgroup's registers with
// setmaxnreg, a 32 KB stage each) runs items w, w + W, ... alone, on the
// mma.sync tile of tree.cuh (ComputeKvTile; the item's heads are the 16 rows,
// zero past its row count), from a 64-token K and V stage of its own in shared
// memory that TMA fills with the heavy items' page boxes (TmaTiles: whole
// pages, 128-byte swizzled; one box per page, or one for the whole tile when
// its pages have consecutive ids), completing on the warp's own mbarrier.
// Rows outside the item's tokens are masked, their V zeroed in registers;
// items of at most 8 rows (GQA up to 8:1) skip the softmax of rows 8-15. A
// warp's chain per tile is one round trip: the tile's boxes go out with their
// page ids already in registers (one per lane, loaded during the tile before,
// or during the previous item for an item's first tile, whose boxes go out
// as soon as the previous item's last tile is read, before its partial
// stores), the item's q loads beside its first tile's boxes, and item
// descriptors come from a per-warp ring in shared memory refilled 16 items
// ahead (LightItemRing).
// Measured on the H100 (PERF_NOTES session 9): issuing a 16 KB tile with
// cp.async took a warp ~3,300-5,000 cycles; with TMA the per-item time moved
// to the rest of the chain, and the light side of the engine row with
// 120-token suffixes ran 10% faster (52.2 vs 58.1 us at 53 light CTAs). A
// producer warp feeding the others was slower still (session 8).
#ifndef BANYAN_ATTENTION_KERNELS_LIGHT_CUH_
#define BANYAN_ATTENTION_KERNELS_LIGHT_CUH_

#include "attention/kernels/mma.cuh"
#include "attention/kernels/params.cuh"
#include "attention/kernels/state.cuh"
#include "attention/kernels/tma.cuh"
#include "attention/kernels/tree.cuh"

namespace banyan::attention::kernels {

// One warp's stage: a 64-token K tile, then the V tile, in the TMA boxes'
// swizzled layout (KvSmem::kSwizzled). After the stages: each warp's ring of
// item descriptors (LightItemRing), then its mbarrier.
template <typename T, int D>
inline constexpr int kLightTileBytes = kKvTile * D * static_cast<int>(sizeof(T));
inline constexpr int kLightRingItems = 32;  // two halves of 16
inline constexpr int kLightRingBytes = kLightRingItems * 64;  // a WorkItem and its item_entry each
template <typename T, int D>
inline constexpr int kLightSmemBytes = LightCtaWarps(D) * (2 * kLightTileBytes<T, D> + kLightRingBytes + 8);
static_assert(kLightSmemBytes<__nv_bfloat16, kLightHeadDim> + 1024 <= 227 * 1024 && kLightCtaWarps <= 12);
static_assert(kLightSmemBytes<__nv_bfloat16, 128> + 1024 <= 227 * 1024 && LightCtaWarps(128) <= 8);

// The TMA loads a light warp issues: maps and plane pages of the launch.
struct LightMaps {
  const CUtensorMap* multi;   // one box: a whole 64-row tile of consecutive page ids
  const CUtensorMap* single;  // one box: one page (box_rows rows)
  int32_t box_rows;
  int32_t boxes;              // kKvTile / box_rows: a tile's page boxes (divided once per CTA, not per item)
  int32_t k_page0, v_page0;   // FirstPlanePage of the layer's K and V planes
};
template <int D>
__device__ __forceinline__ LightMaps MakeLightMaps(const TreeParams& p, const CUtensorMap* multi,
                                                   const CUtensorMap* single, int32_t box_rows) {
  return LightMaps{multi, single, box_rows, kKvTile / box_rows, FirstPlanePage<D>(p, p.k_plane),
                   FirstPlanePage<D>(p, p.v_plane)};
}

// Lane b's box of tile t (-1 for lanes past the tile's boxes).
__device__ __forceinline__ int32_t LightTileBoxPage(const TreeParams& p, const LightMaps& maps, const WorkItem& it,
                                                    const TmaTiles& tiles, int32_t t, int page_shift, int lane) {
  return lane < maps.boxes ? TmaBoxPage(p, it, tiles, t * maps.boxes + lane, maps.box_rows, page_shift) : -1;
}

// Issues tile t of `it` into the stage (K at stage, V after it), completing on
// `bar` (one arrival: lane 0's, with the bytes). `page`: TmaBoxPage of
// lane's box. Every lane calls.
template <typename T, int D>
__device__ __forceinline__ void LightIssueTile(const TreeParams& p, const LightMaps& maps, const WorkItem& it,
                                               const TmaTiles& tiles, int32_t t, int32_t page, char* stage,
                                               uint64_t* bar, int lane) {
  const uint32_t present = __ballot_sync(0xffffffffu, page >= 0);
  const int32_t first = __shfl_sync(0xffffffffu, page, 0);
  const int boxes = maps.boxes;
  // One box when every page of the tile is there with consecutive ids.
  const bool whole = present == (1u << boxes) - 1u && __all_sync(0xffffffffu, page < 0 || page == first + lane);
  const uint32_t box_bytes = static_cast<uint32_t>(maps.box_rows) * D * sizeof(T);
  if (lane == 0) MbarrierArriveExpectTx(bar, 2u * box_bytes * static_cast<uint32_t>(__popc(present)));
  __syncwarp();  // the bytes are announced before any box can land
  const int32_t slot0 = (tiles.base0 + t * kKvTile) & (p.page_size - 1);  // 0 unless pages exceed 64 slots
  // At D = 128 the tile is two 64-column blocks of 64 rows each, one after
  // the other (KvSmem::kSwizzled): a `multi` box covers both (one load per
  // plane), a `single` box one page of one block (a load per block).
  constexpr int kBlocks = D / 64;
  constexpr int kBlockBytes = kKvTile * 128;
  const uint32_t block_box_bytes = box_bytes / kBlocks;
  if (whole) {
    if (lane == 0) {
      TmaLoad5d(stage, maps.multi, 0, slot0, maps.k_page0 + first, it.kv_head, 0, bar);
      TmaLoad5d(stage + kLightTileBytes<T, D>, maps.multi, 0, slot0, maps.v_page0 + first, it.kv_head, 0, bar);
    }
  } else if (page >= 0) {
    char* dst = stage + lane * block_box_bytes;
#pragma unroll
    for (int blk = 0; blk < kBlocks; ++blk) {
      TmaLoad5d(dst + blk * kBlockBytes, maps.single, 0, slot0, maps.k_page0 + page, it.kv_head, blk, bar);
      TmaLoad5d(dst + kLightTileBytes<T, D> + blk * kBlockBytes, maps.single, 0, slot0, maps.v_page0 + page,
                it.kv_head, blk, bar);
    }
  }
}

// A warp's item descriptors in shared memory: the warp's n-th item (item
// begin + w + n W, W = kLightCtaWarps) and its item_entry at slot n % 32. The
// ring is refilled 16 items at a time with cp.async, one item per lane, a
// half ahead of use: one global round trip per 16 items, off the chain.
struct LightItemRing {
  char* base;
  int32_t first, end;  // the warp's first item, the CTA's end
  int32_t warps;       // the CTA's light warps (LightCtaWarps)
  __device__ __forceinline__ void Fill(const TreeParams& p, int32_t n0, int lane) const {  // items n0 .. n0 + 15
    if (lane < 16) {
      const int32_t n = n0 + lane, i = first + n * warps;
      char* slot = base + (n % kLightRingItems) * 64;
      const char* item = reinterpret_cast<const char*>(p.items + (i < end ? i : first));
      CpAsync16(slot, item, true);
      CpAsync16(slot + 16, item + 16, true);
      CpAsync16(slot + 32, item + 32, true);
      CpAsync16(slot + 48, p.item_entry + (i < end ? i : first), true);
    }
    CpAsyncCommit();
  }
  // The warp's n-th item (landed: see LightWarpItems).
  __device__ __forceinline__ void Get(int32_t n, WorkItem& it, int4& ie) const {
    const int4* slot = reinterpret_cast<const int4*>(base + (n % kLightRingItems) * 64);
    union {
      int4 words[3];
      WorkItem item;
    } u;
    u.words[0] = slot[0];
    u.words[1] = slot[1];
    u.words[2] = slot[2];
    it = u.item;
    ie = slot[3];
  }
};
static_assert(sizeof(WorkItem) == 48);

// The q fragments of a light item's rows (heads of its KV group; rows past
// its row count are zero). When q has the KV's dtype (the engine's case) the
// loads are straight-line: every lane loads a row that exists (an invalid
// row's head is the item's first) and zeroes what it does not own, with one
// warp-uniform branch for rows 8-15; LoadQFragments' per-load validity and
// dtype branches (divergent: rows differ across lanes) were most of a light
// item's ~2,500 cycles before its first tile's wait (PERF_NOTES session 17).
template <typename T, int D>
struct LightRows {
  int32_t head[2];
  bool valid[2];
  uint32_t qf[D / 16][4];
  __device__ __forceinline__ void Load(const TreeParams& p, const WorkItem& it, const int4& ie, int lane) {
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const int32_t local = lane / 4 + 8 * r;
      valid[r] = local < it.row_count;
      head[r] = it.kv_head * p.group + it.row_begin % p.group + (valid[r] ? local : 0);
    }
    const int tq = lane % 4;
    if (p.q_dtype != DTypeCode<T>()) {
      const int32_t qrow[2] = {ie.x, ie.x};
      LoadQFragments<T, D>(p, qrow, head, valid, tq, qf);
      return;
    }
    const auto* q = static_cast<const uint32_t*>(p.q);  // pairs of T
    const int64_t row0 = int64_t{ie.x} * p.num_q_heads;
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      if (r == 1 && it.row_count <= 8) {  // warp-uniform: rows 8-15 do not exist
#pragma unroll
        for (int ks = 0; ks < D / 16; ++ks) qf[ks][1] = qf[ks][3] = 0u;
        break;
      }
      const uint32_t* src = q + (row0 + head[r]) * (D / 2) + tq;
#pragma unroll
      for (int ks = 0; ks < D / 16; ++ks) {
#pragma unroll
        for (int half = 0; half < 2; ++half) {
          const uint32_t v = src[ks * 8 + half * 4];
          qf[ks][half * 2 + r] = valid[r] ? v : 0u;
        }
      }
    }
  }
};

// Warp w of a light CTA: items begin + w, begin + w + W, ... (every lane
// calls; `stage`, `ring_base` and `bar` are the warp's own). Per item, while
// its KV is in flight: its q rows load, the next item's descriptor comes from
// the ring and its first page ids load. (Prefetching the item after next
// into L2 with TMA prefetches measured slower on the H100: 64.7 vs 52.2 us
// on the engine row with 120-token suffixes, equal with 64.)
template <typename T, int D, typename PartialT>
__device__ __forceinline__ void LightWarpItems(const TreeParams& p, const LightMaps& maps, char* stage, char* ring_base,
                                               uint64_t* bar, int32_t begin, int32_t end, int w, int lane) {
  constexpr int kWarpsN = LightCtaWarps(D);
  const int tq = lane % 4;
  const int page_shift = __ffs(p.page_size) - 1;
  const T* sK = reinterpret_cast<const T*>(stage);
  const T* sV = reinterpret_cast<const T*>(stage + kLightTileBytes<T, D>);
  int32_t i = begin + w;
  if (i >= end) return;
  if (lane == 0) {
    MbarrierInit(bar, 1);
    FenceMbarrierInit();
  }
  __syncwarp();
  uint32_t phase = 0;
  const LightItemRing ring{ring_base, i, end, kWarpsN};
  ring.Fill(p, 0, lane);
  CpAsyncWait<0>();
  ring.Fill(p, 16, lane);  // waited for when item 14 starts (below)
  __syncwarp();
  int32_t n = 0;  // the current item's number in this warp's sequence
  WorkItem it;
  int4 ie;
  ring.Get(0, it, ie);
  TmaTiles tiles(it);
  if (tiles.count > 0) {
    LightIssueTile<T, D>(p, maps, it, tiles, 0, LightTileBoxPage(p, maps, it, tiles, 0, page_shift, lane), stage, bar,
                         lane);
  }
  for (; i < end; i += kWarpsN) {
    const bool more = i + kWarpsN < end;
    WorkItem next = it;
    int4 next_ie = ie;
    if (more) ring.Get(n + 1, next, next_ie);
    if ((n + 2) % 16 == 0) {
      // Items n + 2 .. n + 17 have landed (filled 16 items ago); items n + 18 ..
      // n + 33 replace n - 14 .. n + 1 (this item and the next are in registers).
      CpAsyncWait<0>();
      __syncwarp();
      ring.Fill(p, n + 18, lane);
    }
    LightRows<T, D> rows;
    rows.Load(p, it, ie, lane);
    const TmaTiles next_tiles(next);
    const int32_t limit[2] = {it.kv_end, it.kv_end};
    float o[D / 8][4];
#pragma unroll
    for (int j = 0; j < D / 8; ++j) o[j][0] = o[j][1] = o[j][2] = o[j][3] = 0.0f;
    float m[2] = {-CUDART_INF_F, -CUDART_INF_F}, l[2] = {0.0f, 0.0f};
    for (int32_t t = 0; t < tiles.count; ++t) {
      // The boxes after this tile: the item's next tile, or the next item's first.
      const bool last = t + 1 == tiles.count;
      const int32_t page = !last ? LightTileBoxPage(p, maps, it, tiles, t + 1, page_shift, lane)
                                 : (more ? LightTileBoxPage(p, maps, next, next_tiles, 0, page_shift, lane) : -1);
      MbarrierWait(bar, phase);
      phase ^= 1u;
      const int32_t tok0 = tiles.base0 + t * kKvTile - it.first_slot;
      if (it.row_count <= 8) {
        ComputeKvTile<T, D, KvSmem::kSwizzled, 8>(p, sK, sV, tok0, limit, rows.qf, o, m, l, lane, it.kv_begin);
      } else {
        ComputeKvTile<T, D, KvSmem::kSwizzled, 16>(p, sK, sV, tok0, limit, rows.qf, o, m, l, lane, it.kv_begin);
      }
      __syncwarp();  // every lane has read the stage before it is refilled
      if (!last) {
        LightIssueTile<T, D>(p, maps, it, tiles, t + 1, page, stage, bar, lane);
      } else if (more && next_tiles.count > 0) {
        LightIssueTile<T, D>(p, maps, next, next_tiles, 0, page, stage, bar, lane);
      }
    }
    if (tiles.count == 0 && more && next_tiles.count > 0) {
      LightIssueTile<T, D>(p, maps, next, next_tiles, 0,
                           LightTileBoxPage(p, maps, next, next_tiles, 0, page_shift, lane), stage, bar, lane);
    }
    // An item that sees no token of its chunk still writes its (empty) slot.
    const int32_t slots[2] = {ie.z + it.chunk, ie.z + it.chunk};
    StoreRowPartialsAt<D, PartialT>(p, slots, rows.head, rows.valid, m, l, tq, [&](int j, int c) { return o[j][c]; });
    it = next;
    ie = next_ie;
    tiles = next_tiles;
    ++n;
  }
  CpAsyncWait<0>();  // no copy into the ring outlives the warp
}

// Light warp `warp` (0 .. LightCtaWarps(D) - 1) of a light CTA: its stage,
// ring and mbarrier in the CTA's shared memory, then its items [begin, end)
// (after the dependency wait: q and KV may come from the kernel before this
// launch). PartialT: the launch's partial o type (TmaPartial). Inlined: as a
// called function (its own register allocation) the light CTA read every
// TreeParams field through a stack copy and ran the engine row no faster
// than the unsplit kernel (H100).
template <typename T, int D, typename PartialT>
__device__ __forceinline__ void RunLightWarp(const TreeParams& p, const LightMaps& maps, char* smem, int32_t begin,
                                             int32_t end, int warp, int lane) {
  constexpr int kWarps = LightCtaWarps(D);
  char* rings = smem + kWarps * 2 * kLightTileBytes<T, D>;
  uint64_t* bars = reinterpret_cast<uint64_t*>(rings + kWarps * kLightRingBytes);
  LightWarpItems<T, D, PartialT>(p, maps, smem + warp * 2 * kLightTileBytes<T, D>, rings + warp * kLightRingBytes,
                                 bars + warp, begin, end, warp, lane);
}

// The trace (params.cuh) of a light CTA, by one thread once its light warps
// are done: every item done (words 2, 3, 6, 7), light items in word 12.
__device__ __forceinline__ void LightCtaTrace(const TreeParams& p, int32_t begin, int32_t end) {
  unsigned long long* w = p.trace + int64_t{blockIdx.x} * kTraceItemWords;
  w[2] = w[3] = GlobalTimerNs();
  w[6] = clock64();
  w[7] = SmId();
  w[12] = static_cast<unsigned long long>(end - begin);
}

// A light CTA at kLightHeadDim: items [begin, end) over all its warps; every
// thread of the CTA calls.
template <typename T, int D>
__device__ __forceinline__ void RunLightCta(const TreeParams& p, const LightMaps& maps, char* smem, int32_t begin,
                                            int32_t end) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (warp < kLightCtaWarps) RunLightWarp<T, D, TmaPartial<T, D>>(p, maps, smem, begin, end, warp, lane);
  if (p.trace != nullptr) {
    __syncthreads();
    if (threadIdx.x == 0) LightCtaTrace(p, begin, end);
  }
}

}  // namespace banyan::attention::kernels

#endif  // BANYAN_ATTENTION_KERNELS_LIGHT_CUH_

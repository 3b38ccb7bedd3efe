// The warp-specialized persistent tree kernel for Hopper (sm_90a,
// KernelVariant::kTma): the same work items, math (state.cuh) and partial
// outputs as PersistentWgmmaKernel (tree_wgmma.cuh), restructured the way
// FlashAttention-3 feeds its tensor cores. 384 threads:
//   warpgroup 0, the producers (40 or 64 registers, below; two or three
//     warps work): warp 1 copies each item's q rows (one 1-D bulk copy per
//     entry: its query heads of the KV group are contiguous in q; at D = 64
//     cp.async by every lane, kTmaQByLanes) and row metadata into the item
//     buffer; warp 0 issues, per 64-token KV tile, TMA box loads (tensor maps
//     over the whole KV pool, 128-byte swizzle, kv_tensor_map.h) into a ring
//     of kTmaStages stages: K and V, or with kTmaSplitKv K only, warp 2
//     loading V on barriers of its own, so that a stage's K half reloads
//     while its V half is still in use. One box when the tile's pages have
//     consecutive ids (the common case: pages are allocated in order), else
//     one per page. Page ids come a 32-box window at a time, one per lane,
//     the next window loaded while the current one is used; each warp loads
//     the next item's descriptor during the current item.
//   warpgroups 1-2, the consumers (232 or 216 registers): packed rows 0-63 and
//     64-127 of the item, tree_wgmma.cuh's tile math (S = Q K^T on wgmma,
//     online softmax in registers, O += P V on wgmma); P . V of tile t - 1
//     is issued with S of tile t and waited for after the softmax of tile t,
//     when V of tile t - 1 goes back to the producer (K of tile t right after
//     S; PERF_NOTES sessions 5 and 10).
// No thread of the math ever touches global memory except for the partial
// states it writes; the two consumer warpgroups never wait for each other
// except on tiles at an item's edge. CTAs from TreeParams::light_cta_begin on
// are light CTAs instead (light.cuh): no rings, each warp runs light items
// alone on mma.sync (at D = 128 six warps of the consumer warpgroups, with
// their registers).
//
// Tiles are aligned to 64 pool positions of the segment (position = first
// slot + token), so every box starts at a page start (or, for pages of more
// than 64 tokens, at a 64-token offset inside one): a page size of at least 8
// and a power of two (host checks). The first and last tile of an item can
// hold rows outside [kv_begin, kv_end): boxes wholly outside are not loaded,
// and the consumers zero those V rows in shared memory before the math (a
// masked score is 0, but 0 * NaN is not) and mask their scores.
//
// Synchronization (mbarriers, tma.cuh): per stage and plane (K, V),
// full (1 arrival + the tile's bytes; without kTmaSplitKv K's covers both
// planes) and empty (8 consumer warps: K after S of its tile retired, V after
// its P . V retired, one iteration later);
// item_full[b] (the 32 lanes of producer warp 1 + the q bytes, or at
// D = 64 each lane's cp.async arrival: kTmaQByLanes) and
// item_empty[b] (256 consumer threads, once they hold the item in registers).
// The only generic-proxy writes the tensor cores read are the zeroed V rows:
// the consumers fence the async proxy and meet at named barrier 1 before
// using them (a split small item's warpgroup alone: named barrier 4 + its
// index). The producers meet once, at named barrier 6 (kTmaStartGate, below).
#ifndef BANYAN_ATTENTION_KERNELS_TREE_TMA_CUH_
#define BANYAN_ATTENTION_KERNELS_TREE_TMA_CUH_

#include <climits>
#include <type_traits>

#include "attention/kernels/light.cuh"
#include "attention/kernels/merge.cuh"
#include "attention/kernels/params.cuh"
#include "attention/kernels/state.cuh"
#include "attention/kernels/tma.cuh"
#include "attention/kernels/tree_wgmma.cuh"
#include "attention/kernels/wgmma.cuh"
#include "attention/kernels/wgmma_tile.cuh"

namespace banyan::attention::kernels {

inline constexpr int kTmaConsumerThreads = 2 * 128;  // two warpgroups x 64 packed rows = kTileRows
inline constexpr int kTmaThreads = 128 + kTmaConsumerThreads;
// One item buffer: the consumers free it as soon as they hold the item in
// registers (at the item's start), so the next item's q rows still load
// during the current item; its 35 KB buy a fifth KV stage at D = 128.
inline constexpr int kTmaItemBuffers = 1;
// How the items warp copies an item's q rows into the item buffer: one TMA
// bulk copy per entry (item_full counts the bytes; 32 arrivals), or, at
// D = 64, each lane its rows with cp.async on the LSU path (each lane
// arrives twice: its metadata, then cp.async.mbarrier.arrive.noinc once its
// copies landed). H100, session 13: at D = 64 (the engine's heads; no start
// gate there, and bulk q copies likely queue in the TMA unit behind the KV
// warp's boxes) the engine row runs 2.4-2.6% faster; at D = 128 the per-row
// copies made the small shape 9% slower (PERF_NOTES session 13 item 7).
template <int D>
inline constexpr bool kTmaQByLanes = D == 64;
// Registers per thread after setmaxnreg (128 x producer + 256 x consumer <=
// 64 K): the consumers need more than the 168 of an even split to keep wgmma
// pipelined. Two splits, a kernel template argument each: kTmaLeanProducer
// (40 / 232: the producer warps spill ~230 bytes, ptxas -v) and
// kTmaFedProducer (64 / 216: ~20 bytes). H200, session 11: the fed split is
// 2-4% faster at D = 64 (the engine rows, light CTAs or not) and 5-9% with
// scattered pages (split rings: three producer warps), the lean one 1-2% at
// D = 128 with ordered pages (TmaProducerRegsFor).
inline constexpr int kTmaLeanProducer = 40;
inline constexpr int kTmaFedProducer = 64;
template <int kProducerRegs>
inline constexpr int kTmaConsumerRegsFor = kProducerRegs == kTmaLeanProducer ? 232 : 216;
static_assert(128 * kTmaLeanProducer + 256 * kTmaConsumerRegsFor<kTmaLeanProducer> <= 65536 &&
              128 * kTmaFedProducer + 256 * kTmaConsumerRegsFor<kTmaFedProducer> <= 65536);
// The split for a launch: fed at D = 64 and with split K / V rings.
constexpr int TmaProducerRegsFor(int head_dim, bool split_kv) {
  return head_dim == 64 || split_kv ? kTmaFedProducer : kTmaLeanProducer;
}
static_assert(kTmaConsumerThreads / 128 * 64 == kTileRows);  // 64 packed rows per consumer warpgroup

// PersistentTmaKernel's `flags`: kTmaPingPong, the consumer warpgroups take
// turns issuing their products; kTmaSplitSmall, items of at most 64 rows go
// to the two consumer warpgroups alternately (by item index), each running
// its item alone, instead of all to warpgroup 0 while warpgroup 1 waits.
inline constexpr int32_t kTmaPingPong = 1;
inline constexpr int32_t kTmaSplitSmall = 2;
// kTmaSplitKv: K and V tiles loaded by two producer warps on separate
// barriers (K released after S, V after P . V) instead of by one warp into
// stages released as a whole.
inline constexpr int32_t kTmaSplitKv = 4;
// TmaProduceKv's plane argument for both planes.
inline constexpr int kTmaBothPlanes = 2;
// kTmaGateStart, the start gate (named barrier kTmaStartGate): the KV warps
// issue the first item's first kTmaGatedTiles tiles, then wait until the
// items warp has issued the item's q copies before filling the rest of the
// ring, so that the q rows do not queue behind a whole ring of KV boxes in
// the SM's TMA unit (the consumers need both q and the first tile to start).
// H200, session 11: 2-4% faster at D = 128 with shared rings (small shape
// 16.1 -> 15.7 us), ~2% slower with split rings, within 1% at D = 64; so the
// gate is compiled into the lean register split's instantiation only (D = 128
// with shared rings) and the flag is ignored by the fed one.
inline constexpr int32_t kTmaGateStart = 8;
inline constexpr int kTmaStartGate = 6;
inline constexpr int kTmaGatedTiles = 1;
__device__ __forceinline__ int TmaStartGateThreads(bool split_kv) { return split_kv ? 96 : 64; }
// kTmaPageBoxes: every tile loaded with one box per page and 64 columns, also
// where its pages have consecutive ids (TreeAttention's short-plan feed).
inline constexpr int32_t kTmaPageBoxes = 16;

// At D 64, unmasked spans of at least this many tiles run TmaConsume's
// pipelined loop.
inline constexpr int kPipelinedMinTiles = 3;

// KV stages: D = 128 5 x 32 KB, D = 64 10 x 16 KB (with the item buffer,
// under the 227 KB of shared memory a CTA may have).
template <int D>
inline constexpr int kTmaStages = D == 64 ? 10 : 5;
// Whether the heavy items' row sums come from the tensor cores
// (TensorRowSums, wgmma_tile.cuh) instead of the softmax's FADDs: at D 64
// (H100: engine rows 0-1% faster, the rest unchanged; at D 128 the headline
// ran 0.6% slower, PERF_NOTES session 32).
template <int D>
inline constexpr bool kTmaTensorRowSums = D == 64;

// One item's q rows and row metadata, written by the producer.
struct TmaItemMeta {
  WorkItem item;
  int32_t entry[kTileRows];
  int32_t head[kTileRows];
  int32_t limit[kTileRows];  // min(entry_kv_limit, kv_end)
  int32_t min_limit;         // the least limit of the item's rows
  int32_t unused[3];         // sizeof stays a multiple of 16 (static_assert below)
};

// Shared-memory layout of PersistentTmaKernel (from a 1024-byte aligned base).
template <typename T, int D>
struct TmaSmem {
  static constexpr int kTileBytes = kKvTile * D * static_cast<int>(sizeof(T));  // one K or V tile
  static constexpr int kStageBytes = 2 * kTileBytes;
  // Elements per q row, unpadded: an entry's rows (its query heads of the KV
  // group, consecutive in q) land with one bulk copy. The consumers read the
  // rows once per item, with 8-way bank conflicts.
  static constexpr int kQStride = D;
  static constexpr int kQBytes = kTileRows * kQStride * static_cast<int>(sizeof(T));
  static constexpr int kKvOffset = 0;
  static constexpr int kQOffset = kTmaStages<D> * kStageBytes;
  static constexpr int kMetaOffset = kQOffset + kTmaItemBuffers * kQBytes;
  static constexpr int kBarOffset = kMetaOffset + kTmaItemBuffers * static_cast<int>(sizeof(TmaItemMeta));
  static constexpr int kBars = 4 * kTmaStages<D> + 2 * kTmaItemBuffers;
  static constexpr int kOnesOffset = (kBarOffset + kBars * 8 + 15) / 16 * 16;  // TensorRowSums' block of ones
  static constexpr int kBytes = kOnesOffset + (kTmaTensorRowSums<D> ? TensorRowSums::kOnesBytes : 0);

  __device__ static char* Stage(char* s, int stage) { return s + kKvOffset + stage * kStageBytes; }
  __device__ static T* QRows(char* s, int b) { return reinterpret_cast<T*>(s + kQOffset + b * kQBytes); }
  __device__ static TmaItemMeta* Meta(char* s, int b) {
    return reinterpret_cast<TmaItemMeta*>(s + kMetaOffset + b * static_cast<int>(sizeof(TmaItemMeta)));
  }
  // Per stage and plane (0 K, 1 V): full (the tile landed) and empty (the
  // consumers are done with it).
  __device__ static uint64_t* Bar(char* s, int i) { return reinterpret_cast<uint64_t*>(s + kBarOffset) + i; }
  __device__ static uint64_t* Full(char* s, int plane, int stage) { return Bar(s, plane * kTmaStages<D> + stage); }
  __device__ static uint64_t* Empty(char* s, int plane, int stage) {
    return Bar(s, (2 + plane) * kTmaStages<D> + stage);
  }
  __device__ static uint64_t* ItemFull(char* s, int b) { return Bar(s, 4 * kTmaStages<D> + b); }
  __device__ static uint64_t* ItemEmpty(char* s, int b) { return Bar(s, 4 * kTmaStages<D> + kTmaItemBuffers + b); }
  __device__ static char* Ones(char* s) { return s + kOnesOffset; }
};
static_assert(sizeof(TmaItemMeta) % 16 == 0);

// Dynamic shared memory of PersistentTmaKernel (+1 KB to align the base): a
// heavy CTA's layout or, in a kernel that runs light CTAs (kLight: always at
// kLightHeadDim, work_plan.h; at D 128 the instantiation for plans with
// light CTAs), a light CTA's stages (light.cuh), the larger.
template <typename T, int D, bool kLight = D == kLightHeadDim>
inline constexpr int kTmaSmemBytes =
    (kLight && kLightSmemBytes<T, D> > TmaSmem<T, D>::kBytes ? kLightSmemBytes<T, D> : TmaSmem<T, D>::kBytes) + 1024;
static_assert(kTmaSmemBytes<__nv_bfloat16, 128> <= 227 * 1024 && kTmaSmemBytes<__nv_bfloat16, 64> <= 227 * 1024);

// The CTA's head block (work_plan.h kHeadStride): its first item, words
// [0, 12), and its item range, words 12 and 13, one cold round trip instead
// of two (cta_item_indptr, then the item). Read by the fed register split's
// instantiation only (H200, session 11: with scattered pages 1-7% faster,
// small shape 16.2 -> 15.1 us; with the lean split at D = 128 and ordered
// pages no faster and up to 3% slower).
__device__ __forceinline__ const int4* CtaHead(const TreeParams& p) {
  return reinterpret_cast<const int4*>(p.cta_head + int64_t{blockIdx.x} * kHeadStride);
}
__device__ __forceinline__ WorkItem CtaFirstItem(const TreeParams& p) {
  static_assert(sizeof(WorkItem) == 3 * sizeof(int4));
  union {
    int4 words[3];
    WorkItem item;
  } u;
  const int4* head = CtaHead(p);
  u.words[0] = head[0];
  u.words[1] = head[1];
  u.words[2] = head[2];
  return u.item;
}
// The first item of the CTA's range [begin, end) (an empty item when there is
// none), from its head block or from the plan's item list.
__device__ __forceinline__ WorkItem CtaRangeFirstItem(const TreeParams& p, int32_t begin, int32_t end, bool from_head) {
  return begin >= end ? WorkItem{} : from_head ? CtaFirstItem(p) : p.items[begin];
}

// A ring position: stage index and the parity of its current use.
template <int kSize>
struct RingSlot {
  int index = 0;
  uint32_t phase = 0;
  __device__ __forceinline__ void Advance() {
    if (++index == kSize) {
      index = 0;
      phase ^= 1u;
    }
  }
};

// Producer warp 1: each item's q rows and row metadata into the item
// buffers. The next item's descriptor loads during the current one.
template <typename T, int D>
__device__ __forceinline__ void TmaProduceItems(const TreeParams& p, char* smem, int32_t begin, int32_t end,
                                                bool split_kv, bool gate, bool from_head) {
  using L = TmaSmem<T, D>;
  const int lane = threadIdx.x % 32;
  const T* q = static_cast<const T*>(p.q);
  RingSlot<kTmaItemBuffers> buf;
  WorkItem next = CtaRangeFirstItem(p, begin, end, from_head);
  constexpr int kRowsPerLane = kTileRows / 32;
  for (int32_t i = begin; i < end; ++i) {
    const WorkItem it = next;
    if (i + 1 < end) next = p.items[i + 1];
    // Every row's entry data first, all loads in flight at once (one global
    // round trip, not one per 32 rows: the copies below are ordered memory
    // operations), before waiting for the buffer.
    int32_t q_row[kRowsPerLane], kv_limit[kRowsPerLane];
#pragma unroll
    for (int k = 0; k < kRowsPerLane; ++k) {
      const int r = lane + 32 * k;
      const int32_t entry = it.entry_begin + (it.row_begin + r) / p.group;
      q_row[k] = r < it.row_count ? p.entry_query[entry] : 0;
      kv_limit[k] = r < it.row_count ? p.entry_kv_limit[entry] : 0;
    }
    // q (and the KV) may come from the kernel before this launch (the start overlap above PersistentTmaKernel).
    if (i == begin) GridDependencyWait();
    MbarrierWait(L::ItemEmpty(smem, buf.index), buf.phase ^ 1u);
    TmaItemMeta* meta = L::Meta(smem, buf.index);
    uint64_t* item_full = L::ItemFull(smem, buf.index);
    int32_t min_limit = INT_MAX;  // TmaConsume's unmasked tiles
#pragma unroll
    for (int k = 0; k < kRowsPerLane; ++k) {
      if (lane + 32 * k < it.row_count) min_limit = min(min_limit, min(kv_limit[k], it.kv_end));
    }
    min_limit = __reduce_min_sync(0xffffffffu, min_limit);
    if (lane == 0) {
      meta->item = it;
      meta->min_limit = min_limit;
      if constexpr (!kTmaQByLanes<D>) MbarrierExpectTx(item_full, static_cast<uint32_t>(it.row_count) * D * sizeof(T));
    }
    __syncwarp();
    T* q_rows = L::QRows(smem, buf.index);
#pragma unroll
    for (int k = 0; k < kRowsPerLane; ++k) {
      const int r = lane + 32 * k;
      if (r >= it.row_count) break;
      const int32_t packed = it.row_begin + r;
      const int32_t entry = it.entry_begin + packed / p.group;
      const int32_t head = it.kv_head * p.group + packed % p.group;
      meta->entry[r] = entry;
      meta->head[r] = head;
      meta->limit[r] = min(kv_limit[k], it.kv_end);
      if constexpr (kTmaQByLanes<D>) {  // the lane's row, 16 bytes per cp.async
        const T* src = q + (int64_t{q_row[k]} * p.num_q_heads + head) * D;
        T* dst = q_rows + r * L::kQStride;
#pragma unroll
        for (int c = 0; c < D / 8; ++c) CpAsync16(dst + c * 8, src + c * 8, true);
      } else if (packed % p.group == 0 || r == 0) {
        // One copy per entry (its first row in the item): the TMA unit takes
        // small copies one at a time (128 row copies made an item's q the
        // last thing to land, PERF_NOTES session 10).
        const int32_t rows = min(p.group - packed % p.group, it.row_count - r);
        BulkCopyToShared(q_rows + r * L::kQStride, q + (int64_t{q_row[k]} * p.num_q_heads + head) * D,
                         static_cast<uint32_t>(rows) * D * sizeof(T), item_full);
      }
    }
    if constexpr (kTmaQByLanes<D>) CpAsyncArriveNoinc(item_full);  // once this lane's rows have landed
    MbarrierArrive(item_full);
    if (i == begin && gate) NamedBarrierArrive(kTmaStartGate, TmaStartGateThreads(split_kv));  // the q copies are out
    buf.Advance();
  }
}

// Producer warps 0 and 2: the K (kPlane 0) or V (kPlane 1) tiles of every
// item; kPlane kTmaBothPlanes: both, on K's barriers (shared rings).
// box_rows = min(page size, 64); maps: kv_tensor_map.h (multi: a whole tile
// of pages with consecutive ids in one box, single: one page). The next
// item's descriptor loads during the current one.
template <typename T, int D, int kPlane, bool kPageBoxOption>
__device__ __forceinline__ void TmaProduceKv(const TreeParams& p, const CUtensorMap* multi, const CUtensorMap* single,
                                             int32_t box_rows, char* smem, int32_t begin, int32_t end, bool gate,
                                             bool from_head, bool page_boxes) {
  using L = TmaSmem<T, D>;
  const int lane = threadIdx.x % 32;
  const int page_shift = __ffs(p.page_size) - 1;
  const int boxes_per_tile = kKvTile / box_rows;
  const uint32_t box_bytes = static_cast<uint32_t>(box_rows) * 128u;  // rows x 64 columns x 2 bytes
  // Planes loaded (a compile-time range: this loop issues the TMA copies).
  constexpr bool kBoth = kPlane == kTmaBothPlanes;
  constexpr int kFirst = kBoth ? 0 : kPlane, kLast = kBoth ? 1 : kPlane;
  const uint32_t present_bytes = box_bytes * (D / 64) * (kBoth ? 2u : 1u);  // every column block, each plane
  const int32_t k_page0 = FirstPlanePage<D>(p, p.k_plane), v_page0 = FirstPlanePage<D>(p, p.v_plane);
  RingSlot<kTmaStages<D>> stage;
  bool waited = false;
  bool gated = !gate || begin == end;  // the start gate passed (no items: the items warp never arrives either)
  auto pass_gate = [&] {
    NamedBarrierSync(kTmaStartGate, TmaStartGateThreads(!kBoth));
    gated = true;
  };
  WorkItem next = CtaRangeFirstItem(p, begin, end, from_head);
  for (int32_t i = begin; i < end; ++i) {
    const WorkItem it = next;
    if (i + 1 < end) next = p.items[i + 1];
    const TmaTiles tiles(it);
    // Page id of box 32 w + lane (-1: past the item or wholly outside it).
    auto window = [&](int w) -> int32_t { return TmaBoxPage(p, it, tiles, w * 32 + lane, box_rows, page_shift); };
    int32_t cur = window(0), nxt = window(1);
    int cur_w = 0;
    for (int t = 0; t < tiles.count; ++t) {
      if (!gated && (i > begin || t >= kTmaGatedTiles)) pass_gate();
      const int k0 = t * boxes_per_tile;  // a tile's boxes share one window (boxes_per_tile divides 32)
      if (k0 / 32 != cur_w) {
        cur_w = k0 / 32;
        cur = nxt;
        nxt = window(cur_w + 1);
      }
      // Present boxes, and whether the tile's pages have consecutive ids (one box then).
      const int32_t first = __shfl_sync(0xffffffffu, cur, k0 % 32);
      int present = 0;
      bool consecutive = first >= 0;
      if constexpr (kPageBoxOption) consecutive = consecutive && !page_boxes;
      for (int b = 0; b < boxes_per_tile; ++b) {
        const int32_t page = __shfl_sync(0xffffffffu, cur, (k0 + b) % 32);
        present += page >= 0;
        consecutive = consecutive && page == first + b;
      }
      if (!waited) {  // before the first KV load (as TmaProduceItems)
        GridDependencyWait();
        waited = true;
      }
#pragma unroll
      for (int pl = kFirst; pl <= kLast; ++pl) MbarrierWait(L::Empty(smem, pl, stage.index), stage.phase ^ 1u);
      uint64_t* full = L::Full(smem, kFirst, stage.index);
      if (lane == 0) MbarrierArriveExpectTx(full, static_cast<uint32_t>(present) * present_bytes);
      const int32_t slot0 = (tiles.base0 + k0 * box_rows) & (p.page_size - 1);  // 0 unless pages exceed 64 slots
      if (consecutive) {
        if (lane == 0) {
#pragma unroll
          for (int pl = kFirst; pl <= kLast; ++pl) {
            TmaLoad5d(L::Stage(smem, stage.index) + pl * L::kTileBytes, multi, 0, slot0,
                      (pl == 0 ? k_page0 : v_page0) + first, it.kv_head, 0, full);
          }
        }
      } else {
        // One page box per lane: lane b issues box b's copies (from one lane, the tile's 8-16 copies went out
        // one after another).
        __syncwarp();  // the bytes are announced before any box can land
        const int32_t page = __shfl_sync(0xffffffffu, cur, (k0 + lane) % 32);
        if (lane < boxes_per_tile && page >= 0) {
#pragma unroll
          for (int blk = 0; blk < D / 64; ++blk) {
#pragma unroll
            for (int pl = kFirst; pl <= kLast; ++pl) {
              TmaLoad5d(L::Stage(smem, stage.index) + pl * L::kTileBytes + blk * (kKvTile * 128) + lane * box_bytes,
                        single, 0, slot0, (pl == 0 ? k_page0 : v_page0) + page, it.kv_head, blk, full);
            }
          }
        }
      }
      stage.Advance();
    }
  }
  if (!gated) pass_gate();  // a plan whose items hold at most kTmaGatedTiles tiles in all
}

// Zeroes the V rows of an edge tile whose positions lie outside
// [pos_begin, pos_end); threads 0..kThreads-1 of the tile's users call.
template <typename T, int D, int kThreads>
__device__ __forceinline__ void ZeroOutsideRows(char* v_tile, int32_t base, int32_t pos_begin, int32_t pos_end,
                                                int ct) {
  constexpr int kChunks = (D / 64) * kKvTile * 8;  // 16-byte chunks of the tile
#pragma unroll
  for (int idx = ct; idx < kChunks; idx += kThreads) {
    const int row = (idx / 8) % kKvTile;
    const int32_t pos = base + row;
    if (pos < pos_begin || pos >= pos_end) {
      *reinterpret_cast<uint4*>(v_tile + (idx / (kKvTile * 8)) * (kKvTile * 128) + row * 128 + (idx % 8) * 16) =
          make_uint4(0u, 0u, 0u, 0u);
    }
  }
}

// The consumer warpgroups: consumer warp cw (0..7) owns packed rows
// 16 cw .. 16 cw + 15 of each item, as tree_wgmma.cuh's warp cw; with
// split_small, an item of at most 64 rows belongs to warpgroup i % 2 alone
// (its warp cw owning rows 16 (cw % 4) ..), and the other warpgroup only
// passes its stages on.
template <typename T, int D, int kProducerRegs>
__device__ __forceinline__ void TmaConsume(const TreeParams& p, char* smem, int32_t begin, int32_t end,
                                           bool pingpong, bool split_small, bool split_kv) {
#ifdef BANYAN_WGMMA_ENABLED
  using L = TmaSmem<T, D>;
  constexpr int kKSteps = D / 16;
  const int ct = threadIdx.x - 128;
  const int cwarp = ct / 32, lane = ct % 32, gq = lane / 4, tq = lane % 4;
  const float scale = p.scale_log2;
  const uint64_t k_desc0 = SmemDescriptor(L::Stage(smem, 0), 16, 1024);
  const uint64_t v_desc0 = SmemDescriptor(L::Stage(smem, 0) + L::kTileBytes, kKvTile * 128, 1024);
  constexpr uint32_t kStageUnits = L::kStageBytes / 16;
  RingSlot<kTmaStages<D>> stage;
  RingSlot<kTmaItemBuffers> buf;
  using Sums = std::conditional_t<kTmaTensorRowSums<D>, TensorRowSums, NoTensorSums>;
  for (int32_t i = begin; i < end; ++i) {
    // The item, its rows and q fragments from the producer's buffer.
    MbarrierWait(L::ItemFull(smem, buf.index), buf.phase);
    ItemTraceBegin(p, ct == 0);
    const TmaItemMeta* meta = L::Meta(smem, buf.index);
    const WorkItem it = meta->item;
    const int32_t item_limit = meta->min_limit;
    const int group = cwarp / 4;
    const bool small = split_small && it.row_count <= 64;
    const int row_warp = small ? cwarp % 4 : cwarp;  // this warp's 16 rows of the item
    // Warpgroup-uniform: whether this warpgroup has rows of the item. A vote
    // makes it uniform to ptxas too, so that the wgmma descriptors under it
    // stay on the uniform datapath (no R2UR per wgmma).
    const bool group_active = __all_sync(0xffffffffu, small ? group == (i & 1) : group * 64 < it.row_count);
    int32_t slot[2], head[2], limit[2];
    bool valid[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const int local = row_warp * 16 + gq + r * 8;
      valid[r] = group_active && local < it.row_count;
      head[r] = valid[r] ? meta->head[local] : 0;
      limit[r] = valid[r] ? meta->limit[local] : 0;
      // The rows' partial slots, loaded now and used at the item's end: the
      // load's round trip hides behind the tiles instead of following them.
      slot[r] = valid[r] ? p.entry_partial_base[meta->entry[local]] + it.chunk : 0;
    }
    const T* q_rows = L::QRows(smem, buf.index);
    uint32_t qf[kKSteps][4];
#pragma unroll
    for (int ks = 0; ks < kKSteps; ++ks) {
#pragma unroll
      for (int half = 0; half < 2; ++half) {
#pragma unroll
        for (int r = 0; r < 2; ++r) {
          const int local = row_warp * 16 + gq + r * 8;
          qf[ks][half * 2 + r] =
              valid[r] ? *reinterpret_cast<const uint32_t*>(q_rows + local * L::kQStride + ks * 16 + half * 8 + tq * 2)
                       : 0u;
        }
      }
    }
    MbarrierArrive(L::ItemEmpty(smem, buf.index));
    buf.Advance();

    // Ping-pong (both warpgroups busy): they take turns issuing their
    // products (named barriers 2 and 3), so that one's softmax runs while the
    // other's products hold the tensor cores; warpgroup 0 goes first.
    const bool pp = pingpong && it.row_count > 64;  // never for a split item
    if (pp && group == 1) NamedBarrierArrive(2, kTmaConsumerThreads);
    const TmaTiles tiles(it);
    const int32_t full_limit = min(valid[0] ? limit[0] : INT_MAX, valid[1] ? limit[1] : INT_MAX);
    float o[D / 2];
#pragma unroll
    for (int j = 0; j < D / 2; ++j) o[j] = 0.0f;
    float m[2] = {-CUDART_INF_F, -CUDART_INF_F}, l[2] = {0.0f, 0.0f};
    float neg_m[2] = {-0.0f, -0.0f};  // -SafeMax(m), moved with m (MoveRowMax)
    Sums sums(L::Ones(smem));  // the rows' sums, when the tensor cores add them up
    uint32_t pa[4][4];  // P of the previous tile (A of its P . V)
#pragma unroll
    for (int j = 0; j < 16; ++j) pa[j / 4][j % 4] = 0u;
    // Tile t's K and V land for iteration t (V's edge rows zeroed then); K
    // is released right after S of tile t, V after its P . V in iteration
    // t + 1 (waiting for V only then measured slower, PERF_NOTES session 5).
    // With shared rings (!split_kv) K's full barrier covers both.
    RingSlot<kTmaStages<D>> prev = stage;  // tile t - 1's stage (tile 0's while t == 0)
    // At D 128 the tile's stage offsets (through a shuffle: warp-uniform to
    // ptxas as well) and whether its K has landed are found during the tile
    // before, off each warpgroup's serial chain from one tile's pack to the
    // next one's products (H100: headline -5%, small shape -7%; at D 64 the
    // same ran 4-9% slower, so there they come at the tile's start; PERF_NOTES
    // session 27).
    constexpr bool kEarlyNext = D == 128;
    uint32_t k_units = __shfl_sync(0xffffffffu, stage.index * kStageUnits, 0), v_units = k_units;
    bool k_landed = false;
    // Waits for V of tile `vt` (in `slot`) and clears its rows outside the
    // item. `inside`: the caller knows the tile is not an edge tile (one of
    // UnmaskedTileSpan's), so the test is left out.
    auto land_v = [&](const RingSlot<kTmaStages<D>>& slot, int vt, bool inside) {
      if (split_kv) MbarrierWait(L::Full(smem, 1, slot.index), slot.phase);
      if (inside || !tiles.Edge(vt)) return;
      char* v_tile = L::Stage(smem, slot.index) + L::kTileBytes;
      const int32_t base = tiles.base0 + vt * kKvTile;
      if (!small) {  // both warpgroups read the tile
        ZeroOutsideRows<T, D, kTmaConsumerThreads>(v_tile, base, tiles.pos_begin, tiles.pos_end, ct);
        FenceProxyAsync();
        NamedBarrierSync(1, kTmaConsumerThreads);
      } else if (group_active) {  // only this warpgroup does
        ZeroOutsideRows<T, D, 128>(v_tile, base, tiles.pos_begin, tiles.pos_end, ct % 128);
        FenceProxyAsync();
        NamedBarrierSync(4 + group, 128);
      }
    };
    // Waits for K of tile `t` (in `slot`; not when the caller already saw it
    // land) and lands its V.
    auto land = [&](const RingSlot<kTmaStages<D>>& slot, int t, bool k_seen, bool inside = false) {
      if (!k_seen) MbarrierWait(L::Full(smem, 0, slot.index), slot.phase);
      land_v(slot, t, inside);
    };
    // This warp is done with the K or V tile in `slot`.
    auto release = [&](int plane, int index) {
      __syncwarp();
      if (lane == 0) MbarrierArrive(L::Empty(smem, plane, index));
    };
    // Tile t; kMask: scores outside the rows' tokens masked (edge tiles).
    // always_inline: inlined late (a plain lambda), the D 64 kernel got 8 more
    // convergence regions from ptxas and its tile-bound rows ran up to 13%
    // slower; with the attribute both kernels' SASS equals the loop written
    // out (PERF_NOTES session 20).
    auto tile = [&](int t, auto mask_tag) __attribute__((always_inline)) {
      constexpr bool kMask = decltype(mask_tag)::value;
      land(stage, t, kEarlyNext && k_landed, !kMask);  // unmasked tiles are never edge tiles
      if (group_active) {
        const int32_t tok0 = tiles.base0 + t * kKvTile - it.first_slot;
        float s[32];
        if (pp) NamedBarrierSync(2 + group, kTmaConsumerThreads);
        // P . V of tile t - 1 under this tile's softmax. For t = 0 it adds
        // P = 0 times tile 0's V (landed, finite): no branch around wgmma
        // (ptxas serializes every wgmma of a kernel that has one).
        if constexpr (!kEarlyNext) {
          k_units = __shfl_sync(0xffffffffu, stage.index * kStageUnits, 0);
          v_units = __shfl_sync(0xffffffffu, prev.index * kStageUnits, 0);
        }
        IssueTileProducts<T>(s, qf, k_desc0, k_units, o, pa, v_desc0, v_units, sums);
        if (pp) NamedBarrierArrive(3 - group, kTmaConsumerThreads);  // the other warpgroup's turn
        RingSlot<kTmaStages<D>> next = stage;
        next.Advance();
        if constexpr (kEarlyNext) {
          k_landed = __all_sync(0xffffffffu, t + 1 < tiles.count && MbarrierTest(L::Full(smem, 0, next.index),
                                                                                   next.phase));
        }
        // S retired, then the softmax while P . V of tile t - 1 still runs;
        // V of tile t - 1 goes back after it (PERF_NOTES session 10).
        WgmmaWait<1>();
        FenceRegs(s);
        release(0, stage.index);
        float factor[2];
        SoftmaxTile64<!Sums::kOn>(s, tok0, kMask && (tok0 < it.kv_begin || tok0 + kKvTile > full_limit), it.kv_begin,
                                  limit, tq, scale, m, neg_m, l, factor);
        WgmmaWait<0>();
        FenceRegs(o);
        sums.Fence();
        if (t > 0) release(1, prev.index);
        if constexpr (kEarlyNext) {
          k_units = __shfl_sync(0xffffffffu, next.index * kStageUnits, 0);
          v_units = __shfl_sync(0xffffffffu, stage.index * kStageUnits, 0);
        }
        RescaleAndPackP<T>(o, factor, s, pa, sums);
      } else {  // no math: done with the tiles at once
        release(0, stage.index);
        if (t > 0) release(1, prev.index);
      }
      prev = stage;
      stage.Advance();
    };
    // Unmasked tiles [a, b) of a warpgroup with rows and no ping-pong, with S
    // of tile t + 1 issued in the middle of tile t's softmax (once its
    // scores are read) and P . V of t - 1 at its start, so that S is off
    // each warpgroup's serial chain (tile() issues S of t and P . V of t - 1
    // together after the softmax of t - 1). Nothing is in flight across the
    // loop's back edge: with P . V of t in flight there ptxas serialized
    // every wgmma of the kernel (C7514). Enters and leaves in tile()'s state
    // (P of the tile before in pa, unissued; nothing in flight). D 64 only
    // (H100: engine rows 1-3% faster); at D 128 the second score array
    // beside the q fragments spills and the loop ran 15% slower, 36% with q
    // in shared memory instead (PERF_NOTES session 28). Written for the tile()
    // of D 64 (kEarlyNext off: it leaves k_landed and the offsets alone).
    auto pipelined = [&](int a, int b) __attribute__((always_inline)) {
      land(stage, a, false, true);
      float s[32], pr[32], factor[2];
      IssueScores<T>(s, qf, k_desc0, __shfl_sync(0xffffffffu, stage.index * kStageUnits, 0));  // S of a
      WgmmaWait<0>();
      FenceRegs(s);
      // One tile's softmax with P . V of the tile before under it, and S of
      // tile t + 1 (kIssueNext; compile-time: a wgmma in a branch of its own
      // serializes every wgmma of the kernel) under its exponentials.
      auto step = [&](int t, auto issue_tag) __attribute__((always_inline)) {
        constexpr bool kIssueNext = decltype(issue_tag)::value;
        RingSlot<kTmaStages<D>> next = stage;
        next.Advance();
        // Whether K of t + 1 has landed, asked before this tile's max so that
        // the answer's latency hides under it; the wait below runs only when
        // it had not (H100: D 64 engine rows S8 and S64 1-2% faster,
        // PERF_NOTES session 32).
        bool k_early = false;
        if constexpr (kIssueNext) {
          k_early = __all_sync(0xffffffffu, MbarrierTest(L::Full(smem, 0, next.index), next.phase));
        }
        IssueValues<T>(o, pa, v_desc0, __shfl_sync(0xffffffffu, prev.index * kStageUnits, 0), sums);  // P . V of t - 1
        SoftmaxExponents(s, pr, scale, m, neg_m, l, factor);
        if constexpr (kIssueNext) {
          const uint32_t next_k = __shfl_sync(0xffffffffu, next.index * kStageUnits, 0);
          land(next, t + 1, k_early, true);
          // pr is complete before S overwrites s: otherwise the compiler
          // may sink some of the FFMAs below the issue, which keeps s's old
          // values alive beside the product in flight (copies of s, which
          // ptxas answers by serializing every wgmma, C7514).
          FenceRegs(pr);
          IssueScores<T>(s, qf, k_desc0, next_k);  // S of t + 1
        }
        SoftmaxProbabilities(pr);
        FenceRegs(pr);  // the exponentials stay above the wait (the compiler sank them below it)
        release(0, stage.index);
        WgmmaWait<0>();
        FenceRegs(o);
        sums.Fence();
        FenceRegs(s);
        if (t > 0) release(1, prev.index);
        RescaleAndPackP<T>(o, factor, pr, pa, sums);
        // After the pack: the form measured and tested (PERF_NOTES session 28).
        if constexpr (!Sums::kOn) AddRowSums(pr, l);
        prev = stage;
        stage = next;
      };
      for (int t = a; t < b - 1; ++t) step(t, std::true_type{});
      step(b - 1, std::false_type{});
    };
    // The tiles. At D 128, tiles inside every row's tokens run unmasked in a
    // loop of their own (item-uniform bounds): mask-free code there lets
    // ptxas sink the wait for P . V into the softmax, 5-6% faster on the
    // headline. At D 64 the same split through tile() ran up to 13% slower
    // (PERF_NOTES session 20): there the span runs pipelined() and every
    // other tile is masked where its rows need it.
    if constexpr (D == 128) {
      const UnmaskedTiles inside = UnmaskedTileSpan(it.first_slot, it.kv_begin, tiles.count, item_limit);
      for (int t = 0; t < tiles.count;) {
        if (t >= inside.lead && t < inside.end) {
          for (; t < inside.end; ++t) tile(t, std::false_type{});
        } else {
          tile(t, std::true_type{});
          ++t;
        }
      }
    } else {
      const UnmaskedTiles inside = UnmaskedTileSpan(it.first_slot, it.kv_begin, tiles.count, item_limit);
      for (int t = 0; t < tiles.count;) {
        if (t == inside.lead && group_active && !pp && inside.end - t >= kPipelinedMinTiles) {
          pipelined(t, inside.end);
          t = inside.end;
        } else {
          tile(t, std::true_type{});
          ++t;
        }
      }
    }
    if (pp && group == 0) NamedBarrierSync(2, kTmaConsumerThreads);  // warpgroup 1's last turn
    if (tiles.count > 0) {  // P . V of the last tile
      if (group_active) LastTileProduct<T>(o, pa, v_desc0, prev.index * kStageUnits, sums);
      release(1, prev.index);
    }
    sums.AddTo(l, tq);
    StoreRowPartialsAt<D, TmaPartial<T, D, kProducerRegs == kTmaLeanProducer>>(
        p, slot, head, valid, m, l, tq, [&](int j, int k) { return o[j * 4 + k]; });
    ItemTraceEnd(p, ct == 0, i == begin, it.row_count, tiles.count, group_active);
  }
#else
  (void)p;
  (void)smem;
  (void)begin;
  (void)end;
  (void)pingpong;
  (void)split_small;
  (void)split_kv;
#endif
}

// One launch of every work item of the plan (all kBatched, 16-bit KV and q
// of the KV dtype, page size a power of two >= 8: TreeAttention checks).
// Start overlap: TreeAttention may launch it with programmatic stream
// serialization, so that its CTAs set up and read their plan data while the
// kernel before it (the model's QKV epilogue, which writes q and the new K/V)
// finishes; the producer warps wait for that kernel (griddepcontrol.wait)
// before their first q and KV loads, and no other thread reads memory the
// kernels before it write.
// kv_multi / kv_single: the 5-D tensor maps over the whole KV pool
// (kv_tensor_map.h), box_rows slots per page box. flags: kTmaPingPong,
// kTmaSplitSmall, kTmaSplitKv, kTmaGateStart, kTmaPageBoxes. kProducerRegs:
// kTmaLeanProducer or kTmaFedProducer (the register split above). kLightCtas:
// the CTAs from p.light_cta_begin on run light items (always at
// kLightHeadDim; at D 128 its own instantiation, so that plans without light
// CTAs keep the kernel without their code). kClusterMerge: a launch of
// thread-block clusters over a cluster placement (work_plan_cluster.h, no
// light CTAs): after its items every thread meets the cluster barrier and the
// consumer warps merge the cluster's rows (merge.cuh MergeClusterRows); no
// merge launch follows.
template <typename T, int D, int kProducerRegs, bool kLightCtas = D == kLightHeadDim, bool kClusterMerge = false>
__global__ void __launch_bounds__(kTmaThreads, 1)
    PersistentTmaKernel(const __grid_constant__ TreeParams p, const __grid_constant__ CUtensorMap kv_multi,
                        const __grid_constant__ CUtensorMap kv_single, int32_t box_rows, int32_t flags) {
#ifdef BANYAN_WGMMA_ENABLED
  extern __shared__ __align__(1024) char smem_raw[];
  const uint32_t raw = SmemAddress(smem_raw);
  char* smem = smem_raw + ((1024u - (raw & 1023u)) & 1023u);
  TriggerDependents();  // the merge grid may launch now; it waits for this grid's completion
  TraceRecord(p, 0, 4);
  if (threadIdx.x == 0) {  // the descriptors' fetch overlaps the plan reads before the first box
    PrefetchTensorMap(&kv_multi);
    PrefetchTensorMap(&kv_single);
  }
  constexpr bool kFromHead = kProducerRegs == kTmaFedProducer;  // the CTA head (CtaHead)
  int32_t begin, end;
  if constexpr (kFromHead) {
    const int4 span = CtaHead(p)[3];  // words 12-15: begin, end (the plan's cta_item_indptr), ...
    begin = span.x;
    end = span.y;
  } else {
    begin = p.cta_item_indptr[blockIdx.x];
    end = p.cta_item_indptr[blockIdx.x + 1];
  }
  if constexpr (D == kLightHeadDim) {
    if (static_cast<int32_t>(blockIdx.x) >= p.light_cta_begin) {  // a light CTA: no rings, every warp its own items
      GridDependencyWait();
      const LightMaps maps = MakeLightMaps<D>(p, &kv_multi, &kv_single, box_rows);
      RunLightCta<T, D>(p, maps, smem, begin, end);
      return;
    }
  } else if constexpr (D == 128 && kLightCtas) {
    if (static_cast<int32_t>(blockIdx.x) >= p.light_cta_begin) {
      // A light CTA at D = 128 (the model's or forced, work_plan.h): six warps of
      // the consumer warpgroups, on the consumers' registers; the producer
      // warpgroup gives its registers up and leaves.
      if (threadIdx.x < 128) {
        ShrinkRegisters<kProducerRegs>();
        return;
      }
      GrowRegisters<kTmaConsumerRegsFor<kProducerRegs>>();
      GridDependencyWait();
      const LightMaps maps = MakeLightMaps<D>(p, &kv_multi, &kv_single, box_rows);
      const int warp = static_cast<int>(threadIdx.x) / 32 - 4, lane = threadIdx.x % 32;
      if (warp < LightCtaWarps(D)) {
        RunLightWarp<T, D, TmaPartial<T, D, kProducerRegs == kTmaLeanProducer>>(p, maps, smem, begin, end, warp, lane);
      }
      if (p.trace != nullptr) {
        NamedBarrierSync(1, kTmaConsumerThreads);
        if (threadIdx.x == 128) LightCtaTrace(p, begin, end);
      }
      return;
    }
  }
  using L = TmaSmem<T, D>;
  if (threadIdx.x == 0) {
    for (int plane = 0; plane < 2; ++plane) {
      for (int s = 0; s < kTmaStages<D>; ++s) {
        MbarrierInit(L::Full(smem, plane, s), 1);
        MbarrierInit(L::Empty(smem, plane, s), kTmaConsumerThreads / 32);
      }
    }
    for (int b = 0; b < kTmaItemBuffers; ++b) {
      MbarrierInit(L::ItemFull(smem, b), kTmaQByLanes<D> ? 64 : 32);  // TmaProduceItems' arrivals
      MbarrierInit(L::ItemEmpty(smem, b), kTmaConsumerThreads);
    }
    FenceMbarrierInit();
  }
  if constexpr (kTmaTensorRowSums<D>) TensorRowSums::FillOnes<T>(L::Ones(smem), threadIdx.x);
  __syncthreads();
  if (threadIdx.x < 128) {
    ShrinkRegisters<kProducerRegs>();
    // The gate's code exists only in the lean split's instantiation (with the gate compiled in, the split
    // rings ran ~2% slower even ungated).
    const bool split_kv = (flags & kTmaSplitKv) != 0;
    const bool gate = kProducerRegs == kTmaLeanProducer && (flags & kTmaGateStart) != 0;
    // Page boxes come with split rings at D = 128 only (the short-plan feed):
    // compiled into that instantiation alone, the others' code unchanged.
    constexpr bool kPageBoxOption = D == 128 && kProducerRegs == kTmaFedProducer;
    const bool page_boxes = (flags & kTmaPageBoxes) != 0;
    if (threadIdx.x < 32 && split_kv) {
      TmaProduceKv<T, D, 0, kPageBoxOption>(p, &kv_multi, &kv_single, box_rows, smem, begin, end, gate, kFromHead,
                                            page_boxes);
    } else if (threadIdx.x < 32) {
      TmaProduceKv<T, D, kTmaBothPlanes, kPageBoxOption>(p, &kv_multi, &kv_single, box_rows, smem, begin, end, gate,
                                                         kFromHead, page_boxes);
    } else if (threadIdx.x < 64) {
      TmaProduceItems<T, D>(p, smem, begin, end, split_kv, gate, kFromHead);
    } else if (threadIdx.x < 96 && split_kv) {
      TmaProduceKv<T, D, 1, kPageBoxOption>(p, &kv_multi, &kv_single, box_rows, smem, begin, end, gate, kFromHead,
                                            page_boxes);
    }
    if constexpr (kClusterMerge) ClusterSync();  // the producers' part of the cluster barrier
  } else {
    GrowRegisters<kTmaConsumerRegsFor<kProducerRegs>>();
    TmaConsume<T, D, kProducerRegs>(p, smem, begin, end, (flags & kTmaPingPong) != 0, (flags & kTmaSplitSmall) != 0,
                     (flags & kTmaSplitKv) != 0);
    // The merge inside the consumers' branch, on their registers: after the
    // join of both branches ptxas gives the code the producers' budget (the
    // merge spilled ~0.5-0.8 KB per thread there).
    if constexpr (kClusterMerge) {
      ClusterSync();
      MergeClusterRows<D, TmaPartial<T, D, kProducerRegs == kTmaLeanProducer>>(
          p, static_cast<int>(threadIdx.x - 128) / 32, kTmaConsumerThreads / 32);
    }
  }
#else
  (void)p;
  (void)kv_multi;
  (void)kv_single;
  (void)box_rows;
  (void)flags;
#endif
}

}  // namespace banyan::attention::kernels

#endif  // BANYAN_ATTENTION_KERNELS_TREE_TMA_CUH_

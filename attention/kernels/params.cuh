// TreeParams: everything the attention kernels read, one struct for the whole
// family (persistent tree/decode kernel and merge). All pointers are device
// pointers; shapes are written beside each. Plus the shared-memory KV tile
// loader both item kinds use.
#ifndef BANYAN_ATTENTION_KERNELS_PARAMS_CUH_
#define BANYAN_ATTENTION_KERNELS_PARAMS_CUH_

#include <cstdint>

#include "attention/kernels/mma.cuh"
#include "attention/work_plan.h"

namespace banyan::attention::kernels {

struct TreeParams {
  // The AttentionPlan (attention_plan.h), copied to the device.
  const int32_t* segment_page_indptr;   // [num_segments + 1]
  const int32_t* page_indices;          // [num_page_refs]
  const int32_t* segment_first_slot;    // [num_segments]
  const int32_t* segment_entry_indptr;  // [num_segments + 1]
  const int32_t* entry_query;           // [num_entries]
  const int32_t* entry_kv_limit;        // [num_entries]
  const int32_t* query_entry_indptr;    // [num_queries + 1]
  const int32_t* query_entries;         // [num_entries]
  // The WorkPlan (work_plan.h).
  const WorkItem* items;                // [num_items], grouped by CTA
  const int32_t* cta_item_indptr;       // [gridDim.x + 1]
  const int32_t* cta_head;              // [gridDim.x][kHeadStride] each CTA's head (work_plan.h)
  const int4* item_entry;               // [num_items] WorkPlan::item_entry
  const int32_t* entry_partial_base;    // [num_entries]
  const int32_t* entry_num_chunks;      // [num_entries]
  const int32_t* row_slot_indptr;       // [num_queries + 1] each row's partial slots (contiguous)
  const int32_t* num_queries;           // [1] (device scalar: the grid never depends on it)
  // The fused merge (merge.cuh CompleteItem); query_done == nullptr: a
  // separate MergeKernel launch merges instead.
  const int32_t* query_items;           // [num_queries] items that touch each query row
  int32_t* query_done;                  // [num_queries] completions so far; 0 between launches
  int32_t chain_items;                  // 1: consecutive batched items share one KV pipeline (tree.cuh)
  int32_t use_head;                     // 1: the mma.sync kernel's first item reads page ids and q rows from its head
  int32_t run_groups;                   // 1: the mma.sync kernel runs WorkItem::group groups at once
  int32_t light_cta_begin;              // the TMA kernel's CTAs from here on are light CTAs (light.cuh)
  // A cluster placement's rows (WorkPlan::cluster_rows, work_plan_cluster.h):
  // read by the kernels that merge inside their launch (merge.cuh
  // MergeClusterRows); nullptr for every other plan.
  const int32_t* cluster_rows;
  // Optional timestamps (bench only; nullptr: none): per item-kernel CTA
  // kTraceItemWords words, per merge CTA kTraceMergeWords (below).
  unsigned long long* trace;
  unsigned long long* trace_merge;
  // Non-null: one launch (cooperative, all CTAs resident): after its items every
  // CTA waits at a grid-wide barrier ([0] arrivals, [1] generation; zero-initialized,
  // [0] back to 0 after every launch), then all CTAs merge (merge.cuh MergeAllRows).
  int32_t* grid_barrier;
  // Tensors.
  const void* kv_pool;   // KvLayout (kv_layout.h) of the KV dtype
  int64_t k_plane;       // element offset of the layer's K plane
  int64_t v_plane;       // element offset of the layer's V plane
  int32_t num_kv_heads;
  int32_t page_size;
  const void* q;         // [num_queries][num_q_heads][D] of q_dtype
  int32_t q_dtype;       // banyan::DType code
  int32_t num_q_heads;
  int32_t group;         // num_q_heads / num_kv_heads
  float scale_log2;      // softmax scale * log2(e)
  float* partial_o;      // [num_partials][num_q_heads][D], normalized (after the TMA kernel at D 64: that
                         // many values of the 16-bit KV type instead, state.cuh TmaPartial)
  float* partial_lse;    // [num_partials][num_q_heads], log2 domain
  void* out;             // [num_queries][num_q_heads][D] of out_dtype
  int32_t out_dtype;
  float* lse;            // optional [num_queries][num_q_heads], natural log
};

// Row stride (elements) of a shared-memory KV tile: 16 bytes of padding so
// that 8 consecutive rows fall in distinct banks for ldmatrix and 16-byte loads.
template <typename T, int D>
inline constexpr int kSmemStride = D + 16 / static_cast<int>(sizeof(T));

// The tile range of an item for the TMA kernel's loads: 64-position tiles
// (slot positions first_slot + token of the segment's pages) from the
// 64-aligned one holding its first token, so that a tile is whole page boxes.
// Zero tiles for an empty item.
struct TmaTiles {
  int32_t pos_begin, pos_end, base0;
  int count;
  __device__ __forceinline__ explicit TmaTiles(const WorkItem& it)
      : pos_begin(it.first_slot + it.kv_begin),
        pos_end(it.first_slot + it.kv_end),
        base0(pos_begin & ~(kKvTile - 1)),
        count(pos_end > pos_begin ? (pos_end - base0 + kKvTile - 1) / kKvTile : 0) {}
  __device__ __forceinline__ bool Edge(int t) const {
    return base0 + t * kKvTile < pos_begin || base0 + (t + 1) * kKvTile > pos_end;
  }
};

// The id of the page of box g of `it` (boxes of box_rows positions from
// TmaTiles::base0: tile t is boxes [t B, t B + B), B = 64 / box_rows), or -1
// for a box past the item's tiles or wholly outside its tokens. REQUIRES: page
// size a power of two >= 8 (the TMA kernel's); box_rows = min(page size, 64).
__device__ __forceinline__ int32_t TmaBoxPage(const TreeParams& p, const WorkItem& it, const TmaTiles& tiles,
                                              int32_t g, int box_rows, int page_shift) {
  const int32_t pos = tiles.base0 + g * box_rows;
  if (pos + box_rows <= tiles.pos_begin || pos >= tiles.pos_end) return -1;
  return p.page_indices[it.page_begin + (pos >> page_shift)];
}

// The plane page (kv_tensor_map.h: (layer * 2 + K|V) * num_pages + page) of
// page 0 of the plane at element offset `plane` (p.k_plane or p.v_plane).
template <int D>
__device__ __forceinline__ int32_t FirstPlanePage(const TreeParams& p, int64_t plane) {
  return static_cast<int32_t>(plane / (int64_t{p.num_kv_heads} * p.page_size * D));
}

// Loads tokens [tok0, tok0 + kTokens) of one segment's K and V for one KV
// head into sK / sV ([kTokens][kSmemStride]) with cp.async; tokens at or past
// `tok_end` are zero-filled (never read). Every thread of the block calls it;
// the caller commits and waits. kPageSize > 0 is the page size as a
// compile-time constant (shifts instead of divisions; it must equal
// p.page_size), 0 reads p.page_size. Each thread owns one 16-byte column of
// kTokens * kVecs / kThreads rows: the page ids of all its rows are loaded
// first (independent loads in flight), then every copy is issued. The id of
// the segment's page i is pages[i - page_shift] (page_shift > 0: a CTA head's
// copy of some of the segment's page ids, work_plan.h). REQUIRES: tok0 < tok_end.
template <typename T, int D, int kTokens, int kThreads, int kPageSize = 0>
__device__ __forceinline__ void LoadKvTile(const TreeParams& p, const int32_t* pages, int32_t first_slot,
                                           int32_t kv_head, int32_t tok0, int32_t tok_end, T* sK, T* sV,
                                           int32_t page_shift = 0) {
  constexpr int kVecs = D * static_cast<int>(sizeof(T)) / 16;  // 16-byte vectors per row
  constexpr int kElemsPerVec = 16 / static_cast<int>(sizeof(T));
  const T* pool = static_cast<const T*>(p.kv_pool);
  if constexpr (kThreads % kVecs == 0 && (kTokens * kVecs) % kThreads == 0) {
    constexpr int kRowStep = kThreads / kVecs;
    constexpr int kRows = kTokens / kRowStep;  // rows per thread
    const int page_size = kPageSize > 0 ? kPageSize : p.page_size;
    const int row0 = threadIdx.x / kVecs;
    const int vec = threadIdx.x % kVecs;
    const int64_t head_off = int64_t{kv_head} * page_size;
    int64_t offset[kRows];
#pragma unroll
    for (int i = 0; i < kRows; ++i) {
      const int32_t tok = tok0 + row0 + i * kRowStep;
      const int32_t pos = first_slot + (tok < tok_end ? tok : tok0);  // tok0 < tok_end: a page of this tile
      const int32_t page = pages[pos / page_size - page_shift];
      offset[i] = ((int64_t{page} * p.num_kv_heads) * page_size + head_off + pos % page_size) * D +
                  vec * kElemsPerVec;
    }
#pragma unroll
    for (int i = 0; i < kRows; ++i) {
      const int row = row0 + i * kRowStep;
      const bool valid = tok0 + row < tok_end;
      const int s = row * kSmemStride<T, D> + vec * kElemsPerVec;
      CpAsync16(sK + s, pool + p.k_plane + offset[i], valid);
      CpAsync16(sV + s, pool + p.v_plane + offset[i], valid);
    }
  } else {
    for (int i = threadIdx.x; i < kTokens * kVecs; i += kThreads) {
      const int row = i / kVecs;
      const int vec = i % kVecs;
      const int32_t tok = tok0 + row;
      const bool valid = tok < tok_end;
      int64_t offset = 0;
      if (valid) {
        const int32_t pos = first_slot + tok;
        const int64_t page = pages[pos / p.page_size - page_shift];
        offset = ((page * p.num_kv_heads + kv_head) * p.page_size + pos % p.page_size) * D + vec * kElemsPerVec;
      }
      const int s = row * kSmemStride<T, D> + vec * kElemsPerVec;
      CpAsync16(sK + s, pool + p.k_plane + offset, valid);
      CpAsync16(sV + s, pool + p.v_plane + offset, valid);
    }
  }
}

// LoadKvTile with the page size of the launch: the common 16 as a constant,
// any other read at run time (one uniform branch per tile).
template <typename T, int D, int kTokens, int kThreads>
__device__ __forceinline__ void LoadKvTileAnyPage(const TreeParams& p, const int32_t* pages, int32_t first_slot,
                                                  int32_t kv_head, int32_t tok0, int32_t tok_end, T* sK, T* sV,
                                                  int32_t page_shift = 0) {
  if (p.page_size == 16) {
    LoadKvTile<T, D, kTokens, kThreads, 16>(p, pages, first_slot, kv_head, tok0, tok_end, sK, sV, page_shift);
  } else {
    LoadKvTile<T, D, kTokens, kThreads, 0>(p, pages, first_slot, kv_head, tok0, tok_end, sK, sV, page_shift);
  }
}

// The bench-only trace (TreeParams::trace): %globaltimer (ns, common to all
// SMs) and clock64 (SM cycles). Item-kernel CTA b writes words
// [b * kTraceItemWords, ...): globaltimer at 0 start, 1 first item's first KV
// tile landed (mma.sync kernel), 2 first item done, 3 all items done; clock64
// at 4 start, 5 first tile landed, 6 all items done; 7 the SM id; the TMA
// kernel (no word 1) also 8 scratch (the current item's start), 9 / 10 ns
// spent in / count of items of more than 64 rows, 11 / 12 the same for the
// others, 13 / 14 their tiles (items its first consumer warpgroup ran), 16 /
// 17 ns spent in / count of the items that warpgroup only passed on (split
// small items of the other warpgroup). Merge CTA m
// writes trace_merge[m * kTraceMergeWords, ...): 0 start, 1 dependency wait
// returned, 2 done (globaltimer), 3 done minus wait in cycles. No register
// stays live for it between records (the words' address is recomputed).
inline constexpr int kTraceItemWords = 20;
inline constexpr int kTraceMergeWords = 4;
__device__ __forceinline__ unsigned long long GlobalTimerNs() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}
__device__ __forceinline__ unsigned SmId() {
  unsigned id;
  asm volatile("mov.u32 %0, %%smid;" : "=r"(id));
  return id;
}
// Thread 0 of an item-kernel CTA records globaltimer into word `gt` and,
// when clk >= 0, clock64 into word `clk` (no-op without a trace).
__device__ __forceinline__ void TraceRecord(const TreeParams& p, int gt, int clk) {
  if (p.trace == nullptr || threadIdx.x != 0) return;
  unsigned long long* w = p.trace + int64_t{blockIdx.x} * kTraceItemWords;
  w[gt] = GlobalTimerNs();
  if (clk >= 0) w[clk] = clock64();
}

// The TMA kernel's per-item trace, by its first consumer thread (`lead`):
// ItemTraceBegin at an item's start, ItemTraceEnd at its end (words 8-14,
// 16-17; `ran`: its warpgroup ran the item rather than passing it on).
__device__ __forceinline__ void ItemTraceBegin(const TreeParams& p, bool lead) {
  if (p.trace == nullptr || !lead) return;
  p.trace[int64_t{blockIdx.x} * kTraceItemWords + 8] = GlobalTimerNs();
}
__device__ __forceinline__ void ItemTraceEnd(const TreeParams& p, bool lead, bool first, int32_t rows, int tiles,
                                             bool ran) {
  if (p.trace == nullptr || !lead) return;
  unsigned long long* w = p.trace + int64_t{blockIdx.x} * kTraceItemWords;
  const unsigned long long now = GlobalTimerNs();
  if (ran) {
    const int k = rows > 64 ? 9 : 11;
    w[k] += now - w[8];
    w[k + 1] += 1;
    w[13 + (k - 9) / 2] += static_cast<unsigned long long>(tiles);
  } else {
    w[16] += now - w[8];
    w[17] += 1;
  }
  if (first) w[2] = now;
  w[3] = now;
  w[6] = clock64();
  w[7] = SmId();
}

}  // namespace banyan::attention::kernels

#endif  // BANYAN_ATTENTION_KERNELS_PARAMS_CUH_

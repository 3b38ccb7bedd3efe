// Light CTAs of the TMA kernel (WorkShape::light_ctas, work_plan.h): the CTAs
// past TreeParams::light_cta_begin run only light items (at most 16 rows, all
// of one entry: a leaf's own suffix for the query heads of one KV group),
// which are bound by memory and by their own latency chains, on an SM of
// their own beside the heavy CTAs' tensor-core work. Same partial states as
// any other item.
//
// Every warp (kLightCtaWarps of them) runs items w, w + W, ... alone, on the
// mma.sync tile of tree.cuh (ComputeKvTile; the item's heads are the 16 rows,
// zero past its row count), from a 64-token K and V stage of its own in shared
// memory (cp.async into tree.cuh's padded layout, rows past the item's KV
// zero-filled: their scores are masked, but 0 * NaN is not 0). A warp's chain
// per tile is one round trip: each tile's copies go out with its page ids
// already in registers (one id per lane, loaded during the tile before, or
// during the previous item for an item's first tile), the item's q loads
// beside its first tile's copies, and the next item's descriptor and first
// page ids load while the current item's KV is in flight. (A producer warp
// feeding the others measured slower on the H100: one warp issues the copies
// of eleven, bulk copies per row even more so.)
#ifndef BANYAN_ATTENTION_KERNELS_LIGHT_CUH_
#define BANYAN_ATTENTION_KERNELS_LIGHT_CUH_

#include "attention/kernels/mma.cuh"
#include "attention/kernels/params.cuh"
#include "attention/kernels/state.cuh"
#include "attention/kernels/tree.cuh"

namespace banyan::attention::kernels {

// One warp's stage: a 64-token K tile and V tile in tree.cuh's padded layout.
template <typename T, int D>
inline constexpr int kLightStageBytes = 2 * kKvTile * kSmemStride<T, D> * static_cast<int>(sizeof(T));
template <typename T, int D>
inline constexpr int kLightSmemBytes = kLightCtaWarps * kLightStageBytes<T, D>;
static_assert(kLightSmemBytes<__nv_bfloat16, kLightHeadDim> + 1024 <= 227 * 1024 && kLightCtaWarps <= 12);

// The 64-token tiles of a light item (its kv_end is clamped to its entry's limit).
__device__ __forceinline__ int32_t LightTiles(const WorkItem& it) {
  return it.kv_end > it.kv_begin ? (it.kv_end - it.kv_begin + kKvTile - 1) / kKvTile : 0;
}

// Lane l's page id for tile t of `it`: the segment's page holding the tile's
// first token, + l (0 past the tile or the item). REQUIRES: page size a power
// of two >= 8 (the TMA kernel's), so that a tile spans at most 9 pages.
__device__ __forceinline__ int32_t LightPageIds(const TreeParams& p, const WorkItem& it, int32_t t, int page_shift,
                                                int lane) {
  const int32_t tok0 = it.kv_begin + t * kKvTile;
  if (tok0 >= it.kv_end) return 0;
  const int32_t first = (it.first_slot + tok0) >> page_shift;
  const int32_t last = (it.first_slot + min(it.kv_end, tok0 + kKvTile) - 1) >> page_shift;
  return first + lane <= last ? p.page_indices[it.page_begin + first + lane] : 0;
}

// Issues the copies of tile t of `it` into sK / sV (one warp; `ids`:
// LightPageIds of the tile). Rows past the item's KV are zero-filled.
template <typename T, int D>
__device__ __forceinline__ void LightCopyTile(const TreeParams& p, const WorkItem& it, int32_t t, int32_t ids,
                                              int page_shift, T* sK, T* sV, int lane) {
  constexpr int kVecs = D * static_cast<int>(sizeof(T)) / 16;  // 16-byte vectors per row
  constexpr int kRowStep = 32 / kVecs;
  constexpr int kElemsPerVec = 16 / static_cast<int>(sizeof(T));
  const T* pool = static_cast<const T*>(p.kv_pool);
  const int32_t tok0 = it.kv_begin + t * kKvTile;
  const int32_t first_page = (it.first_slot + tok0) >> page_shift;
  const int vec = lane % kVecs;
#pragma unroll
  for (int j = 0; j < kKvTile / kRowStep; ++j) {
    const int row = lane / kVecs + j * kRowStep;
    const int32_t tok = tok0 + row;
    const bool valid = tok < it.kv_end;
    const int32_t pos = it.first_slot + (valid ? tok : tok0);
    const int32_t page = __shfl_sync(0xffffffffu, ids, (pos >> page_shift) - first_page);
    const int64_t offset =
        ((int64_t{page} * p.num_kv_heads + it.kv_head) * p.page_size + (pos & (p.page_size - 1))) * D +
        vec * kElemsPerVec;
    const int s = row * kSmemStride<T, D> + vec * kElemsPerVec;
    CpAsync16(sK + s, pool + p.k_plane + offset, valid);
    CpAsync16(sV + s, pool + p.v_plane + offset, valid);
  }
  CpAsyncCommit();
}

// Warp w of a light CTA: items begin + w, begin + w + W, ... (every lane calls).
template <typename T, int D>
__device__ __forceinline__ void LightWarpItems(const TreeParams& p, T* sK, T* sV, int32_t begin, int32_t end,
                                               int w, int lane) {
  constexpr int kWarpsN = kLightCtaWarps;
  const int gq = lane / 4, tq = lane % 4;
  const int page_shift = __ffs(p.page_size) - 1;
  int32_t i = begin + w;
  if (i >= end) return;
  WorkItem it = p.items[i];
  int4 ie = p.item_entry[i];
  int32_t ids = LightPageIds(p, it, 0, page_shift, lane);
  for (; i < end; i += kWarpsN) {
    const int32_t tiles = LightTiles(it);
    if (tiles > 0) LightCopyTile<T, D>(p, it, 0, ids, page_shift, sK, sV, lane);
    int32_t head[2];
    bool valid[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const int32_t local = gq + 8 * r;
      valid[r] = local < it.row_count;
      head[r] = it.kv_head * p.group + it.row_begin % p.group + (valid[r] ? local : 0);
    }
    uint32_t qf[D / 16][4];
    const int32_t qrow[2] = {ie.x, ie.x};
    LoadQFragments<T, D>(p, qrow, head, valid, tq, qf);
    // The next item's descriptor and first page ids, while this item's KV is in flight.
    const bool more = i + kWarpsN < end;
    const WorkItem next = more ? p.items[i + kWarpsN] : it;
    const int4 next_ie = more ? p.item_entry[i + kWarpsN] : ie;
    const int32_t limit[2] = {it.kv_end, it.kv_end};
    float o[D / 8][4];
#pragma unroll
    for (int j = 0; j < D / 8; ++j) o[j][0] = o[j][1] = o[j][2] = o[j][3] = 0.0f;
    float m[2] = {-CUDART_INF_F, -CUDART_INF_F}, l[2] = {0.0f, 0.0f};
    for (int32_t t = 0; t < tiles; ++t) {
      // The page ids of the tile after this one (or of the next item's first tile).
      ids = t + 1 < tiles ? LightPageIds(p, it, t + 1, page_shift, lane)
                          : (more ? LightPageIds(p, next, 0, page_shift, lane) : 0);
      CpAsyncWait<0>();
      __syncwarp();
      ComputeKvTile<T, D>(p, sK, sV, it.kv_begin + t * kKvTile, limit, qf, o, m, l, lane);
      __syncwarp();  // the stage is rewritten next
      if (t + 1 < tiles) LightCopyTile<T, D>(p, it, t + 1, ids, page_shift, sK, sV, lane);
    }
    if (tiles == 0 && more) ids = LightPageIds(p, next, 0, page_shift, lane);
    // An item that sees no token of its chunk still writes its (empty) slot.
    const int32_t slots[2] = {ie.z + it.chunk, ie.z + it.chunk};
    StoreRowPartialsAt<D>(p, slots, head, valid, m, l, tq, [&](int j, int k) { return o[j][k]; });
    it = next;
    ie = next_ie;
  }
}

// A light CTA: items [begin, end). Every thread of the CTA calls, after the
// dependency wait (q and KV may come from the kernel before this launch).
// Inlined: as a called function (its own register allocation) it read every
// TreeParams field through a stack copy and ran the engine row no faster
// than the unsplit kernel (H100).
template <typename T, int D>
__device__ __forceinline__ void RunLightCta(const TreeParams& p, char* smem, int32_t begin, int32_t end) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (warp < kLightCtaWarps) {
    T* sK = reinterpret_cast<T*>(smem + warp * kLightStageBytes<T, D>);
    LightWarpItems<T, D>(p, sK, sK + kKvTile * kSmemStride<T, D>, begin, end, warp, lane);
  }
  // The trace (params.cuh): every item done (words 2, 3, 6, 7), light items in word 12.
  if (p.trace != nullptr) {
    __syncthreads();
    if (threadIdx.x == 0) {
      unsigned long long* w = p.trace + int64_t{blockIdx.x} * kTraceItemWords;
      w[2] = w[3] = GlobalTimerNs();
      w[6] = clock64();
      w[7] = SmId();
      w[12] = static_cast<unsigned long long>(end - begin);
    }
  }
}

}  // namespace banyan::attention::kernels

#endif  // BANYAN_ATTENTION_KERNELS_LIGHT_CUH_

// The flattened work item: per-sequence paged decode, FlashDecoding style, on
// CUDA cores. One entry (one query row) and up to kFlatRows query heads of
// one KV group attend a chunk of the segment's KV (split-K: the chunk's
// partial is merged later). Any KV dtype (fp32 too). 4 warps; warp w owns
// query heads w, w+4, w+8, w+12 of the item. Per KV tile (cp.async, two
// stages): a lane scores whole tokens (16-byte K loads, q broadcast from
// shared memory), the warp does the online softmax (state.cuh), then each
// lane accumulates its D/32 output dimensions over the tile's tokens.
#ifndef BANYAN_ATTENTION_KERNELS_DECODE_CUH_
#define BANYAN_ATTENTION_KERNELS_DECODE_CUH_

#include "attention/kernels/mma.cuh"
#include "attention/kernels/params.cuh"
#include "attention/kernels/state.cuh"
#include "attention/kernels/tree.cuh"

namespace banyan::attention::kernels {

// Tokens per KV tile: 64 for 16-bit KV, 32 for fp32 (same bytes).
template <typename T>
inline constexpr int kFlatTile = 128 / static_cast<int>(sizeof(T));

template <typename T, int D>
inline constexpr int kFlatKvBytes = 2 * 2 * kFlatTile<T> * kSmemStride<T, D> * static_cast<int>(sizeof(T));
// Plus q ([kFlatRows][D] floats) and probabilities ([kWarps][tile] floats).
template <typename T, int D>
inline constexpr int kFlattenedSmemBytes = kFlatKvBytes<T, D> + (kFlatRows * D + kWarps * kFlatTile<T>) * 4;

template <typename T, int D>
__device__ __forceinline__ void RunFlattenedItem(const TreeParams& p, const WorkItem& it, char* smem) {
  constexpr int kTile = kFlatTile<T>;
  constexpr int kStride = kSmemStride<T, D>;
  constexpr int kTileElems = kTile * kStride;
  constexpr int kPerLane = D / 32;          // output dims per lane
  constexpr int kVecElems = 16 / sizeof(T);  // elements per 16-byte K load
  constexpr int kHeadsPerWarp = kFlatRows / kWarps;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  T* tiles = reinterpret_cast<T*>(smem);
  float* sQ = reinterpret_cast<float*>(smem + kFlatKvBytes<T, D>);
  float* sP = sQ + kFlatRows * D + warp * kTile;

  const int32_t entry = it.entry_begin + it.row_begin / p.group;
  const int32_t head0 = it.kv_head * p.group + it.row_begin % p.group;
  const int32_t qrow = p.entry_query[entry];
  const int32_t limit = min(p.entry_kv_limit[entry], it.kv_end);
  const int32_t* pages = p.page_indices + it.page_begin;
  const int32_t first_slot = it.first_slot;

  for (int i = threadIdx.x; i < it.row_count * D; i += kThreads) {
    sQ[i] = LoadAny(p.q, p.q_dtype, (int64_t{qrow} * p.num_q_heads + head0) * D + i) * p.scale_log2;
  }
  float o[kHeadsPerWarp][kPerLane];
  float m[kHeadsPerWarp], l[kHeadsPerWarp];
#pragma unroll
  for (int h = 0; h < kHeadsPerWarp; ++h) {
    m[h] = -CUDART_INF_F;
    l[h] = 0.0f;
#pragma unroll
    for (int i = 0; i < kPerLane; ++i) o[h][i] = 0.0f;
  }
  const int num_tiles = limit > it.kv_begin ? (limit - it.kv_begin + kTile - 1) / kTile : 0;
  if (num_tiles > 0) {
    LoadKvTileAnyPage<T, D, kTile, kThreads>(p, pages, first_slot, it.kv_head, it.kv_begin, limit, tiles,
                                             tiles + kTileElems);
    CpAsyncCommit();
  }
  for (int t = 0; t < num_tiles; ++t) {
    if (t + 1 < num_tiles) {
      T* next = tiles + ((t + 1) & 1) * 2 * kTileElems;
      LoadKvTileAnyPage<T, D, kTile, kThreads>(p, pages, first_slot, it.kv_head, it.kv_begin + (t + 1) * kTile, limit,
                                               next, next + kTileElems);
      CpAsyncCommit();
      CpAsyncWait<1>();
    } else {
      CpAsyncWait<0>();
    }
    __syncthreads();  // also publishes sQ on the first tile
    const T* sK = tiles + (t & 1) * 2 * kTileElems;
    const T* sV = sK + kTileElems;
    const int32_t tok0 = it.kv_begin + t * kTile;
#pragma unroll
    for (int hw = 0; hw < kHeadsPerWarp; ++hw) {
      const int h = warp + kWarps * hw;
      if (h >= it.row_count) continue;
      const float* q = sQ + h * D;
      float s[kTile / 32];
      float tile_max = -CUDART_INF_F;
#pragma unroll
      for (int j = 0; j < kTile / 32; ++j) {
        const int row = lane + 32 * j;
        const T* k = sK + row * kStride;
        float dot = 0.0f;
#pragma unroll 4
        for (int v = 0; v < D / kVecElems; ++v) {
          const uint4 raw = *reinterpret_cast<const uint4*>(k + v * kVecElems);
          const T* e = reinterpret_cast<const T*>(&raw);
#pragma unroll
          for (int x = 0; x < kVecElems; ++x) dot += q[v * kVecElems + x] * ToFloat(e[x]);
        }
        s[j] = tok0 + row < limit ? dot : -CUDART_INF_F;
        tile_max = fmaxf(tile_max, s[j]);
      }
#pragma unroll
      for (int off = 16; off > 0; off /= 2) tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, off));
      const float m_new = fmaxf(m[hw], tile_max);
      const float factor = RescaleFactor(m[hw], m_new);
      m[hw] = m_new;
      float sum = 0.0f;
#pragma unroll
      for (int j = 0; j < kTile / 32; ++j) {
        const float pj = Prob(s[j], m_new);
        sum += pj;
        sP[lane + 32 * j] = pj;
      }
#pragma unroll
      for (int off = 16; off > 0; off /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, off);
      l[hw] = l[hw] * factor + sum;
      __syncwarp();
#pragma unroll
      for (int i = 0; i < kPerLane; ++i) o[hw][i] *= factor;
      for (int tok = 0; tok < kTile; ++tok) {
        const float pt = sP[tok];
        const T* v = sV + tok * kStride + lane * kPerLane;
#pragma unroll
        for (int i = 0; i < kPerLane; ++i) o[hw][i] += pt * ToFloat(v[i]);
      }
      __syncwarp();  // sP is rewritten by the next head
    }
    __syncthreads();  // the stage read now is the one loaded next
  }
  // An entry with no visible token in this chunk still writes its (empty) slot.
  const int64_t slot = int64_t{p.entry_partial_base[entry]} + it.chunk;
#pragma unroll
  for (int hw = 0; hw < kHeadsPerWarp; ++hw) {
    const int h = warp + kWarps * hw;
    if (h >= it.row_count) continue;
    const float inv = FinalScale(l[hw]);
    float* dst = p.partial_o + (slot * p.num_q_heads + head0 + h) * D + lane * kPerLane;
#pragma unroll
    for (int i = 0; i < kPerLane; ++i) dst[i] = o[hw][i] * inv;
    if (lane == 0) p.partial_lse[slot * p.num_q_heads + head0 + h] = FinalLse2(m[hw], l[hw]);
  }
}

}  // namespace banyan::attention::kernels

#endif  // BANYAN_ATTENTION_KERNELS_DECODE_CUH_

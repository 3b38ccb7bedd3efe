// The batched (tree) work item, wide variant: each warp owns 32 packed query
// rows (two m16 tiles), so every K/V fragment read from shared memory feeds
// two tensor-core products (half the ldmatrix traffic per product, twice the
// independent work per warp: the FlashAttention-2 arrangement). The query
// tile (kWarps x 32 rows) sits in shared memory and is read with ldmatrix per
// k-step, which keeps registers for the two output accumulators. Same partial
// outputs and math (state.cuh) as tree.cuh; chosen by KernelVariant::kWide.
#ifndef BANYAN_ATTENTION_KERNELS_TREE_WIDE_CUH_
#define BANYAN_ATTENTION_KERNELS_TREE_WIDE_CUH_

#include "attention/kernels/mma.cuh"
#include "attention/kernels/params.cuh"
#include "attention/kernels/state.cuh"
#include "attention/kernels/tree.cuh"

namespace banyan::attention::kernels {

inline constexpr int kWideTileRows = 32 * kWarps;

// KV stages plus the query tile.
template <typename T, int D>
inline constexpr int kWideSmemBytes =
    kBatchedSmemBytes<T, D> + kWideTileRows * kSmemStride<T, D> * static_cast<int>(sizeof(T));

template <typename T, int D>
__device__ __forceinline__ void RunBatchedItemWide(const TreeParams& p, const WorkItem& it, char* smem,
                                                   int* s_max_limit) {
  constexpr int kStride = kSmemStride<T, D>;
  constexpr int kTileElems = kKvTile * kStride;
  constexpr int kKSteps = D / 16;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, gq = lane / 4, tq = lane % 4;
  const int32_t seg = it.segment;
  const int32_t seg_entry0 = p.segment_entry_indptr[seg];
  const int32_t* pages = p.page_indices + p.segment_page_indptr[seg];
  const int32_t first_slot = p.segment_first_slot[seg];
  T* tiles = reinterpret_cast<T*>(smem);
  T* sQ = tiles + kStages * 2 * kTileElems;  // [kWideTileRows][kStride]

  // The query tile into shared memory (zeros for rows past row_count).
  for (int i = threadIdx.x; i < kWideTileRows * D; i += kThreads) {
    const int row = i / D, col = i % D;
    float x = 0.0f;
    if (row < it.row_count) {
      const int32_t packed = it.row_begin + row;
      const int32_t e = seg_entry0 + packed / p.group;
      const int32_t h = it.kv_head * p.group + packed % p.group;
      x = LoadAny(p.q, p.q_dtype, (int64_t{p.entry_query[e]} * p.num_q_heads + h) * D + col);
    }
    if constexpr (std::is_same_v<T, __nv_bfloat16>) {
      sQ[row * kStride + col] = __float2bfloat16_rn(x);
    } else {
      sQ[row * kStride + col] = __float2half_rn(x);
    }
  }
  // This thread's four rows: i = mt * 2 + r is packed row 32w + 16mt + g + 8r.
  // (Entries and heads are recomputed in the epilogue to keep registers free.)
  int32_t limit[4];
  int local_max = 0;
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int local = warp * 32 + (i / 2) * 16 + gq + (i % 2) * 8;
    const int32_t entry = seg_entry0 + (it.row_begin + local) / p.group;
    limit[i] = local < it.row_count ? min(p.entry_kv_limit[entry], it.kv_end) : 0;
    local_max = max(local_max, limit[i]);
  }
  if (threadIdx.x == 0) *s_max_limit = 0;
  __syncthreads();  // also publishes sQ
  atomicMax(s_max_limit, local_max);
  __syncthreads();
  const int32_t kv_end = *s_max_limit;
  const bool warp_active = warp * 32 < it.row_count;

  float o[2][D / 8][4];
#pragma unroll
  for (int mt = 0; mt < 2; ++mt) {
#pragma unroll
    for (int i = 0; i < D / 8; ++i) o[mt][i][0] = o[mt][i][1] = o[mt][i][2] = o[mt][i][3] = 0.0f;
  }
  float m[4], l[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    m[i] = -CUDART_INF_F;
    l[i] = 0.0f;
  }

  const int num_tiles = kv_end > it.kv_begin ? (kv_end - it.kv_begin + kKvTile - 1) / kKvTile : 0;
#pragma unroll
  for (int st = 0; st < kStages - 1; ++st) {
    if (st < num_tiles) {
      T* stage = tiles + st * 2 * kTileElems;
      LoadKvTileAnyPage<T, D, kKvTile, kThreads>(p, pages, first_slot, it.kv_head, it.kv_begin + st * kKvTile, kv_end,
                                                 stage, stage + kTileElems);
    }
    CpAsyncCommit();
  }
  const int mat = lane / 8, mrow = lane % 8;
  for (int t = 0; t < num_tiles; ++t) {
    const int ahead = t + kStages - 1;
    if (ahead < num_tiles) {
      T* stage = tiles + (ahead % kStages) * 2 * kTileElems;
      LoadKvTileAnyPage<T, D, kKvTile, kThreads>(p, pages, first_slot, it.kv_head, it.kv_begin + ahead * kKvTile,
                                                 kv_end, stage, stage + kTileElems);
    }
    CpAsyncCommit();
    CpAsyncWait<kStages - 1>();
    __syncthreads();
    if (warp_active) {
      const T* sK = tiles + (t % kStages) * 2 * kTileElems;
      const T* sV = sK + kTileElems;
      const int32_t tok0 = it.kv_begin + t * kKvTile;
      float s[2][8][4];
#pragma unroll
      for (int mt = 0; mt < 2; ++mt) {
#pragma unroll
        for (int i = 0; i < 8; ++i) s[mt][i][0] = s[mt][i][1] = s[mt][i][2] = s[mt][i][3] = 0.0f;
      }
#pragma unroll
      for (int ks = 0; ks < kKSteps; ++ks) {
        uint32_t a[2][4];
#pragma unroll
        for (int mt = 0; mt < 2; ++mt) {
          // A 16x16 at rows 32w + 16mt, cols 16ks: lanes 0-15 rows, lanes 16-31 the +8 columns.
          LdMatrixX4(a[mt], sQ + (warp * 32 + mt * 16 + (lane % 16)) * kStride + ks * 16 + (lane / 16) * 8);
        }
#pragma unroll
        for (int np = 0; np < 4; ++np) {
          uint32_t b[4];
          LdMatrixX4(b, sK + (np * 16 + (mat / 2) * 8 + mrow) * kStride + ks * 16 + (mat % 2) * 8);
#pragma unroll
          for (int mt = 0; mt < 2; ++mt) {
            Mma16816<T>(s[mt][2 * np], a[mt], b[0], b[1]);
            Mma16816<T>(s[mt][2 * np + 1], a[mt], b[2], b[3]);
          }
        }
      }
      float tile_max[4] = {-CUDART_INF_F, -CUDART_INF_F, -CUDART_INF_F, -CUDART_INF_F};
#pragma unroll
      for (int mt = 0; mt < 2; ++mt) {
#pragma unroll
        for (int nt = 0; nt < 8; ++nt) {
#pragma unroll
          for (int j = 0; j < 4; ++j) {
            const int i = mt * 2 + j / 2;
            const int32_t tok = tok0 + nt * 8 + tq * 2 + (j % 2);
            s[mt][nt][j] = tok < limit[i] ? s[mt][nt][j] * p.scale_log2 : -CUDART_INF_F;
            tile_max[i] = fmaxf(tile_max[i], s[mt][nt][j]);
          }
        }
      }
      float factor[4];
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        tile_max[i] = fmaxf(tile_max[i], __shfl_xor_sync(0xffffffffu, tile_max[i], 1));
        tile_max[i] = fmaxf(tile_max[i], __shfl_xor_sync(0xffffffffu, tile_max[i], 2));
        const float m_new = fmaxf(m[i], tile_max[i]);
        factor[i] = RescaleFactor(m[i], m_new);
        m[i] = m_new;
        l[i] *= factor[i];
      }
#pragma unroll
      for (int mt = 0; mt < 2; ++mt) {
#pragma unroll
        for (int d = 0; d < D / 8; ++d) {
          o[mt][d][0] *= factor[mt * 2];
          o[mt][d][1] *= factor[mt * 2];
          o[mt][d][2] *= factor[mt * 2 + 1];
          o[mt][d][3] *= factor[mt * 2 + 1];
        }
      }
      uint32_t pk[2][4][4];  // P as A fragments: [m tile][k step of 16 tokens][register]
#pragma unroll
      for (int mt = 0; mt < 2; ++mt) {
#pragma unroll
        for (int nt = 0; nt < 8; ++nt) {
#pragma unroll
          for (int j = 0; j < 4; ++j) {
            s[mt][nt][j] = Prob(s[mt][nt][j], m[mt * 2 + j / 2]);
            l[mt * 2 + j / 2] += s[mt][nt][j];
          }
          pk[mt][nt / 2][(nt % 2) * 2 + 0] = PackPair<T>(s[mt][nt][0], s[mt][nt][1]);
          pk[mt][nt / 2][(nt % 2) * 2 + 1] = PackPair<T>(s[mt][nt][2], s[mt][nt][3]);
        }
      }
#pragma unroll
      for (int kk = 0; kk < 4; ++kk) {
#pragma unroll
        for (int dp = 0; dp < D / 16; ++dp) {
          uint32_t b[4];
          LdMatrixX4Trans(b, sV + (kk * 16 + (mat % 2) * 8 + mrow) * kStride + dp * 16 + (mat / 2) * 8);
#pragma unroll
          for (int mt = 0; mt < 2; ++mt) {
            Mma16816<T>(o[mt][2 * dp], pk[mt][kk], b[0], b[1]);
            Mma16816<T>(o[mt][2 * dp + 1], pk[mt][kk], b[2], b[3]);
          }
        }
      }
    }
    __syncthreads();
  }
  CpAsyncWait<0>();

#pragma unroll
  for (int i = 0; i < 4; ++i) {
    l[i] += __shfl_xor_sync(0xffffffffu, l[i], 1);
    l[i] += __shfl_xor_sync(0xffffffffu, l[i], 2);
    const int local = warp * 32 + (i / 2) * 16 + gq + (i % 2) * 8;
    if (local >= it.row_count) continue;
    const int mt = i / 2, r = i % 2;
    const int32_t packed = it.row_begin + local;
    const int32_t entry = seg_entry0 + packed / p.group;
    const int32_t head = it.kv_head * p.group + packed % p.group;
    const int64_t slot = int64_t{p.entry_partial_base[entry]} + it.chunk;
    const float inv = FinalScale(l[i]);
    float* dst = p.partial_o + (slot * p.num_q_heads + head) * D;
#pragma unroll
    for (int d = 0; d < D / 8; ++d) {
      *reinterpret_cast<float2*>(dst + d * 8 + tq * 2) =
          make_float2(o[mt][d][r * 2] * inv, o[mt][d][r * 2 + 1] * inv);
    }
    if (tq == 0) p.partial_lse[slot * p.num_q_heads + head] = FinalLse2(m[i], l[i]);
  }
}

}  // namespace banyan::attention::kernels

#endif  // BANYAN_ATTENTION_KERNELS_TREE_WIDE_CUH_

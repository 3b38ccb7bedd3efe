#include "model/ops/matmul_kernels.h"

#include <immintrin.h>

namespace banyan::model::ops {
namespace {

// R rows of x times O rows of w: R*O dot products of length n, portable.
template <int R, int O>
void DotBlockPortable(const float* const* xs, const float* const* ws, int64_t n, float* out) {
  float acc[R][O][4] = {};
  int64_t k = 0;
  for (; k + 4 <= n; k += 4) {
    for (int r = 0; r < R; ++r) {
      for (int o = 0; o < O; ++o) {
        for (int j = 0; j < 4; ++j) acc[r][o][j] += xs[r][k + j] * ws[o][k + j];
      }
    }
  }
  for (int r = 0; r < R; ++r) {
    for (int o = 0; o < O; ++o) {
      float s = (acc[r][o][0] + acc[r][o][1]) + (acc[r][o][2] + acc[r][o][3]);
      for (int64_t t = k; t < n; ++t) s += xs[r][t] * ws[o][t];
      out[r * O + o] = s;
    }
  }
}

__attribute__((target("avx2,fma"))) inline float HorizontalSum(__m256 v) {
  const __m128 lo = _mm256_castps256_ps128(v);
  const __m128 hi = _mm256_extractf128_ps(v, 1);
  __m128 s = _mm_add_ps(lo, hi);
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_shuffle_ps(s, s, 0x55));
  return _mm_cvtss_f32(s);
}

template <int R, int O>
__attribute__((target("avx2,fma"))) void DotBlockAvx2(const float* const* xs, const float* const* ws,
                                                       int64_t n, float* out) {
  __m256 acc[R][O];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 8
    for (int o = 0; o < O; ++o) acc[r][o] = _mm256_setzero_ps();
  }
  int64_t k = 0;
  for (; k + 8 <= n; k += 8) {
    __m256 wv[O];
#pragma GCC unroll 8
    for (int o = 0; o < O; ++o) wv[o] = _mm256_loadu_ps(ws[o] + k);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const __m256 xv = _mm256_loadu_ps(xs[r] + k);
#pragma GCC unroll 8
      for (int o = 0; o < O; ++o) acc[r][o] = _mm256_fmadd_ps(xv, wv[o], acc[r][o]);
    }
  }
  for (int r = 0; r < R; ++r) {
    for (int o = 0; o < O; ++o) {
      float s = HorizontalSum(acc[r][o]);
      for (int64_t t = k; t < n; ++t) s += xs[r][t] * ws[o][t];
      out[r * O + o] = s;
    }
  }
}

template <int R, int O, bool kAvx2>
inline void Block(const float* x, const float* w, const float* bias, int64_t r0, int64_t o0,
                  int64_t in, int64_t ldy, float* y) {
  const float* xs[R];
  const float* ws[O];
  for (int r = 0; r < R; ++r) xs[r] = x + (r0 + r) * in;
  for (int o = 0; o < O; ++o) ws[o] = w + (o0 + o) * in;
  float out[R * O];
  if constexpr (kAvx2) {
    DotBlockAvx2<R, O>(xs, ws, in, out);
  } else {
    DotBlockPortable<R, O>(xs, ws, in, out);
  }
  for (int r = 0; r < R; ++r) {
    for (int o = 0; o < O; ++o) {
      y[(r0 + r) * ldy + o0 + o] = out[r * O + o] + (bias != nullptr ? bias[o0 + o] : 0.0f);
    }
  }
}

// Walks [o_begin, o_end) in blocks of O rows of W and, for each block, every
// group of R rows of x, so the block of W stays in L1 while all rows read it.
// Then the leftover W rows one at a time.
template <int R, int O, bool kAvx2>
void Sweep(const float* x, const float* w, const float* bias, int64_t r_begin, int64_t r_end, int64_t in,
           int64_t ldy, int64_t o_begin, int64_t o_end, float* y) {
  int64_t o = o_begin;
  for (; o + O <= o_end; o += O) {
    for (int64_t r = r_begin; r < r_end; r += R) Block<R, O, kAvx2>(x, w, bias, r, o, in, ldy, y);
  }
  for (; o < o_end; ++o) {
    for (int64_t r = r_begin; r < r_end; r += R) Block<R, 1, kAvx2>(x, w, bias, r, o, in, ldy, y);
  }
}

// Register tiles (16 AVX2 registers): 4 rows x 3 W rows (12 accumulators) for
// the bulk of a batch, 2 x 4 for a pair, 1 x 8 for a single row (8
// independent FMA chains keep a lone decode row from stalling).
template <bool kAvx2>
void Run(const float* x, const float* w, const float* bias, int64_t rows, int64_t in, int64_t ldy,
         int64_t o_begin, int64_t o_end, float* y) {
  const int64_t rows4 = rows / 4 * 4;
  Sweep<4, 3, kAvx2>(x, w, bias, 0, rows4, in, ldy, o_begin, o_end, y);
  int64_t r = rows4;
  if (rows - r >= 2) {
    Sweep<2, 4, kAvx2>(x, w, bias, r, r + 2, in, ldy, o_begin, o_end, y);
    r += 2;
  }
  if (r < rows) Sweep<1, 8, kAvx2>(x, w, bias, r, r + 1, in, ldy, o_begin, o_end, y);
}

}  // namespace

void MatMulPortable(const float* x, const float* w, const float* bias, int64_t rows, int64_t in,
                    int64_t ldy, int64_t o_begin, int64_t o_end, float* y) {
  Run<false>(x, w, bias, rows, in, ldy, o_begin, o_end, y);
}

void MatMulAvx2(const float* x, const float* w, const float* bias, int64_t rows, int64_t in,
                int64_t ldy, int64_t o_begin, int64_t o_end, float* y) {
  Run<true>(x, w, bias, rows, in, ldy, o_begin, o_end, y);
}

MatMulKernel SelectMatMulKernel() {
  static const MatMulKernel kernel = [] {
    __builtin_cpu_init();
    return (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) ? &MatMulAvx2
                                                                             : &MatMulPortable;
  }();
  return kernel;
}

}  // namespace banyan::model::ops

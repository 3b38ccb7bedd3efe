// Internal: the fp32 matmul micro-kernels behind ops::MatMul, a portable one
// and an AVX2+FMA one, chosen once at run time from the CPU's features.
#ifndef BANYAN_MODEL_OPS_MATMUL_KERNELS_H_
#define BANYAN_MODEL_OPS_MATMUL_KERNELS_H_

#include <cstdint>

namespace banyan::model::ops {

// Threads split the output features in chunks of this many W rows.
inline constexpr int64_t kMatMulOutBlock = 24;

// Computes y[r][o] = x[r] . w[o] (+ bias[o]) for all r < rows and
// o_begin <= o < o_end. y rows have `ldy` floats.
using MatMulKernel = void (*)(const float* x, const float* w, const float* bias, int64_t rows,
                              int64_t in_features, int64_t ldy, int64_t o_begin, int64_t o_end,
                              float* y);

void MatMulPortable(const float* x, const float* w, const float* bias, int64_t rows,
                    int64_t in_features, int64_t ldy, int64_t o_begin, int64_t o_end, float* y);
void MatMulAvx2(const float* x, const float* w, const float* bias, int64_t rows, int64_t in_features,
                int64_t ldy, int64_t o_begin, int64_t o_end, float* y);

// The fastest kernel this CPU runs (AVX2+FMA when present).
MatMulKernel SelectMatMulKernel();

}  // namespace banyan::model::ops

#endif  // BANYAN_MODEL_OPS_MATMUL_KERNELS_H_

// Row math for sampling: the few passes over one row of logits that sampling
// needs (max, exp-sum, selection), written so that the compiler vectorizes
// them, with float arithmetic whose results do not depend on the CPU's vector
// width (fixed lane structure, no FMA contraction), so a seed gives the same
// tokens on every x86-64 machine and with any number of threads.
//
//   RowScan s = ScanRow(logits);                  // max, first argmax, NaN/+inf
//   double z = ExpSum(logits, s.max, nullptr);    // sum of exp(x - max)
//   double lse = s.max + std::log(z);
//
// Exp: a Cephes-style float polynomial (about 2 ulp on [-87, 0]); arguments
// below -87 (and -inf) give exactly 0. Sums: exp values are added in 16 float
// lanes within blocks of kBlock values, and the block sums in double, so a
// sum over 128K values has a relative error near 1e-7.
// Thread-safety: every function is pure (thread-compatible on its outputs).
// Nothing here fails; callers check their inputs.
#ifndef BANYAN_MODEL_SAMPLING_ROW_MATH_H_
#define BANYAN_MODEL_SAMPLING_ROW_MATH_H_

#include <cstddef>
#include <cstdint>
#include <limits>
#include <vector>

#include "absl/types/span.h"

namespace banyan::model::sampling {

inline constexpr size_t kBlock = 256;

struct RowScan {
  float max = 0;          // the largest value (-inf if every value is -inf)
  int32_t argmax = 0;     // its first index
  bool bad = false;       // a NaN or +inf is present (max/argmax are then meaningless)
};

// One pass over the row. REQUIRES: !x.empty().
RowScan ScanRow(absl::Span<const float> x);

// exp(v) for v <= 0 as the vectorized passes compute it (for scalar use on
// single values that must agree with them).
float FastExp(float v);

// Sum over i of exp(x[i] - shift), in double. If `e` is non-null it receives
// exp(x[i] - shift) per element (e.size() == x.size()); if `block_sums` is
// non-null it receives one sum per kBlock values (resized). Values whose exp
// is below `floor` count as 0 (and are stored as 0): min-p's cut.
// REQUIRES: every finite x[i] <= shift (shift is at least the row's max).
double ExpSum(absl::Span<const float> x, float shift, float* e, std::vector<double>* block_sums = nullptr,
              float floor = 0.0f);

// dst[i] = src[i] / divisor, exactly as a scalar float division.
void DivideRow(absl::Span<const float> src, float divisor, float* dst);

// Appends to `ids` every index i in [0, x.size()) with x[i] >= threshold, in
// increasing order, and returns true; or returns false (ids then holds a
// partial list) as soon as more than `limit` would be appended. Skips whole
// blocks whose maximum is below the threshold.
bool CollectAtLeast(absl::Span<const float> x, float threshold, std::vector<int32_t>* ids,
                    size_t limit = SIZE_MAX);

// Histogram bins by value: bins[i] = min(top, int((max - x[i]) * scale)) when
// e[i] > 0, else top + 1 (monotone: larger values get lower bins).
// REQUIRES: scale * (max - x[i]) finite or +inf for finite-e entries.
void BinIndices(absl::Span<const float> x, const float* e, float max, float scale, int32_t top, int32_t* bins);

// The smallest x[i] with x[i] >= floor (+inf if none).
float MinAtLeast(absl::Span<const float> x, float floor);

// The k most likely indices of x (larger value first, lower index first on
// ties), sorted in that order; -inf entries are never chosen. Fewer than k
// when fewer are finite. If `subset` is non-null only those indices compete.
// Uses a bounded heap with block skipping: O(n) compares for k << n.
void TopK(absl::Span<const float> x, int32_t k, const std::vector<int32_t>* subset, std::vector<int32_t>* out);

}  // namespace banyan::model::sampling

#endif  // BANYAN_MODEL_SAMPLING_ROW_MATH_H_

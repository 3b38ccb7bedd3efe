// The unbiased pass@k estimator of code-generation evaluation (Chen et al.,
// 2021): with n samples of which c pass, pass@k = 1 - C(n - c, k) / C(n, k),
// computed as a running product so it stays exact to double precision for
// n in the thousands. Thread-safe (pure functions).
#ifndef BANYAN_SEARCH_PASS_AT_K_H_
#define BANYAN_SEARCH_PASS_AT_K_H_

#include <cstdint>

#include "absl/status/statusor.h"

namespace banyan::search {

// kInvalidArgument unless 0 <= c <= n and 1 <= k <= n.
absl::StatusOr<double> PassAtK(int64_t n, int64_t c, int64_t k);

}  // namespace banyan::search

#endif  // BANYAN_SEARCH_PASS_AT_K_H_

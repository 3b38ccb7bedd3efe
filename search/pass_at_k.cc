#include "search/pass_at_k.h"

#include "absl/strings/str_cat.h"

namespace banyan::search {

absl::StatusOr<double> PassAtK(int64_t n, int64_t c, int64_t k) {
  if (n < 1 || c < 0 || c > n || k < 1 || k > n) {
    return absl::InvalidArgumentError(
        absl::StrCat("pass@k needs 0 <= c <= n and 1 <= k <= n; got n=", n, " c=", c, " k=", k));
  }
  if (n - c < k) return 1.0;  // every k-subset contains a passing sample
  // C(n-c, k) / C(n, k) = prod_{i=n-c+1}^{n} (1 - k / i)
  double fail_all = 1.0;
  for (int64_t i = n - c + 1; i <= n; ++i) fail_all *= 1.0 - static_cast<double>(k) / static_cast<double>(i);
  return 1.0 - fail_all;
}

}  // namespace banyan::search

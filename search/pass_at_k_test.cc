#include "search/pass_at_k.h"

#include <cmath>

#include "gtest/gtest.h"
#include "sdk/base/status_testing.h"

namespace banyan::search {
namespace {

using ::banyan::testing::StatusIs;

// Direct binomial ratio in long double for small n, as the independent check.
double BinomialRatio(int n, int c, int k) {
  auto choose = [](int a, int b) {
    if (b < 0 || b > a) return 0.0L;
    long double r = 1;
    for (int i = 1; i <= b; ++i) r = r * (a - b + i) / i;
    return r;
  };
  return static_cast<double>(1.0L - choose(n - c, k) / choose(n, k));
}

TEST(PassAtKTest, MatchesTheBinomialFormula) {
  for (int n = 1; n <= 30; ++n) {
    for (int c = 0; c <= n; ++c) {
      for (int k = 1; k <= n; ++k) {
        BANYAN_ASSERT_OK_AND_ASSIGN(double got, PassAtK(n, c, k));
        EXPECT_NEAR(got, BinomialRatio(n, c, k), 1e-12) << n << " " << c << " " << k;
      }
    }
  }
}

TEST(PassAtKTest, KnownValuesAndLargeN) {
  EXPECT_DOUBLE_EQ(*PassAtK(10, 0, 5), 0.0);
  EXPECT_DOUBLE_EQ(*PassAtK(10, 10, 1), 1.0);
  EXPECT_DOUBLE_EQ(*PassAtK(10, 3, 1), 0.3);  // pass@1 = c / n
  BANYAN_ASSERT_OK_AND_ASSIGN(double big, PassAtK(2000, 1, 100));
  EXPECT_NEAR(big, 100.0 / 2000.0, 1e-12);
}

TEST(PassAtKTest, RejectsBadCounts) {
  EXPECT_THAT(PassAtK(5, 6, 1), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(PassAtK(5, 1, 0), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(PassAtK(5, 1, 6), StatusIs(absl::StatusCode::kInvalidArgument));
}

}  // namespace
}  // namespace banyan::search

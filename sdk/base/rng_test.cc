#include "sdk/base/rng.h"

#include <cmath>
#include <vector>

#include "gtest/gtest.h"

namespace banyan {
namespace {

TEST(RngTest, SameSeedSameSequence) {
  Rng a(1234), b(1234), c(1235);
  bool differs = false;
  for (int i = 0; i < 1000; ++i) {
    const uint64_t x = a.Next();
    EXPECT_EQ(x, b.Next());
    differs |= (x != c.Next());
  }
  EXPECT_TRUE(differs);
}

TEST(RngTest, DeriveIsReproducibleAndIndependent) {
  Rng parent(99);
  Rng d1 = parent.Derive(5), d2 = Rng(99).Derive(5), d3 = parent.Derive(6);
  EXPECT_EQ(d1.Next(), d2.Next());
  EXPECT_NE(d1.Next(), d3.Next());
}

TEST(RngTest, UniformMomentsAndRange) {
  Rng rng(42);
  const int n = 200000;
  double sum = 0, sum_sq = 0;
  for (int i = 0; i < n; ++i) {
    const float u = rng.Uniform();
    ASSERT_GE(u, 0.0f);
    ASSERT_LT(u, 1.0f);
    sum += u;
    sum_sq += static_cast<double>(u) * u;
  }
  EXPECT_NEAR(sum / n, 0.5, 0.005);
  EXPECT_NEAR(sum_sq / n - (sum / n) * (sum / n), 1.0 / 12, 0.003);
}

TEST(RngTest, UniformIntCoversRangeEvenly) {
  Rng rng(3);
  std::vector<int> counts(7, 0);
  for (int i = 0; i < 70000; ++i) ++counts[rng.UniformInt(7)];
  for (int c : counts) EXPECT_NEAR(c, 10000, 500);
}

TEST(RngTest, NormalMoments) {
  Rng rng(11);
  const int n = 200000;
  double sum = 0, sum_sq = 0;
  for (int i = 0; i < n; ++i) {
    const double x = rng.Normal();
    sum += x;
    sum_sq += x * x;
  }
  EXPECT_NEAR(sum / n, 0.0, 0.01);
  EXPECT_NEAR(sum_sq / n, 1.0, 0.02);
}

}  // namespace
}  // namespace banyan

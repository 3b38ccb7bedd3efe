#include "model/sampling/row_math.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "gtest/gtest.h"
#include "sdk/base/rng.h"

namespace banyan::model::sampling {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

std::vector<float> RandomRow(Rng& rng, size_t n, float spread) {
  std::vector<float> x(n);
  for (float& v : x) v = spread * rng.Normal();
  return x;
}

TEST(RowMathTest, FastExpMatchesExp) {
  Rng rng(1);
  double worst = 0;
  for (int i = 0; i < 200000; ++i) {
    const float v = -87.0f * rng.Uniform();
    const double want = std::exp(static_cast<double>(v));
    worst = std::max(worst, std::abs(FastExp(v) - want) / want);
  }
  EXPECT_LT(worst, 3e-7);
  EXPECT_EQ(FastExp(0.0f), 1.0f);
  EXPECT_EQ(FastExp(-87.5f), 0.0f);
  EXPECT_EQ(FastExp(-kInf), 0.0f);
}

TEST(RowMathTest, ExpSumMatchesDoubleSumAndStoresEachExp) {
  Rng rng(2);
  for (size_t n : {1u, 15u, 16u, 17u, 255u, 256u, 257u, 1000u, 49152u, 128256u}) {
    std::vector<float> x = RandomRow(rng, n, 3.0f);
    if (n > 1) x[rng.UniformInt(n)] = -kInf;
    const float mx = *std::max_element(x.begin(), x.end());
    double want = 0;
    for (float v : x) want += std::exp(static_cast<double>(v) - mx);
    std::vector<float> e(n, std::nanf(""));
    std::vector<double> blocks;
    const double got = ExpSum(x, mx, e.data(), &blocks);
    EXPECT_NEAR(got / want, 1.0, 1e-6) << n;
    EXPECT_EQ(ExpSum(x, mx, nullptr), got) << "storing must not change the sum";
    ASSERT_EQ(blocks.size(), (n + kBlock - 1) / kBlock);
    double block_total = 0;
    for (double b : blocks) block_total += b;
    EXPECT_EQ(block_total, got);
    for (size_t i = 0; i < n; ++i) ASSERT_EQ(e[i], FastExp(x[i] - mx)) << i;
    // A floor zeroes (and drops) the small ones.
    const float floor = 0.05f;
    double want_floor = 0;
    for (size_t i = 0; i < n; ++i) {
      const float ev = FastExp(x[i] - mx);
      if (ev >= floor) want_floor += ev;
    }
    std::vector<float> ef(n, std::nanf(""));
    EXPECT_NEAR(ExpSum(x, mx, ef.data(), nullptr, floor), want_floor, 1e-6 * want_floor);
    for (size_t i = 0; i < n; ++i) ASSERT_EQ(ef[i], e[i] >= floor ? e[i] : 0.0f) << i;
  }
}

TEST(RowMathTest, ScanFindsMaxFirstArgmaxAndBadValues) {
  Rng rng(3);
  for (size_t n : {1u, 7u, 64u, 65u, 1000u, 32000u}) {
    std::vector<float> x = RandomRow(rng, n, 2.0f);
    for (float& v : x) v = std::round(v * 4) / 4;  // many ties
    RowScan s = ScanRow(x);
    const auto it = std::max_element(x.begin(), x.end());  // first max
    EXPECT_FALSE(s.bad);
    EXPECT_EQ(s.max, *it);
    EXPECT_EQ(s.argmax, it - x.begin());
    x[rng.UniformInt(n)] = std::nanf("");
    EXPECT_TRUE(ScanRow(x).bad);
    x = RandomRow(rng, n, 2.0f);
    x[rng.UniformInt(n)] = kInf;
    EXPECT_TRUE(ScanRow(x).bad);
    std::fill(x.begin(), x.end(), -kInf);
    s = ScanRow(x);
    EXPECT_FALSE(s.bad);
    EXPECT_EQ(s.max, -kInf);
  }
}

TEST(RowMathTest, DivideIsScalarDivision) {
  Rng rng(4);
  std::vector<float> x = RandomRow(rng, 1003, 5.0f);
  x[5] = -kInf;
  std::vector<float> y(x.size());
  DivideRow(x, 0.7f, y.data());
  for (size_t i = 0; i < x.size(); ++i) ASSERT_EQ(y[i], x[i] / 0.7f);
}

TEST(RowMathTest, CollectAtLeastMatchesFilter) {
  Rng rng(5);
  std::vector<float> x = RandomRow(rng, 5000, 1.0f);
  for (float threshold : {-10.0f, 0.0f, 2.5f, 100.0f}) {
    std::vector<int32_t> got, want;
    CollectAtLeast(x, threshold, &got);
    for (size_t i = 0; i < x.size(); ++i) {
      if (x[i] >= threshold) want.push_back(static_cast<int32_t>(i));
    }
    EXPECT_EQ(got, want) << threshold;
  }
}

TEST(RowMathTest, TopKMatchesFullSortWithTies) {
  Rng rng(6);
  for (int trial = 0; trial < 40; ++trial) {
    const size_t n = 1 + rng.UniformInt(3000);
    std::vector<float> x = RandomRow(rng, n, 3.0f);
    for (float& v : x) v = std::round(v * 2) / 2;  // ties
    for (int i = 0; i < 5; ++i) x[rng.UniformInt(n)] = -kInf;
    std::vector<int32_t> order(n);
    for (size_t i = 0; i < n; ++i) order[i] = static_cast<int32_t>(i);
    auto more = [&](int32_t a, int32_t b) { return x[a] > x[b] || (x[a] == x[b] && a < b); };
    std::sort(order.begin(), order.end(), more);
    while (!order.empty() && x[order.back()] == -kInf) order.pop_back();
    const int32_t k = 1 + static_cast<int32_t>(rng.UniformInt(n + 5));
    std::vector<int32_t> got;
    TopK(x, k, nullptr, &got);
    std::vector<int32_t> want(order.begin(), order.begin() + std::min<size_t>(k, order.size()));
    EXPECT_EQ(got, want) << "trial " << trial;
    // Restricted to a subset (given in any order).
    std::vector<int32_t> subset;
    for (size_t i = 0; i < n; i += 3) subset.push_back(static_cast<int32_t>(i));
    std::reverse(subset.begin(), subset.end());
    TopK(x, k, &subset, &got);
    want.clear();
    for (int32_t id : order) {
      if (id % 3 == 0 && static_cast<int32_t>(want.size()) < k) want.push_back(id);
    }
    EXPECT_EQ(got, want) << "trial " << trial;
  }
}

}  // namespace
}  // namespace banyan::model::sampling

#include "attention/cpu/cpu_attention.h"

#include <cmath>

#include "attention/reference/reference_attention.h"
#include "attention/testing/random_plan.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "sdk/base/status_testing.h"

namespace banyan::attention {
namespace {

using ::banyan::testing::StatusIs;
using testing::RelativeError;
using testing::ToDoubles;

struct Case {
  int32_t levels, leaves, max_length, kv_heads, q_heads, head_dim;
  DType kv_dtype, out_dtype;
  bool prefill;
  int threads;
};

class CpuAttentionTest : public ::testing::TestWithParam<Case> {};

TEST_P(CpuAttentionTest, MatchesReference) {
  const Case c = GetParam();
  for (int trial = 0; trial < 2; ++trial) {
    Rng rng(77 + trial * 1000 + c.leaves * 3 + c.levels);
    testing::RandomTreeOptions opt;
    opt.levels = c.levels;
    opt.leaves = c.leaves;
    opt.max_length = c.max_length;
    opt.plan.prefill = c.prefill;
    opt.plan.page_size = trial == 0 ? 16 : 5;
    const testing::TreePlan tree = testing::MakeRandomTreePlan(opt, rng);
    const testing::AttentionProblem p =
        testing::MakeProblem(tree, {c.kv_heads, c.q_heads, c.head_dim, 2, 1, c.kv_dtype, c.kv_dtype}, rng);
    const int64_t n = int64_t{tree.plan.num_queries} * c.q_heads * c.head_dim;
    const int64_t nl = int64_t{tree.plan.num_queries} * c.q_heads;
    std::vector<float> want(n), want_lse(nl);
    BANYAN_ASSERT_OK(ReferenceAttention(p.Args(tree.plan, want.data(), DType::kF32, want_lse.data())));
    std::vector<uint8_t> got(n * DTypeSize(c.out_dtype), 0xff);  // NaN poison in every dtype
    std::vector<float> got_lse(nl, NAN);
    BANYAN_ASSERT_OK(CpuAttention(p.Args(tree.plan, got.data(), c.out_dtype, got_lse.data()), c.threads));
    const double tol = c.out_dtype == DType::kF32 ? 1e-5 : 1e-2;
    EXPECT_LT(RelativeError(ToDoubles(got.data(), c.out_dtype, n), ToDoubles(want.data(), DType::kF32, n)), tol);
    EXPECT_LT(RelativeError(ToDoubles(got_lse.data(), DType::kF32, nl), ToDoubles(want_lse.data(), DType::kF32, nl)),
              1e-5);
  }
}

INSTANTIATE_TEST_SUITE_P(
    RandomPlans, CpuAttentionTest,
    ::testing::Values(Case{1, 1, 300, 1, 1, 64, DType::kF32, DType::kF32, false, 1},
                      Case{2, 64, 100, 1, 8, 128, DType::kBf16, DType::kF32, false, 2},
                      Case{3, 100, 40, 8, 32, 128, DType::kBf16, DType::kBf16, false, 3},
                      Case{4, 37, 50, 2, 8, 64, DType::kF16, DType::kF16, false, 2},
                      Case{5, 500, 20, 2, 2, 64, DType::kF32, DType::kF32, false, 4},
                      Case{2, 4096, 12, 1, 4, 64, DType::kBf16, DType::kF32, false, 2},
                      Case{2, 6, 40, 2, 8, 128, DType::kBf16, DType::kF32, true, 2},
                      Case{3, 5, 30, 1, 1, 64, DType::kF32, DType::kF32, true, 1}));

TEST(CpuAttentionTest, RejectsBadArgumentsAndWritesNothing) {
  Rng rng(1);
  const testing::TreePlan tree = testing::MakeRandomTreePlan({}, rng);
  const testing::AttentionProblem p = testing::MakeProblem(tree, {1, 2, 64, 1, 0, DType::kF32, DType::kF32}, rng);
  std::vector<float> out(int64_t{tree.plan.num_queries} * 2 * 64, 7.0f);
  AttentionArgs a = p.Args(tree.plan, out.data(), DType::kF32, nullptr);
  a.layout.head_dim = 80;
  EXPECT_THAT(CpuAttention(a, 2), StatusIs(absl::StatusCode::kInvalidArgument));
  for (float v : out) ASSERT_EQ(v, 7.0f);
}

}  // namespace
}  // namespace banyan::attention

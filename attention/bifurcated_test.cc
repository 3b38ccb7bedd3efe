#include "attention/bifurcated.h"

#include <cmath>

#include "attention/cpu/cpu_attention.h"
#include "attention/reference/reference_attention.h"
#include "attention/testing/random_plan.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "sdk/base/status_testing.h"

namespace banyan::attention {
namespace {

using ::banyan::testing::StatusIs;

TEST(BifurcatedPlanTest, TwoLevelsEqualTheDenseDecodeOfEachSample) {
  // Context at pages 0..3 (slot 0), sample i has its own page 4 + i.
  const int32_t page_size = 16;
  PagedRun context{{0, 1, 2, 3}, 0, 60};
  std::vector<PagedRun> samples;
  for (int32_t i = 0; i < 5; ++i) samples.push_back({{4 + i}, 0, i == 2 ? 0 : 3 + i});
  BANYAN_ASSERT_OK_AND_ASSIGN(const AttentionPlan plan, MakeBifurcatedPlan(context, samples, page_size));
  EXPECT_EQ(plan.num_queries, 5);
  EXPECT_EQ(plan.num_segments(), 5);  // the empty sample has no segment
  Rng rng(4);
  testing::TreePlan tree;
  tree.plan = plan;
  tree.num_pages = 9;
  const testing::AttentionProblem p = testing::MakeProblem(tree, {2, 8, 64, 1, 0, DType::kF32, DType::kF32}, rng);
  std::vector<float> out(5 * 8 * 64);
  BANYAN_ASSERT_OK(CpuAttention(p.Args(plan, out.data(), DType::kF32, nullptr), 1));
  // Sample 1 as a dense sequence would need contiguous pages; check it against
  // the reference merge of the two partials instead.
  const KvSource kv{p.layout, DType::kF32, p.kv.data(), 0};
  for (int32_t h = 0; h < 8; ++h) {
    std::vector<double> q(64);
    for (int i = 0; i < 64; ++i) q[i] = LoadAsDouble(p.q.data(), DType::kF32, (1 * 8 + h) * 64 + i);
    const Partial a = ReferenceSegmentPartial(kv, context.pages, 0, 60, q, h / 4, 1 / 8.0);
    const Partial b = ReferenceSegmentPartial(kv, samples[1].pages, 0, 4, q, h / 4, 1 / 8.0);
    const Partial m = ReferenceMerge({a, b});
    for (int i = 0; i < 64; ++i) EXPECT_NEAR(out[(1 * 8 + h) * 64 + i], m.o[i], 1e-5);
  }
}

TEST(BifurcatedPlanTest, RejectsBadRuns) {
  EXPECT_THAT(MakeBifurcatedPlan({{0}, 0, 0}, {PagedRun{{1}, 0, 1}}, 16),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(MakeBifurcatedPlan({{0}, 0, 4}, {}, 16), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(MakeBifurcatedPlan({{0}, 0, 40}, {PagedRun{{1}, 0, 1}}, 16),
              StatusIs(absl::StatusCode::kInvalidArgument, ::testing::HasSubstr("page count")));
}

}  // namespace
}  // namespace banyan::attention

// PredictNextDecodePlan on random decode and prefill plans, SamePlan on every
// field. The prediction against kv_tree's real next plan is in
// tests/decode_plan_prediction_test.cc.
#include "attention/next_decode_plan.h"

#include <functional>
#include <vector>

#include "attention/testing/random_plan.h"
#include "gtest/gtest.h"
#include "sdk/base/rng.h"

namespace banyan::attention {
namespace {

using testing::MakeRandomTreePlan;
using testing::RandomTreeOptions;
using testing::TreePlan;

// Whether segment s is some row's leaf (the last segment of its path).
std::vector<bool> LeafSegments(const TreePlan& tp) {
  std::vector<bool> leaf(static_cast<size_t>(tp.plan.num_segments()), false);
  for (const std::vector<int32_t>& path : tp.row_path) leaf[path.back()] = true;
  return leaf;
}

TEST(NextDecodePlanTest, GrowsEveryLeafByOneTokenUnlessOneNeedsAPage) {
  Rng rng(20261127);
  int predicted = 0, refused = 0;
  for (int trial = 0; trial < 300; ++trial) {
    RandomTreeOptions options;
    options.levels = 1 + static_cast<int32_t>(rng.UniformInt(4));
    options.leaves = 1 + static_cast<int32_t>(rng.UniformInt(40));
    options.max_length = 1 + static_cast<int32_t>(rng.UniformInt(70));
    const int32_t page_sizes[] = {4, 8, 16, 64};
    options.plan.page_size = page_sizes[rng.UniformInt(4)];
    const TreePlan tp = MakeRandomTreePlan(options, rng);
    const AttentionPlan& plan = tp.plan;
    ASSERT_EQ(plan.Validate(), "");
    const std::vector<bool> leaf = LeafSegments(tp);
    bool room = true;  // every leaf's next token fits on its last page
    for (int32_t s = 0; s < plan.num_segments(); ++s) {
      if (leaf[s] && (plan.segment_first_slot[s] + plan.segment_length[s]) % plan.page_size == 0) room = false;
    }
    AttentionPlan next;
    ASSERT_EQ(PredictNextDecodePlan(plan, &next), room) << "trial " << trial;
    if (!room) {
      ++refused;
      continue;
    }
    ++predicted;
    ASSERT_EQ(next.Validate(), "") << "trial " << trial;
    EXPECT_EQ(next.num_queries, plan.num_queries);
    EXPECT_EQ(next.page_indices, plan.page_indices);
    EXPECT_EQ(next.segment_page_indptr, plan.segment_page_indptr);
    EXPECT_EQ(next.segment_first_slot, plan.segment_first_slot);
    EXPECT_EQ(next.entry_query, plan.entry_query);
    EXPECT_EQ(next.query_entries, plan.query_entries);
    for (int32_t s = 0; s < plan.num_segments(); ++s) {
      EXPECT_EQ(next.segment_length[s], plan.segment_length[s] + (leaf[s] ? 1 : 0)) << "segment " << s;
      for (int32_t e = plan.segment_entry_indptr[s]; e < plan.segment_entry_indptr[s + 1]; ++e) {
        EXPECT_EQ(next.entry_kv_limit[e], next.segment_length[s]) << "entry " << e;  // decode: whole segments
      }
    }
  }
  // Both outcomes were exercised.
  EXPECT_GT(predicted, 50);
  EXPECT_GT(refused, 20);
}

TEST(NextDecodePlanTest, RefusesPrefillPlansAndEmptyOnes) {
  Rng rng(7);
  RandomTreeOptions options;
  options.levels = 2;
  options.leaves = 5;
  options.max_length = 30;
  options.plan.prefill = true;
  options.plan.page_size = 64;
  int checked = 0;
  for (int trial = 0; trial < 20; ++trial) {
    const TreePlan tp = MakeRandomTreePlan(options, rng);
    bool long_leaf = false;  // a leaf of 2+ tokens has 2+ rows: not a decode leaf
    for (const std::vector<int32_t>& path : tp.row_path) long_leaf |= tp.plan.segment_length[path.back()] > 1;
    if (!long_leaf) continue;
    ++checked;
    AttentionPlan next;
    EXPECT_FALSE(PredictNextDecodePlan(tp.plan, &next)) << "trial " << trial;
  }
  EXPECT_GT(checked, 10);
  AttentionPlan empty, next;
  EXPECT_FALSE(PredictNextDecodePlan(empty, &next));
}

TEST(NextDecodePlanTest, SamePlanSeesEveryField) {
  Rng rng(11);
  RandomTreeOptions options;
  options.levels = 3;
  options.leaves = 9;
  const TreePlan tp = MakeRandomTreePlan(options, rng);
  AttentionPlan copy = tp.plan;
  EXPECT_TRUE(SamePlan(tp.plan, copy));
  const std::vector<std::function<void(AttentionPlan&)>> changes = {
      [](AttentionPlan& p) { ++p.num_queries; },
      [](AttentionPlan& p) { p.page_size *= 2; },
      [](AttentionPlan& p) { ++p.segment_page_indptr.back(); },
      [](AttentionPlan& p) { ++p.page_indices[0]; },
      [](AttentionPlan& p) { p.segment_first_slot.back() ^= 1; },
      [](AttentionPlan& p) { ++p.segment_length[1]; },
      [](AttentionPlan& p) { ++p.segment_entry_indptr[1]; },
      [](AttentionPlan& p) { p.entry_query.back() ^= 1; },
      [](AttentionPlan& p) { --p.entry_kv_limit.back(); },
      [](AttentionPlan& p) { ++p.query_entry_indptr[1]; },
      [](AttentionPlan& p) { p.query_entries.pop_back(); },
  };
  for (size_t i = 0; i < changes.size(); ++i) {
    AttentionPlan changed = tp.plan;
    changes[i](changed);
    EXPECT_FALSE(SamePlan(tp.plan, changed)) << "change " << i;
    EXPECT_FALSE(SamePlan(changed, tp.plan)) << "change " << i;
  }
}

}  // namespace
}  // namespace banyan::attention

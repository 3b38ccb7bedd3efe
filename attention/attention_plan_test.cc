// AttentionPlan::Validate and FillQueryEntries: valid plans pass, and every
// malformed plan (including indptr arrays that run past their arrays before
// decreasing) is rejected without reading out of bounds (ASan build).
#include "attention/attention_plan.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace banyan::attention {
namespace {

using ::testing::HasSubstr;

// Two segments: a shared prefix of 20 tokens read by rows 0 and 1, and a
// private 3-token tail for row 1 starting at slot 4 of its page.
AttentionPlan TwoSegmentPlan() {
  AttentionPlan plan;
  plan.num_queries = 2;
  plan.page_size = 16;
  plan.segment_page_indptr = {0, 2, 3};
  plan.page_indices = {7, 3, 9};
  plan.segment_first_slot = {0, 4};
  plan.segment_length = {20, 3};
  plan.segment_entry_indptr = {0, 2, 3};
  plan.entry_query = {0, 1, 1};
  plan.entry_kv_limit = {20, 20, 3};
  FillQueryEntries(plan);
  return plan;
}

TEST(AttentionPlanTest, ValidPlanPassesAndQueryEntriesAreGrouped) {
  const AttentionPlan plan = TwoSegmentPlan();
  EXPECT_EQ(plan.Validate(), "");
  EXPECT_EQ(plan.query_entry_indptr, (std::vector<int32_t>{0, 1, 3}));
  EXPECT_EQ(plan.query_entries, (std::vector<int32_t>{0, 1, 2}));
}

TEST(AttentionPlanTest, RejectsMalformedPlans) {
  {
    AttentionPlan p = TwoSegmentPlan();
    p.segment_entry_indptr = {0, 5, 3};  // past the end, then decreasing
    EXPECT_THAT(p.Validate(), HasSubstr("past the end"));
  }
  {
    AttentionPlan p = TwoSegmentPlan();
    p.segment_page_indptr = {0, 9, 3};
    EXPECT_THAT(p.Validate(), HasSubstr("past the end"));
  }
  {
    AttentionPlan p = TwoSegmentPlan();
    p.query_entry_indptr = {0, 7, 3};
    EXPECT_THAT(p.Validate(), HasSubstr("past the end"));
  }
  {
    AttentionPlan p = TwoSegmentPlan();
    p.entry_kv_limit[2] = 4;  // beyond its segment's 3 tokens
    EXPECT_THAT(p.Validate(), HasSubstr("kv limit"));
  }
  {
    AttentionPlan p = TwoSegmentPlan();
    p.segment_first_slot[1] = 14;  // 14 + 3 tokens need two pages, the segment has one
    EXPECT_THAT(p.Validate(), HasSubstr("page count"));
  }
  {
    AttentionPlan p = TwoSegmentPlan();
    p.query_entries = {0, 2, 1};  // fine: order inside a row is free
    EXPECT_EQ(p.Validate(), "");
    p.query_entries = {1, 0, 2};  // entry 1 belongs to row 1
    EXPECT_THAT(p.Validate(), HasSubstr("wrong query row"));
  }
  {
    AttentionPlan p = TwoSegmentPlan();
    p.entry_query[2] = 5;  // a row that does not exist
    EXPECT_FALSE(p.Validate().empty());
  }
}

}  // namespace
}  // namespace banyan::attention

#include "attention/shard_plan.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "attention/reference/reference_attention.h"
#include "attention/testing/random_plan.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "sdk/base/status_testing.h"

namespace banyan::attention {
namespace {

using ::banyan::testing::StatusIs;
using ::testing::HasSubstr;

// Whether every row of `plan` sees tokens on every one of `shards` page runs
// (the condition ShardPlan needs), by its own count.
bool EveryRowOnEveryShard(const AttentionPlan& plan, int32_t shards) {
  for (int32_t q = 0; q < plan.num_queries; ++q) {
    for (int32_t i = 0; i < shards; ++i) {
      bool seen = false;
      for (int32_t x = plan.query_entry_indptr[q]; x < plan.query_entry_indptr[q + 1] && !seen; ++x) {
        const int32_t e = plan.query_entries[x];
        int32_t s = 0;
        while (plan.segment_entry_indptr[s + 1] <= e) ++s;
        const int32_t pages = plan.segment_page_indptr[s + 1] - plan.segment_page_indptr[s];
        const int32_t first = static_cast<int32_t>(int64_t{i} * pages / shards);
        // The entry's last visible token's page must reach this run's first page.
        const int32_t last_page = (plan.segment_first_slot[s] + plan.entry_kv_limit[e] - 1) / plan.page_size;
        seen = int64_t{i + 1} * pages / shards > first && last_page >= first;
      }
      if (!seen) return false;
    }
  }
  return true;
}

// Random forests (long and short nodes, decode and prefill, scattered pages,
// unaligned first slots) over 1-4 shards: either ShardPlan refuses and some
// row indeed sees no KV on some shard, or every shard's plan is valid, its
// pages are the source's, and the shards' partials (the reference over each
// shard's own pool) merged per row equal the reference over the whole plan.
TEST(ShardPlanTest, ShardsMergeToTheWholePlan) {
  Rng rng(41);
  int32_t sharded = 0, refused = 0;
  for (int trial = 0; trial < 60; ++trial) {
    SCOPED_TRACE(::testing::Message() << "trial " << trial);
    testing::RandomTreeOptions opt;
    opt.levels = 1 + static_cast<int32_t>(rng.UniformInt(3));
    opt.leaves = 1 + static_cast<int32_t>(rng.UniformInt(12));
    opt.max_length = trial % 3 == 0 ? 40 : 400;
    opt.plan.prefill = trial % 5 == 4;
    opt.plan.page_size = trial % 2 == 0 ? 16 : 8;
    if (opt.plan.prefill) opt.max_length = 24;
    const testing::TreePlan tree = testing::MakeRandomTreePlan(opt, rng);
    const int32_t shards = 1 + static_cast<int32_t>(rng.UniformInt(4));
    const testing::AttentionProblem p = testing::MakeProblem(tree, {2, 8, 64, 2, 1, DType::kBf16, DType::kF32}, rng);
    auto result = ShardPlan(tree.plan, shards);
    if (!result.ok()) {
      EXPECT_THAT(result.status(), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("sees no KV on shard")));
      EXPECT_FALSE(EveryRowOnEveryShard(tree.plan, shards));
      ++refused;
      continue;
    }
    EXPECT_TRUE(EveryRowOnEveryShard(tree.plan, shards));
    ++sharded;
    ASSERT_EQ(result->size(), static_cast<size_t>(shards));
    const int32_t hq = 8, d = 64, rows = tree.plan.num_queries;
    std::vector<std::vector<Partial>> parts(static_cast<size_t>(rows) * hq);
    size_t pages = 0;
    for (const PlanShard& shard : *result) {
      ASSERT_EQ(shard.plan.Validate(), "");
      EXPECT_EQ(shard.plan.num_queries, rows);
      EXPECT_EQ(shard.plan.page_indices.size(), shard.source_pages.size());
      pages += shard.source_pages.size();
      KvLayout layout;
      const std::vector<uint8_t> pool = testing::GatherPages(p, shard.source_pages, &layout);
      std::vector<float> out(static_cast<size_t>(rows) * hq * d), lse(static_cast<size_t>(rows) * hq);
      AttentionArgs args = p.Args(shard.plan, out.data(), DType::kF32, lse.data());
      args.layout = layout;
      args.kv_pool = pool.data();
      BANYAN_ASSERT_OK(ReferenceAttention(args));
      for (int32_t i = 0; i < rows * hq; ++i) {
        Partial part;
        part.o.assign(out.begin() + int64_t{i} * d, out.begin() + int64_t{i + 1} * d);
        part.lse = lse[i];
        parts[i].push_back(part);
      }
    }
    EXPECT_EQ(pages, tree.plan.page_indices.size()) << "every page on exactly one shard";
    std::vector<float> want(static_cast<size_t>(rows) * hq * d), want_lse(static_cast<size_t>(rows) * hq);
    BANYAN_ASSERT_OK(ReferenceAttention(p.Args(tree.plan, want.data(), DType::kF32, want_lse.data())));
    std::vector<double> got, expect;
    for (int32_t i = 0; i < rows * hq; ++i) {
      const Partial merged = ReferenceMerge(parts[i]);
      got.insert(got.end(), merged.o.begin(), merged.o.end());
      got.push_back(merged.lse);
      expect.insert(expect.end(), want.begin() + int64_t{i} * d, want.begin() + int64_t{i + 1} * d);
      expect.push_back(want_lse[i]);
    }
    EXPECT_LT(testing::RelativeError(got, expect), 1e-6);
  }
  EXPECT_GT(sharded, 10);
  EXPECT_GT(refused, 3);
}

// One long sequence over 4 shards: pages split evenly, every shard one
// segment, lengths adding up to the whole; a bad shard count is refused.
TEST(ShardPlanTest, OneLongSequenceSplitsEvenly) {
  Rng rng(3);
  testing::PlanOptions opt;
  const testing::TreePlan tree = testing::BuildTreePlan({{-1, 10000}}, opt, rng);
  BANYAN_ASSERT_OK_AND_ASSIGN(std::vector<PlanShard> shards, ShardPlan(tree.plan, 4));
  int32_t length = 0;
  for (const PlanShard& s : shards) {
    ASSERT_EQ(s.plan.num_segments(), 1);
    const int32_t pages = static_cast<int32_t>(tree.plan.page_indices.size());
    EXPECT_GE(static_cast<int32_t>(s.source_pages.size()), pages / 4);
    EXPECT_LE(static_cast<int32_t>(s.source_pages.size()), pages / 4 + 1);
    length += s.plan.segment_length[0];
  }
  EXPECT_EQ(length, 10000);
  EXPECT_THAT(ShardPlan(tree.plan, 0), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("shards = 0")));
}

}  // namespace
}  // namespace banyan::attention

#include "attention/work_plan_cluster.h"

#include <algorithm>
#include <vector>

#include "attention/reference/reference_attention.h"
#include "attention/testing/random_plan.h"
#include "attention/testing/work_plan_cpu.h"
#include "gtest/gtest.h"
#include "sdk/base/status_testing.h"

namespace banyan::attention {
namespace {

struct ClusterCase {
  int32_t levels, leaves, kv_heads, q_heads;
  bool prefill;
  ClusterGrid grid;
};

class ClusterPlanTest : public ::testing::TestWithParam<ClusterCase> {};

// Every row's partials come from the CTAs of the one cluster that owns the
// row, the clusters' rows partition the plan's (query, KV head) pairs, and the
// items run on the CPU merge to the reference.
TEST_P(ClusterPlanTest, EachClusterWritesAllPartialsOfItsOwnRows) {
  const ClusterCase c = GetParam();
  Rng rng(c.leaves * 31 + c.levels * 7 + c.kv_heads);
  const testing::TreePlan tree = testing::PlannerTestTree(c.levels, c.leaves, c.prefill, rng);
  const AttentionPlan& plan = tree.plan;
  const testing::AttentionProblem p =
      testing::MakeProblem(tree, {c.kv_heads, c.q_heads, 64, 1, 0, DType::kF32, DType::kF32}, rng);
  const WorkShape shape{c.q_heads, c.kv_heads, 64, 2};
  ASSERT_TRUE(ClusterPlacementFits(shape));
  const WorkPlan wp = BuildClusterWorkPlan(plan, shape, c.grid);
  const int32_t group = c.q_heads / c.kv_heads, size = c.grid.cluster_size;
  const int32_t ctas = c.grid.num_clusters * size;
  ASSERT_EQ(wp.cta_item_indptr.size(), static_cast<size_t>(ctas) + 1);
  ASSERT_EQ(wp.cta_head.size(), static_cast<size_t>(ctas) * kHeadStride);
  ASSERT_EQ(wp.cluster_rows.size(), static_cast<size_t>(c.grid.num_clusters) * kClusterRowsStride);
  ASSERT_EQ(wp.item_entry.size(), wp.items.size() * 4);
  // The clusters' rows partition the (query, KV head) pairs.
  std::vector<int> owner(static_cast<size_t>(plan.num_queries) * c.kv_heads, -1);
  for (int32_t k = 0; k < c.grid.num_clusters; ++k) {
    const int32_t* rows = wp.cluster_rows.data() + k * kClusterRowsStride;
    ASSERT_LE(rows[0], rows[1]);
    if (rows[0] == rows[1]) continue;
    ASSERT_GE(rows[0], 0);
    ASSERT_LE(rows[1], plan.num_queries);
    ASSERT_LT(rows[2], rows[3]);
    ASSERT_LE(rows[3], c.kv_heads);
    for (int32_t q = rows[0]; q < rows[1]; ++q) {
      for (int32_t h = rows[2]; h < rows[3]; ++h) {
        int& o = owner[static_cast<size_t>(q) * c.kv_heads + h];
        EXPECT_EQ(o, -1) << "query " << q << " kv head " << h << " owned twice";
        o = k;
      }
    }
  }
  for (int o : owner) ASSERT_GE(o, 0);
  // Each item: batched, whole entries of one block, rows of its own cluster.
  for (int32_t cta = 0; cta < ctas; ++cta) {
    const int32_t* head = wp.cta_head.data() + static_cast<size_t>(cta) * kHeadStride;
    EXPECT_EQ(head[12], wp.cta_item_indptr[cta]);
    EXPECT_EQ(head[13], wp.cta_item_indptr[cta + 1]);
    for (int32_t i = wp.cta_item_indptr[cta]; i < wp.cta_item_indptr[cta + 1]; ++i) {
      const WorkItem& it = wp.items[i];
      EXPECT_EQ(it.kind, static_cast<int32_t>(ItemKind::kBatched));
      EXPECT_EQ(it.group, 0);
      EXPECT_LE(it.row_count, kTileRows);
      EXPECT_EQ(it.row_begin % group, 0);
      EXPECT_EQ(it.row_count % group, 0);
      EXPECT_LT(it.kv_begin, it.kv_end);
      EXPECT_EQ(it.page_begin, plan.segment_page_indptr[it.segment]);
      EXPECT_EQ(it.first_slot, plan.segment_first_slot[it.segment]);
      EXPECT_EQ(it.entry_begin, plan.segment_entry_indptr[it.segment]);
      int32_t limit = 0;
      for (int32_t e = ItemFirstEntry(it, group); e <= ItemLastEntry(it, group); ++e) {
        limit = std::max(limit, plan.entry_kv_limit[e]);
        EXPECT_EQ(owner[static_cast<size_t>(plan.entry_query[e]) * c.kv_heads + it.kv_head], cta / size)
            << "item " << i << " of cta " << cta << " writes rows of another cluster";
      }
      EXPECT_LE(it.kv_end, limit);
    }
  }
  // Each row's slots are one contiguous range, rows in order.
  ASSERT_EQ(wp.row_slot_indptr.size(), static_cast<size_t>(plan.num_queries) + 1);
  EXPECT_EQ(wp.row_slot_indptr.back(), wp.num_partials);
  for (int32_t q = 0; q < plan.num_queries; ++q) {
    int32_t next = wp.row_slot_indptr[q];
    for (int32_t i = plan.query_entry_indptr[q]; i < plan.query_entry_indptr[q + 1]; ++i) {
      const int32_t e = plan.query_entries[i];
      EXPECT_EQ(wp.entry_partial_base[e], next);
      EXPECT_GE(wp.entry_num_chunks[e], 1);
      next += wp.entry_num_chunks[e];
    }
    EXPECT_EQ(next, wp.row_slot_indptr[q + 1]);
  }
  std::vector<int> written;
  const std::vector<double> got = testing::ExecuteWorkPlanOnCpu(p, plan, wp, &written);
  for (int w : written) ASSERT_EQ(w, 1);
  const int64_t n = int64_t{plan.num_queries} * c.q_heads * 64;
  std::vector<float> want(n);
  BANYAN_ASSERT_OK(ReferenceAttention(p.Args(plan, want.data(), DType::kF32, nullptr)));
  EXPECT_LT(testing::RelativeError(got, testing::ToDoubles(want.data(), DType::kF32, n)), 1e-6);
}

INSTANTIATE_TEST_SUITE_P(Plans, ClusterPlanTest,
                         ::testing::Values(ClusterCase{1, 1, 1, 8, false, {8, 16, 0}},
                                           ClusterCase{2, 64, 1, 8, false, {8, 16, 0}},
                                           ClusterCase{2, 40, 8, 32, false, {8, 16, 0}},
                                           ClusterCase{3, 30, 2, 8, false, {4, 3, 0}},
                                           ClusterCase{4, 25, 2, 2, false, {2, 5, 0}},
                                           ClusterCase{3, 50, 4, 16, false, {8, 16, 7}},
                                           ClusterCase{2, 3, 1, 40, false, {8, 16, 0}},
                                           ClusterCase{3, 4, 2, 8, true, {8, 16, 0}},
                                           ClusterCase{2, 20, 32, 32, false, {8, 16, 0}},
                                           ClusterCase{3, 90, 3, 6, false, {3, 7, 0}},
                                           ClusterCase{2, 64, 1, 8, false, {8, 15, 0}},
                                           ClusterCase{4, 25, 2, 2, true, {16, 7, 0}}));

// The small shape of the issue (64 leaves over one 2,048-token prefix, 8
// query heads per KV head): every cluster takes a few leaves, and the prefix
// it reads for them is cut over all of its CTAs.
TEST(ClusterPlanShapeTest, SmallTreeSpreadsThePrefixOverEachCluster) {
  Rng rng(5);
  testing::PlanOptions options;
  const testing::TreePlan tree = testing::BuildTreePlan(testing::UniformTree({1, 64}, {2048, 64}), options, rng);
  const WorkPlan wp = BuildClusterWorkPlan(tree.plan, WorkShape{8, 1, 128, 2}, ClusterGrid{8, 16, 0});
  int32_t used = 0;
  for (int32_t k = 0; k < 16; ++k) {
    const int32_t* rows = wp.cluster_rows.data() + k * kClusterRowsStride;
    if (rows[1] > rows[0]) {
      ++used;
      EXPECT_EQ(rows[1] - rows[0], 4);  // 4 leaves x 8 heads = kClusterMinRows rows
    }
  }
  EXPECT_EQ(used, 16);
  for (int32_t cta = 0; cta < 128; ++cta) {
    EXPECT_GE(wp.cta_item_indptr[cta + 1] - wp.cta_item_indptr[cta], 1) << "cta " << cta << " idle";
  }
  EXPECT_EQ(wp.entry_num_chunks[0], 8);  // the prefix: one 256-token chunk per CTA of the cluster
}

// The headline shape (256 leaves under a 16,384-token prefix, 32 query heads
// over 8 KV heads) in clusters of two: each of 64 clusters owns one KV head
// and 32 leaves (one 128-row tile of the prefix), cuts the prefix in two
// 8,192-token chunks, one per CTA, and spreads its 32 suffix items evenly:
// the two-chunk plan of the default placement, with every row's partials in
// one cluster (attention/PERF_NOTES.md session 39).
TEST(ClusterPlanShapeTest, HeadlineTreeInPairsKeepsTwoPrefixChunksPerRowTile) {
  Rng rng(7);
  testing::PlanOptions options;
  options.random_first_slot = false;
  const testing::TreePlan tree = testing::BuildTreePlan(testing::UniformTree({1, 256}, {16384, 64}), options, rng);
  const WorkPlan wp = BuildClusterWorkPlan(tree.plan, WorkShape{32, 8, 128, 2}, ClusterGrid{2, 66, 0});
  int32_t used = 0;
  for (int32_t k = 0; k < 66; ++k) {
    const int32_t* rows = wp.cluster_rows.data() + k * kClusterRowsStride;
    if (rows[1] == rows[0]) continue;
    ++used;
    EXPECT_EQ(rows[1] - rows[0], 32) << "cluster " << k;  // 32 leaves x 4 query heads = one 128-row tile
    EXPECT_EQ(rows[3] - rows[2], 1) << "cluster " << k;
  }
  EXPECT_EQ(used, 64);
  EXPECT_EQ(wp.entry_num_chunks[0], 2);  // the prefix's entries: two chunks
  for (int32_t cta = 0; cta < 128; ++cta) {
    int32_t prefix_tiles = 0, suffix_items = 0;
    for (int32_t i = wp.cta_item_indptr[cta]; i < wp.cta_item_indptr[cta + 1]; ++i) {
      const WorkItem& it = wp.items[i];
      if (it.segment == 0) {
        EXPECT_EQ(it.row_count, 128);
        prefix_tiles += (it.kv_end - it.kv_begin) / kKvTile;
      } else {
        ++suffix_items;
      }
    }
    EXPECT_EQ(prefix_tiles, 128) << "cta " << cta;  // 8,192 tokens
    EXPECT_EQ(suffix_items, 16) << "cta " << cta;
  }
}

}  // namespace
}  // namespace banyan::attention

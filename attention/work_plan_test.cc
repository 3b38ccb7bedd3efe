#include "attention/work_plan.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <utility>
#include <vector>

#include "attention/reference/reference_attention.h"
#include "attention/testing/random_plan.h"
#include "attention/testing/work_plan_cpu.h"
#include "gtest/gtest.h"
#include "sdk/base/status_testing.h"

namespace banyan::attention {
namespace {

// Runs every work item with the double reference and merges per row
// (testing/work_plan_cpu.h): the items must write every (entry, chunk, head)
// slot exactly once.
std::vector<double> ExecuteOnCpu(const testing::AttentionProblem& p, const AttentionPlan& plan, const WorkPlan& wp) {
  std::vector<int> written;
  std::vector<double> out = testing::ExecuteWorkPlanOnCpu(p, plan, wp, &written);
  for (int w : written) EXPECT_EQ(w, 1);
  return out;
}

struct Case {
  int32_t levels, leaves, kv_heads, q_heads;
  bool prefill;
  PathChoice choice;
  int32_t ctas_per_sm;
  int32_t tile_rows = kTileRows;
  int32_t group_small = 0;
  int32_t light_ctas = 0;  // WorkShape::light_ctas
};

// Every property of a work plan for `tree` (problem `p`, `device`, case `c`'s
// shape), down to its items run on the CPU and merged equalling the reference.
void ExpectValidWorkPlan(const Case& c, const testing::TreePlan& tree, const testing::AttentionProblem& p,
                         const DeviceModel& device, const WorkPlan& wp) {
  ASSERT_EQ(wp.cta_item_indptr.size(), static_cast<size_t>(device.num_ctas()) + 1);
  ASSERT_EQ(wp.cta_head.size(), static_cast<size_t>(device.num_ctas()) * kHeadStride);
  const int32_t ps = tree.plan.page_size;
  for (int32_t cta = 0; cta < device.num_ctas(); ++cta) {
    // The head: the CTA's range, a copy of its first item, the page ids of
    // the item's first `tiles` KV tiles and its entries' query rows.
    const int32_t* head = wp.cta_head.data() + static_cast<size_t>(cta) * kHeadStride;
    ASSERT_EQ(head[12], wp.cta_item_indptr[cta]);
    ASSERT_EQ(head[13], wp.cta_item_indptr[cta + 1]);
    if (head[12] == head[13]) continue;
    WorkItem a;
    std::memcpy(&a, head, sizeof(a));
    const WorkItem& b = wp.items[wp.cta_item_indptr[cta]];
    EXPECT_TRUE(a.segment == b.segment && a.row_begin == b.row_begin && a.kv_head == b.kv_head &&
                a.kv_begin == b.kv_begin && a.kv_end == b.kv_end && a.chunk == b.chunk && a.kind == b.kind &&
                a.group == b.group)
        << "cta " << cta;
    const int32_t page_base = head[14], tiles = head[15];
    EXPECT_EQ(page_base, (b.first_slot + b.kv_begin) / ps);
    const int32_t num_tiles = (b.kv_end - b.kv_begin + kKvTile - 1) / kKvTile;
    EXPECT_LE(tiles, num_tiles);
    if (ps >= 16) {
      EXPECT_GE(tiles, std::min(num_tiles, 3)) << "16 page ids cover 3 tiles of 16-token pages";
    }
    for (int32_t t = 0; t < tiles; ++t) {
      for (int32_t tok = b.kv_begin + t * kKvTile; tok < std::min(b.kv_end, b.kv_begin + (t + 1) * kKvTile); ++tok) {
        const int32_t page = (b.first_slot + tok) / ps;
        ASSERT_LT(page - page_base, kHeadPages);
        EXPECT_EQ(head[kHeadPagesAt + page - page_base], tree.plan.page_indices[b.page_begin + page]);
      }
    }
    const int32_t e0 = b.entry_begin + b.row_begin / (c.q_heads / c.kv_heads);
    const int32_t e_last = b.entry_begin + (b.row_begin + b.row_count - 1) / (c.q_heads / c.kv_heads);
    for (int32_t e = e0; e <= e_last && e - e0 < kHeadQrows; ++e) {
      EXPECT_EQ(head[kHeadQrowsAt + e - e0], tree.plan.entry_query[e]);
    }
  }
  // Each item's first entry, and whether it is the item's only one.
  ASSERT_EQ(wp.item_entry.size(), wp.items.size() * 4);
  for (size_t i = 0; i < wp.items.size(); ++i) {
    const WorkItem& it = wp.items[i];
    const int32_t g = c.q_heads / c.kv_heads;
    const int32_t e0 = it.entry_begin + it.row_begin / g;
    EXPECT_EQ(wp.item_entry[4 * i], tree.plan.entry_query[e0]);
    EXPECT_EQ(wp.item_entry[4 * i + 1], tree.plan.entry_kv_limit[e0]);
    EXPECT_EQ(wp.item_entry[4 * i + 2], wp.entry_partial_base[e0]);
    EXPECT_EQ(wp.item_entry[4 * i + 3], (it.row_begin % g + it.row_count <= g) ? 1 : 0);
  }
  // Groups: only with group_small; g consecutive small batched items of one CTA.
  int32_t grouped = 0;
  for (int32_t cta = 0; cta < device.num_ctas(); ++cta) {
    for (int32_t i = wp.cta_item_indptr[cta]; i < wp.cta_item_indptr[cta + 1]; ++i) {
      const int32_t g = wp.items[i].group;
      ASSERT_TRUE(g == 0 || (g >= 2 && g <= c.group_small)) << g;
      if (g == 0) continue;
      ASSERT_LE(i + g, wp.cta_item_indptr[cta + 1]);
      for (int32_t j = i; j < i + g; ++j) {
        const WorkItem& it = wp.items[j];
        EXPECT_EQ(it.kind, static_cast<int32_t>(ItemKind::kBatched));
        EXPECT_LE(it.row_count, kGroupRows);
        EXPECT_GT(it.kv_end, it.kv_begin);
        EXPECT_LE(it.kv_end - it.kv_begin, kKvTile);
        if (j > i) {
          EXPECT_EQ(it.group, 0);
        }
      }
      grouped += g;
      i += g - 1;
    }
  }
  if (c.group_small == 0) {
    EXPECT_EQ(grouped, 0);
  }
  for (const WorkItem& it : wp.items) {
    ASSERT_LE(it.row_count, it.kind == 0 ? c.tile_rows : kFlatRows);
    if (c.choice == PathChoice::kPerSequence) {
      ASSERT_LE(it.row_begin % (c.q_heads / c.kv_heads) + it.row_count, c.q_heads / c.kv_heads);
    }
    ASSERT_LE(it.kv_begin, it.kv_end);
    if (c.choice == PathChoice::kFlattened) {
      ASSERT_EQ(it.kind, 1);
    }
    if (c.choice == PathChoice::kBatched) {
      ASSERT_EQ(it.kind, 0);
    }
  }
  // Light CTAs: the last CTAs hold the light items and nothing else, the
  // others none of them; a forced count is kept where both kinds exist.
  const int32_t ctas = device.num_ctas();
  ASSERT_GE(wp.light_cta_begin, 0);
  ASSERT_LE(wp.light_cta_begin, ctas);
  if (c.light_ctas == 0) {
    EXPECT_EQ(wp.light_cta_begin, ctas);
  }
  bool any_light = false, any_heavy = false;
  for (const WorkItem& it : wp.items) (IsLightItem(it, c.q_heads / c.kv_heads) ? any_light : any_heavy) = true;
  if (wp.light_cta_begin < ctas) {
    EXPECT_TRUE(any_light);
    for (int32_t cta = 0; cta < ctas; ++cta) {
      for (int32_t i = wp.cta_item_indptr[cta]; i < wp.cta_item_indptr[cta + 1]; ++i) {
        EXPECT_EQ(IsLightItem(wp.items[i], c.q_heads / c.kv_heads), cta >= wp.light_cta_begin) << "cta " << cta;
      }
    }
  }
  if (!any_heavy) {
    EXPECT_EQ(wp.light_cta_begin, ctas) << "light items alone are not split";
  }
  if (c.light_ctas > 0 && any_light && any_heavy) {
    EXPECT_EQ(ctas - wp.light_cta_begin, std::min(c.light_ctas, ctas - 1));
  }
  // Each row's partial slots are one contiguous range (what the merge reads),
  // rows in order; the items repeat their segment's plan arrays; kv_end never
  // passes the largest limit of the item's rows.
  ASSERT_EQ(wp.row_slot_indptr.size(), static_cast<size_t>(tree.plan.num_queries) + 1);
  EXPECT_EQ(wp.row_slot_indptr[0], 0);
  EXPECT_EQ(wp.row_slot_indptr.back(), wp.num_partials);
  for (int32_t q = 0; q < tree.plan.num_queries; ++q) {
    int32_t next = wp.row_slot_indptr[q];
    for (int32_t i = tree.plan.query_entry_indptr[q]; i < tree.plan.query_entry_indptr[q + 1]; ++i) {
      const int32_t e = tree.plan.query_entries[i];
      EXPECT_EQ(wp.entry_partial_base[e], next) << "query " << q;
      next += wp.entry_num_chunks[e];
    }
    EXPECT_EQ(next, wp.row_slot_indptr[q + 1]) << "query " << q;
  }
  const int32_t group = c.q_heads / c.kv_heads;
  for (const WorkItem& it : wp.items) {
    EXPECT_EQ(it.page_begin, tree.plan.segment_page_indptr[it.segment]);
    EXPECT_EQ(it.first_slot, tree.plan.segment_first_slot[it.segment]);
    EXPECT_EQ(it.entry_begin, tree.plan.segment_entry_indptr[it.segment]);
    int32_t limit = 0;
    for (int32_t r = it.row_begin; r < it.row_begin + it.row_count; ++r) {
      limit = std::max(limit, tree.plan.entry_kv_limit[it.entry_begin + r / group]);
    }
    EXPECT_LE(it.kv_end, std::max(it.kv_begin, limit));
    EXPECT_LE(it.kv_end - it.kv_begin, tree.plan.segment_length[it.segment]);
  }
  // Fused-merge counts: every (chunk, KV head) of every entry of a row is at
  // least one item touching the row; the counts add up to the items' entries.
  ASSERT_EQ(wp.query_items.size(), static_cast<size_t>(tree.plan.num_queries));
  int64_t touched = 0, counted = 0;
  for (const WorkItem& it : wp.items) touched += (it.row_begin + it.row_count - 1) / group - it.row_begin / group + 1;
  for (int32_t q = 0; q < tree.plan.num_queries; ++q) {
    int64_t least = 0;
    for (int32_t i = tree.plan.query_entry_indptr[q]; i < tree.plan.query_entry_indptr[q + 1]; ++i) {
      least += int64_t{wp.entry_num_chunks[tree.plan.query_entries[i]]} * c.kv_heads;
    }
    EXPECT_GE(wp.query_items[q], least) << "query " << q;
    counted += wp.query_items[q];
  }
  EXPECT_EQ(counted, touched);
  EXPECT_TRUE(wp.fused_merge);
  const int64_t n = int64_t{tree.plan.num_queries} * c.q_heads * 64;
  std::vector<float> want(n);
  BANYAN_ASSERT_OK(ReferenceAttention(p.Args(tree.plan, want.data(), DType::kF32, nullptr)));
  const std::vector<double> got = ExecuteOnCpu(p, tree.plan, wp);
  EXPECT_LT(testing::RelativeError(got, testing::ToDoubles(want.data(), DType::kF32, n)), 1e-6);
}

class WorkPlanTest : public ::testing::TestWithParam<Case> {};

TEST_P(WorkPlanTest, ItemsCoverThePlanAndMergeToTheReference) {
  const Case c = GetParam();
  Rng rng(c.leaves * 13 + c.levels);
  const testing::TreePlan tree = testing::PlannerTestTree(c.levels, c.leaves, c.prefill, rng);
  const testing::AttentionProblem p =
      testing::MakeProblem(tree, {c.kv_heads, c.q_heads, 64, 1, 0, DType::kF32, DType::kF32}, rng);
  DeviceModel device;
  device.num_sms = 4;  // small device: forces chunking
  device.ctas_per_sm = c.ctas_per_sm;
  const WorkPlan wp = BuildWorkPlan(
      tree.plan, {c.q_heads, c.kv_heads, 64, 2, c.tile_rows, c.group_small, true, c.light_ctas}, device, c.choice);
  ExpectValidWorkPlan(c, tree, p, device, wp);
}

INSTANTIATE_TEST_SUITE_P(Plans, WorkPlanTest,
                         ::testing::Values(Case{1, 1, 1, 8, false, PathChoice::kAuto, 1},
                                           Case{2, 40, 2, 8, false, PathChoice::kAuto, 2},
                                           Case{3, 30, 1, 4, false, PathChoice::kFlattened, 2},
                                           Case{4, 25, 2, 2, false, PathChoice::kBatched, 1},
                                           Case{2, 3, 1, 40, false, PathChoice::kAuto, 2},
                                           Case{2, 3, 1, 40, false, PathChoice::kFlattened, 2},
                                           Case{3, 50, 2, 8, false, PathChoice::kPerSequence, 2},
                                           Case{2, 3, 1, 80, false, PathChoice::kPerSequence, 1},
                                           Case{3, 4, 2, 8, true, PathChoice::kAuto, 2},
                                           Case{3, 60, 1, 8, false, PathChoice::kAuto, 1, 256},
                                           Case{2, 20, 2, 8, true, PathChoice::kBatched, 1, 256},
                                           Case{2, 40, 2, 8, false, PathChoice::kAuto, 2, kTileRows, 4},
                                           Case{3, 60, 4, 16, false, PathChoice::kBatched, 1, kTileRows, 4},
                                           Case{3, 50, 2, 8, false, PathChoice::kPerSequence, 2, kTileRows, 3},
                                           // Light CTAs: by the model (-1) or forced.
                                           Case{2, 40, 2, 8, false, PathChoice::kAuto, 1, kTileRows, 0, -1},
                                           Case{3, 60, 1, 8, false, PathChoice::kAuto, 2, kTileRows, 0, 3},
                                           Case{4, 25, 2, 2, false, PathChoice::kBatched, 1, kTileRows, 0, 2},
                                           Case{2, 3, 1, 40, false, PathChoice::kAuto, 2, kTileRows, 0, 2},
                                           Case{3, 4, 2, 8, true, PathChoice::kAuto, 2, kTileRows, 0, 1},
                                           Case{3, 50, 2, 8, false, PathChoice::kPerSequence, 2, kTileRows, 0, 5},
                                           Case{1, 1, 1, 8, false, PathChoice::kAuto, 1, kTileRows, 0, 4}));

// Many 4-row, one-tile suffix items (h32/8-like, 256 leaves: 2048 >=
// kGroupMinPerCta per CTA): grouped by four, every small item in exactly one
// group. With 64 leaves (512, fewer than 8 per CTA): no groups.
TEST(WorkPlanGroupTest, SmallSuffixItemsAreGroupedWhereMany) {
  const WorkShape shape{32, 8, 128, 2, kTileRows, 4};
  const DeviceModel device;
  for (const int32_t leaves : {256, 64}) {
    testing::PlanOptions opt;
    Rng rng(3);
    const testing::TreePlan tree = testing::BuildTreePlan(testing::UniformTree({1, leaves}, {2048, 64}), opt, rng);
    const WorkPlan wp = BuildWorkPlan(tree.plan, shape, device, PathChoice::kAuto);
    int32_t small = 0, grouped = 0, groups = 0;
    for (const WorkItem& it : wp.items) {
      if (it.row_count <= kGroupRows && it.kv_end - it.kv_begin <= kKvTile) ++small;
      if (it.group > 0) {
        grouped += it.group;
        ++groups;
      }
    }
    EXPECT_EQ(small, leaves * 8);
    EXPECT_EQ(grouped, leaves == 256 ? small : 0);
    EXPECT_EQ(groups, leaves == 256 ? small / 4 : 0);
  }
}

// Light items (4-row suffix tiles) around heavy ones (128-row prefix tiles):
// each CTA runs the same items as without spreading; a CTA's light items all
// come before its first heavy item or all right after it; CTAs whose first
// heavy item reads the same KV chunk make the same choice; and the choice
// differs across chunks (not every CTA's light items at one end).
TEST(WorkPlanSpreadTest, LightItemsGoBeforeOrAfterTheFirstHeavyOneByChunk) {
  WorkShape shape{32, 8, 128, 2};
  const DeviceModel device;
  testing::PlanOptions opt;
  Rng rng(5);
  const testing::TreePlan tree = testing::BuildTreePlan(testing::UniformTree({1, 256}, {16384, 64}), opt, rng);
  const WorkPlan spread = BuildWorkPlan(tree.plan, shape, device, PathChoice::kAuto);
  shape.spread_light = false;
  const WorkPlan plain = BuildWorkPlan(tree.plan, shape, device, PathChoice::kAuto);
  ASSERT_EQ(spread.cta_item_indptr, plain.cta_item_indptr);
  auto key = [](const WorkItem& it) {
    return std::vector<int32_t>{it.segment, it.kv_head, it.row_begin, it.row_count, it.kv_begin, it.kv_end, it.chunk};
  };
  auto is_light = [&](int32_t i) { return spread.items[i].row_count <= kLightRows; };
  std::map<std::vector<int32_t>, bool> first_by_chunk;  // first heavy chunk -> light items first
  int32_t light_first = 0, ctas = 0;
  for (size_t c = 0; c + 1 < spread.cta_item_indptr.size(); ++c) {
    const int32_t b = spread.cta_item_indptr[c], e = spread.cta_item_indptr[c + 1];
    std::vector<std::vector<int32_t>> got, want;
    for (int32_t i = b; i < e; ++i) {
      got.push_back(key(spread.items[i]));
      want.push_back(key(plain.items[i]));
    }
    std::sort(got.begin(), got.end());
    std::sort(want.begin(), want.end());
    EXPECT_EQ(got, want) << "CTA " << c;
    int32_t heavy = b;
    while (heavy < e && is_light(heavy)) ++heavy;
    int32_t light = 0;
    for (int32_t i = b; i < e; ++i) light += is_light(i);
    if (heavy == e || light == 0) continue;  // no heavy item or no light one: nothing to place
    const bool first = heavy > b;
    // The light items form one run: all before the first heavy item, or all right after it.
    const int32_t run_begin = first ? b : heavy + 1;
    ASSERT_LE(run_begin + light, e) << "CTA " << c;
    for (int32_t i = run_begin; i < run_begin + light; ++i) {
      EXPECT_TRUE(is_light(i)) << "CTA " << c << " item " << i;
    }
    const WorkItem& chunk = spread.items[heavy];
    const auto [it, fresh] =
        first_by_chunk.emplace(std::vector<int32_t>{chunk.segment, chunk.kv_head, chunk.chunk}, first);
    if (!fresh) {
      EXPECT_EQ(it->second, first) << "CTA " << c;
    }
    ++ctas;
    light_first += first;
  }
  ASSERT_GT(ctas, 100);
  EXPECT_GT(light_first, ctas / 10);
  EXPECT_LT(light_first, ctas * 9 / 10);
}

// Pages in order: every tile's pages are consecutive; scattered over a pool:
// few are; pages of 64 tokens: one page per tile, always.
TEST(WorkPlanPagesTest, ConsecutivePageTileShareFollowsPageOrder) {
  const WorkShape shape{32, 8, 128, 2};
  const DeviceModel device;
  for (const bool shuffle : {false, true}) {
    for (const int32_t page_size : {16, 64}) {
      testing::PlanOptions opt;
      opt.shuffle_pages = shuffle;
      opt.random_first_slot = false;
      opt.page_size = page_size;
      Rng rng(11);
      const testing::TreePlan tree = testing::BuildTreePlan(testing::UniformTree({1, 64}, {2048, 64}), opt, rng);
      const WorkPlan wp = BuildWorkPlan(tree.plan, shape, device, PathChoice::kBatched);
      const double share = ConsecutivePageTileShare(tree.plan, wp);
      if (!shuffle || page_size == 64) {
        EXPECT_EQ(share, 1.0) << shuffle << " " << page_size;
      } else {
        EXPECT_LT(share, 0.1);
      }
    }
  }
}

// Runs of one tile's pages scattered as a whole (PlanOptions::shuffle_run):
// every tile's pages stay consecutive, the pool's order does not, and every
// id stays in the pool.
TEST(WorkPlanPagesTest, TileRunsScatteredKeepTilesConsecutive) {
  const WorkShape shape{32, 8, 128, 2};
  const DeviceModel device;
  testing::PlanOptions opt;
  opt.random_first_slot = false;
  opt.shuffle_run = kKvTile / opt.page_size;
  Rng rng(5);
  const testing::TreePlan tree = testing::BuildTreePlan(testing::UniformTree({1, 64}, {2048, 64}), opt, rng);
  const WorkPlan wp = BuildWorkPlan(tree.plan, shape, device, PathChoice::kBatched);
  EXPECT_EQ(ConsecutivePageTileShare(tree.plan, wp), 1.0);
  int32_t out_of_order = 0;
  for (size_t i = 1; i < tree.plan.page_indices.size(); ++i) {
    out_of_order += tree.plan.page_indices[i] != tree.plan.page_indices[i - 1] + 1;
  }
  EXPECT_GT(out_of_order, 10);
  std::vector<int32_t> ids = tree.plan.page_indices;
  std::sort(ids.begin(), ids.end());
  EXPECT_EQ(std::adjacent_find(ids.begin(), ids.end()), ids.end());  // no page shared by two places
  EXPECT_GE(ids.front(), 0);
  EXPECT_LT(ids.back(), tree.num_pages);
}

// Leaves' pages round robin (PlanOptions::interleave_leaves, the pool order of
// leaves decoding side by side): the inner node's pages stay in order, each
// leaf's next page is `leaves` ids after its previous one, every id distinct.
TEST(WorkPlanPagesTest, InterleavedLeavesKeepTheInnerNodeInOrder) {
  testing::PlanOptions opt;
  opt.random_first_slot = false;
  opt.shuffle_pages = false;
  opt.interleave_leaves = true;
  Rng rng(6);
  const int32_t leaves = 8;
  const testing::TreePlan tree = testing::BuildTreePlan(testing::UniformTree({1, leaves}, {256, 100}), opt, rng);
  const AttentionPlan& plan = tree.plan;
  for (int32_t i = 0; i < 256 / opt.page_size; ++i) EXPECT_EQ(plan.page_indices[i], i);  // the root, in order
  for (int32_t leaf = 0; leaf < leaves; ++leaf) {
    const int32_t s = 1 + leaf;
    ASSERT_EQ(plan.segment_page_indptr[s + 1] - plan.segment_page_indptr[s], 7);  // 100 tokens
    for (int32_t j = 1; j < 7; ++j) {
      EXPECT_EQ(plan.page_indices[plan.segment_page_indptr[s] + j],
                plan.page_indices[plan.segment_page_indptr[s] + j - 1] + leaves);
    }
  }
  std::vector<int32_t> ids = plan.page_indices;
  std::sort(ids.begin(), ids.end());
  EXPECT_EQ(std::adjacent_find(ids.begin(), ids.end()), ids.end());
  EXPECT_LT(ids.back(), tree.num_pages);
  EXPECT_EQ(plan.Validate(), "");
}

// BatchedTilesPerCta counts, per batched item, the distinct 64-slot pool
// tiles its tokens touch (checked here by walking every token), over the
// plan's CTAs; it grows with the leaves and the prefix.
TEST(WorkPlanTilesTest, BatchedTilesPerCtaCountsTheTilesItemsRead) {
  const WorkShape shape{8, 1, 128, 2};
  const DeviceModel device;
  double last = 0.0;
  for (const auto& [leaves, prefix] : std::vector<std::pair<int32_t, int32_t>>{{16, 300}, {64, 2048}, {256, 4096}}) {
    testing::PlanOptions opt;  // random first slots: items start and end inside tiles
    Rng rng(3);
    const testing::TreePlan tree = testing::BuildTreePlan(testing::UniformTree({1, leaves}, {prefix, 40}), opt, rng);
    const WorkPlan wp = BuildWorkPlan(tree.plan, shape, device, PathChoice::kBatched);
    int64_t tiles = 0;
    for (const WorkItem& it : wp.items) {
      if (it.kind != static_cast<int32_t>(ItemKind::kBatched)) continue;
      int32_t last_tile = -1;
      for (int32_t tok = it.kv_begin; tok < it.kv_end; ++tok) {
        const int32_t tile = (it.first_slot + tok) / kKvTile;
        tiles += tile != last_tile;
        last_tile = tile;
      }
    }
    const double per_cta = BatchedTilesPerCta(wp);
    EXPECT_DOUBLE_EQ(per_cta, static_cast<double>(tiles) / static_cast<double>(wp.cta_item_indptr.size() - 1));
    EXPECT_GT(per_cta, last);
    last = per_cta;
  }
  EXPECT_EQ(BatchedTilesPerCta(WorkPlan{}), 0.0);
}

// UnmaskedTileSpan against every tile checked one by one: tile t (64 slots
// from the 64-aligned slot of the item's first token) needs no mask exactly
// when its tokens lie in [kv_begin, limit); the span must be exactly those
// tiles, over first slots inside and on tile edges, empty items, limits below
// kv_begin and limits inside the last tile.
TEST(WorkPlanTilesTest, UnmaskedTileSpanIsExactlyTheTilesNoRowMasks) {
  static_assert(UnmaskedTileSpan(0, 0, 2, 128).lead == 0 && UnmaskedTileSpan(0, 0, 2, 128).end == 2);
  int64_t spans = 0, unmasked_tiles = 0;
  for (int32_t first_slot = 0; first_slot < 3 * kKvTile; first_slot += 5) {
    for (int32_t kv_begin = 0; kv_begin < 2 * kKvTile + 9; kv_begin += 7) {
      for (int32_t length = 0; length < 5 * kKvTile; length += 11) {
        const int32_t kv_end = kv_begin + length;
        // As TmaTiles counts them.
        const int32_t pos_begin = first_slot + kv_begin, pos_end = first_slot + kv_end;
        const int32_t base0 = pos_begin & ~(kKvTile - 1);
        const int32_t count = pos_end > pos_begin ? (pos_end - base0 + kKvTile - 1) / kKvTile : 0;
        for (int32_t limit = 0; limit <= kv_end; limit += 3) {
          const UnmaskedTiles span = UnmaskedTileSpan(first_slot, kv_begin, count, limit);
          ASSERT_LE(0, span.lead);
          ASSERT_LE(span.lead, span.end);
          ASSERT_LE(span.end, std::max(count, span.lead));
          for (int32_t t = 0; t < count; ++t) {
            const int32_t tok0 = base0 - first_slot + t * kKvTile;
            const bool no_mask = tok0 >= kv_begin && tok0 + kKvTile <= limit;
            ASSERT_EQ(no_mask, t >= span.lead && t < span.end)
                << "first_slot " << first_slot << " kv [" << kv_begin << ", " << kv_end << ") limit " << limit
                << " tile " << t;
            unmasked_tiles += no_mask;
          }
          ++spans;
        }
      }
    }
  }
  EXPECT_GT(unmasked_tiles, spans / 4);  // the grid reaches long unmasked runs, not only edges
}

// Every field of two work plans, item bytes included.
void ExpectSamePlan(const WorkPlan& a, const WorkPlan& b) {
  ASSERT_EQ(a.items.size(), b.items.size());
  EXPECT_EQ(0, std::memcmp(a.items.data(), b.items.data(), a.items.size() * sizeof(WorkItem)));
  EXPECT_EQ(a.cta_item_indptr, b.cta_item_indptr);
  EXPECT_EQ(a.cta_head, b.cta_head);
  EXPECT_EQ(a.item_entry, b.item_entry);
  EXPECT_EQ(a.entry_partial_base, b.entry_partial_base);
  EXPECT_EQ(a.entry_num_chunks, b.entry_num_chunks);
  EXPECT_EQ(a.entry_segment, b.entry_segment);
  EXPECT_EQ(a.row_slot_indptr, b.row_slot_indptr);
  EXPECT_EQ(a.query_items, b.query_items);
  EXPECT_EQ(a.fused_merge, b.fused_merge);
  EXPECT_EQ(a.light_cta_begin, b.light_cta_begin);
  EXPECT_EQ(a.num_partials, b.num_partials);
  EXPECT_EQ(a.batched_segments, b.batched_segments);
  EXPECT_EQ(a.flattened_segments, b.flattened_segments);
  EXPECT_EQ(a.estimated_us, b.estimated_us);
}

// One planner reused over plans that grow and shrink, with every shape
// option and refresh off: each plan equals a fresh BuildWorkPlan.
TEST(WorkPlannerTest, ReusedBuffersGiveTheFreshPlan) {
  Rng rng(29);
  WorkPlanner planner;
  planner.set_refresh(false);
  const PathChoice choices[] = {PathChoice::kAuto, PathChoice::kBatched, PathChoice::kPerSequence,
                                PathChoice::kFlattened};
  for (int trial = 0; trial < 60; ++trial) {
    testing::RandomTreeOptions options;
    options.levels = 1 + static_cast<int32_t>(rng.UniformInt(5));
    options.leaves = 1 + static_cast<int32_t>(rng.UniformInt(trial % 3 == 0 ? 1200 : 40));
    options.max_length = trial % 2 == 0 ? 80 : 600;
    options.plan.page_size = trial % 4 == 1 ? 64 : 16;
    const testing::TreePlan tree = testing::MakeRandomTreePlan(options, rng);
    const int32_t group = 1 << rng.UniformInt(4);
    const int32_t kv_heads = 1 + static_cast<int32_t>(rng.UniformInt(8));
    WorkShape shape{group * kv_heads, kv_heads, trial % 3 == 0 ? 128 : 64, trial % 5 == 0 ? 4 : 2};
    shape.group_small = trial % 3 == 1 ? 4 : 0;
    shape.spread_light = trial % 2 == 0;
    DeviceModel device;
    device.num_sms = 1 + static_cast<int32_t>(rng.UniformInt(140));
    device.ctas_per_sm = 1 + static_cast<int32_t>(rng.UniformInt(2));
    const PathChoice choice = choices[trial % 4];
    const WorkPlan& reused = planner.Plan(tree.plan, shape, device, choice);
    SCOPED_TRACE(::testing::Message() << "trial " << trial);
    EXPECT_FALSE(planner.last_refreshed());
    ExpectSamePlan(reused, BuildWorkPlan(tree.plan, shape, device, choice));
  }
}

// The leaves (nodes no other node names as parent) of a forest.
std::vector<int32_t> LeavesOf(const std::vector<testing::TreeNode>& nodes) {
  std::vector<bool> parent(nodes.size(), false);
  for (const testing::TreeNode& n : nodes) {
    if (n.parent >= 0) parent[n.parent] = true;
  }
  std::vector<int32_t> leaves;
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (!parent[i]) leaves.push_back(static_cast<int32_t>(i));
  }
  return leaves;
}

// A decode loop: the same forest with its leaves a token (sometimes two)
// longer at every step, with new page ids and first slots each time. The
// planner refreshes the steps it may (most of them; a build at least every
// kMaxRefreshes + 1 steps, and where a leaf needs another KV chunk), and
// every plan it returns, refreshed or built, is a valid work plan of that
// step's tree that merges to the reference.
TEST(WorkPlannerTest, RefreshedPlansCoverEachStepsTree) {
  for (const Case& c : {Case{3, 24, 2, 8, false, PathChoice::kAuto, 1},
                        Case{2, 16, 1, 4, false, PathChoice::kFlattened, 2},
                        Case{2, 12, 2, 8, false, PathChoice::kPerSequence, 1},
                        Case{3, 24, 1, 8, false, PathChoice::kBatched, 1, 256},
                        Case{3, 24, 2, 8, false, PathChoice::kAuto, 1, kTileRows, 0, -1}}) {
    SCOPED_TRACE(::testing::Message() << "levels " << c.levels << " leaves " << c.leaves);
    Rng rng(c.leaves * 7 + c.levels);
    std::vector<testing::TreeNode> nodes = c.levels == 3 ? testing::UniformTree({1, 4, c.leaves / 4}, {400, 70, 1})
                                                         : testing::UniformTree({1, c.leaves}, {500, 1});
    const std::vector<int32_t> leaves = LeavesOf(nodes);
    for (int32_t leaf : leaves) nodes[leaf].length = 1 + static_cast<int32_t>(rng.UniformInt(60));
    const WorkShape shape{c.q_heads, c.kv_heads, 64, 2, c.tile_rows, c.group_small, true, c.light_ctas};
    DeviceModel device;
    device.num_sms = 4;  // small device: forces chunking
    device.ctas_per_sm = c.ctas_per_sm;
    WorkPlanner planner;
    int refreshed = 0, in_a_row = 0;
    for (int step = 0; step < 24; ++step) {
      SCOPED_TRACE(::testing::Message() << "step " << step);
      const testing::TreePlan tree = testing::BuildTreePlan(nodes, {}, rng);
      const testing::AttentionProblem p =
          testing::MakeProblem(tree, {c.kv_heads, c.q_heads, 64, 1, 0, DType::kF32, DType::kF32}, rng);
      const WorkPlan& wp = planner.Plan(tree.plan, shape, device, c.choice);
      in_a_row = planner.last_refreshed() ? in_a_row + 1 : 0;
      refreshed += planner.last_refreshed() ? 1 : 0;
      EXPECT_LE(in_a_row, WorkPlanner::kMaxRefreshes);
      ExpectValidWorkPlan(c, tree, p, device, wp);
      for (int32_t leaf : leaves) nodes[leaf].length += step % 7 == 3 ? 2 : 1;
    }
    EXPECT_GE(refreshed, 16);
  }
}

// A plan of another topology (a leaf more), a prefill plan of the same tree
// (more query rows), another shape: built, not refreshed.
TEST(WorkPlannerTest, OtherTopologiesAreBuilt) {
  Rng rng(5);
  const WorkShape shape{8, 2, 64, 2};
  const DeviceModel device;
  WorkPlanner planner;
  const std::vector<testing::TreeNode> nodes = testing::UniformTree({1, 6}, {300, 9});
  std::vector<testing::TreeNode> more = nodes;
  more.push_back({0, 9});
  testing::PlanOptions prefill;
  prefill.prefill = true;
  planner.Plan(testing::BuildTreePlan(nodes, {}, rng).plan, shape, device, PathChoice::kAuto);
  planner.Plan(testing::BuildTreePlan(nodes, {}, rng).plan, shape, device, PathChoice::kAuto);
  EXPECT_TRUE(planner.last_refreshed());
  planner.Plan(testing::BuildTreePlan(more, {}, rng).plan, shape, device, PathChoice::kAuto);
  EXPECT_FALSE(planner.last_refreshed());
  planner.Plan(testing::BuildTreePlan(more, prefill, rng).plan, shape, device, PathChoice::kAuto);
  EXPECT_FALSE(planner.last_refreshed());
  const testing::TreePlan tree = testing::BuildTreePlan(more, {}, rng);
  planner.Plan(tree.plan, shape, device, PathChoice::kAuto);
  EXPECT_FALSE(planner.last_refreshed());
  planner.Plan(tree.plan, {16, 2, 64, 2}, device, PathChoice::kAuto);
  EXPECT_FALSE(planner.last_refreshed());
  planner.Plan(tree.plan, {16, 2, 64, 2}, device, PathChoice::kBatched);
  EXPECT_FALSE(planner.last_refreshed());
  planner.Plan(tree.plan, {16, 2, 64, 2}, device, PathChoice::kBatched);
  EXPECT_TRUE(planner.last_refreshed());
  planner.Clear();
  EXPECT_TRUE(planner.plan().items.empty());
  planner.Plan(tree.plan, {16, 2, 64, 2}, device, PathChoice::kBatched);
  EXPECT_FALSE(planner.last_refreshed());
}

// Every (entry, KV head)'s items of `wp` tile its tokens [0, limit) in
// chunk order (empty filler chunks aside).
void ExpectPiecesTileEachRun(const AttentionPlan& plan, const WorkPlan& wp, int32_t group) {
  std::map<std::pair<int32_t, int32_t>, std::vector<std::pair<int32_t, int32_t>>> ranges;  // per chunk
  for (const WorkItem& it : wp.items) {
    auto& r = ranges[{it.row_begin / group + it.entry_begin, it.kv_head}];
    if (static_cast<int32_t>(r.size()) <= it.chunk) r.resize(it.chunk + 1, {-1, -1});
    r[it.chunk] = {it.kv_begin, it.kv_end};
  }
  for (const auto& [key, r] : ranges) {
    int32_t next = 0;
    for (const auto& [begin, end] : r) {
      EXPECT_EQ(begin, begin == end ? begin : next) << "entry " << key.first << " head " << key.second;
      next = std::max(next, end);
    }
    EXPECT_EQ(next, plan.entry_kv_limit[key.first]);
  }
}

// A few long sequences on a device with more CTAs than (sequence, KV head)
// runs, where whole split-K chunks leave a partly filled last wave: with
// StreamKMode::kAuto the planner places them in one wave (where cutting each
// run into the same number of pieces fills >= 85% of the CTAs) or stream-K
// style (then with a makespan at least 10% under the fixed split's); the
// plan stays valid down to its items merging to the reference; such a plan
// is never refreshed. kOff: the fixed split as before; kAlways: stream-K.
TEST(WorkPlanStreamKTest, FewLongSequencesArePlacedFromWholeRuns) {
  struct StreamCase {
    Case c;
    int32_t sms;
    StreamKMode mode;
    Placement want;
  };
  for (const StreamCase& sc :
       {StreamCase{Case{1, 1, 2, 8, false, PathChoice::kAuto, 1}, 5, StreamKMode::kAuto, Placement::kStreamK},
        StreamCase{Case{1, 3, 2, 4, false, PathChoice::kAuto, 1}, 5, StreamKMode::kAuto, Placement::kStreamK},
        StreamCase{Case{1, 2, 1, 8, false, PathChoice::kFlattened, 1}, 5, StreamKMode::kAuto, Placement::kStreamK},
        StreamCase{Case{1, 2, 2, 8, false, PathChoice::kPerSequence, 1}, 5, StreamKMode::kAuto, Placement::kStreamK},
        StreamCase{Case{1, 1, 2, 8, false, PathChoice::kAuto, 1}, 9, StreamKMode::kAuto, Placement::kOneWave},
        StreamCase{Case{1, 3, 2, 8, false, PathChoice::kAuto, 1}, 13, StreamKMode::kAuto, Placement::kOneWave},
        StreamCase{Case{1, 3, 2, 8, false, PathChoice::kAuto, 1}, 13, StreamKMode::kAlways, Placement::kStreamK}}) {
    const Case& c = sc.c;
    SCOPED_TRACE(::testing::Message() << "sequences " << c.leaves << " kv heads " << c.kv_heads << " sms " << sc.sms);
    Rng rng(c.leaves * 31 + c.kv_heads + sc.sms);
    // Equal lengths (a random one per case): whole chunks then fill waves predictably.
    const std::vector<testing::TreeNode> nodes(c.leaves, {-1, 12000 + static_cast<int32_t>(rng.UniformInt(4000))});
    const testing::TreePlan tree = testing::BuildTreePlan(nodes, {}, rng);
    const testing::AttentionProblem p =
        testing::MakeProblem(tree, {c.kv_heads, c.q_heads, 64, 1, 0, DType::kBf16, DType::kF32}, rng);
    DeviceModel device;
    device.num_sms = sc.sms;
    WorkShape shape{c.q_heads, c.kv_heads, 64, 2};
    shape.stream_k = StreamKMode::kOff;
    const WorkPlan fixed = BuildWorkPlan(tree.plan, shape, device, c.choice);
    EXPECT_EQ(fixed.placement, Placement::kChunks);
    shape.stream_k = sc.mode;
    WorkPlanner planner;
    const WorkPlan& wp = planner.Plan(tree.plan, shape, device, c.choice);
    ASSERT_EQ(wp.placement, sc.want);
    if (sc.want == Placement::kStreamK && sc.mode == StreamKMode::kAuto) {
      EXPECT_LT(wp.estimated_us * 1.1, fixed.estimated_us);
    }
    if (sc.want == Placement::kOneWave) {
      for (int32_t cta = 0; cta < device.num_ctas(); ++cta) {
        EXPECT_LE(wp.cta_item_indptr[cta + 1] - wp.cta_item_indptr[cta], 1) << "cta " << cta;
      }
    }
    ExpectValidWorkPlan(c, tree, p, device, wp);
    ExpectPiecesTileEachRun(tree.plan, wp, c.q_heads / c.kv_heads);
    planner.Plan(tree.plan, shape, device, c.choice);
    EXPECT_FALSE(planner.last_refreshed());
  }
}

// Issue-size long-context decode (h32/8, head dim 128, 131,072 tokens, 1-8
// sequences, the H100's 132 CTAs): the default places it in one wave (at
// most one item per CTA, >= 85% of the CTAs busy); forced stream-K gives
// every CTA its even share of tiles within one, at most three items each.
TEST(WorkPlanStreamKTest, LongContextDecodeFillsOneWaveOrEveryCtaEvenly) {
  const DeviceModel device;
  for (const int32_t seqs : {1, 2, 3, 8}) {
    SCOPED_TRACE(::testing::Message() << "sequences " << seqs);
    Rng rng(seqs);
    std::vector<testing::TreeNode> nodes(seqs, testing::TreeNode{-1, 131072});
    testing::PlanOptions opt;
    opt.shuffle_pages = false;
    const testing::TreePlan tree = testing::BuildTreePlan(nodes, opt, rng);
    WorkShape shape{32, 8, 128, 2};
    const WorkPlan wave = BuildWorkPlan(tree.plan, shape, device, PathChoice::kAuto);
    ASSERT_EQ(wave.placement, Placement::kOneWave);
    int32_t busy = 0;
    for (int32_t cta = 0; cta < device.num_ctas(); ++cta) {
      const int32_t n = wave.cta_item_indptr[cta + 1] - wave.cta_item_indptr[cta];
      EXPECT_LE(n, 1) << "cta " << cta;
      busy += n;
    }
    EXPECT_GE(busy, 0.85 * device.num_ctas());
    shape.stream_k = StreamKMode::kAlways;
    const WorkPlan wp = BuildWorkPlan(tree.plan, shape, device, PathChoice::kAuto);
    ASSERT_EQ(wp.placement, Placement::kStreamK);
    const int64_t total_tiles = int64_t{seqs} * 8 * 131072 / kKvTile;
    const int64_t share = (total_tiles + device.num_ctas() - 1) / device.num_ctas();
    for (int32_t cta = 0; cta < device.num_ctas(); ++cta) {
      int64_t tiles = 0;
      for (int32_t i = wp.cta_item_indptr[cta]; i < wp.cta_item_indptr[cta + 1]; ++i) {
        tiles += (wp.items[i].kv_end - wp.items[i].kv_begin) / kKvTile;
      }
      EXPECT_LE(tiles, share + 1) << "cta " << cta;
      EXPECT_GE(tiles, share - 2) << "cta " << cta;
      EXPECT_LE(wp.cta_item_indptr[cta + 1] - wp.cta_item_indptr[cta], 3) << "cta " << cta;
    }
    ExpectPiecesTileEachRun(tree.plan, wp, 4);
    ExpectPiecesTileEachRun(tree.plan, wave, 4);
  }
}

// The engine's decode shape (256 leaves, h32/8, D 64, 2,048 shared tokens,
// 64-token suffixes: 2,048 light items): the model gives the light items CTAs
// of their own, fewer than half of the grid (the H100 measured 36 best with
// session 9's TMA light warps and whole heavy items per CTA, 32-48 before);
// with no heavy items (one 16,384-token sequence: all light) or light_ctas 0
// there are none.
TEST(WorkPlanLightTest, LightItemsGetCtasOfTheirOwnWhereThatPays) {
  const DeviceModel device;
  Rng rng(2);
  const testing::TreePlan tree = testing::BuildTreePlan(testing::UniformTree({1, 256}, {2048, 64}), {}, rng);
  WorkShape shape{32, 8, 64, 2};
  const WorkPlan plain = BuildWorkPlan(tree.plan, shape, device, PathChoice::kAuto);
  EXPECT_EQ(plain.light_cta_begin, device.num_ctas());
  shape.light_ctas = -1;
  const WorkPlan split = BuildWorkPlan(tree.plan, shape, device, PathChoice::kAuto);
  const int32_t light = device.num_ctas() - split.light_cta_begin;
  EXPECT_GT(light, 0);
  EXPECT_LT(light, device.num_ctas() / 2);
  // The heavy CTAs run whole items of the 2,048 shared tokens, as many on
  // each (tiles within 10%: H100, 42.5 us vs 46.0 with 3 items on some CTAs
  // and 2 on others).
  int32_t most = 0, least = INT32_MAX;
  for (int32_t c = 0; c < split.light_cta_begin; ++c) {
    int32_t tiles = 0;
    for (int32_t i = split.cta_item_indptr[c]; i < split.cta_item_indptr[c + 1]; ++i) {
      tiles += (split.items[i].kv_end - split.items[i].kv_begin + kKvTile - 1) / kKvTile;
    }
    most = std::max(most, tiles);
    least = std::min(least, tiles);
  }
  EXPECT_GT(least, 0);
  EXPECT_LE(most, least * 11 / 10) << "heavy CTAs: " << least << " to " << most << " tiles";
  // Suffixes of 8 and 120 tokens (the two ends of the engine's 128-token
  // decode) split too: 120-token suffixes measured 52 us split vs 72 unsplit.
  // Past one KV tile each light item's chain doubles, and the split moves
  // light CTAs' way (H100, session 35: at S120 68 light CTAs 42.8 us, 46
  // 44.8, 36 46.1; at S64 36 is the best by 10%).
  int32_t light_at[2] = {0, 0};
  for (const int32_t suffix : {8, 120}) {
    const testing::TreePlan t = testing::BuildTreePlan(testing::UniformTree({1, 256}, {2048, suffix}), {}, rng);
    const WorkPlan w = BuildWorkPlan(t.plan, shape, device, PathChoice::kAuto);
    light_at[suffix == 120] = device.num_ctas() - w.light_cta_begin;
    EXPECT_GT(light_at[suffix == 120], 0) << "suffix " << suffix;
  }
  EXPECT_GT(light_at[1], light_at[0]);
  EXPECT_EQ(light_at[0], light);
  int32_t light_items = 0;
  for (const WorkItem& it : split.items) light_items += IsLightItem(it, 4);
  EXPECT_EQ(light_items, 256 * 8);
  EXPECT_EQ(split.cta_item_indptr[device.num_ctas()] - split.cta_item_indptr[split.light_cta_begin], light_items);
  const testing::TreePlan one = testing::BuildTreePlan(testing::UniformTree({1}, {16384}), {}, rng);
  EXPECT_EQ(BuildWorkPlan(one.plan, shape, device, PathChoice::kAuto).light_cta_begin, device.num_ctas());
  // Head dim 128 (six light warps per CTA), 256 leaves: fewer than half the
  // CTAs light and the shared 2,048 tokens in one item per row block (H100,
  // session 37, ordered pages: 46 or 58 light CTAs 52.1 us, unsplit 56.8,
  // two 1,024-token items 56.6-57.9); the count where forced.
  shape.head_dim = 128;
  const WorkPlan split128 = BuildWorkPlan(tree.plan, shape, device, PathChoice::kAuto);
  EXPECT_GT(split128.light_cta_begin, device.num_ctas() / 2);
  EXPECT_LT(split128.light_cta_begin, device.num_ctas());
  EXPECT_EQ(split128.most_chunks(), 1);
  shape.light_ctas = 8;
  EXPECT_EQ(BuildWorkPlan(tree.plan, shape, device, PathChoice::kAuto).light_cta_begin, device.num_ctas() - 8);
  // 1,024 leaves over 2,048 tokens at head dim 128: the leaves' one-tile
  // suffixes read as many bytes as the heavy side runs tiles; the model
  // splits (H100, session 26: 165 us vs 206 unsplit), fewer than half the
  // CTAs light. With 512-token suffixes (eight tiles per light item) it does
  // not (measured slower split at every such shape).
  shape.light_ctas = -1;
  const testing::TreePlan wide = testing::BuildTreePlan(testing::UniformTree({1, 1024}, {2048, 64}), {}, rng);
  const int32_t wide_light = device.num_ctas() - BuildWorkPlan(wide.plan, shape, device, PathChoice::kAuto).light_cta_begin;
  EXPECT_GT(wide_light, 0);
  EXPECT_LT(wide_light, device.num_ctas() / 2);
  const testing::TreePlan long_suffix =
      testing::BuildTreePlan(testing::UniformTree({1, 1024}, {2048, 512}), {}, rng);
  EXPECT_EQ(BuildWorkPlan(long_suffix.plan, shape, device, PathChoice::kAuto).light_cta_begin, device.num_ctas());
  // 1,024 leaves over 16,384 shared tokens at head dim 64: the heavy side
  // dominates and gets nearly every CTA, in four 4,096-token items per row
  // block (H100, session 36: 18 light CTAs and 4 chunks 410 us, unsplit 431).
  const testing::TreePlan big = testing::BuildTreePlan(testing::UniformTree({1, 1024}, {16384, 64}), {}, rng);
  const WorkPlan big_split = BuildWorkPlan(big.plan, {32, 8, 64, 2, kTileRows, 0, true, -1}, device, PathChoice::kAuto);
  EXPECT_GT(big_split.light_cta_begin, device.num_ctas() * 3 / 4);
  EXPECT_LT(big_split.light_cta_begin, device.num_ctas());
  EXPECT_EQ(big_split.most_chunks(), 4);
}

// WorkShape::light_chunks (benchmarks: the split's two choices timed apart)
// cuts the shared prefix into the asked chunk count, whole KV tiles each;
// without light CTAs it changes nothing; a planner that refreshes sees the
// change and rebuilds.
TEST(WorkPlanLightTest, ForcedChunksCutTheSharedPrefix) {
  const DeviceModel device;
  Rng rng(3);
  const testing::TreePlan tree = testing::BuildTreePlan(testing::UniformTree({1, 256}, {2048, 64}), {}, rng);

  WorkShape shape{32, 8, 64, 2};
  shape.light_ctas = 46;
  for (const auto& [asked, tiles] : {std::pair{2, 16}, std::pair{3, 11}, std::pair{4, 8}, std::pair{6, 6}}) {
    shape.light_chunks = asked;
    const WorkPlan w = BuildWorkPlan(tree.plan, shape, device, PathChoice::kAuto);
    EXPECT_EQ(device.num_ctas() - w.light_cta_begin, 46);
    EXPECT_EQ(w.most_chunks(), asked);
    int32_t longest = 0;
    for (const WorkItem& it : w.items) longest = std::max(longest, it.kv_end - it.kv_begin);
    EXPECT_EQ(longest, tiles * kKvTile) << asked << " chunks";
  }
  shape.light_ctas = 0;
  shape.light_chunks = 0;
  const WorkPlan plain = BuildWorkPlan(tree.plan, shape, device, PathChoice::kAuto);
  shape.light_chunks = 4;
  const WorkPlan forced_plain = BuildWorkPlan(tree.plan, shape, device, PathChoice::kAuto);
  EXPECT_EQ(forced_plain.entry_num_chunks, plain.entry_num_chunks);
  EXPECT_EQ(forced_plain.items.size(), plain.items.size());
  WorkPlanner planner;
  shape.light_ctas = 46;
  shape.light_chunks = 2;
  EXPECT_EQ(planner.Plan(tree.plan, shape, device, PathChoice::kAuto).most_chunks(), 2);
  shape.light_chunks = 4;
  EXPECT_EQ(planner.Plan(tree.plan, shape, device, PathChoice::kAuto).most_chunks(), 4);
}

TEST(WorkPlanCostTest, BatchingWinsWhenManyRowsShareKv) {
  const WorkShape shape{32, 8, 128, 2};
  const DeviceModel device;
  testing::PlanOptions opt;
  Rng rng(1);
  const testing::TreePlan tree = testing::BuildTreePlan(testing::UniformTree({1, 256}, {16384, 64}), opt, rng);
  const WorkPlan wp = BuildWorkPlan(tree.plan, shape, device, PathChoice::kAuto);
  EXPECT_EQ(wp.batched_segments, 257);
  const WorkPlan flat = BuildWorkPlan(tree.plan, shape, device, PathChoice::kFlattened);
  EXPECT_LT(wp.estimated_us * 10, flat.estimated_us);
  // fp32 KV has no tensor-core path.
  const WorkPlan f32 = BuildWorkPlan(tree.plan, {32, 8, 128, 4}, device, PathChoice::kAuto);
  EXPECT_EQ(f32.batched_segments, 0);
}

}  // namespace
}  // namespace banyan::attention

#include "attention/work_plan_cluster.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

namespace banyan::attention {
namespace {

// What an item costs its CTA besides its KV tiles (start, q rows, partial
// store), in tiles: the placement's unit of cost.
constexpr double kItemOverheadTiles = 1.0;

int32_t CeilDiv(int64_t a, int64_t b) { return static_cast<int32_t>((a + b - 1) / b); }

// One row block of one segment's run of entries (all of one query range):
// packed rows [row_begin, row_begin + row_count), the largest kv limit of its
// entries.
struct Block {
  int32_t segment;
  int32_t row_begin;
  int32_t row_count;
  int32_t limit;
};

// The row blocks of the queries [q0, q1): per segment, each maximal run of
// consecutive entries whose rows are in the range, cut into blocks of whole
// entries of at most tile_rows packed rows.
void RangeBlocks(const AttentionPlan& plan, int32_t group, int32_t tile_rows, int32_t q0, int32_t q1,
                 std::vector<Block>* blocks) {
  blocks->clear();
  const int32_t entries_per_block = std::max(1, tile_rows / group);
  for (int32_t s = 0; s < plan.num_segments(); ++s) {
    const int32_t first = plan.segment_entry_indptr[s], last = plan.segment_entry_indptr[s + 1];
    for (int32_t e = first; e < last;) {
      if (plan.entry_query[e] < q0 || plan.entry_query[e] >= q1) {
        ++e;
        continue;
      }
      int32_t run_end = e;
      while (run_end < last && plan.entry_query[run_end] >= q0 && plan.entry_query[run_end] < q1) ++run_end;
      for (int32_t b = e; b < run_end; b += entries_per_block) {
        const int32_t b_end = std::min(run_end, b + entries_per_block);
        int32_t limit = 0;
        for (int32_t i = b; i < b_end; ++i) limit = std::max(limit, plan.entry_kv_limit[i]);
        blocks->push_back(Block{s, (b - first) * group, (b_end - b) * group, limit});
      }
      e = run_end;
    }
  }
}

}  // namespace

bool ClusterPlacementFits(const WorkShape& shape) {
  return shape.kv_dtype_bytes == 2 && shape.num_kv_heads > 0 && shape.num_q_heads % shape.num_kv_heads == 0 &&
         shape.group() <= shape.tile_rows;
}

WorkPlan BuildClusterWorkPlan(const AttentionPlan& plan, const WorkShape& shape, const ClusterGrid& grid) {
  const int32_t group = shape.group();
  const int32_t size = grid.cluster_size;
  const int32_t clusters = grid.num_clusters;
  const int32_t ctas = clusters * size;
  const int32_t kv_heads = shape.num_kv_heads;
  // KV heads per cluster, then the query ranges every KV head range is cut into.
  const int32_t kv_per_cluster = CeilDiv(kv_heads, clusters);
  const int32_t head_ranges = CeilDiv(kv_heads, kv_per_cluster);
  const int32_t most_parts = std::max(1, std::min(clusters / head_ranges, plan.num_queries));
  int32_t parts = 0;
  if (grid.query_parts > 0) {
    parts = std::min(grid.query_parts, most_parts);
  } else {
    const int32_t min_queries = CeilDiv(kClusterMinRows, group);
    parts = std::max(1, std::min(most_parts, plan.num_queries / min_queries));
  }

  WorkPlan out;
  out.entry_partial_base.assign(plan.num_entries(), 0);
  out.entry_num_chunks.assign(plan.num_entries(), 0);
  out.entry_segment.assign(plan.num_entries(), 0);
  for (int32_t s = 0; s < plan.num_segments(); ++s) {
    for (int32_t e = plan.segment_entry_indptr[s]; e < plan.segment_entry_indptr[s + 1]; ++e) out.entry_segment[e] = s;
  }
  out.cluster_rows.assign(static_cast<size_t>(clusters) * kClusterRowsStride, 0);
  out.batched_segments = plan.num_segments();

  // Per query range: its blocks and each block's chunk length (in KV tiles),
  // the same for every KV head range (an entry's slots serve all its heads).
  std::vector<std::vector<Block>> part_blocks(parts);
  std::vector<std::vector<int32_t>> part_chunk_tiles(parts);
  for (int32_t k = 0; k < parts; ++k) {
    const int32_t q0 = static_cast<int32_t>(int64_t{plan.num_queries} * k / parts);
    const int32_t q1 = static_cast<int32_t>(int64_t{plan.num_queries} * (k + 1) / parts);
    RangeBlocks(plan, group, shape.tile_rows, q0, q1, &part_blocks[k]);
    int64_t tiles = 0;
    for (const Block& b : part_blocks[k]) tiles += CeilDiv(b.limit, kKvTile);
    // About one item per CTA for the cluster's longest blocks, the short ones whole.
    const double target = std::max(1.0, static_cast<double>(tiles) * kv_per_cluster / size);
    for (const Block& b : part_blocks[k]) {
      const int32_t block_tiles = CeilDiv(b.limit, kKvTile);
      const int32_t wanted = std::clamp(static_cast<int32_t>(std::ceil(block_tiles / target)), 1, block_tiles);
      const int32_t chunk_tiles = CeilDiv(block_tiles, wanted);
      part_chunk_tiles[k].push_back(chunk_tiles);
      const int32_t chunks = CeilDiv(block_tiles, chunk_tiles);
      const int32_t seg_first = plan.segment_entry_indptr[b.segment];
      for (int32_t r = b.row_begin; r < b.row_begin + b.row_count; r += group) {
        out.entry_num_chunks[seg_first + r / group] = chunks;
      }
    }
    for (int32_t g = 0; g < head_ranges; ++g) {
      int32_t* rows = out.cluster_rows.data() + static_cast<size_t>(g * parts + k) * kClusterRowsStride;
      rows[0] = q0;
      rows[1] = q1;
      rows[2] = g * kv_per_cluster;
      rows[3] = std::min(kv_heads, (g + 1) * kv_per_cluster);
    }
  }
  AssignPartialSlots(plan, &out);

  // Items, cluster by cluster (cluster g * parts + k: KV head range g, query
  // range k), longest first onto the least loaded CTA of the cluster.
  std::vector<std::vector<WorkItem>> cta_items(ctas);
  std::vector<WorkItem> items;
  std::vector<double> cost;
  std::vector<int32_t> order;
  std::vector<double> load(size);
  for (int32_t g = 0; g < head_ranges; ++g) {
    for (int32_t k = 0; k < parts; ++k) {
      const int32_t cluster = g * parts + k;
      items.clear();
      cost.clear();
      for (int32_t h = g * kv_per_cluster; h < std::min(kv_heads, (g + 1) * kv_per_cluster); ++h) {
        for (size_t i = 0; i < part_blocks[k].size(); ++i) {
          const Block& b = part_blocks[k][i];
          const int32_t len = part_chunk_tiles[k][i] * kKvTile;
          for (int32_t c = 0; c * len < b.limit; ++c) {
            const int32_t begin = c * len, end = std::min(b.limit, begin + len);
            items.push_back(WorkItem{b.segment, b.row_begin, b.row_count, h, begin, end, c,
                                     static_cast<int32_t>(ItemKind::kBatched), plan.segment_page_indptr[b.segment],
                                     plan.segment_first_slot[b.segment], plan.segment_entry_indptr[b.segment], 0});
            cost.push_back(CeilDiv(end - begin, kKvTile) + kItemOverheadTiles);
          }
        }
      }
      order.resize(items.size());
      std::iota(order.begin(), order.end(), 0);
      std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return cost[a] > cost[b]; });
      std::fill(load.begin(), load.end(), 0.0);
      for (int32_t i : order) {
        const int32_t rank = static_cast<int32_t>(std::min_element(load.begin(), load.end()) - load.begin());
        load[rank] += cost[i];
        cta_items[static_cast<size_t>(cluster) * size + rank].push_back(items[i]);
      }
    }
  }
  out.cta_item_indptr.assign(1, 0);
  for (const std::vector<WorkItem>& list : cta_items) {
    out.items.insert(out.items.end(), list.begin(), list.end());
    out.cta_item_indptr.push_back(static_cast<int32_t>(out.items.size()));
  }
  WorkPlanner::FillItemEntries(plan, group, &out);
  WorkPlanner::FillCtaHeads(plan, group, ctas, &out);
  out.query_items.assign(plan.num_queries, 0);  // no fused merge: the clusters merge
  out.fused_merge = false;
  return out;
}

}  // namespace banyan::attention

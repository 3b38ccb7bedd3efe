#include "attention/work_plan.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <queue>
#include <utility>

namespace banyan::attention {
namespace {

int32_t CeilDiv(int64_t a, int64_t b) { return static_cast<int32_t>((a + b - 1) / b); }

// Rows of one segment's items: batched tiles or per-entry head groups.
struct RowBlock {
  int32_t row_begin;
  int32_t row_count;
};

enum class Mode { kShared, kPerEntry, kSimt };

ItemKind KindOf(Mode mode) { return mode == Mode::kSimt ? ItemKind::kFlattened : ItemKind::kBatched; }

std::vector<RowBlock> RowBlocks(Mode mode, int32_t entries, int32_t group, int32_t tile_rows) {
  std::vector<RowBlock> blocks;
  if (mode == Mode::kPerEntry) {
    for (int32_t e = 0; e < entries; ++e) {
      for (int32_t h = 0; h < group; h += tile_rows) blocks.push_back({e * group + h, std::min(tile_rows, group - h)});
    }
  } else if (mode == Mode::kShared) {
    const int32_t rows = entries * group;
    for (int32_t r = 0; r < rows; r += tile_rows) blocks.push_back({r, std::min(tile_rows, rows - r)});
  } else {
    for (int32_t e = 0; e < entries; ++e) {
      for (int32_t h = 0; h < group; h += kFlatRows) blocks.push_back({e * group + h, std::min(kFlatRows, group - h)});
    }
  }
  return blocks;
}

}  // namespace

double ItemCostUs(ItemKind kind, int32_t rows, int32_t tokens, const WorkShape& shape, const DeviceModel& device) {
  const double ctas = device.num_ctas();
  const double kv_bytes = 2.0 * tokens * shape.head_dim * shape.kv_dtype_bytes;
  const double out_bytes = 4.0 * rows * (shape.head_dim + 1);
  const double bytes_us = (kv_bytes + out_bytes) / (device.hbm_bytes_per_us / ctas);
  double flops_us;
  if (kind == ItemKind::kBatched) {
    const double padded_rows = 16.0 * CeilDiv(rows, 16);
    flops_us = 4.0 * padded_rows * tokens * shape.head_dim / (device.mma_flops_per_us / ctas);
  } else {
    flops_us = 4.0 * rows * tokens * shape.head_dim / (device.simt_flops_per_us / ctas);
  }
  return std::max(bytes_us, flops_us) + device.item_overhead_us;
}

WorkPlan BuildWorkPlan(const AttentionPlan& plan, const WorkShape& shape, const DeviceModel& device,
                       PathChoice choice) {
  WorkPlan out;
  const int32_t group = shape.group();
  const int32_t segments = plan.num_segments();
  const bool tensor_cores = shape.kv_dtype_bytes == 2 && choice != PathChoice::kFlattened;
  // The per-sequence alternative: tensor-core tiles per entry, or SIMT items.
  const Mode alone = tensor_cores ? Mode::kPerEntry : Mode::kSimt;
  // 1. Mode per segment, and the whole-segment cost of that mode.
  std::vector<Mode> mode(segments);
  std::vector<double> per_token_cost(segments);  // all of the segment's row blocks, per token
  double total = 0.0;
  for (int32_t s = 0; s < segments; ++s) {
    const int32_t entries = plan.segment_entry_indptr[s + 1] - plan.segment_entry_indptr[s];
    const int32_t length = plan.segment_length[s];
    auto cost = [&](Mode m) {
      double c = 0.0;
      for (const RowBlock& b : RowBlocks(m, entries, group, shape.tile_rows)) c += ItemCostUs(KindOf(m), b.row_count, length, shape, device);
      return c * shape.num_kv_heads;
    };
    const double flat = cost(alone);
    const double batched = tensor_cores ? cost(Mode::kShared) : flat + 1.0;
    const bool shared = tensor_cores && (choice == PathChoice::kBatched || (choice == PathChoice::kAuto && batched <= flat));
    mode[s] = shared ? Mode::kShared : alone;
    const double chosen = shared ? batched : flat;
    per_token_cost[s] = chosen / length;
    total += chosen;
    (shared ? out.batched_segments : out.flattened_segments)++;
  }
  // 2. Chunks: every item costs about total / (2 x CTAs), chunks of whole KV tiles.
  const int32_t ctas = device.num_ctas();
  const double target = std::max(total / (2.0 * ctas), 1e-9);
  std::vector<int32_t> chunk_len(segments), chunks(segments);
  out.entry_partial_base.resize(plan.num_entries());
  out.entry_num_chunks.resize(plan.num_entries());
  out.entry_segment.resize(plan.num_entries());
  struct Pending {
    double cost;
    WorkItem item;
  };
  std::vector<Pending> pending;
  for (int32_t s = 0; s < segments; ++s) {
    const int32_t entry_begin = plan.segment_entry_indptr[s];
    const int32_t entries = plan.segment_entry_indptr[s + 1] - entry_begin;
    const int32_t length = plan.segment_length[s];
    const std::vector<RowBlock> blocks = RowBlocks(mode[s], entries, group, shape.tile_rows);
    const double block_cost = per_token_cost[s] * length / (blocks.size() * shape.num_kv_heads);
    const int32_t wanted = std::max(1, static_cast<int32_t>(std::ceil(block_cost / target)));
    const int32_t min_chunk = std::max(kKvTile, CeilDiv(device.min_chunk, kKvTile) * kKvTile);
    const int32_t len = std::max(min_chunk, CeilDiv(CeilDiv(length, wanted), kKvTile) * kKvTile);
    chunk_len[s] = len;
    chunks[s] = CeilDiv(length, len);
    for (int32_t e = entry_begin; e < entry_begin + entries; ++e) {
      out.entry_num_chunks[e] = chunks[s];
      out.entry_segment[e] = s;
    }
    // Per row block: the largest kv limit of its rows (no row sees past it).
    std::vector<int32_t> block_limit(blocks.size(), 0);
    for (size_t b = 0; b < blocks.size(); ++b) {
      const int32_t e_last = entry_begin + (blocks[b].row_begin + blocks[b].row_count - 1) / group;
      for (int32_t e = entry_begin + blocks[b].row_begin / group; e <= e_last; ++e) {
        block_limit[b] = std::max(block_limit[b], plan.entry_kv_limit[e]);
      }
    }
    for (int32_t c = 0; c < chunks[s]; ++c) {
      const int32_t begin = c * len;
      const int32_t end = std::min(length, begin + len);
      for (int32_t h = 0; h < shape.num_kv_heads; ++h) {
        for (size_t b = 0; b < blocks.size(); ++b) {
          const int32_t seen_end = std::max(begin, std::min(end, block_limit[b]));
          WorkItem item{s,     blocks[b].row_begin, blocks[b].row_count,
                        h,     begin,               seen_end,
                        c,     static_cast<int32_t>(KindOf(mode[s])),
                        plan.segment_page_indptr[s], plan.segment_first_slot[s],
                        entry_begin, 0};
          pending.push_back({ItemCostUs(KindOf(mode[s]), blocks[b].row_count, seen_end - begin, shape, device), item});
        }
      }
    }
  }
  // Partial slots row by row (the merge reads one contiguous range per row).
  out.row_slot_indptr.assign(static_cast<size_t>(plan.num_queries) + 1, 0);
  for (int32_t q = 0; q < plan.num_queries; ++q) {
    for (int32_t i = plan.query_entry_indptr[q]; i < plan.query_entry_indptr[q + 1]; ++i) {
      const int32_t e = plan.query_entries[i];
      out.entry_partial_base[e] = out.num_partials;
      out.num_partials += out.entry_num_chunks[e];
    }
    out.row_slot_indptr[q + 1] = out.num_partials;
  }
  // 3. Longest processing time first onto the least loaded CTA. Ties keep the
  //    emission order, so equal tiles of one KV chunk run side by side (L2 reuse).
  std::stable_sort(pending.begin(), pending.end(), [](const Pending& a, const Pending& b) { return a.cost > b.cost; });
  using Load = std::pair<double, int32_t>;
  std::priority_queue<Load, std::vector<Load>, std::greater<Load>> heap;
  for (int32_t c = 0; c < ctas; ++c) heap.push({0.0, c});
  std::vector<std::vector<WorkItem>> per_cta(ctas);
  for (const Pending& p : pending) {
    Load least = heap.top();
    heap.pop();
    per_cta[least.second].push_back(p.item);
    least.first += p.cost;
    out.estimated_us = std::max(out.estimated_us, least.first);
    heap.push(least);
  }
  out.cta_item_indptr.assign(1, 0);
  out.cta_first_item.assign(ctas, WorkItem{});
  for (int32_t c = 0; c < ctas; ++c) {
    const std::vector<WorkItem>& list = per_cta[c];
    if (!list.empty()) out.cta_first_item[c] = list.front();
    out.items.insert(out.items.end(), list.begin(), list.end());
    out.cta_item_indptr.push_back(static_cast<int32_t>(out.items.size()));
  }
  // 4. Completion counts for the fused merge: one per (item, entry touched).
  out.query_items.assign(plan.num_queries, 0);
  for (const WorkItem& it : out.items) {
    const int32_t e0 = it.entry_begin;
    for (int32_t e = e0 + it.row_begin / group; e <= e0 + (it.row_begin + it.row_count - 1) / group; ++e) {
      ++out.query_items[plan.entry_query[e]];
    }
  }
  out.fused_merge = std::all_of(out.query_items.begin(), out.query_items.end(), [](int32_t n) { return n > 0; });
  return out;
}

}  // namespace banyan::attention

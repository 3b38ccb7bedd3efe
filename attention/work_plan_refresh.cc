// WorkPlanner::Plan: a fresh build (work_plan.cc) or, for a plan with the
// previous plan's topology, a refresh of the previous work plan (work_plan.h).
#include <algorithm>
#include <cstdint>
#include <vector>

#include "attention/work_plan.h"

namespace banyan::attention {
namespace {

// Every field of WorkShape and DeviceModel is compared below (the CUDA code
// that includes work_plan.h is C++17: no defaulted operator==); a field added
// to either struct changes its size and stops the build here until it is.
static_assert(sizeof(WorkShape) == 40, "compare the new WorkShape field in SameShape");
static_assert(sizeof(DeviceModel) == 168, "compare the new DeviceModel field in SameDevice");

bool SameShape(const WorkShape& a, const WorkShape& b) {
  return a.num_q_heads == b.num_q_heads && a.num_kv_heads == b.num_kv_heads && a.head_dim == b.head_dim &&
         a.kv_dtype_bytes == b.kv_dtype_bytes && a.tile_rows == b.tile_rows && a.group_small == b.group_small &&
         a.spread_light == b.spread_light && a.light_ctas == b.light_ctas && a.stream_k == b.stream_k &&
         a.light_chunks == b.light_chunks;
}

bool SameDevice(const DeviceModel& a, const DeviceModel& b) {
  return a.num_sms == b.num_sms && a.ctas_per_sm == b.ctas_per_sm && a.hbm_bytes_per_us == b.hbm_bytes_per_us &&
         a.mma_flops_per_us == b.mma_flops_per_us && a.simt_flops_per_us == b.simt_flops_per_us &&
         a.item_overhead_us == b.item_overhead_us && a.min_chunk == b.min_chunk &&
         a.tma_tile_us == b.tma_tile_us && a.tma_light_item_us == b.tma_light_item_us &&
         a.tma_start_us == b.tma_start_us && a.tma_item_gap_us == b.tma_item_gap_us &&
         a.light_warp_bytes_per_us == b.light_warp_bytes_per_us &&
         a.light_item_us == b.light_item_us && a.light_tile_us == b.light_tile_us &&
         a.light_min_gain == b.light_min_gain && a.max_dominant_chunk == b.max_dominant_chunk &&
         a.max_dominant_chunk_d128 == b.max_dominant_chunk_d128 && a.tma_tile_d128_us == b.tma_tile_d128_us &&
         a.tma_item_gap_d128_us == b.tma_item_gap_d128_us &&
         a.tma_light_item_d128_us == b.tma_light_item_d128_us &&
         a.light_warp_d128_bytes_per_us == b.light_warp_d128_bytes_per_us &&
         a.light_item_d128_us == b.light_item_d128_us && a.light_hbm_bytes_per_us == b.light_hbm_bytes_per_us;
}

}  // namespace

const WorkPlan& WorkPlanner::Plan(const AttentionPlan& plan, const WorkShape& shape, const DeviceModel& device,
                                  PathChoice choice) {
  last_refreshed_ = refresh_ && have_plan_ && refreshes_ < kMaxRefreshes && CanRefresh(plan, shape, device, choice);
  if (last_refreshed_) {
    Refresh(plan, shape);
    ++refreshes_;
    return plan_;
  }
  Build(plan, shape, device, choice);
  Remember(plan, shape, device, choice);
  return plan_;
}

const WorkPlan& WorkPlanner::plan() const { return plan_; }

void WorkPlanner::Clear() {
  plan_ = WorkPlan{};
  have_plan_ = false;
  last_refreshed_ = false;
}

void WorkPlanner::Remember(const AttentionPlan& plan, const WorkShape& shape, const DeviceModel& device,
                           PathChoice choice) {
  refreshes_ = 0;
  // A grouped item must stay within one KV tile, which a longer segment can break.
  // A stream-K piece's token range is its own, not a chunk length's multiple.
  have_plan_ = plan_.placement == Placement::kChunks &&
               std::none_of(plan_.items.begin(), plan_.items.end(), [](const WorkItem& it) { return it.group != 0; });
  shape_ = shape;
  device_ = device;
  choice_ = choice;
  num_queries_ = plan.num_queries;
  segment_entry_indptr_ = plan.segment_entry_indptr;
  entry_query_ = plan.entry_query;
  query_entry_indptr_ = plan.query_entry_indptr;
  query_entries_ = plan.query_entries;
  // Each item's first and last entry (fixed while the topology is: Refresh reads them instead of dividing).
  const int32_t group = shape.group();
  item_entries_.resize(2 * plan_.items.size());
  for (size_t i = 0; i < plan_.items.size(); ++i) {
    const WorkItem& it = plan_.items[i];
    item_entries_[2 * i] = ItemFirstEntry(it, group);
    item_entries_[2 * i + 1] = ItemLastEntry(it, group);
  }
}

bool WorkPlanner::CanRefresh(const AttentionPlan& plan, const WorkShape& shape, const DeviceModel& device,
                             PathChoice choice) const {
  if (choice != choice_ || !SameShape(shape, shape_) || !SameDevice(device, device_)) return false;
  if (plan.num_queries != num_queries_ || plan.segment_entry_indptr != segment_entry_indptr_ ||
      plan.entry_query != entry_query_ || plan.query_entry_indptr != query_entry_indptr_ ||
      plan.query_entries != query_entries_) {
    return false;
  }
  // Every segment must still need exactly its chunks: their starts and slots stay.
  for (int32_t s = 0; s < plan.num_segments(); ++s) {
    const int32_t length = plan.segment_length[s];
    if ((length + chunk_len_[s] - 1) / chunk_len_[s] != chunks_[s]) return false;
  }
  return true;
}

void WorkPlanner::Refresh(const AttentionPlan& plan, const WorkShape& shape) {
  const int32_t group = shape.group();
  for (size_t i = 0; i < plan_.items.size(); ++i) {
    WorkItem& it = plan_.items[i];
    const int32_t s = it.segment;
    // As BuildWorkPlan: the chunk's end, clamped to the largest kv limit of the item's rows.
    const int32_t end = std::min(plan.segment_length[s], it.kv_begin + chunk_len_[s]);
    const int32_t e_first = item_entries_[2 * i], e_last = item_entries_[2 * i + 1];
    int32_t limit = 0;
    for (int32_t e = e_first; e <= e_last; ++e) limit = std::max(limit, plan.entry_kv_limit[e]);
    it.kv_end = std::max(it.kv_begin, std::min(end, limit));
    it.page_begin = plan.segment_page_indptr[s];
    it.first_slot = plan.segment_first_slot[s];
    // Of the item's FillItemEntries words only the first entry's limit can
    // change: same entries, rows and partial slots (the topology is the same).
    plan_.item_entry[4 * i + 1] = plan.entry_kv_limit[e_first];
  }
  FillCtaHeads(plan, group, device_.num_ctas(), &plan_);
}

}  // namespace banyan::attention

#include "attention/next_decode_plan.h"

#include <cstdint>
#include <vector>

namespace banyan::attention {

bool PredictNextDecodePlan(const AttentionPlan& plan, AttentionPlan* next) {
  if (plan.num_queries <= 0) return false;
  // The segment of each entry that is its segment's only one (-1 otherwise):
  // a leaf is read by its own row alone.
  std::vector<int32_t> only_entry_segment(static_cast<size_t>(plan.num_entries()), -1);
  for (int32_t s = 0; s < plan.num_segments(); ++s) {
    if (plan.segment_entry_indptr[s + 1] - plan.segment_entry_indptr[s] == 1) {
      only_entry_segment[plan.segment_entry_indptr[s]] = s;
    }
  }
  *next = plan;
  for (int32_t q = 0; q < plan.num_queries; ++q) {
    const int32_t e = plan.query_entries[plan.query_entry_indptr[q + 1] - 1];  // the row's last (deepest) entry
    const int32_t s = only_entry_segment[e];
    if (s < 0 || plan.entry_kv_limit[e] != plan.segment_length[s]) return false;
    if ((plan.segment_first_slot[s] + plan.segment_length[s]) % plan.page_size == 0) return false;  // a new page
    ++next->segment_length[s];
    ++next->entry_kv_limit[e];
  }
  return true;
}

bool SamePlan(const AttentionPlan& a, const AttentionPlan& b) {
  return a.num_queries == b.num_queries && a.page_size == b.page_size &&
         a.segment_page_indptr == b.segment_page_indptr && a.page_indices == b.page_indices &&
         a.segment_first_slot == b.segment_first_slot && a.segment_length == b.segment_length &&
         a.segment_entry_indptr == b.segment_entry_indptr && a.entry_query == b.entry_query &&
         a.entry_kv_limit == b.entry_kv_limit && a.query_entry_indptr == b.query_entry_indptr &&
         a.query_entries == b.query_entries;
}

}  // namespace banyan::attention

#include "attention/next_decode_plan.h"

#include <cstdint>

namespace banyan::attention {

bool PredictNextDecodePlan(const AttentionPlan& plan, AttentionPlan* next) {
  if (plan.num_queries <= 0) return false;
  *next = plan;
  // Every row's last (deepest) entry must be a leaf: a segment read by that
  // entry alone, up to its end. Each such segment grows by the row's next token.
  int32_t grown = 0;
  for (int32_t s = 0; s < plan.num_segments(); ++s) {
    const int32_t e = plan.segment_entry_indptr[s];
    if (plan.segment_entry_indptr[s + 1] - e != 1) continue;
    const int32_t q = plan.entry_query[e];
    if (plan.query_entries[plan.query_entry_indptr[q + 1] - 1] != e) continue;  // not the row's last entry
    if (plan.entry_kv_limit[e] != plan.segment_length[s]) return false;
    if ((plan.segment_first_slot[s] + plan.segment_length[s]) % plan.page_size == 0) return false;  // a new page
    ++next->segment_length[s];
    ++next->entry_kv_limit[e];
    ++grown;
  }
  return grown == plan.num_queries;  // else some row's last entry is shared: not a decode leaf
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

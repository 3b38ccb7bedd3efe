#include "attention/shard_plan.h"

#include <algorithm>
#include <string>

#include "absl/strings/str_cat.h"

namespace banyan::attention {

absl::StatusOr<std::vector<PlanShard>> ShardPlan(const AttentionPlan& plan, int32_t shards) {
  if (shards < 1) return absl::InvalidArgumentError(absl::StrCat("shard plan: shards = ", shards, " < 1"));
  if (const std::string error = plan.Validate(); !error.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("shard plan: invalid plan: ", error));
  }
  const int32_t ps = plan.page_size;
  std::vector<PlanShard> out(shards);
  for (int32_t i = 0; i < shards; ++i) {
    PlanShard& shard = out[i];
    AttentionPlan& p = shard.plan;
    p.Clear();
    p.num_queries = plan.num_queries;
    p.page_size = ps;
    for (int32_t s = 0; s < plan.num_segments(); ++s) {
      const int32_t page_begin = plan.segment_page_indptr[s];
      const int32_t pages = plan.segment_page_indptr[s + 1] - page_begin;
      const int32_t first = static_cast<int32_t>(int64_t{i} * pages / shards);
      const int32_t last = static_cast<int32_t>(int64_t{i + 1} * pages / shards);
      if (first == last) continue;
      // The segment's tokens on pages [first, last): [token_begin, token_end).
      const int32_t slot0 = plan.segment_first_slot[s];
      const int32_t token_begin = first == 0 ? 0 : first * ps - slot0;
      const int32_t token_end = std::min(plan.segment_length[s], last * ps - slot0);
      const int32_t entries_before = p.num_entries();
      for (int32_t e = plan.segment_entry_indptr[s]; e < plan.segment_entry_indptr[s + 1]; ++e) {
        const int32_t seen = std::min(plan.entry_kv_limit[e], token_end) - token_begin;
        if (seen <= 0) continue;
        p.entry_query.push_back(plan.entry_query[e]);
        p.entry_kv_limit.push_back(seen);
      }
      if (p.num_entries() == entries_before) continue;  // no row sees these tokens
      for (int32_t j = first; j < last; ++j) {
        p.page_indices.push_back(static_cast<int32_t>(shard.source_pages.size()));
        shard.source_pages.push_back(plan.page_indices[page_begin + j]);
      }
      p.segment_page_indptr.push_back(static_cast<int32_t>(p.page_indices.size()));
      p.segment_first_slot.push_back(first == 0 ? slot0 : 0);
      p.segment_length.push_back(token_end - token_begin);
      p.segment_entry_indptr.push_back(p.num_entries());
    }
    FillQueryEntries(p);
    for (int32_t q = 0; q < p.num_queries; ++q) {
      if (p.query_entry_indptr[q + 1] == p.query_entry_indptr[q]) {
        return absl::InvalidArgumentError(absl::StrCat("shard plan: query row ", q, " sees no KV on shard ", i, " of ",
                                                       shards, " (fewer than ", shards,
                                                       " pages in each of its segments)"));
      }
    }
  }
  return out;
}

}  // namespace banyan::attention

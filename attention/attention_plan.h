// AttentionPlan: the flat arrays one attention step runs on. attention/ owns
// and documents this struct; kv_tree's plan builder fills it from the tree, and
// attention knows nothing about trees: only segments of KV and the query rows
// that read them.
//
// Terms
//   query row   one query token (all of its query heads). In decode, one per
//               active leaf; in prefill, one per new token. Rows index the
//               query tensor q[num_queries][num_q_heads][head_dim].
//   segment     a run of KV tokens stored in pages: usually one tree node. Its
//               token t (0 <= t < length) lives in page
//               page_indices[page_begin + (first_slot + t) / page_size] at
//               slot (first_slot + t) % page_size (see kv_layout.h).
//   entry       one (segment, query row) pair: that row attends that segment.
//               Entries are numbered by their position in `entry_query`, and
//               each entry produces one partial state (o, lse) per query head.
//
// Every query row's attention is the log-sum-exp merge of its entries'
// partials (hydragen eq. 5); `query_entries` lists them per row.
//
// Masks: entry e lets its row see tokens [0, entry_kv_limit[e]) of its
// segment. Decode and ancestors use limit == length; prefill of a node's own
// new tokens uses the causal limit (position of the row inside the node + 1).
// An entry with limit 0 is not allowed (the builder drops such entries).
//
// Invariants (checked by Validate()):
//   * segment_page_indptr, segment_entry_indptr have num_segments + 1 entries,
//     start at 0 and never decrease; their last values equal page_indices.size()
//     and entry_query.size().
//   * 0 <= first_slot < page_size, length >= 1 and first_slot + length fits in
//     the segment's pages (with no page left over).
//   * 0 <= entry_query[e] < num_queries; 1 <= entry_kv_limit[e] <= length.
//   * query_entry_indptr has num_queries + 1 entries; query_entries lists every
//     entry exactly once, under the row entry_query[e]; every row has >= 1 entry.
// Thread-compatible value type.
#ifndef BANYAN_ATTENTION_ATTENTION_PLAN_H_
#define BANYAN_ATTENTION_ATTENTION_PLAN_H_

#include <cstdint>
#include <string>
#include <vector>

namespace banyan::attention {

struct AttentionPlan {
  int32_t num_queries = 0;
  int32_t page_size = 16;

  // Per segment (size num_segments unless said otherwise).
  std::vector<int32_t> segment_page_indptr{0};  // num_segments + 1
  std::vector<int32_t> page_indices;            // page ids, segment after segment
  std::vector<int32_t> segment_first_slot;      // slot of token 0 in its first page
  std::vector<int32_t> segment_length;          // tokens in the segment
  std::vector<int32_t> segment_entry_indptr{0};  // num_segments + 1

  // Per entry (size num_entries).
  std::vector<int32_t> entry_query;     // the query row of each entry
  std::vector<int32_t> entry_kv_limit;  // tokens of the segment this row may see

  // Per query row: its entries, for the merge.
  std::vector<int32_t> query_entry_indptr{0};  // num_queries + 1
  std::vector<int32_t> query_entries;          // entry ids

  int32_t num_segments() const { return static_cast<int32_t>(segment_length.size()); }
  int32_t num_entries() const { return static_cast<int32_t>(entry_query.size()); }

  // Empties the plan, keeping capacity (the builder reuses one plan per step).
  void Clear() {
    num_queries = 0;
    segment_page_indptr.assign(1, 0);
    page_indices.clear();
    segment_first_slot.clear();
    segment_length.clear();
    segment_entry_indptr.assign(1, 0);
    entry_query.clear();
    entry_kv_limit.clear();
    query_entry_indptr.assign(1, 0);
    query_entries.clear();
  }

  // Checks every invariant above; returns "" when the plan is valid, else the
  // first violation in words. O(size of the plan).
  std::string Validate() const;
};

// Builds query_entry_indptr / query_entries from entry_query (a counting sort
// by row, entries of a row in increasing entry order). Builders call it after
// filling the per-segment and per-entry arrays. REQUIRES: every entry_query
// value in [0, num_queries).
inline void FillQueryEntries(AttentionPlan& plan) {
  plan.query_entry_indptr.assign(static_cast<size_t>(plan.num_queries) + 1, 0);
  for (int32_t q : plan.entry_query) ++plan.query_entry_indptr[static_cast<size_t>(q) + 1];
  for (int32_t i = 0; i < plan.num_queries; ++i) {
    plan.query_entry_indptr[i + 1] += plan.query_entry_indptr[i];
  }
  plan.query_entries.resize(plan.entry_query.size());
  std::vector<int32_t> cursor(plan.query_entry_indptr.begin(), plan.query_entry_indptr.end() - 1);
  for (int32_t e = 0; e < plan.num_entries(); ++e) {
    plan.query_entries[cursor[plan.entry_query[e]]++] = e;
  }
}

inline std::string AttentionPlan::Validate() const {
  auto fail = [](const std::string& what, int64_t index) {
    return what + " (at " + std::to_string(index) + ")";
  };
  const int64_t segments = num_segments();
  if (page_size <= 0) return fail("page_size must be positive", 0);
  if (num_queries < 0) return fail("negative num_queries", 0);
  if (static_cast<int64_t>(segment_first_slot.size()) != segments ||
      static_cast<int64_t>(segment_page_indptr.size()) != segments + 1 ||
      static_cast<int64_t>(segment_entry_indptr.size()) != segments + 1) {
    return fail("per-segment arrays disagree in size", segments);
  }
  if (entry_kv_limit.size() != entry_query.size()) return fail("entry arrays disagree in size", 0);
  if (segment_page_indptr[0] != 0 || segment_entry_indptr[0] != 0) return fail("indptr must start at 0", 0);
  if (segment_page_indptr[segments] != static_cast<int64_t>(page_indices.size())) {
    return fail("segment_page_indptr does not end at page_indices.size()", segments);
  }
  if (segment_entry_indptr[segments] != num_entries()) {
    return fail("segment_entry_indptr does not end at the number of entries", segments);
  }
  for (int64_t s = 0; s < segments; ++s) {
    const int64_t pages = int64_t{segment_page_indptr[s + 1]} - segment_page_indptr[s];
    if (pages < 0 || segment_entry_indptr[s + 1] < segment_entry_indptr[s]) return fail("indptr decreases", s);
    if (segment_page_indptr[s + 1] > static_cast<int64_t>(page_indices.size()) ||
        segment_entry_indptr[s + 1] > num_entries()) {
      return fail("indptr past the end of its array", s);
    }
    if (segment_first_slot[s] < 0 || segment_first_slot[s] >= page_size) return fail("first_slot out of page", s);
    if (segment_length[s] < 1) return fail("empty segment", s);
    const int64_t needed = (int64_t{segment_first_slot[s]} + segment_length[s] + page_size - 1) / page_size;
    if (pages != needed) return fail("segment page count does not match its length", s);
    for (int32_t e = segment_entry_indptr[s]; e < segment_entry_indptr[s + 1]; ++e) {
      if (entry_kv_limit[e] < 1 || entry_kv_limit[e] > segment_length[s]) return fail("kv limit out of range", e);
    }
  }
  for (int32_t p : page_indices) {
    if (p < 0) return fail("negative page id", p);
  }
  if (static_cast<int64_t>(query_entry_indptr.size()) != int64_t{num_queries} + 1 ||
      query_entry_indptr[0] != 0 || query_entries.size() != entry_query.size()) {
    return fail("query_entry arrays malformed", num_queries);
  }
  std::vector<char> seen(entry_query.size(), 0);
  for (int32_t q = 0; q < num_queries; ++q) {
    if (query_entry_indptr[q + 1] <= query_entry_indptr[q]) return fail("query row without entries", q);
    if (query_entry_indptr[q + 1] > static_cast<int64_t>(query_entries.size())) {
      return fail("query_entry_indptr past the end of query_entries", q);
    }
    for (int32_t i = query_entry_indptr[q]; i < query_entry_indptr[q + 1]; ++i) {
      const int32_t e = query_entries[i];
      if (e < 0 || e >= num_entries()) return fail("entry id out of range", i);
      if (entry_query[e] != q) return fail("entry listed under the wrong query row", e);
      if (seen[e]++) return fail("entry listed twice", e);
    }
  }
  if (query_entry_indptr[num_queries] != num_entries()) return fail("not every entry is listed", num_queries);
  return "";
}

}  // namespace banyan::attention

#endif  // BANYAN_ATTENTION_ATTENTION_PLAN_H_

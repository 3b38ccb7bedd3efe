// KvTree's attention-plan builder: from query rows (a node and how many of its
// tokens the row sees) to the flat arrays of attention/attention_plan.h.
//
// Three passes, O(rows x depth + pages of the segments), no allocation once the
// scratch vectors have grown:
//   1. walk each row's path (root first), number the nodes by first use and
//      count their readers (per-node scratch stamped with an epoch);
//   2. lay out segments (one per node, or one per reader for a flattened node),
//      their pages and entry ranges;
//   3. walk the paths again, writing each row's entry into its node's range.
// Ancestors are always numbered before descendants, so a row's entries come in
// path order, which is also the order of FillQueryEntries' lists.
#include <algorithm>
#include <limits>

#include "absl/strings/str_cat.h"
#include "banyan/status_macros.h"
#include "kv_tree/kv_tree.h"

namespace banyan::kv_tree {

absl::Status KvTree::BuildDecodePlan(absl::Span<const Branch> leaves, const PlanOptions& options,
                                     attention::AttentionPlan* plan,
                                     std::vector<NodeId>* segment_nodes) {
  if (plan == nullptr) return absl::InvalidArgumentError("BuildDecodePlan: null plan");
  if (leaves.size() > static_cast<size_t>(std::numeric_limits<int32_t>::max())) {
    return absl::InvalidArgumentError("BuildDecodePlan: too many rows");
  }
  TreeLock lock(&mu_);
  plan_rows_.clear();
  plan_rows_.reserve(leaves.size());
  for (size_t i = 0; i < leaves.size(); ++i) {
    BANYAN_ASSIGN_OR_RETURN(const uint32_t slot, ResolveBranch(leaves[i]));
    const uint32_t node = branches_[slot].node;
    if (nodes_[node].tokens.empty()) {
      return absl::FailedPreconditionError(
          absl::StrCat("decode row ", i, ": the branch has no tokens to attend"));
    }
    plan_rows_.push_back(PlanRow{node, static_cast<int32_t>(nodes_[node].tokens.size())});
  }
  return BuildPlanLocked(options, plan, segment_nodes);
}

absl::Status KvTree::BuildPrefillPlan(absl::Span<const PrefillRows> rows, const PlanOptions& options,
                                      attention::AttentionPlan* plan,
                                      std::vector<NodeId>* segment_nodes) {
  if (plan == nullptr) return absl::InvalidArgumentError("BuildPrefillPlan: null plan");
  TreeLock lock(&mu_);
  plan_rows_.clear();
  int64_t total = 0;
  for (size_t i = 0; i < rows.size(); ++i) {
    BANYAN_ASSIGN_OR_RETURN(const uint32_t slot, ResolveBranch(rows[i].branch));
    uint32_t node = branches_[slot].node;
    const int64_t end = EndOf(node);
    const int64_t n = rows[i].num_new_tokens;
    if (n < 1 || n > end) {
      return absl::InvalidArgumentError(absl::StrCat("prefill rows ", i, ": ", n,
                                                     " new tokens of a branch of ", end));
    }
    total += n;
    if (total > std::numeric_limits<int32_t>::max()) {
      return absl::InvalidArgumentError("BuildPrefillPlan: too many rows");
    }
    const size_t first = plan_rows_.size();
    for (int64_t a = end - 1; a >= end - n; --a) {
      while (nodes_[node].prefix_length > a) node = nodes_[node].parent;
      plan_rows_.push_back(
          PlanRow{node, static_cast<int32_t>(a - nodes_[node].prefix_length + 1)});
    }
    std::reverse(plan_rows_.begin() + first, plan_rows_.end());
  }
  return BuildPlanLocked(options, plan, segment_nodes);
}

absl::Status KvTree::BuildPlanLocked(const PlanOptions& options, attention::AttentionPlan* plan,
                                     std::vector<NodeId>* segment_nodes) {
  plan->Clear();
  plan->page_size = page_size_;
  plan->num_queries = static_cast<int32_t>(plan_rows_.size());
  if (++plan_epoch_ == 0) {  // wrapped: forget every stale stamp
    for (Node& node : nodes_) node.plan_epoch = 0;
    plan_epoch_ = 1;
  }
  const uint32_t epoch = plan_epoch_;

  // Pass 1: paths (stored root first) and readers per node.
  plan_paths_.clear();
  plan_path_begin_.clear();
  plan_order_.clear();
  for (const PlanRow& row : plan_rows_) {
    const size_t begin = plan_paths_.size();
    plan_path_begin_.push_back(static_cast<int32_t>(begin));
    for (uint32_t x = row.node; nodes_[x].parent != kNone; x = nodes_[x].parent) {
      plan_paths_.push_back(x);
    }
    std::reverse(plan_paths_.begin() + begin, plan_paths_.end());
    for (size_t i = begin; i < plan_paths_.size(); ++i) {
      Node& node = nodes_[plan_paths_[i]];
      if (node.plan_epoch != epoch) {
        node.plan_epoch = epoch;
        node.plan_readers = 0;
        plan_order_.push_back(plan_paths_[i]);
      }
      ++node.plan_readers;
    }
  }
  plan_path_begin_.push_back(static_cast<int32_t>(plan_paths_.size()));

  // Pass 2: segment layout.
  int64_t entries = 0, segments = 0, pages = 0;
  for (uint32_t index : plan_order_) {
    Node& node = nodes_[index];
    bool flat = false;
    if (options.flatten && node.plan_readers > 1) {
      NodeShareInfo info;
      info.node = IdOf(index);
      info.length = static_cast<int32_t>(node.tokens.size());
      info.num_pages = static_cast<int32_t>(node.pages.size());
      info.num_readers = node.plan_readers;
      flat = options.flatten(info);
    }
    node.plan_flat = flat;
    node.plan_entry_base = static_cast<int32_t>(entries);
    node.plan_segment_base = static_cast<int32_t>(segments);
    node.plan_cursor = 0;
    const int64_t copies = flat ? node.plan_readers : 1;
    entries += node.plan_readers;
    segments += copies;
    pages += copies * static_cast<int64_t>(node.pages.size());
    if (entries > std::numeric_limits<int32_t>::max() ||
        pages > std::numeric_limits<int32_t>::max()) {
      return absl::ResourceExhaustedError("attention plan exceeds 2^31 entries or pages");
    }
  }
  plan->segment_page_indptr.resize(segments + 1);
  plan->page_indices.resize(pages);
  plan->segment_first_slot.resize(segments);
  plan->segment_length.resize(segments);
  plan->segment_entry_indptr.resize(segments + 1);
  plan->entry_query.resize(entries);
  plan->entry_kv_limit.resize(entries);
  if (segment_nodes != nullptr) segment_nodes->resize(segments);
  int32_t s = 0, p = 0;
  for (uint32_t index : plan_order_) {
    const Node& node = nodes_[index];
    const int32_t copies = node.plan_flat ? node.plan_readers : 1;
    for (int32_t j = 0; j < copies; ++j, ++s) {
      std::copy(node.pages.begin(), node.pages.end(), plan->page_indices.begin() + p);
      p += static_cast<int32_t>(node.pages.size());
      plan->segment_page_indptr[s + 1] = p;
      plan->segment_first_slot[s] = node.first_slot;
      plan->segment_length[s] = static_cast<int32_t>(node.tokens.size());
      plan->segment_entry_indptr[s + 1] =
          node.plan_entry_base + (node.plan_flat ? j + 1 : node.plan_readers);
      if (segment_nodes != nullptr) (*segment_nodes)[s] = IdOf(index);
    }
  }

  // Pass 3: entries, in row order within each node.
  for (size_t r = 0; r < plan_rows_.size(); ++r) {
    const PlanRow& row = plan_rows_[r];
    for (int32_t i = plan_path_begin_[r]; i < plan_path_begin_[r + 1]; ++i) {
      Node& node = nodes_[plan_paths_[i]];
      const int32_t e = node.plan_entry_base + node.plan_cursor++;
      plan->entry_query[e] = static_cast<int32_t>(r);
      plan->entry_kv_limit[e] =
          plan_paths_[i] == row.node ? row.limit : static_cast<int32_t>(node.tokens.size());
    }
  }
  attention::FillQueryEntries(*plan);
  return absl::OkStatus();
}

}  // namespace banyan::kv_tree

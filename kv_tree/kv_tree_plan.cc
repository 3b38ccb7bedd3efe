// KvTree's attention-plan builder: from query rows (a node and how many of its
// tokens the row sees) to the flat arrays of attention/attention_plan.h.
//
// Three passes, O(rows x depth + pages of the segments), no allocation once the
// scratch vectors have grown:
//   1. walk each row's path (root first), number the nodes by first use and
//      count their readers (per-node scratch stamped with an epoch);
//   2. lay out segments (one per node, or one per reader for a flattened node;
//      a node with its parent's readers whose K/V follows its parent's joins
//      the parent's segment), their pages and entry ranges;
//   3. walk the paths again, writing each row's entry into its segment's range.
// Ancestors are always numbered before descendants, so a row's entries come in
// path order, which is also the order of FillQueryEntries' lists.
#include <algorithm>
#include <limits>
#include <vector>

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
  if (segment_nodes != nullptr) segment_nodes->clear();
  plan->page_size = page_size_;
  plan->num_queries = static_cast<int32_t>(plan_rows_.size());
  if (++plan_epoch_ == 0) {  // wrapped: forget every stale stamp
    for (size_t i = 0; i < nodes_.size(); ++i) nodes_[i].plan_epoch = 0;
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

  // Pass 2: segment layout. A node continues its parent's segment when both
  // have the same readers (then every row through the parent reads the node)
  // and its K/V follows the parent's in the page order (kv_tree.h).
  const int32_t ps = page_size_;
  auto continues_parent = [&](const Node& node) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (node.plan_flat || node.parent == kNone) return false;
    const Node& parent = nodes_[node.parent];
    if (parent.plan_epoch != epoch || parent.plan_flat || parent.plan_readers != node.plan_readers) return false;
    const int64_t end = parent.first_slot + static_cast<int64_t>(parent.tokens.size());
    if (node.first_slot != end % ps) return false;
    return node.first_slot == 0 ||
           (!node.pages.empty() && !parent.pages.empty() && node.pages.front() == parent.pages.back());
  };
  std::vector<int32_t>& segment_pages = plan_segment_pages_;  // per segment: its page count
  segment_pages.clear();
  int64_t entries = 0, pages = 0;
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
    node.plan_cursor = 0;
    node.plan_continues = continues_parent(node);
    if (node.plan_continues) {
      const Node& parent = nodes_[node.parent];
      node.plan_segment_base = parent.plan_segment_base;
      node.plan_entry_base = parent.plan_entry_base;
      node.plan_offset = parent.plan_offset + static_cast<int32_t>(parent.tokens.size());
      const int32_t added = static_cast<int32_t>(node.pages.size()) - (node.first_slot != 0 ? 1 : 0);
      segment_pages[node.plan_segment_base] += added;
      plan->segment_length[node.plan_segment_base] += static_cast<int32_t>(node.tokens.size());
      pages += added;
      continue;
    }
    node.plan_offset = 0;
    node.plan_entry_base = static_cast<int32_t>(entries);
    node.plan_segment_base = static_cast<int32_t>(segment_pages.size());
    const int32_t copies = flat ? node.plan_readers : 1;
    for (int32_t j = 0; j < copies; ++j) {
      segment_pages.push_back(static_cast<int32_t>(node.pages.size()));
      plan->segment_first_slot.push_back(node.first_slot);
      plan->segment_length.push_back(static_cast<int32_t>(node.tokens.size()));
      plan->segment_entry_indptr.push_back(node.plan_entry_base + (flat ? j + 1 : node.plan_readers));
      if (segment_nodes != nullptr) segment_nodes->push_back(IdOf(index));
    }
    entries += node.plan_readers;
    pages += int64_t{copies} * static_cast<int64_t>(node.pages.size());
    if (entries > std::numeric_limits<int32_t>::max() || pages > std::numeric_limits<int32_t>::max()) {
      return absl::ResourceExhaustedError("attention plan exceeds 2^31 entries or pages");
    }
  }
  const size_t segments = segment_pages.size();
  plan->segment_page_indptr.resize(segments + 1);
  for (size_t s = 0; s < segments; ++s) {
    plan->segment_page_indptr[s + 1] = plan->segment_page_indptr[s] + segment_pages[s];
    segment_pages[s] = plan->segment_page_indptr[s];  // from here on: the segment's write cursor
  }
  plan->page_indices.resize(pages);
  plan->entry_query.resize(entries);
  plan->entry_kv_limit.resize(entries);
  for (uint32_t index : plan_order_) {
    const Node& node = nodes_[index];
    // A continuing node's first page is its parent's last when it starts inside it.
    const auto first = node.pages.begin() + (node.plan_continues && node.first_slot != 0 ? 1 : 0);
    const int32_t copies = node.plan_flat ? node.plan_readers : 1;
    for (int32_t j = 0; j < copies; ++j) {
      int32_t& cursor = segment_pages[node.plan_segment_base + j];
      std::copy(first, node.pages.end(), plan->page_indices.begin() + cursor);
      cursor += static_cast<int32_t>(node.pages.end() - first);
    }
  }

  // Pass 3: entries, in row order within each segment. A node whose child on
  // the row's path continues its segment writes none: the chain's last node
  // (the same for every reader) writes the row's one entry of the segment.
  for (size_t r = 0; r < plan_rows_.size(); ++r) {
    const PlanRow& row = plan_rows_[r];
    const int32_t path_end = plan_path_begin_[r + 1];
    for (int32_t i = plan_path_begin_[r]; i < path_end; ++i) {
      if (i + 1 < path_end && nodes_[plan_paths_[i + 1]].plan_continues) continue;
      Node& node = nodes_[plan_paths_[i]];
      const int32_t e = node.plan_entry_base + node.plan_cursor++;
      plan->entry_query[e] = static_cast<int32_t>(r);
      plan->entry_kv_limit[e] =
          node.plan_offset + (plan_paths_[i] == row.node ? row.limit : static_cast<int32_t>(node.tokens.size()));
    }
  }
  attention::FillQueryEntries(*plan);
  return absl::OkStatus();
}

}  // namespace banyan::kv_tree

// KvTree: structure snapshots (Snapshot / Restore) and the from-scratch
// invariant checker used by tests and the fuzz driver.
#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "banyan/status_macros.h"
#include "kv_tree/kv_tree.h"

namespace banyan::kv_tree {

TreeSnapshot KvTree::Snapshot() const {
  TreeReaderLock lock(&mu_);
  TreeSnapshot out;
  out.page_size = page_size_;
  for (const KvNamespace& ns : namespaces_) out.namespaces.push_back({ns.model, ns.adapter});
  // Depth-first, children by first token: deterministic for a given structure.
  std::vector<std::pair<uint32_t, int32_t>> stack;  // (node, parent's snapshot index)
  std::vector<std::pair<int32_t, uint32_t>> kids;
  for (size_t n = 0; n < roots_.size(); ++n) {
    stack.push_back({roots_[n], -1});
    while (!stack.empty()) {
      const auto [index, parent] = stack.back();
      stack.pop_back();
      const Node& node = nodes_[index];
      SnapshotNode s;
      s.parent = parent;
      s.namespace_index = node.ns;
      s.tokens = node.tokens;
      s.last_access = node.last_access;
      s.branch_refs = node.branch_refs;
      s.pins = node.pins;
      const int32_t me = static_cast<int32_t>(out.nodes.size());
      out.nodes.push_back(std::move(s));
      kids.assign(node.children.begin(), node.children.end());
      std::sort(kids.begin(), kids.end());
      for (auto it = kids.rbegin(); it != kids.rend(); ++it) stack.push_back({it->second, me});
    }
  }
  return out;
}

absl::StatusOr<std::vector<KvTree::RestoredNode>> KvTree::Restore(const TreeSnapshot& snapshot) {
  BANYAN_RETURN_IF_ERROR(ValidateSnapshot(snapshot));
  TreeLock lock(&mu_);
  std::vector<RestoredNode> out;
  out.reserve(snapshot.nodes.size());
  for (const SnapshotNode& node : snapshot.nodes) {
    uint32_t slot;
    if (node.parent == -1) {
      const SnapshotNamespace& ns = snapshot.namespaces[node.namespace_index];
      slot = NewBranchSlot(RootOf(KvNamespace{ns.model, ns.adapter}));
    } else {
      slot = NewBranchSlot(branches_[out[node.parent].branch.index].node);
    }
    RestoredNode restored;
    absl::StatusOr<Extension> ext = ExtendBranch(slot, node.tokens);
    if (!ext.ok()) {
      FreeBranchSlot(slot);
      for (const RestoredNode& r : out) FreeBranchSlot(r.branch.index);
      return ext.status();
    }
    restored.branch = ext->branch;
    restored.reused_tokens = ext->reused_tokens;
    restored.write_slots.assign(ext->write_slots.begin(), ext->write_slots.end());
    out.push_back(std::move(restored));
  }
  return out;
}

absl::Status KvTree::CheckInvariants() const {
  TreeReaderLock lock(&mu_);
  auto fail = [](auto&&... parts) { return absl::InternalError(absl::StrCat(parts...)); };
  const int32_t P = page_size_;
  std::vector<int32_t> holders(pool_.capacity(), 0);
  // Slot owners per page, to prove that holders of one page use disjoint slots.
  std::vector<uint32_t> owner(static_cast<size_t>(pool_.capacity()) * P, kNone);
  std::vector<int32_t> branch_count(nodes_.size(), 0), pin_count(nodes_.size(), 0);
  for (const BranchSlot& b : branches_) {
    if (!b.live) continue;
    if (b.node >= nodes_.size() || !nodes_[b.node].live) return fail("branch at a dead node");
    ++branch_count[b.node];
  }
  for (const PinSlot& p : pins_) {
    if (!p.live) continue;
    if (p.node >= nodes_.size() || !nodes_[p.node].live) return fail("pin on a dead node");
    ++pin_count[p.node];
  }
  int64_t live = 0, evictable = 0;
  for (uint32_t i = 0; i < nodes_.size(); ++i) {
    const Node& n = nodes_[i];
    if (!n.live) continue;
    ++live;
    if (n.branch_refs != branch_count[i]) {
      return fail("node ", i, ": branch_refs ", n.branch_refs, " but ", branch_count[i], " branches");
    }
    if (n.pins != pin_count[i]) return fail("node ", i, ": pins ", n.pins, " but ", pin_count[i]);
    if (n.temp_refs != 0) return fail("node ", i, ": temporary reference leaked");
    const bool should = n.parent != kNone && n.branch_refs == 0 && n.pins == 0 && n.children.empty();
    if (should != n.evictable) return fail("node ", i, ": evictable flag wrong");
    if (n.evictable) {
      ++evictable;
      if (n.evict_key != n.last_access || !evictable_.contains({n.evict_key, i})) {
        return fail("node ", i, ": missing from the eviction order");
      }
    }
    if (n.parent == kNone) {
      if (n.ns < 0 || n.ns >= static_cast<int32_t>(roots_.size()) || roots_[n.ns] != i) {
        return fail("node ", i, ": orphan (no parent, not a root)");
      }
      if (!n.tokens.empty() || !n.pages.empty() || n.prefix_length != 0) {
        return fail("root ", i, " holds tokens or pages");
      }
    } else {
      const Node& parent = nodes_[n.parent];
      if (!parent.live) return fail("node ", i, ": dead parent");
      if (n.tokens.empty()) return fail("node ", i, ": empty non-root node");
      const auto it = parent.children.find(n.tokens.front());
      if (it == parent.children.end() || it->second != i) return fail("node ", i, ": not its parent's child");
      if (n.ns != parent.ns) return fail("node ", i, ": namespace differs from its parent's");
      if (n.prefix_length != EndOf(n.parent)) return fail("node ", i, ": prefix length wrong");
      if (n.first_slot < 0 || n.first_slot >= P) return fail("node ", i, ": first slot out of page");
      const int64_t span = n.first_slot + static_cast<int64_t>(n.tokens.size());
      if (static_cast<int64_t>(n.pages.size()) != (span + P - 1) / P) {
        return fail("node ", i, ": ", n.pages.size(), " pages for ", n.tokens.size(), " tokens");
      }
      for (size_t t = 0; t < n.tokens.size(); ++t) {
        if (n.tokens[t] < 0) return fail("node ", i, ": negative token");
        const int64_t pos = n.first_slot + static_cast<int64_t>(t);
        const int32_t page = n.pages[pos / P];
        const int32_t slot = static_cast<int32_t>(pos % P);
        if (page < 0 || page >= pool_.capacity()) return fail("node ", i, ": bad page ", page);
        if (slot >= pool_.filled(page)) {
          return fail("node ", i, ": slot ", slot, " of page ", page, " above its fill mark ",
                      pool_.filled(page));
        }
        uint32_t& o = owner[static_cast<size_t>(page) * P + slot];
        if (o != kNone) return fail("page ", page, " slot ", slot, " used by nodes ", o, " and ", i);
        o = i;
      }
      for (int32_t page : n.pages) ++holders[page];
    }
    for (const auto& [token, child] : n.children) {
      if (child >= nodes_.size() || !nodes_[child].live || nodes_[child].parent != i ||
          nodes_[child].tokens.empty() || nodes_[child].tokens.front() != token) {
        return fail("node ", i, ": child link to ", child, " broken");
      }
    }
  }
  if (live != live_nodes_) return fail("live node count ", live_nodes_, " but ", live, " live");
  if (evictable != static_cast<int64_t>(evictable_.size())) {
    return fail("eviction order holds ", evictable_.size(), " nodes, ", evictable, " evictable");
  }
  // Every live node is reachable from a root (so nothing leaks its pages).
  int64_t reached = 0;
  std::vector<uint32_t> stack(roots_.begin(), roots_.end());
  while (!stack.empty()) {
    const uint32_t i = stack.back();
    stack.pop_back();
    ++reached;
    for (const auto& [token, child] : nodes_[i].children) stack.push_back(child);
  }
  if (reached != live) return fail(live - reached, " live nodes unreachable");
  int64_t branches = 0, pins = 0;
  for (const BranchSlot& b : branches_) branches += b.live;
  for (const PinSlot& p : pins_) pins += p.live;
  if (branches != live_branches_ || pins != live_pins_) return fail("branch or pin count wrong");
  const std::string pool_error = pool_.Check(holders);
  if (!pool_error.empty()) return fail("page pool: ", pool_error);
  return absl::OkStatus();
}

}  // namespace banyan::kv_tree

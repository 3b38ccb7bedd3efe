// KvTree: handles, reference counts, eviction and the extension machinery.
// The plan builder is in kv_tree_plan.cc; snapshots and the invariant checker
// in kv_tree_check.cc.
#include "kv_tree/kv_tree.h"

#include <algorithm>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "banyan/status_macros.h"
#include "sdk/base/logging.h"

namespace banyan::kv_tree {
namespace {

constexpr int64_t kMaxLength = std::numeric_limits<int32_t>::max();
constexpr int32_t kMaxFork = 1 << 20;
// Tokens of a run of consecutive page ids that the attention kernels load as one box: the TMA kernel's KV tile
// (attention/work_plan.h kKvTile). KvTree does not depend on attention; the number is the shared fact.
constexpr int32_t kRunTokens = 64;

uint32_t NextGeneration(uint32_t g) { return g == std::numeric_limits<uint32_t>::max() ? 1 : g + 1; }

int32_t CeilDiv(int64_t a, int64_t b) { return static_cast<int32_t>((a + b - 1) / b); }

}  // namespace

// ---------------------------------------------------------------- KvPin

KvPin& KvPin::operator=(KvPin&& other) noexcept {
  if (this != &other) {
    if (held()) (void)Release();
    tree_ = std::exchange(other.tree_, nullptr);
    slot_ = other.slot_;
    generation_ = other.generation_;
    node_ = other.node_;
  }
  return *this;
}

KvPin::~KvPin() {
  if (held()) (void)Release();
}

absl::Status KvPin::Release() {
  if (tree_ == nullptr) {
    return absl::InvalidArgumentError("pin receipt is empty (released already or moved from)");
  }
  KvTree* tree = std::exchange(tree_, nullptr);
  return tree->UnpinSlot(slot_, generation_);
}

// ---------------------------------------------------------------- creation

absl::StatusOr<std::unique_ptr<KvTree>> KvTree::Create(std::unique_ptr<KvStorage> storage,
                                                       EvictionScoreFn eviction_score) {
  if (storage == nullptr) return absl::InvalidArgumentError("KvTree::Create: null storage");
  const attention::KvLayout& layout = storage->layout();
  if (layout.num_pages < 1 || layout.num_pages > std::numeric_limits<int32_t>::max()) {
    return absl::InvalidArgumentError(
        absl::StrCat("KvTree::Create: page count ", layout.num_pages, " not in [1, 2^31)"));
  }
  if (layout.page_size < 1) {
    return absl::InvalidArgumentError(absl::StrCat("KvTree::Create: page size ", layout.page_size));
  }
  return std::unique_ptr<KvTree>(new KvTree(std::move(storage), std::move(eviction_score)));
}

KvTree::KvTree(std::unique_ptr<KvStorage> storage, EvictionScoreFn score)
    : storage_(std::move(storage)),
      page_size_(storage_->layout().page_size),
      pool_(static_cast<int32_t>(storage_->layout().num_pages), std::max(1, kRunTokens / storage_->layout().page_size)),
      eviction_score_(std::move(score)) {}

KvTree::~KvTree() = default;

void KvTree::SetEvictionPolicy(EvictionScoreFn score) {
  TreeLock lock(&mu_);
  eviction_score_ = std::move(score);
}

// ---------------------------------------------------------------- slots

absl::StatusOr<uint32_t> KvTree::ResolveBranch(Branch b) const {
  if (!b.valid() || b.index >= branches_.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("malformed branch handle (index ", b.index, ", generation ", b.generation, ")"));
  }
  const BranchSlot& slot = branches_[b.index];
  if (!slot.live || slot.generation != b.generation) {
    return absl::NotFoundError(
        absl::StrCat("stale branch handle ", b.index, ":", b.generation, " (released)"));
  }
  return b.index;
}

absl::StatusOr<uint32_t> KvTree::ResolveNode(NodeId id) const {
  if (!id.valid() || id.index >= nodes_.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("malformed node id (index ", id.index, ", generation ", id.generation, ")"));
  }
  const Node& node = nodes_[id.index];
  if (!node.live || node.generation != id.generation) {
    return absl::NotFoundError(absl::StrCat("stale node id ", id.index, ":", id.generation,
                                            " (evicted)"));
  }
  return id.index;
}

uint32_t KvTree::NewNode() {
  uint32_t index;
  if (!free_nodes_.empty()) {
    index = free_nodes_.back();
    free_nodes_.pop_back();
  } else {
    index = static_cast<uint32_t>(nodes_.size());
    nodes_.emplace_back();
  }
  Node& node = nodes_[index];
  node.live = true;
  node.parent = kNone;
  node.ns = -1;
  node.first_slot = 0;
  node.prefix_length = 0;
  node.branch_refs = node.pins = node.temp_refs = 0;
  node.last_access = ++clock_;
  node.evictable = false;
  node.plan_epoch = 0;
  ++live_nodes_;
  return index;
}

uint32_t KvTree::NewBranchSlot(uint32_t node) {
  uint32_t index;
  if (!free_branches_.empty()) {
    index = free_branches_.back();
    free_branches_.pop_back();
  } else {
    index = static_cast<uint32_t>(branches_.size());
    branches_.emplace_back();
  }
  branches_[index].live = true;
  branches_[index].node = node;
  ++nodes_[node].branch_refs;
  ++live_branches_;
  UpdateEvictable(node);
  return index;
}

void KvTree::FreeBranchSlot(uint32_t slot) {
  BranchSlot& b = branches_[slot];
  const uint32_t node = b.node;
  b.live = false;
  b.node = kNone;
  b.generation = NextGeneration(b.generation);
  free_branches_.push_back(slot);
  --live_branches_;
  --nodes_[node].branch_refs;
  UpdateEvictable(node);
}

uint32_t KvTree::RootOf(const KvNamespace& ns) {
  for (size_t i = 0; i < namespaces_.size(); ++i) {
    if (namespaces_[i] == ns) return roots_[i];
  }
  const uint32_t root = NewNode();
  nodes_[root].ns = static_cast<int32_t>(namespaces_.size());
  namespaces_.push_back(ns);
  roots_.push_back(root);
  return root;
}

// ---------------------------------------------------------------- eviction

void KvTree::UpdateEvictable(uint32_t index) {
  Node& node = nodes_[index];
  const bool should = node.live && node.parent != kNone && node.branch_refs == 0 &&
                      node.pins == 0 && node.temp_refs == 0 && node.children.empty();
  if (node.evictable && (!should || node.evict_key != node.last_access)) {
    evictable_.erase({node.evict_key, index});
    node.evictable = false;
  }
  if (should && !node.evictable) {
    node.evict_key = node.last_access;
    evictable_.insert({node.evict_key, index});
    node.evictable = true;
  }
}

void KvTree::Touch(uint32_t index) {
  nodes_[index].last_access = ++clock_;
  if (nodes_[index].evictable) UpdateEvictable(index);
}

void KvTree::EvictNode(uint32_t index) {
  Node& node = nodes_[index];
  BANYAN_CHECK(node.evictable) << "evicting a referenced node";
  evictable_.erase({node.evict_key, index});
  node.evictable = false;
  for (int32_t page : node.pages) pool_.Unref(page);
  node.pages.clear();
  Node& parent = nodes_[node.parent];
  parent.children.erase(node.tokens.front());
  parent.last_access = std::max(parent.last_access, node.last_access);
  const uint32_t parent_index = node.parent;
  node.tokens.clear();
  node.children.clear();
  node.live = false;
  node.parent = kNone;
  node.generation = NextGeneration(node.generation);
  free_nodes_.push_back(index);
  --live_nodes_;
  ++evicted_nodes_;
  UpdateEvictable(parent_index);
}

bool KvTree::EnsureFree(int32_t pages) {
  while (pool_.num_free() < pages) {
    if (evictable_.empty()) return false;
    uint32_t victim = evictable_.begin()->second;
    if (eviction_score_) {
      double best = std::numeric_limits<double>::infinity();
      for (const auto& [key, index] : evictable_) {
        const Node& node = nodes_[index];
        EvictionCandidate c;
        c.node = IdOf(index);
        c.length = static_cast<int32_t>(node.tokens.size());
        c.num_pages = static_cast<int32_t>(node.pages.size());
        c.prefix_length = node.prefix_length;
        c.last_access = node.last_access;
        const double score = eviction_score_(c);
        if (score < best) {  // ties (and NaN) keep the older candidate
          best = score;
          victim = index;
        }
      }
    }
    EvictNode(victim);
  }
  return true;
}

// ---------------------------------------------------------------- extension

bool KvTree::InPlaceAllowed(uint32_t index, uint32_t branch_node) const {
  const Node& node = nodes_[index];
  const int32_t other_branches = node.branch_refs - (index == branch_node ? 1 : 0);
  return node.parent != kNone && node.children.empty() && node.pins == 0 && other_branches == 0;
}

KvTree::ExtendPlan KvTree::PlanExtend(uint32_t branch_node, absl::Span<const int32_t> tokens) const {
  ExtendPlan plan;
  const int64_t m = static_cast<int64_t>(tokens.size());
  uint32_t cur = branch_node;
  int64_t i = 0;
  while (i < m) {
    const auto it = nodes_[cur].children.find(tokens[i]);
    if (it == nodes_[cur].children.end()) break;
    const std::vector<int32_t>& ct = nodes_[it->second].tokens;
    int64_t k = 1;
    while (k < static_cast<int64_t>(ct.size()) && i + k < m && ct[k] == tokens[i + k]) ++k;
    if (k == static_cast<int64_t>(ct.size())) {
      cur = it->second;
      i += k;
      continue;
    }
    plan.split_at = static_cast<int32_t>(k);
    cur = it->second;
    i += k;
    break;
  }
  plan.match_node = cur;
  plan.matched = static_cast<int32_t>(i);
  const int64_t rest = m - i;
  if (rest == 0) return plan;
  const Node& node = nodes_[cur];
  const int64_t P = page_size_;
  if (plan.split_at > 0) {
    const int64_t e = (node.first_slot + plan.split_at) % P;
    plan.pages_needed = e == 0 ? CeilDiv(rest, P) : 1 + CeilDiv(std::max<int64_t>(0, rest - (P - e)), P);
    return plan;
  }
  const int64_t e = (node.first_slot + static_cast<int64_t>(node.tokens.size())) % P;
  if (node.tokens.empty() || e == 0) {
    plan.pages_needed = CeilDiv(rest, P);
  } else {
    const bool claim = pool_.CanClaim(node.pages.back(), static_cast<int32_t>(e));
    plan.pages_needed = (claim ? 0 : 1) + CeilDiv(std::max<int64_t>(0, rest - (P - e)), P);
  }
  return plan;
}

uint32_t KvTree::Split(uint32_t index, int32_t at) {
  const uint32_t upper = NewNode();
  Node& x = nodes_[index];  // StableVector: references survive emplace_back
  Node& u = nodes_[upper];
  u.parent = x.parent;
  u.ns = x.ns;
  u.prefix_length = x.prefix_length;
  u.first_slot = x.first_slot;
  u.last_access = x.last_access;
  u.tokens.assign(x.tokens.begin(), x.tokens.begin() + at);
  const int32_t boundary = x.first_slot + at;
  const int32_t upper_pages = CeilDiv(boundary, page_size_);
  const int32_t lower_first = boundary / page_size_;
  u.pages.assign(x.pages.begin(), x.pages.begin() + upper_pages);
  if (boundary % page_size_ != 0) pool_.AddRef(x.pages[lower_first]);  // shared boundary page
  x.pages.erase(x.pages.begin(), x.pages.begin() + lower_first);
  x.tokens.erase(x.tokens.begin(), x.tokens.begin() + at);
  x.first_slot = boundary % page_size_;
  x.prefix_length += at;
  nodes_[u.parent].children[u.tokens.front()] = upper;
  u.children[x.tokens.front()] = index;
  x.parent = upper;
  return upper;
}

void KvTree::WriteTokens(uint32_t index, absl::Span<const int32_t> tokens, int32_t cow_page,
                         absl::InlinedVector<KvSlot, 1>* slots) {
  Node& node = nodes_[index];
  if (cow_page >= 0) {
    pool_.Unref(node.pages.back());
    node.pages.back() = cow_page;
  }
  // Room for the new tokens, at least doubling: an exact reserve would
  // reallocate and copy a decoding leaf's whole token list at every one-token
  // append (quadratic in its length).
  const size_t needed = node.tokens.size() + tokens.size();
  if (needed > node.tokens.capacity()) node.tokens.reserve(std::max(needed, 2 * node.tokens.capacity()));
  // Pages in runs of consecutive ids (PagePool::Allocate), one run per kRunTokens of the node's positions: a page
  // that starts such a group (node page index a multiple of `run`) at the start of a free aligned run, any other
  // right after the node's last page where that is free, so that leaves decoding side by side, each taking a
  // page at the same steps as the others, still get a run per group.
  const size_t run = static_cast<size_t>(pool_.run_pages());
  for (int32_t token : tokens) {
    const int64_t pos = node.first_slot + static_cast<int64_t>(node.tokens.size());
    const int32_t slot = static_cast<int32_t>(pos % page_size_);
    if (pos / page_size_ == static_cast<int64_t>(node.pages.size())) {
      const int32_t page = pool_.Allocate(node.pages.empty() ? -1 : node.pages.back(), node.pages.size() % run == 0);
      BANYAN_CHECK(page >= 0) << "page reservation broken";
      node.pages.push_back(page);
    }
    const int32_t page = node.pages[pos / page_size_];
    BANYAN_CHECK(pool_.CanClaim(page, slot)) << "writing into a claimed slot";
    pool_.set_filled(page, slot + 1);
    node.tokens.push_back(token);
    slots->push_back(KvSlot{page, slot});
  }
}

void KvTree::MoveBranch(uint32_t slot, uint32_t to) {
  const uint32_t from = branches_[slot].node;
  if (from != to) {
    --nodes_[from].branch_refs;
    ++nodes_[to].branch_refs;
    branches_[slot].node = to;
    UpdateEvictable(from);
  }
  Touch(to);
  UpdateEvictable(to);
}

absl::StatusOr<Extension> KvTree::ExtendBranch(uint32_t slot, absl::Span<const int32_t> tokens) {
  const uint32_t start = branches_[slot].node;
  Extension out;
  out.branch = Branch{slot, branches_[slot].generation};
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (tokens[i] < 0) {
      return absl::InvalidArgumentError(absl::StrCat("token ", i, " is negative (", tokens[i], ")"));
    }
  }
  if (EndOf(start) + static_cast<int64_t>(tokens.size()) > kMaxLength) {
    return absl::InvalidArgumentError(absl::StrCat("branch would exceed ", kMaxLength, " tokens"));
  }
  if (tokens.empty()) {
    Touch(start);
    return out;
  }
  ExtendPlan plan = PlanExtend(start, tokens);
  // A one-token append (a decode step) that would split a cached node (no
  // branch, pin or child) one token in drops that node and plans again:
  // reusing it would put the branch one token into it and split it again at
  // every later step, one tree node per token (a batch decoding along its own
  // cached continuations); the reuse saves one token's K/V write.
  if (tokens.size() == 1 && plan.split_at > 0 && nodes_[plan.match_node].evictable) {
    EvictNode(plan.match_node);
    plan = PlanExtend(start, tokens);
  }
  const uint32_t matched_node = plan.match_node;
  ++nodes_[matched_node].temp_refs;  // keeps the whole matched path from eviction
  UpdateEvictable(matched_node);
  auto unprotect = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    --nodes_[matched_node].temp_refs;
    UpdateEvictable(matched_node);
  };
  if (!EnsureFree(plan.pages_needed)) {
    unprotect();
    return absl::ResourceExhaustedError(absl::StrCat(
        "KV pool exhausted: ", plan.pages_needed, " pages needed, ", pool_.num_free(),
        " free of ", pool_.capacity(), ", nothing left to evict"));
  }
  const absl::Span<const int32_t> rest = tokens.subspan(plan.matched);
  // Copy on write, decided on the state after eviction and done before any
  // structural change so that a failed copy leaves nothing behind.
  int32_t cow_page = -1;
  int32_t tail_slot = 0;  // end slot of the attach point in its last page
  if (!rest.empty()) {
    const Node& node = nodes_[matched_node];
    int32_t src = -1;
    if (plan.split_at > 0) {
      const int32_t boundary = node.first_slot + plan.split_at;
      tail_slot = boundary % page_size_;
      if (tail_slot != 0) src = node.pages[(boundary - 1) / page_size_];  // shared with the lower part
    } else if (!node.tokens.empty()) {
      tail_slot = static_cast<int32_t>((node.first_slot + node.tokens.size()) % page_size_);
      if (tail_slot != 0 && !pool_.CanClaim(node.pages.back(), tail_slot)) src = node.pages.back();
    }
    if (src >= 0) {
      cow_page = pool_.Allocate();
      BANYAN_CHECK(cow_page >= 0) << "page reservation broken";
      absl::Status copied = storage_->CopyPage(src, cow_page, tail_slot);
      if (!copied.ok()) {
        pool_.Unref(cow_page);
        unprotect();
        return copied;
      }
      pool_.set_filled(cow_page, tail_slot);
      ++copied_pages_;
      out.copied_pages = 1;
    }
  }
  uint32_t attach = matched_node;
  if (plan.split_at > 0) attach = Split(matched_node, plan.split_at);
  out.reused_tokens = plan.matched;
  if (rest.empty()) {
    MoveBranch(slot, attach);
    unprotect();
    return out;
  }
  out.write_slots.reserve(rest.size());
  if (plan.split_at == 0 && InPlaceAllowed(attach, start)) {
    MoveBranch(slot, attach);
    unprotect();
    WriteTokens(attach, rest, cow_page, &out.write_slots);
    return out;
  }
  const uint32_t child = NewNode();
  Node& c = nodes_[child];
  Node& a = nodes_[attach];
  c.parent = attach;
  c.ns = a.ns;
  c.prefix_length = EndOf(attach);
  if (!a.tokens.empty() && tail_slot != 0) {
    c.first_slot = tail_slot;
    if (cow_page >= 0) {
      c.pages.push_back(cow_page);  // the copy's reference moves to the child
    } else {
      // Claim the free slots of the parent's page. A sole holder's fill mark
      // may lie beyond its end (a child evicted, a shrink): rewind it first.
      if (pool_.ref(a.pages.back()) == 1) pool_.set_filled(a.pages.back(), tail_slot);
      pool_.AddRef(a.pages.back());
      c.pages.push_back(a.pages.back());
    }
  }
  a.children[rest.front()] = child;
  WriteTokens(child, rest, -1, &out.write_slots);
  MoveBranch(slot, child);
  UpdateEvictable(attach);
  unprotect();
  return out;
}

void KvTree::ShrinkLeaf(uint32_t index, int32_t new_length) {
  Node& node = nodes_[index];
  const int32_t keep = CeilDiv(node.first_slot + new_length, page_size_);
  for (size_t i = keep; i < node.pages.size(); ++i) pool_.Unref(node.pages[i]);
  node.pages.resize(keep);
  node.tokens.resize(new_length);
}

// ---------------------------------------------------------------- public ops

absl::StatusOr<Extension> KvTree::Insert(const KvNamespace& ns, absl::Span<const int32_t> tokens) {
  TreeLock lock(&mu_);
  const size_t namespaces_before = namespaces_.size();
  const uint32_t root = RootOf(ns);
  const uint32_t slot = NewBranchSlot(root);
  absl::StatusOr<Extension> result = ExtendBranch(slot, tokens);
  if (!result.ok()) {
    FreeBranchSlot(slot);
    if (namespaces_.size() > namespaces_before) {  // undo the namespace this call created
      Node& r = nodes_[root];
      r.live = false;
      r.generation = NextGeneration(r.generation);
      free_nodes_.push_back(root);
      --live_nodes_;
      namespaces_.pop_back();
      roots_.pop_back();
    }
  } else {
    result->node = IdOf(branches_[slot].node);
  }
  return result;
}

absl::StatusOr<Extension> KvTree::Append(Branch branch, absl::Span<const int32_t> tokens) {
  TreeLock lock(&mu_);
  BANYAN_ASSIGN_OR_RETURN(const uint32_t slot, ResolveBranch(branch));
  absl::StatusOr<Extension> result = ExtendBranch(slot, tokens);
  if (result.ok()) result->node = IdOf(branches_[slot].node);
  return result;
}

absl::StatusOr<std::vector<Branch>> KvTree::Fork(Branch branch, int32_t n) {
  if (n < 1 || n > kMaxFork) {
    return absl::InvalidArgumentError(absl::StrCat("fork count ", n, " not in [1, ", kMaxFork, "]"));
  }
  TreeLock lock(&mu_);
  BANYAN_ASSIGN_OR_RETURN(const uint32_t slot, ResolveBranch(branch));
  const uint32_t node = branches_[slot].node;
  std::vector<Branch> out;
  out.reserve(n);
  for (int32_t i = 0; i < n; ++i) {
    const uint32_t s = NewBranchSlot(node);
    out.push_back(Branch{s, branches_[s].generation});
  }
  Touch(node);
  return out;
}

absl::StatusOr<Branch> KvTree::Fork(Branch branch) {
  TreeLock lock(&mu_);
  BANYAN_ASSIGN_OR_RETURN(const uint32_t slot, ResolveBranch(branch));
  const uint32_t node = branches_[slot].node;
  const uint32_t s = NewBranchSlot(node);
  Touch(node);
  return Branch{s, branches_[s].generation};
}

absl::Status KvTree::Truncate(Branch branch, int64_t new_length) {
  TreeLock lock(&mu_);
  BANYAN_ASSIGN_OR_RETURN(const uint32_t slot, ResolveBranch(branch));
  const uint32_t leaf = branches_[slot].node;
  const int64_t end = EndOf(leaf);
  if (new_length < 0 || new_length > end) {
    return absl::InvalidArgumentError(
        absl::StrCat("truncate to ", new_length, " tokens; the branch has ", end));
  }
  if (new_length == end) {
    Touch(leaf);
    return absl::OkStatus();
  }
  uint32_t x = leaf;
  while (nodes_[x].prefix_length >= new_length && nodes_[x].parent != kNone) x = nodes_[x].parent;
  if (new_length == EndOf(x)) {
    MoveBranch(slot, x);
    return absl::OkStatus();
  }
  const int32_t at = static_cast<int32_t>(new_length - nodes_[x].prefix_length);
  if (x == leaf && InPlaceAllowed(leaf, leaf)) {
    ShrinkLeaf(leaf, at);
    Touch(leaf);
    return absl::OkStatus();
  }
  MoveBranch(slot, Split(x, at));
  return absl::OkStatus();
}

absl::Status KvTree::Release(Branch branch) {
  TreeLock lock(&mu_);
  BANYAN_ASSIGN_OR_RETURN(const uint32_t slot, ResolveBranch(branch));
  Touch(branches_[slot].node);
  FreeBranchSlot(slot);
  return absl::OkStatus();
}

absl::StatusOr<KvPin> KvTree::Pin(NodeId id) {
  TreeLock lock(&mu_);
  BANYAN_ASSIGN_OR_RETURN(const uint32_t node, ResolveNode(id));
  uint32_t slot;
  if (!free_pins_.empty()) {
    slot = free_pins_.back();
    free_pins_.pop_back();
  } else {
    slot = static_cast<uint32_t>(pins_.size());
    pins_.emplace_back();
  }
  pins_[slot].live = true;
  pins_[slot].node = node;
  ++nodes_[node].pins;
  ++live_pins_;
  UpdateEvictable(node);
  KvPin pin;
  pin.tree_ = this;
  pin.slot_ = slot;
  pin.generation_ = pins_[slot].generation;
  pin.node_ = id;
  return pin;
}

absl::Status KvTree::UnpinSlot(uint32_t slot, uint32_t generation) {
  TreeLock lock(&mu_);
  if (slot >= pins_.size() || !pins_[slot].live || pins_[slot].generation != generation) {
    return absl::NotFoundError("pin already released");
  }
  PinSlot& pin = pins_[slot];
  const uint32_t node = pin.node;
  pin.live = false;
  pin.node = kNone;
  pin.generation = NextGeneration(pin.generation);
  free_pins_.push_back(slot);
  --live_pins_;
  --nodes_[node].pins;
  UpdateEvictable(node);
  return absl::OkStatus();
}

// ---------------------------------------------------------------- queries

absl::StatusOr<NodeId> KvTree::NodeOf(Branch branch) const {
  TreeReaderLock lock(&mu_);
  BANYAN_ASSIGN_OR_RETURN(const uint32_t slot, ResolveBranch(branch));
  return IdOf(branches_[slot].node);
}

absl::StatusOr<int64_t> KvTree::Length(Branch branch) const {
  TreeReaderLock lock(&mu_);
  BANYAN_ASSIGN_OR_RETURN(const uint32_t slot, ResolveBranch(branch));
  return EndOf(branches_[slot].node);
}

absl::StatusOr<std::vector<int32_t>> KvTree::Tokens(Branch branch) const {
  TreeReaderLock lock(&mu_);
  BANYAN_ASSIGN_OR_RETURN(const uint32_t slot, ResolveBranch(branch));
  uint32_t node = branches_[slot].node;
  std::vector<int32_t> out(EndOf(node));
  for (; node != kNone; node = nodes_[node].parent) {
    std::copy(nodes_[node].tokens.begin(), nodes_[node].tokens.end(),
              out.begin() + nodes_[node].prefix_length);
  }
  return out;
}

absl::StatusOr<int32_t> KvTree::LastToken(Branch branch) const {
  TreeReaderLock lock(&mu_);
  BANYAN_ASSIGN_OR_RETURN(const uint32_t slot, ResolveBranch(branch));
  for (uint32_t node = branches_[slot].node; node != kNone; node = nodes_[node].parent) {
    if (!nodes_[node].tokens.empty()) return nodes_[node].tokens.back();
  }
  return absl::FailedPreconditionError("branch has no tokens");
}

absl::StatusOr<std::vector<KvSlot>> KvTree::Slots(Branch branch) const {
  TreeReaderLock lock(&mu_);
  BANYAN_ASSIGN_OR_RETURN(const uint32_t slot, ResolveBranch(branch));
  uint32_t node = branches_[slot].node;
  std::vector<KvSlot> out(EndOf(node));
  for (; node != kNone; node = nodes_[node].parent) {
    const Node& n = nodes_[node];
    for (size_t t = 0; t < n.tokens.size(); ++t) {
      const int64_t pos = n.first_slot + static_cast<int64_t>(t);
      out[n.prefix_length + t] =
          KvSlot{n.pages[pos / page_size_], static_cast<int32_t>(pos % page_size_)};
    }
  }
  return out;
}

absl::StatusOr<NodeInfo> KvTree::GetNode(NodeId id) const {
  TreeReaderLock lock(&mu_);
  BANYAN_ASSIGN_OR_RETURN(const uint32_t index, ResolveNode(id));
  const Node& n = nodes_[index];
  NodeInfo info;
  if (n.parent != kNone) info.parent = IdOf(n.parent);
  info.length = static_cast<int32_t>(n.tokens.size());
  info.prefix_length = n.prefix_length;
  info.first_slot = n.first_slot;
  info.pages = n.pages;
  info.num_children = static_cast<int32_t>(n.children.size());
  info.branch_refs = n.branch_refs;
  info.pins = n.pins;
  info.last_access = n.last_access;
  return info;
}

KvTreeStats KvTree::Stats() const {
  TreeReaderLock lock(&mu_);
  KvTreeStats s;
  s.nodes = live_nodes_;
  s.cached_leaves = static_cast<int64_t>(evictable_.size());
  s.branches = live_branches_;
  s.pins = live_pins_;
  s.pages_total = pool_.capacity();
  s.pages_free = pool_.num_free();
  s.evicted_nodes = evicted_nodes_;
  s.copied_pages = copied_pages_;
  s.bytes_per_page = storage_->layout().BytesPerPage();
  return s;
}

}  // namespace banyan::kv_tree

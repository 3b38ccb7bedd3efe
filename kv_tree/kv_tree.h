// KvTree: the reference-counted KV prefix tree. One radix tree of token spans
// per namespace (model, adapter) holds the KV cache of every branch of every
// search, so that branches share KV memory and attention reads of their common
// prefixes (hydragen 3.3).
//
//   BANYAN_ASSIGN_OR_RETURN(auto storage, HostKvStorage::Create(pool_config));
//   BANYAN_ASSIGN_OR_RETURN(auto tree, KvTree::Create(std::move(storage)));
//   BANYAN_ASSIGN_OR_RETURN(Extension prompt, tree->Insert(ns, prompt_tokens));
//   // prefill: write K/V of the last prompt.write_slots.size() tokens at write_slots
//   BANYAN_ASSIGN_OR_RETURN(std::vector<Branch> samples, tree->Fork(prompt.branch, 8));
//   for (Branch b : samples) { BANYAN_ASSIGN_OR_RETURN(Extension e, tree->Append(b, {tok})); }
//   BANYAN_RETURN_IF_ERROR(tree->BuildDecodePlan(samples, {}, &plan));   // one query row per branch
//   ...
//   BANYAN_RETURN_IF_ERROR(tree->Release(samples[3]));   // its KV stays cached until evicted
//
// Model
//   * A node holds a span of tokens and the pages with their K/V; token t of a
//     node lives at slot (first_slot + t) % page_size of page
//     pages[(first_slot + t) / page_size], and the pages cover exactly
//     [first_slot, first_slot + length). Children of a node start with distinct
//     tokens (radix property). Each namespace has a root node of 0 tokens.
//   * A Branch is a live sequence: the path from its namespace root to the end
//     of its node. Branches are the unit the engine decodes.
//   * A NodeId names the prefix that ends at a node's last token. When a node
//     is split, the id stays with the lower part (same end), so branches and
//     pins keep meaning the same tokens. A NodeId without a pin is a weak
//     handle: the node may be evicted (kNotFound afterwards) or, when it is an
//     unshared leaf, extended in place by its only branch.
//   * KvPin is a move-only receipt that keeps a node (and so its whole prefix)
//     alive and unchanged; it releases once, explicitly or when destroyed.
//
// Lifetime and eviction: a node is referenced by the branches at it, the pins
// on it and its children. A node with no references is cached: its KV stays
// and a later Insert/Append of the same tokens reuses it. When a page is needed
// and none is free, cached leaves are evicted in LRU order (or lowest policy
// score first when an eviction policy is set), which may make their parents
// cached leaves in turn. A referenced node is never evicted. If the pool cannot
// supply the pages an operation needs, the operation returns
// kResourceExhausted and changes nothing that a handle can observe (cached
// nodes may have been evicted on the way; that only lowers later reuse).
//
// Writes of K/V: Insert and Append return the slots where the caller must write
// the K/V of the new tokens (write_slots, in token order) before the next plan
// that reads them runs. Tokens that matched cached nodes (reused_tokens) have
// their K/V already. A copy on write (a partly filled page shared with another
// node) is issued through KvStorage::CopyPage inside the call, before it
// returns; on a device the caller must order its K/V writes after it (the same
// stream). A plan's pages stay valid while every branch (or pin) it was built
// from stays live: release branches only after the kernels of the step that
// read them have finished, or an eviction may hand their pages to a new node.
//
// Thread safety: KvTree is internally synchronized (one reader-writer lock,
// tree_mutex.h; queries share it, everything else holds it exclusively): every
// method may be called from any thread concurrently, including fork / append /
// release of different or the same branches, and plan building. Operations are
// linearizable. What the tree does not order is the caller's access to the
// page bytes: the caller must not write write_slots of one call while a plan
// that reads them is running, and the engine's single scheduler thread is the
// intended owner of step ordering (issue 6). KvPin's destructor takes the
// tree's lock. REQUIRES: the tree outlives every KvPin it issued. The lock
// discipline is annotated (ABSL_GUARDED_BY) and checked with clang's
// -Wthread-safety; kv_tree_concurrency_test runs clean under TSan.
//
// Errors (never aborts on caller input):
//   kNotFound          stale Branch / NodeId (released, evicted, slot reused)
//   kInvalidArgument   malformed handle, empty KvPin receipt, negative token,
//                      bad count or length
//   kResourceExhausted not enough pages even after evicting every cached node
//   kFailedPrecondition a plan row without tokens to attend
#ifndef BANYAN_KV_TREE_KV_TREE_H_
#define BANYAN_KV_TREE_KV_TREE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/btree_set.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/inlined_vector.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "attention/attention_plan.h"
#include "kv_tree/kv_storage.h"
#include "kv_tree/page_pool.h"
#include "kv_tree/stable_vector.h"
#include "kv_tree/tree_mutex.h"
#include "kv_tree/tree_snapshot.h"

namespace banyan::kv_tree {

// Handle to a node: a slot index and the slot's generation when issued. The
// default value is invalid (generation 0 is never issued).
struct NodeId {
  uint32_t index = 0;
  uint32_t generation = 0;
  bool valid() const { return generation != 0; }
  friend bool operator==(NodeId a, NodeId b) {
    return a.index == b.index && a.generation == b.generation;
  }
  friend bool operator!=(NodeId a, NodeId b) { return !(a == b); }
};

// Handle to a branch (a live sequence). Copyable value; releasing it once makes
// every copy stale (kNotFound).
struct Branch {
  uint32_t index = 0;
  uint32_t generation = 0;
  bool valid() const { return generation != 0; }
  friend bool operator==(Branch a, Branch b) {
    return a.index == b.index && a.generation == b.generation;
  }
  friend bool operator!=(Branch a, Branch b) { return !(a == b); }
};

// Scope of prefix sharing (SGLang's extra_key): only sequences of the same
// model and adapter share nodes.
struct KvNamespace {
  std::string model;
  std::string adapter;
  friend bool operator==(const KvNamespace& a, const KvNamespace& b) {
    return a.model == b.model && a.adapter == b.adapter;
  }
};

// One token's place in the pool.
struct KvSlot {
  int32_t page = 0;
  int32_t slot = 0;
  friend bool operator==(KvSlot a, KvSlot b) { return a.page == b.page && a.slot == b.slot; }
};

// What Insert / Append did.
struct Extension {
  Branch branch;               // the branch (Insert: a new one; Append: the same handle)
  int32_t reused_tokens = 0;   // leading tokens whose K/V was already cached
  // Slots of the other tokens, in order: write their K/V. Inline for one slot
  // (a decode step's append allocates nothing).
  absl::InlinedVector<KvSlot, 1> write_slots;
  int32_t copied_pages = 0;    // pages copied on write (0 or 1)
  NodeId node;                 // the branch's node after the call (NodeOf(branch), without a second lookup)
};

// A prefill query row set: the last `num_new_tokens` tokens of `branch` attend
// causally to themselves and fully to everything before them.
struct PrefillRows {
  Branch branch;
  int32_t num_new_tokens = 0;
};

// What a cost model sees of a node when deciding whether sharing pays.
struct NodeShareInfo {
  NodeId node;
  int32_t length = 0;       // tokens of the node
  int32_t num_pages = 0;
  int32_t num_readers = 0;  // query rows of this plan reading it
};

struct PlanOptions {
  // Returns true to "flatten" a node: its pages are emitted as one segment per
  // reading row (each with one entry) instead of one shared segment. Null: never.
  std::function<bool(const NodeShareInfo&)> flatten;
};

// What an eviction policy sees of an evictable (cached, childless) node.
struct EvictionCandidate {
  NodeId node;
  int32_t length = 0;
  int32_t num_pages = 0;
  int64_t prefix_length = 0;  // tokens before the node on its path
  uint64_t last_access = 0;   // tree clock of the last use (monotonic)
};
// Lower score is evicted first (ties: least recently used). Called under the
// tree's lock: must not call the tree. With a policy set, choosing each victim
// scans the evictable nodes (O(cached leaves)); LRU alone is O(log n).
using EvictionScoreFn = std::function<double(const EvictionCandidate&)>;

struct NodeInfo {
  NodeId parent;             // invalid for a namespace root
  int32_t length = 0;
  int64_t prefix_length = 0;  // tokens before this node on its path
  int32_t first_slot = 0;
  std::vector<int32_t> pages;
  int32_t num_children = 0;
  int32_t branch_refs = 0;
  int32_t pins = 0;
  uint64_t last_access = 0;
};

struct KvTreeStats {
  int64_t nodes = 0;          // including namespace roots
  int64_t cached_leaves = 0;  // evictable now
  int64_t branches = 0;
  int64_t pins = 0;
  int32_t pages_total = 0;
  int32_t pages_free = 0;
  int64_t evicted_nodes = 0;  // since creation
  int64_t copied_pages = 0;   // copy-on-write copies since creation
  size_t bytes_per_page = 0;
};

class KvTree;

// A move-only receipt for one pin. Destroying a held receipt unpins.
class KvPin {
 public:
  KvPin() = default;
  KvPin(KvPin&& other) noexcept { *this = std::move(other); }
  KvPin& operator=(KvPin&& other) noexcept;
  KvPin(const KvPin&) = delete;
  KvPin& operator=(const KvPin&) = delete;
  ~KvPin();

  bool held() const { return tree_ != nullptr; }
  NodeId node() const { return node_; }
  // Unpins. Returns kInvalidArgument when the receipt is empty (released
  // already or moved from): a pin is never released twice.
  [[nodiscard]] absl::Status Release();

 private:
  friend class KvTree;
  KvTree* tree_ = nullptr;
  uint32_t slot_ = 0;
  uint32_t generation_ = 0;
  NodeId node_;
};

class KvTree {
 public:
  // A tree over `storage` (owned). Returns kInvalidArgument when the storage
  // has no pages or a null pointer is given.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<KvTree>> Create(
      std::unique_ptr<KvStorage> storage, EvictionScoreFn eviction_score = nullptr);

  KvTree(const KvTree&) = delete;
  KvTree& operator=(const KvTree&) = delete;
  ~KvTree();

  // The pool's storage; its layout() gives page_size and num_pages. The tree
  // keeps ownership. Thread-safe (immutable pointer).
  KvStorage& storage() const { return *storage_; }
  int32_t page_size() const { return page_size_; }

  // Replaces the eviction policy (null: LRU).
  void SetEvictionPolicy(EvictionScoreFn score) ABSL_LOCKS_EXCLUDED(mu_);

  // A new branch in namespace `ns` holding `tokens`: the longest cached prefix
  // is reused (reused_tokens), the rest gets slots to write. Empty tokens give
  // a branch at the namespace root (length 0).
  // Errors: kInvalidArgument (negative token, total length >= 2^31),
  // kResourceExhausted (no state changed).
  [[nodiscard]] absl::StatusOr<Extension> Insert(const KvNamespace& ns,
                                                 absl::Span<const int32_t> tokens)
      ABSL_LOCKS_EXCLUDED(mu_);

  // Appends `tokens` to `branch`. Cached children that start with the same
  // tokens are reused (except that a one-token append evicts a longer cached
  // childless node it would land inside instead of splitting it); a node the
  // branch uses alone (no other branch, pin or child) is extended in place;
  // otherwise a child node is created.
  // Errors: kNotFound (stale branch), kInvalidArgument, kResourceExhausted
  // (no state changed).
  [[nodiscard]] absl::StatusOr<Extension> Append(Branch branch, absl::Span<const int32_t> tokens)
      ABSL_LOCKS_EXCLUDED(mu_);

  // `n` new branches at the same place as `branch` (which stays live). O(n).
  // Errors: kNotFound, kInvalidArgument (n < 1 or n > 2^20).
  [[nodiscard]] absl::StatusOr<std::vector<Branch>> Fork(Branch branch, int32_t n)
      ABSL_LOCKS_EXCLUDED(mu_);
  [[nodiscard]] absl::StatusOr<Branch> Fork(Branch branch) ABSL_LOCKS_EXCLUDED(mu_);

  // Shortens `branch` to its first `new_length` tokens. The dropped tokens stay
  // cached if another user shares them; pages a lone leaf no longer needs are
  // freed. Never allocates. Errors: kNotFound, kInvalidArgument (new_length
  // negative or longer than the branch).
  [[nodiscard]] absl::Status Truncate(Branch branch, int64_t new_length) ABSL_LOCKS_EXCLUDED(mu_);

  // Ends `branch`; its nodes stay cached. Every copy of the handle becomes
  // stale. Errors: kNotFound (stale, e.g. released twice), kInvalidArgument.
  [[nodiscard]] absl::Status Release(Branch branch) ABSL_LOCKS_EXCLUDED(mu_);

  // Pins `node`: it and its prefix are neither evicted nor changed until the
  // receipt is released. Errors: kNotFound (stale node), kInvalidArgument.
  [[nodiscard]] absl::StatusOr<KvPin> Pin(NodeId node) ABSL_LOCKS_EXCLUDED(mu_);

  // Queries. Errors: kNotFound / kInvalidArgument for stale or malformed handles.
  [[nodiscard]] absl::StatusOr<NodeId> NodeOf(Branch branch) const ABSL_LOCKS_EXCLUDED(mu_);
  [[nodiscard]] absl::StatusOr<int64_t> Length(Branch branch) const ABSL_LOCKS_EXCLUDED(mu_);
  // Every token of the branch's path, root first. O(length).
  [[nodiscard]] absl::StatusOr<std::vector<int32_t>> Tokens(Branch branch) const
      ABSL_LOCKS_EXCLUDED(mu_);
  // The branch's last token, without copying its path: O(nodes walked up to
  // the first that holds tokens). kNotFound for a stale handle,
  // kFailedPrecondition for a branch without tokens.
  [[nodiscard]] absl::StatusOr<int32_t> LastToken(Branch branch) const ABSL_LOCKS_EXCLUDED(mu_);
  // Every token slot of the branch's path, root first. O(length).
  [[nodiscard]] absl::StatusOr<std::vector<KvSlot>> Slots(Branch branch) const
      ABSL_LOCKS_EXCLUDED(mu_);
  [[nodiscard]] absl::StatusOr<NodeInfo> GetNode(NodeId node) const ABSL_LOCKS_EXCLUDED(mu_);
  KvTreeStats Stats() const ABSL_LOCKS_EXCLUDED(mu_);

  // Attention plans (attention/attention_plan.h), written into `plan` (cleared
  // first, capacity reused). Segments are tree nodes (or, for flattened nodes,
  // one per reading row), ordered by first use along the rows' root-to-leaf
  // paths, so every row's entries are in path order. A node read by exactly
  // the rows that read its parent, whose K/V continues its parent's in the
  // pages (its first slot follows the parent's last, on the parent's last page
  // or a fresh one), joins its parent's segment: a chain of such nodes (the
  // one-token nodes of branches that decode the same tokens in step, a node
  // split by a branch since released) is one segment. `segment_nodes`, when
  // not null, receives the first node of each segment.
  //
  // Decode: row i is `leaves[i]`, attending its whole path.
  // Prefill: rows are, per PrefillRows in order, its last num_new_tokens
  // tokens (in order); each attends its path fully up to the node holding it
  // and that node causally (kv limit = position in the node + 1).
  // Errors: kNotFound / kInvalidArgument (handles; num_new_tokens < 1 or above
  // the branch length), kFailedPrecondition (a decode leaf of length 0).
  [[nodiscard]] absl::Status BuildDecodePlan(absl::Span<const Branch> leaves,
                                             const PlanOptions& options,
                                             attention::AttentionPlan* plan,
                                             std::vector<NodeId>* segment_nodes = nullptr)
      ABSL_LOCKS_EXCLUDED(mu_);
  [[nodiscard]] absl::Status BuildPrefillPlan(absl::Span<const PrefillRows> rows,
                                              const PlanOptions& options,
                                              attention::AttentionPlan* plan,
                                              std::vector<NodeId>* segment_nodes = nullptr)
      ABSL_LOCKS_EXCLUDED(mu_);

  // The structure (namespaces, token spans, parent links, reference metadata;
  // not the K/V) in parent-before-child order, children by first token.
  TreeSnapshot Snapshot() const ABSL_LOCKS_EXCLUDED(mu_);

  // Rebuilds the structure of `snapshot` in this tree: per snapshot node, in
  // order, a branch ending at that node (roots: a branch of length 0), the
  // tokens reused from what this tree already had, and the slots whose K/V the
  // caller must recompute (a prefill). The caller owns the returned branches.
  // Errors: those of ValidateSnapshot (kInvalidArgument) and
  // kResourceExhausted; on error every branch created so far is released.
  struct RestoredNode {
    Branch branch;
    int32_t reused_tokens = 0;
    std::vector<KvSlot> write_slots;
  };
  [[nodiscard]] absl::StatusOr<std::vector<RestoredNode>> Restore(const TreeSnapshot& snapshot)
      ABSL_LOCKS_EXCLUDED(mu_);

  // Recomputes every reference count, page holder count, fill mark bound,
  // radix property, prefix length and the eviction set from scratch; returns
  // kInternal with the first violation. O(nodes + pages). For tests.
  [[nodiscard]] absl::Status CheckInvariants() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  friend class KvPin;
  static constexpr uint32_t kNone = 0xffffffffu;

  struct Node {
    uint32_t generation = 1;
    bool live = false;
    uint32_t parent = kNone;
    int32_t ns = -1;
    int32_t first_slot = 0;
    int64_t prefix_length = 0;
    std::vector<int32_t> tokens;
    std::vector<int32_t> pages;
    absl::flat_hash_map<int32_t, uint32_t> children;  // first token -> node
    int32_t branch_refs = 0;
    int32_t pins = 0;
    int32_t temp_refs = 0;  // held inside one operation
    uint64_t last_access = 0;
    uint64_t evict_key = 0;  // key in evictable_ while listed
    bool evictable = false;
    // Plan builder scratch.
    uint32_t plan_epoch = 0;
    int32_t plan_readers = 0;
    int32_t plan_entry_base = 0;
    int32_t plan_cursor = 0;
    int32_t plan_segment_base = 0;
    int32_t plan_offset = 0;       // tokens of its segment before it (a chain, kv_tree_plan.cc)
    bool plan_flat = false;
    bool plan_continues = false;   // its segment is its parent's
  };
  struct BranchSlot {
    uint32_t generation = 1;
    bool live = false;
    uint32_t node = kNone;
  };
  struct PinSlot {
    uint32_t generation = 1;
    bool live = false;
    uint32_t node = kNone;
  };
  // Where a plan row reads: its path up to `node`, seeing `limit` tokens of it.
  struct PlanRow {
    uint32_t node;
    int32_t limit;
  };
  // A planned extension (computed before anything changes).
  struct ExtendPlan {
    uint32_t match_node;    // deepest node matched fully, or the node to split
    int32_t split_at = 0;   // > 0: split match_node after this many tokens
    int32_t matched = 0;    // tokens matched
    int32_t pages_needed = 0;
  };

  KvTree(std::unique_ptr<KvStorage> storage, EvictionScoreFn score);

  // Handle resolution. Return kNotFound / kInvalidArgument.
  absl::StatusOr<uint32_t> ResolveBranch(Branch b) const ABSL_SHARED_LOCKS_REQUIRED(mu_);
  absl::StatusOr<uint32_t> ResolveNode(NodeId id) const ABSL_SHARED_LOCKS_REQUIRED(mu_);
  NodeId IdOf(uint32_t node) const ABSL_SHARED_LOCKS_REQUIRED(mu_) {
    return NodeId{node, nodes_[node].generation};
  }
  int64_t EndOf(uint32_t node) const ABSL_SHARED_LOCKS_REQUIRED(mu_) {
    return nodes_[node].prefix_length + static_cast<int64_t>(nodes_[node].tokens.size());
  }

  uint32_t NewNode() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  uint32_t NewBranchSlot(uint32_t node) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void FreeBranchSlot(uint32_t slot) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  uint32_t RootOf(const KvNamespace& ns) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Reference bookkeeping: a node is evictable iff it is live, not a root, has
  // no branch, pin, temporary reference or child. These keep evictable_ exact.
  void UpdateEvictable(uint32_t node) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Touch(uint32_t node) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Frees pages until `pages` are free; false (after evicting all it could)
  // when impossible.
  bool EnsureFree(int32_t pages) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void EvictNode(uint32_t node) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // The extension machinery (kv_tree.cc).
  ExtendPlan PlanExtend(uint32_t branch_node, absl::Span<const int32_t> tokens) const
      ABSL_SHARED_LOCKS_REQUIRED(mu_);
  int32_t PagesForTokens(uint32_t attach, bool split_tail, int32_t count,
                         bool in_place) const ABSL_SHARED_LOCKS_REQUIRED(mu_);
  bool InPlaceAllowed(uint32_t node, uint32_t branch_node) const ABSL_SHARED_LOCKS_REQUIRED(mu_);
  absl::StatusOr<Extension> ExtendBranch(uint32_t branch_slot, absl::Span<const int32_t> tokens)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  uint32_t Split(uint32_t node, int32_t at) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void WriteTokens(uint32_t node, absl::Span<const int32_t> tokens, int32_t cow_page,
                   absl::InlinedVector<KvSlot, 1>* slots) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ShrinkLeaf(uint32_t node, int32_t new_length) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void MoveBranch(uint32_t slot, uint32_t to) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status UnpinSlot(uint32_t slot, uint32_t generation) ABSL_LOCKS_EXCLUDED(mu_);

  // Plan builder (kv_tree_plan.cc).
  absl::Status BuildPlanLocked(const PlanOptions& options, attention::AttentionPlan* plan,
                               std::vector<NodeId>* segment_nodes)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::unique_ptr<KvStorage> storage_;
  const int32_t page_size_;

  mutable TreeMutex mu_;
  PagePool pool_ ABSL_GUARDED_BY(mu_);
  StableVector<Node> nodes_ ABSL_GUARDED_BY(mu_);  // index = NodeId::index; never moves a node
  std::vector<uint32_t> free_nodes_ ABSL_GUARDED_BY(mu_);
  std::vector<BranchSlot> branches_ ABSL_GUARDED_BY(mu_);
  std::vector<uint32_t> free_branches_ ABSL_GUARDED_BY(mu_);
  std::vector<PinSlot> pins_ ABSL_GUARDED_BY(mu_);
  std::vector<uint32_t> free_pins_ ABSL_GUARDED_BY(mu_);
  std::vector<KvNamespace> namespaces_ ABSL_GUARDED_BY(mu_);
  std::vector<uint32_t> roots_ ABSL_GUARDED_BY(mu_);  // per namespace
  // (last_access << 32 | node) of every evictable node: LRU order.
  absl::btree_set<std::pair<uint64_t, uint32_t>> evictable_ ABSL_GUARDED_BY(mu_);
  EvictionScoreFn eviction_score_ ABSL_GUARDED_BY(mu_);
  uint64_t clock_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t live_nodes_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t live_branches_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t live_pins_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t evicted_nodes_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t copied_pages_ ABSL_GUARDED_BY(mu_) = 0;
  // Plan scratch (reused across steps).
  uint32_t plan_epoch_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<PlanRow> plan_rows_ ABSL_GUARDED_BY(mu_);
  std::vector<uint32_t> plan_paths_ ABSL_GUARDED_BY(mu_);
  std::vector<int32_t> plan_path_begin_ ABSL_GUARDED_BY(mu_);
  std::vector<uint32_t> plan_order_ ABSL_GUARDED_BY(mu_);
  std::vector<int32_t> plan_segment_pages_ ABSL_GUARDED_BY(mu_);  // pages written so far, per segment
};

}  // namespace banyan::kv_tree

#endif  // BANYAN_KV_TREE_KV_TREE_H_

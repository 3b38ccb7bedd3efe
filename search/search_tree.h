// SearchTree: the bookkeeping every strategy shares. It holds the search's
// nodes (each a live engine branch until pruned), plans every engine request
// inside the budgets, derives request seeds, values nodes (value prompt, vote
// prompt, C++ scorer or Lua policy), records the trace and the cost, and
// releases every branch it created when it is destroyed.
//
//   SearchTree tree(engine, options, "tot-bfs");
//   BANYAN_ASSIGN_OR_RETURN(int64_t root, tree.CreateRoot());
//   BANYAN_ASSIGN_OR_RETURN(std::vector<int64_t> kids, tree.ExpandSampled(root, 3, step));
//   if (tree.stopped()) ...   // a budget, the deadline or cancellation ended the search
//
// Internal to search/ (strategies), not API. Not thread-safe: one search, one
// thread. Engine errors other than the soft stops (deadline, cancellation, KV
// budget exhausted) are returned; soft stops set stop_reason() and make
// expansions return nothing.
#ifndef BANYAN_SEARCH_SEARCH_TREE_H_
#define BANYAN_SEARCH_SEARCH_TREE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <deque>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "banyan/engine.h"
#include "scripting/lua_policy.h"
#include "search/strategy.h"

namespace banyan::search {

struct Node {
  int64_t id = 0;
  int64_t parent = -1;
  int32_t depth = 0;
  BranchId branch;
  std::string step_text;
  std::string path_text;  // steps from the root's first child down to here
  int64_t path_tokens = 0;
  int32_t tokens = 0;     // tokens this node added
  double logprob = 0;     // sum of its tokens' log-probabilities
  double value = 0;       // last value / MCTS mean
  double value_sum = 0;   // MCTS
  int64_t visits = 0;
  bool valued = false;
  bool terminal = false;  // EOS or max depth: not expanded further
  bool released = false;
  std::string answer;
  std::vector<int64_t> children;
};

class SearchTree {
 public:
  // `engine` and `options` are borrowed and must outlive the tree.
  SearchTree(Engine& engine, const SearchOptions& options, std::string_view strategy);
  ~SearchTree();  // releases every live branch
  SearchTree(const SearchTree&) = delete;
  SearchTree& operator=(const SearchTree&) = delete;

  // Validates the options shared by all strategies (kInvalidArgument).
  static absl::Status ValidateCommon(const SearchOptions& options);

  // The prompt's node (NewBranch). Must be called first, once.
  absl::StatusOr<int64_t> CreateRoot();

  // Samples up to `k` children of `node`, one step each (stop at the step
  // delimiter, or `stops` when given), at most `max_tokens` tokens each. k is
  // reduced to what the branch and token budgets can hold in the worst case;
  // returns the children created (possibly none when a budget, the deadline
  // or cancellation stops the search: see stopped()).
  absl::StatusOr<std::vector<int64_t>> ExpandSampled(
      int64_t node, int32_t k, int32_t max_tokens,
      const std::vector<std::string>* stops = nullptr, float temperature_override = -1);
  // Expands `node` the policy's way when it has expand() (a count to sample
  // or explicit continuations; nil: none), else samples `default_k` steps.
  absl::StatusOr<std::vector<int64_t>> Expand(int64_t node, int32_t default_k, int64_t iterations);
  // One child per continuation (Fork + Append): a policy's explicit steps.
  absl::StatusOr<std::vector<int64_t>> ExpandWith(int64_t node,
                                                  const std::vector<std::string>& continuations);

  // The node's value under options.evaluation (cached in the node; the
  // policy's score() for kPolicy, 0 for kNone). Records a SCORE event.
  absl::StatusOr<double> Value(int64_t node);
  // kModelVote: values for a set of siblings at once (their shares of the
  // model's vote); other evaluations value each node on its own.
  absl::StatusOr<std::vector<double>> ValueAll(const std::vector<int64_t>& nodes);

  // Releases the node's branch (its KV stays cached). Records PRUNE.
  absl::Status Prune(int64_t node);
  // Prunes every live node in the subtree under `node` (itself included).
  absl::Status PruneSubtree(int64_t node);

  // Budget, deadline and cancellation check before a decision. Returns true
  // (and sets stop_reason) when the search must stop.
  bool CheckStop();
  // Asks the policy's should_stop (when it has one). true: stop ("policy").
  absl::StatusOr<bool> PolicyWantsStop(int64_t iterations, int32_t depth);
  bool stopped() const { return !stop_reason_.empty(); }
  const std::string& stop_reason() const { return stop_reason_; }
  void Stop(std::string reason) {
    if (stop_reason_.empty()) stop_reason_ = std::move(reason);
  }
  int64_t TokensLeft() const;    // INT64_MAX when unlimited
  int64_t BranchesLeft() const;  // INT64_MAX when unlimited

  // Trace.
  void Record(proto::TraceEvent::Kind kind, int64_t node, const std::vector<int64_t>& children = {},
              double value = 0, std::string_view detail = {}, uint64_t seed = 0);

  // The policy's view of a node and the stats.
  scripting::NodeView View(const Node& node) const;
  scripting::SearchStats Stats(int64_t iterations, int32_t depth) const;
  // The callbacks' view of a node.
  NodeContext Context(const Node& node) const;

  Node& node(int64_t id) { return nodes_[static_cast<size_t>(id)]; }
  const Node& node(int64_t id) const { return nodes_[static_cast<size_t>(id)]; }
  int64_t size() const { return static_cast<int64_t>(nodes_.size()); }
  Engine& engine() { return engine_; }
  const SearchOptions& options() const { return options_; }
  SearchCost& cost() { return cost_; }
  // The Lua policy, or null.
  scripting::LuaPolicy* policy() const;
  // Counts one policy hook call.
  void CountPolicyCall() { ++cost_.policy_calls; }

  // kModelValue for one node, whatever options.evaluation says (the policy's
  // banyan.model_score).
  absl::StatusOr<double> ModelValue(const Node& n);

  // Fills result's cost, shape, trace (nodes, config, cost, answer, stop).
  void Finish(SearchResult& result);

  // The seed of the next engine request (derived from options.seed).
  uint64_t NextSeed();

 private:
  // Maps a soft engine failure to a stop reason; returns the status when hard.
  absl::Status SoftFail(const absl::Status& status);
  int64_t AddNode(int64_t parent, BranchId branch);
  GenerateOptions BaseGenerate() const;

  Engine& engine_;
  const SearchOptions& options_;
  absl::Time start_;
  absl::Time deadline_;
  SearchCost cost_;
  std::deque<Node> nodes_;  // stable references: callbacks may add nodes
  proto::SearchTrace trace_;
  std::string stop_reason_;
  uint64_t requests_ = 0;
  // While a policy and a cancel token are both given: a thread that forwards
  // the token to the sandbox, so a running hook stops at once.
  absl::Notification done_;
  std::thread cancel_watch_;
};

}  // namespace banyan::search

#endif  // BANYAN_SEARCH_SEARCH_TREE_H_

// LuaPolicy: a search policy written in Lua, run in a LuaSandbox. The script defines any of the
// hooks below as globals; the search layer calls them with plain C++ views and gets checked C++
// results back.
//
//   function expand(node, stats)  -> integer (children to sample) | list of strings (continuations)
//                                    | nil (do not expand)
//   function score(node)          -> number (finite)
//   function select(frontier)     -> 1-based index | list of distinct 1-based indices (a beam)
//   function should_stop(stats)   -> boolean
//   function answer(node)         -> string | nil (answer extraction, e.g. for voting)
//
// Defining select() replaces Lua's builtin select(n, ...) among the script's globals (alias it
// first, `local pick = select`, if the script needs both); a script that does not define it
// has no select hook.
// A node is a table {id, text, token_count, depth, score, visits, parent}; stats is
// {tokens_used, branches, elapsed_seconds, iterations, depth, max_tokens, max_branches}.
// Scripts also see a read-only table `banyan`:
//   banyan.text(id) -> string           banyan.token_count(id) -> integer
//   banyan.model_score(id) -> number     banyan.fork(id, continuation) -> new id
//   banyan.params                         read-only numbers given in LuaPolicyOptions::params
//   banyan.param(name, default)           params[name] or default
// The functions call the std::function callbacks of PolicyCallbacks; an unbound callback fails
// the call with kFailedPrecondition, a failing callback fails it with the callback's own status
// (neither can be caught by the script). Time inside callbacks is not charged to the deadline.
//
//   LuaPolicyOptions options;
//   options.params["k"] = 3;
//   BANYAN_ASSIGN_OR_RETURN(auto policy, LuaPolicy::LoadFile("tot_bfs.lua", options, callbacks));
//   BANYAN_ASSIGN_OR_RETURN(std::vector<size_t> keep, policy->Select(frontier));
//
// Budgets: each hook call is one sandbox call (instructions_per_call, time_per_call); the memory
// cap and instructions_total hold for the policy's whole life (see lua_sandbox.h).
// Errors: a missing hook -> kUnimplemented; a hook returning the wrong type or an out-of-range
// value -> kInvalidArgument naming the hook; script errors and budgets as in lua_sandbox.h. After
// any error the policy stays usable; script globals keep whatever the failed call had done.
//
// Thread-safety: not thread-safe; Cancel() may be called from any thread.
#ifndef BANYAN_SCRIPTING_LUA_POLICY_H_
#define BANYAN_SCRIPTING_LUA_POLICY_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "scripting/lua_sandbox.h"

namespace banyan::scripting {

// One node of the search tree as a policy sees it. Borrowed view: `text` must stay valid for
// the call it is passed to.
struct NodeView {
  int64_t id = 0;
  int64_t parent = -1;  // -1 for a root
  std::string_view text;
  int64_t token_count = 0;
  int depth = 0;
  double score = 0.0;   // the search layer's current value for the node (mean value for MCTS)
  int64_t visits = 0;
};

struct SearchStats {
  int64_t tokens_used = 0;
  int64_t branches = 0;
  double elapsed_seconds = 0.0;
  int64_t iterations = 0;
  int depth = 0;
  int64_t max_tokens = 0;    // 0 = no limit
  int64_t max_branches = 0;  // 0 = no limit
};

// What expand() asked for: either a number of children to sample, or explicit continuations.
struct ExpandResult {
  int64_t sample_count = 0;
  std::vector<std::string> continuations;
};

// Host functions behind the `banyan` table. Any may be empty.
struct PolicyCallbacks {
  std::function<absl::StatusOr<std::string>(int64_t node_id)> branch_text;
  std::function<absl::StatusOr<int64_t>(int64_t node_id)> token_count;
  std::function<absl::StatusOr<double>(int64_t node_id)> model_score;
  std::function<absl::StatusOr<int64_t>(int64_t node_id, std::string_view continuation)> fork;
};

struct LuaPolicyOptions {
  SandboxLimits limits;
  std::map<std::string, double> params;  // banyan.params
  bool pass_text = true;                 // include NodeView::text in node tables
  int64_t max_children = 1024;           // largest count / list expand() may return
};

class LuaPolicy {
 public:
  // Creates a sandbox, installs `banyan` and runs `script`'s top level. Errors: as Run in
  // lua_sandbox.h; kInvalidArgument when a hook name is bound to something not a function.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<LuaPolicy>> Load(
      std::string_view chunk_name, std::string_view script, const LuaPolicyOptions& options,
      PolicyCallbacks callbacks = {});
  // Reads `path` (kNotFound / kInvalidArgument when it cannot be read) and Loads it.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<LuaPolicy>> LoadFile(
      const std::string& path, const LuaPolicyOptions& options, PolicyCallbacks callbacks = {});

  LuaPolicy(const LuaPolicy&) = delete;
  LuaPolicy& operator=(const LuaPolicy&) = delete;
  ~LuaPolicy();

  bool has_expand() const { return refs_[kExpand] >= 0; }
  bool has_score() const { return refs_[kScore] >= 0; }
  bool has_select() const { return refs_[kSelect] >= 0; }
  bool has_should_stop() const { return refs_[kShouldStop] >= 0; }
  bool has_answer() const { return refs_[kAnswer] >= 0; }

  [[nodiscard]] absl::StatusOr<ExpandResult> Expand(const NodeView& node, const SearchStats& stats);
  [[nodiscard]] absl::StatusOr<double> Score(const NodeView& node);
  // Indices into `frontier` (0-based), in the order the script gave them. REQUIRES: non-empty.
  [[nodiscard]] absl::StatusOr<std::vector<size_t>> Select(absl::Span<const NodeView> frontier);
  [[nodiscard]] absl::StatusOr<bool> ShouldStop(const SearchStats& stats);
  [[nodiscard]] absl::StatusOr<std::optional<std::string>> Answer(const NodeView& node);

  void Cancel() { sandbox_->Cancel(); }
  void ResetCancel() { sandbox_->ResetCancel(); }
  LuaSandbox& sandbox() { return *sandbox_; }

 private:
  enum Hook { kExpand, kScore, kSelect, kShouldStop, kAnswer, kNumHooks };

  LuaPolicy(std::unique_ptr<LuaSandbox> sandbox, const LuaPolicyOptions& options,
            PolicyCallbacks callbacks);
  absl::Status InstallApi();
  absl::Status BindHooks();
  absl::Status RequireHook(Hook hook) const;
  // Calls `hook` inside the sandbox: `push(L)` leaves its `nargs` arguments
  // on the stack and `read(L)` takes its one result, returning what is wrong
  // with it (kInvalidArgument) or OK. REQUIRES: RequireHook(hook) passed.
  template <typename Push, typename Read>
  absl::Status CallHook(Hook hook, int nargs, const Push& push, const Read& read);
  void PushNode(lua_State* L, const NodeView& node) const;
  static void PushStats(lua_State* L, const SearchStats& stats);
  static int ApiCall(lua_State* L);

  std::unique_ptr<LuaSandbox> sandbox_;
  LuaPolicyOptions options_;
  PolicyCallbacks callbacks_;
  int refs_[kNumHooks] = {-1, -1, -1, -1, -1};  // registry references to the hook functions
  int builtin_select_ref_ = -1;
};

}  // namespace banyan::scripting

#endif  // BANYAN_SCRIPTING_LUA_POLICY_H_

// BoundPolicy: a scripting::LuaPolicy whose `banyan` API is bound to the
// search that is running it, so a script can read and grow the real tree:
//
//   banyan.text(id)         the node's path text (its steps below the prompt)
//   banyan.token_count(id)  tokens generated on the node's path
//   banyan.model_score(id)  the model's value of the node (value prompt scored
//                           with Engine::Score: P(good) / (P(good) + P(bad)))
//   banyan.fork(id, text)   a new child of the node (Engine::Fork + Append of
//                           `text`); returns the child's id
//
// Node ids are the search's node ids (the `id` field of node tables). Outside
// a running search every call fails with kFailedPrecondition; an unknown id is
// kInvalidArgument, a pruned one kNotFound; fork obeys the search's branch
// budget (kResourceExhausted). A failing call fails the hook with that status.
//
//   BANYAN_ASSIGN_OR_RETURN(std::unique_ptr<BoundPolicy> policy,
//                           BoundPolicy::LoadFile("tot_bfs.lua", {}));
//   options.policy = policy.get();
//   BANYAN_ASSIGN_OR_RETURN(SearchResult r, strategy->Run(*engine, options));
//
// Errors from Load / LoadFile are LuaPolicy's (the sandbox's Status with the
// Lua traceback). Not thread-safe: one search at a time.
#ifndef BANYAN_SEARCH_POLICY_BINDING_H_
#define BANYAN_SEARCH_POLICY_BINDING_H_

#include <memory>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "scripting/lua_policy.h"

namespace banyan::search {

class SearchTree;

class BoundPolicy {
 public:
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<BoundPolicy>> Load(
      std::string_view chunk_name, std::string_view script,
      const scripting::LuaPolicyOptions& options);
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<BoundPolicy>> LoadFile(
      const std::string& path, const scripting::LuaPolicyOptions& options);

  BoundPolicy(const BoundPolicy&) = delete;
  BoundPolicy& operator=(const BoundPolicy&) = delete;

  scripting::LuaPolicy& lua() { return *policy_; }
  const std::string& name() const { return name_; }

  // Binds the API to `tree` (null: unbound). Used by SearchTree for the
  // duration of a run.
  void Attach(SearchTree* tree) { tree_ = tree; }

 private:
  BoundPolicy() = default;
  scripting::PolicyCallbacks MakeCallbacks();
  absl::StatusOr<SearchTree*> Tree(int64_t id) const;

  SearchTree* tree_ = nullptr;
  std::string name_;
  std::unique_ptr<scripting::LuaPolicy> policy_;
};

}  // namespace banyan::search

#endif  // BANYAN_SEARCH_POLICY_BINDING_H_

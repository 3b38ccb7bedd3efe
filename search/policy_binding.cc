#include "search/policy_binding.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "banyan/status_macros.h"
#include "search/search_tree.h"

namespace banyan::search {

absl::StatusOr<std::unique_ptr<BoundPolicy>> BoundPolicy::Load(
    std::string_view chunk_name, std::string_view script,
    const scripting::LuaPolicyOptions& options) {
  std::unique_ptr<BoundPolicy> bound(new BoundPolicy());
  bound->name_ = std::string(chunk_name);
  BANYAN_ASSIGN_OR_RETURN(bound->policy_, scripting::LuaPolicy::Load(chunk_name, script, options,
                                                                      bound->MakeCallbacks()));
  return bound;
}

absl::StatusOr<std::unique_ptr<BoundPolicy>> BoundPolicy::LoadFile(
    const std::string& path, const scripting::LuaPolicyOptions& options) {
  std::unique_ptr<BoundPolicy> bound(new BoundPolicy());
  bound->name_ = path;
  BANYAN_ASSIGN_OR_RETURN(bound->policy_,
                          scripting::LuaPolicy::LoadFile(path, options, bound->MakeCallbacks()));
  return bound;
}

absl::StatusOr<SearchTree*> BoundPolicy::Tree(int64_t id) const {
  if (tree_ == nullptr) {
    return absl::FailedPreconditionError("banyan API: no search is running this policy");
  }
  if (id < 0 || id >= tree_->size()) {
    return absl::InvalidArgumentError(absl::StrCat("banyan API: no node ", id));
  }
  if (tree_->node(id).released) {
    return absl::NotFoundError(absl::StrCat("banyan API: node ", id, " was pruned"));
  }
  return tree_;
}

scripting::PolicyCallbacks BoundPolicy::MakeCallbacks() {
  // `this` is heap-allocated and owns the policy that holds these callbacks.
  scripting::PolicyCallbacks cb;
  cb.branch_text = [this](int64_t id) -> absl::StatusOr<std::string> {
    BANYAN_ASSIGN_OR_RETURN(SearchTree * tree, Tree(id));
    return tree->node(id).path_text;
  };
  cb.token_count = [this](int64_t id) -> absl::StatusOr<int64_t> {
    BANYAN_ASSIGN_OR_RETURN(SearchTree * tree, Tree(id));
    return tree->node(id).path_tokens;
  };
  cb.model_score = [this](int64_t id) -> absl::StatusOr<double> {
    BANYAN_ASSIGN_OR_RETURN(SearchTree * tree, Tree(id));
    return tree->ModelValue(tree->node(id));
  };
  cb.fork = [this](int64_t id, std::string_view continuation) -> absl::StatusOr<int64_t> {
    BANYAN_ASSIGN_OR_RETURN(SearchTree * tree, Tree(id));
    BANYAN_ASSIGN_OR_RETURN(std::vector<int64_t> kids,
                            tree->ExpandWith(id, {std::string(continuation)}));
    if (kids.empty()) {
      return absl::ResourceExhaustedError(
          absl::StrCat("banyan.fork: the search's budget is spent (", tree->stop_reason(), ")"));
    }
    return kids[0];
  };
  return cb;
}

}  // namespace banyan::search

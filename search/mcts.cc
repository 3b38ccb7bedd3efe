// Monte Carlo tree search over sampled steps.
//
// Each iteration: SELECTION walks from the root through expanded nodes by UCT
// (or the policy's select() over the children, which must name one index),
// EXPANSION samples `n` children of the leaf in one request (siblings share
// the leaf's KV), EVALUATION values each new child (the evaluation of
// SearchOptions, or, with rollout_tokens > 0, a greedy rollout of that length
// forked from the child, valued the same way and then released), BACKUP adds
// each child's value to every node on the path to the root. Nodes stay live
// engine branches across iterations, so later expansions fork from KV that is
// already there; nothing is re-prefilled. A leaf at max_depth or terminal
// (EOS) is not expanded: its value is backed up again. A policy's expand() may
// decline a leaf (nil: e.g. "value a leaf once before expanding it"): the leaf
// is valued and backed up, and offered to expand() again when next selected.
// The answer is the path of most-visited children from the root (ties: higher
// mean value, then lower id).
#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "banyan/status_macros.h"
#include "search/policy_binding.h"
#include "search/search_tree.h"
#include "search/strategies.h"

namespace banyan::search {
namespace {

class Mcts final : public Strategy {
 public:
  StrategyKind kind() const override { return StrategyKind::kMcts; }

  absl::StatusOr<SearchResult> Run(Engine& engine, const SearchOptions& o) override {
    BANYAN_RETURN_IF_ERROR(SearchTree::ValidateCommon(o));
    if (o.iterations < 1) return absl::InvalidArgumentError("mcts: iterations must be >= 1");
    if (!(o.exploration >= 0) || !std::isfinite(o.exploration)) {
      return absl::InvalidArgumentError("mcts: exploration must be finite and >= 0");
    }
    SearchTree tree(engine, o, StrategyName(kind()));
    BANYAN_ASSIGN_OR_RETURN(const int64_t root, tree.CreateRoot());
    int64_t it = 0;
    for (; it < o.iterations && !tree.CheckStop(); ++it) {
      // Selection.
      std::vector<int64_t> path = {root};
      while (!tree.node(path.back()).children.empty()) {
        BANYAN_ASSIGN_OR_RETURN(int64_t next, SelectChild(tree, path.back()));
        path.push_back(next);
      }
      const int64_t leaf = path.back();
      tree.Record(proto::TraceEvent::SELECT, leaf, {path.begin(), path.end()}, 0, "uct-path");
      const Node& l = tree.node(leaf);
      std::vector<int64_t> evaluated;
      if (l.terminal || l.depth >= o.max_depth) {
        evaluated.push_back(leaf);
      } else {
        BANYAN_ASSIGN_OR_RETURN(std::vector<int64_t> kids, tree.Expand(leaf, o.n, it));
        if (kids.empty()) {
          if (tree.stopped()) break;
          evaluated.push_back(leaf);  // the policy declined to expand it (yet): value it
        } else {
          evaluated = kids;
        }
      }
      for (int64_t c : evaluated) {
        BANYAN_ASSIGN_OR_RETURN(double v, Evaluate(tree, c));
        Backup(tree, path, c, v);
      }
      BANYAN_ASSIGN_OR_RETURN(bool stop, tree.PolicyWantsStop(it + 1, tree.node(leaf).depth));
      if (stop) break;
    }
    if (it >= o.iterations) tree.Stop("done");
    // The answer: most-visited path.
    int64_t cur = root;
    while (!tree.node(cur).children.empty()) {
      int64_t best = -1;
      for (int64_t c : tree.node(cur).children) {
        const Node& n = tree.node(c);
        if (n.visits == 0) continue;
        if (best < 0 || n.visits > tree.node(best).visits ||
            (n.visits == tree.node(best).visits && n.value > tree.node(best).value)) {
          best = c;
        }
      }
      if (best < 0) break;
      cur = best;
    }
    SearchResult result;
    const Node& b = tree.node(cur);
    result.answer = b.path_text;
    result.best_text = b.path_text;
    result.best_value = b.value;
    tree.Record(proto::TraceEvent::SELECT, cur, {cur}, b.value, "most-visited");
    tree.Finish(result);
    return result;
  }

 private:
  absl::StatusOr<int64_t> SelectChild(SearchTree& tree, int64_t id) {
    const Node& n = tree.node(id);
    scripting::LuaPolicy* p = tree.policy();
    if (p != nullptr && p->has_select()) {
      std::vector<scripting::NodeView> views;
      for (int64_t c : n.children) views.push_back(tree.View(tree.node(c)));
      tree.CountPolicyCall();
      BANYAN_ASSIGN_OR_RETURN(std::vector<size_t> pick, p->Select(views));
      if (pick.size() != 1) {
        return absl::InvalidArgumentError(absl::StrCat(
            "mcts: the policy's select() must name one child, it named ", pick.size()));
      }
      return n.children[pick[0]];
    }
    int64_t best = -1;
    double best_uct = -std::numeric_limits<double>::infinity();
    for (int64_t c : n.children) {
      const Node& child = tree.node(c);
      const double u = Uct(child.value_sum, child.visits, n.visits, tree.options().exploration);
      if (best < 0 || u > best_uct) {
        best = c;
        best_uct = u;
      }
    }
    return best;
  }

  absl::StatusOr<double> Evaluate(SearchTree& tree, int64_t id) {
    const SearchOptions& o = tree.options();
    if (o.rollout_tokens <= 0 || tree.node(id).terminal) return tree.Value(id);
    // A greedy rollout forked from the node, valued, then released.
    static const std::vector<std::string> kNoStops;
    BANYAN_ASSIGN_OR_RETURN(std::vector<int64_t> r,
                            tree.ExpandSampled(id, 1, o.rollout_tokens, &kNoStops, 0.0f));
    if (r.empty()) return tree.Value(id);
    BANYAN_ASSIGN_OR_RETURN(double v, tree.Value(r[0]));
    tree.Record(proto::TraceEvent::SCORE, id, {r[0]}, v, "rollout");
    BANYAN_RETURN_IF_ERROR(tree.Prune(r[0]));
    // The rollout is not part of the tree the search walks.
    auto& kids = tree.node(id).children;
    kids.erase(std::remove(kids.begin(), kids.end(), r[0]), kids.end());
    return v;
  }

  static void Backup(SearchTree& tree, const std::vector<int64_t>& path, int64_t child, double v) {
    auto add = [&](int64_t id) {
      Node& n = tree.node(id);
      ++n.visits;
      n.value_sum += v;
      n.value = n.value_sum / static_cast<double>(n.visits);
    };
    if (child != path.back()) add(child);
    for (int64_t id : path) add(id);
    tree.Record(proto::TraceEvent::BACKUP, child, {}, v);
  }
};

}  // namespace

std::unique_ptr<Strategy> NewMcts() { return std::make_unique<Mcts>(); }

}  // namespace banyan::search

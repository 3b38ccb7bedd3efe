// Tree of thought (Yao et al., 2023) and beam search over sampled steps.
//
// BFS: level by level, every frontier node proposes `n` next steps (sampled up
// to the step delimiter, all of a level's proposals of one node in one
// request, siblings sharing the node's KV), every proposal is valued
// (SearchOptions::evaluation) and the best `beam_width` are kept (or the ones
// the policy's select() names); the others are pruned. Terminal nodes (EOS)
// (and nodes a policy's expand() declines) stay in the frontier unexpanded; a
// level that expands nothing ends the search. The answer is the best node of the
// last frontier.
// Beam: the same loop, ranked by the path's mean token log-probability when
// evaluation is kNone (classic beam search over steps), else by the value.
// DFS: expand the node, value its children, visit them best first; a child
// valued below value_threshold is pruned; a node at max_depth (or terminal)
// with value >= threshold is a solution and ends the search ("solved"); a
// subtree that yields none is pruned on the way back (BACKTRACK). A search
// that finds none stops "unsolved" and answers with the best-valued node it
// saw, pruned or not (best_value says how far below the threshold).
#include <algorithm>
#include <cmath>
#include <limits>

#include "banyan/status_macros.h"
#include "search/policy_binding.h"
#include "search/search_tree.h"
#include "search/strategies.h"

namespace banyan::search {
namespace {

class TreeOfThought final : public Strategy {
 public:
  explicit TreeOfThought(StrategyKind kind) : kind_(kind) {}
  StrategyKind kind() const override { return kind_; }

  absl::StatusOr<SearchResult> Run(Engine& engine, const SearchOptions& o) override {
    BANYAN_RETURN_IF_ERROR(SearchTree::ValidateCommon(o));
    if (o.beam_width < 1) return absl::InvalidArgumentError("tree search: beam_width must be >= 1");
    SearchTree tree(engine, o, StrategyName(kind_));
    BANYAN_ASSIGN_OR_RETURN(const int64_t root, tree.CreateRoot());
    SearchResult result;
    int64_t best = root;
    if (kind_ == StrategyKind::kTotDfs) {
      double best_value = -std::numeric_limits<double>::infinity();
      int64_t iterations = 0;
      BANYAN_ASSIGN_OR_RETURN(bool solved, Dfs(tree, root, iterations, best, best_value));
      // Unsolved, the answer is the best-valued node seen (pruned or not).
      if (!tree.stopped()) tree.Stop(solved ? "solved" : "unsolved");
    } else {
      BANYAN_ASSIGN_OR_RETURN(best, Bfs(tree, root));
    }
    const Node& b = tree.node(best);
    result.best_text = b.path_text;
    result.answer = b.path_text;
    result.best_value = b.value;
    tree.Record(proto::TraceEvent::SELECT, best, {best}, b.value, "answer");
    tree.Finish(result);
    return result;
  }

 private:
  // The ranking value of a node.
  absl::StatusOr<std::vector<double>> Rank(SearchTree& tree, const std::vector<int64_t>& nodes) {
    if (kind_ == StrategyKind::kBeam && tree.options().evaluation == Evaluation::kNone) {
      std::vector<double> v;
      for (int64_t id : nodes) {
        Node& n = tree.node(id);
        // Mean token log-probability of the whole path.
        double lp = 0;
        for (int64_t cur = id; cur > 0; cur = tree.node(cur).parent) lp += tree.node(cur).logprob;
        n.value = n.path_tokens > 0 ? lp / static_cast<double>(n.path_tokens) : 0.0;
        n.valued = true;
        tree.Record(proto::TraceEvent::SCORE, id, {}, n.value, "path-logprob");
        v.push_back(n.value);
      }
      return v;
    }
    return tree.ValueAll(nodes);
  }

  // Indices of the kept candidates.
  absl::StatusOr<std::vector<size_t>> Keep(SearchTree& tree, const std::vector<int64_t>& cands,
                                           const std::vector<double>& values) {
    const size_t width = static_cast<size_t>(tree.options().beam_width);
    scripting::LuaPolicy* p = tree.policy();
    if (p == nullptr || !p->has_select()) return TopK(values, width);
    std::vector<scripting::NodeView> views;
    for (int64_t id : cands) views.push_back(tree.View(tree.node(id)));
    tree.CountPolicyCall();
    return p->Select(views);
  }

  absl::StatusOr<int64_t> Bfs(SearchTree& tree, int64_t root) {
    const SearchOptions& o = tree.options();
    std::vector<int64_t> frontier = {root};
    for (int32_t depth = 1; depth <= o.max_depth; ++depth) {
      std::vector<int64_t> cands;
      bool expanded = false;
      for (int64_t id : frontier) {
        if (tree.node(id).terminal || tree.stopped()) {
          cands.push_back(id);
          continue;
        }
        BANYAN_ASSIGN_OR_RETURN(std::vector<int64_t> kids, tree.Expand(id, o.n, depth));
        if (kids.empty()) {
          cands.push_back(id);  // not expanded (a policy's nil, or a budget): stays a candidate
        } else {
          expanded = true;
          cands.insert(cands.end(), kids.begin(), kids.end());
        }
      }
      if (!expanded) break;
      BANYAN_ASSIGN_OR_RETURN(std::vector<double> values, Rank(tree, cands));
      BANYAN_ASSIGN_OR_RETURN(std::vector<size_t> keep, Keep(tree, cands, values));
      std::vector<int64_t> next;
      std::vector<bool> kept(cands.size(), false);
      for (size_t i : keep) {
        kept[i] = true;
        next.push_back(cands[i]);
      }
      tree.Record(proto::TraceEvent::SELECT, -1, next, 0, "beam");
      for (size_t i = 0; i < cands.size(); ++i) {
        if (!kept[i]) BANYAN_RETURN_IF_ERROR(tree.Prune(cands[i]));
      }
      frontier = std::move(next);
      if (tree.stopped()) break;
      BANYAN_ASSIGN_OR_RETURN(bool stop, tree.PolicyWantsStop(depth, depth));
      if (stop) break;
      if (std::all_of(frontier.begin(), frontier.end(),
                      [&](int64_t id) { return tree.node(id).terminal; })) {
        break;
      }
    }
    // The best of the last frontier (it was ranked; ties: first kept).
    int64_t best = frontier.front();
    for (int64_t id : frontier) {
      if (tree.node(id).value > tree.node(best).value) best = id;
    }
    return best;
  }

  // Returns whether a solution was found under `id`.
  absl::StatusOr<bool> Dfs(SearchTree& tree, int64_t id, int64_t& iterations, int64_t& best,
                           double& best_value) {
    const SearchOptions& o = tree.options();
    const Node& n = tree.node(id);  // (valued, and counted for `best`, when its parent expanded)
    if (id != 0 && (n.depth >= o.max_depth || n.terminal)) {
      if (n.value >= o.value_threshold) {
        best = id;
        best_value = n.value;
        return true;
      }
      return false;
    }
    ++iterations;
    BANYAN_ASSIGN_OR_RETURN(bool stop, tree.PolicyWantsStop(iterations, n.depth));
    if (stop) return false;
    BANYAN_ASSIGN_OR_RETURN(std::vector<int64_t> kids, tree.Expand(id, o.n, iterations));
    if (kids.empty()) return false;
    BANYAN_ASSIGN_OR_RETURN(std::vector<double> values, tree.ValueAll(kids));
    for (size_t i = 0; i < kids.size(); ++i) {
      if (values[i] > best_value) {
        best_value = values[i];
        best = kids[i];
      }
    }
    std::vector<size_t> order;
    scripting::LuaPolicy* p = tree.policy();
    if (p != nullptr && p->has_select()) {
      BANYAN_ASSIGN_OR_RETURN(order, Keep(tree, kids, values));
    } else {
      order = TopK(values, values.size());
    }
    std::vector<bool> visited(kids.size(), false);
    bool solved = false;
    for (size_t i : order) {
      visited[i] = true;
      if (solved || tree.stopped() || values[i] < o.value_threshold) {
        BANYAN_RETURN_IF_ERROR(tree.PruneSubtree(kids[i]));
        continue;
      }
      tree.Record(proto::TraceEvent::SELECT, id, {kids[i]}, values[i], "visit");
      BANYAN_ASSIGN_OR_RETURN(solved, Dfs(tree, kids[i], iterations, best, best_value));
      if (!solved) BANYAN_RETURN_IF_ERROR(tree.PruneSubtree(kids[i]));
    }
    for (size_t i = 0; i < kids.size(); ++i) {
      if (!visited[i]) BANYAN_RETURN_IF_ERROR(tree.PruneSubtree(kids[i]));
    }
    if (!solved) tree.Record(proto::TraceEvent::BACKTRACK, id);
    return solved;
  }

  StrategyKind kind_;
};

}  // namespace

std::unique_ptr<Strategy> NewTreeOfThought(StrategyKind kind) {
  return std::make_unique<TreeOfThought>(kind);
}

}  // namespace banyan::search

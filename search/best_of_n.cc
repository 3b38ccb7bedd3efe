// Best-of-N with a verifier: N complete samples from the prompt (one Fork +
// GenerateMany: they share the prompt's KV), each judged by the verifier
// callback (accepted or not, with a score) or, without one, valued by the
// evaluation; the answer is the highest-scoring accepted sample (ties: lower
// id). With a verifier and no accepted sample the answer is empty.
#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "banyan/status_macros.h"
#include "search/search_tree.h"
#include "search/strategies.h"

namespace banyan::search {
namespace {

class BestOfN final : public Strategy {
 public:
  StrategyKind kind() const override { return StrategyKind::kBestOfN; }

  absl::StatusOr<SearchResult> Run(Engine& engine, const SearchOptions& o) override {
    BANYAN_RETURN_IF_ERROR(SearchTree::ValidateCommon(o));
    SearchTree tree(engine, o, StrategyName(kind()));
    BANYAN_ASSIGN_OR_RETURN(const int64_t root, tree.CreateRoot());
    SearchResult result;
    int64_t best = -1;
    double best_score = 0;
    int64_t done = 0;
    const int32_t wave = o.wave_size > 0 ? o.wave_size : o.n;
    while (done < o.n && !tree.CheckStop()) {
      const int32_t k = static_cast<int32_t>(std::min<int64_t>(wave, o.n - done));
      BANYAN_ASSIGN_OR_RETURN(std::vector<int64_t> kids,
                              tree.ExpandSampled(root, k, o.sample_tokens, &o.stop_strings));
      if (kids.empty()) break;
      done += static_cast<int64_t>(kids.size());
      for (int64_t kid : kids) {
        Verdict verdict;
        if (o.verifier) {
          BANYAN_ASSIGN_OR_RETURN(verdict, o.verifier(tree.Context(tree.node(kid))));
          if (!std::isfinite(verdict.score)) {
            return absl::InvalidArgumentError("best-of-n: the verifier's score is not finite");
          }
          Node& n = tree.node(kid);
          n.value = verdict.score;
          n.valued = true;
          tree.Record(proto::TraceEvent::SCORE, kid, {}, verdict.score,
                      verdict.accepted ? "accepted" : "rejected");
        } else {
          BANYAN_ASSIGN_OR_RETURN(verdict.score, tree.Value(kid));
          verdict.accepted = true;
        }
        if (verdict.accepted && (best < 0 || verdict.score > best_score)) {
          best = kid;
          best_score = verdict.score;
        }
        BANYAN_RETURN_IF_ERROR(tree.Prune(kid));
      }
      BANYAN_ASSIGN_OR_RETURN(bool stop, tree.PolicyWantsStop(done, 1));
      if (stop) break;
    }
    if (best >= 0) {
      result.answer = tree.node(best).path_text;
      result.best_text = result.answer;
      result.best_value = best_score;
      tree.Record(proto::TraceEvent::SELECT, best, {best}, best_score, "best");
    }
    tree.Finish(result);
    return result;
  }
};

}  // namespace

std::unique_ptr<Strategy> NewBestOfN() { return std::make_unique<BestOfN>(); }

}  // namespace banyan::search

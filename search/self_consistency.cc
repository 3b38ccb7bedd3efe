// Self-consistency (Wang et al., 2022): sample complete answers from the
// prompt in waves (one Fork + GenerateMany per wave: the samples share the
// prompt's KV), extract each sample's answer (AnswerExtractor or the policy's
// answer()), vote (one vote each, or weighted), and stop early once the
// leader cannot be overtaken by the samples left (VoteTally::Decided).
//
// With a Lua policy: expand(root) sizes each wave (nil: stop), answer()
// replaces the regex, score() sees every sample (recorded in the trace, not a
// weight), should_stop() runs after every wave.
//
// Weights in weighted mode: the scorer's value when SearchOptions::scorer is
// set (it must lie in [0, 1]), else the sample's length-normalized probability
// exp(mean token logprob), in (0, 1]. Either way a sample adds at most 1.
#include <algorithm>
#include <cmath>
#include <optional>

#include "absl/strings/str_cat.h"
#include "banyan/status_macros.h"
#include "search/answer_extractor.h"
#include "search/policy_binding.h"
#include "search/search_tree.h"
#include "search/strategies.h"

namespace banyan::search {
namespace {

class SelfConsistency final : public Strategy {
 public:
  StrategyKind kind() const override { return StrategyKind::kSelfConsistency; }

  absl::StatusOr<SearchResult> Run(Engine& engine, const SearchOptions& o) override {
    BANYAN_RETURN_IF_ERROR(SearchTree::ValidateCommon(o));
    BANYAN_ASSIGN_OR_RETURN(AnswerExtractor extractor,
                            o.answer_pattern.empty() ? AnswerExtractor::Create()
                                                     : AnswerExtractor::Create(o.answer_pattern));
    SearchTree tree(engine, o, StrategyName(kind()));
    SearchResult result;
    BANYAN_ASSIGN_OR_RETURN(const int64_t root, tree.CreateRoot());
    scripting::LuaPolicy* policy = tree.policy();
    const int32_t wave = WaveSize(o.n, o.wave_size);
    VoteTally tally;
    int64_t done = 0;
    int64_t waves = 0;
    std::vector<std::pair<std::string, int64_t>> sample_of_answer;
    while (done < o.n && !tree.CheckStop()) {
      int32_t k = static_cast<int32_t>(std::min<int64_t>(wave, o.n - done));
      if (policy != nullptr && policy->has_expand()) {
        // The policy sizes each wave (nil / 0: no more samples).
        tree.CountPolicyCall();
        BANYAN_ASSIGN_OR_RETURN(scripting::ExpandResult e,
                                policy->Expand(tree.View(tree.node(root)), tree.Stats(waves, 0)));
        if (e.sample_count <= 0) {
          tree.Stop("policy");
          break;
        }
        k = static_cast<int32_t>(std::min<int64_t>(e.sample_count, o.n - done));
      }
      BANYAN_ASSIGN_OR_RETURN(std::vector<int64_t> kids,
                              tree.ExpandSampled(root, k, o.sample_tokens, &o.stop_strings));
      if (kids.empty()) break;
      done += static_cast<int64_t>(kids.size());
      ++waves;
      for (int64_t kid : kids) {
        std::optional<std::string> answer;
        if (policy != nullptr && policy->has_answer()) {
          tree.CountPolicyCall();
          BANYAN_ASSIGN_OR_RETURN(answer, policy->Answer(tree.View(tree.node(kid))));
          if (answer.has_value()) answer = AnswerExtractor::Normalize(*answer);
        } else {
          answer = extractor.Extract(tree.node(kid).path_text);
        }
        double weight = 1.0;
        if (o.weighted_vote) {
          if (o.scorer) {
            BANYAN_ASSIGN_OR_RETURN(weight, o.scorer(tree.Context(tree.node(kid))));
            if (!(weight >= 0 && weight <= 1)) {
              return absl::InvalidArgumentError(absl::StrCat(
                  "self-consistency: a vote weight must lie in [0, 1], the scorer gave ", weight));
            }
          } else {
            const Node& n = tree.node(kid);
            weight = n.tokens > 0 ? std::exp(n.logprob / n.tokens) : 1.0;
          }
        }
        Node& n = tree.node(kid);
        if (answer.has_value() && !answer->empty()) {
          n.answer = *answer;
          n.value = weight;
          tally.Add(*answer, weight);
          sample_of_answer.emplace_back(*answer, kid);
        } else {
          tally.AddAbstention();
        }
        tree.Record(proto::TraceEvent::VOTE, kid, {}, weight, n.answer);
        if (policy != nullptr && policy->has_score()) {
          // The policy sees every sample (e.g. to keep its own tally for should_stop).
          tree.CountPolicyCall();
          BANYAN_ASSIGN_OR_RETURN(double s, policy->Score(tree.View(tree.node(kid))));
          tree.Record(proto::TraceEvent::SCORE, kid, {}, s, "policy");
        }
        // The sample is complete: release its branch (its KV stays cached).
        BANYAN_RETURN_IF_ERROR(tree.Prune(kid));
      }
      if (tally.Decided(o.n - done, 1.0)) {
        tree.Stop(done < o.n ? "decided" : "done");
        break;
      }
      BANYAN_ASSIGN_OR_RETURN(bool stop, tree.PolicyWantsStop(waves, 1));
      if (stop) break;
    }
    result.votes = tally.Ranking();
    const VoteEntry leader = tally.Leader();
    result.answer = leader.answer;
    result.best_value = leader.weight;
    for (const auto& [answer, kid] : sample_of_answer) {
      if (answer == leader.answer) {
        result.best_text = tree.node(kid).path_text;
        tree.Record(proto::TraceEvent::SELECT, kid, {kid}, leader.weight, leader.answer);
        break;
      }
    }
    tree.Finish(result);
    return result;
  }
};

}  // namespace

std::unique_ptr<Strategy> NewSelfConsistency() { return std::make_unique<SelfConsistency>(); }

}  // namespace banyan::search

// Strategies against the counting backend (sdk/engine/testing/counting_backend.h):
// a real engine over a deterministic model where token t is followed by t + 1
// (logit 8) or t + 2 (logit 6), so expectations are exact.
#include "search/strategy.h"

#include <cmath>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <thread>

#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "sdk/base/status_testing.h"
#include "sdk/base/utf8.h"
#include "sdk/engine/testing/counting_backend.h"
#include "search/strategies.h"

namespace banyan::search {
namespace {

using ::banyan::engine::testing::CountingBackendOptions;
using ::banyan::engine::testing::CreateCountingEngine;
using ::banyan::engine::testing::ExpectedLogprob;
using ::banyan::testing::StatusIs;
using ::testing::ElementsAre;

std::unique_ptr<Engine> MakeEngine(CountingBackendOptions model = {}) {
  auto engine = CreateCountingEngine(model, EngineOptions{});
  EXPECT_TRUE(engine.ok()) << engine.status();
  return std::move(engine).value();
}

SearchOptions Greedy(std::string prompt) {
  SearchOptions o;
  o.prompt = std::move(prompt);
  o.sampling.temperature = 0;
  o.step_delimiter = "";
  return o;
}

SearchOptions TopTwo(std::string prompt, uint64_t seed) {
  SearchOptions o = Greedy(std::move(prompt));
  o.sampling.temperature = 1;
  o.sampling.top_k = 2;
  o.seed = seed;
  return o;
}

// Every character of a counting path is the previous one + 1 or + 2.
bool IsCountingPath(char start, const std::string& text) {
  char prev = start;
  for (char c : text) {
    if (c != prev + 1 && c != prev + 2) return false;
    prev = c;
  }
  return true;
}

std::vector<const proto::TraceEvent*> Events(const SearchResult& r, proto::TraceEvent::Kind k) {
  std::vector<const proto::TraceEvent*> out;
  for (const auto& e : r.trace.events()) {
    if (e.kind() == k) out.push_back(&e);
  }
  return out;
}

absl::StatusOr<SearchResult> RunKind(StrategyKind kind, Engine& engine, const SearchOptions& o) {
  return CreateStrategy(kind)->Run(engine, o);
}

TEST(StrategyPureTest, NamesRoundTrip) {
  for (StrategyKind k : {StrategyKind::kSelfConsistency, StrategyKind::kTotBfs,
                         StrategyKind::kTotDfs, StrategyKind::kMcts, StrategyKind::kBestOfN,
                         StrategyKind::kBeam}) {
    BANYAN_ASSERT_OK_AND_ASSIGN(StrategyKind parsed, ParseStrategyKind(StrategyName(k)));
    EXPECT_EQ(parsed, k);
  }
  EXPECT_THAT(ParseStrategyKind("bogo").status(),
              StatusIs(absl::StatusCode::kInvalidArgument, ::testing::HasSubstr("tot-bfs")));
}

TEST(StrategyPureTest, UctAndTopK) {
  EXPECT_TRUE(std::isinf(Uct(0, 0, 5, 1.4)));
  EXPECT_DOUBLE_EQ(Uct(3.0, 4, 10, 0.0), 0.75);
  EXPECT_DOUBLE_EQ(Uct(1.0, 2, 8, 2.0), 0.5 + 2.0 * std::sqrt(std::log(8.0) / 2.0));
  // Fewer visits -> larger exploration bonus.
  EXPECT_GT(Uct(1, 1, 10, 1.4), Uct(2, 2, 10, 1.4));
  EXPECT_THAT(TopK({0.5, 0.9, 0.5, 0.1}, 3), ElementsAre(1, 0, 2));
  EXPECT_THAT(TopK({1, 1}, 5), ElementsAre(0, 1));
  EXPECT_EQ(WaveSize(16, 0), 4);
  EXPECT_EQ(WaveSize(3, 0), 1);
  EXPECT_EQ(WaveSize(3, 8), 3);
}

TEST(StrategyPureTest, BadOptions) {
  auto engine = MakeEngine();
  SearchOptions o = Greedy("");
  EXPECT_THAT(RunKind(StrategyKind::kSelfConsistency, *engine, o).status(),
              StatusIs(absl::StatusCode::kInvalidArgument));
  o = Greedy("a");
  o.n = 0;
  EXPECT_THAT(RunKind(StrategyKind::kTotBfs, *engine, o).status(),
              StatusIs(absl::StatusCode::kInvalidArgument));
  o = Greedy("a");
  o.evaluation = Evaluation::kCallback;  // no scorer
  EXPECT_THAT(RunKind(StrategyKind::kMcts, *engine, o).status(),
              StatusIs(absl::StatusCode::kInvalidArgument));
  o = Greedy("a");
  o.answer_pattern = "(";
  EXPECT_THAT(RunKind(StrategyKind::kSelfConsistency, *engine, o).status(),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_EQ(engine->Stats().live_branches, 0);
}

TEST(SelfConsistencyTest, GreedyStopsOnceDecided) {
  auto engine = MakeEngine();
  SearchOptions o = Greedy("a");
  o.n = 8;
  o.wave_size = 2;
  o.sample_tokens = 3;
  o.answer_pattern = "([a-z])";
  BANYAN_ASSERT_OK_AND_ASSIGN(SearchResult r, RunKind(StrategyKind::kSelfConsistency, *engine, o));
  // Every sample is "bcd". After waves of 2: 2 > 6? 4 > 4? 6 > 2: decided after 6 samples.
  EXPECT_EQ(r.answer, "d");
  EXPECT_EQ(r.best_text, "bcd");
  EXPECT_EQ(r.stop_reason, "decided");
  ASSERT_EQ(r.votes.size(), 1u);
  EXPECT_EQ(r.votes[0].count, 6);
  EXPECT_DOUBLE_EQ(r.votes[0].weight, 6.0);
  EXPECT_EQ(r.cost.tokens_generated, 18);
  EXPECT_EQ(r.cost.branches_created, 7);
  EXPECT_EQ(r.cost.generate_calls, 3);
  EXPECT_EQ(Events(r, proto::TraceEvent::VOTE).size(), 6u);
  EXPECT_EQ(r.nodes, 7);
  EXPECT_EQ(r.max_depth, 1);
  EXPECT_EQ(engine->Stats().live_branches, 0);
  // The prompt was prefilled once: every sample is a fork of it.
  EXPECT_EQ(engine->Stats().tokens_prefilled, 1);
}

TEST(SelfConsistencyTest, SampledVotesMatchTheSamplesAndReplay) {
  auto engine = MakeEngine();
  SearchOptions o = TopTwo("a", 11);
  o.n = 16;
  o.wave_size = 4;
  o.sample_tokens = 4;
  o.answer_pattern = "([a-z])";
  BANYAN_ASSERT_OK_AND_ASSIGN(SearchResult r, RunKind(StrategyKind::kSelfConsistency, *engine, o));
  // Recount the votes from the samples the trace kept.
  std::map<std::string, int> counts;
  int samples = 0;
  for (const auto& n : r.trace.nodes()) {
    if (n.parent() != 0) continue;
    ++samples;
    EXPECT_TRUE(IsCountingPath('a', n.text())) << n.text();
    EXPECT_EQ(n.answer(), n.text().substr(n.text().size() - 1));
    ++counts[n.answer()];
  }
  int total = 0;
  for (const VoteEntry& v : r.votes) {
    EXPECT_EQ(counts[v.answer], v.count);
    total += v.count;
  }
  EXPECT_EQ(total, samples);
  int best = 0;
  for (const auto& [a, c] : counts) best = std::max(best, c);
  EXPECT_EQ(counts[r.answer], best);
  // Same seed: the same decisions.
  BANYAN_ASSERT_OK_AND_ASSIGN(SearchResult again, RunKind(StrategyKind::kSelfConsistency, *engine, o));
  BANYAN_EXPECT_OK(CompareDecisions(r.trace, again.trace));
}

TEST(SelfConsistencyTest, WeightedVotesUseSequenceProbability) {
  CountingBackendOptions model;
  auto engine = MakeEngine(model);
  SearchOptions o = TopTwo("a", 5);
  o.n = 6;
  o.wave_size = 6;
  o.sample_tokens = 3;
  o.answer_pattern = "([a-z])";
  o.weighted_vote = true;
  BANYAN_ASSERT_OK_AND_ASSIGN(SearchResult r, RunKind(StrategyKind::kSelfConsistency, *engine, o));
  for (const proto::TraceEvent* e : Events(r, proto::TraceEvent::VOTE)) {
    const std::string& text = r.trace.nodes(static_cast<int>(e->node())).text();
    double lp = 0;
    char prev = 'a';
    for (char c : text) {
      lp += ExpectedLogprob(model, prev, c);
      prev = c;
    }
    EXPECT_NEAR(e->value(), std::exp(lp / static_cast<double>(text.size())), 1e-5) << text;
  }
}

TEST(TreeOfThoughtTest, BfsKeepsTheBestByScorer) {
  auto engine = MakeEngine();
  SearchOptions o = TopTwo("a", 3);
  o.n = 3;
  o.beam_width = 2;
  o.max_depth = 3;
  o.step_tokens = 2;
  o.evaluation = Evaluation::kCallback;
  o.scorer = [](const NodeContext& n) -> absl::StatusOr<double> {
    return static_cast<double>(n.path_text.back());
  };
  BANYAN_ASSERT_OK_AND_ASSIGN(SearchResult r, RunKind(StrategyKind::kTotBfs, *engine, o));
  // 1 root + 3 + 2*3 + 2*3 nodes, 2 tokens each.
  EXPECT_EQ(r.cost.branches_created, 16);
  EXPECT_EQ(r.cost.tokens_generated, 30);
  EXPECT_EQ(r.max_depth, 3);
  EXPECT_EQ(Events(r, proto::TraceEvent::PRUNE).size(), 1u + 4u + 4u);
  // Each level keeps the top two of its candidates (ties: lower id).
  std::map<int64_t, double> value;
  for (const proto::TraceEvent* e : Events(r, proto::TraceEvent::SCORE)) value[e->node()] = e->value();
  for (const auto& n : r.trace.nodes()) {
    if (n.parent() < 0) continue;
    const std::string parent_last = n.parent() == 0 ? "a" : r.trace.nodes(n.parent()).text();
    EXPECT_TRUE(IsCountingPath(parent_last.back(), n.text()));
  }
  std::vector<const proto::TraceEvent*> selects;
  for (const proto::TraceEvent* e : Events(r, proto::TraceEvent::SELECT)) {
    if (e->detail() == "beam") selects.push_back(e);
  }
  ASSERT_EQ(selects.size(), 3u);
  for (const proto::TraceEvent* s : selects) {
    ASSERT_EQ(s->children_size(), 2);
    std::vector<int64_t> level;
    for (const auto& n : r.trace.nodes()) {
      if (r.trace.nodes(static_cast<int>(s->children(0))).depth() == n.depth() && n.parent() >= 0) {
        level.push_back(n.id());
      }
    }
    std::vector<double> vals;
    for (int64_t id : level) vals.push_back(value[id]);
    std::vector<size_t> top = TopK(vals, 2);
    EXPECT_EQ(s->children(0), level[top[0]]);
    EXPECT_EQ(s->children(1), level[top[1]]);
  }
  EXPECT_EQ(r.best_value, value[selects.back()->children(0)]);
  EXPECT_EQ(engine->Stats().tokens_prefilled, 1);
  EXPECT_EQ(engine->Stats().live_branches, 0);
}

TEST(TreeOfThoughtTest, ModelValuePromptIsExact) {
  CountingBackendOptions model;
  auto engine = MakeEngine(model);
  SearchOptions o = Greedy("a");
  o.n = 2;
  o.beam_width = 1;
  o.max_depth = 2;
  o.step_tokens = 2;
  o.evaluation = Evaluation::kModelValue;
  o.value_prompt = "?";
  o.value_good = "@";  // '?' + 1: the model's first choice
  o.value_bad = "B";   // '?' + 3: an unranked token
  BANYAN_ASSERT_OK_AND_ASSIGN(SearchResult r, RunKind(StrategyKind::kTotBfs, *engine, o));
  const double good = ExpectedLogprob(model, '?', '@');
  const double bad = ExpectedLogprob(model, '?', 'B');
  const auto scores = Events(r, proto::TraceEvent::SCORE);
  ASSERT_EQ(scores.size(), 4u);
  for (const auto* e : scores) EXPECT_NEAR(e->value(), 1.0 / (1.0 + std::exp(bad - good)), 1e-6);
  EXPECT_EQ(r.cost.score_calls, 8);
  EXPECT_EQ(r.cost.tokens_scored, 16);
  EXPECT_EQ(r.answer, "bcde");
}

TEST(TreeOfThoughtTest, ModelVoteSharesTheVote) {
  auto engine = MakeEngine();
  SearchOptions o = TopTwo("a", 6);
  o.n = 3;
  o.beam_width = 1;
  o.max_depth = 1;
  o.step_tokens = 2;
  o.evaluation = Evaluation::kModelVote;
  BANYAN_ASSERT_OK_AND_ASSIGN(SearchResult r, RunKind(StrategyKind::kTotBfs, *engine, o));
  // " The best choice is i": the digits are neither of the model's two choices
  // after ' ', so every candidate gets the same share.
  int votes = 0;
  for (const auto* e : Events(r, proto::TraceEvent::SCORE)) {
    EXPECT_EQ(e->detail(), "vote");
    EXPECT_NEAR(e->value(), 1.0 / 3.0, 1e-6);
    ++votes;
  }
  EXPECT_EQ(votes, 3);
  EXPECT_EQ(r.cost.score_calls, 3);
  EXPECT_EQ(r.cost.branches_created, 1 + 3 + 1);  // root, 3 steps, the vote prompt
  EXPECT_EQ(engine->Stats().live_branches, 0);
}

TEST(TreeOfThoughtTest, DfsBacktracksFromALowValuedSubtree) {
  auto engine = MakeEngine();
  SearchOptions o = TopTwo("a", 9);
  o.n = 2;
  o.max_depth = 3;
  o.step_tokens = 1;
  o.value_threshold = 0.5;
  o.evaluation = Evaluation::kCallback;
  // The children of node 1 are dead ends; everything else is promising.
  o.scorer = [](const NodeContext& n) -> absl::StatusOr<double> { return n.parent == 1 ? 0.0 : 1.0; };
  BANYAN_ASSERT_OK_AND_ASSIGN(SearchResult r, RunKind(StrategyKind::kTotDfs, *engine, o));
  // root -> {1, 2}; 1 -> {3, 4} (pruned), backtrack; 2 -> {5, 6}; 5 -> {7, 8}: 7 solves.
  EXPECT_EQ(r.stop_reason, "solved");
  EXPECT_EQ(r.cost.branches_created, 9);
  EXPECT_EQ(r.max_depth, 3);
  const auto bt = Events(r, proto::TraceEvent::BACKTRACK);
  ASSERT_EQ(bt.size(), 1u);
  EXPECT_EQ(bt[0]->node(), 1);
  EXPECT_EQ(r.trace.nodes(7).depth(), 3);
  EXPECT_EQ(r.answer, r.trace.nodes(2).text() + r.trace.nodes(5).text() + r.trace.nodes(7).text());
  // Nothing above the threshold: everything pruned at the first level; the
  // answer is the best-valued node seen (the first of two valued 1.0).
  o.value_threshold = 2.0;
  BANYAN_ASSERT_OK_AND_ASSIGN(r, RunKind(StrategyKind::kTotDfs, *engine, o));
  EXPECT_EQ(r.stop_reason, "unsolved");
  EXPECT_EQ(r.cost.branches_created, 3);
  EXPECT_EQ(r.best_value, 1.0);
  EXPECT_FALSE(r.answer.empty());
  EXPECT_EQ(r.answer, r.trace.nodes(1).text());
  EXPECT_EQ(engine->Stats().live_branches, 0);
}

TEST(BeamTest, RanksByPathLogprob) {
  auto engine = MakeEngine();
  SearchOptions o = TopTwo("a", 21);
  o.n = 4;
  o.beam_width = 2;
  o.max_depth = 2;
  o.step_tokens = 2;
  BANYAN_ASSERT_OK_AND_ASSIGN(SearchResult r, RunKind(StrategyKind::kBeam, *engine, o));
  // The kept path is the most likely: count of first choices is maximal.
  EXPECT_EQ(r.cost.branches_created, 1 + 4 + 8);
  for (const auto* e : Events(r, proto::TraceEvent::SCORE)) {
    EXPECT_EQ(e->detail(), "path-logprob");
    EXPECT_LT(e->value(), 0);
  }
  EXPECT_TRUE(IsCountingPath('a', r.answer));
  EXPECT_EQ(r.answer.size(), 4u);
}

TEST(MctsTest, UctVisitsTheExpectedPaths) {
  auto engine = MakeEngine();
  SearchOptions o = TopTwo("a", 4);
  o.n = 2;
  o.iterations = 4;
  o.max_depth = 5;
  o.step_tokens = 1;
  o.evaluation = Evaluation::kCallback;
  o.scorer = [](const NodeContext&) -> absl::StatusOr<double> { return 1.0; };
  BANYAN_ASSERT_OK_AND_ASSIGN(SearchResult r, RunKind(StrategyKind::kMcts, *engine, o));
  std::vector<std::vector<int64_t>> paths;
  for (const auto* e : Events(r, proto::TraceEvent::SELECT)) {
    if (e->detail() == "uct-path") paths.emplace_back(e->children().begin(), e->children().end());
  }
  // Equal values: ties go to the lower id, then the less-visited child wins.
  EXPECT_THAT(paths, ElementsAre(ElementsAre(0), ElementsAre(0, 1), ElementsAre(0, 2),
                                 ElementsAre(0, 1, 3)));
  EXPECT_EQ(r.trace.nodes(0).visits(), 8);
  EXPECT_EQ(r.trace.nodes(1).visits(), 5);
  EXPECT_EQ(r.trace.nodes(2).visits(), 3);
  EXPECT_EQ(r.nodes, 9);
  EXPECT_EQ(r.stop_reason, "done");
  // KV reused across iterations: only the prompt was ever prefilled.
  EXPECT_EQ(engine->Stats().tokens_prefilled, 1);
  EXPECT_EQ(engine->Stats().live_branches, 0);
}

TEST(MctsTest, RolloutsAreScoredAndReleased) {
  auto engine = MakeEngine();
  SearchOptions o = TopTwo("a", 4);
  o.n = 2;
  o.iterations = 3;
  o.step_tokens = 1;
  o.rollout_tokens = 3;
  o.evaluation = Evaluation::kCallback;
  o.scorer = [](const NodeContext& n) -> absl::StatusOr<double> {
    return static_cast<double>(n.path_text.size());
  };
  BANYAN_ASSERT_OK_AND_ASSIGN(SearchResult r, RunKind(StrategyKind::kMcts, *engine, o));
  int rollouts = 0;
  for (const auto* e : Events(r, proto::TraceEvent::SCORE)) {
    if (e->detail() != "rollout") continue;
    ++rollouts;
    // A rollout adds 3 greedy tokens below a node of depth d (d tokens).
    EXPECT_EQ(e->value(), r.trace.nodes(static_cast<int>(e->node())).depth() + 3);
  }
  EXPECT_EQ(rollouts, 6);
  EXPECT_EQ(engine->Stats().live_branches, 0);
}

TEST(BestOfNTest, VerifierPicksTheBestAccepted) {
  auto engine = MakeEngine();
  SearchOptions o = TopTwo("a", 8);
  o.n = 6;
  o.sample_tokens = 3;
  o.verifier = [](const NodeContext& n) -> absl::StatusOr<Verdict> {
    const char last = n.path_text.back();
    return Verdict{last % 2 == 0, static_cast<double>(last)};
  };
  BANYAN_ASSERT_OK_AND_ASSIGN(SearchResult r, RunKind(StrategyKind::kBestOfN, *engine, o));
  std::string expected;
  for (const auto& n : r.trace.nodes()) {
    if (n.parent() != 0) continue;
    const char last = n.text().back();
    if (last % 2 == 0 && (expected.empty() || last > expected.back())) expected = n.text();
  }
  EXPECT_EQ(r.answer, expected);
  EXPECT_EQ(r.cost.branches_created, 7);
  EXPECT_EQ(Events(r, proto::TraceEvent::SCORE).size(), 6u);
}

TEST(BudgetTest, TokensNeverExceedTheBudget) {
  auto engine = MakeEngine();
  SearchOptions o = Greedy("a");
  o.n = 100;
  o.wave_size = 4;
  o.sample_tokens = 4;
  o.answer_pattern = "([a-z])";
  o.budget.max_tokens = 10;
  BANYAN_ASSERT_OK_AND_ASSIGN(SearchResult r, RunKind(StrategyKind::kSelfConsistency, *engine, o));
  // Wave 1: room for 2 samples of 4; wave 2: one sample of the 2 tokens left.
  EXPECT_EQ(r.cost.tokens_generated, 10);
  EXPECT_EQ(r.cost.branches_created, 4);
  EXPECT_EQ(r.stop_reason, "max_tokens");
  EXPECT_EQ(r.answer, "e");
}

TEST(BudgetTest, BranchesNeverExceedTheBudget) {
  auto engine = MakeEngine();
  SearchOptions o = TopTwo("a", 1);
  o.n = 3;
  o.max_depth = 4;
  o.step_tokens = 1;
  o.budget.max_branches = 6;
  for (StrategyKind k : {StrategyKind::kTotBfs, StrategyKind::kMcts, StrategyKind::kBestOfN}) {
    BANYAN_ASSERT_OK_AND_ASSIGN(SearchResult r, RunKind(k, *engine, o));
    EXPECT_LE(r.cost.branches_created, 6) << StrategyName(k);
    EXPECT_EQ(r.stop_reason, k == StrategyKind::kBestOfN ? "done" : "max_branches")
        << StrategyName(k);
  }
  EXPECT_EQ(engine->Stats().live_branches, 0);
}

TEST(BudgetTest, WallClockAndCancellation) {
  CountingBackendOptions model;
  model.forward_delay = absl::Milliseconds(20);
  auto engine = MakeEngine(model);
  SearchOptions o = TopTwo("a", 2);
  o.n = 2;
  o.iterations = 1000;
  o.max_depth = 1000;
  o.step_tokens = 4;
  o.budget.max_seconds = 0.3;
  const absl::Time start = absl::Now();
  BANYAN_ASSERT_OK_AND_ASSIGN(SearchResult r, RunKind(StrategyKind::kMcts, *engine, o));
  EXPECT_EQ(r.stop_reason, "max_seconds");
  EXPECT_LT(absl::Now() - start, absl::Seconds(2));

  o.budget.max_seconds = 0;
  o.cancel = std::make_shared<CancelToken>();
  std::thread canceller([token = o.cancel] {
    absl::SleepFor(absl::Milliseconds(200));
    token->Cancel();
  });
  BANYAN_ASSERT_OK_AND_ASSIGN(r, RunKind(StrategyKind::kTotBfs, *engine, o));
  canceller.join();
  EXPECT_EQ(r.stop_reason, "cancelled");
  EXPECT_LT(absl::Now() - start, absl::Seconds(4));
  // Already cancelled: nothing is generated.
  BANYAN_ASSERT_OK_AND_ASSIGN(r, RunKind(StrategyKind::kSelfConsistency, *engine, o));
  EXPECT_EQ(r.stop_reason, "cancelled");
  EXPECT_EQ(r.cost.tokens_generated, 0);
  // The engine keeps serving.
  EXPECT_EQ(engine->Stats().live_branches, 0);
  BANYAN_ASSERT_OK_AND_ASSIGN(BranchId b, engine->NewBranch(Prompt::Text("x")));
  GenerateOptions g;
  g.sampling.temperature = 0;
  g.max_tokens = 2;
  BANYAN_ASSERT_OK_AND_ASSIGN(GenerateResult gr, engine->Generate(b, g));
  EXPECT_EQ(gr.text, "yz");
  BANYAN_EXPECT_OK(engine->Release(b));
}

TEST(BudgetTest, KvBudgetExhaustionStopsTheSearchAndTheEngineServes) {
  EngineOptions eo;
  eo.kv_budget_bytes = 48 * 1024;  // 48 pages of 16 tokens (2 layers x K,V x 4 floats)
  eo.max_batch = 32;
  eo.prefill_chunk = 32;
  auto created = CreateCountingEngine(CountingBackendOptions{}, eo);
  BANYAN_ASSERT_OK(created.status());
  std::unique_ptr<Engine> engine = std::move(created).value();
  SearchOptions o = TopTwo("a", 5);  // distinct steps: no two children share their KV
  o.n = 8;
  o.beam_width = 8;  // every node stays live: level 2 (64 nodes of 16 tokens) cannot fit
  o.max_depth = 3;
  o.step_tokens = 16;
  BANYAN_ASSERT_OK_AND_ASSIGN(SearchResult r, RunKind(StrategyKind::kTotBfs, *engine, o));
  EXPECT_EQ(r.stop_reason, "kv_budget");
  EXPECT_GE(r.nodes, 9);
  EXPECT_LT(r.cost.tokens_generated, (8 + 64 + 64) * 16);
  EXPECT_FALSE(r.answer.empty());
  EXPECT_EQ(engine->Stats().live_branches, 0);
  BANYAN_ASSERT_OK_AND_ASSIGN(BranchId b, engine->NewBranch(Prompt::Text("x")));
  GenerateOptions g;
  g.sampling.temperature = 0;
  g.max_tokens = 2;
  BANYAN_ASSERT_OK_AND_ASSIGN(GenerateResult gr, engine->Generate(b, g));
  EXPECT_EQ(gr.text, "yz");
  BANYAN_EXPECT_OK(engine->Release(b));
}

TEST(TraceTest, JsonAndBinaryFiles) {
  auto engine = MakeEngine();
  SearchOptions o = TopTwo("a", 3);
  o.n = 4;
  o.sample_tokens = 2;
  BANYAN_ASSERT_OK_AND_ASSIGN(SearchResult r, RunKind(StrategyKind::kBestOfN, *engine, o));
  BANYAN_ASSERT_OK_AND_ASSIGN(std::string json, TraceToJson(r.trace));
  EXPECT_THAT(json, ::testing::HasSubstr("\"strategy\": \"best-of-n\""));
  EXPECT_THAT(json, ::testing::HasSubstr("\"tokens_generated\": \"8\""));
  const std::string dir = ::testing::TempDir();
  BANYAN_ASSERT_OK(WriteTrace(r.trace, dir + "/t.json"));
  BANYAN_ASSERT_OK(WriteTrace(r.trace, dir + "/t.pb"));
  std::ifstream in(dir + "/t.pb", std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  proto::SearchTrace back;
  ASSERT_TRUE(back.ParseFromString(bytes));
  BANYAN_EXPECT_OK(CompareDecisions(r.trace, back));
  EXPECT_THAT(WriteTrace(r.trace, "/nonexistent-dir/t.pb"),
              StatusIs(absl::StatusCode::kPermissionDenied));
  // A different seed makes different decisions, and CompareDecisions says where.
  o.seed = 4;
  BANYAN_ASSERT_OK_AND_ASSIGN(SearchResult other, RunKind(StrategyKind::kBestOfN, *engine, o));
  EXPECT_THAT(CompareDecisions(r.trace, other.trace),
              StatusIs(absl::StatusCode::kFailedPrecondition));
}

// A two-level BFS of `n` children per node, beam 2, valued by the model: the traces the replay tests write.
SearchOptions ValuedBfs(std::string prompt, uint64_t seed, int n, int step_tokens) {
  SearchOptions o = TopTwo(std::move(prompt), seed);
  o.n = n;
  o.beam_width = 2;
  o.max_depth = 2;
  o.step_tokens = step_tokens;
  o.evaluation = Evaluation::kModelValue;
  return o;
}

// Model output need not be UTF-8: from "\xc3\xa0" (a valid "a" with a grave accent) the counting model writes
// 0xa1, 0xa2, ...: stray continuation bytes. The trace's proto3 strings hold U+FFFD for them, so both file forms
// load back and replay (a binary trace with the raw bytes would not parse); the live result keeps the raw bytes.
TEST(TraceTest, TextThatIsNotUtf8StaysReadable) {
  auto engine = MakeEngine();
  BANYAN_ASSERT_OK_AND_ASSIGN(SearchResult r,
                              RunKind(StrategyKind::kTotBfs, *engine, ValuedBfs("\xc3\xa0", 23, 2, 3)));
  bool raw_bytes = false;
  int replaced = 0;
  for (const proto::TraceNode& n : r.trace.nodes()) {
    EXPECT_TRUE(IsValidUtf8(n.text())) << n.ShortDebugString();
    if (n.text().find("\xef\xbf\xbd") != std::string::npos) ++replaced;
  }
  for (unsigned char c : r.answer) raw_bytes |= c >= 0xa1 && c < 0xc0;
  EXPECT_GT(replaced, 0);
  EXPECT_TRUE(raw_bytes) << "the live answer keeps the model's bytes";
  EXPECT_EQ(r.trace.answer(), ToValidUtf8(r.answer));
  for (const std::string name : {"/not_utf8.json", "/not_utf8.pb"}) {
    const std::string path = ::testing::TempDir() + name;
    BANYAN_ASSERT_OK(WriteTrace(r.trace, path));
    BANYAN_ASSERT_OK_AND_ASSIGN(proto::SearchTrace back, ReadTrace(path));
    ASSERT_EQ(back.nodes_size(), r.trace.nodes_size()) << name;
    for (int i = 0; i < back.nodes_size(); ++i) EXPECT_EQ(back.nodes(i).text(), r.trace.nodes(i).text()) << name;
    BANYAN_ASSERT_OK_AND_ASSIGN(SearchOptions replay, OptionsFromConfig(back.config()));
    BANYAN_ASSERT_OK_AND_ASSIGN(SearchResult again, RunKind(StrategyKind::kTotBfs, *engine, replay));
    EXPECT_TRUE(CompareDecisions(back, again.trace).ok()) << name;
    EXPECT_EQ(again.answer, r.answer) << name;
  }
}

TEST(TraceTest, ReplaysFromAFile) {
  auto engine = MakeEngine();
  BANYAN_ASSERT_OK_AND_ASSIGN(SearchResult r, RunKind(StrategyKind::kTotBfs, *engine, ValuedBfs("a", 17, 3, 2)));
  for (const std::string name : {"/replay.json", "/replay.pb"}) {
    const std::string path = ::testing::TempDir() + name;
    BANYAN_ASSERT_OK(WriteTrace(r.trace, path));
    BANYAN_ASSERT_OK_AND_ASSIGN(proto::SearchTrace back, ReadTrace(path));
    BANYAN_ASSERT_OK_AND_ASSIGN(StrategyKind kind, StrategyFromConfig(back.config()));
    BANYAN_ASSERT_OK_AND_ASSIGN(SearchOptions replay, OptionsFromConfig(back.config()));
    BANYAN_ASSERT_OK_AND_ASSIGN(SearchResult again, RunKind(kind, *engine, replay));
    EXPECT_TRUE(CompareDecisions(r.trace, again.trace).ok()) << name;
    EXPECT_EQ(again.answer, r.answer);
  }
  EXPECT_THAT(ReadTrace("/nonexistent/t.pb").status(), StatusIs(absl::StatusCode::kNotFound));
  const std::string junk = ::testing::TempDir() + "/junk.json";
  std::ofstream(junk) << "{\"config\": 7}";
  EXPECT_THAT(ReadTrace(junk).status(), StatusIs(absl::StatusCode::kDataLoss));
  proto::SearchConfig bad = r.trace.config();
  bad.set_evaluation("oracle");
  EXPECT_THAT(OptionsFromConfig(bad).status(), StatusIs(absl::StatusCode::kInvalidArgument));
}

}  // namespace
}  // namespace banyan::search

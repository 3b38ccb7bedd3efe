// Strategies driven by Lua policies (scripting/policies/*.lua and hostile
// scripts) on the counting-backend engine: exact decisions, the `banyan` API
// bound to the real tree, and bad scripts failing with the sandbox's Status
// while the engine keeps serving.
#include <cmath>
#include <memory>
#include <string>
#include <thread>

#include "absl/time/clock.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "sdk/base/status_testing.h"
#include "sdk/engine/testing/counting_backend.h"
#include "search/policy_binding.h"
#include "search/strategy.h"

namespace banyan::search {
namespace {

using ::banyan::engine::testing::CountingBackendOptions;
using ::banyan::engine::testing::CreateCountingEngine;
using ::banyan::engine::testing::ExpectedLogprob;
using ::banyan::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::unique_ptr<Engine> MakeEngine() {
  auto engine = CreateCountingEngine(CountingBackendOptions{}, EngineOptions{});
  EXPECT_TRUE(engine.ok()) << engine.status();
  return std::move(engine).value();
}

std::string PolicyPath(const std::string& name) {
  return std::string(BANYAN_SOURCE_DIR) + "/scripting/policies/" + name;
}

SearchOptions Greedy(std::string prompt) {
  SearchOptions o;
  o.prompt = std::move(prompt);
  o.sampling.temperature = 0;
  o.step_delimiter = "";
  return o;
}

// log P(text) under the counting model after `prev`.
double Logprob(char prev, const std::string& text) {
  double lp = 0;
  for (char c : text) {
    lp += ExpectedLogprob(CountingBackendOptions{}, static_cast<unsigned char>(prev),
                          static_cast<unsigned char>(c));
    prev = c;
  }
  return lp;
}

std::vector<std::vector<int64_t>> Selects(const SearchResult& r, const std::string& detail) {
  std::vector<std::vector<int64_t>> out;
  for (const auto& e : r.trace.events()) {
    if (e.kind() == proto::TraceEvent::SELECT && e.detail() == detail) {
      out.emplace_back(e.children().begin(), e.children().end());
    }
  }
  return out;
}

void ExpectEngineServes(Engine& engine) {
  EXPECT_EQ(engine.Stats().live_branches, 0);
  BANYAN_ASSERT_OK_AND_ASSIGN(BranchId b, engine.NewBranch(Prompt::Text("p")));
  GenerateOptions g;
  g.sampling.temperature = 0;
  g.max_tokens = 3;
  BANYAN_ASSERT_OK_AND_ASSIGN(GenerateResult r, engine.Generate(b, g));
  EXPECT_EQ(r.text, "qrs");
  BANYAN_EXPECT_OK(engine.Release(b));
}

TEST(PolicyStrategyTest, TotBfsPolicyValuesWithTheModel) {
  auto engine = MakeEngine();
  scripting::LuaPolicyOptions lua;
  lua.params = {{"k", 2}, {"breadth", 2}, {"max_depth", 2}};
  BANYAN_ASSERT_OK_AND_ASSIGN(auto policy, BoundPolicy::LoadFile(PolicyPath("tot_bfs.lua"), lua));
  SearchOptions o = Greedy("a");
  o.step_tokens = 2;
  o.max_depth = 10;
  o.evaluation = Evaluation::kPolicy;
  o.policy = policy.get();
  BANYAN_ASSERT_OK_AND_ASSIGN(SearchResult r, CreateStrategy(StrategyKind::kTotBfs)->Run(*engine, o));
  // Values are context-free on this model, so the beam keeps the lower ids.
  EXPECT_THAT(Selects(r, "beam"), ElementsAre(ElementsAre(1, 2), ElementsAre(3, 4)));
  EXPECT_EQ(r.stop_reason, "policy");
  EXPECT_EQ(r.answer, "bcde");
  // banyan.model_score: P(" yes") / (P(" yes") + P(" no")) after the value prompt.
  const char last = o.value_prompt.back();
  const double expected =
      1.0 / (1.0 + std::exp(Logprob(last, o.value_bad) - Logprob(last, o.value_good)));
  int scores = 0;
  for (const auto& e : r.trace.events()) {
    if (e.kind() != proto::TraceEvent::SCORE) continue;
    ++scores;
    EXPECT_NEAR(e.value(), expected, 1e-5);
  }
  EXPECT_EQ(scores, 6);
  // expand 3, score 6, select 2, should_stop 2.
  EXPECT_EQ(r.cost.policy_calls, 13);
  EXPECT_EQ(r.cost.score_calls, 12);
  ExpectEngineServes(*engine);
}

TEST(PolicyStrategyTest, MctsPolicySelectsAndStops) {
  auto engine = MakeEngine();
  scripting::LuaPolicyOptions lua;
  lua.params = {{"breadth", 2}, {"iterations", 3}};
  BANYAN_ASSERT_OK_AND_ASSIGN(auto policy, BoundPolicy::LoadFile(PolicyPath("mcts.lua"), lua));
  SearchOptions o = Greedy("a");
  o.step_tokens = 1;
  o.iterations = 100;
  o.evaluation = Evaluation::kPolicy;
  o.policy = policy.get();
  BANYAN_ASSERT_OK_AND_ASSIGN(SearchResult r, CreateStrategy(StrategyKind::kMcts)->Run(*engine, o));
  EXPECT_THAT(Selects(r, "uct-path"),
              ElementsAre(ElementsAre(0), ElementsAre(0, 1), ElementsAre(0, 2)));
  EXPECT_EQ(r.stop_reason, "policy");
  EXPECT_EQ(r.nodes, 7);
  EXPECT_EQ(r.trace.nodes(0).visits(), 6);
  ExpectEngineServes(*engine);
}

TEST(PolicyStrategyTest, VotingPolicySizesWavesAndStops) {
  auto engine = MakeEngine();
  scripting::LuaPolicyOptions lua;
  lua.params = {{"samples", 8}, {"batch", 2}};
  BANYAN_ASSERT_OK_AND_ASSIGN(auto policy, BoundPolicy::LoadFile(PolicyPath("voting.lua"), lua));
  SearchOptions o = Greedy("1");
  o.n = 8;
  o.sample_tokens = 3;
  o.policy = policy.get();
  BANYAN_ASSERT_OK_AND_ASSIGN(SearchResult r,
                              CreateStrategy(StrategyKind::kSelfConsistency)->Run(*engine, o));
  // Waves of 2; after the second the policy's tally (4 votes, 3 samples left) stops it.
  EXPECT_EQ(r.answer, "234");
  EXPECT_EQ(r.stop_reason, "policy");
  ASSERT_EQ(r.votes.size(), 1u);
  EXPECT_EQ(r.votes[0].count, 4);
  EXPECT_EQ(r.cost.generate_calls, 2);
}

TEST(PolicyStrategyTest, ExplicitContinuationsAndTheBanyanApi) {
  auto engine = MakeEngine();
  const std::string script = R"(
    function expand(node, stats)
      if node.depth >= 1 then return nil end
      return {"x", "yz"}
    end
    function score(node)
      -- text and token counts come from the real tree; fork grows it.
      local child = banyan.fork(node.id, "!")
      return #banyan.text(node.id) * 10 + banyan.token_count(node.id) + #banyan.text(child)
    end
  )";
  BANYAN_ASSERT_OK_AND_ASSIGN(auto policy, BoundPolicy::Load("inline", script, {}));
  SearchOptions o = Greedy("a");
  o.evaluation = Evaluation::kPolicy;
  o.beam_width = 1;
  o.policy = policy.get();
  BANYAN_ASSERT_OK_AND_ASSIGN(SearchResult r, CreateStrategy(StrategyKind::kTotBfs)->Run(*engine, o));
  // "yz": 2 chars -> 20 + 2 tokens + "yz!" (3) = 25 beats "x": 10 + 1 + 2 = 13.
  EXPECT_EQ(r.answer, "yz");
  EXPECT_EQ(r.best_value, 25);
  EXPECT_EQ(r.cost.tokens_generated, 0);
  ExpectEngineServes(*engine);
}

struct Hostile {
  const char* name;
  const char* script;
  absl::StatusCode code;
  const char* message;
};

class HostilePolicyTest : public ::testing::TestWithParam<Hostile> {};

TEST_P(HostilePolicyTest, FailsWithTheSandboxStatusAndTheEngineKeepsServing) {
  auto engine = MakeEngine();
  scripting::LuaPolicyOptions lua;
  lua.limits.instructions_per_call = 2'000'000;
  lua.limits.memory_bytes = 4u << 20;
  BANYAN_ASSERT_OK_AND_ASSIGN(auto policy, BoundPolicy::Load(GetParam().name, GetParam().script, lua));
  SearchOptions o = Greedy("a");
  o.n = 2;
  o.step_tokens = 2;
  o.evaluation = policy->lua().has_score() ? Evaluation::kPolicy : Evaluation::kNone;
  o.policy = policy.get();
  for (StrategyKind k : {StrategyKind::kTotBfs, StrategyKind::kMcts}) {
    EXPECT_THAT(CreateStrategy(k)->Run(*engine, o).status(),
                StatusIs(GetParam().code, HasSubstr(GetParam().message)))
        << StrategyName(k);
    ExpectEngineServes(*engine);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Scripts, HostilePolicyTest,
    ::testing::Values(
        Hostile{"loop", "function score(node) while true do end end",
                absl::StatusCode::kDeadlineExceeded, ""},
        Hostile{"memory",
                "function expand(node) local t = {} while true do t[#t + 1] = "
                "string.rep('x', 4096) .. #t end end",
                absl::StatusCode::kResourceExhausted, ""},
        Hostile{"error", "function score(node) error('boom') end",
                absl::StatusCode::kInvalidArgument, "boom"},
        Hostile{"bad_select", "function select(f) return #f + 5 end",
                absl::StatusCode::kInvalidArgument, "select"},
        Hostile{"bad_fork", "function score(node) return banyan.fork(12345, 'x') end",
                absl::StatusCode::kInvalidArgument, "no node 12345"},
        Hostile{"nan", "function score(node) return 0/0 end", absl::StatusCode::kInvalidArgument,
                ""}),
    [](const ::testing::TestParamInfo<Hostile>& info) { return std::string(info.param.name); });

TEST(PolicyStrategyTest, CancelStopsARunningHook) {
  auto engine = MakeEngine();
  scripting::LuaPolicyOptions lua;
  lua.limits.instructions_per_call = 0x7fffffffffff;
  lua.limits.time_per_call = absl::Seconds(30);
  BANYAN_ASSERT_OK_AND_ASSIGN(
      auto policy,
      BoundPolicy::Load("spin",
                        "calls = 0\n"
                        "function score(node)\n"
                        "  calls = calls + 1\n"
                        "  if calls == 1 then while true do end end\n"  // only the first call spins
                        "  return 1\n"
                        "end",
                        lua));
  SearchOptions o = Greedy("a");
  o.n = 2;
  o.evaluation = Evaluation::kPolicy;
  o.policy = policy.get();
  o.cancel = std::make_shared<CancelToken>();
  std::thread canceller([token = o.cancel] {
    absl::SleepFor(absl::Milliseconds(100));
    token->Cancel();
  });
  const absl::Time start = absl::Now();
  EXPECT_THAT(CreateStrategy(StrategyKind::kTotBfs)->Run(*engine, o).status(),
              StatusIs(absl::StatusCode::kCancelled));
  canceller.join();
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
  ExpectEngineServes(*engine);
  // The same policy serves the next search (its sandbox's cancel was reset).
  o.cancel = nullptr;
  BANYAN_EXPECT_OK(CreateStrategy(StrategyKind::kTotBfs)->Run(*engine, o).status());
}

TEST(PolicyBindingTest, ApiOutsideASearchFails) {
  const std::string script = "function score(node) return banyan.token_count(0) end";
  BANYAN_ASSERT_OK_AND_ASSIGN(auto policy, BoundPolicy::Load("idle", script, {}));
  scripting::NodeView node;
  EXPECT_THAT(policy->lua().Score(node), StatusIs(absl::StatusCode::kFailedPrecondition));
}

}  // namespace
}  // namespace banyan::search

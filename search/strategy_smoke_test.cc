// Every strategy on the real default model (SmolLM2-135M, CPU), small sizes:
// it runs, stays inside its budgets, releases its branches and replays.
// Skipped when the default model is absent (scripts/setup.sh fetches it).
#include <memory>

#include "gtest/gtest.h"
#include "model/default_model.h"
#include "sdk/base/status_testing.h"
#include "search/strategy.h"

namespace banyan::search {
namespace {

class SmokeTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!model::FindDefaultModel().ok()) return;
    EngineOptions eo;
    eo.device = "cpu";
    auto engine = Engine::Create(eo);
    ASSERT_TRUE(engine.ok()) << engine.status();
    engine_ = std::move(engine).value().release();
  }
  static void TearDownTestSuite() {
    delete engine_;
    engine_ = nullptr;
  }
  void SetUp() override {
    if (engine_ == nullptr) GTEST_SKIP() << "default model absent: run scripts/setup.sh";
  }
  static SearchOptions Small() {
    SearchOptions o;
    o.prompt = "Q: What is 3 + 4?\nA: Let's think step by step.\n";
    o.n = 2;
    o.seed = 3;
    o.sampling.temperature = 0.7f;
    o.step_tokens = 8;
    o.sample_tokens = 12;
    o.max_depth = 2;
    o.beam_width = 1;
    o.iterations = 2;
    o.budget.max_tokens = 200;
    return o;
  }
  static Engine* engine_;
};
Engine* SmokeTest::engine_ = nullptr;

TEST_F(SmokeTest, EveryStrategyRunsAndReleasesItsBranches) {
  for (StrategyKind k : {StrategyKind::kSelfConsistency, StrategyKind::kTotBfs,
                         StrategyKind::kTotDfs, StrategyKind::kMcts, StrategyKind::kBestOfN,
                         StrategyKind::kBeam}) {
    SearchOptions o = Small();
    if (k == StrategyKind::kTotBfs) o.evaluation = Evaluation::kModelValue;
    if (k == StrategyKind::kTotDfs) {
      o.evaluation = Evaluation::kModelVote;
      o.value_threshold = 0.0;
    }
    if (k == StrategyKind::kBestOfN) {
      o.verifier = [](const NodeContext& n) -> absl::StatusOr<Verdict> {
        return Verdict{!n.path_text.empty(), static_cast<double>(n.path_text.size())};
      };
    }
    BANYAN_ASSERT_OK_AND_ASSIGN(SearchResult r, CreateStrategy(k)->Run(*engine_, o));
    EXPECT_GT(r.cost.tokens_generated, 0) << StrategyName(k);
    EXPECT_LE(r.cost.tokens_generated, 200) << StrategyName(k);
    EXPECT_GE(r.nodes, 2) << StrategyName(k);
    EXPECT_EQ(engine_->Stats().live_branches, 0) << StrategyName(k);
  }
}

TEST_F(SmokeTest, SelfConsistencyReplays) {
  SearchOptions o = Small();
  o.n = 3;
  o.wave_size = 3;
  BANYAN_ASSERT_OK_AND_ASSIGN(SearchResult a,
                              CreateStrategy(StrategyKind::kSelfConsistency)->Run(*engine_, o));
  BANYAN_ASSERT_OK_AND_ASSIGN(SearchResult b,
                              CreateStrategy(StrategyKind::kSelfConsistency)->Run(*engine_, o));
  BANYAN_EXPECT_OK(CompareDecisions(a.trace, b.trace));
  for (int i = 0; i < a.trace.nodes_size(); ++i) {
    EXPECT_EQ(a.trace.nodes(i).text(), b.trace.nodes(i).text());
  }
}

}  // namespace
}  // namespace banyan::search

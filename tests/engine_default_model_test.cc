// Smoke test of the Engine on the real default model (SmolLM2-135M-Instruct,
// CPU): forked greedy branches agree with a lone branch, Score agrees with
// the generation's own log-probabilities, and save -> load -> continue gives
// the same text as continuing. Skips when the model is not downloaded
// (scripts/setup.sh fetches it).
#include <cmath>
#include <string>
#include <vector>

#include "banyan/engine.h"
#include "gtest/gtest.h"
#include "model/default_model.h"
#include "sdk/base/status_testing.h"

namespace banyan {
namespace {

class EngineDefaultModelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!model::FindDefaultModel().ok()) GTEST_SKIP() << "default model missing: run scripts/setup.sh";
    EngineOptions o;
    o.device = "cpu";
    o.threads = 2;
    o.kv_budget_bytes = 256 << 20;
    absl::StatusOr<std::unique_ptr<Engine>> e = Engine::Create(o);
    ASSERT_TRUE(e.ok()) << e.status();
    engine_ = std::move(*e);
  }
  GenerateOptions Greedy(int n) {
    GenerateOptions g;
    g.sampling.temperature = 0.0f;
    g.max_tokens = n;
    return g;
  }
  std::unique_ptr<Engine> engine_;
};

TEST_F(EngineDefaultModelTest, ForksAgreeScoreMatchesAndSnapshotsContinue) {
  BANYAN_ASSERT_OK_AND_ASSIGN(
      std::string prompt, engine_->ApplyChatTemplate({{"user", "What is the capital of France?"}}, true));
  BANYAN_ASSERT_OK_AND_ASSIGN(BranchId root, engine_->NewBranch(Prompt::Text(prompt)));
  BANYAN_ASSERT_OK_AND_ASSIGN(std::vector<BranchId> kids, engine_->Fork(root, 3));
  auto results = engine_->GenerateMany(kids, Greedy(6));
  ASSERT_TRUE(results[0].ok()) << results[0].status();
  for (auto& r : results) {
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->tokens, results[0]->tokens);
  }
  std::cout << "greedy: " << results[0]->text << "\n";
  EXPECT_NE(results[0]->text.find("Paris"), std::string::npos) << results[0]->text;
  // A lone branch of the same prompt (its KV now comes from the cache).
  BANYAN_ASSERT_OK_AND_ASSIGN(BranchId lone, engine_->NewBranch(Prompt::Text(prompt)));
  BANYAN_ASSERT_OK_AND_ASSIGN(BranchInfo info, engine_->Inspect(lone));
  EXPECT_EQ(info.tokens_reused, static_cast<int64_t>(info.tokens.size()));
  BANYAN_ASSERT_OK_AND_ASSIGN(GenerateResult single, engine_->Generate(lone, Greedy(6)));
  EXPECT_EQ(single.tokens, results[0]->tokens);
  // Score of the greedy continuation = the sum of its logprobs.
  BANYAN_ASSERT_OK_AND_ASSIGN(ScoreResult score, engine_->Score(root, Prompt::Tokens(single.tokens)));
  double sum = 0;
  for (float lp : single.logprobs) sum += lp;
  EXPECT_NEAR(score.logprob, sum, 1e-2 * std::abs(sum) + 1e-3);

  // Save, continue here; load into a new engine, continue there.
  const std::string path = ::testing::TempDir() + "/engine_default_model.snapshot";
  BANYAN_ASSERT_OK(engine_->Save(path));
  BANYAN_ASSERT_OK_AND_ASSIGN(GenerateResult here, engine_->Generate(kids[1], Greedy(5)));
  EngineOptions o;
  o.device = "cpu";
  o.threads = 2;
  o.kv_budget_bytes = 256 << 20;
  BANYAN_ASSERT_OK_AND_ASSIGN(std::unique_ptr<Engine> other, Engine::Create(o));
  BANYAN_ASSERT_OK_AND_ASSIGN(std::vector<BranchId> loaded, other->Load(path));
  ASSERT_EQ(loaded.size(), 5u);  // root, 3 kids, lone
  BANYAN_ASSERT_OK_AND_ASSIGN(GenerateResult there, other->Generate(loaded[2], Greedy(5)));
  EXPECT_EQ(here.tokens, there.tokens);
  EXPECT_EQ(here.text, there.text);
}

}  // namespace
}  // namespace banyan

// The engine's device-greedy steps (Backend::ForwardGreedy): a backend with
// the greedy path gives the same tokens and logprobs as one without it, the
// path is taken only when every logits row feeds plain greedy decodes, and a
// bad row fails only its own branches. The backend here wraps the counting
// backend and computes ForwardGreedy on the host with SampleGreedy (what the
// CUDA backend does on the device; tests/engine_cuda_test covers that one).
#include <memory>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "model/sampling/sampler.h"
#include "sdk/base/status_testing.h"
#include "sdk/engine/engine_testing.h"
#include "sdk/engine/testing/counting_backend.h"
#include "sdk/engine/testing/device_path_fixture.h"

namespace banyan::engine {
namespace {


class GreedyPathBackend final : public model::Backend {
 public:
  explicit GreedyPathBackend(std::unique_ptr<model::Backend> inner) : inner_(std::move(inner)) {}
  std::string_view name() const override { return inner_->name(); }
  const model::ModelConfig& config() const override { return inner_->config(); }
  MemorySpace kv_memory_space() const override { return inner_->kv_memory_space(); }
  absl::Status Forward(const model::ForwardBatch& batch, const model::KvCache& kv,
                       absl::Span<float> logits) override {
    ++forward_calls;
    return inner_->Forward(batch, kv, logits);
  }
  bool supports_greedy() const override { return true; }
  absl::Status ForwardGreedy(const model::ForwardBatch& batch, const model::KvCache& kv,
                             absl::Span<int32_t> tokens, absl::Span<float> logprobs) override {
    ++greedy_calls;
    const size_t vocab = static_cast<size_t>(config().vocab_size);
    const size_t m = batch.logit_rows.size();
    if (tokens.size() < m || logprobs.size() < m) return absl::InvalidArgumentError("greedy: spans too small");
    logits_.assign(m * vocab, 0.0f);
    BANYAN_RETURN_IF_ERROR(inner_->Forward(batch, kv, absl::MakeSpan(logits_)));
    for (size_t i = 0; i < m; ++i) {
      absl::StatusOr<model::SampleResult> r =
          model::SampleGreedy(absl::MakeConstSpan(logits_.data() + i * vocab, vocab));
      const bool poison = poison_call > 0 && greedy_calls == poison_call && i == 0;
      tokens[i] = r.ok() && !poison ? r->token : -1;
      logprobs[i] = r.ok() ? r->logprob : 0.0f;
    }
    return absl::OkStatus();
  }

  int forward_calls = 0;
  int greedy_calls = 0;
  int poison_call = 0;  // > 0: that ForwardGreedy call reports row 0 as bad

 private:
  std::unique_ptr<model::Backend> inner_;
  std::vector<float> logits_;
};

using Fixture = testing::PathFixture<GreedyPathBackend>;
Fixture MakeEngine(bool greedy_path) { return testing::MakePathEngine<GreedyPathBackend>(greedy_path); }
using testing::ForkedBranches;

TEST(EngineGreedyPathTest, SameTokensAndLogprobsAsTheHostPath) {
  GenerateOptions greedy;
  greedy.sampling.temperature = 0.0f;
  greedy.max_tokens = 12;
  greedy.ignore_eos = true;
  Fixture plain = MakeEngine(false), fast = MakeEngine(true);
  const auto want = plain.engine->GenerateMany(ForkedBranches(*plain.engine, 9), greedy);
  const auto got = fast.engine->GenerateMany(ForkedBranches(*fast.engine, 9), greedy);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    BANYAN_ASSERT_OK(want[i].status());
    BANYAN_ASSERT_OK(got[i].status());
    EXPECT_EQ(got[i]->tokens, want[i]->tokens) << i;
    ASSERT_EQ(got[i]->logprobs.size(), want[i]->logprobs.size());
    for (size_t t = 0; t < got[i]->logprobs.size(); ++t) EXPECT_NEAR(got[i]->logprobs[t], want[i]->logprobs[t], 1e-6);
  }
  EXPECT_GE(fast.backend->greedy_calls, 11);  // every decode step after the first
}

TEST(EngineGreedyPathTest, MixedStepsAndScoresKeepTheLogitsOnTheHost) {
  GenerateOptions sampled;
  sampled.sampling.temperature = 1.0f;
  sampled.sampling.seed = 4;
  sampled.max_tokens = 8;
  sampled.ignore_eos = true;
  GenerateOptions penalized = sampled;
  penalized.sampling.temperature = 0.0f;
  penalized.sampling.repetition_penalty = 1.5f;
  for (const GenerateOptions& gen : {sampled, penalized}) {
    Fixture plain = MakeEngine(false), fast = MakeEngine(true);
    const auto want = plain.engine->GenerateMany(ForkedBranches(*plain.engine, 4), gen);
    const auto got = fast.engine->GenerateMany(ForkedBranches(*fast.engine, 4), gen);
    for (size_t i = 0; i < got.size(); ++i) {
      BANYAN_ASSERT_OK(got[i].status());
      EXPECT_EQ(got[i]->tokens, want[i].value().tokens);
    }
    EXPECT_EQ(fast.backend->greedy_calls, 0);
  }
  Fixture fast = MakeEngine(true);
  const BranchId b = fast.engine->NewBranch(Prompt::Tokens({1, 2, 3})).value();
  BANYAN_ASSERT_OK_AND_ASSIGN(ScoreResult score, fast.engine->Score(b, Prompt::Tokens({4, 5})));
  EXPECT_EQ(score.tokens, 2);
  EXPECT_EQ(fast.backend->greedy_calls, 0);
}

TEST(EngineGreedyPathTest, ABadRowFailsOnlyItsBranch) {
  Fixture fast = MakeEngine(true);
  fast.backend->poison_call = 3;
  GenerateOptions greedy;
  greedy.sampling.temperature = 0.0f;
  greedy.max_tokens = 10;
  greedy.ignore_eos = true;
  const auto got = fast.engine->GenerateMany(ForkedBranches(*fast.engine, 5), greedy);
  const testing::PathOutcome outcome = testing::Tally(got, absl::StatusCode::kInvalidArgument, 10u);
  EXPECT_EQ(outcome.failed, 1);
  EXPECT_EQ(outcome.other_errors, 0);
  EXPECT_EQ(outcome.wrong_lengths, 0);
}

}  // namespace
}  // namespace banyan::engine

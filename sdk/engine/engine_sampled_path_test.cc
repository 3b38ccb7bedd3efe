// The engine's device-sampled steps (Backend::ForwardSample): taken when every
// logits row feeds decodes whose parameters the device computes (no
// penalties), never for scores or penalized branches; tokens from the kept set
// with the model's probabilities and its exact log-probabilities; the same
// seeds give the same text; a bad row fails only its own branch. The backend
// here wraps the counting backend and computes ForwardSample on the host with
// ReferenceDraw (what the CUDA backend does on the device, within rounding;
// model/sampling/sample_cuda_test and tests/engine_cuda_test cover that one).
#include <algorithm>
#include <cmath>
#include <future>
#include <memory>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "model/sampling/draw_reference.h"
#include "sdk/base/status_testing.h"
#include "sdk/engine/engine_testing.h"
#include "sdk/engine/testing/counting_backend.h"
#include "sdk/engine/testing/device_path_fixture.h"

namespace banyan::engine {
namespace {


class SampledPathBackend final : public model::Backend {
 public:
  explicit SampledPathBackend(std::unique_ptr<model::Backend> inner) : inner_(std::move(inner)) {}
  std::string_view name() const override { return inner_->name(); }
  const model::ModelConfig& config() const override { return inner_->config(); }
  MemorySpace kv_memory_space() const override { return inner_->kv_memory_space(); }
  absl::Status Forward(const model::ForwardBatch& batch, const model::KvCache& kv,
                       absl::Span<float> logits) override {
    if (!batch.logit_rows.empty()) ++host_logit_calls;
    return inner_->Forward(batch, kv, logits);
  }
  bool supports_sampling() const override { return true; }
  absl::Status ForwardSample(const model::ForwardBatch& batch, const model::KvCache& kv,
                             absl::Span<const model::sampling::DeviceDraw> draws,
                             absl::Span<model::sampling::DrawResult> results) override {
    ++sample_calls;
    const size_t vocab = static_cast<size_t>(config().vocab_size);
    const size_t m = batch.logit_rows.size();
    if (results.size() < draws.size())
      return absl::InvalidArgumentError("sample: results too small");
    logits_.assign(m * vocab, 0.0f);
    BANYAN_RETURN_IF_ERROR(inner_->Forward(batch, kv, absl::MakeSpan(logits_)));
    for (size_t i = 0; i < draws.size(); ++i) {
      const model::sampling::DeviceDraw& d = draws[i];
      if (d.row < 0 || static_cast<size_t>(d.row) >= m)
        return absl::InvalidArgumentError("sample: bad row");
      results[i] = model::sampling::ReferenceDraw(
          absl::MakeConstSpan(logits_.data() + d.row * vocab, vocab), d);
      if (poison_call > 0 && sample_calls == poison_call && i == 0) results[i].token = -1;
      if (d.temperature != 0.0f) uniforms.push_back(d.uniform);
    }
    return absl::OkStatus();
  }

  int host_logit_calls = 0;
  int sample_calls = 0;
  int poison_call = 0;  // > 0: that ForwardSample call reports draw 0 as bad
  std::vector<double> uniforms;

 private:
  std::unique_ptr<model::Backend> inner_;
  std::vector<float> logits_;
};

using Fixture = testing::PathFixture<SampledPathBackend>;
Fixture MakeEngine() { return testing::MakePathEngine<SampledPathBackend>(/*wrap=*/true); }
using testing::ForkedBranches;
using testing::ForkedFirstToken;

GenerateOptions TopTwo(uint64_t seed) {
  GenerateOptions gen;
  gen.sampling.temperature = 1.0f;
  gen.sampling.top_k = 2;
  gen.sampling.seed = seed;
  gen.max_tokens = 8;
  gen.ignore_eos = true;
  return gen;
}

TEST(EngineSampledPathTest, DrawsFollowTheModelAndRepeatWithTheSeed) {
  const testing::CountingBackendOptions model = testing::PathModel();
  Fixture a = MakeEngine(), b = MakeEngine();
  const auto got = a.engine->GenerateMany(ForkedBranches(*a.engine, 64), TopTwo(11));
  const auto again = b.engine->GenerateMany(ForkedBranches(*b.engine, 64), TopTwo(11));
  int first = 0, draws = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    BANYAN_ASSERT_OK(got[i].status());
    BANYAN_ASSERT_OK(again[i].status());
    EXPECT_EQ(got[i]->tokens, again[i]->tokens) << i;
    int32_t previous = ForkedFirstToken(static_cast<int>(i));
    ASSERT_EQ(got[i]->tokens.size(), 8u);
    for (size_t t = 0; t < got[i]->tokens.size(); ++t) {
      const int32_t token = got[i]->tokens[t];
      ASSERT_TRUE(token == testing::FirstChoice(model, previous) ||
                  token == testing::SecondChoice(model, previous))
          << "branch " << i << " token " << t;
      EXPECT_NEAR(got[i]->logprobs[t], testing::ExpectedLogprob(model, previous, token), 1e-5);
      first += token == testing::FirstChoice(model, previous);
      ++draws;
      previous = token;
    }
  }
  // P(first) = 1 / (1 + e^-0.5) = 0.622; 512 draws: sd 0.021.
  EXPECT_NEAR(first / static_cast<double>(draws), 0.6225, 0.08);
  EXPECT_GE(a.backend->sample_calls, 7);
  EXPECT_EQ(a.backend->host_logit_calls, 0);
  // Distinct branches draw distinct uniforms (their own streams).
  std::vector<double> u = a.backend->uniforms;
  std::sort(u.begin(), u.end());
  EXPECT_EQ(std::unique(u.begin(), u.end()), u.end());
  EXPECT_EQ(u.size(), static_cast<size_t>(draws));
}

TEST(EngineSampledPathTest, AnotherSeedGivesOtherText) {
  Fixture a = MakeEngine(), b = MakeEngine();
  const auto x = a.engine->GenerateMany(ForkedBranches(*a.engine, 16), TopTwo(1));
  const auto y = b.engine->GenerateMany(ForkedBranches(*b.engine, 16), TopTwo(2));
  int differ = 0;
  for (size_t i = 0; i < x.size(); ++i) differ += x[i].value().tokens != y[i].value().tokens;
  EXPECT_GT(differ, 8);
}

TEST(EngineSampledPathTest, GreedyBranchesBesideSampledOnesKeepTheirTokens) {
  Fixture f = MakeEngine();
  std::vector<BranchId> kids = ForkedBranches(*f.engine, 6);
  GenerateOptions greedy = TopTwo(3);
  greedy.sampling.temperature = 0.0f;
  // Submitted together from two threads: steps may hold greedy and sampled draws.
  auto sampled_future = std::async(std::launch::async, [&] {
    return f.engine->GenerateMany({kids[0], kids[1], kids[2]}, TopTwo(3));
  });
  const auto greedy_results = f.engine->GenerateMany({kids[3], kids[4], kids[5]}, greedy);
  sampled_future.get();
  const testing::CountingBackendOptions model = testing::PathModel();
  for (size_t i = 0; i < greedy_results.size(); ++i) {
    BANYAN_ASSERT_OK(greedy_results[i].status());
    int32_t previous = ForkedFirstToken(static_cast<int>(i + 3));
    for (int32_t token : greedy_results[i]->tokens) {
      EXPECT_EQ(token, testing::FirstChoice(model, previous));
      previous = token;
    }
  }
  EXPECT_EQ(f.backend->host_logit_calls, 0);
}

TEST(EngineSampledPathTest, PenaltiesAndScoresKeepTheLogitsOnTheHost) {
  GenerateOptions penalized = TopTwo(4);
  penalized.sampling.repetition_penalty = 1.3f;
  Fixture f = MakeEngine();
  const auto got = f.engine->GenerateMany(ForkedBranches(*f.engine, 4), penalized);
  for (const auto& r : got) BANYAN_EXPECT_OK(r.status());
  EXPECT_EQ(f.backend->sample_calls, 0);
  EXPECT_GT(f.backend->host_logit_calls, 0);
  Fixture g = MakeEngine();
  const BranchId b = g.engine->NewBranch(Prompt::Tokens({1, 2, 3})).value();
  BANYAN_ASSERT_OK_AND_ASSIGN(ScoreResult score, g.engine->Score(b, Prompt::Tokens({4, 5})));
  EXPECT_EQ(score.tokens, 2);
  EXPECT_EQ(g.backend->sample_calls, 0);
}

TEST(EngineSampledPathTest, ABadRowFailsOnlyItsBranch) {
  Fixture f = MakeEngine();
  f.backend->poison_call = 3;
  const auto got = f.engine->GenerateMany(ForkedBranches(*f.engine, 5), TopTwo(5));
  const testing::PathOutcome outcome = testing::Tally(got, absl::StatusCode::kInvalidArgument, 8u);
  EXPECT_EQ(outcome.failed, 1);
  EXPECT_EQ(outcome.other_errors, 0);
  EXPECT_EQ(outcome.wrong_lengths, 0);
}

}  // namespace
}  // namespace banyan::engine

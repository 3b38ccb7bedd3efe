#include "model/sampling/sampler.h"

#include <cmath>
#include <algorithm>
#include <limits>
#include <set>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "sdk/base/status_testing.h"

namespace banyan::model {
namespace {

using ::banyan::testing::StatusIs;
constexpr float kInf = std::numeric_limits<float>::infinity();

Sampler Make(const SamplingParams& p, uint64_t seed = 1) {
  auto s = Sampler::Create(p, Rng(seed));
  EXPECT_TRUE(s.ok()) << s.status();
  return *std::move(s);
}

std::set<int32_t> Kept(const std::vector<float>& l) {
  std::set<int32_t> kept;
  for (size_t i = 0; i < l.size(); ++i) {
    if (l[i] != -kInf) kept.insert(static_cast<int32_t>(i));
  }
  return kept;
}

std::vector<float> LogOf(const std::vector<double>& probs) {
  std::vector<float> l;
  for (double p : probs) l.push_back(static_cast<float>(std::log(p)));
  return l;
}

// PeekUniform is the uniform the next sampled draw uses; SkipUniform consumes
// it, so a draw made elsewhere (on the device) leaves the stream where Sample
// would have left it.
TEST(SamplerTest, PeekAndSkipFollowTheDrawStream) {
  SamplingParams p;
  p.temperature = 0.8f;
  const std::vector<float> logits = {0.5f, 1.0f, -0.25f, 2.0f, 0.0f, 1.5f};
  BANYAN_ASSERT_OK_AND_ASSIGN(Sampler sampled, Sampler::Create(p, Rng(9)));
  BANYAN_ASSERT_OK_AND_ASSIGN(Sampler skipped, Sampler::Create(p, Rng(9)));
  Rng stream(9);
  const double first = stream.UniformDouble();
  EXPECT_EQ(skipped.PeekUniform(), first);
  EXPECT_EQ(skipped.PeekUniform(), first);  // peeking draws nothing
  BANYAN_ASSERT_OK(sampled.Sample(logits, {}, {}).status());
  skipped.SkipUniform();
  EXPECT_EQ(skipped.PeekUniform(), stream.UniformDouble());
  for (int i = 0; i < 20; ++i) {
    BANYAN_ASSERT_OK_AND_ASSIGN(SampleResult a, sampled.Sample(logits, {}, {}));
    BANYAN_ASSERT_OK_AND_ASSIGN(SampleResult b, skipped.Sample(logits, {}, {}));
    EXPECT_EQ(a.token, b.token) << i;
  }
}

TEST(SamplerTest, GreedyTakesArgmaxLowestIdOnTies) {
  SamplingParams p;
  p.temperature = 0;
  Sampler s = Make(p);
  BANYAN_ASSERT_OK_AND_ASSIGN(auto r, s.Sample(std::vector<float>{0.5f, 3.0f, -1.0f, 3.0f}, {}, {}));
  EXPECT_EQ(r.token, 1);
  // Logprob of greedy: the log-softmax of the (penalized) logits.
  const double z = std::exp(0.5) + 2 * std::exp(3.0) + std::exp(-1.0);
  EXPECT_NEAR(r.logprob, 3.0 - std::log(z), 1e-6);
  EXPECT_NEAR(r.raw_logprob, 3.0 - std::log(z), 1e-6);
}

TEST(SamplerTest, TopKKeepsExactlyTheKLargest) {
  SamplingParams p;
  p.top_k = 3;
  const std::vector<float> l = {0.1f, 2.0f, -3.0f, 2.0f, 1.5f, 0.2f, 2.0f};
  BANYAN_ASSERT_OK_AND_ASSIGN(auto out, Make(p).ProcessLogits(l, {}, {}));
  EXPECT_EQ(Kept(out), (std::set<int32_t>{1, 3, 6}));
  p.top_k = 2;  // tie at the boundary: lowest ids
  BANYAN_ASSERT_OK_AND_ASSIGN(out, Make(p).ProcessLogits(l, {}, {}));
  EXPECT_EQ(Kept(out), (std::set<int32_t>{1, 3}));
  p.top_k = 100;  // more than the vocabulary: everything
  BANYAN_ASSERT_OK_AND_ASSIGN(out, Make(p).ProcessLogits(l, {}, {}));
  EXPECT_EQ(Kept(out).size(), l.size());
}

TEST(SamplerTest, TopPKeepsSmallestPrefixReachingP) {
  // Probabilities 0.4, 0.3, 0.2, 0.1 (shuffled ids).
  const auto l = LogOf({0.2, 0.4, 0.1, 0.3});
  SamplingParams p;
  for (auto [top_p, want] : std::vector<std::pair<float, std::set<int32_t>>>{
           {0.35f, {1}}, {0.5f, {1, 3}}, {0.69f, {1, 3}}, {0.71f, {1, 3, 0}}, {0.95f, {0, 1, 2, 3}}, {1.0f, {0, 1, 2, 3}}}) {
    p.top_p = top_p;
    BANYAN_ASSERT_OK_AND_ASSIGN(auto out, Make(p).ProcessLogits(l, {}, {}));
    EXPECT_EQ(Kept(out), want) << "top_p " << top_p;
  }
}

TEST(SamplerTest, TopPOnALargeFlatTail) {
  // One likely token and 10000 tiny ones: the tail must be cut exactly where
  // the cumulative mass reaches top_p, also when the fast path cannot decide.
  std::vector<double> probs(10001, 0.5 / 10000);
  probs[7] = 0.5;
  SamplingParams p;
  p.top_p = 0.75f;  // 0.5 + 5000 * 0.00005 = 0.75 -> 5001 tokens
  BANYAN_ASSERT_OK_AND_ASSIGN(auto out, Make(p).ProcessLogits(LogOf(probs), {}, {}));
  const auto kept = Kept(out);
  EXPECT_NEAR(static_cast<double>(kept.size()), 5001, 1);  // fp rounding of the boundary sum
  EXPECT_TRUE(kept.count(7));
  EXPECT_TRUE(kept.count(0));  // ties: lowest ids first
  EXPECT_FALSE(kept.count(10000));
}

// The kept set of top-k then top-p, written the plain way: sort all tokens
// (value desc, id asc), cut at k, then keep while the preceding mass < p.
std::set<int32_t> NaiveTopKTopP(const std::vector<float>& l, int k, double top_p) {
  std::vector<int32_t> ids(l.size());
  for (size_t i = 0; i < l.size(); ++i) ids[i] = static_cast<int32_t>(i);
  std::sort(ids.begin(), ids.end(), [&](int32_t a, int32_t b) { return l[a] > l[b] || (l[a] == l[b] && a < b); });
  if (k > 0 && k < static_cast<int>(ids.size())) ids.resize(k);
  double z = 0;
  for (int32_t id : ids) z += std::exp(double{l[id]} - l[ids[0]]);
  std::set<int32_t> kept;
  double cumulative = 0;
  for (int32_t id : ids) {
    if (cumulative >= top_p) break;
    kept.insert(id);
    cumulative += std::exp(double{l[id]} - l[ids[0]]) / z;
  }
  return kept;
}

TEST(SamplerTest, TopKTopPMatchNaiveOnRandomLogits) {
  Rng rng(17);
  for (int trial = 0; trial < 60; ++trial) {
    const int vocab = 1 + static_cast<int>(rng.UniformInt(3000));
    std::vector<float> l(vocab);
    const float spread = 0.5f + 8.0f * rng.Uniform();
    for (float& x : l) x = spread * rng.Normal();
    SamplingParams p;
    p.top_k = trial % 3 == 0 ? 0 : 1 + static_cast<int>(rng.UniformInt(vocab));
    p.top_p = 0.05f + 0.95f * rng.Uniform();
    BANYAN_ASSERT_OK_AND_ASSIGN(auto out, Make(p).ProcessLogits(l, {}, {}));
    EXPECT_EQ(Kept(out), NaiveTopKTopP(l, p.top_k, p.top_p)) << "trial " << trial;
  }
}

TEST(SamplerTest, MinPKeepsTokensAboveFractionOfMax) {
  const auto l = LogOf({0.5, 0.2, 0.05, 0.25});
  SamplingParams p;
  p.min_p = 0.39f;  // threshold 0.195
  BANYAN_ASSERT_OK_AND_ASSIGN(auto out, Make(p).ProcessLogits(l, {}, {}));
  EXPECT_EQ(Kept(out), (std::set<int32_t>{0, 1, 3}));
  p.min_p = 0.41f;
  BANYAN_ASSERT_OK_AND_ASSIGN(out, Make(p).ProcessLogits(l, {}, {}));
  EXPECT_EQ(Kept(out), (std::set<int32_t>{0, 3}));
  p.min_p = 1.0f;
  BANYAN_ASSERT_OK_AND_ASSIGN(out, Make(p).ProcessLogits(l, {}, {}));
  EXPECT_EQ(Kept(out), (std::set<int32_t>{0}));
}

TEST(SamplerTest, PenaltiesExactValues) {
  const std::vector<float> l = {2.0f, -2.0f, 1.0f, 0.5f, 3.0f};
  SamplingParams p;
  p.temperature = 0;
  p.repetition_penalty = 2.0f;
  const std::vector<int32_t> prompt = {0, 1};
  const std::vector<int32_t> generated = {3, 3, 1};
  BANYAN_ASSERT_OK_AND_ASSIGN(auto out, Make(p).ProcessLogits(l, prompt, generated));
  EXPECT_EQ(out, (std::vector<float>{1.0f, -4.0f, 1.0f, 0.25f, 3.0f}));
  p.repetition_penalty = 1.0f;
  p.frequency_penalty = 0.5f;
  p.presence_penalty = 0.25f;
  BANYAN_ASSERT_OK_AND_ASSIGN(out, Make(p).ProcessLogits(l, prompt, generated));
  EXPECT_EQ(out, (std::vector<float>{2.0f, -2.75f, 1.0f, -0.75f, 3.0f}));
}

TEST(SamplerTest, TemperatureScalesLogits) {
  SamplingParams p;
  p.temperature = 0.5f;
  BANYAN_ASSERT_OK_AND_ASSIGN(auto out, Make(p).ProcessLogits(std::vector<float>{1.0f, -2.0f}, {}, {}));
  EXPECT_EQ(out, (std::vector<float>{2.0f, -4.0f}));
}

// Draw frequencies match the processed distribution (5 sigma bounds).
void ExpectDistribution(const SamplingParams& p, const std::vector<float>& logits, const std::vector<double>& want) {
  Sampler s = Make(p, 99);
  const int draws = 40000;
  std::vector<int> counts(logits.size());
  for (int i = 0; i < draws; ++i) {
    auto r = s.Sample(logits, {}, {});
    ASSERT_TRUE(r.ok());
    ++counts[r->token];
  }
  for (size_t i = 0; i < want.size(); ++i) {
    const double sigma = std::sqrt(want[i] * (1 - want[i]) / draws);
    EXPECT_NEAR(counts[i] / double(draws), want[i], 5 * sigma + 1e-9) << "token " << i;
  }
}

TEST(SamplerTest, DrawsFollowTheDistribution) {
  const auto l = LogOf({0.1, 0.2, 0.3, 0.4});
  SamplingParams p;
  ExpectDistribution(p, l, {0.1, 0.2, 0.3, 0.4});
  p.temperature = 0.5f;  // p^2 normalized: 1, 4, 9, 16 over 30
  ExpectDistribution(p, l, {1 / 30.0, 4 / 30.0, 9 / 30.0, 16 / 30.0});
  p.temperature = 1.0f;
  p.top_k = 2;  // 0.3, 0.4 renormalized
  ExpectDistribution(p, l, {0, 0, 3 / 7.0, 4 / 7.0});
}

TEST(SamplerTest, LogprobsOfProcessedAndRawDistributions) {
  const auto l = LogOf({0.1, 0.2, 0.3, 0.4});
  SamplingParams p;
  p.top_k = 2;
  p.top_logprobs = 3;
  Sampler s = Make(p, 5);
  for (int i = 0; i < 20; ++i) {
    BANYAN_ASSERT_OK_AND_ASSIGN(auto r, s.Sample(l, {}, {}));
    ASSERT_TRUE(r.token == 2 || r.token == 3);
    EXPECT_NEAR(r.logprob, std::log(r.token == 2 ? 3 / 7.0 : 4 / 7.0), 1e-6);
    EXPECT_NEAR(r.raw_logprob, std::log(r.token == 2 ? 0.3 : 0.4), 1e-6);
    ASSERT_EQ(r.top_logprobs.size(), 2u);  // only two survive filtering
    EXPECT_EQ(r.top_logprobs[0].first, 3);
    EXPECT_NEAR(r.top_logprobs[0].second, std::log(4 / 7.0), 1e-6);
    EXPECT_EQ(r.top_logprobs[1].first, 2);
  }
}

TEST(SamplerTest, SeedGivesTheSameTokensAgain) {
  std::vector<float> l(1000);
  Rng init(3);
  for (float& x : l) x = 2 * init.Normal();
  SamplingParams p;
  p.temperature = 0.9f;
  p.top_p = 0.95f;
  std::vector<int32_t> a, b, c, d;
  auto collect = [&](std::vector<int32_t>& dst, uint64_t seed, uint64_t branch) {
    BANYAN_ASSERT_OK_AND_ASSIGN(Sampler s, Sampler::Create(p, Rng(seed).Derive(branch)));
    for (int i = 0; i < 50; ++i) dst.push_back(s.Sample(l, {}, dst).value().token);
  };
  collect(a, 42, 0);
  collect(b, 42, 0);
  collect(c, 42, 1);
  collect(d, 43, 0);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  EXPECT_NE(a, d);
}

TEST(SamplerTest, BadInput) {
  SamplingParams p;
  p.temperature = -1;
  EXPECT_THAT(Sampler::Create(p, Rng(1)), StatusIs(absl::StatusCode::kInvalidArgument, ::testing::HasSubstr("temperature")));
  p = {};
  p.top_p = 0;
  EXPECT_THAT(Sampler::Create(p, Rng(1)), StatusIs(absl::StatusCode::kInvalidArgument, ::testing::HasSubstr("top_p")));
  p = {};
  p.top_k = -2;
  EXPECT_THAT(Sampler::Create(p, Rng(1)), StatusIs(absl::StatusCode::kInvalidArgument));
  p = {};
  p.min_p = 1.5f;
  EXPECT_THAT(Sampler::Create(p, Rng(1)), StatusIs(absl::StatusCode::kInvalidArgument));
  p = {};
  p.repetition_penalty = 0;
  EXPECT_THAT(Sampler::Create(p, Rng(1)), StatusIs(absl::StatusCode::kInvalidArgument));
  p = {};
  p.frequency_penalty = std::nanf("");
  EXPECT_THAT(Sampler::Create(p, Rng(1)), StatusIs(absl::StatusCode::kInvalidArgument));

  Sampler s = Make({});
  EXPECT_THAT(s.Sample({}, {}, {}), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(s.Sample(std::vector<float>{1.0f, std::nanf("")}, {}, {}), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(s.Sample(std::vector<float>{-kInf, -kInf}, {}, {}), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(s.Sample(std::vector<float>{1.0f, kInf}, {}, {}), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(s.Sample(std::vector<float>{1.0f, 2.0f}, std::vector<int32_t>{2}, {}), StatusIs(absl::StatusCode::kOutOfRange));
  EXPECT_THAT(s.Sample(std::vector<float>{1.0f, 2.0f}, {}, std::vector<int32_t>{-1}), StatusIs(absl::StatusCode::kOutOfRange));
  // -inf logits are allowed and never drawn.
  for (int i = 0; i < 100; ++i) EXPECT_EQ(s.Sample(std::vector<float>{-kInf, 0.0f, -kInf}, {}, {}).value().token, 1);
}

}  // namespace
}  // namespace banyan::model

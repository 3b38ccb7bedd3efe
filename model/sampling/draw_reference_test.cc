// ReferenceDraw (the device draws' plain definition) against the Sampler's
// processed logits: the same kept sets (except within rounding of a cut), the
// processed log-softmax as logprob, and an inverse CDF by token id whose
// frequencies over evenly spaced uniforms follow the kept probabilities.
#include "model/sampling/draw_reference.h"

#include <cmath>
#include <limits>
#include <vector>

#include "gtest/gtest.h"
#include "model/sampling/sampler.h"
#include "sdk/base/rng.h"
#include "sdk/base/status_testing.h"

namespace banyan::model::sampling {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

// Gaussian logits with a few strong tokens, a masked one, and (every third
// row) values rounded to quarters so that cuts fall inside runs of ties.
std::vector<float> Logits(Rng& rng, size_t vocab, int trial) {
  std::vector<float> l(vocab);
  const float spread = 0.5f + 3.0f * rng.Uniform();
  for (float& x : l) x = spread * rng.Normal();
  for (int i = 0; i < 4; ++i) l[rng.UniformInt(vocab)] += 3.0f * spread * rng.Uniform();
  if (trial % 3 == 0) {
    for (float& x : l) x = std::round(4.0f * x) / 4.0f;
  }
  if (vocab > 1) l[rng.UniformInt(vocab)] = -kInf;
  return l;
}

SamplingParams Params(Rng& rng, int trial) {
  SamplingParams p;
  p.temperature = 0.3f + 1.4f * rng.Uniform();
  if (trial % 3 == 1) p.top_k = 1 + static_cast<int32_t>(rng.UniformInt(300));
  if (trial % 4 != 0) p.top_p = 0.3f + 0.69f * rng.Uniform();
  if (trial % 5 == 2) p.min_p = 0.3f * rng.Uniform();
  return p;
}

TEST(DrawReferenceTest, KeepsWhatTheSamplerKeeps) {
  Rng rng(5);
  int compared = 0;
  for (int trial = 0; trial < 240; ++trial) {
    const size_t vocab = trial % 2 == 0 ? 1000 : 4099;
    const std::vector<float> logits = Logits(rng, vocab, trial);
    const SamplingParams p = Params(rng, trial);
    BANYAN_ASSERT_OK_AND_ASSIGN(Sampler sampler, Sampler::Create(p, Rng(1)));
    BANYAN_ASSERT_OK_AND_ASSIGN(std::vector<float> processed,
                                sampler.ProcessLogits(logits, {}, {}));
    DrawMargins margins;
    const std::vector<uint8_t> kept = ReferenceKept(logits, MakeDeviceDraw(0, p, 0.5), &margins);
    ASSERT_EQ(kept.size(), vocab);
    if (margins.smallest() < 1e-5) continue;  // a cut within rounding: either side is right
    ++compared;
    float vmax = -kInf;
    for (float v : processed) vmax = std::max(vmax, v);
    for (size_t i = 0; i < vocab; ++i) {
      // Tokens whose probability underflows float (the Sampler's exp is 0
      // below -87) may be kept by one and not the other; they are never drawn.
      if (logits[i] / p.temperature < vmax - 80.0f) continue;
      EXPECT_EQ(kept[i] != 0, processed[i] != -kInf) << "trial " << trial << " token " << i;
    }
  }
  EXPECT_GT(compared, 200);
}

TEST(DrawReferenceTest, LogprobIsTheProcessedLogSoftmax) {
  Rng rng(6);
  for (int trial = 0; trial < 120; ++trial) {
    const std::vector<float> logits = Logits(rng, 777, trial);
    const SamplingParams p = Params(rng, trial);
    BANYAN_ASSERT_OK_AND_ASSIGN(Sampler sampler, Sampler::Create(p, Rng(1)));
    BANYAN_ASSERT_OK_AND_ASSIGN(std::vector<float> processed,
                                sampler.ProcessLogits(logits, {}, {}));
    DrawMargins margins;
    const DrawResult r = ReferenceDraw(logits, MakeDeviceDraw(0, p, rng.UniformDouble()), &margins);
    ASSERT_GE(r.token, 0);
    if (margins.smallest() < 1e-5) continue;
    ASSERT_NE(processed[r.token], -kInf) << "trial " << trial;
    BANYAN_ASSERT_OK_AND_ASSIGN(double lse, LogSumExp(processed));
    BANYAN_ASSERT_OK_AND_ASSIGN(double raw_lse, LogSumExp(logits));
    EXPECT_NEAR(r.logprob, processed[r.token] - lse, 1e-4) << "trial " << trial;
    EXPECT_NEAR(r.raw_logprob, logits[r.token] - raw_lse, 1e-4) << "trial " << trial;
  }
}

TEST(DrawReferenceTest, EvenlySpacedUniformsGiveTheKeptProbabilities) {
  Rng rng(7);
  const std::vector<float> logits = Logits(rng, 50, 1);
  SamplingParams p;
  p.temperature = 0.9f;
  p.top_p = 0.9f;
  BANYAN_ASSERT_OK_AND_ASSIGN(Sampler sampler, Sampler::Create(p, Rng(1)));
  BANYAN_ASSERT_OK_AND_ASSIGN(std::vector<float> processed, sampler.ProcessLogits(logits, {}, {}));
  BANYAN_ASSERT_OK_AND_ASSIGN(double lse, LogSumExp(processed));
  constexpr int kDraws = 20000;
  std::vector<int> hits(logits.size(), 0);
  int32_t previous = -1;
  for (int j = 0; j < kDraws; ++j) {
    const DrawResult r = ReferenceDraw(logits, MakeDeviceDraw(0, p, (j + 0.5) / kDraws));
    ASSERT_GE(r.token, previous);  // an inverse CDF by id: monotone in the uniform
    previous = r.token;
    ++hits[r.token];
  }
  for (size_t i = 0; i < logits.size(); ++i) {
    const double want = processed[i] == -kInf ? 0.0 : std::exp(processed[i] - lse);
    EXPECT_NEAR(hits[i] / static_cast<double>(kDraws), want, 1.5 / kDraws) << "token " << i;
  }
}

TEST(DrawReferenceTest, GreedyAndBadRows) {
  std::vector<float> logits = {1.0f, 3.0f, -2.0f, 3.0f};
  DeviceDraw d;
  d.temperature = 0.0f;
  DrawResult r = ReferenceDraw(logits, d);
  EXPECT_EQ(r.token, 1);  // the first maximum
  EXPECT_EQ(r.logprob, r.raw_logprob);
  BANYAN_ASSERT_OK_AND_ASSIGN(SampleResult want, SampleGreedy(logits));
  EXPECT_NEAR(r.logprob, want.logprob, 1e-6);
  d.temperature = 1.0f;
  for (float bad : {std::numeric_limits<float>::quiet_NaN(), kInf}) {
    logits[2] = bad;
    EXPECT_EQ(ReferenceDraw(logits, d).token, -1);
    EXPECT_TRUE(ReferenceKept(logits, d).empty());
  }
  EXPECT_EQ(ReferenceDraw(std::vector<float>(3, -kInf), d).token, -1);
  EXPECT_EQ(ReferenceDraw({}, d).token, -1);
}

}  // namespace
}  // namespace banyan::model::sampling

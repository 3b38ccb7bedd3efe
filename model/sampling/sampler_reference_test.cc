// The fast Sampler against ReferenceSampler (double, plain) on random logits:
// same greedy ids, same kept sets, logprobs within float rounding, draw
// frequencies that follow the processed distribution, and determinism across
// threads and batch composition.
#include <algorithm>
#include <cmath>
#include <limits>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "model/sampling/reference_sampler.h"
#include "model/sampling/sampler.h"
#include "sdk/base/rng.h"
#include "sdk/base/status_testing.h"

namespace banyan::model {
namespace {

using sampling::ReferenceSampler;
constexpr float kInf = std::numeric_limits<float>::infinity();

// Logits shaped like a language model's: a few strong tokens over a wide
// Gaussian floor, some -inf (masked) entries.
std::vector<float> RandomLogits(Rng& rng, size_t vocab, float spread) {
  std::vector<float> l(vocab);
  for (float& x : l) x = spread * rng.Normal();
  for (int i = 0; i < 8; ++i) l[rng.UniformInt(vocab)] += 4.0f * spread * rng.Uniform();
  l[rng.UniformInt(vocab)] = -kInf;
  return l;
}

std::vector<int32_t> RandomTokens(Rng& rng, size_t n, size_t vocab) {
  std::vector<int32_t> t(n);
  for (int32_t& x : t) x = static_cast<int32_t>(rng.UniformInt(vocab));
  return t;
}

SamplingParams RandomParams(Rng& rng, int trial) {
  SamplingParams p;
  p.temperature = trial % 5 == 0 ? 0.0f : 0.3f + 1.4f * rng.Uniform();
  if (trial % 3 == 1) p.top_k = 1 + static_cast<int32_t>(rng.UniformInt(200));
  if (trial % 4 == 2) p.top_p = 0.5f + 0.49f * rng.Uniform();
  if (trial % 7 == 3) p.min_p = 0.2f * rng.Uniform();
  if (trial % 2 == 1) {
    p.repetition_penalty = 0.8f + 0.6f * rng.Uniform();
    p.frequency_penalty = rng.Uniform() - 0.5f;
    p.presence_penalty = rng.Uniform() - 0.5f;
  }
  p.top_logprobs = static_cast<int32_t>(rng.UniformInt(6));
  return p;
}

std::vector<int32_t> KeptIds(const std::vector<float>& l) {
  std::vector<int32_t> kept;
  for (size_t i = 0; i < l.size(); ++i) {
    if (l[i] != -kInf) kept.push_back(static_cast<int32_t>(i));
  }
  return kept;
}

// log-softmax of processed logits, in double.
std::vector<double> LogSoftmax(const std::vector<float>& l) {
  const double mx = *std::max_element(l.begin(), l.end());
  double z = 0;
  for (float x : l) z += x == -kInf ? 0.0 : std::exp(x - mx);
  std::vector<double> out(l.size());
  for (size_t i = 0; i < l.size(); ++i) out[i] = l[i] - mx - std::log(z);
  return out;
}

TEST(SamplerReferenceTest, ProcessedLogitsGreedyIdsAndLogprobsAgree) {
  Rng rng(11);
  for (int trial = 0; trial < 60; ++trial) {
    const size_t vocab = trial % 6 == 0 ? 128256 : trial % 6 == 1 ? 49152 : 1 + rng.UniformInt(5000);
    const std::vector<float> logits = RandomLogits(rng, vocab, 0.5f + 4.0f * rng.Uniform());
    const std::vector<int32_t> prompt = RandomTokens(rng, rng.UniformInt(300), vocab);
    const std::vector<int32_t> generated = RandomTokens(rng, rng.UniformInt(60), vocab);
    const SamplingParams p = RandomParams(rng, trial);
    BANYAN_ASSERT_OK_AND_ASSIGN(Sampler fast, Sampler::Create(p, Rng(trial)));
    BANYAN_ASSERT_OK_AND_ASSIGN(ReferenceSampler ref, ReferenceSampler::Create(p, Rng(trial)));
    BANYAN_ASSERT_OK_AND_ASSIGN(std::vector<float> got, fast.ProcessLogits(logits, prompt, generated));
    BANYAN_ASSERT_OK_AND_ASSIGN(std::vector<float> want, ref.ProcessLogits(logits, prompt, generated));
    // Penalties and temperature are the same float operations: the same bits.
    ASSERT_EQ(got, want) << "trial " << trial << " vocab " << vocab;

    BANYAN_ASSERT_OK_AND_ASSIGN(SampleResult r, fast.Sample(logits, prompt, generated));
    const std::vector<double> lp = LogSoftmax(want);
    const std::vector<double> raw = LogSoftmax(logits);
    ASSERT_NE(want[r.token], -kInf) << "drew a filtered token";
    EXPECT_NEAR(r.logprob, lp[r.token], 2e-5) << "trial " << trial;
    EXPECT_NEAR(r.raw_logprob, raw[r.token], 2e-5) << "trial " << trial;
    if (p.temperature == 0.0f) {
      BANYAN_ASSERT_OK_AND_ASSIGN(SampleResult rr, ref.Sample(logits, prompt, generated));
      EXPECT_EQ(r.token, rr.token) << "trial " << trial;
    }
    // top_logprobs: the same ids in the same order, values within rounding.
    BANYAN_ASSERT_OK_AND_ASSIGN(SampleResult rr, ref.Sample(logits, prompt, generated));
    ASSERT_EQ(r.top_logprobs.size(), rr.top_logprobs.size()) << "trial " << trial;
    for (size_t i = 0; i < r.top_logprobs.size(); ++i) {
      EXPECT_EQ(r.top_logprobs[i].first, rr.top_logprobs[i].first) << "trial " << trial;
      EXPECT_NEAR(r.top_logprobs[i].second, rr.top_logprobs[i].second, 2e-5) << "trial " << trial;
    }
  }
}

TEST(SamplerReferenceTest, SampleGreedyAndLogSumExpMatchReference) {
  Rng rng(12);
  for (size_t vocab : {1u, 2u, 33u, 32000u, 49152u, 128256u}) {
    std::vector<float> logits = RandomLogits(rng, vocab, 3.0f);
    if (vocab == 1) logits[0] = 0.25f;
    for (int i = 0; i < 3; ++i) logits[rng.UniformInt(vocab)] = logits[0];  // ties with a low id
    SamplingParams p;
    p.temperature = 0;
    BANYAN_ASSERT_OK_AND_ASSIGN(ReferenceSampler ref, ReferenceSampler::Create(p, Rng(1)));
    BANYAN_ASSERT_OK_AND_ASSIGN(SampleResult want, ref.Sample(logits, {}, {}));
    BANYAN_ASSERT_OK_AND_ASSIGN(SampleResult got, SampleGreedy(logits));
    EXPECT_EQ(got.token, want.token);
    EXPECT_NEAR(got.logprob, want.logprob, 1e-5);
    EXPECT_NEAR(got.raw_logprob, want.raw_logprob, 1e-5);
    BANYAN_ASSERT_OK_AND_ASSIGN(double lse, LogSumExp(logits));
    EXPECT_NEAR(lse, logits[want.token] - want.raw_logprob, 1e-5);
  }
  EXPECT_THAT(SampleGreedy(std::vector<float>{1.0f, std::nanf("")}),
              testing::StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(SampleGreedy({}), testing::StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(LogSumExp(std::vector<float>{-kInf}), testing::StatusIs(absl::StatusCode::kInvalidArgument));
}

// Chi-square of the draw counts against the processed distribution (bins of
// expected count >= 5 each; the rest pooled). A sampler that is off by a
// relative 3% on any likely token fails at these draw counts.
void ExpectDrawsFollow(const SamplingParams& p, const std::vector<float>& logits,
                       const std::vector<int32_t>& prompt, const std::vector<int32_t>& generated, uint64_t seed,
                       int draws = 60000) {
  BANYAN_ASSERT_OK_AND_ASSIGN(ReferenceSampler ref, ReferenceSampler::Create(p, Rng(seed)));
  BANYAN_ASSERT_OK_AND_ASSIGN(std::vector<float> processed, ref.ProcessLogits(logits, prompt, generated));
  const std::vector<double> lp = LogSoftmax(processed);
  BANYAN_ASSERT_OK_AND_ASSIGN(Sampler fast, Sampler::Create(p, Rng(seed)));
  const int kDraws = draws;
  std::vector<int> counts(logits.size());
  for (int i = 0; i < kDraws; ++i) {
    BANYAN_ASSERT_OK_AND_ASSIGN(SampleResult r, fast.Sample(logits, prompt, generated));
    ASSERT_NE(processed[r.token], -kInf);
    ++counts[r.token];
  }
  double chi2 = 0, pooled_expected = 0, pooled_count = 0;
  int bins = 0;
  for (size_t i = 0; i < logits.size(); ++i) {
    const double expected = kDraws * std::exp(lp[i]);
    if (expected >= 5) {
      chi2 += (counts[i] - expected) * (counts[i] - expected) / expected;
      ++bins;
    } else {
      pooled_expected += expected;
      pooled_count += counts[i];
    }
  }
  if (pooled_expected >= 5) {
    chi2 += (pooled_count - pooled_expected) * (pooled_count - pooled_expected) / pooled_expected;
    ++bins;
  }
  const double dof = std::max(1, bins - 1);
  // Mean dof, sd sqrt(2 dof): 6 sd above is a false alarm rate near 1e-9.
  EXPECT_LT(chi2, dof + 6 * std::sqrt(2 * dof) + 10) << "bins " << bins;
}

TEST(SamplerReferenceTest, DrawFrequenciesFollowTheProcessedDistribution) {
  Rng rng(13);
  const std::vector<float> logits = RandomLogits(rng, 3000, 2.5f);
  const std::vector<int32_t> prompt = RandomTokens(rng, 100, 3000);
  const std::vector<int32_t> generated = RandomTokens(rng, 20, 3000);
  SamplingParams p;
  ExpectDrawsFollow(p, logits, {}, {}, 1);
  p.temperature = 0.7f;
  ExpectDrawsFollow(p, logits, {}, {}, 2);
  p.top_k = 40;
  ExpectDrawsFollow(p, logits, {}, {}, 3);
  p.top_k = 0;
  p.top_p = 0.9f;
  ExpectDrawsFollow(p, logits, {}, {}, 4);
  p.top_p = 1.0f;
  p.min_p = 0.05f;
  ExpectDrawsFollow(p, logits, {}, {}, 5);
  p.top_k = 100;
  p.top_p = 0.8f;
  p.repetition_penalty = 1.3f;
  p.frequency_penalty = 0.4f;
  p.presence_penalty = 0.2f;
  ExpectDrawsFollow(p, logits, prompt, generated, 6);
  // A broad row: top-p keeps thousands of tokens (the histogram path).
  const std::vector<float> flat = RandomLogits(rng, 12000, 0.3f);
  SamplingParams q;
  q.top_p = 0.5f;
  ExpectDrawsFollow(q, flat, {}, {}, 7, 30000);
}

// A top-p cut over a broad large vocabulary (the histogram path) keeps the
// same set as the sorted reference.
TEST(SamplerReferenceTest, TopPSelectionOnFlatRowsMatchesSort) {
  Rng rng(14);
  for (int trial = 0; trial < 8; ++trial) {
    const std::vector<float> logits = RandomLogits(rng, 49152, 0.02f + 0.1f * trial);
    SamplingParams p;
    p.top_p = 0.1f + 0.1f * trial;
    BANYAN_ASSERT_OK_AND_ASSIGN(Sampler fast, Sampler::Create(p, Rng(1)));
    BANYAN_ASSERT_OK_AND_ASSIGN(ReferenceSampler ref, ReferenceSampler::Create(p, Rng(1)));
    BANYAN_ASSERT_OK_AND_ASSIGN(std::vector<float> got, fast.ProcessLogits(logits, {}, {}));
    BANYAN_ASSERT_OK_AND_ASSIGN(std::vector<float> want, ref.ProcessLogits(logits, {}, {}));
    const std::vector<int32_t> g = KeptIds(got), w = KeptIds(want);
    // float vs double cumulative sums may move the cut by a token or two.
    EXPECT_NEAR(static_cast<double>(g.size()), static_cast<double>(w.size()), 2.0) << "trial " << trial;
    std::vector<int32_t> common;
    std::set_intersection(g.begin(), g.end(), w.begin(), w.end(), std::back_inserter(common));
    EXPECT_GE(common.size() + 2, std::max(g.size(), w.size())) << "trial " << trial;
  }
}

// Same seed, same tokens: whatever thread samples a branch, in whatever order
// and beside whatever other rows (scratch buffers are per thread and reused).
TEST(SamplerReferenceTest, DeterministicAcrossThreadsAndBatchComposition) {
  constexpr int kBranches = 12, kSteps = 20;
  Rng rng(15);
  std::vector<std::vector<float>> rows;
  for (int i = 0; i < 16; ++i) rows.push_back(RandomLogits(rng, i % 2 ? 49152 : 3001, 2.0f));
  auto params = [](int b) {
    SamplingParams p;
    p.temperature = 0.5f + 0.1f * b;
    p.top_k = b % 3 == 0 ? 50 : 0;
    p.top_p = b % 2 == 0 ? 0.9f : 1.0f;
    p.repetition_penalty = b % 4 == 1 ? 1.2f : 1.0f;
    p.frequency_penalty = b % 5 == 2 ? 0.3f : 0.0f;
    return p;
  };
  // Branch b at step s reads row (b + s) % 16 (vocab changes between steps).
  auto run = [&](int threads, bool reversed) {
    std::vector<std::vector<int32_t>> tokens(kBranches);
    std::vector<Sampler> samplers;
    for (int b = 0; b < kBranches; ++b) samplers.push_back(Sampler::Create(params(b), Rng(7).Derive(b)).value());
    for (int s = 0; s < kSteps; ++s) {
      std::vector<std::thread> pool;
      for (int t = 0; t < threads; ++t) {
        pool.emplace_back([&, t] {
          for (int i = t; i < kBranches; i += threads) {
            const int b = reversed ? kBranches - 1 - i : i;
            const std::vector<float>& row = rows[(b + s) % 16];
            std::vector<int32_t> gen;
            for (int32_t x : tokens[b]) {
              if (static_cast<size_t>(x) < row.size()) gen.push_back(x);
            }
            tokens[b].push_back(samplers[b].Sample(row, {}, gen).value().token);
          }
        });
      }
      for (auto& th : pool) th.join();
    }
    return tokens;
  };
  const auto one = run(1, false);
  EXPECT_EQ(run(4, false), one);
  EXPECT_EQ(run(3, true), one);
}

}  // namespace
}  // namespace banyan::model

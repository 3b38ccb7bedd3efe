#include "model/sampling/reference_sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "banyan/status_macros.h"

namespace banyan::model::sampling {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// Total order for "more likely first": larger value, then lower id.
struct MoreLikely {
  const float* v;
  bool operator()(int32_t a, int32_t b) const { return v[a] > v[b] || (v[a] == v[b] && a < b); }
};

absl::Status CheckLogits(absl::Span<const float> logits) {
  if (logits.empty()) return absl::InvalidArgumentError("sampling: empty logits");
  bool any_finite = false;
  for (size_t i = 0; i < logits.size(); ++i) {
    const float l = logits[i];
    if (std::isnan(l) || l == std::numeric_limits<float>::infinity()) {
      return absl::InvalidArgumentError(absl::StrCat("sampling: logit ", i, " is ", l));
    }
    any_finite |= std::isfinite(l);
  }
  if (!any_finite) return absl::InvalidArgumentError("sampling: every logit is -inf");
  return absl::OkStatus();
}

absl::Status CheckHistory(absl::Span<const int32_t> tokens, size_t vocab) {
  for (int32_t t : tokens) {
    if (t < 0 || static_cast<size_t>(t) >= vocab) {
      return absl::OutOfRangeError(absl::StrCat("sampling: history token ", t, " outside [0, ", vocab, ")"));
    }
  }
  return absl::OkStatus();
}

// log of the sum of exp over finite values.
double LogSumExp(absl::Span<const float> v) {
  const float mx = *std::max_element(v.begin(), v.end());
  double z = 0;
  for (float x : v) {
    if (x != kNegInf) z += std::exp(static_cast<double>(x) - mx);
  }
  return mx + std::log(z);
}

void KeepTopK(std::vector<float>& l, int32_t k) {
  const int32_t vocab = static_cast<int32_t>(l.size());
  if (k <= 0 || k >= vocab) return;
  std::vector<int32_t> ids(vocab);
  std::iota(ids.begin(), ids.end(), 0);
  std::nth_element(ids.begin(), ids.begin() + (k - 1), ids.end(), MoreLikely{l.data()});
  for (int32_t i = k; i < vocab; ++i) l[ids[i]] = kNegInf;
}

void KeepTopP(std::vector<float>& l, float top_p) {
  if (top_p >= 1.0f) return;
  const float mx = *std::max_element(l.begin(), l.end());
  double z = 0;
  for (float x : l) z += (x == kNegInf) ? 0.0 : std::exp(static_cast<double>(x) - mx);
  // Candidates: tokens within a factor 1e-6 of the most likely. If they hold
  // at least top_p of the mass, the kept prefix lies among them (it takes the
  // most likely tokens first); otherwise sort everything that is finite.
  for (const double ratio : {1e-6, 0.0}) {
    std::vector<int32_t> cand;
    double mass = 0;
    for (int32_t i = 0; i < static_cast<int32_t>(l.size()); ++i) {
      if (l[i] == kNegInf) continue;
      const double p = std::exp(static_cast<double>(l[i]) - mx);
      if (p >= ratio) {
        cand.push_back(i);
        mass += p;
      }
    }
    if (mass / z < top_p && ratio > 0) continue;
    std::sort(cand.begin(), cand.end(), MoreLikely{l.data()});
    std::vector<char> keep(l.size(), 0);
    double cumulative = 0;
    for (int32_t id : cand) {
      if (cumulative >= top_p) break;
      keep[id] = 1;
      cumulative += std::exp(static_cast<double>(l[id]) - mx) / z;
    }
    for (size_t i = 0; i < l.size(); ++i) {
      if (!keep[i]) l[i] = kNegInf;
    }
    return;
  }
}

void KeepMinP(std::vector<float>& l, float min_p) {
  if (min_p <= 0.0f) return;
  const float mx = *std::max_element(l.begin(), l.end());
  for (float& x : l) {
    if (x != kNegInf && std::exp(static_cast<double>(x) - mx) < min_p) x = kNegInf;
  }
}

}  // namespace

absl::StatusOr<ReferenceSampler> ReferenceSampler::Create(const SamplingParams& params, Rng rng) {
  BANYAN_RETURN_IF_ERROR(ValidateSamplingParams(params));
  return ReferenceSampler(params, rng);
}

absl::StatusOr<std::vector<float>> ReferenceSampler::ProcessLogits(absl::Span<const float> logits,
                                                          absl::Span<const int32_t> prompt,
                                                          absl::Span<const int32_t> generated) const {
  BANYAN_RETURN_IF_ERROR(CheckLogits(logits));
  BANYAN_RETURN_IF_ERROR(CheckHistory(prompt, logits.size()));
  BANYAN_RETURN_IF_ERROR(CheckHistory(generated, logits.size()));
  std::vector<float> l(logits.begin(), logits.end());
  const SamplingParams& p = params_;
  if (p.repetition_penalty != 1.0f) {
    absl::flat_hash_set<int32_t> seen(prompt.begin(), prompt.end());
    seen.insert(generated.begin(), generated.end());
    for (int32_t t : seen) {
      l[t] = l[t] > 0 ? l[t] / p.repetition_penalty : l[t] * p.repetition_penalty;
    }
  }
  if (p.frequency_penalty != 0.0f || p.presence_penalty != 0.0f) {
    absl::flat_hash_map<int32_t, int32_t> counts;
    for (int32_t t : generated) ++counts[t];
    for (const auto& [t, n] : counts) {
      if (l[t] != kNegInf) l[t] -= p.frequency_penalty * static_cast<float>(n) + p.presence_penalty;
    }
  }
  if (p.temperature == 0.0f) return l;
  if (p.temperature != 1.0f) {
    for (float& x : l) x /= p.temperature;  // -inf stays -inf
  }
  KeepTopK(l, p.top_k);
  KeepTopP(l, p.top_p);
  KeepMinP(l, p.min_p);
  return l;
}

absl::StatusOr<SampleResult> ReferenceSampler::Sample(absl::Span<const float> logits, absl::Span<const int32_t> prompt,
                                             absl::Span<const int32_t> generated) {
  BANYAN_ASSIGN_OR_RETURN(const std::vector<float> l, ProcessLogits(logits, prompt, generated));
  const int32_t vocab = static_cast<int32_t>(l.size());
  SampleResult result;
  if (params_.temperature == 0.0f) {
    result.token = static_cast<int32_t>(std::max_element(l.begin(), l.end()) - l.begin());  // first max
  } else {
    const float mx = *std::max_element(l.begin(), l.end());
    double z = 0;
    for (float x : l) z += (x == kNegInf) ? 0.0 : std::exp(static_cast<double>(x) - mx);
    const double target = rng_.UniformDouble() * z;
    double cumulative = 0;
    for (int32_t i = 0; i < vocab; ++i) {
      if (l[i] == kNegInf) continue;
      result.token = i;  // the last kept token absorbs rounding at the top end
      cumulative += std::exp(static_cast<double>(l[i]) - mx);
      if (cumulative > target) break;
    }
  }
  const double lse = LogSumExp(l);
  result.logprob = static_cast<float>(l[result.token] - lse);
  result.raw_logprob = static_cast<float>(logits[result.token] - LogSumExp(logits));
  if (params_.top_logprobs > 0) {
    std::vector<int32_t> ids;
    for (int32_t i = 0; i < vocab; ++i) {
      if (l[i] != kNegInf) ids.push_back(i);
    }
    const size_t k = std::min<size_t>(ids.size(), params_.top_logprobs);
    std::partial_sort(ids.begin(), ids.begin() + k, ids.end(), MoreLikely{l.data()});
    for (size_t i = 0; i < k; ++i) {
      result.top_logprobs.emplace_back(ids[i], static_cast<float>(l[ids[i]] - lse));
    }
  }
  return result;
}

}  // namespace banyan::model::sampling

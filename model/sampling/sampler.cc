// The fast sampler. Per row it does a handful of vectorized passes (scan,
// exp-sum, at most one copy) in per-thread scratch buffers, touches only the
// seen tokens for the penalties, and selects instead of sorting: a bounded
// heap for top-k and top_logprobs, candidates above a threshold (or a
// mass-guided quickselect) for top-p. ReferenceSampler (reference_sampler.h)
// is the plain version it is tested against.
#include "model/sampling/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "banyan/status_macros.h"
#include "model/sampling/row_math.h"

namespace banyan::model {
namespace {

using sampling::ExpSum;
using sampling::FastExp;

constexpr float kNegInf = -std::numeric_limits<float>::infinity();
// Top-p candidates: tokens whose probability is at least 1e-6 of the largest
// (ln 1e-6 = -13.8155); the rest is only looked at when they cannot hold top_p.
constexpr float kTopPCandidateGap = 13.8155f;
// Above this many candidates top-p bins by mass instead of sorting them all.
constexpr size_t kTopPSortLimit = 4096;
constexpr int32_t kBins = 4096;  // top-p histogram

// Per-thread buffers, reused across rows (sized to the largest vocabulary seen).
struct Scratch {
  std::vector<float> values;     // penalized / scaled row, when it differs from the input
  std::vector<float> exps;       // exp(value - max)
  std::vector<double> blocks;    // block sums of exps
  std::vector<int32_t> ids;      // kept ids (more likely first) when filtered
  std::vector<int32_t> top;      // top_logprobs ids; top-p's crossing bin
  std::vector<double> bin_mass;  // top-p histogram
  std::vector<int32_t> bins;     // top-p: bin per token
  std::vector<int32_t> crossing; // top-p: kept tokens of the crossing bin
  int32_t cross = 0;             // top-p: the crossing bin
  double cross_before = 0;       // top-p: mass of the bins below it
  std::vector<uint8_t> seen;     // per token; all zero between calls
  std::vector<int32_t> counts;   // per token; all zero between calls
};

Scratch& ThreadScratch() {
  thread_local Scratch scratch;
  return scratch;
}

bool MoreLikely(const float* v, int32_t a, int32_t b) { return v[a] > v[b] || (v[a] == v[b] && a < b); }

absl::Status CheckLogits(absl::Span<const float> logits, sampling::RowScan* scan) {
  if (logits.empty()) return absl::InvalidArgumentError("sampling: empty logits");
  *scan = sampling::ScanRow(logits);
  if (scan->bad) {
    for (size_t i = 0; i < logits.size(); ++i) {
      const float l = logits[i];
      if (std::isnan(l) || l == std::numeric_limits<float>::infinity()) {
        return absl::InvalidArgumentError(absl::StrCat("sampling: logit ", i, " is ", l));
      }
    }
  }
  if (scan->max == kNegInf) return absl::InvalidArgumentError("sampling: every logit is -inf");
  return absl::OkStatus();
}

absl::Status CheckHistory(absl::Span<const int32_t> tokens, size_t vocab) {
  // A branch-free scan first (histories run to many thousands of tokens per
  // branch and step); the loop that names the token only on failure.
  uint32_t bad = 0;
  for (int32_t t : tokens) bad |= static_cast<uint32_t>(static_cast<uint64_t>(static_cast<uint32_t>(t)) >= vocab);
  if (bad == 0) return absl::OkStatus();
  for (int32_t t : tokens) {
    if (t < 0 || static_cast<size_t>(t) >= vocab) {
      return absl::OutOfRangeError(absl::StrCat("sampling: history token ", t, " outside [0, ", vocab, ")"));
    }
  }
  return absl::OkStatus();
}

bool HasPenalties(const SamplingParams& p) {
  return p.repetition_penalty != 1.0f || p.frequency_penalty != 0.0f || p.presence_penalty != 0.0f;
}

// Applies the penalties to `v` (a copy of the row), touching only the tokens
// of the history. Leaves s.seen and s.counts all zero again.
void ApplyPenalties(const SamplingParams& p, absl::Span<const int32_t> prompt, absl::Span<const int32_t> generated,
                    float* v, Scratch& s) {
  if (p.repetition_penalty != 1.0f) {
    auto touch = [&](int32_t t) {
      if (s.seen[t]) return;
      s.seen[t] = 1;
      v[t] = v[t] > 0 ? v[t] / p.repetition_penalty : v[t] * p.repetition_penalty;
    };
    for (int32_t t : prompt) touch(t);
    for (int32_t t : generated) touch(t);
    for (int32_t t : prompt) s.seen[t] = 0;
    for (int32_t t : generated) s.seen[t] = 0;
  }
  if (p.frequency_penalty != 0.0f || p.presence_penalty != 0.0f) {
    for (int32_t t : generated) ++s.counts[t];
    for (int32_t t : generated) {
      const int32_t n = s.counts[t];
      if (n == 0) continue;  // already applied
      if (v[t] != kNegInf) v[t] -= p.frequency_penalty * static_cast<float>(n) + p.presence_penalty;
      s.counts[t] = 0;
    }
  }
}

// Keeps the prefix of `ids` (sorted more likely first) that top-p keeps: each
// token whose preceding cumulative mass is < need. e: exp(value - max).
void CutSorted(const float* e, double before, double need, std::vector<int32_t>& ids) {
  double cumulative = before;
  size_t keep = 0;
  while (keep < ids.size() && cumulative < need) cumulative += e[ids[keep++]];
  ids.resize(keep);
}

// CutSorted for unsorted candidates: pops them from a heap, most likely
// first, until the mass reaches `need` (a confident row pops a handful out
// of thousands). ids becomes the kept tokens, more likely first.
void CutByHeap(const float* v, const float* e, double need, std::vector<int32_t>& ids) {
  auto less_likely = [v](int32_t a, int32_t b) { return MoreLikely(v, b, a); };
  std::make_heap(ids.begin(), ids.end(), less_likely);
  size_t end = ids.size();
  double cumulative = 0;
  while (end > 0 && cumulative < need) {
    std::pop_heap(ids.begin(), ids.begin() + end, less_likely);
    cumulative += e[ids[--end]];
  }
  std::reverse(ids.begin() + end, ids.end());
  ids.erase(ids.begin(), ids.begin() + end);
}

// Top-p over the whole row when the candidates near the max do not settle it
// (broad distributions): a histogram of mass over value bins finds the bin
// where the cumulative mass crosses `need`. Every token of a lower bin is
// kept; the crossing bin alone is sorted and cut (s.crossing: its kept
// tokens, more likely first). Sets s.bins, s.bin_mass (combined, per bin),
// s.cross and s.cross_before (the mass of the bins below it). O(vocab).
void BinTopP(absl::Span<const float> v, const float* e, float max, double need, Scratch& s) {
  // Bins span the values whose exp is not 0 (FastExp is 0 below max - 87).
  const float floor = max - 86.0f;
  const float range = max - sampling::MinAtLeast(v, floor);
  const float scale = range > 0 ? (kBins - 1) / range : 0.0f;
  const size_t n = v.size();
  // Bin per token (larger values, lower bins; kBins for zero mass).
  s.bins.resize(n);
  int32_t* bins = s.bins.data();
  sampling::BinIndices(v, e, max, scale, kBins - 1, bins);
  // Four interleaved histograms (no store-to-load chains on repeated bins),
  // added in a fixed order.
  constexpr int kWays = 4;
  s.bin_mass.assign(kWays * (kBins + 1), 0.0);
  double* mass = s.bin_mass.data();
  size_t i = 0;
  for (; i + kWays <= n; i += kWays) {
    for (int w = 0; w < kWays; ++w) mass[w * (kBins + 1) + bins[i + w]] += e[i + w];
  }
  for (; i < n; ++i) mass[bins[i]] += e[i];
  for (int32_t b = 0; b < kBins; ++b) {
    for (int w = 1; w < kWays; ++w) mass[b] += mass[w * (kBins + 1) + b];
  }
  double before = 0;
  int32_t cross = kBins - 1;
  for (int32_t b = 0; b < kBins; ++b) {
    if (before + mass[b] >= need) {
      cross = b;
      break;
    }
    before += mass[b];
  }
  s.crossing.clear();
  for (size_t j = 0; j < n; ++j) {
    if (bins[j] == cross) s.crossing.push_back(static_cast<int32_t>(j));  // few: a predictable branch
  }
  const float* vals = v.data();
  std::sort(s.crossing.begin(), s.crossing.end(), [vals](int32_t x, int32_t y) { return MoreLikely(vals, x, y); });
  CutSorted(e, before, need, s.crossing);
  s.cross = cross;
  s.cross_before = before;
}

// The kept tokens of BinTopP as a list (lower bins, then the crossing bin's).
void MaterializeBinned(size_t n, Scratch& s, std::vector<int32_t>& ids) {
  ids.resize(n);
  int32_t* out = ids.data();
  const int32_t* bins = s.bins.data();
  const int32_t cross = s.cross;
  size_t kept = 0;
  for (size_t j = 0; j < n; ++j) {
    out[kept] = static_cast<int32_t>(j);
    kept += static_cast<uint32_t>(bins[j] - cross) >> 31;  // bins[j] < cross, without a branch
  }
  ids.resize(kept);
  ids.insert(ids.end(), s.crossing.begin(), s.crossing.end());
}

// The state of one processed row: values (penalized, scaled), their max, and
// which tokens survive the filters.
struct Processed {
  absl::Span<const float> values;
  float max = 0;
  bool dense = true;      // kept: every token with exp(value - max) >= floor
  float floor = 0.0f;     // min-p cut for the dense case (0: every finite token)
  std::vector<int32_t>* ids = nullptr;  // kept tokens (more likely first) when !dense && !binned
  bool binned = false;    // kept: BinTopP's bins below s.cross, then s.crossing
  int32_t argmax = 0;     // first max of values
  // The input's log-sum-exp when it is already known.
  float raw_max = 0;      // max of the input
  bool have_raw_lse = false;
  double raw_lse = 0;
};

// materialize: the kept set as a list (ProcessLogits), never binned.
absl::Status Process(const SamplingParams& p, absl::Span<const float> logits, absl::Span<const int32_t> prompt,
                     absl::Span<const int32_t> generated, bool materialize, Scratch& s, Processed* out) {
  sampling::RowScan scan;
  BANYAN_RETURN_IF_ERROR(CheckLogits(logits, &scan));
  BANYAN_RETURN_IF_ERROR(CheckHistory(prompt, logits.size()));
  BANYAN_RETURN_IF_ERROR(CheckHistory(generated, logits.size()));
  const size_t vocab = logits.size();
  const bool penalize = HasPenalties(p);
  const bool scale = p.temperature != 0.0f && p.temperature != 1.0f;
  out->values = logits;
  out->raw_max = scan.max;
  if (penalize || scale) {
    if (s.values.size() < vocab) s.values.resize(vocab);
    float* v = s.values.data();
    if (penalize) {
      if (s.seen.size() < vocab) {
        s.seen.resize(vocab, 0);
        s.counts.resize(vocab, 0);
      }
      std::copy(logits.begin(), logits.end(), v);
      ApplyPenalties(p, prompt, generated, v, s);
      if (scale) sampling::DivideRow(absl::MakeConstSpan(v, vocab), p.temperature, v);
    } else {
      sampling::DivideRow(logits, p.temperature, v);
    }
    out->values = absl::MakeConstSpan(v, vocab);
    scan = sampling::ScanRow(out->values);  // no NaN can appear; max and argmax move
  }
  out->max = scan.max;
  out->argmax = scan.argmax;
  out->dense = true;
  out->floor = 0.0f;
  if (p.temperature == 0.0f) return absl::OkStatus();

  const float* v = out->values.data();
  const float m = out->max;
  std::vector<int32_t>& ids = s.ids;
  ids.clear();
  if (p.top_k > 0 && static_cast<size_t>(p.top_k) < vocab) {
    sampling::TopK(out->values, p.top_k, nullptr, &ids);
    out->dense = false;
  }
  if (s.exps.size() < vocab) s.exps.resize(vocab);
  float* e = s.exps.data();
  if (!out->dense) {
    for (int32_t id : ids) e[id] = FastExp(v[id] - m);  // the kept ids' exps, for what follows
  }
  if (p.top_p < 1.0f) {
    if (out->dense) {
      const double z = ExpSum(out->values, m, e);
      if (out->values.data() == logits.data()) {
        out->have_raw_lse = true;
        out->raw_lse = m + std::log(z);
      }
      const double need = static_cast<double>(p.top_p) * z;
      // Peaked rows: the tokens near the max hold top_p; sort only them.
      double mass = 0;
      if (sampling::CollectAtLeast(out->values, m - kTopPCandidateGap, &ids, kTopPSortLimit)) {
        for (int32_t id : ids) mass += e[id];
      }
      if (mass >= need) {
        CutByHeap(v, e, need, ids);
      } else {
        BinTopP(out->values, e, m, need, s);
        out->binned = true;
      }
      out->dense = false;
    } else {
      // After top-k: ids are at most k, already sorted.
      double z = 0;
      for (int32_t id : ids) z += e[id];
      CutSorted(e, 0, static_cast<double>(p.top_p) * z, ids);
    }
  }
  if (out->binned && (p.min_p > 0.0f || materialize)) {
    MaterializeBinned(vocab, s, ids);
    out->binned = false;
  }
  if (p.min_p > 0.0f) {
    if (out->dense) {
      out->floor = p.min_p;
    } else {
      ids.erase(std::remove_if(ids.begin(), ids.end(), [&](int32_t id) { return e[id] < p.min_p; }), ids.end());
    }
  }
  if (!out->dense && !out->binned) out->ids = &ids;
  return absl::OkStatus();
}

double LogSumExpOf(absl::Span<const float> x, float max) { return max + std::log(ExpSum(x, max, nullptr)); }

}  // namespace

absl::Status ValidateSamplingParams(const SamplingParams& p) {
  if (!(p.temperature >= 0.0f) || !std::isfinite(p.temperature)) {
    return absl::InvalidArgumentError(absl::StrCat("sampling: temperature ", p.temperature, " must be >= 0"));
  }
  if (p.top_k < 0) return absl::InvalidArgumentError(absl::StrCat("sampling: top_k ", p.top_k, " < 0"));
  if (!(p.top_p > 0.0f && p.top_p <= 1.0f)) {
    return absl::InvalidArgumentError(absl::StrCat("sampling: top_p ", p.top_p, " outside (0, 1]"));
  }
  if (!(p.min_p >= 0.0f && p.min_p <= 1.0f)) {
    return absl::InvalidArgumentError(absl::StrCat("sampling: min_p ", p.min_p, " outside [0, 1]"));
  }
  if (!(p.repetition_penalty > 0.0f) || !std::isfinite(p.repetition_penalty)) {
    return absl::InvalidArgumentError(absl::StrCat("sampling: repetition_penalty ", p.repetition_penalty,
                                                   " must be > 0"));
  }
  if (!std::isfinite(p.frequency_penalty) || !std::isfinite(p.presence_penalty)) {
    return absl::InvalidArgumentError("sampling: frequency and presence penalties must be finite");
  }
  if (p.top_logprobs < 0) return absl::InvalidArgumentError("sampling: top_logprobs < 0");
  return absl::OkStatus();
}

absl::StatusOr<Sampler> Sampler::Create(const SamplingParams& params, Rng rng) {
  BANYAN_RETURN_IF_ERROR(ValidateSamplingParams(params));
  return Sampler(params, rng);
}

absl::StatusOr<std::vector<float>> Sampler::ProcessLogits(absl::Span<const float> logits,
                                                          absl::Span<const int32_t> prompt,
                                                          absl::Span<const int32_t> generated) const {
  Scratch& s = ThreadScratch();
  Processed pr;
  BANYAN_RETURN_IF_ERROR(Process(params_, logits, prompt, generated, /*materialize=*/true, s, &pr));
  std::vector<float> out(logits.size(), kNegInf);
  if (pr.dense) {
    for (size_t i = 0; i < out.size(); ++i) {
      const float x = pr.values[i];
      if (x != kNegInf && (pr.floor == 0.0f || FastExp(x - pr.max) >= pr.floor)) out[i] = x;
    }
  } else {
    for (int32_t id : *pr.ids) out[id] = pr.values[id];
  }
  return out;
}

absl::StatusOr<SampleResult> Sampler::Sample(absl::Span<const float> logits, absl::Span<const int32_t> prompt,
                                             absl::Span<const int32_t> generated) {
  Scratch& s = ThreadScratch();
  Processed pr;
  BANYAN_RETURN_IF_ERROR(Process(params_, logits, prompt, generated, /*materialize=*/false, s, &pr));
  const size_t vocab = logits.size();
  const float* v = pr.values.data();
  const float m = pr.max;
  SampleResult result;
  double lse = 0;  // of the processed distribution
  if (params_.temperature == 0.0f) {
    result.token = pr.argmax;
    lse = LogSumExpOf(pr.values, m);
    if (pr.values.data() == logits.data()) {
      pr.have_raw_lse = true;
      pr.raw_lse = lse;
    }
  } else if (pr.dense) {
    if (s.exps.size() < vocab) s.exps.resize(vocab);
    const double z = ExpSum(pr.values, m, s.exps.data(), &s.blocks, pr.floor);
    lse = m + std::log(z);
    if (pr.values.data() == logits.data() && pr.floor == 0.0f) {
      pr.have_raw_lse = true;
      pr.raw_lse = lse;
    }
    const double target = rng_.UniformDouble() * z;
    // Whole blocks first, then the tokens of the block the target falls in.
    double cumulative = 0;
    result.token = -1;
    for (size_t b = 0; b < s.blocks.size() && result.token < 0; ++b) {
      if (cumulative + s.blocks[b] <= target) {
        cumulative += s.blocks[b];
        continue;
      }
      const size_t end = std::min(vocab, (b + 1) * sampling::kBlock);
      double inner = cumulative;
      for (size_t i = b * sampling::kBlock; i < end; ++i) {
        inner += s.exps[i];
        if (s.exps[i] > 0 && inner > target) {
          result.token = static_cast<int32_t>(i);
          break;
        }
      }
      cumulative += s.blocks[b];
    }
    if (result.token < 0) {  // rounding at the top end: the last kept token
      for (size_t i = vocab; i-- > 0;) {
        if (s.exps[i] > 0) {
          result.token = static_cast<int32_t>(i);
          break;
        }
      }
    }
  } else if (pr.binned) {
    // Kept: every token of a bin below s.cross, then s.crossing. Find the
    // bin the target falls in, then the token inside it.
    const float* e = s.exps.data();
    const double* mass = s.bin_mass.data();
    double crossing_mass = 0;
    for (int32_t id : s.crossing) crossing_mass += e[id];
    const double z = s.cross_before + crossing_mass;
    lse = m + std::log(z);
    const double target = rng_.UniformDouble() * z;
    double cumulative = 0;
    int32_t bin = 0;
    while (bin < s.cross && cumulative + mass[bin] <= target) cumulative += mass[bin++];
    result.token = -1;
    if (bin < s.cross) {
      const int32_t* bins = s.bins.data();
      for (size_t j = 0; j < vocab; ++j) {
        if (bins[j] != bin) continue;
        result.token = static_cast<int32_t>(j);  // the bin's last token absorbs rounding
        cumulative += e[j];
        if (cumulative > target) break;
      }
    } else {
      for (int32_t id : s.crossing) {
        result.token = id;  // the last kept token absorbs rounding at the top end
        cumulative += e[id];
        if (cumulative > target) break;
      }
    }
  } else {
    const std::vector<int32_t>& ids = *pr.ids;
    double z = 0;
    const float* e = s.exps.data();
    for (int32_t id : ids) z += e[id];
    lse = m + std::log(z);
    const double target = rng_.UniformDouble() * z;
    double cumulative = 0;
    for (int32_t id : ids) {
      result.token = id;  // the last kept token absorbs rounding at the top end
      cumulative += e[id];
      if (cumulative > target) break;
    }
  }
  result.logprob = static_cast<float>(v[result.token] - lse);
  if (!pr.have_raw_lse) {
    pr.raw_lse = LogSumExpOf(logits, pr.raw_max);
  }
  result.raw_logprob = static_cast<float>(logits[result.token] - pr.raw_lse);
  if (params_.top_logprobs > 0) {
    // Kept sets are prefixes of the more-likely order: the most likely
    // tokens of the row, while they are kept, are the most likely kept.
    const bool all = pr.dense || pr.binned;
    sampling::TopK(pr.values, params_.top_logprobs, all ? nullptr : pr.ids, &s.top);
    for (int32_t id : s.top) {
      if (pr.dense && pr.floor > 0.0f && FastExp(v[id] - m) < pr.floor) break;
      if (pr.binned && s.bins[id] >= s.cross &&
          std::find(s.crossing.begin(), s.crossing.end(), id) == s.crossing.end()) {
        break;
      }
      result.top_logprobs.emplace_back(id, static_cast<float>(v[id] - lse));
    }
  }
  return result;
}

absl::StatusOr<SampleResult> SampleGreedy(absl::Span<const float> logits) {
  sampling::RowScan scan;
  BANYAN_RETURN_IF_ERROR(CheckLogits(logits, &scan));
  SampleResult result;
  result.token = scan.argmax;
  result.raw_logprob = static_cast<float>(logits[scan.argmax] - LogSumExpOf(logits, scan.max));
  result.logprob = result.raw_logprob;
  return result;
}

absl::StatusOr<double> LogSumExp(absl::Span<const float> logits) {
  sampling::RowScan scan;
  BANYAN_RETURN_IF_ERROR(CheckLogits(logits, &scan));
  return LogSumExpOf(logits, scan.max);
}

}  // namespace banyan::model

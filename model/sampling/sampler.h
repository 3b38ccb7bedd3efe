// Sampling: turns one row of logits into the next token of one branch.
//
//   SamplingParams params;            // temperature 0.8, top_p 0.95, ...
//   BANYAN_ASSIGN_OR_RETURN(Sampler s, Sampler::Create(params, Rng(seed).Derive(branch)));
//   BANYAN_ASSIGN_OR_RETURN(SampleResult r, s.Sample(logits_row, prompt, generated));
//
// Processing order (as HF transformers' generate and vLLM): repetition
// penalty (over prompt + generated tokens), frequency and presence penalties
// (over generated tokens), temperature, top-k, top-p, min-p; then a draw
// from the softmax of what is left. temperature == 0 means greedy: the
// largest processed logit (lowest id on ties), with filtering ignored.
//   repetition  HF's: a seen token's logit l becomes l / p if l > 0, l * p else.
//   frequency   OpenAI's: l -= frequency_penalty * count in generated.
//   presence    l -= presence_penalty if the token occurs in generated.
//   top_k       keep the k largest (ties at the boundary: lowest ids first).
//   top_p       sort descending; keep each token whose preceding cumulative
//               probability is < top_p (so the smallest prefix reaching top_p).
//   min_p       keep tokens whose probability >= min_p * the largest one.
// At least one token always survives.
//
// Reproducibility: each Sampler owns an Rng; one Sample call draws exactly one
// UniformDouble (none when greedy), so a seed (and branch key) gives the same
// tokens again for the same logits, whatever thread runs it and whichever
// other rows share the step (the row math, row_math.h, gives the same bits on
// every x86-64 CPU).
// Speed: float math (a vectorized exp; sums in double per 256-value block),
// a few passes per row in per-thread scratch buffers (about 4 MB per thread
// at a 128K vocabulary), penalties over the seen tokens only, selection
// instead of a full sort: a bounded heap for top-k and top_logprobs; for
// top-p a sort of the tokens within 1e-6 of the max when they hold top_p,
// else a histogram of mass over value bins (only the crossing bin sorted).
// Results agree with ReferenceSampler (reference_sampler.h, all double) to
// float rounding: same greedy ids, logprobs within ~1e-5, same kept sets
// except for cumulative sums within rounding of top_p. The draw walks the
// kept tokens in its own fixed order (not the reference's), so a seed gives
// other tokens than the reference does, with the same distribution.
// Greedy rows can also run on the GPU (greedy_cuda.h, Backend::ForwardGreedy),
// and so can draws without penalties (device_draw.h, sample_cuda.h,
// Backend::ForwardSample: the same distribution, another walk order).
// Thread-compatible: one Sampler per branch; distinct Samplers may run on
// distinct threads at once. Errors: see Create and Sample.
#ifndef BANYAN_MODEL_SAMPLING_SAMPLER_H_
#define BANYAN_MODEL_SAMPLING_SAMPLER_H_

#include <cstdint>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "sdk/base/rng.h"

namespace banyan::model {

struct SamplingParams {
  float temperature = 1.0f;          // >= 0; 0 = greedy
  int32_t top_k = 0;                 // >= 0; 0 = off
  float top_p = 1.0f;                // (0, 1]; 1 = off
  float min_p = 0.0f;                // [0, 1]; 0 = off
  float repetition_penalty = 1.0f;   // > 0; 1 = off
  float frequency_penalty = 0.0f;    // any finite value; 0 = off
  float presence_penalty = 0.0f;     // any finite value; 0 = off
  int32_t top_logprobs = 0;          // >= 0: how many alternatives to report
};

// Checks the ranges above; kInvalidArgument naming the first bad field.
[[nodiscard]] absl::Status ValidateSamplingParams(const SamplingParams& params);

struct SampleResult {
  int32_t token = -1;
  // log P(token) under the processed distribution (log-softmax of the
  // processed logits: after penalties, temperature and filtering; for greedy,
  // of the penalized logits) and under the raw one (log-softmax of the logits
  // as given).
  float logprob = 0.0f;
  float raw_logprob = 0.0f;
  // The top_logprobs most likely tokens of the processed distribution, most
  // likely first, with their log-probabilities.
  std::vector<std::pair<int32_t, float>> top_logprobs;
};

class Sampler {
 public:
  // kInvalidArgument for out-of-range params (ValidateSamplingParams).
  [[nodiscard]] static absl::StatusOr<Sampler> Create(const SamplingParams& params, Rng rng);

  // Samples from logits[vocab]. `prompt` and `generated` are the branch's
  // tokens so far (for the penalties). Errors: kInvalidArgument for empty
  // logits or logits with a NaN or no finite value; kOutOfRange for a history
  // token outside [0, vocab).
  [[nodiscard]] absl::StatusOr<SampleResult> Sample(absl::Span<const float> logits,
                                                    absl::Span<const int32_t> prompt,
                                                    absl::Span<const int32_t> generated);

  // The processed logits (penalties, temperature, filtering; removed tokens
  // are -inf), as Sample uses them. With temperature 0 no temperature or
  // filtering is applied. Same errors as Sample.
  [[nodiscard]] absl::StatusOr<std::vector<float>> ProcessLogits(absl::Span<const float> logits,
                                                                 absl::Span<const int32_t> prompt,
                                                                 absl::Span<const int32_t> generated) const;

  // The uniform number the next non-greedy Sample call would draw, without
  // drawing it: a device backend samples with it (device_draw.h); then
  // SkipUniform() consumes it, so the stream goes on as if Sample had run.
  double PeekUniform() const {
    Rng copy = rng_;
    return copy.UniformDouble();
  }
  void SkipUniform() { (void)rng_.UniformDouble(); }

  const SamplingParams& params() const { return params_; }

 private:
  Sampler(const SamplingParams& params, Rng rng) : params_(params), rng_(rng) {}

  SamplingParams params_;
  Rng rng_;
};

// Greedy without penalties, the engine's shortcut for rows shared by many
// greedy branches: exactly Sampler{temperature 0}.Sample(logits, {}, {})
// without top_logprobs (first maximum; logprob == raw_logprob == its
// log-softmax). Same logits errors as Sample. Thread-safe.
[[nodiscard]] absl::StatusOr<SampleResult> SampleGreedy(absl::Span<const float> logits);

// log(sum(exp(logits))), for scoring a given token. Same logits errors as
// Sample. Thread-safe.
[[nodiscard]] absl::StatusOr<double> LogSumExp(absl::Span<const float> logits);

}  // namespace banyan::model

#endif  // BANYAN_MODEL_SAMPLING_SAMPLER_H_

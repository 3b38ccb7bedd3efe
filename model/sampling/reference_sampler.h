// ReferenceSampler: the plain sampler that the fast one (sampler.h) is tested
// and benchmarked against. Same contract as Sampler (same processing order,
// errors and Rng use: one UniformDouble per non-greedy draw), written the
// direct way: double exp over the whole vocabulary, a full copy of the row,
// nth_element for top-k, a sort for top-p, hash sets for the penalties.
// Not used on any serving path.
// Thread-compatible: one ReferenceSampler per branch.
#ifndef BANYAN_MODEL_SAMPLING_REFERENCE_SAMPLER_H_
#define BANYAN_MODEL_SAMPLING_REFERENCE_SAMPLER_H_

#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "model/sampling/sampler.h"
#include "sdk/base/rng.h"

namespace banyan::model::sampling {

class ReferenceSampler {
 public:
  // kInvalidArgument for out-of-range params (ValidateSamplingParams).
  [[nodiscard]] static absl::StatusOr<ReferenceSampler> Create(const SamplingParams& params, Rng rng);

  // As Sampler::Sample / Sampler::ProcessLogits.
  [[nodiscard]] absl::StatusOr<SampleResult> Sample(absl::Span<const float> logits,
                                                    absl::Span<const int32_t> prompt,
                                                    absl::Span<const int32_t> generated);
  [[nodiscard]] absl::StatusOr<std::vector<float>> ProcessLogits(absl::Span<const float> logits,
                                                                 absl::Span<const int32_t> prompt,
                                                                 absl::Span<const int32_t> generated) const;

 private:
  ReferenceSampler(const SamplingParams& params, Rng rng) : params_(params), rng_(rng) {}

  SamplingParams params_;
  Rng rng_;
};

}  // namespace banyan::model::sampling

#endif  // BANYAN_MODEL_SAMPLING_REFERENCE_SAMPLER_H_

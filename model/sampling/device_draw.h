// Draws that a device backend samples where the logits are (Backend::
// ForwardSample), so that a sampled decode step copies 12 bytes per branch back
// instead of a vocabulary-sized row, and no host thread walks the row.
//
//   DeviceDraw d = MakeDeviceDraw(row, params, sampler.PeekUniform());
//   ... backend->ForwardSample(batch, kv, draws, results) ...
//   sampler.SkipUniform();   // only once the step succeeded
//
// The distribution is the Sampler's (sampler.h) for parameters without
// penalties and top_logprobs (DeviceSamplable): values v = logit * (1 /
// temperature) in float (the Sampler divides: the two differ by at most an
// ulp), then top-k, top-p and min-p with the Sampler's
// definitions (ties at a cut: lower ids first). The draw is an inverse CDF over
// the kept tokens in increasing token-id order at `uniform`; the Sampler walks
// its kept tokens in its own orders, so one seed gives other tokens on the two
// paths, from the same distribution. temperature 0 is greedy (the first
// maximum; filtering ignored), as in the Sampler.
// ReferenceDraw (draw_reference.h) is the plain double version;
// LaunchSampleRows (sample_cuda.h) the device one.
#ifndef BANYAN_MODEL_SAMPLING_DEVICE_DRAW_H_
#define BANYAN_MODEL_SAMPLING_DEVICE_DRAW_H_

#include <cstdint>

#include "model/sampling/sampler.h"

namespace banyan::model::sampling {

// One branch's draw from one logits row. 32 bytes; copied to the device as is.
struct DeviceDraw {
  int32_t row = 0;           // index into the step's logits rows
  float temperature = 1.0f;  // >= 0; 0 = greedy
  int32_t top_k = 0;         // 0 = off (also when >= vocab)
  float top_p = 1.0f;        // (0, 1]; 1 = off
  float min_p = 0.0f;        // [0, 1]; 0 = off
  int32_t pad = 0;
  double uniform = 0.0;  // [0, 1): where the draw falls (unused when greedy)
};
static_assert(sizeof(DeviceDraw) == 32);

// What comes back per draw. token == -1: the row has a NaN or +inf, or no
// finite value (the Sampler's kInvalidArgument).
struct DrawResult {
  int32_t token = -1;
  float logprob = 0.0f;      // log P(token) under the processed distribution
  float raw_logprob = 0.0f;  // under the logits as given
};
static_assert(sizeof(DrawResult) == 12);

// True when the device path computes these parameters: no penalties and no
// top_logprobs (those stay on the host Sampler).
inline bool DeviceSamplable(const SamplingParams& p) {
  return p.repetition_penalty == 1.0f && p.frequency_penalty == 0.0f &&
         p.presence_penalty == 0.0f && p.top_logprobs == 0;
}

inline DeviceDraw MakeDeviceDraw(int32_t row, const SamplingParams& p, double uniform) {
  DeviceDraw d;
  d.row = row;
  d.temperature = p.temperature;
  d.top_k = p.top_k;
  d.top_p = p.top_p;
  d.min_p = p.min_p;
  d.uniform = uniform;
  return d;
}

}  // namespace banyan::model::sampling

#endif  // BANYAN_MODEL_SAMPLING_DEVICE_DRAW_H_

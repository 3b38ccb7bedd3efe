// The plain version of a device draw (device_draw.h), in double: what
// LaunchSampleRows must give, for its tests and for backends that sample on
// the host what a device backend samples on the device.
//
//   DrawMargins margins;
//   DrawResult r = ReferenceDraw(logits_row, draw, &margins);
//
// Steps: v = logit * float(1 / temperature) in float; e = exp(v - max v) in
// double; the tokens ordered by (v descending, id ascending); top-k keeps the
// first k; top-p the first ones whose preceding cumulative e (over the top-k
// set) is below top_p times that set's sum; min-p then drops those with
// e < min_p; the draw walks the kept ones by increasing id and picks the
// first whose cumulative e exceeds uniform times their sum. Greedy
// (temperature 0): the first maximum, logprob == raw_logprob.
// `margins` (optional) says how close the inputs sit to a decision boundary,
// relative to the masses involved: a float implementation may decide
// otherwise only where a margin is within its rounding.
// Thread-safe (pure). A bad row (NaN, +inf, no finite value, empty) gives
// token -1.
#ifndef BANYAN_MODEL_SAMPLING_DRAW_REFERENCE_H_
#define BANYAN_MODEL_SAMPLING_DRAW_REFERENCE_H_

#include <cstdint>
#include <vector>

#include "absl/types/span.h"
#include "model/sampling/device_draw.h"

namespace banyan::model::sampling {

struct DrawMargins {
  double top_p = 1.0;  // |cumulative before the cut's neighbours - need| / the top-k set's sum
  double min_p = 1.0;  // min |e - min_p| over the top-p set
  double draw = 1.0;   // |cumulative at the chosen token's edges - target| / the kept sum
  double smallest() const;
};

DrawResult ReferenceDraw(absl::Span<const float> logits, const DeviceDraw& draw,
                         DrawMargins* margins = nullptr);

// The tokens a (non-greedy) draw can land on: kept[i] = 1 for each token the
// cuts keep (zero-probability ones included). Empty for a bad row.
std::vector<uint8_t> ReferenceKept(absl::Span<const float> logits, const DeviceDraw& draw,
                                   DrawMargins* margins = nullptr);

}  // namespace banyan::model::sampling

#endif  // BANYAN_MODEL_SAMPLING_DRAW_REFERENCE_H_

// Sampled draws on the GPU (device_draw.h): for each draw, the token that its
// logits row (fp32, device memory) gives under temperature, top-k, top-p and
// min-p at the draw's uniform number, with its processed and raw
// log-probabilities, so that a CUDA backend returns 12 bytes per branch
// instead of copying the row (vocab x 4 bytes) to a host sampler.
//
//   SampleRowsArgs args{.logits = d_logits, .rows = m, .vocab = V,
//                       .draws = d_draws, .num_draws = n, .results = d_results};
//   BANYAN_RETURN_IF_ERROR(LaunchSampleRows(args, stream));
//
// One block per draw; several draws may read one row (siblings of a fork).
// Masses are exp(v - max) as 40-bit fixed-point integers, so every sum is
// exact and the result does not depend on the order the threads add in:
// a draw is deterministic (same logits, same draw, same token) on every GPU.
// The cuts are selections: one pass of 2,048 value bins, then three radix
// passes over the float key among that bin's tokens; ties taken by lower id,
// as ReferenceDraw (draw_reference.h) defines them; results agree with it
// except where a cumulative sum lies within float rounding (~1e-6 relative)
// of a boundary.
// A temperature so small that logit / temperature overflows gives the greedy
// token (logprob 0).
// Asynchronous on `stream`; pointers are borrowed device memory.
// Errors: kInvalidArgument for null pointers, rows or vocab < 1 or
// num_draws < 0 (nothing is launched), else the launch error. A draw whose
// row is outside [0, rows) gets token -1. Only in CUDA builds.
#ifndef BANYAN_MODEL_SAMPLING_SAMPLE_CUDA_H_
#define BANYAN_MODEL_SAMPLING_SAMPLE_CUDA_H_

#include <cuda_runtime.h>

#include <cstdint>

#include "absl/status/status.h"
#include "model/sampling/device_draw.h"

namespace banyan::model::sampling {

struct SampleRowsArgs {
  const float* logits = nullptr;  // [rows, vocab], device
  int32_t rows = 0;
  int32_t vocab = 0;
  const DeviceDraw* draws = nullptr;  // [num_draws], device
  int32_t num_draws = 0;
  DrawResult* results = nullptr;  // [num_draws], device
};

[[nodiscard]] absl::Status LaunchSampleRows(const SampleRowsArgs& args, cudaStream_t stream);

}  // namespace banyan::model::sampling

#endif  // BANYAN_MODEL_SAMPLING_SAMPLE_CUDA_H_

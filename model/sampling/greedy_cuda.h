// Greedy rows on the GPU: for each fp32 logits row in device memory, the first
// maximum and its log-softmax, so that a CUDA backend can return 8 bytes per
// row instead of copying the whole row (vocab x 4 bytes) to the host.
//
//   GreedyRowsArgs args{.logits = d_logits, .rows = m, .vocab = V,
//                       .tokens = d_tokens, .logprobs = d_logprobs, .bad = d_bad};
//   BANYAN_RETURN_IF_ERROR(LaunchGreedyRows(args, stream));
//
// Results agree with SampleGreedy (sampler.h): the same token (the first
// maximum), log-probability within float rounding (~1e-6; the sum of exps
// runs in float per thread, in double across threads). Deterministic: a fixed
// reduction order for a given vocab. A row with a NaN or +inf, or with every
// value -inf, gets bad = 1 (token and logprob then meaningless); the caller
// turns that into SampleGreedy's kInvalidArgument.
// Asynchronous on `stream`; pointers are borrowed device memory.
// Errors: kInvalidArgument for null pointers or rows/vocab < 1 (nothing is
// launched), else the launch error. Only in CUDA builds.
#ifndef BANYAN_MODEL_SAMPLING_GREEDY_CUDA_H_
#define BANYAN_MODEL_SAMPLING_GREEDY_CUDA_H_

#include <cstdint>

#include <cuda_runtime.h>

#include "absl/status/status.h"

namespace banyan::model::sampling {

struct GreedyRowsArgs {
  const float* logits = nullptr;  // [rows, vocab], device
  int32_t rows = 0;
  int32_t vocab = 0;
  int32_t* tokens = nullptr;      // [rows], device: the first maximum
  float* logprobs = nullptr;      // [rows], device: its log-softmax
  int32_t* bad = nullptr;         // [rows], device: 1 for NaN / +inf / all -inf rows
};

[[nodiscard]] absl::Status LaunchGreedyRows(const GreedyRowsArgs& args, cudaStream_t stream);

}  // namespace banyan::model::sampling

#endif  // BANYAN_MODEL_SAMPLING_GREEDY_CUDA_H_

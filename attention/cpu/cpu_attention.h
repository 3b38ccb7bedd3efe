// Fast CPU attention over a plan (fp32 accumulation), for the model's CPU
// backend. Same semantics and arguments as ReferenceAttention
// (reference/reference_attention.h); host pointers only.
//
//   BANYAN_RETURN_IF_ERROR(CpuAttention(args, /*num_threads=*/4));
//
// Work is split over query rows; each row keeps one online-softmax state per
// query head across all of its entries, reading each K/V token once for all
// the query heads of its KV group. Thread-safe: concurrent calls share nothing
// but their read-only inputs.
#ifndef BANYAN_ATTENTION_CPU_CPU_ATTENTION_H_
#define BANYAN_ATTENTION_CPU_CPU_ATTENTION_H_

#include "absl/status/status.h"
#include "attention/attention_args.h"

namespace banyan::attention {

// Runs `args` with up to `num_threads` threads (<= 1: on the calling thread).
// Returns ValidateAttentionArgs' kInvalidArgument for bad arguments and writes
// nothing then; OK after writing out (and lse when not null).
[[nodiscard]] absl::Status CpuAttention(const AttentionArgs& args, int num_threads);

}  // namespace banyan::attention

#endif  // BANYAN_ATTENTION_CPU_CPU_ATTENTION_H_

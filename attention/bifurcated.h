// The two-level plan of bifurcated attention (bifurcated-attention 4.2): one
// context shared by every sample, plus each sample's own decoded tokens.
// Host only; the CUDA entry point is BifurcatedAttention (tree_attention.h).
//
//   PagedRun context{pages, /*first_slot=*/0, /*length=*/2048};
//   BANYAN_ASSIGN_OR_RETURN(AttentionPlan plan, MakeBifurcatedPlan(context, samples, 16));
//
// Thread-safe (pure function).
#ifndef BANYAN_ATTENTION_BIFURCATED_H_
#define BANYAN_ATTENTION_BIFURCATED_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "attention/attention_plan.h"

namespace banyan::attention {

// A run of KV tokens in pages: token t in pages[(first_slot + t) / page_size].
struct PagedRun {
  std::vector<int32_t> pages;
  int32_t first_slot = 0;
  int32_t length = 0;
};

// Query row i reads the context and samples[i] (a sample of length 0 reads
// the context only). Returns kInvalidArgument for an empty context, no
// samples, or a run whose pages do not match its first_slot and length.
[[nodiscard]] absl::StatusOr<AttentionPlan> MakeBifurcatedPlan(const PagedRun& context,
                                                               absl::Span<const PagedRun> samples,
                                                               int32_t page_size);

}  // namespace banyan::attention

#endif  // BANYAN_ATTENTION_BIFURCATED_H_

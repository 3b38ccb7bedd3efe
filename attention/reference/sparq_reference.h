// Plain CPU reference for SparQ attention (sparq_args.h, steps 1-5), in
// double accumulation. Slow and obvious on purpose: the CUDA path is tested
// against these functions. Selection and output are separate so that a GPU
// test can check the GPU's output against the GPU's own selection (near-ties
// may select differently in float and double).
//
//   BANYAN_RETURN_IF_ERROR(ReferenceSparq(args));   // every sequence and KV head
//   SparqSelection sel = ReferenceSparqSelect(args, seq, kv_head);
//   std::vector<double> out = ReferenceSparqOutput(args, seq, kv_head, sel);
//
// Every pointer in SparqArgs is a host pointer here; k_transposed is not read.
// Thread-safe (pure functions over borrowed, read-only inputs; each call
// writes only its own outputs).
#ifndef BANYAN_ATTENTION_REFERENCE_SPARQ_REFERENCE_H_
#define BANYAN_ATTENTION_REFERENCE_SPARQ_REFERENCE_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "attention/kv_layout.h"
#include "attention/reference/reference_attention.h"
#include "attention/sparq_args.h"
#include "sdk/base/tensor_view.h"

namespace banyan::attention {

// What steps 1-4 chose for one sequence and KV head.
struct SparqSelection {
  std::vector<int32_t> components;  // the r query components (step 1), ascending
  std::vector<int32_t> positions;   // the min(k, length) selected token positions (step 3), ascending
  std::vector<double> alpha;        // alpha_h (step 4) per query head of the group, [group_size]
};

// Steps 1-4 for sequence `seq` and KV head `kv_head`, in double. Ties: among
// equal summed |q| the lower component index wins; among equal summed
// approximate scores the lower position wins. The last
// min(local_window, length) positions are always selected. When
// ||q_h[i1]||_1 = 0 (which includes ||q_h||_1 = 0) head h's approximate
// logits are all 0 and c_h is taken as 1 (uniform s_hat).
// REQUIRES: ValidateSparqArgs(args, true) is OK, 0 <= seq < num_seqs,
// 0 <= kv_head < num_kv_heads.
SparqSelection ReferenceSparqSelect(const SparqArgs& args, int32_t seq, int32_t kv_head);

// Step 5 for the query heads of `kv_head`'s group given a selection (any
// selection: it need not be ReferenceSparqSelect's). Uses sel.alpha and
// args.v_mean only with config.reallocate_mean. Returns [group_size][head_dim]
// in double (not rounded to out_dtype).
// REQUIRES: ValidateSparqArgs(args, true) is OK, seq and kv_head in range,
// sel.positions non-empty with every position in [0, seq_length[seq]),
// sel.alpha.size() == group_size when reallocate_mean.
std::vector<double> ReferenceSparqOutput(const SparqArgs& args, int32_t seq, int32_t kv_head,
                                         const SparqSelection& sel);

// SparQ attention of every sequence and KV head: ReferenceSparqSelect then
// ReferenceSparqOutput, stored into args.out ([num_seqs][num_q_heads][head_dim],
// out_dtype, rounded to nearest even). Returns ValidateSparqArgs(args,
// /*plan_on_host=*/true)'s error for bad arguments (out untouched).
[[nodiscard]] absl::Status ReferenceSparq(const SparqArgs& args);

// The mean of V over tokens [0, length) of one sequence whose tokens start at
// slot 0 of pages[0], for every KV head: writes v_mean[num_kv_heads][head_dim]
// (the v_mean that SparqArgs wants for that sequence). Returns
// kInvalidArgument when length < 1 or the pages cannot hold length tokens.
// REQUIRES: page ids < kv.layout.num_pages.
[[nodiscard]] absl::Status ReferenceValueMean(const KvSource& kv, absl::Span<const int32_t> pages, int32_t length,
                                              float* v_mean);

// Copies the K plane of every layer, page, KV head and slot of `kv_pool`
// (layout.TotalBytes() bytes) into `k_transposed` (layout.TotalBytes() / 2
// bytes, KvTransposedOffset), same dtype, bit for bit. Every element is
// written. REQUIRES: layout.dtype_bytes == DTypeSize(dtype).
void ReferenceFillKTransposed(const KvLayout& layout, DType dtype, const void* kv_pool, void* k_transposed);

}  // namespace banyan::attention

#endif  // BANYAN_ATTENTION_REFERENCE_SPARQ_REFERENCE_H_

// Plain CPU reference for every attention operation, in double accumulation.
// Slow and obvious on purpose: every optimized path (cpu/, the CUDA kernels)
// is tested against these functions on random inputs and random plans.
//
//   Partial p = ReferenceSegmentPartial(kv, pages, first_slot, limit, q, kv_head, scale);
//   Partial m = ReferenceMerge({p1, p2});   // hydragen eq. 5
//   BANYAN_RETURN_IF_ERROR(ReferenceAttention(args));   // a whole plan
//
// All log-sum-exps are natural logs. Thread-safe (pure functions over
// borrowed, read-only inputs; each call writes only its own outputs).
#ifndef BANYAN_ATTENTION_REFERENCE_REFERENCE_ATTENTION_H_
#define BANYAN_ATTENTION_REFERENCE_REFERENCE_ATTENTION_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "attention/attention_args.h"
#include "attention/kv_layout.h"
#include "sdk/base/tensor_view.h"

namespace banyan::attention {

// Reads element `index` of an array of `dtype` as double.
double LoadAsDouble(const void* data, DType dtype, int64_t index);
// Writes `value` (rounded to nearest even) as element `index` of `dtype`.
void StoreFromDouble(void* data, DType dtype, int64_t index, double value);

// The KV pool of one layer, as the reference reads it.
struct KvSource {
  KvLayout layout;
  DType dtype = DType::kBf16;
  const void* pool = nullptr;
  int32_t layer = 0;
};

// A partial attention state: the normalized output o over some set of tokens
// and the log-sum-exp of their scores. The empty state has lse = -inf and o = 0.
struct Partial {
  std::vector<double> o;
  double lse = 0.0;
};

// Attention of one query vector (`q`, head_dim values) over tokens [0, limit)
// of a paged run of KV of head `kv_head`: token t sits in
// pages[(first_slot + t) / page_size] at slot (first_slot + t) % page_size.
// REQUIRES: limit >= 1, the pages cover first_slot + limit tokens.
Partial ReferenceSegmentPartial(const KvSource& kv, absl::Span<const int32_t> pages, int32_t first_slot,
                                int32_t limit, absl::Span<const double> q, int32_t kv_head, double scale);

// The log-sum-exp merge of partial states over disjoint token sets (hydragen
// eq. 5): lse = log(sum exp(lse_i)), o = sum exp(lse_i - lse) o_i. Empty
// states (lse = -inf) contribute nothing; merging only empty states gives the
// empty state. REQUIRES: every o has the same size; parts non-empty.
Partial ReferenceMerge(absl::Span<const Partial> parts);

// Dense paged decode of one sequence whose tokens start at slot 0 of pages[0]:
// every query head of `q` ([num_q_heads][head_dim], q_dtype) attends tokens
// [0, length). Writes out [num_q_heads][head_dim] (out_dtype) and, when not
// null, lse [num_q_heads]. Returns kInvalidArgument on inconsistent sizes.
[[nodiscard]] absl::Status ReferencePagedDecode(const KvSource& kv, absl::Span<const int32_t> pages,
                                                int32_t length, const void* q, DType q_dtype,
                                                int32_t num_q_heads, double scale, void* out,
                                                DType out_dtype, double* lse);

// Tree attention (decode or prefill) over a whole plan, per AttentionArgs:
// every entry's partial in double, merged per query row along its entries.
// Prefill is the same call: causal limits come from entry_kv_limit.
// Returns ValidateAttentionArgs' error for bad arguments.
[[nodiscard]] absl::Status ReferenceAttention(const AttentionArgs& args);

}  // namespace banyan::attention

#endif  // BANYAN_ATTENTION_REFERENCE_REFERENCE_ATTENTION_H_

// AttentionArgs: one attention call over an AttentionPlan and a paged KV pool.
// The same struct drives the CPU reference (reference/), the fast CPU path
// (cpu/) and the CUDA paths (tree_attention.h); only where the pointers live
// differs (host memory for the CPU paths, device memory for CUDA).
//
//   AttentionArgs args;
//   args.plan = &plan;                  // borrowed, validated on every call
//   args.layout = pool_layout;          // see kv_layout.h
//   args.kv_dtype = DType::kBf16; args.kv_pool = pool; args.layer = l;
//   args.q = q; args.q_dtype = DType::kBf16;   // [num_queries][num_q_heads][head_dim]
//   args.num_q_heads = 32; args.scale = 1 / sqrt(head_dim);
//   args.out = out; args.out_dtype = DType::kBf16;  // [num_queries][num_q_heads][head_dim]
//   args.lse = nullptr;                 // or [num_queries][num_q_heads], natural log
//   BANYAN_RETURN_IF_ERROR(CpuAttention(args, /*num_threads=*/8));
//
// Semantics: for query row r and query head h (KV head h / (num_q_heads /
// num_kv_heads)), out[r][h] = softmax over every token visible to r (the first
// entry_kv_limit[e] tokens of each entry e of row r) of scale * q . k, applied
// to v. lse[r][h] = log(sum over those tokens of exp(scale * q . k)).
//
// Ownership: every pointer is borrowed; the caller keeps the memory alive for
// the call (for asynchronous CUDA calls, until the stream has run it).
// Thread-compatible value type.
#ifndef BANYAN_ATTENTION_ATTENTION_ARGS_H_
#define BANYAN_ATTENTION_ATTENTION_ARGS_H_

#include <cstdint>

#include "absl/status/status.h"
#include "attention/attention_plan.h"
#include "attention/kv_layout.h"
#include "sdk/base/tensor_view.h"

namespace banyan::attention {

struct AttentionArgs {
  const AttentionPlan* plan = nullptr;
  KvLayout layout;
  DType kv_dtype = DType::kBf16;
  const void* kv_pool = nullptr;  // layout.TotalBytes() bytes
  int32_t layer = 0;
  const void* q = nullptr;  // [plan->num_queries][num_q_heads][layout.head_dim]
  DType q_dtype = DType::kBf16;
  int32_t num_q_heads = 0;
  float scale = 0.0f;  // softmax scale, usually 1 / sqrt(head_dim)
  void* out = nullptr;  // [plan->num_queries][num_q_heads][layout.head_dim]
  DType out_dtype = DType::kBf16;
  float* lse = nullptr;  // optional [plan->num_queries][num_q_heads], natural log

  int32_t head_dim() const { return layout.head_dim; }
  int32_t group_size() const { return num_q_heads / layout.num_kv_heads; }
};

// How much of the plan ValidateAttentionArgs checks.
//   kFull           everything (the default everywhere).
//   kPlanValidated  the O(size of the plan) checks are skipped: the plan's
//                   invariants (AttentionPlan::Validate) and every page id <
//                   layout.num_pages. For a caller that has just checked both
//                   itself, for this very plan and layout (model/forward.h
//                   ValidateForwardBatch does), so that a step validates its
//                   plan once. The O(1) checks still run. REQUIRES: that check
//                   happened; the kernels index memory with the plan's values.
enum class PlanCheck { kFull, kPlanValidated };

// Checks everything a kernel relies on: the plan's invariants
// (AttentionPlan::Validate), plan->page_size == layout.page_size, head_dim 64
// or 128, num_q_heads a positive multiple of num_kv_heads, layout.dtype_bytes
// matching kv_dtype, 0 <= layer < num_layers, every page id < num_pages,
// a finite positive scale and non-null pointers (q, out, kv_pool may be null
// only when there are no query rows). Returns kInvalidArgument with the first
// violation in words; OK otherwise. O(size of the plan) with kFull, O(1) with
// kPlanValidated (see PlanCheck).
[[nodiscard]] absl::Status ValidateAttentionArgs(const AttentionArgs& args, PlanCheck check = PlanCheck::kFull);

}  // namespace banyan::attention

#endif  // BANYAN_ATTENTION_ATTENTION_ARGS_H_

#include "attention/attention_args.h"

#include <cmath>
#include <string>

#include "absl/strings/str_cat.h"

namespace banyan::attention {

absl::Status ValidateAttentionArgs(const AttentionArgs& args, PlanCheck check) {
  if (args.plan == nullptr) return absl::InvalidArgumentError("attention: plan is null");
  const AttentionPlan& plan = *args.plan;
  const bool full = check == PlanCheck::kFull;
  const std::string plan_error = full ? plan.Validate() : std::string();
  if (!plan_error.empty()) return absl::InvalidArgumentError(absl::StrCat("attention: invalid plan: ", plan_error));
  const KvLayout& layout = args.layout;
  if (plan.page_size != layout.page_size) {
    return absl::InvalidArgumentError(absl::StrCat("attention: plan page_size ", plan.page_size,
                                                   " != layout page_size ", layout.page_size));
  }
  if (layout.head_dim != 64 && layout.head_dim != 128) {
    return absl::InvalidArgumentError(
        absl::StrCat("attention: head_dim must be 64 or 128, got ", layout.head_dim));
  }
  if (layout.num_kv_heads <= 0 || args.num_q_heads <= 0 || args.num_q_heads % layout.num_kv_heads != 0) {
    return absl::InvalidArgumentError(absl::StrCat("attention: num_q_heads (", args.num_q_heads,
                                                   ") must be a positive multiple of num_kv_heads (",
                                                   layout.num_kv_heads, ")"));
  }
  if (layout.dtype_bytes != static_cast<int32_t>(DTypeSize(args.kv_dtype))) {
    return absl::InvalidArgumentError(absl::StrCat("attention: layout dtype_bytes ", layout.dtype_bytes,
                                                   " does not match kv dtype ",
                                                   std::string(DTypeName(args.kv_dtype))));
  }
  if (args.layer < 0 || args.layer >= layout.num_layers) {
    return absl::InvalidArgumentError(
        absl::StrCat("attention: layer ", args.layer, " outside [0, ", layout.num_layers, ")"));
  }
  for (size_t i = 0; full && i < plan.page_indices.size(); ++i) {
    if (plan.page_indices[i] >= layout.num_pages) {
      return absl::InvalidArgumentError(absl::StrCat("attention: page id ", plan.page_indices[i], " (at ", i,
                                                     ") >= layout num_pages ", layout.num_pages));
    }
  }
  if (!std::isfinite(args.scale) || args.scale <= 0.0f) {
    return absl::InvalidArgumentError(absl::StrCat("attention: scale must be finite and positive, got ",
                                                   args.scale));
  }
  if (plan.num_queries > 0 && (args.q == nullptr || args.out == nullptr || args.kv_pool == nullptr)) {
    return absl::InvalidArgumentError("attention: q, out and kv_pool must be non-null");
  }
  return absl::OkStatus();
}

}  // namespace banyan::attention

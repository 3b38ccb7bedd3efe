#include "attention/reference/reference_attention.h"

#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "banyan/status_macros.h"
#include "sdk/base/half.h"

namespace banyan::attention {
namespace {
constexpr double kNegInf = -std::numeric_limits<double>::infinity();
}  // namespace

double LoadAsDouble(const void* data, DType dtype, int64_t index) {
  switch (dtype) {
    case DType::kF32: return static_cast<const float*>(data)[index];
    case DType::kBf16: return static_cast<float>(static_cast<const Bf16*>(data)[index]);
    case DType::kF16: return static_cast<float>(static_cast<const Fp16*>(data)[index]);
  }
  return 0.0;
}

void StoreFromDouble(void* data, DType dtype, int64_t index, double value) {
  const float f = static_cast<float>(value);
  switch (dtype) {
    case DType::kF32: static_cast<float*>(data)[index] = f; break;
    case DType::kBf16: static_cast<Bf16*>(data)[index] = Bf16(f); break;
    case DType::kF16: static_cast<Fp16*>(data)[index] = Fp16(f); break;
  }
}

Partial ReferenceSegmentPartial(const KvSource& kv, absl::Span<const int32_t> pages, int32_t first_slot,
                                int32_t limit, absl::Span<const double> q, int32_t kv_head, double scale) {
  const KvLayout& layout = kv.layout;
  const int32_t d = layout.head_dim;
  std::vector<double> scores(static_cast<size_t>(limit));
  double max_score = kNegInf;
  for (int32_t t = 0; t < limit; ++t) {
    const int32_t pos = first_slot + t;
    const int64_t base = layout.Offset(kv.layer, 0, pages[pos / layout.page_size], kv_head, pos % layout.page_size);
    double dot = 0.0;
    for (int32_t i = 0; i < d; ++i) dot += q[i] * LoadAsDouble(kv.pool, kv.dtype, base + i);
    scores[t] = dot * scale;
    max_score = std::max(max_score, scores[t]);
  }
  Partial partial;
  partial.o.assign(static_cast<size_t>(d), 0.0);
  double sum = 0.0;
  for (int32_t t = 0; t < limit; ++t) {
    const int32_t pos = first_slot + t;
    const int64_t base = layout.Offset(kv.layer, 1, pages[pos / layout.page_size], kv_head, pos % layout.page_size);
    const double p = std::exp(scores[t] - max_score);
    sum += p;
    for (int32_t i = 0; i < d; ++i) partial.o[i] += p * LoadAsDouble(kv.pool, kv.dtype, base + i);
  }
  for (double& v : partial.o) v /= sum;
  partial.lse = max_score + std::log(sum);
  return partial;
}

Partial ReferenceMerge(absl::Span<const Partial> parts) {
  Partial merged;
  merged.o.assign(parts.front().o.size(), 0.0);
  double max_lse = kNegInf;
  for (const Partial& p : parts) max_lse = std::max(max_lse, p.lse);
  if (max_lse == kNegInf) {
    merged.lse = kNegInf;
    return merged;
  }
  double sum = 0.0;
  for (const Partial& p : parts) sum += std::exp(p.lse - max_lse);
  merged.lse = max_lse + std::log(sum);
  for (const Partial& p : parts) {
    if (p.lse == kNegInf) continue;
    const double w = std::exp(p.lse - merged.lse);
    for (size_t i = 0; i < merged.o.size(); ++i) merged.o[i] += w * p.o[i];
  }
  return merged;
}

absl::Status ReferencePagedDecode(const KvSource& kv, absl::Span<const int32_t> pages, int32_t length,
                                  const void* q, DType q_dtype, int32_t num_q_heads, double scale, void* out,
                                  DType out_dtype, double* lse) {
  const KvLayout& layout = kv.layout;
  if (length < 1 || static_cast<int64_t>(pages.size()) * layout.page_size < length) {
    return absl::InvalidArgumentError(absl::StrCat("reference decode: ", pages.size(), " pages cannot hold ",
                                                   length, " tokens"));
  }
  if (layout.num_kv_heads <= 0 || num_q_heads % layout.num_kv_heads != 0) {
    return absl::InvalidArgumentError("reference decode: num_q_heads must be a multiple of num_kv_heads");
  }
  const int32_t d = layout.head_dim;
  const int32_t group = num_q_heads / layout.num_kv_heads;
  for (int32_t h = 0; h < num_q_heads; ++h) {
    std::vector<double> qv(static_cast<size_t>(d));
    for (int32_t i = 0; i < d; ++i) qv[i] = LoadAsDouble(q, q_dtype, int64_t{h} * d + i);
    const Partial p = ReferenceSegmentPartial(kv, pages, 0, length, qv, h / group, scale);
    for (int32_t i = 0; i < d; ++i) StoreFromDouble(out, out_dtype, int64_t{h} * d + i, p.o[i]);
    if (lse != nullptr) lse[h] = p.lse;
  }
  return absl::OkStatus();
}

absl::Status ReferenceAttention(const AttentionArgs& args) {
  BANYAN_RETURN_IF_ERROR(ValidateAttentionArgs(args));
  const AttentionPlan& plan = *args.plan;
  const KvSource kv{args.layout, args.kv_dtype, args.kv_pool, args.layer};
  const int32_t d = args.head_dim();
  const int32_t group = args.group_size();
  // Segment of each entry.
  std::vector<int32_t> entry_segment(static_cast<size_t>(plan.num_entries()));
  for (int32_t s = 0; s < plan.num_segments(); ++s) {
    for (int32_t e = plan.segment_entry_indptr[s]; e < plan.segment_entry_indptr[s + 1]; ++e) entry_segment[e] = s;
  }
  std::vector<double> qv(static_cast<size_t>(d));
  std::vector<Partial> parts;
  for (int32_t r = 0; r < plan.num_queries; ++r) {
    for (int32_t h = 0; h < args.num_q_heads; ++h) {
      const int64_t row_offset = (int64_t{r} * args.num_q_heads + h) * d;
      for (int32_t i = 0; i < d; ++i) qv[i] = LoadAsDouble(args.q, args.q_dtype, row_offset + i);
      parts.clear();
      for (int32_t i = plan.query_entry_indptr[r]; i < plan.query_entry_indptr[r + 1]; ++i) {
        const int32_t e = plan.query_entries[i];
        const int32_t s = entry_segment[e];
        const absl::Span<const int32_t> pages(plan.page_indices.data() + plan.segment_page_indptr[s],
                                              plan.segment_page_indptr[s + 1] - plan.segment_page_indptr[s]);
        parts.push_back(ReferenceSegmentPartial(kv, pages, plan.segment_first_slot[s], plan.entry_kv_limit[e], qv,
                                                h / group, args.scale));
      }
      const Partial merged = ReferenceMerge(parts);
      for (int32_t i = 0; i < d; ++i) StoreFromDouble(args.out, args.out_dtype, row_offset + i, merged.o[i]);
      if (args.lse != nullptr) args.lse[int64_t{r} * args.num_q_heads + h] = static_cast<float>(merged.lse);
    }
  }
  return absl::OkStatus();
}

}  // namespace banyan::attention

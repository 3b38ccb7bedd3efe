#include "attention/bifurcated.h"

#include "absl/strings/str_cat.h"

namespace banyan::attention {
namespace {

void AddSegment(AttentionPlan& plan, const PagedRun& run, const std::vector<int32_t>& rows) {
  plan.page_indices.insert(plan.page_indices.end(), run.pages.begin(), run.pages.end());
  plan.segment_page_indptr.push_back(static_cast<int32_t>(plan.page_indices.size()));
  plan.segment_first_slot.push_back(run.first_slot);
  plan.segment_length.push_back(run.length);
  for (int32_t r : rows) {
    plan.entry_query.push_back(r);
    plan.entry_kv_limit.push_back(run.length);
  }
  plan.segment_entry_indptr.push_back(static_cast<int32_t>(plan.entry_query.size()));
}

}  // namespace

absl::StatusOr<AttentionPlan> MakeBifurcatedPlan(const PagedRun& context, absl::Span<const PagedRun> samples,
                                                 int32_t page_size) {
  if (context.length < 1) return absl::InvalidArgumentError("bifurcated: empty context");
  if (samples.empty()) return absl::InvalidArgumentError("bifurcated: no samples");
  AttentionPlan plan;
  plan.page_size = page_size;
  plan.num_queries = static_cast<int32_t>(samples.size());
  std::vector<int32_t> all(samples.size());
  for (size_t i = 0; i < samples.size(); ++i) all[i] = static_cast<int32_t>(i);
  AddSegment(plan, context, all);
  for (size_t i = 0; i < samples.size(); ++i) {
    if (samples[i].length > 0) AddSegment(plan, samples[i], {static_cast<int32_t>(i)});
  }
  FillQueryEntries(plan);
  const std::string error = plan.Validate();
  if (!error.empty()) return absl::InvalidArgumentError(absl::StrCat("bifurcated: ", error));
  return plan;
}

}  // namespace banyan::attention

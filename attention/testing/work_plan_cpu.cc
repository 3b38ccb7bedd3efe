#include "attention/testing/work_plan_cpu.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/types/span.h"
#include "attention/reference/reference_attention.h"

namespace banyan::attention::testing {

TreePlan PlannerTestTree(int32_t levels, int32_t leaves, bool prefill, Rng& rng) {
  RandomTreeOptions opt;
  opt.levels = levels;
  opt.leaves = leaves;
  opt.max_length = prefill ? 20 : 300;
  opt.plan.prefill = prefill;
  return MakeRandomTreePlan(opt, rng);
}

std::vector<double> ExecuteWorkPlanOnCpu(const AttentionProblem& p, const AttentionPlan& plan, const WorkPlan& wp,
                                         std::vector<int>* written) {
  const int32_t d = p.layout.head_dim, hq = p.options.num_q_heads, group = hq / p.layout.num_kv_heads;
  const double scale = 1.0 / std::sqrt(static_cast<double>(d));
  std::vector<Partial> slots(static_cast<size_t>(wp.num_partials) * hq);
  written->assign(slots.size(), 0);
  for (Partial& s : slots) {  // a slot no item writes merges as an empty partial
    s.o.assign(d, 0.0);
    s.lse = -std::numeric_limits<double>::infinity();
  }
  const KvSource kv{p.layout, p.options.kv_dtype, p.kv.data(), p.options.layer};
  for (const WorkItem& it : wp.items) {
    const int32_t s = it.segment;
    const absl::Span<const int32_t> pages(plan.page_indices.data() + plan.segment_page_indptr[s],
                                          plan.segment_page_indptr[s + 1] - plan.segment_page_indptr[s]);
    for (int32_t r = it.row_begin; r < it.row_begin + it.row_count; ++r) {
      const int32_t e = plan.segment_entry_indptr[s] + r / group;
      const int32_t head = it.kv_head * group + r % group;
      const int32_t row = plan.entry_query[e];
      std::vector<double> q(d);
      for (int32_t i = 0; i < d; ++i) q[i] = LoadAsDouble(p.q.data(), p.options.q_dtype, (int64_t{row} * hq + head) * d + i);
      const int32_t end = std::min(it.kv_end, plan.entry_kv_limit[e]);
      Partial part;
      if (end <= it.kv_begin) {
        part.o.assign(d, 0.0);
        part.lse = -std::numeric_limits<double>::infinity();
      } else {
        part = ReferenceSegmentPartial(kv, pages, plan.segment_first_slot[s] + it.kv_begin, end - it.kv_begin, q,
                                       it.kv_head, scale);
      }
      const size_t slot = (static_cast<size_t>(wp.entry_partial_base[e]) + it.chunk) * hq + head;
      slots[slot] = part;
      ++(*written)[slot];
    }
  }
  std::vector<double> out(static_cast<size_t>(plan.num_queries) * hq * d);
  for (int32_t r = 0; r < plan.num_queries; ++r) {
    for (int32_t h = 0; h < hq; ++h) {
      std::vector<Partial> parts;
      for (int32_t i = plan.query_entry_indptr[r]; i < plan.query_entry_indptr[r + 1]; ++i) {
        const int32_t e = plan.query_entries[i];
        for (int32_t c = 0; c < wp.entry_num_chunks[e]; ++c) {
          parts.push_back(slots[(static_cast<size_t>(wp.entry_partial_base[e]) + c) * hq + h]);
        }
      }
      const Partial m = ReferenceMerge(parts);
      for (int32_t i = 0; i < d; ++i) out[(static_cast<size_t>(r) * hq + h) * d + i] = m.o[i];
    }
  }
  return out;
}

}  // namespace banyan::attention::testing

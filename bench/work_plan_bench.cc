// Host cost of planning one decode step's attention (what TreeAttention::Prepare
// does on the host before a step's first attention launch, while the GPU
// waits): WorkPlanner::Plan plus, after a build, ConsecutivePageTileShare over the engine's
// shape (h32/8, D 64, 256 or 1,024 leaves under one 2,048-token prefix),
// every leaf one token longer per step, as in greedy decoding.
// BM_DecodeStepPlan/leaves: us per step over 128 steps (builds and refreshes
// in the planner's own mix); counters refreshed (share of steps refreshed),
// items, upload_kb (the arrays Prepare copies to the device, WorkPlan and
// AttentionPlan, in KB).
#include <cstdint>
#include <vector>

#include "attention/testing/random_plan.h"
#include "attention/work_plan.h"
#include "benchmark/benchmark.h"
#include "sdk/base/rng.h"

namespace banyan {
namespace {

using attention::AttentionPlan;
using attention::WorkPlan;

constexpr int32_t kSteps = 128;

int64_t UploadBytes(const AttentionPlan& plan, const WorkPlan& work) {
  auto b = [](const auto& v) { return static_cast<int64_t>(v.size() * sizeof(v[0])); };
  return b(plan.segment_page_indptr) + b(plan.page_indices) + b(plan.segment_first_slot) +
         b(plan.segment_entry_indptr) + b(plan.entry_query) + b(plan.entry_kv_limit) + b(plan.query_entry_indptr) +
         b(plan.query_entries) + b(work.query_items) + b(work.items) + b(work.cta_item_indptr) + b(work.cta_head) +
         b(work.entry_partial_base) + b(work.entry_num_chunks) + b(work.row_slot_indptr) + b(work.item_entry);
}

void BM_DecodeStepPlan(benchmark::State& state) {
  const int32_t leaves = static_cast<int32_t>(state.range(0));
  Rng rng(17);
  // The plans of kSteps decode steps, made before timing (kv_tree's work).
  std::vector<AttentionPlan> plans;
  std::vector<attention::testing::TreeNode> nodes = attention::testing::UniformTree({1, leaves}, {2048, 1});
  attention::testing::PlanOptions options;
  options.shuffle_pages = false;  // the engine allocates pages in order
  options.random_first_slot = false;
  for (int32_t step = 0; step < kSteps; ++step) {
    plans.push_back(attention::testing::BuildTreePlan(nodes, options, rng).plan);
    for (size_t i = 1; i < nodes.size(); ++i) ++nodes[i].length;
  }
  const attention::WorkShape shape{.num_q_heads = 32, .num_kv_heads = 8, .head_dim = 64, .light_ctas = -1};
  const attention::DeviceModel device;
  attention::WorkPlanner planner;
  int64_t steps = 0, refreshed = 0, items = 0, bytes = 0;
  double share = 0;
  for (auto _ : state) {
    for (const AttentionPlan& plan : plans) {
      const WorkPlan& work = planner.Plan(plan, shape, device, attention::PathChoice::kAuto);
      // As TreeAttention::Prepare: the page order is judged at builds only.
      if (!planner.last_refreshed()) share = attention::ConsecutivePageTileShare(plan, work);
      ++steps;
      refreshed += planner.last_refreshed() ? 1 : 0;
      items += static_cast<int64_t>(work.items.size());
      bytes += UploadBytes(plan, work);
    }
  }
  benchmark::DoNotOptimize(share);
  state.SetItemsProcessed(steps);  // items_per_second = decode steps planned per second
  state.counters["refreshed"] = static_cast<double>(refreshed) / static_cast<double>(steps);
  state.counters["items"] = static_cast<double>(items) / static_cast<double>(steps);
  state.counters["upload_kb"] = static_cast<double>(bytes) / static_cast<double>(steps) / 1024.0;
}
BENCHMARK(BM_DecodeStepPlan)->ArgName("leaves")->Arg(256)->Arg(1024)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace banyan

BENCHMARK_MAIN();

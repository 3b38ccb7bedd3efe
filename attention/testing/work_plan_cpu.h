// Runs a WorkPlan's items with the double reference (reference/): each item's
// partial states into their slots, then every row's slots merged as the GPU
// merge merges them. Checks a planner's output without a GPU: that its items
// cover every (entry, chunk, query head) exactly once and that the slots add
// up to the plan's attention.
#ifndef BANYAN_ATTENTION_TESTING_WORK_PLAN_CPU_H_
#define BANYAN_ATTENTION_TESTING_WORK_PLAN_CPU_H_

#include <vector>

#include "attention/attention_plan.h"
#include "attention/testing/random_plan.h"
#include "attention/work_plan.h"

namespace banyan::attention::testing {

// A random tree of `levels` levels and `leaves` leaves for planner tests:
// nodes of up to 300 tokens, or for prefill (every token of a leaf a query
// row) of up to 20.
TreePlan PlannerTestTree(int32_t levels, int32_t leaves, bool prefill, Rng& rng);

// The merged output [num_queries][num_q_heads][head_dim] of `wp`'s items run
// on problem `p`; written[slot * num_q_heads + head] counts the items that
// wrote each partial slot (1 everywhere for a valid plan; slots nobody wrote
// merge as empty partials). REQUIRES: wp was built for `plan` and p's shape.
std::vector<double> ExecuteWorkPlanOnCpu(const AttentionProblem& p, const AttentionPlan& plan, const WorkPlan& wp,
                                         std::vector<int>* written);

}  // namespace banyan::attention::testing

#endif  // BANYAN_ATTENTION_TESTING_WORK_PLAN_CPU_H_

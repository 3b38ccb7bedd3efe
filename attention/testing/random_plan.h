// Test and benchmark utilities: random trees turned into AttentionPlans, and
// random KV pools / queries in the layout kv_layout.h describes. attention/
// knows nothing about kv_tree; these builders stand in for its plan builder
// (same contract: attention_plan.h) so that kernels can be tested on their own.
//
//   Rng rng(7);
//   TreePlan tp = MakeRandomTreePlan({.levels = 3, .leaves = 100}, rng);
//   AttentionProblem p = MakeProblem(tp, {.num_kv_heads = 2, .num_q_heads = 8}, rng);
//
// Not thread-safe (uses the caller's Rng); results are deterministic per seed.
#ifndef BANYAN_ATTENTION_TESTING_RANDOM_PLAN_H_
#define BANYAN_ATTENTION_TESTING_RANDOM_PLAN_H_

#include <cstdint>
#include <vector>

#include "attention/attention_args.h"
#include "attention/attention_plan.h"
#include "sdk/base/rng.h"
#include "sdk/base/tensor_view.h"

namespace banyan::attention::testing {

// One tree node: its parent (-1 for a root) and its token count (>= 1).
struct TreeNode {
  int32_t parent = -1;
  int32_t length = 1;
};

struct TreePlan {
  AttentionPlan plan;
  int64_t num_pages = 0;  // pages the pool needs (ids are < num_pages)
  // Per query row: the segments it reads, root first (the leaf's path).
  std::vector<std::vector<int32_t>> row_path;
};

struct PlanOptions {
  int32_t page_size = 16;
  // Decode: one query row per leaf. Prefill: every token of a leaf node is a
  // query row, causal inside the leaf and full over its ancestors.
  bool prefill = false;
  bool random_first_slot = true;  // segments start at random slots (shared partial pages)
  bool shuffle_pages = true;      // page ids scattered over the pool
  int32_t shuffle_run = 1;        // with shuffle_pages: runs of this many consecutive ids move together
  // Without shuffle_pages: the leaves' pages numbered round robin over the
  // leaves (page j of every leaf, then page j + 1 of every leaf), after every
  // inner node's pages in order: what a fresh pool gives leaves that decode
  // side by side, each taking its next page at the same step as the others.
  bool interleave_leaves = false;
  int32_t extra_pages = 3;        // unused pages in the pool
};

// Builds the plan of a given forest (nodes in any order with parent < index
// not required). Segments follow node order; every node must have a leaf
// below it (true of any forest).
TreePlan BuildTreePlan(const std::vector<TreeNode>& nodes, const PlanOptions& options, Rng& rng);

struct RandomTreeOptions {
  int32_t levels = 2;    // 1..5
  int32_t leaves = 16;   // 1..4096
  int32_t max_length = 80;  // node lengths uniform in [1, max_length]
  PlanOptions plan;
};

// A random forest of exactly `levels` levels and `leaves` leaves, with random
// fan-outs and uneven node lengths, as a plan.
TreePlan MakeRandomTreePlan(const RandomTreeOptions& options, Rng& rng);

// A regular tree: level i has fanout[i] children per node of level i - 1
// (fanout[0] roots) and every node of level i has length[i] tokens. The
// benchmark shapes: {1, 256} x {16384, 64} is one prefix and 256 suffixes.
std::vector<TreeNode> UniformTree(const std::vector<int32_t>& fanout, const std::vector<int32_t>& length);

struct ProblemOptions {
  int32_t num_kv_heads = 1;
  int32_t num_q_heads = 1;
  int32_t head_dim = 128;
  int32_t num_layers = 2;
  int32_t layer = 1;
  DType kv_dtype = DType::kBf16;
  DType q_dtype = DType::kBf16;
  // Every pool slot that no segment of the plan holds (the slots before a
  // segment's first_slot and past its end, pages no segment uses) is NaN, so
  // that a kernel reading past its tokens without masking them shows.
  bool poison_unused_slots = false;
  // Every page's keys (all layers and heads) times 2^u, u uniform in [-3, 3):
  // a row's running max then jumps by many units of log2 from page to page,
  // which the kernels' lazy rescaling (kernels/state.cuh LazyMax) must follow.
  bool page_key_scales = false;
};

// Random KV pool and queries for a plan (standard normal values, never zero
// arrays; NaN in unused slots with options.poison_unused_slots). Args() points AttentionArgs at these host arrays.
struct AttentionProblem {
  KvLayout layout;
  ProblemOptions options;
  std::vector<uint8_t> kv;  // layout.TotalBytes()
  std::vector<uint8_t> q;   // [num_queries][num_q_heads][head_dim] of q_dtype
  AttentionArgs Args(const AttentionPlan& plan, void* out, DType out_dtype, float* lse) const;
};
AttentionProblem MakeProblem(const TreePlan& tree, const ProblemOptions& options, Rng& rng);

// A pool of problem p's pages `pages` only: local page j (every layer, K and
// V) = p's page pages[j]; *layout = p.layout with num_pages = pages.size().
// (A device's own pool of a plan shard, shard_plan.h.)
std::vector<uint8_t> GatherPages(const AttentionProblem& p, const std::vector<int32_t>& pages, KvLayout* layout);

// Fills `n` elements of `dtype` with standard normal values.
void FillNormal(void* data, DType dtype, int64_t n, Rng& rng);
// Converts `n` elements of `dtype` to double.
std::vector<double> ToDoubles(const void* data, DType dtype, int64_t n);
// ||a - b|| / ||b|| (2-norms); NaN anywhere gives NaN.
double RelativeError(const std::vector<double>& a, const std::vector<double>& b);

}  // namespace banyan::attention::testing

#endif  // BANYAN_ATTENTION_TESTING_RANDOM_PLAN_H_

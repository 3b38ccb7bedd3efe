// ShardPlan: one AttentionPlan's KV cut by token range over several devices
// (tree-attention 5.2, Algorithm 3): every segment's pages are split into
// `shards` contiguous runs of whole pages, device i holding run i of every
// segment in a pool of its own. Each device attends its shard with the same
// query rows (TreeAttention, out and lse per row), and the shards' partial
// states are combined with an all-reduce of the max, the numerator and the
// denominator (tree_allreduce.h), so the communication is per query row and
// head, whatever the context length.
//
//   BANYAN_ASSIGN_OR_RETURN(std::vector<PlanShard> shards, ShardPlan(plan, 2));
//   // device i: copy page shards[i].source_pages[j] of the source pool to its
//   // local page j, run shards[i].plan over that pool, then combine.
//
// Host only, no CUDA. Thread-compatible pure function.
#ifndef BANYAN_ATTENTION_SHARD_PLAN_H_
#define BANYAN_ATTENTION_SHARD_PLAN_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "attention/attention_plan.h"

namespace banyan::attention {

struct PlanShard {
  // The same query rows as the source plan; each segment restricted to the
  // shard's pages (a segment with no page here is left out, with its
  // entries); page ids are local: 0 .. source_pages.size() - 1, in order.
  AttentionPlan plan;
  // Local page j holds the source pool's page source_pages[j].
  std::vector<int32_t> source_pages;
};

// Splits `plan` over `shards` devices: segment s with P pages gives shard i
// its pages [i * P / shards, (i + 1) * P / shards) and the tokens on them;
// an entry keeps the part of its visible tokens [0, limit) on those pages
// (dropped where that is none). Returns kInvalidArgument when the plan is
// invalid, shards < 1, or some query row would have no entry on some shard
// (every row needs at least `shards` pages of KV in one of its segments;
// the path is for long contexts).
absl::StatusOr<std::vector<PlanShard>> ShardPlan(const AttentionPlan& plan, int32_t shards);

}  // namespace banyan::attention

#endif  // BANYAN_ATTENTION_SHARD_PLAN_H_

// Cluster placement of a work plan: the items of a small plan cut so that all
// the partial states of a set of query rows are written by the CTAs of one
// thread-block cluster, which then merge those rows themselves after a
// cluster barrier (kernels/tree_tma.cuh with kClusterMerge, TreeAttention::
// set_cluster_merge). One launch and no merge kernel: the merge waits for the
// few CTAs that wrote its rows, not for the whole grid to finish and flush
// (the programmatic dependent launch's ~1.5 us release plus a second launch,
// most of a small plan's merge cost: attention/PERF_NOTES.md session 37 item
// 6). Measured (H100, session 38): the merge phase ~2 us shorter on the
// 64-leaf / 2,048 / 64 shape, the items phase ~1.5 us longer; slower on every
// larger plan, so TreeAttention leaves it off by default. (Session 40: in
// clusters of two on large h32/8 plans 7-39% slower; 11% on the 256-leaf /
// 16,384 / 64 shape, whose CTAs get the default placement's work there.)
//
// A cluster owns the rows (query q, query head h) with q in [query_begin,
// query_end) and h in the KV heads [kv_begin, kv_end) of WorkPlan::cluster_rows.
// Its items are the kBatched items of those rows only: a segment shared by
// rows of several clusters is read once per cluster (from L2 after the first),
// which is why this placement is for small plans. Within a cluster, each
// (segment, row block) is cut into split-K chunks so that the cluster's work
// spreads evenly over its CTAs, and the items go to its CTAs longest first.
//
// Host only; a thread-compatible pure function.
#ifndef BANYAN_ATTENTION_WORK_PLAN_CLUSTER_H_
#define BANYAN_ATTENTION_WORK_PLAN_CLUSTER_H_

#include <cstdint>

#include "attention/attention_plan.h"
#include "attention/work_plan.h"

namespace banyan::attention {

// Ints per cluster in WorkPlan::cluster_rows: query_begin, query_end, kv_begin, kv_end.
inline constexpr int32_t kClusterRowsStride = 4;

// Fewest packed rows (queries x query heads of one KV head) a cluster takes
// of a plan when the rows are split over clusters (a warp's 16-row tile, twice).
inline constexpr int32_t kClusterMinRows = 32;

struct ClusterGrid {
  int32_t cluster_size = 8;   // CTAs per cluster
  int32_t num_clusters = 16;  // clusters of the launch (the grid is their product)
  // Query ranges the rows are cut into (each taken by one cluster per KV head
  // range); 0: as many as the clusters allow with at least kClusterMinRows
  // rows each.
  int32_t query_parts = 0;
};

// Whether BuildClusterWorkPlan can place plans of `shape`: 16-bit KV (batched
// items only) and a KV group that fits one row block.
bool ClusterPlacementFits(const WorkShape& shape);

// Places `plan` on grid.num_clusters x grid.cluster_size CTAs (CTA b in cluster
// b / cluster_size) as described above: every field of WorkPlan a kNarrow
// persistent kernel reads (items, cta_item_indptr, cta_head, item_entry, the
// partial slots) plus cluster_rows; clusters past the ones used own no rows
// (query_begin == query_end) and no items. REQUIRES: plan.Validate() is empty,
// ClusterPlacementFits(shape), grid sizes >= 1.
WorkPlan BuildClusterWorkPlan(const AttentionPlan& plan, const WorkShape& shape, const ClusterGrid& grid);

}  // namespace banyan::attention

#endif  // BANYAN_ATTENTION_WORK_PLAN_CLUSTER_H_

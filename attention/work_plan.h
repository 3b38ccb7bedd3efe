// WorkPlan: how one AttentionPlan is cut into GPU work items, and the cost
// model that cuts it. Host only (no CUDA), so it is tested on any machine.
//
// Two kinds of work item read a chunk [kv_begin, kv_end) of one segment's KV
// for one KV head:
//   kBatched    a query tile of up to kTileRows packed rows: the segment's
//               entries x the query heads of the KV group, flattened as
//               row = entry_in_segment * group + head_in_group (hydragen 3.2,
//               bifurcated 4.2). The KV chunk is read once for the whole tile
//               and both products run on tensor cores. 16-bit KV only.
//   kFlattened  one entry and up to kFlatRows query heads of the group on CUDA
//               cores: the per-sequence FlashDecoding work (the KV is read once
//               per entry). Any KV dtype.
// A kBatched item whose tile holds one entry's heads only is per-sequence work
// on tensor cores (PathChoice::kPerSequence).
// Every item writes one partial state per (row, query head) into slot
// entry_partial_base[e] + chunk; the merge combines a row's slots.
//
// The cost model (per segment): batched cost = its tiles' cost, flattened
// cost = its entries' cost, each max(bytes / per-CTA bandwidth, flops /
// per-CTA rate) + a fixed item overhead; the cheaper mode wins (PathChoice
// can force one; fp32 KV is always flattened). Chunking is stream-K style:
// every item costs about total / (2 x CTAs) (chunks of at least kMinChunk
// tokens), items go to CTAs by longest-
// processing-time-first, and the persistent kernel runs each CTA's list.
// Thread-compatible value types; BuildWorkPlan is a pure function (WorkPlanner
// is the same with buffers kept between calls).
#ifndef BANYAN_ATTENTION_WORK_PLAN_H_
#define BANYAN_ATTENTION_WORK_PLAN_H_

#include <algorithm>
#include <cstdint>
#include <memory>
#include <vector>

#include "attention/attention_plan.h"

namespace banyan::attention {

inline constexpr int32_t kWarps = 8;       // warps of a CTA (256 threads)
inline constexpr int32_t kTileRows = 16 * kWarps;  // rows of a batched query tile (16 per warp)
inline constexpr int32_t kFlatRows = 16;   // query heads of a flattened item (2 per warp)
inline constexpr int32_t kKvTile = 64;     // tokens per shared-memory KV tile (16-bit KV)
// Fewest tokens of a split-K chunk by default (amortizes an item's start-up):
// on the H100, 128 measured 3% faster than 256 on the 64-leaf/2048/64 shape
// and equal elsewhere, 64 1.3x slower there (PERF_NOTES.md, run S2-1).
inline constexpr int32_t kMinChunk = 128;

// The TMA kernel's KV tiles of an item (kernels/params.cuh TmaTiles): 64 slot
// positions each, from the 64-aligned position holding the item's first token
// (first_slot + kv_begin). Tiles [lead, end) hold only tokens in
// [kv_begin, limit), where limit is the least kv limit of the item's rows: no
// row needs their scores masked. Every other tile of the item is an edge tile.
// REQUIRES: limit <= kv_end (the kernel's row limits are clamped to kv_end).
// lead <= end <= max(tile_count, lead); constexpr so that device code calls it too.
struct UnmaskedTiles {
  int32_t lead;
  int32_t end;
};
constexpr UnmaskedTiles UnmaskedTileSpan(int32_t first_slot, int32_t kv_begin, int32_t tile_count, int32_t limit) {
  const int32_t tok_base = ((first_slot + kv_begin) & ~(kKvTile - 1)) - first_slot;  // tile 0's first token
  const int32_t lead = tok_base < kv_begin ? 1 : 0;  // tile 0 starts before the item's tokens
  const int32_t inside = limit >= tok_base + kKvTile ? (limit - tok_base) / kKvTile : 0;
  const int32_t end = inside < tile_count ? inside : tile_count;
  return {lead, end > lead ? end : lead};
}

enum class ItemKind : int32_t { kBatched = 0, kFlattened = 1 };
// kAuto: the cost model picks per segment between shared tiles (kBatched) and
// per-entry tiles (kPerSequence; SIMT kFlattened items for fp32 KV).
// kBatched / kPerSequence / kFlattened force one mode for every segment
// (kBatched and kPerSequence fall back to kFlattened for fp32 KV).
// kPerSequence is the per-sequence baseline on tensor cores (each entry's KV
// read for that entry alone, like FlashInfer's GQA decode); kFlattened is the
// FlashDecoding-style SIMT baseline.
enum class PathChoice { kAuto, kBatched, kPerSequence, kFlattened };

// Plain-old-data, copied to the device as is. page_begin, first_slot and
// entry_begin repeat the segment's plan arrays so that a kernel needs no
// dependent load of segment metadata before its first KV and q loads.
struct WorkItem {
  int32_t segment;
  int32_t row_begin;  // first packed row (entry_in_segment * group + head_in_group)
  int32_t row_count;  // rows of this item (<= kTileRows or kFlatRows)
  int32_t kv_head;
  int32_t kv_begin;   // tokens [kv_begin, kv_end) of the segment; kv_end is
  int32_t kv_end;     // clamped to the largest kv limit of the item's rows (>= kv_begin)
  int32_t chunk;      // chunk index: partial slot = entry_partial_base[e] + chunk
  int32_t kind;       // ItemKind
  int32_t page_begin;   // plan.segment_page_indptr[segment]
  int32_t first_slot;   // plan.segment_first_slot[segment]
  int32_t entry_begin;  // plan.segment_entry_indptr[segment]
  // Small-item group (WorkShape::group_small): g >= 2 on the first of g
  // consecutive items of one CTA's list, each a kBatched item of at most
  // kGroupRows rows and one KV tile, that the mma.sync kernel runs together
  // (one warp per item, all KV tiles loaded at once); 0 on every other item.
  // A hint only: each item of a group is complete on its own, and a kernel may
  // run them one by one (the wgmma kernel does).
  int32_t group;
};
static_assert(sizeof(WorkItem) == 48);

// The first and the last plan entry that an item's rows belong to (`group`
// query heads per KV head: packed row r is entry r / group of its segment).
inline int32_t ItemFirstEntry(const WorkItem& it, int32_t group) { return it.entry_begin + it.row_begin / group; }
inline int32_t ItemLastEntry(const WorkItem& it, int32_t group) {
  return it.entry_begin + (it.row_begin + it.row_count - 1) / group;
}

// Rows of a grouped small item (one warp of the mma.sync tile).
inline constexpr int32_t kGroupRows = 16;
// Small items are grouped only when there are at least this many per CTA.
inline constexpr int32_t kGroupMinPerCta = 8;

// The CTA head: per CTA, one fixed-size block of int32 (WorkPlan::cta_head)
// that holds what the CTA's first item needs before its first KV and q loads,
// so that those loads leave one global round trip after the kernel starts:
//   [0, 12)   the first item (a WorkItem; zeros when the CTA has none)
//   [12]      begin, [13] end: the CTA's items are items[begin, end)
//   [14]      page_base: pages[i] is the id of the segment's page page_base + i
//   [15]      tiles: the item's KV tiles [0, tiles) read only pages in pages[]
//   [16, 32)  pages (kHeadPages)
//   [32, 64)  qrows: entry_query of the item's entries, in order, from
//             entry_begin + row_begin / group (kHeadQrows; entries past it are
//             read from the plan)
inline constexpr int32_t kHeadPages = 16;
inline constexpr int32_t kHeadQrows = 32;
inline constexpr int32_t kHeadPagesAt = 16;
inline constexpr int32_t kHeadQrowsAt = kHeadPagesAt + kHeadPages;
inline constexpr int32_t kHeadStride = kHeadQrowsAt + kHeadQrows;  // int32 per CTA (256 bytes)

// What the cost model knows about the device. Defaults: H100 SXM as measured
// here (bench/RESULTS.md), mma.sync at about half of the dense bf16 rate.
struct DeviceModel {
  int32_t num_sms = 132;
  int32_t ctas_per_sm = 1;
  double hbm_bytes_per_us = 2.9e6;
  double mma_flops_per_us = 330e6;
  double simt_flops_per_us = 25e6;  // fp32 FMA path incl. conversions
  double item_overhead_us = 1.5;    // start-up, partial write, pipeline fill
  int32_t min_chunk = kMinChunk;    // fewest tokens of a split-K chunk (rounded up to kKvTile)
  // The light-CTA split (WorkShape::light_ctas) is judged with the TMA
  // kernel's own rates (H100, bench/RESULTS.md sessions 8 and 9): a heavy CTA
  // runs a 128-row x 64-token tile in tma_tile_us, a light item's 64-token
  // tile among heavy ones in tma_light_item_us; a light CTA's warp reads KV at
  // light_warp_bytes_per_us and keeps an item for light_item_us + light_tile_us
  // per 64-token tile; every CTA starts its first item after about
  // tma_start_us, and a heavy CTA pays about tma_item_gap_us per item (its
  // start and end). The split must beat the unsplit kernel by the factor
  // light_min_gain. tma_tile_us, tma_item_gap_us, light_warp_bytes_per_us and
  // light_item_us are head dim 64's, fitted so that the plans the split
  // builds (its light count and the prefix's chunk count) rank the measured
  // ones of 22 D 64 shapes (H100, session 36: 64-1,024 leaves, prefixes
  // 1K-16K, suffixes 8-512, light counts 0-106 and chunk counts forced;
  // bench/light_split_fit over bench/light_sweep_h100_s36.txt); a tile here
  // is the marginal one, cheaper than a first item's tiles, and an item's own
  // start and end are the larger part of a short item.
  double tma_tile_us = 0.45;
  double tma_light_item_us = 1.2;
  double tma_start_us = 8.0;
  double tma_item_gap_us = 3.0;
  double light_warp_bytes_per_us = 5.0e3;
  double light_item_us = 1.0;
  double light_tile_us = 2.3;
  double light_min_gain = 1.15;
  // The longest split-K chunk of the dominant heavy segment the split
  // considers (tokens). At head dim 64, 4,096: with light CTAs beside them,
  // fewer and longer heavy items pay (each costs its CTA tma_item_gap_us):
  // H100, session 36, forced chunk counts: one 2,048-token item per row block
  // beat two and three by 6-13% on the 256 x 2K rows past S64 and on
  // L1024 P2048 S64, two 2,048-token items beat four of 1,024 on L1024 P4096
  // by 8-12%. At head dim 128 (max_dominant_chunk_d128), 2,048: H100,
  // session 37, the 24 D 128 rows at forced light and chunk counts
  // (bench/light_sweep_d128_h100_s37.txt): with light CTAs one 2,048-token
  // item per row block beat two of 1,024 by 8-12% (h32/8 L256 P2048 S64,
  // L1024 P2048 S64).
  int32_t max_dominant_chunk = 4096;
  int32_t max_dominant_chunk_d128 = 2048;
  // At head dim 128 (six light warps per light CTA, 32 KB a tile; H100,
  // session 26, h32/8 ordered pages; tma_tile_d128_us refitted in session 37
  // with the cap above, bench/light_split_fit: log regret 0.373 -> 0.162 over
  // the 24 rows, every other rate flat there): a heavy CTA runs a tile in
  // tma_tile_d128_us and loses about tma_item_gap_d128_us between items, a
  // light item costs a heavy CTA about tma_light_item_d128_us, a light warp
  // reads light_warp_d128_bytes_per_us and keeps an item light_item_d128_us +
  // light_tile_us per tile, and light items on any CTAs read at most
  // light_hbm_bytes_per_us together.
  double tma_tile_d128_us = 0.95;
  double tma_item_gap_d128_us = 5.0;
  double tma_light_item_d128_us = 1.4;
  double light_warp_d128_bytes_per_us = 7.2e3;
  double light_item_d128_us = 2.3;
  double light_hbm_bytes_per_us = 2.3e6;
  int32_t num_ctas() const { return num_sms * ctas_per_sm; }
};

// Rows of a light item (WorkShape::spread_light).
inline constexpr int32_t kLightRows = 32;

// A light CTA's items (WorkShape::light_ctas): batched items of at most
// kLightItemRows rows, all of one entry (a leaf's own suffix: its query heads
// of one KV group). Such an item reads its KV for a few rows only, so it is
// bound by memory and by its own latency chain, not by the tensor cores.
// Light CTAs run at head dims kLightHeadDim (twelve light warps) and 128
// (six, on the consumer warpgroups' registers after setmaxnreg: a light
// warp's stage is 32 KB there; session 8's D 128 light CTAs ran every warp at
// the kernel's 168 registers, spilled, and measured slower than the unsplit
// kernel).
inline constexpr int32_t kLightItemRows = 16;
inline constexpr int32_t kLightHeadDim = 64;
// Warps of a light CTA that each run one light item at a time (kernels/light.cuh:
// one 64-token K and V stage each, within the TMA kernel's shared memory):
// all 12 at kLightHeadDim, six at head dim 128.
inline constexpr int32_t kLightCtaWarps = 12;
constexpr int32_t LightCtaWarps(int32_t head_dim) { return head_dim == kLightHeadDim ? kLightCtaWarps : 6; }

// How the planner places a plan of few long runs (WorkShape::stream_k; a run
// is everything one row block reads of one segment for one KV head):
//   kAuto    if the runs are bound by memory in the model and cutting each
//            into the same number (>= 2) of pieces gives one piece per CTA
//            for at least 85% of the CTAs: that one wave (Placement::kOneWave; H100,
//            long_decode_bench: as fast as stream-K or up to 15% faster, a
//            memory-bound CTA pulls more than its share of HBM while others
//            idle, and each extra item per CTA costs its start); else
//            stream-K style (Placement::kStreamK, work_plan_stream_k.h: equal
//            cost per CTA, runs cut into unequal pieces) where the model
//            expects that to end at least 10% sooner than the split-K chunks
//            placed whole; else those chunks (Placement::kChunks).
//   kOff     always the chunks placed whole (the planner's fixed split).
//   kAlways  stream-K whenever it can take the plan (tests, benchmarks).
enum class StreamKMode { kOff, kAuto, kAlways };

// How a WorkPlan's items were placed (StreamKMode).
enum class Placement { kChunks, kStreamK, kOneWave };

struct WorkShape {
  int32_t num_q_heads = 0;
  int32_t num_kv_heads = 0;
  int32_t head_dim = 0;
  int32_t kv_dtype_bytes = 2;
  int32_t tile_rows = kTileRows;  // rows of a batched tile (the kernel variant's)
  // >= 2: batched items of at most kGroupRows rows and one KV tile are
  // planned in groups of up to this many (WorkItem::group), each group costed
  // and placed as one unit (the mma.sync kernel runs a group at once), where
  // the plan has at least kGroupMinPerCta such items per CTA. 0: none.
  int32_t group_small = 0;
  // true: each CTA's light items (at most kLightRows rows: per-sequence
  // suffixes, whose KV is read for a few rows and so bound by memory) are
  // spread around its heavy ones (work_plan.cc, SpreadLightUnits) instead of
  // all running after them, at the same time on every CTA, as one HBM-bound
  // burst.
  bool spread_light = true;
  // Light CTAs: light items (kLightItemRows) go to CTAs of their own, the
  // last light_ctas CTAs of the grid (WorkPlan::light_cta_begin), and every
  // other item to the rest, so that the memory-bound light items run beside
  // the tensor-core-bound heavy ones on other SMs instead of between them.
  // 0: none (every CTA takes any item); -1: the model picks the count that
  // evens out the two sides' times (work_plan.cc LightCtaCount); n > 0: n.
  // Never all CTAs: a plan of light items only is not split.
  // Only for a kernel that runs such CTAs (the TMA kernel), without
  // group_small, and for head dims kLightHeadDim and 128 (where the model
  // splits only plans whose light items are one KV tile each).
  int32_t light_ctas = 0;
  // Stream-K placement (StreamKMode) of plans it can take: few runs (segment
  // x KV head x row block, at most 4 per CTA) of at least 16 KV tiles per CTA
  // in all, without light CTAs or grouped items.
  StreamKMode stream_k = StreamKMode::kAuto;
  // With light CTAs: about how many split-K chunks the dominant heavy segment
  // (the one with most heavy tiles) is cut into (ChunkLength's whole tiles).
  // 0: the count LightCtaCount judged the split with. For benchmarks that
  // time the split's two choices apart (scripts/light_sweep.sh).
  int32_t light_chunks = 0;
  int32_t group() const { return num_q_heads / num_kv_heads; }
};

// Whether `it` is a light item (kLightItemRows) for a KV group of `group` heads.
inline bool IsLightItem(const WorkItem& it, int32_t group) {
  return it.kind == static_cast<int32_t>(ItemKind::kBatched) && it.row_count <= kLightItemRows &&
         it.row_begin % group + it.row_count <= group;
}

struct WorkPlan {
  std::vector<WorkItem> items;          // grouped by CTA
  std::vector<int32_t> cta_item_indptr;  // num_ctas + 1
  // Per CTA: its head block (kHeadStride int32 each, layout above kHeadPages),
  // so that a kernel can start its first item without waiting for
  // cta_item_indptr, the plan's page ids or entry_query.
  std::vector<int32_t> cta_head;
  // Per item, 4 int32: entry_query, entry_kv_limit and entry_partial_base of
  // the item's first entry, then 1 when all of its rows belong to that entry
  // (else 0): what a kernel needs of a one-entry item (a leaf's suffix) comes
  // with the item, with no dependent load.
  std::vector<int32_t> item_entry;
  // Partial slots: entry e owns slots entry_partial_base[e] + [0, entry_num_chunks[e]).
  // The slots of one query row are contiguous, row after row: row q's are
  // row_slot_indptr[q] .. row_slot_indptr[q + 1] (what the merge reads).
  std::vector<int32_t> entry_partial_base;  // per entry
  std::vector<int32_t> entry_num_chunks;    // per entry
  std::vector<int32_t> entry_segment;       // per entry
  std::vector<int32_t> row_slot_indptr;     // num_queries + 1
  // Per query row: how many items touch it (the fused merge's completion
  // count). fused_merge: every row is touched by at least one item, so the
  // persistent kernel can merge every row itself (else a merge launch runs).
  std::vector<int32_t> query_items;
  bool fused_merge = false;
  // CTAs [light_cta_begin, num_ctas) hold the light items, the others every
  // other item (WorkShape::light_ctas); num_ctas when there are no light CTAs
  // (and past any CTA in a plan never built).
  int32_t light_cta_begin = INT32_MAX;
  // How the items were placed (StreamKMode). Other than kChunks, an entry's
  // chunks on different KV heads may cover different token ranges, and the
  // plan is never refreshed (WorkPlanner).
  Placement placement = Placement::kChunks;
  int32_t num_partials = 0;
  // A cluster placement's row sets (work_plan_cluster.h: kClusterRowsStride
  // ints per cluster); empty for every other plan.
  std::vector<int32_t> cluster_rows;
  int32_t batched_segments = 0;
  int32_t flattened_segments = 0;
  double estimated_us = 0.0;  // the model's makespan (max CTA load)
  // The most split-K chunks of any entry (in a two-level tree: the shared
  // prefix's); 0 for a plan without entries.
  int32_t most_chunks() const {
    return entry_num_chunks.empty() ? 0 : *std::max_element(entry_num_chunks.begin(), entry_num_chunks.end());
  }
  // How many of a grid of `ctas` CTAs are light CTAs (0 for a plan without).
  int32_t light_ctas(int32_t ctas) const { return light_cta_begin < ctas ? ctas - light_cta_begin : 0; }
};

// Partial slots row by row (the merge reads one contiguous range per row),
// from work->entry_num_chunks: entry_partial_base, row_slot_indptr, num_partials.
void AssignPartialSlots(const AttentionPlan& plan, WorkPlan* work);

// Cuts `plan` into items for `shape` on `device`. REQUIRES: plan.Validate()
// is empty, num_q_heads a positive multiple of num_kv_heads.
WorkPlan BuildWorkPlan(const AttentionPlan& plan, const WorkShape& shape, const DeviceModel& device,
                       PathChoice choice);

// BuildWorkPlan for a caller that plans again and again (a decode loop plans
// every step). The planner owns the plan it returns and keeps its buffers (and
// its own working buffers) from call to call instead of allocating them.
//
// Refresh: when a call's plan has the topology of the previous call's (the
// same segments, entries and query rows in the same order: a decode step
// after the last one, where every branch grew by a token or so), the same
// shape, device and choice, and every segment still splits into as many KV
// chunks as before, the previous work plan is refreshed instead of rebuilt:
// the same items on the same CTAs, each item's KV range, page base and row
// limits re-read from the new plan, the CTA heads rebuilt. That plan is as
// valid as a fresh one (every (entry, chunk, head) covered once, the same
// partial slots and completion counts) but keeps the old cost model's choices
// and balance; a fresh build runs at least every kMaxRefreshes + 1 calls, and
// never refreshes a plan with grouped items (WorkItem::group) or one placed
// from whole runs (WorkPlan::placement). O(items +
// entries) instead of BuildWorkPlan's sorting and placement.
// Thread-compatible (one planner per thread); movable.
class WorkPlanner {
 public:
  static constexpr int32_t kMaxRefreshes = 15;

  WorkPlanner();
  ~WorkPlanner();
  WorkPlanner(WorkPlanner&&) noexcept;
  WorkPlanner& operator=(WorkPlanner&&) noexcept;

  // The work plan of `plan` (REQUIRES: as BuildWorkPlan), refreshed from the
  // previous one where allowed (above), else built as BuildWorkPlan builds it.
  // Valid until the next Plan or Clear.
  const WorkPlan& Plan(const AttentionPlan& plan, const WorkShape& shape, const DeviceModel& device,
                       PathChoice choice);
  // The last plan (empty before the first Plan and after Clear).
  const WorkPlan& plan() const;
  // Forgets the last plan: the next Plan builds.
  void Clear();
  // true (default): Plan may refresh; false: Plan always builds.
  void set_refresh(bool refresh) { refresh_ = refresh; }
  // Whether the last Plan refreshed instead of building (tests, benchmarks).
  bool last_refreshed() const { return last_refreshed_; }

  // Helpers of every placement (this planner's and work_plan_cluster.h's).
  // Per item: the first entry's row, limit and partial base (WorkPlan::item_entry).
  static void FillItemEntries(const AttentionPlan& plan, int32_t group, WorkPlan* out);
  // The CTA heads (WorkPlan::cta_head) from the items and cta_item_indptr.
  static void FillCtaHeads(const AttentionPlan& plan, int32_t group, int32_t ctas, WorkPlan* out);

 private:
  struct Scratch;
  void Build(const AttentionPlan& plan, const WorkShape& shape, const DeviceModel& device, PathChoice choice);
  bool CanRefresh(const AttentionPlan& plan, const WorkShape& shape, const DeviceModel& device,
                  PathChoice choice) const;
  void Refresh(const AttentionPlan& plan, const WorkShape& shape);
  void Remember(const AttentionPlan& plan, const WorkShape& shape, const DeviceModel& device, PathChoice choice);
  // Replaces the placed items of `work` by a one-wave or stream-K placement
  // of whole runs where StreamKMode says so; leaves it as it is otherwise.
  void TryStreamK(const AttentionPlan& plan, const WorkShape& shape, const DeviceModel& device, WorkPlan* work);

  std::unique_ptr<Scratch> scratch_;  // Build's working buffers
  WorkPlan plan_;
  bool refresh_ = true;
  bool last_refreshed_ = false;
  // What the last plan was made for (have_plan_: there is one to refresh).
  bool have_plan_ = false;
  int32_t refreshes_ = 0;  // since the last build
  WorkShape shape_;
  DeviceModel device_;
  PathChoice choice_ = PathChoice::kAuto;
  int32_t num_queries_ = 0;
  std::vector<int32_t> segment_entry_indptr_, entry_query_, query_entry_indptr_, query_entries_;
  // Per segment of the last plan: its KV chunk length and count.
  std::vector<int32_t> chunk_len_, chunks_;
  // Per item of the last build: its first and last entry.
  std::vector<int32_t> item_entries_;
};

// Of the 64-token KV tiles that the batched items of `work` read (KV head 0's
// items; every KV head reads the same pages), each weighted by its item's
// rows (its math), the share whose pages have consecutive ids (1 with pages
// of at least 64 tokens). The TMA kernel loads such a tile with one box per
// plane and any other with one per page and 64 columns (kernels/tree_tma.cuh),
// which decides how it should feed its ring (TreeAttention::TmaRings).
double ConsecutivePageTileShare(const AttentionPlan& plan, const WorkPlan& work);

// The 64-token KV tiles of all batched items of `work` over its CTAs: how
// much a CTA has to do beyond starting (the TMA kernel's short-plan feed,
// TreeAttention::kTmaShortPlanTilesPerCta). 0 for a plan with no CTAs.
double BatchedTilesPerCta(const WorkPlan& work);

// The model's time in microseconds for one item's KV bytes and for its math
// (ItemCostUs is the larger plus the item overhead).
struct ItemTimes {
  double bytes_us;
  double flops_us;
};
ItemTimes ItemTimesUs(ItemKind kind, int32_t rows, int32_t tokens, const WorkShape& shape, const DeviceModel& device);

// The model's cost in microseconds of one item of `kind` with `rows` rows over
// `tokens` tokens (exposed for tests and benchmarks).
double ItemCostUs(ItemKind kind, int32_t rows, int32_t tokens, const WorkShape& shape, const DeviceModel& device);

}  // namespace banyan::attention

#endif  // BANYAN_ATTENTION_WORK_PLAN_H_

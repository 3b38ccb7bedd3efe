#include "attention/work_plan.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <numeric>
#include <utility>

#include "attention/work_plan_stream_k.h"

namespace banyan::attention {
namespace {

int32_t CeilDiv(int64_t a, int64_t b) { return static_cast<int32_t>((a + b - 1) / b); }

// Rows of one segment's items: batched tiles or per-entry head groups.
struct RowBlock {
  int32_t row_begin;
  int32_t row_count;
};

enum class Mode { kShared, kPerEntry, kSimt };

ItemKind KindOf(Mode mode) { return mode == Mode::kSimt ? ItemKind::kFlattened : ItemKind::kBatched; }

// Calls f(RowBlock) for each row block of a segment with `entries` entries, in
// order: kShared tiles of tile_rows packed rows, kPerEntry tiles of one
// entry's heads, kSimt items of kFlatRows heads of one entry.
template <typename F>
void ForEachRowBlock(Mode mode, int32_t entries, int32_t group, int32_t tile_rows, F&& f) {
  if (mode == Mode::kShared) {
    const int32_t rows = entries * group;
    for (int32_t r = 0; r < rows; r += tile_rows) f(RowBlock{r, std::min(tile_rows, rows - r)});
    return;
  }
  const int32_t step = mode == Mode::kPerEntry ? tile_rows : kFlatRows;
  for (int32_t e = 0; e < entries; ++e) {
    for (int32_t h = 0; h < group; h += step) f(RowBlock{e * group + h, std::min(step, group - h)});
  }
}

// The largest kv limit of a row block's entries (no row of it sees past it);
// entry_begin: the segment's first entry.
int32_t RowBlockLimit(const AttentionPlan& plan, int32_t entry_begin, const RowBlock& b, int32_t group) {
  int32_t limit = 0;
  const int32_t e_last = entry_begin + (b.row_begin + b.row_count - 1) / group;
  for (int32_t e = entry_begin + b.row_begin / group; e <= e_last; ++e) limit = std::max(limit, plan.entry_kv_limit[e]);
  return limit;
}

// How many row blocks ForEachRowBlock calls f for.
int32_t RowBlockCount(Mode mode, int32_t entries, int32_t group, int32_t tile_rows) {
  if (mode == Mode::kShared) return CeilDiv(int64_t{entries} * group, tile_rows);
  return entries * CeilDiv(group, mode == Mode::kPerEntry ? tile_rows : kFlatRows);
}

// Picks the least loaded CTA (ties: the lowest index) and adds to its load:
// a tournament tree over the CTAs, O(log CTAs) per pick without the branchy
// sift of a binary heap.
class LeastLoaded {
 public:
  explicit LeastLoaded(int32_t n) {
    leaves_ = 1;
    while (leaves_ < n) leaves_ *= 2;
    load_.assign(2 * static_cast<size_t>(leaves_), std::numeric_limits<double>::infinity());
    index_.assign(2 * static_cast<size_t>(leaves_), INT32_MAX);
    for (int32_t c = 0; c < n; ++c) {
      load_[leaves_ + c] = 0.0;
      index_[leaves_ + c] = c;
    }
    for (int32_t node = leaves_ - 1; node >= 1; --node) Pull(node);
  }
  int32_t least() const { return index_[1]; }
  // Adds `cost` to the least loaded CTA; returns its new load.
  double AddToLeast(double cost) {
    int32_t node = leaves_ + index_[1];
    load_[node] += cost;
    const double load = load_[node];
    for (node /= 2; node >= 1; node /= 2) Pull(node);
    return load;
  }

 private:
  void Pull(int32_t node) {
    const int32_t l = 2 * node, r = l + 1;
    const bool right = load_[r] < load_[l] || (load_[r] == load_[l] && index_[r] < index_[l]);
    const int32_t pick = right ? r : l;
    load_[node] = load_[pick];
    index_[node] = index_[pick];
  }
  int32_t leaves_;
  std::vector<double> load_;
  std::vector<int32_t> index_;
};

// A unit of one CTA's work: one item, or a group of small items.
struct Pending {
  double cost;
  const int32_t* items;  // `count` indices into the emitted items (BuildWorkPlan's arrays)
  int32_t count;
};

// The order (into `order`, indices into `pending`) in which a CTA runs its
// single-item units (`units`, `count` of them: longest first; groups are left
// out, they run last). Without `spread`, as given.
// With it, the light units (kLightRows) go all before the first heavy unit
// or all right after it, by a fixed function of that unit's KV chunk
// (segment, KV head, chunk): every CTA whose first heavy unit reads the same
// chunk starts it at the same time (they share its KV in L2) and, with about
// equal light loads, its next heavy unit too; across chunks the light units,
// bound by HBM, run at different times, on about half the CTAs at once while
// the others run tensor-core work. (Splitting each CTA's light units between
// both places put every CTA into an HBM burst at the start: H100, session
// 13, h32/8 L256 P16384 S512 296 -> 264 us with the whole-share choice.)
void SpreadLightUnits(const int32_t* units, int32_t count, const std::vector<Pending>& pending,
                      const std::vector<WorkItem>& items, bool spread, std::vector<int32_t>* heavy,
                      std::vector<int32_t>* light, std::vector<int32_t>* order) {
  heavy->clear();
  light->clear();
  order->clear();
  for (int32_t i = 0; i < count; ++i) {
    const Pending& unit = pending[units[i]];
    if (unit.count > 1) continue;
    const bool is_light = spread && items[unit.items[0]].row_count <= kLightRows;
    (is_light ? light : heavy)->push_back(units[i]);
  }
  if (heavy->empty() || light->empty()) {
    order->insert(order->end(), heavy->begin(), heavy->end());
    order->insert(order->end(), light->begin(), light->end());
    return;
  }
  const WorkItem& first = items[pending[heavy->front()].items[0]];
  const uint32_t hash = static_cast<uint32_t>(first.segment) * 0x9E3779B1u ^
                        static_cast<uint32_t>(first.kv_head) * 0x85EBCA77u ^
                        static_cast<uint32_t>(first.chunk) * 0xC2B2AE3Du;
  const bool light_first = (hash >> 31) != 0;
  if (light_first) order->insert(order->end(), light->begin(), light->end());
  order->push_back(heavy->front());
  if (!light_first) order->insert(order->end(), light->begin(), light->end());
  order->insert(order->end(), heavy->begin() + 1, heavy->end());
}

// What a plan's segments add up to for the light-CTA split: heavy tiles and
// items, light items, their KV bytes and their chains on a light warp.
struct LightLoad {
  double heavy_tiles = 0.0, heavy_items = 0.0;
  double light_items = 0.0, light_tiles = 0.0, light_bytes = 0.0, light_chains = 0.0;
  // The heavy segment with the most tiles: its row blocks x KV heads, length.
  int32_t dominant = -1;
  double dominant_blocks = 0.0, dominant_tiles = 0.0;
  int32_t dominant_length = 0;
};

// Tokens per split-K chunk when a segment of `length` tokens is cut into
// about `wanted` chunks: whole KV tiles, at least the device's min_chunk.
int32_t ChunkLength(int32_t length, int32_t wanted, const DeviceModel& device) {
  const int32_t min_chunk = std::max(kKvTile, CeilDiv(device.min_chunk, kKvTile) * kKvTile);
  return std::max(min_chunk, CeilDiv(CeilDiv(length, std::max(1, wanted)), kKvTile) * kKvTile);
}

// The chunk counts a dominant segment of `length` tokens can have (each
// count's chunks of whole tiles, at most `max_chunk` tokens: LightRates'
// max_dominant_chunk), with their tiles per chunk.
struct ChunkChoice {
  int32_t chunks, tiles;
};
std::vector<ChunkChoice> DominantChunkChoices(int32_t length, int32_t max_chunk, const DeviceModel& device) {
  std::vector<ChunkChoice> out;
  for (int32_t wanted = 1; wanted <= 64; ++wanted) {
    const int32_t len = ChunkLength(length, wanted, device);
    if (CeilDiv(length, len) == wanted && len <= max_chunk) out.push_back({wanted, len / kKvTile});
  }
  return out;
}

// The heavy side's time on `heavy_ctas` CTAs of a split kernel. When one
// segment holds (nearly) all heavy tiles, its items are equal and a CTA runs
// a whole number of them, so the time is counted in whole items: the chunk
// count (*chunks) that ends first, each item paying item_gap_us; a chunk
// count that spreads items unevenly (3 on some CTAs, 2 on others) loses a
// whole item on the CTAs that end last (H100: 46.0 us with 2.5 8-tile items
// per CTA vs 42.5 with 2 of 11 tiles on the engine row, session 9). Else
// (*chunks 0: the planner's own) tiles and items spread evenly.
// `choices`: DominantChunkChoices of the dominant segment.
double HeavySideUs(const LightLoad& load, const DeviceModel& device, const std::vector<ChunkChoice>& choices,
                   double tile_us, double item_gap_us, int32_t heavy_ctas, int32_t* chunks) {
  *chunks = 0;
  const double spread = (load.heavy_tiles * tile_us + load.heavy_items * device.item_overhead_us) / heavy_ctas;
  if (load.dominant < 0 || load.dominant_tiles < 0.9 * load.heavy_tiles || choices.empty()) return spread;
  const double rest = (load.heavy_tiles - load.dominant_tiles) * tile_us / heavy_ctas;
  double best = std::numeric_limits<double>::infinity();
  for (const ChunkChoice& c : choices) {
    const double per_cta = std::ceil(load.dominant_blocks * c.chunks / heavy_ctas);
    const double us = per_cta * (c.tiles * tile_us + item_gap_us) + rest;
    if (us < best) {
      best = us;
      *chunks = c.chunks;
    }
  }
  return best;
}

// The light split's rates at a head dim (DeviceModel): light warps per CTA,
// a light warp's KV read rate and its time per light item (besides
// light_tile_us per tile), a heavy tile's time, a heavy CTA's cost per item,
// what a light item costs a CTA that runs it among heavy items, the cap on
// all light reads together (none at kLightHeadDim, whose rates were fitted
// without it), and the longest dominant chunk the split considers.
struct LightRates {
  double warps, warp_bytes_per_us, light_item_us, tile_us, item_gap_us, mixed_item_us, hbm_bytes_per_us;
  int32_t max_dominant_chunk;
};
LightRates LightRatesFor(const DeviceModel& d, int32_t head_dim) {
  if (head_dim == kLightHeadDim) {
    return {.warps = kLightCtaWarps,
            .warp_bytes_per_us = d.light_warp_bytes_per_us,
            .light_item_us = d.light_item_us,
            .tile_us = d.tma_tile_us,
            .item_gap_us = d.tma_item_gap_us,
            .mixed_item_us = d.tma_light_item_us,
            .hbm_bytes_per_us = std::numeric_limits<double>::infinity(),
            .max_dominant_chunk = d.max_dominant_chunk};
  }
  return {.warps = static_cast<double>(LightCtaWarps(head_dim)),
          .warp_bytes_per_us = d.light_warp_d128_bytes_per_us,
          .light_item_us = d.light_item_d128_us,
          .tile_us = d.tma_tile_d128_us,
          .item_gap_us = d.tma_item_gap_d128_us,
          .mixed_item_us = d.tma_light_item_d128_us,
          .hbm_bytes_per_us = d.light_hbm_bytes_per_us,
          .max_dominant_chunk = d.max_dominant_chunk_d128};
}

// How many of `ctas` CTAs take the light items (WorkShape::light_ctas): the
// forced count, or the model's (`rates`: LightRatesFor the shape's head
// dim): the count whose slower side ends first, the heavy side's
// tiles and items over its CTAs, the light side bound by bytes per light
// warp and in all, or by its items' chains over the light warps; none unless
// that beats the unsplit kernel (everything spread over every CTA) by
// light_min_gain, and none without heavy work (light items alone run better
// on every CTA's rings).
// *dominant_chunks: the chunk count of the dominant heavy segment that count
// was judged with (HeavySideUs; 0: the planner's own).
int32_t LightCtaCount(const LightLoad& load, const WorkShape& shape, const LightRates& rates, const DeviceModel& device,
                      int32_t ctas, int32_t* dominant_chunks) {
  *dominant_chunks = 0;
  if (load.light_items == 0.0 || load.heavy_tiles == 0.0 || ctas < 2) return 0;
  const std::vector<ChunkChoice> choices =
      load.dominant >= 0 ? DominantChunkChoices(load.dominant_length, rates.max_dominant_chunk, device)
                         : std::vector<ChunkChoice>{};
  if (shape.light_ctas > 0) {
    const int32_t k = std::min(shape.light_ctas, ctas - 1);
    HeavySideUs(load, device, choices, rates.tile_us, rates.item_gap_us, ctas - k, dominant_chunks);
    return k;
  }
  // At head dim 128 only for light items of one KV tile each (suffixes of at
  // most 64 tokens): with longer ones the H100 ran every shape of the sweep
  // slower split (h32/8 L256 P16384 S512 300 us vs 253, h8/1 3lvl 85 vs 76;
  // RESULTS session 26), while the unsplit kernel overlaps their reads with
  // its tensor-core work better than this model counts.
  if (shape.head_dim != kLightHeadDim && load.light_tiles > load.light_items) return 0;
  const double heavy = load.heavy_tiles * rates.tile_us + load.heavy_items * device.item_overhead_us;
  const double all_light = load.light_bytes / rates.hbm_bytes_per_us;  // on any number of CTAs
  const double unsplit =
      heavy / ctas + std::max(load.light_tiles * rates.mixed_item_us / ctas, all_light) + device.tma_start_us;
  // Of counts that end within 1% of each other (the heavy side counted in
  // whole items is flat over a range of counts), the one with the most
  // slack on the light side.
  int32_t best = 0;
  double best_us = unsplit / device.light_min_gain, best_light = std::numeric_limits<double>::infinity();
  for (int32_t k = 1; k < ctas; ++k) {
    const double warps = k * rates.warps;
    const double light_us =
        std::max({load.light_bytes / (warps * rates.warp_bytes_per_us), load.light_chains / warps, all_light});
    int32_t chunks = 0;
    const double us =
        std::max(HeavySideUs(load, device, choices, rates.tile_us, rates.item_gap_us, ctas - k, &chunks), light_us) +
        device.tma_start_us;
    if (us < best_us * 0.99 || (us <= best_us * 1.01 && best > 0 && light_us < best_light)) {
      best_us = std::min(us, best_us);
      best_light = light_us;
      best = k;
      *dominant_chunks = chunks;
    }
  }
  return best;
}

}  // namespace

void AssignPartialSlots(const AttentionPlan& plan, WorkPlan* work) {
  WorkPlan& out = *work;
  out.num_partials = 0;
  out.row_slot_indptr.assign(static_cast<size_t>(plan.num_queries) + 1, 0);
  for (int32_t q = 0; q < plan.num_queries; ++q) {
    for (int32_t i = plan.query_entry_indptr[q]; i < plan.query_entry_indptr[q + 1]; ++i) {
      const int32_t e = plan.query_entries[i];
      out.entry_partial_base[e] = out.num_partials;
      out.num_partials += out.entry_num_chunks[e];
    }
    out.row_slot_indptr[q + 1] = out.num_partials;
  }
}

namespace {

// A stream-K plan beats the placed one only by this factor (the model is rough).
inline constexpr double kStreamKMinGain = 1.1;
// A one-wave placement must give this share of the CTAs a piece, and cut
// every run at least in two (H100, long_decode_bench run189: 16 sequences of
// 32K tokens x 8 KV heads as 128 whole runs, one per CTA, ran 753 us against
// 707-709 us as 256 chunks or the stream-K cut).
inline constexpr double kOneWaveMinFill = 0.85;
inline constexpr int32_t kOneWaveMinPieces = 2;
// Stream-K is tried for plans of at most this many runs per CTA (many short
// runs balance under LPT already, and cutting them costs host time) ...
inline constexpr int32_t kStreamKMaxRunsPerCta = 4;
// ... and at least this many KV tiles per CTA: shorter plans keep the split's
// minimum chunk (kMinChunk, measured on the small shapes).
inline constexpr int32_t kStreamKMinTilesPerCta = 16;

}  // namespace

double ItemCostUs(ItemKind kind, int32_t rows, int32_t tokens, const WorkShape& shape, const DeviceModel& device) {
  const ItemTimes t = ItemTimesUs(kind, rows, tokens, shape, device);
  return std::max(t.bytes_us, t.flops_us) + device.item_overhead_us;
}

ItemTimes ItemTimesUs(ItemKind kind, int32_t rows, int32_t tokens, const WorkShape& shape, const DeviceModel& device) {
  const double ctas = device.num_ctas();
  const double kv_bytes = 2.0 * tokens * shape.head_dim * shape.kv_dtype_bytes;
  const double out_bytes = 4.0 * rows * (shape.head_dim + 1);
  const double bytes_us = (kv_bytes + out_bytes) / (device.hbm_bytes_per_us / ctas);
  double flops_us;
  if (kind == ItemKind::kBatched) {
    const double padded_rows = 16.0 * CeilDiv(rows, 16);
    flops_us = 4.0 * padded_rows * tokens * shape.head_dim / (device.mma_flops_per_us / ctas);
  } else {
    flops_us = 4.0 * rows * tokens * shape.head_dim / (device.simt_flops_per_us / ctas);
  }
  return {bytes_us, flops_us};
}

// Buffers that live from one Build to the next (their capacity is what is reused).
struct WorkPlanner::Scratch {
  std::vector<Mode> mode;
  std::vector<double> per_token_cost;
  std::vector<WorkItem> emitted;
  std::vector<double> emitted_cost;
  std::vector<RowBlock> blocks;
  std::vector<int32_t> block_limit;
  std::vector<double> chunk_cost;
  std::vector<Pending> pending;
  std::vector<int32_t> small;
  std::vector<int32_t> index;
  std::vector<int32_t> cta_of;
  std::vector<int32_t> cta_units_indptr;
  std::vector<int32_t> cta_units;
  std::vector<int32_t> fill;
  std::vector<int32_t> heavy, light, order;
  std::vector<int32_t> entry_delta;
  std::vector<char> light_segment;
  // TryStreamK's
  std::vector<StreamKRun> runs;
  std::vector<WorkItem> run_item;
  std::vector<StreamKPiece> pieces, filled_pieces;
  std::vector<int32_t> run_pieces, stream_chunks;
};

WorkPlanner::WorkPlanner() : scratch_(std::make_unique<Scratch>()) {}
WorkPlanner::~WorkPlanner() = default;
WorkPlanner::WorkPlanner(WorkPlanner&&) noexcept = default;
WorkPlanner& WorkPlanner::operator=(WorkPlanner&&) noexcept = default;

WorkPlan BuildWorkPlan(const AttentionPlan& plan, const WorkShape& shape, const DeviceModel& device,
                       PathChoice choice) {
  WorkPlanner planner;
  planner.set_refresh(false);
  return planner.Plan(plan, shape, device, choice);
}

void WorkPlanner::Build(const AttentionPlan& plan, const WorkShape& shape, const DeviceModel& device,
                        PathChoice choice) {
  Scratch& x = *scratch_;
  WorkPlan& out = plan_;
  out.fused_merge = false;
  out.num_partials = 0;
  out.batched_segments = 0;
  out.flattened_segments = 0;
  out.estimated_us = 0.0;
  const int32_t group = shape.group();
  const int32_t segments = plan.num_segments();
  const bool tensor_cores = shape.kv_dtype_bytes == 2 && choice != PathChoice::kFlattened;
  // The per-sequence alternative: tensor-core tiles per entry, or SIMT items.
  const Mode alone = tensor_cores ? Mode::kPerEntry : Mode::kSimt;
  // 0. Whether small items will be grouped: at least kGroupMinPerCta small
  //    (<= kGroupRows rows, one KV tile) batched items per CTA.
  bool will_group = false;
  if (shape.group_small >= 2 && tensor_cores) {
    int64_t small_items = 0;
    for (int32_t s = 0; s < segments; ++s) {
      if (plan.segment_length[s] > kKvTile) continue;
      const int32_t entries = plan.segment_entry_indptr[s + 1] - plan.segment_entry_indptr[s];
      ForEachRowBlock(Mode::kShared, entries, group, shape.tile_rows, [&](const RowBlock& b) {
        if (b.row_count <= kGroupRows) small_items += shape.num_kv_heads;
      });
    }
    will_group = small_items >= int64_t{kGroupMinPerCta} * device.num_ctas();
  }
  // 1. Mode per segment, and the whole-segment cost of that mode.
  std::vector<Mode>& mode = x.mode;
  mode.assign(segments, Mode::kShared);
  std::vector<double>& per_token_cost = x.per_token_cost;  // all of the segment's row blocks, per token
  per_token_cost.assign(segments, 0.0);
  // Light segments: one entry's heads in blocks of at most kLightItemRows
  // rows (their items are light items, IsLightItem).
  std::vector<char>& light_segment = x.light_segment;
  light_segment.assign(segments, 0);
  LightLoad load;
  const LightRates light_rates = LightRatesFor(device, shape.head_dim);
  double heavy_cost = 0.0, light_cost = 0.0;  // the model's, of each kind of segment
  for (int32_t s = 0; s < segments; ++s) {
    const int32_t entries = plan.segment_entry_indptr[s + 1] - plan.segment_entry_indptr[s];
    const int32_t length = plan.segment_length[s];
    // Small items run in groups (below): one item overhead per group.
    const double grouped_overhead = will_group ? device.item_overhead_us * (1.0 - 1.0 / shape.group_small) : 0.0;
    auto cost = [&](Mode m) {
      double c = 0.0;
      ForEachRowBlock(m, entries, group, shape.tile_rows, [&](const RowBlock& b) {
        c += ItemCostUs(KindOf(m), b.row_count, length, shape, device);
        if (m != Mode::kSimt && b.row_count <= kGroupRows && length <= kKvTile) c -= grouped_overhead;
      });
      return c * shape.num_kv_heads;
    };
    const double flat = cost(alone);
    const double batched = tensor_cores ? cost(Mode::kShared) : flat + 1.0;
    const bool shared = tensor_cores && (choice == PathChoice::kBatched || (choice == PathChoice::kAuto && batched <= flat));
    mode[s] = shared ? Mode::kShared : alone;
    const double chosen = shared ? batched : flat;
    per_token_cost[s] = chosen / length;
    (shared ? out.batched_segments : out.flattened_segments)++;
    light_segment[s] = mode[s] != Mode::kSimt && group <= kLightItemRows && (!shared || entries == 1);
    (light_segment[s] ? light_cost : heavy_cost) += chosen;
    if (!light_segment[s]) {
      // Its tiles, and its items counted as if chunked by 1,024 tokens (the split's model only).
      const double blocks = RowBlockCount(mode[s], entries, group, shape.tile_rows) * shape.num_kv_heads;
      const double tiles = blocks * CeilDiv(length, kKvTile);
      load.heavy_tiles += tiles;
      load.heavy_items += blocks * CeilDiv(length, 1024);
      if (tiles > load.dominant_tiles) {
        load.dominant = s;
        load.dominant_blocks = blocks;
        load.dominant_tiles = tiles;
        load.dominant_length = length;
      }
      continue;
    }
    for (int32_t e = plan.segment_entry_indptr[s]; e < plan.segment_entry_indptr[s + 1]; ++e) {
      const int32_t seen = plan.entry_kv_limit[e];
      load.light_items += shape.num_kv_heads;
      load.light_tiles += CeilDiv(seen, kKvTile) * shape.num_kv_heads;
      load.light_bytes += 2.0 * seen * shape.head_dim * shape.kv_dtype_bytes * shape.num_kv_heads;
      load.light_chains +=
          (light_rates.light_item_us + device.light_tile_us * CeilDiv(seen, kKvTile)) * shape.num_kv_heads;
    }
  }
  // 1b. Light CTAs (WorkShape::light_ctas): the last `light` CTAs take the
  //     light items, the others the rest.
  const int32_t ctas = device.num_ctas();
  int32_t dominant_chunks = 0;
  const bool light_dim = shape.head_dim == kLightHeadDim || shape.head_dim == 128;
  const int32_t light =
      shape.light_ctas != 0 && light_dim ? LightCtaCount(load, shape, light_rates, device, ctas, &dominant_chunks) : 0;
  if (light > 0 && shape.light_chunks > 0) dominant_chunks = shape.light_chunks;
  out.light_cta_begin = ctas - light;
  // 2. Chunks: every item costs about total / CTAs (one per CTA; the short
  //    items fill in behind the long ones), chunks of whole KV tiles; with
  //    light CTAs, light segments' items about their total / (2 x light CTAs),
  //    the others' their total / (2 x the other CTAs) or, for a dominant heavy
  //    segment, the chunk count the split was judged with. (Over the H100
  //    sweep, session 9, total / CTAs took 0.79-1.02x the time of total / (2 x
  //    CTAs): the extra items cost more than their finer balance gave.)
  const double target = std::max((heavy_cost + light_cost) / ctas, 1e-9);
  const double heavy_target = light > 0 ? std::max(heavy_cost / (2.0 * (ctas - light)), 1e-9) : target;
  const double light_target = light > 0 ? std::max(light_cost / (2.0 * light), 1e-9) : target;
  out.entry_partial_base.assign(plan.num_entries(), 0);
  out.entry_num_chunks.assign(plan.num_entries(), 0);
  out.entry_segment.assign(plan.num_entries(), 0);
  std::vector<WorkItem>& emitted = x.emitted;
  std::vector<double>& emitted_cost = x.emitted_cost;
  // Per segment: its row blocks; per row block the largest kv limit of its
  // rows (no row sees past it) and its item's cost in the current chunk (any KV head).
  std::vector<RowBlock>& blocks = x.blocks;
  std::vector<int32_t>& block_limit = x.block_limit;
  std::vector<double>& chunk_cost = x.chunk_cost;
  emitted.clear();
  emitted_cost.clear();
  chunk_len_.assign(segments, 0);
  chunks_.assign(segments, 0);
  for (int32_t s = 0; s < segments; ++s) {
    const int32_t entry_begin = plan.segment_entry_indptr[s];
    const int32_t entries = plan.segment_entry_indptr[s + 1] - entry_begin;
    const int32_t length = plan.segment_length[s];
    blocks.clear();
    ForEachRowBlock(mode[s], entries, group, shape.tile_rows, [&](const RowBlock& b) { blocks.push_back(b); });
    const double block_cost = per_token_cost[s] * length / (blocks.size() * shape.num_kv_heads);
    const double seg_target = light_segment[s] ? light_target : heavy_target;
    // (With light CTAs, the dominant heavy segment takes the chunk count the
    // split was judged with: whole items per heavy CTA.)
    const int32_t wanted = light > 0 && s == load.dominant && dominant_chunks > 0
                               ? dominant_chunks
                               : std::max(1, static_cast<int32_t>(std::ceil(block_cost / seg_target)));
    const int32_t len = ChunkLength(length, wanted, device);
    const int32_t chunks = CeilDiv(length, len);
    chunk_len_[s] = len;
    chunks_[s] = chunks;
    for (int32_t e = entry_begin; e < entry_begin + entries; ++e) {
      out.entry_num_chunks[e] = chunks;
      out.entry_segment[e] = s;
    }
    block_limit.resize(blocks.size());
    for (size_t b = 0; b < blocks.size(); ++b) block_limit[b] = RowBlockLimit(plan, entry_begin, blocks[b], group);
    const int32_t kind = static_cast<int32_t>(KindOf(mode[s]));
    chunk_cost.resize(blocks.size());
    for (int32_t c = 0; c < chunks; ++c) {
      const int32_t begin = c * len;
      const int32_t end = std::min(length, begin + len);
      for (size_t b = 0; b < blocks.size(); ++b) {
        const int32_t seen_end = std::max(begin, std::min(end, block_limit[b]));
        chunk_cost[b] = ItemCostUs(KindOf(mode[s]), blocks[b].row_count, seen_end - begin, shape, device);
      }
      for (int32_t h = 0; h < shape.num_kv_heads; ++h) {
        for (size_t b = 0; b < blocks.size(); ++b) {
          const int32_t seen_end = std::max(begin, std::min(end, block_limit[b]));
          emitted.push_back(WorkItem{s, blocks[b].row_begin, blocks[b].row_count, h, begin, seen_end, c, kind,
                                     plan.segment_page_indptr[s], plan.segment_first_slot[s], entry_begin, 0});
          emitted_cost.push_back(chunk_cost[b]);
        }
      }
    }
  }
  AssignPartialSlots(plan, &out);
  // 3. Units of work: one item, or a group of small items (group_small). A
  //    group costs one item overhead plus its items' own work.
  std::vector<Pending>& pending = x.pending;
  pending.clear();
  pending.reserve(emitted.size());
  std::vector<int32_t>& small = x.small;
  small.clear();
  std::vector<int32_t>& index = x.index;  // index[i] == i: what a single item's unit points at
  index.resize(emitted.size());
  std::iota(index.begin(), index.end(), 0);
  for (size_t i = 0; i < emitted.size(); ++i) {
    const WorkItem& it = emitted[i];
    const bool is_small = will_group && it.kind == static_cast<int32_t>(ItemKind::kBatched) &&
                          it.row_count <= kGroupRows && it.kv_end > it.kv_begin && it.kv_end - it.kv_begin <= kKvTile;
    if (is_small) {
      small.push_back(static_cast<int32_t>(i));
    } else {
      pending.push_back({emitted_cost[i], &index[i], 1});
    }
  }
  // Groups only where each CTA would otherwise run many small items
  // (kGroupMinPerCta): on the H100 a group of four 4-row items ran faster
  // than four chained items there (h32/8, 256-1024 leaves, 64-token
  // suffixes: 12-23%), slower with fewer (PERF_NOTES.md, run S3-2).
  const int32_t group_size = static_cast<int64_t>(small.size()) >= int64_t{kGroupMinPerCta} * ctas ? shape.group_small : 1;
  for (size_t g = 0; g < small.size(); g += group_size) {
    if (group_size < 2) {
      pending.push_back({emitted_cost[small[g]], &small[g], 1});
      continue;
    }
    const size_t end = std::min(small.size(), g + group_size);
    Pending unit{device.item_overhead_us, &small[g], static_cast<int32_t>(end - g)};
    for (size_t i = g; i < end; ++i) unit.cost += emitted_cost[small[i]] - device.item_overhead_us;
    pending.push_back(unit);
  }
  // 4. Longest processing time first onto the least loaded CTA. Ties keep the
  //    emission order, so equal tiles of one KV chunk run side by side (L2
  //    reuse). With light CTAs, light units onto the last `light` CTAs and
  //    the others onto the rest.
  std::stable_sort(pending.begin(), pending.end(), [](const Pending& a, const Pending& b) { return a.cost > b.cost; });
  std::vector<int32_t>& cta_of = x.cta_of;
  cta_of.resize(pending.size());
  std::vector<int32_t>& cta_units_indptr = x.cta_units_indptr;
  cta_units_indptr.assign(static_cast<size_t>(ctas) + 1, 0);
  LeastLoaded heavy_loads(std::max(1, ctas - light)), light_loads(std::max(1, light));
  for (size_t u = 0; u < pending.size(); ++u) {
    const bool is_light = light > 0 && pending[u].count == 1 && IsLightItem(emitted[pending[u].items[0]], group);
    LeastLoaded& loads = is_light ? light_loads : heavy_loads;
    cta_of[u] = loads.least() + (is_light ? ctas - light : 0);
    ++cta_units_indptr[cta_of[u] + 1];
    out.estimated_us = std::max(out.estimated_us, loads.AddToLeast(pending[u].cost));
  }
  // Each CTA's units in LPT order (a stable counting sort by CTA).
  for (int32_t c = 0; c < ctas; ++c) cta_units_indptr[c + 1] += cta_units_indptr[c];
  std::vector<int32_t>& cta_units = x.cta_units;
  cta_units.resize(pending.size());
  x.fill.assign(cta_units_indptr.begin(), cta_units_indptr.end() - 1);
  for (size_t u = 0; u < pending.size(); ++u) cta_units[x.fill[cta_of[u]]++] = static_cast<int32_t>(u);
  // Each CTA's single items (chained KV pipelines), then its groups.
  out.items.clear();
  out.items.reserve(emitted.size());
  out.cta_item_indptr.assign(1, 0);
  for (int32_t c = 0; c < ctas; ++c) {
    auto emit = [&](const Pending& unit, bool group) {
      for (int32_t i = 0; i < unit.count; ++i) {
        WorkItem item = emitted[unit.items[i]];
        item.group = group && i == 0 ? unit.count : 0;
        out.items.push_back(item);
      }
    };
    const int32_t* units = cta_units.data() + cta_units_indptr[c];
    const int32_t count = cta_units_indptr[c + 1] - cta_units_indptr[c];
    SpreadLightUnits(units, count, pending, emitted, shape.spread_light, &x.heavy, &x.light, &x.order);
    for (int32_t u : x.order) emit(pending[u], false);
    for (int32_t i = 0; i < count; ++i) {
      if (pending[units[i]].count > 1) emit(pending[units[i]], true);
    }
    out.cta_item_indptr.push_back(static_cast<int32_t>(out.items.size()));
  }
  out.placement = Placement::kChunks;
  if (shape.stream_k != StreamKMode::kOff && light == 0 && !will_group) TryStreamK(plan, shape, device, &out);
  FillItemEntries(plan, group, &out);
  FillCtaHeads(plan, group, ctas, &out);
  // 5. Completion counts for the fused merge: one per (item, entry touched).
  //    An item touches a run of entries: count per entry by differences
  //    (O(items + entries)), then add each entry's count to its row.
  std::vector<int32_t>& entry_delta = x.entry_delta;
  entry_delta.assign(static_cast<size_t>(plan.num_entries()) + 1, 0);
  for (const WorkItem& it : out.items) {
    ++entry_delta[ItemFirstEntry(it, group)];
    --entry_delta[ItemLastEntry(it, group) + 1];
  }
  out.query_items.assign(plan.num_queries, 0);
  int32_t touching = 0;
  for (int32_t e = 0; e < plan.num_entries(); ++e) {
    touching += entry_delta[e];
    out.query_items[plan.entry_query[e]] += touching;
  }
  out.fused_merge = std::all_of(out.query_items.begin(), out.query_items.end(), [](int32_t n) { return n > 0; });
}

void WorkPlanner::TryStreamK(const AttentionPlan& plan, const WorkShape& shape, const DeviceModel& device,
                             WorkPlan* work) {
  Scratch& x = *scratch_;
  WorkPlan& out = *work;
  const int32_t group = shape.group();
  const int32_t ctas = device.num_ctas();
  const int32_t segments = plan.num_segments();
  if (ctas < 2) return;
  // Runs: per segment, KV head and row block, in that order (the blocks of a
  // KV head read the same KV: neighbours on the cost line run side by side).
  // An entry's rows must lie in one row block's runs (its chunk count is
  // theirs): shared tiles must not cut an entry's heads.
  // First, from the segments alone: few enough runs, enough tiles at most
  // (a run's tiles are at most its segment's), no entry cut by shared tiles.
  int64_t run_count = 0, tile_bound = 0;
  for (int32_t s = 0; s < segments; ++s) {
    const int32_t entries = plan.segment_entry_indptr[s + 1] - plan.segment_entry_indptr[s];
    const Mode m = x.mode[s];
    if (m == Mode::kShared && entries * group > shape.tile_rows && shape.tile_rows % group != 0) return;
    const int64_t seg_runs = int64_t{RowBlockCount(m, entries, group, shape.tile_rows)} * shape.num_kv_heads;
    run_count += seg_runs;
    tile_bound += seg_runs * CeilDiv(plan.segment_length[s], kKvTile);
    if (run_count > int64_t{kStreamKMaxRunsPerCta} * ctas) return;
  }
  if (tile_bound < int64_t{kStreamKMinTilesPerCta} * ctas) return;
  std::vector<StreamKRun>& runs = x.runs;
  std::vector<WorkItem>& run_item = x.run_item;
  runs.clear();
  run_item.clear();
  bool memory_bound = true;
  for (int32_t s = 0; s < segments; ++s) {
    const int32_t entry_begin = plan.segment_entry_indptr[s];
    const int32_t entries = plan.segment_entry_indptr[s + 1] - entry_begin;
    const Mode m = x.mode[s];
    const int32_t kind = static_cast<int32_t>(KindOf(m));
    for (int32_t h = 0; h < shape.num_kv_heads; ++h) {
      ForEachRowBlock(m, entries, group, shape.tile_rows, [&](const RowBlock& b) {
        const int32_t limit = std::min(RowBlockLimit(plan, entry_begin, b, group), plan.segment_length[s]);
        const ItemTimes t = ItemTimesUs(KindOf(m), b.row_count, kKvTile, shape, device);
        memory_bound = memory_bound && t.bytes_us >= t.flops_us;
        const double tile_cost = std::max(t.bytes_us, t.flops_us);
        runs.push_back({CeilDiv(limit, kKvTile), std::max(tile_cost, 1e-9)});
        run_item.push_back(WorkItem{s, b.row_begin, b.row_count, h, 0, limit, 0, kind, plan.segment_page_indptr[s],
                                    plan.segment_first_slot[s], entry_begin, 0});
      });
    }
  }
  int64_t tiles = 0;
  for (const StreamKRun& r : runs) tiles += r.tiles;
  if (tiles < int64_t{kStreamKMinTilesPerCta} * ctas) return;
  std::vector<StreamKPiece>& pieces = x.pieces;
  const int32_t per_run = ctas / static_cast<int32_t>(runs.size());
  const bool one_wave = shape.stream_k == StreamKMode::kAuto && memory_bound && per_run >= kOneWaveMinPieces &&
                        static_cast<double>(per_run) * runs.size() >= kOneWaveMinFill * ctas;
  if (one_wave) {
    CutOneWave(runs, per_run, &pieces, &x.run_pieces);
  } else {
    CutStreamK(runs, ctas, &pieces, &x.run_pieces);
  }
  // Chunk counts: every entry as many as the most pieces of a run it is in;
  // runs with fewer get empty pieces (each writes its empty slot) on the CTA
  // of their last piece.
  std::vector<int32_t>& chunks = x.stream_chunks;
  chunks.assign(plan.num_entries(), 0);
  auto entries_of = [&](const WorkItem& it, auto&& f) {
    for (int32_t e = ItemFirstEntry(it, group); e <= ItemLastEntry(it, group); ++e) f(e);
  };
  for (size_t r = 0; r < runs.size(); ++r) {
    entries_of(run_item[r], [&](int32_t e) { chunks[e] = std::max(chunks[e], x.run_pieces[r]); });
  }
  std::vector<StreamKPiece>& filled = x.filled_pieces;
  filled.clear();
  for (size_t i = 0; i < pieces.size(); ++i) {
    filled.push_back(pieces[i]);
    const StreamKPiece& p = pieces[i];
    if (p.chunk + 1 != x.run_pieces[p.run]) continue;  // not the run's last piece
    const int32_t want = chunks[ItemFirstEntry(run_item[p.run], group)];
    for (int32_t c = p.chunk + 1; c < want; ++c) filled.push_back({p.run, p.cta, p.tile_end, p.tile_end, c});
  }
  const double makespan = StreamKMakespan(runs, filled, ctas, device.item_overhead_us);
  if (!one_wave && shape.stream_k == StreamKMode::kAuto && makespan * kStreamKMinGain >= out.estimated_us) return;
  // Take it: items by CTA (the pieces are in CTA order), chunk counts, slots.
  out.placement = one_wave ? Placement::kOneWave : Placement::kStreamK;
  out.estimated_us = makespan;
  out.items.clear();
  out.cta_item_indptr.assign(static_cast<size_t>(ctas) + 1, 0);
  for (const StreamKPiece& p : filled) {
    WorkItem it = run_item[p.run];
    const int32_t limit = it.kv_end;
    it.kv_begin = std::min(limit, p.tile_begin * kKvTile);
    it.kv_end = std::min(limit, p.tile_end * kKvTile);
    it.chunk = p.chunk;
    out.items.push_back(it);
    ++out.cta_item_indptr[p.cta + 1];
  }
  for (int32_t c = 0; c < ctas; ++c) out.cta_item_indptr[c + 1] += out.cta_item_indptr[c];
  for (int32_t e = 0; e < plan.num_entries(); ++e) out.entry_num_chunks[e] = chunks[e];
  AssignPartialSlots(plan, &out);
}

void WorkPlanner::FillItemEntries(const AttentionPlan& plan, int32_t group, WorkPlan* work) {
  WorkPlan& out = *work;
  out.item_entry.assign(out.items.size() * 4, 0);
  for (size_t i = 0; i < out.items.size(); ++i) {
    const WorkItem& it = out.items[i];
    const int32_t e0 = ItemFirstEntry(it, group);
    const int32_t e_last = ItemLastEntry(it, group);
    out.item_entry[4 * i] = plan.entry_query[e0];
    out.item_entry[4 * i + 1] = plan.entry_kv_limit[e0];
    out.item_entry[4 * i + 2] = out.entry_partial_base[e0];
    out.item_entry[4 * i + 3] = e0 == e_last ? 1 : 0;
  }
}

void WorkPlanner::FillCtaHeads(const AttentionPlan& plan, int32_t group, int32_t ctas, WorkPlan* work) {
  WorkPlan& out = *work;
  out.cta_head.assign(static_cast<size_t>(ctas) * kHeadStride, 0);
  for (int32_t c = 0; c < ctas; ++c) {
    int32_t* head = out.cta_head.data() + static_cast<size_t>(c) * kHeadStride;
    head[12] = out.cta_item_indptr[c];
    head[13] = out.cta_item_indptr[c + 1];
    if (head[12] == head[13]) continue;
    const WorkItem& it = out.items[head[12]];
    static_assert(sizeof(WorkItem) == 12 * sizeof(int32_t));
    std::memcpy(head, &it, sizeof(WorkItem));
    // Page ids of the item's first tiles, as many whole tiles as fit.
    const int32_t ps = plan.page_size;
    const int32_t seg_pages = plan.segment_page_indptr[it.segment + 1] - it.page_begin;
    const int32_t page_base = (it.first_slot + it.kv_begin) / ps;
    head[14] = page_base;
    for (int32_t i = 0; i < kHeadPages && page_base + i < seg_pages; ++i) {
      head[kHeadPagesAt + i] = plan.page_indices[it.page_begin + page_base + i];
    }
    int32_t tiles = 0;
    for (int32_t t0 = it.kv_begin; t0 < it.kv_end; t0 += kKvTile, ++tiles) {
      const int32_t last = std::min(it.kv_end, t0 + kKvTile) - 1;
      if ((it.first_slot + last) / ps - page_base >= kHeadPages) break;
    }
    head[15] = tiles;
    const int32_t e0 = ItemFirstEntry(it, group);
    const int32_t e_end = ItemLastEntry(it, group) + 1;
    for (int32_t e = e0; e < e_end && e - e0 < kHeadQrows; ++e) head[kHeadQrowsAt + e - e0] = plan.entry_query[e];
  }
}

namespace {

// The 64-position tiles a batched item's loads cover, as the TMA kernel reads
// them (kernels/params.cuh TmaTiles): pool positions first_slot + token, from
// the 64-aligned tile holding the first token. Empty items have none.
struct PoolTiles {
  int32_t pos_begin, pos_end, base0, count;
  explicit PoolTiles(const WorkItem& it)
      : pos_begin(it.first_slot + it.kv_begin),
        pos_end(it.first_slot + it.kv_end),
        base0(pos_begin & ~(kKvTile - 1)),
        count(pos_end > pos_begin ? CeilDiv(pos_end - base0, kKvTile) : 0) {}
};

bool IsBatched(const WorkItem& it) { return it.kind == static_cast<int32_t>(ItemKind::kBatched); }

}  // namespace

double BatchedTilesPerCta(const WorkPlan& work) {
  const size_t ctas = work.cta_item_indptr.empty() ? 0 : work.cta_item_indptr.size() - 1;
  if (ctas == 0) return 0.0;
  int64_t tiles = 0;
  for (const WorkItem& it : work.items) {
    if (IsBatched(it)) tiles += PoolTiles(it).count;
  }
  return static_cast<double>(tiles) / static_cast<double>(ctas);
}

double ConsecutivePageTileShare(const AttentionPlan& plan, const WorkPlan& work) {
  const int32_t ps = plan.page_size;
  if (ps >= kKvTile) return 1.0;
  int64_t tiles = 0, consecutive = 0;  // weighted by rows
  for (const WorkItem& it : work.items) {
    if (!IsBatched(it) || it.kv_head != 0) continue;
    const int32_t* pages = plan.page_indices.data() + it.page_begin;
    const PoolTiles t(it);
    for (int32_t i = 0; i < t.count; ++i) {
      const int32_t base = t.base0 + i * kKvTile;
      const int32_t first = std::max(base, t.pos_begin) / ps, last = (std::min(base + kKvTile, t.pos_end) - 1) / ps;
      bool in_order = true;
      for (int32_t page = first + 1; page <= last; ++page) in_order = in_order && pages[page] == pages[page - 1] + 1;
      tiles += it.row_count;
      consecutive += in_order ? it.row_count : 0;
    }
  }
  return tiles == 0 ? 1.0 : static_cast<double>(consecutive) / static_cast<double>(tiles);
}

}  // namespace banyan::attention

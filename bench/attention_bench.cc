// Tree attention vs the per-sequence baselines on the shapes (bf16,
// head_dim 128, page size 16), side by side in one run:
//   tree     TreeAttention's defaults: PathChoice::kAuto (cost model; shared
//            KV tiles), default kernel variant, split-K chunks of at least
//            kMinChunk tokens, the merge as a programmatic dependent launch;
//   narrow   the defaults with KernelVariant::kNarrow forced (the mma.sync tile);
//   wgmma    the defaults with KernelVariant::kWgmma forced on every batched
//            item (sm_90a; skipped where the sm_90a image is not loaded);
//   tma / tma_pp  KernelVariant::kTma forced (the warp-specialized TMA
//            kernel; kAuto's choice wherever TMA can read the problem),
//            without / with the consumer warpgroups in ping-pong;
//   c64/c256 the same with chunks of at least 64 / 256 tokens;
//   plain    the defaults with the merge as a plain second launch;
//   nochain  the defaults with every batched item filling and draining its
//            own KV pipeline (no loads of the next item during the current);
//   onelaunch the defaults as one cooperative launch: every CTA merges after
//            a grid-wide barrier (no merge kernel);
//   nohead / nogroup  the defaults without the CTA head (each CTA's first
//            item reads page ids and q rows from the plan) / without small-item
//            groups (kNarrow only; second table, PrintSmallTable);
//   cluster  the defaults with the cluster merge (set_cluster_merge): one
//            launch, thread-block clusters merging their own rows (second
//            table; the clusters' query ranges BANYAN_BENCH_CLUSTER_PARTS=n,
//            default the planner's; CTAs per cluster BANYAN_BENCH_CLUSTER_SIZE=n)
//   perseq   PathChoice::kPerSequence: each row reads its whole path itself,
//            tensor-core tiles per sequence (FlashInfer-style GQA decode)
//   flat     PathChoice::kFlattened: FlashDecoding-style split-K on CUDA cores
// Time: cudaEvents around Run (persistent kernel + merge kernel), L2 flushed
// (a 256 MiB memset, BANYAN_BENCH_FLUSH) before every timed run, median of the iterations. Floor =
// max(unique bytes / 2.99 TB/s, FLOPs / 685 TFLOP/s), the ceilings measured
// on the H100 (bench/RESULTS.md "Device ceilings").
//
//   attention_bench [--benchmark_filter=...]     prints a compact table last
//   BANYAN_BENCH_TRACE=1 attention_bench ...     also 5 traced Runs per row:
//            where the time goes (globaltimer per CTA, TreeAttention::set_trace)
//   BANYAN_BENCH_TRACE_DUMP=<file>               with the trace: every CTA's raw
//            words of the last traced Run appended to <file> (kernels/params.cuh),
//            item CTAs then merge CTAs
//   BANYAN_BENCH_ORDERED_PAGES=1                 page ids in order (a fresh pool)
//            instead of scattered over the pool (a fragmented one); 2: runs of
//            one 64-token tile's pages in order, the runs scattered; 3: inner
//            nodes' pages in order, the leaves' pages round robin over the
//            leaves (what leaves decoding side by side take from a pool)
//   BANYAN_BENCH_TMA_NOSPLIT=1                   kTma with every small item on
//            consumer warpgroup 0 (TreeAttention::set_tma_split_small(false))
//   BANYAN_BENCH_NO_SPREAD=1                     light items after heavy ones
//            (TreeAttention::set_spread_light(false))
//   BANYAN_BENCH_TMA_NO_GATE=1                   kTma without the start gate
//            (TreeAttention::set_tma_gate_start(false))
//   BANYAN_BENCH_TMA_RINGS=shared|split          kTma's rings forced
//            (TreeAttention::set_tma_rings; default kAuto by page order)
//   BANYAN_BENCH_TMA_SHORT_BOXES=0               kTma's short-plan feed off
//            (TreeAttention::set_tma_short_plan_boxes; default on)
//   BANYAN_BENCH_MIN_CHUNK=n                     fewest tokens of a split-K chunk
//            (TreeAttention::set_min_chunk; default kMinChunk)
//   BANYAN_BENCH_NO_START_OVERLAP=1              kTma launched plainly, not as a
//            programmatic dependent launch (TreeAttention::set_overlap_start(false))
//   BANYAN_BENCH_LIGHT_CTAS=n                    kTma's light CTAs: n (0: none; -1: the
//            cost model's count, the default) (TreeAttention::set_light_ctas)
//   BANYAN_BENCH_LIGHT_CHUNKS=n                  with light CTAs, the dominant heavy segment in
//            about n split-K chunks (0: the cost model's, the default; set_light_chunks);
//            the row's `chunks` counter says what the plan got
//   BANYAN_BENCH_RATES=name=value,...            the light split's cost-model rates instead of
//            DeviceModel's defaults (names: bench/cost_rates.h kCostRates, e.g.
//            tma_tile_us or max_dominant_chunk_d128; set_cost_rates), e.g. the line
//            bench/light_split_fit prints for its best fit
//   BANYAN_BENCH_STREAM_K=off|auto|always        stream-K placement of plans it can take
//            (TreeAttention::set_stream_k; default auto)
//   BANYAN_BENCH_FLUSH=write|read|none           how the L2 is emptied before each timed Run:
//            a 256 MiB memset (default; leaves the L2 full of dirty lines, which the
//            Run's misses write back first), a read of 256 MiB (clean lines: the
//            state a decode step's weight reads leave), or not at all
//   BANYAN_BENCH_ENGINE_SUFFIXES=1,32,1024x4096x64  more engine rows after the default ones:
//            h32/8 D64 L256 P2048 at these suffix lengths, or L leaves x P prefix x S suffix
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "attention/testing/device_fill.h"
#include "attention/testing/l2_flush.h"
#include "attention/testing/random_plan.h"
#include "attention/tree_attention.h"
#include "bench/bench_median.h"
#include "bench/bench_status.h"
#include "bench/cost_rates.h"
#include "bench/event_timer.h"
#include "benchmark/benchmark.h"
#include "sdk/gpu/cuda_status.h"
#include "sdk/gpu/device_buffer.h"
#include "sdk/gpu/device_info.h"

namespace banyan::attention {
namespace {

using ::banyan::bench::Median;

constexpr double kHbmBytesPerSec = 2.99e12;
constexpr double kBf16FlopsPerSec = 685e12;

struct Shape {
  std::string name;
  int32_t q_heads, kv_heads;
  std::vector<int32_t> fanout, length;
  int32_t head_dim = 128;
};

struct Row {
  double tree = 0, narrow = 0, wgmma = 0, tma = 0, tmapp = 0, c64 = 0, c256 = 0, plain = 0, nochain = 0, one = 0, perseq = 0, flat = 0, floor = 0;
  double nohead = 0, nogroup = 0;  // the small-shape switches (PrintSmallTable)
  double cluster = 0;              // TreeAttention::set_cluster_merge (PrintSmallTable)
};
// One column of the table: a path and the runner's settings.
struct Variant {
  PathChoice path;
  int32_t min_chunk;  // 0: TreeAttention's default
  bool overlap_merge;
  bool chain_items;
  KernelVariant variant;  // kAuto: the runner's default
  bool grid_merge;    // one cooperative launch, merged after a grid barrier
  double Row::*cell;
  const char* tag;
  bool cta_head = true;     // TreeAttention::set_cta_head
  bool group_items = true;  // TreeAttention::set_group_items
  bool tma_pingpong = false;  // TreeAttention::set_tma_pingpong
  bool cluster_merge = false;  // TreeAttention::set_cluster_merge
};
// Where one Run's time goes (BANYAN_BENCH_TRACE=1: TreeAttention::set_trace),
// us after the first item CTA's start (globaltimer), medians over 5 runs.
struct TraceRow {
  double event = 0;          // cudaEvent time of the traced Run
  double start_max = 0;      // last item CTA start
  double landed_med = 0;     // first KV tile landed (first item, narrow kernel), median over CTAs
  double landed_max = 0;
  double landed_cyc_med = 0; // the same from the CTA's own start, clock64 -> us
  double first_med = 0;      // first item done
  double items_end_med = 0;  // CTA's items done
  double items_end_max = 0;
  double merge_start_min = 0;
  double merge_wait_min = 0;  // merge CTAs' dependency wait returned
  double merge_wait_med = 0;
  double merge_end_max = 0;
};
std::map<std::string, TraceRow>& Traces() {
  static auto* traces = new std::map<std::string, TraceRow>();
  return *traces;
}
std::vector<std::string>& TraceOrder() {
  static auto* order = new std::vector<std::string>();
  return *order;
}
std::map<std::string, Row>& Results() {
  static auto* results = new std::map<std::string, Row>();
  return *results;
}
std::vector<std::string>& Order() {
  static auto* order = new std::vector<std::string>();
  return *order;
}

// Appends one traced Run's raw item-CTA (or merge-CTA, "merge <variant
// shape>") words to `path`, a line per CTA: "<variant shape>|cta|word
// 0..n-1", timer words (item CTAs 0, 2, 3; merge CTAs, `merge_ctas`, 0-2)
// relative to t0.
void DumpTrace(const char* path, const std::string& key, const unsigned long long* h, int32_t grid, int words,
               bool merge_ctas, unsigned long long t0) {
  FILE* f = std::fopen(path, "a");
  if (f == nullptr) return;
  for (int32_t b = 0; b < grid; ++b) {
    std::fprintf(f, "%s|%d", key.c_str(), b);
    for (int k = 0; k < words; ++k) {
      const unsigned long long w = h[b * words + k];
      const bool timer = (merge_ctas ? k < 3 : (k == 0 || k == 2 || k == 3)) && w != 0;
      std::fprintf(f, "|%llu", timer ? w - t0 : w);
    }
    std::fprintf(f, "\n");
  }
  std::fclose(f);
}

void RunShape(benchmark::State& state, const Shape& shape, const Variant& v) {
  if (!gpu::HasGpu()) {
    state.SkipWithError("no GPU");
    return;
  }
  const int32_t head_dim = shape.head_dim;
  Rng rng(11);
  testing::PlanOptions popt;
  popt.random_first_slot = false;
  // Page ids: scattered over the pool by default (a fragmented pool: every
  // 64-token tile is four separate pages); BANYAN_BENCH_ORDERED_PAGES=1 hands
  // them out in order, as a fresh engine's page pool does.
  const char* ordered = std::getenv("BANYAN_BENCH_ORDERED_PAGES");
  const char page_order = ordered != nullptr ? ordered[0] : '0';
  popt.shuffle_pages = page_order != '1' && page_order != '3';
  if (page_order == '2') popt.shuffle_run = kKvTile / popt.page_size;  // tile-sized runs scattered
  popt.interleave_leaves = page_order == '3';  // the leaves' pages as side-by-side decode takes them
  const testing::TreePlan tree = testing::BuildTreePlan(testing::UniformTree(shape.fanout, shape.length), popt, rng);
  const AttentionPlan& plan = tree.plan;
  KvLayout layout;
  layout.num_layers = 1;
  layout.num_kv_heads = shape.kv_heads;
  layout.head_dim = head_dim;
  layout.page_size = plan.page_size;
  layout.num_pages = tree.num_pages;
  layout.dtype_bytes = 2;
  const int64_t q_elems = int64_t{plan.num_queries} * shape.q_heads * head_dim;
  auto stream = gpu::Stream::Create();
  BENCH_OK(stream.status());
  auto kv = gpu::DeviceBuffer::Allocate(layout.TotalBytes());
  auto q = gpu::DeviceBuffer::Allocate(q_elems * 2);
  auto out = gpu::DeviceBuffer::Allocate(q_elems * 2);
  auto flush = gpu::DeviceBuffer::Allocate(size_t{256} << 20);
  BENCH_OK(kv.status());
  BENCH_OK(q.status());
  BENCH_OK(out.status());
  BENCH_OK(flush.status());
  BENCH_OK(testing::FillUniformDevice(kv->data(), DType::kBf16, layout.TotalBytes() / 2, 1, stream->get()));
  BENCH_OK(testing::FillUniformDevice(q->data(), DType::kBf16, q_elems, 2, stream->get()));
  AttentionArgs args;
  args.plan = &plan;
  args.layout = layout;
  args.kv_dtype = DType::kBf16;
  args.kv_pool = kv->data();
  args.layer = 0;
  args.q = q->data();
  args.q_dtype = DType::kBf16;
  args.num_q_heads = shape.q_heads;
  args.scale = 0.08838834764831845f;
  args.out = out->data();
  args.out_dtype = DType::kBf16;
  auto runner = TreeAttention::Create();
  BENCH_OK(runner.status());
  if (v.min_chunk > 0) (*runner)->set_min_chunk(v.min_chunk);
  (*runner)->set_overlap_merge(v.overlap_merge);
  (*runner)->set_chain_items(v.chain_items);
  if ((v.variant == KernelVariant::kWgmma || v.variant == KernelVariant::kTma) && !(*runner)->wgmma_available()) {
    state.SkipWithError("no sm_90a image");
    return;
  }
  if (v.cluster_merge && !(*runner)->cluster_available()) {
    state.SkipWithError("no thread-block clusters");
    return;
  }
  if (const char* parts = std::getenv("BANYAN_BENCH_CLUSTER_PARTS"); parts != nullptr) {
    (*runner)->set_cluster_query_parts(std::atoi(parts));  // A/B of ClusterGrid::query_parts
  }
  if (const char* size = std::getenv("BANYAN_BENCH_CLUSTER_SIZE"); size != nullptr) {
    (*runner)->set_cluster_size(std::atoi(size));  // A/B of TreeAttention::kClusterSize
  }
  (*runner)->set_variant(v.variant);
  (*runner)->set_cluster_merge(v.cluster_merge);
  (*runner)->set_grid_merge(v.grid_merge);
  (*runner)->set_cta_head(v.cta_head);
  (*runner)->set_group_items(v.group_items);
  (*runner)->set_tma_pingpong(v.tma_pingpong);
  if (const char* nosplit = std::getenv("BANYAN_BENCH_TMA_NOSPLIT"); nosplit != nullptr && nosplit[0] == '1') {
    (*runner)->set_tma_split_small(false);  // A/B of TreeAttention::set_tma_split_small
  }
  if (const char* nogate = std::getenv("BANYAN_BENCH_TMA_NO_GATE"); nogate != nullptr && nogate[0] == '1') {
    (*runner)->set_tma_gate_start(false);  // A/B of TreeAttention::set_tma_gate_start
  }
  if (const char* boxes = std::getenv("BANYAN_BENCH_TMA_SHORT_BOXES"); boxes != nullptr && boxes[0] == '0') {
    (*runner)->set_tma_short_plan_boxes(false);  // A/B of TreeAttention::kTmaShortPlanTilesPerCta
  }
  if (const char* rings = std::getenv("BANYAN_BENCH_TMA_RINGS"); rings != nullptr) {  // A/B of set_tma_rings
    using R = TreeAttention::TmaRings;
    const std::string_view name(rings);
    (*runner)->set_tma_rings(name == "split" ? R::kSplit : name == "shared" ? R::kShared : R::kAuto);
  }
  if (const char* nospread = std::getenv("BANYAN_BENCH_NO_SPREAD"); nospread != nullptr && nospread[0] == '1') {
    (*runner)->set_spread_light(false);  // A/B of TreeAttention::set_spread_light
  }
  if (const char* chunk = std::getenv("BANYAN_BENCH_MIN_CHUNK"); chunk != nullptr) {  // A/B of set_min_chunk
    (*runner)->set_min_chunk(std::atoi(chunk));
  }
  if (const char* plain = std::getenv("BANYAN_BENCH_NO_START_OVERLAP"); plain != nullptr && plain[0] == '1') {
    (*runner)->set_overlap_start(false);  // A/B of TreeAttention::set_overlap_start
  }
  if (const char* light = std::getenv("BANYAN_BENCH_LIGHT_CTAS"); light != nullptr) {  // A/B of set_light_ctas
    (*runner)->set_light_ctas(std::atoi(light));
  }
  if (const char* chunks = std::getenv("BANYAN_BENCH_LIGHT_CHUNKS"); chunks != nullptr) {
    (*runner)->set_light_chunks(std::atoi(chunks));
  }
  if (const char* spec = std::getenv("BANYAN_BENCH_RATES"); spec != nullptr) {
    absl::StatusOr<DeviceModel> rates = bench::ParseCostRates(spec);
    BENCH_OK(rates.status());
    (*runner)->set_cost_rates(*rates);
  }
  if (const char* sk = std::getenv("BANYAN_BENCH_STREAM_K"); sk != nullptr) {  // A/B of set_stream_k
    const std::string_view mode(sk);
    (*runner)->set_stream_k(mode == "off"      ? StreamKMode::kOff
                            : mode == "always" ? StreamKMode::kAlways
                                               : StreamKMode::kAuto);
  }
  BENCH_OK((*runner)->Prepare(args, v.path, stream->get()));
  for (int i = 0; i < 3; ++i) BENCH_OK((*runner)->Run(args, stream->get()));
  // Before every timed Run: the L2 emptied of the Run before (BANYAN_BENCH_FLUSH).
  const char* flush_env = std::getenv("BANYAN_BENCH_FLUSH");
  const std::string_view flush_mode = flush_env != nullptr ? flush_env : "write";
  if (flush_mode != "write" && flush_mode != "read" && flush_mode != "none") {
    BENCH_OK(absl::InvalidArgumentError("BANYAN_BENCH_FLUSH must be write, read or none"));
  }
  if (flush_mode == "read") {  // lines of random values, not of one byte repeated
    BENCH_OK(testing::FillUniformDevice(flush->data(), DType::kBf16, flush->size() / 2, 3, stream->get()));
  }
  auto flush_l2 = [&](int value) -> absl::Status {
    if (flush_mode == "none") return absl::OkStatus();
    if (flush_mode == "read") return testing::ReadThroughDevice(flush->data(), flush->size(), stream->get());
    return BANYAN_CUDA_STATUS(cudaMemsetAsync(flush->data(), value, flush->size(), stream->get()));
  };
  auto start = gpu::Event::Create();
  auto stop = gpu::Event::Create();
  auto timer = bench::EventTimer::Create();
  BENCH_OK(start.status());
  BENCH_OK(stop.status());
  BENCH_OK(timer.status());
  std::vector<double> times;
  for (auto _ : state) {
    BENCH_OK(flush_l2(static_cast<int>(times.size() & 0xff)));
    auto us = timer->TimeUs(stream->get(), [&] { return (*runner)->Run(args, stream->get()); });
    BENCH_OK(us.status());
    state.SetIterationTime(*us / 1e6);
    times.push_back(*us);
  }
  std::sort(times.begin(), times.end());
  const double median = times[times.size() / 2];
  const char* trace_env = std::getenv("BANYAN_BENCH_TRACE");
  if (trace_env != nullptr && trace_env[0] == '1') {
    const int32_t grid = (*runner)->grid_size(), merge_grid = (*runner)->merge_grid_size();
    constexpr int kItemWords = 20, kMergeWords = 4;  // kernels/params.cuh kTraceItemWords, kTraceMergeWords
    auto tbuf = gpu::DeviceBuffer::Allocate(size_t{8} * (grid * kItemWords + merge_grid * kMergeWords));
    BENCH_OK(tbuf.status());
    auto* words = tbuf->As<unsigned long long>();
    (*runner)->set_trace(words, words + grid * kItemWords);
    int clock_khz = 0;
    BENCH_OK(BANYAN_CUDA_STATUS(cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, 0)));
    std::vector<TraceRow> runs;
    for (int rep = 0; rep < 5; ++rep) {
      BENCH_OK(tbuf->Fill(0, stream->get()));
      BENCH_OK(flush_l2(rep));
      BENCH_OK(start->Record(stream->get()));
      BENCH_OK((*runner)->Run(args, stream->get()));
      BENCH_OK(stop->Record(stream->get()));
      BENCH_OK(stream->Synchronize());
      std::vector<unsigned long long> h(static_cast<size_t>(grid) * kItemWords + merge_grid * kMergeWords);
      BENCH_OK(tbuf->CopyToHost(h.data(), h.size() * 8));
      const unsigned long long* m = h.data() + static_cast<size_t>(grid) * kItemWords;
      unsigned long long t0 = ~0ull;
      for (int32_t b = 0; b < grid; ++b) t0 = std::min(t0, h[b * kItemWords]);
      if (const char* dump = std::getenv("BANYAN_BENCH_TRACE_DUMP"); dump != nullptr && rep == 4) {
        DumpTrace(dump, std::string(v.tag) + " " + shape.name, h.data(), grid, kItemWords, /*merge_ctas=*/false, t0);
        DumpTrace(dump, std::string("merge ") + v.tag + " " + shape.name,
                  h.data() + static_cast<size_t>(grid) * kItemWords, merge_grid, kMergeWords, /*merge_ctas=*/true, t0);
      }
      auto us = [&](unsigned long long t) { return (static_cast<double>(t) - static_cast<double>(t0)) / 1e3; };
      std::vector<double> starts, landed, landed_cyc, first, ends, mstart, mwait, mend;
      for (int32_t b = 0; b < grid; ++b) {
        const unsigned long long* w = h.data() + b * kItemWords;
        starts.push_back(us(w[0]));
        if (w[1] != 0) {
          landed.push_back(us(w[1]));
          landed_cyc.push_back(static_cast<double>(w[5] - w[4]) / clock_khz * 1e3);
        }
        if (w[2] != 0) first.push_back(us(w[2]));
        ends.push_back(us(w[3]));
      }
      for (int32_t b = 0; b < merge_grid; ++b) {
        mstart.push_back(us(m[b * kMergeWords]));
        mwait.push_back(us(m[b * kMergeWords + 1]));
        mend.push_back(us(m[b * kMergeWords + 2]));
      }
      auto ms = stop->ElapsedMsSince(*start);
      BENCH_OK(ms.status());
      TraceRow r;
      r.event = *ms * 1e3;
      r.start_max = *std::max_element(starts.begin(), starts.end());
      r.landed_med = Median(landed);
      r.landed_max = landed.empty() ? 0 : *std::max_element(landed.begin(), landed.end());
      r.landed_cyc_med = Median(landed_cyc);
      r.first_med = Median(first);
      r.items_end_med = Median(ends);
      r.items_end_max = *std::max_element(ends.begin(), ends.end());
      r.merge_start_min = mstart.empty() ? 0 : *std::min_element(mstart.begin(), mstart.end());
      r.merge_wait_min = mwait.empty() ? 0 : *std::min_element(mwait.begin(), mwait.end());
      r.merge_wait_med = Median(mwait);
      r.merge_end_max = mend.empty() ? 0 : *std::max_element(mend.begin(), mend.end());
      runs.push_back(r);
    }
    (*runner)->set_trace(nullptr, nullptr);
    TraceRow med;
    for (double TraceRow::*f : {&TraceRow::event, &TraceRow::start_max, &TraceRow::landed_med, &TraceRow::landed_max,
                                &TraceRow::landed_cyc_med, &TraceRow::first_med, &TraceRow::items_end_med,
                                &TraceRow::items_end_max, &TraceRow::merge_start_min, &TraceRow::merge_wait_min,
                                &TraceRow::merge_wait_med, &TraceRow::merge_end_max}) {
      std::vector<double> vals;
      for (const TraceRow& r : runs) vals.push_back(r.*f);
      med.*f = Median(vals);
    }
    const std::string key = std::string(v.tag) + " " + shape.name;
    if (Traces().count(key) == 0) TraceOrder().push_back(key);
    Traces()[key] = med;
  }
  // Floor: each segment's KV once, q in, out out; FLOPs of every entry.
  double bytes = 2.0 * q_elems * 2;
  double flops = 0;
  for (int32_t s = 0; s < plan.num_segments(); ++s) {
    bytes += 2.0 * plan.segment_length[s] * shape.kv_heads * head_dim * 2;
    for (int32_t e = plan.segment_entry_indptr[s]; e < plan.segment_entry_indptr[s + 1]; ++e) {
      flops += 4.0 * plan.entry_kv_limit[e] * head_dim * shape.q_heads;
    }
  }
  const double floor_us = std::max(bytes / kHbmBytesPerSec, flops / kBf16FlopsPerSec) * 1e6;
  state.counters["median_us"] = median;
  state.counters["floor_us"] = floor_us;
  state.counters["x_floor"] = median / floor_us;
  state.counters["items"] = static_cast<double>((*runner)->work_plan().items.size());
  state.counters["model_us"] = (*runner)->work_plan().estimated_us;
  state.counters["light_ctas"] = (*runner)->work_plan().light_ctas((*runner)->grid_size());
  state.counters["chunks"] = (*runner)->work_plan().most_chunks();
  state.counters["grid"] = (*runner)->grid_size();
  state.counters["placement"] = static_cast<int>((*runner)->work_plan().placement);  // 0 chunks, 1 stream-K, 2 one wave
  Row& row = Results()[shape.name];
  row.floor = floor_us;
  row.*v.cell = median;
}

std::vector<Shape> Shapes() {
  std::vector<Shape> shapes;
  for (auto [hq, hkv] : {std::pair{8, 1}, std::pair{32, 8}}) {
    for (int32_t leaves : {64, 256, 1024}) {
      for (int32_t prefix : {2048, 16384}) {
        for (int32_t suffix : {64, 512}) {
          shapes.push_back({absl::StrFormat("h%d/%d L%d P%d S%d", hq, hkv, leaves, prefix, suffix), hq, hkv,
                            {1, leaves}, {prefix, suffix}});
        }
      }
    }
    // Three levels: 2048 shared by all; 8 problems of 512 shared by 128 samples; 256 suffix.
    shapes.push_back({absl::StrFormat("h%d/%d 3lvl 2048/8x512/128x256", hq, hkv), hq, hkv, {1, 8, 128}, {2048, 512, 256}});
    // The same tree treated as two levels, both ways: the problem's 512 tokens copied into every sample
    // (2048 | 1024 x 768), and the shared 2048 copied into every problem (8 x 2560 | 128 x 256 each: the
    // two-level view of the peers' hydragen_2level and fi_cascade_2level runs).
    shapes.push_back({absl::StrFormat("h%d/%d as2lvl 2048/1024x768", hq, hkv), hq, hkv, {1, 1024}, {2048, 768}});
    shapes.push_back({absl::StrFormat("h%d/%d as2lvl 8x2560/128x256", hq, hkv), hq, hkv, {8, 128}, {2560, 256}});
  }
  // The engine's decode step (bench/engine_bench.cc's model: 32/8 heads of 64), not an issue shape:
  // 256 branches over 2K (suffixes there grow from 1 to 128 tokens: S8 and S120 are the
  // two ends, S64 the middle), 1,024 over 16K.
  auto engine_row = [&shapes](int32_t leaves, int32_t prefix, int32_t suffix) {
    shapes.push_back({absl::StrFormat("h32/8 D64 L%d P%d S%d (engine)", leaves, prefix, suffix), 32, 8, {1, leaves},
                      {prefix, suffix}, 64});
  };
  engine_row(256, 2048, 64);
  engine_row(256, 2048, 8);
  engine_row(256, 2048, 120);
  engine_row(1024, 16384, 64);
  // More engine rows (BANYAN_BENCH_ENGINE_SUFFIXES, e.g. "1,16,96" or "1024x4096x64"): a suffix
  // length alone is 256 leaves over 2K, LxPxS any D 64 two-level tree.
  if (const char* more = std::getenv("BANYAN_BENCH_ENGINE_SUFFIXES"); more != nullptr) {
    for (absl::string_view s : absl::StrSplit(more, ',', absl::SkipEmpty())) {
      const std::vector<absl::string_view> parts = absl::StrSplit(s, 'x');
      int32_t leaves = 256, prefix = 2048, suffix = 0;
      const bool ok = parts.size() == 1
                          ? absl::SimpleAtoi(parts[0], &suffix)
                          : parts.size() == 3 && absl::SimpleAtoi(parts[0], &leaves) &&
                                absl::SimpleAtoi(parts[1], &prefix) && absl::SimpleAtoi(parts[2], &suffix);
      if (ok && leaves >= 1 && prefix >= 1 && suffix >= 1) {
        engine_row(leaves, prefix, suffix);
      } else {
        std::fprintf(stderr, "BANYAN_BENCH_ENGINE_SUFFIXES: skipped \"%.*s\" (want S or LxPxS)\n",
                     static_cast<int>(s.size()), s.data());
      }
    }
  }
  // Latency probe (not an issue shape): one query row, two 64-token segments, i.e. two one-tile
  // items and the merge: what a launch costs before any real work.
  shapes.push_back({"h8/1 probe 1x(64+64)", 8, 1, {1, 1}, {64, 64}});
  return shapes;
}

void PrintSmallTable() {
  std::printf("\n%-34s %8s %8s %8s %8s %8s\n", "shape (bf16, D=128)", "tree", "narrow", "nohead", "nogroup", "cluster");
  for (const std::string& name : Order()) {
    const Row& r = Results()[name];
    if (r.nohead <= 0 && r.nogroup <= 0 && r.cluster <= 0) continue;
    std::printf("%-34s %8.1f %8.1f %8.1f %8.1f %8.1f\n", name.c_str(), r.tree, r.narrow, r.nohead, r.nogroup,
                r.cluster);
  }
  if (TraceOrder().empty()) return;
  std::printf("\ntrace (us after the first item CTA starts; medians of 5 traced runs)\n%-42s %7s %7s %7s %7s %7s %7s %7s %7s %7s %7s %7s %7s\n",
              "variant shape", "event", "startmx", "landmed", "landmx", "landcyc", "first", "endmed", "endmax",
              "mstart", "mwaitmn", "mwaitmd", "mendmx");
  for (const std::string& key : TraceOrder()) {
    const TraceRow& t = Traces()[key];
    std::printf("%-42s %7.2f %7.2f %7.2f %7.2f %7.2f %7.2f %7.2f %7.2f %7.2f %7.2f %7.2f %7.2f\n", key.c_str(), t.event,
                t.start_max, t.landed_med, t.landed_max, t.landed_cyc_med, t.first_med, t.items_end_med, t.items_end_max,
                t.merge_start_min, t.merge_wait_min, t.merge_wait_med, t.merge_end_max);
  }
}

void PrintTable() {
  // Ratios against the default (tree) column.
  std::printf("\n%-34s %8s %8s %8s %8s %8s %8s %8s %8s %8s %8s %8s %8s %8s %7s %7s %7s\n", "shape (bf16, D=128)", "tree",
              "narrow", "wgmma", "tma", "tma_pp", "c64", "c256", "plain", "nochain", "1launch", "perseq", "flat", "floor", "x_floor", "ps/tree",
              "fl/tree");
  for (const std::string& name : Order()) {
    const Row& r = Results()[name];
    if (r.tree <= 0) continue;
    std::printf("%-34s %8.1f %8.1f %8.1f %8.1f %8.1f %8.1f %8.1f %8.1f %8.1f %8.1f %8.1f %8.1f %8.1f %7.2f %7.2f %7.2f\n",
                name.c_str(), r.tree, r.narrow, r.wgmma, r.tma, r.tmapp, r.c64, r.c256, r.plain, r.nochain, r.one, r.perseq, r.flat, r.floor,
                r.tree / r.floor, r.perseq / r.tree, r.flat / r.tree);
  }
}

}  // namespace
}  // namespace banyan::attention

int main(int argc, char** argv) {
  using namespace banyan::attention;
  for (const Shape& shape : Shapes()) {
    Order().push_back(shape.name);
    constexpr auto kAutoTile = KernelVariant::kAuto;
    for (const Variant& v : {Variant{PathChoice::kAuto, 0, true, true, kAutoTile, false, &Row::tree, "tree"},
                             Variant{PathChoice::kAuto, 0, true, true, KernelVariant::kNarrow, false, &Row::narrow, "narrow"},
                             Variant{PathChoice::kAuto, 0, true, true, KernelVariant::kWgmma, false, &Row::wgmma, "wgmma"},
                             Variant{PathChoice::kAuto, 0, true, true, KernelVariant::kTma, false, &Row::tma, "tma"},
                             Variant{PathChoice::kAuto, 0, true, true, KernelVariant::kTma, false, &Row::tmapp, "tmapp",
                                     true, true, true},
                             Variant{PathChoice::kAuto, 64, true, true, kAutoTile, false, &Row::c64, "c64"},
                             Variant{PathChoice::kAuto, 256, true, true, kAutoTile, false, &Row::c256, "c256"},
                             Variant{PathChoice::kAuto, 0, false, true, kAutoTile, false, &Row::plain, "plain"},
                             Variant{PathChoice::kAuto, 0, true, false, kAutoTile, false, &Row::nochain, "nochain"},
                             Variant{PathChoice::kAuto, 0, true, true, kAutoTile, true, &Row::one, "onelaunch"},
                             Variant{PathChoice::kAuto, 0, true, true, kAutoTile, false, &Row::nohead, "nohead", false, true},
                             Variant{PathChoice::kAuto, 0, true, true, kAutoTile, false, &Row::nogroup, "nogroup", true, false},
                             Variant{PathChoice::kAuto, 0, true, true, kAutoTile, false, &Row::cluster, "cluster", true, true,
                                     false, true},
                             Variant{PathChoice::kPerSequence, 0, true, true, kAutoTile, false, &Row::perseq, "perseq"},
                             Variant{PathChoice::kFlattened, 0, true, true, kAutoTile, false, &Row::flat, "flat"}}) {
      benchmark::RegisterBenchmark(absl::StrCat("attn/", v.tag, "/", shape.name).c_str(),
                                   [shape, v](benchmark::State& st) { RunShape(st, shape, v); })
          ->UseManualTime()
          ->Unit(benchmark::kMicrosecond)
          ->Iterations(20);
    }
  }
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  PrintTable();
  PrintSmallTable();
  return 0;
}

// Tree attention vs the per-sequence baselines on the shapes (bf16,
// head_dim 128, page size 16), side by side in one run:
//   tree     TreeAttention's defaults: PathChoice::kAuto (cost model; shared
//            KV tiles), default kernel variant, split-K chunks of at least
//            kMinChunk tokens, the merge as a programmatic dependent launch;
//   narrow   the defaults with KernelVariant::kNarrow forced (the mma.sync tile);
//   wgmma    the defaults with KernelVariant::kWgmma forced on every batched
//            item (sm_90a; kAuto uses it only for plans averaging >= 3 KV
//            tiles per item; skipped where the sm_90a image is not loaded);
//   c64/c256 the same with chunks of at least 64 / 256 tokens;
//   plain    the defaults with the merge as a plain second launch;
//   nochain  the defaults with every batched item filling and draining its
//            own KV pipeline (no loads of the next item during the current);
//   onelaunch the defaults as one cooperative launch: every CTA merges after
//            a grid-wide barrier (no merge kernel);
//   perseq   PathChoice::kPerSequence: each row reads its whole path itself,
//            tensor-core tiles per sequence (FlashInfer-style GQA decode)
//   flat     PathChoice::kFlattened: FlashDecoding-style split-K on CUDA cores
// Time: cudaEvents around Run (persistent kernel + merge kernel), L2 flushed
// (a 256 MiB memset) before every timed run, median of the iterations. Floor =
// max(unique bytes / 2.99 TB/s, FLOPs / 685 TFLOP/s), the ceilings measured
// on the H100 (bench/RESULTS.md "Device ceilings").
//
//   attention_bench [--benchmark_filter=...]     prints a compact table last
#include <algorithm>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "attention/testing/device_fill.h"
#include "attention/testing/random_plan.h"
#include "attention/tree_attention.h"
#include "bench/bench_status.h"
#include "benchmark/benchmark.h"
#include "sdk/gpu/cuda_status.h"
#include "sdk/gpu/device_buffer.h"
#include "sdk/gpu/device_info.h"

namespace banyan::attention {
namespace {

constexpr double kHbmBytesPerSec = 2.99e12;
constexpr double kBf16FlopsPerSec = 685e12;

struct Shape {
  std::string name;
  int32_t q_heads, kv_heads;
  std::vector<int32_t> fanout, length;
};

struct Row {
  double tree = 0, narrow = 0, wgmma = 0, tma = 0, c64 = 0, c256 = 0, plain = 0, nochain = 0, one = 0, perseq = 0, flat = 0, floor = 0;
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
};
std::map<std::string, Row>& Results() {
  static auto* results = new std::map<std::string, Row>();
  return *results;
}
std::vector<std::string>& Order() {
  static auto* order = new std::vector<std::string>();
  return *order;
}

void RunShape(benchmark::State& state, const Shape& shape, const Variant& v) {
  if (!gpu::HasGpu()) {
    state.SkipWithError("no GPU");
    return;
  }
  constexpr int32_t kD = 128;
  Rng rng(11);
  testing::PlanOptions popt;
  popt.random_first_slot = false;
  const testing::TreePlan tree = testing::BuildTreePlan(testing::UniformTree(shape.fanout, shape.length), popt, rng);
  const AttentionPlan& plan = tree.plan;
  KvLayout layout;
  layout.num_layers = 1;
  layout.num_kv_heads = shape.kv_heads;
  layout.head_dim = kD;
  layout.page_size = plan.page_size;
  layout.num_pages = tree.num_pages;
  layout.dtype_bytes = 2;
  const int64_t q_elems = int64_t{plan.num_queries} * shape.q_heads * kD;
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
  if (v.variant == KernelVariant::kWgmma && !(*runner)->wgmma_available()) {
    state.SkipWithError("no sm_90a image");
    return;
  }
  (*runner)->set_variant(v.variant);
  (*runner)->set_grid_merge(v.grid_merge);
  BENCH_OK((*runner)->Prepare(args, v.path, stream->get()));
  for (int i = 0; i < 3; ++i) BENCH_OK((*runner)->Run(args, stream->get()));
  auto start = gpu::Event::Create();
  auto stop = gpu::Event::Create();
  BENCH_OK(start.status());
  BENCH_OK(stop.status());
  std::vector<double> times;
  for (auto _ : state) {
    BENCH_OK(BANYAN_CUDA_STATUS(cudaMemsetAsync(flush->data(), static_cast<int>(times.size() & 0xff), flush->size(),
                                                stream->get())));
    BENCH_OK(start->Record(stream->get()));
    BENCH_OK((*runner)->Run(args, stream->get()));
    BENCH_OK(stop->Record(stream->get()));
    BENCH_OK(stream->Synchronize());
    auto ms = stop->ElapsedMsSince(*start);
    BENCH_OK(ms.status());
    state.SetIterationTime(*ms / 1e3);
    times.push_back(*ms * 1e3);
  }
  std::sort(times.begin(), times.end());
  const double median = times[times.size() / 2];
  // Floor: each segment's KV once, q in, out out; FLOPs of every entry.
  double bytes = 2.0 * q_elems * 2;
  double flops = 0;
  for (int32_t s = 0; s < plan.num_segments(); ++s) {
    bytes += 2.0 * plan.segment_length[s] * shape.kv_heads * kD * 2;
    for (int32_t e = plan.segment_entry_indptr[s]; e < plan.segment_entry_indptr[s + 1]; ++e) {
      flops += 4.0 * plan.entry_kv_limit[e] * kD * shape.q_heads;
    }
  }
  const double floor_us = std::max(bytes / kHbmBytesPerSec, flops / kBf16FlopsPerSec) * 1e6;
  state.counters["median_us"] = median;
  state.counters["floor_us"] = floor_us;
  state.counters["x_floor"] = median / floor_us;
  state.counters["items"] = static_cast<double>((*runner)->work_plan().items.size());
  state.counters["model_us"] = (*runner)->work_plan().estimated_us;
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
    // The same tree treated as two levels (the problem's 512 tokens copied into every sample).
    shapes.push_back({absl::StrFormat("h%d/%d as2lvl 2048/1024x768", hq, hkv), hq, hkv, {1, 1024}, {2048, 768}});
  }
  // Latency probe (not an issue shape): one query row, two 64-token segments, i.e. two one-tile
  // items and the merge: what a launch costs before any real work.
  shapes.push_back({"h8/1 probe 1x(64+64)", 8, 1, {1, 1}, {64, 64}});
  return shapes;
}

void PrintTable() {
  // Ratios against the default (tree) column.
  std::printf("\n%-34s %8s %8s %8s %8s %8s %8s %8s %8s %8s %8s %8s %8s %7s %7s %7s\n", "shape (bf16, D=128)", "tree",
              "narrow", "wgmma", "tma", "c64", "c256", "plain", "nochain", "1launch", "perseq", "flat", "floor", "x_floor", "ps/tree",
              "fl/tree");
  for (const std::string& name : Order()) {
    const Row& r = Results()[name];
    if (r.tree <= 0) continue;
    std::printf("%-34s %8.1f %8.1f %8.1f %8.1f %8.1f %8.1f %8.1f %8.1f %8.1f %8.1f %8.1f %8.1f %7.2f %7.2f %7.2f\n",
                name.c_str(), r.tree, r.narrow, r.wgmma, r.tma, r.c64, r.c256, r.plain, r.nochain, r.one, r.perseq, r.flat, r.floor,
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
                             Variant{PathChoice::kAuto, 64, true, true, kAutoTile, false, &Row::c64, "c64"},
                             Variant{PathChoice::kAuto, 256, true, true, kAutoTile, false, &Row::c256, "c256"},
                             Variant{PathChoice::kAuto, 0, false, true, kAutoTile, false, &Row::plain, "plain"},
                             Variant{PathChoice::kAuto, 0, true, false, kAutoTile, false, &Row::nochain, "nochain"},
                             Variant{PathChoice::kAuto, 0, true, true, kAutoTile, true, &Row::one, "onelaunch"},
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
  return 0;
}

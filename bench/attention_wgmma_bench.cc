// The wgmma batched tile (KernelVariant::kWgmma, sm_90a) against the
// mma.sync tile (kNarrow) on the shapes (bf16, head_dim 128, page
// size 16), one run, everything else at TreeAttention's defaults:
//   wgmma    kWgmma, every batched item on wgmma (the default)
//   nochain  kWgmma with set_chain_items(false) (no KV pipeline across items)
//   narrow   kNarrow (the 16-rows-per-warp mma.sync tile)
// Time: cudaEvents around Run, L2 flushed (a 256 MiB memset) before every
// timed run, median of 20. Floor = max(unique bytes / 2.99 TB/s, FLOPs /
// 685 TFLOP/s) (bench/RESULTS.md "Device ceilings"). attention_bench holds the
// full comparison (baselines, peers); this one isolates the tile.
//
//   attention_wgmma_bench [--benchmark_filter=...]   prints a compact table last
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
  double wgmma = 0, nochain = 0, narrow = 0, floor = 0;
};
struct Column {
  KernelVariant variant;
  bool chain;
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

void RunShape(benchmark::State& state, const Shape& shape, const Column& column) {
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
  if (column.variant == KernelVariant::kWgmma && !(*runner)->wgmma_available()) {
    state.SkipWithError("no sm_90a image");
    return;
  }
  (*runner)->set_variant(column.variant);
  (*runner)->set_chain_items(column.chain);
  BENCH_OK((*runner)->Prepare(args, PathChoice::kAuto, stream->get()));
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
  Row& row = Results()[shape.name];
  row.floor = floor_us;
  row.*column.cell = median;
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
    shapes.push_back({absl::StrFormat("h%d/%d 3lvl 2048/8x512/128x256", hq, hkv), hq, hkv, {1, 8, 128}, {2048, 512, 256}});
    shapes.push_back({absl::StrFormat("h%d/%d as2lvl 2048/1024x768", hq, hkv), hq, hkv, {1, 1024}, {2048, 768}});
  }
  return shapes;
}

void PrintTable() {
  std::printf("\n%-34s %8s %8s %8s %8s %8s %8s\n", "shape (bf16, D=128)", "wgmma", "nochain", "narrow", "floor",
              "x_floor", "nar/wg");
  for (const std::string& name : Order()) {
    const Row& r = Results()[name];
    if (r.wgmma <= 0) continue;
    std::printf("%-34s %8.1f %8.1f %8.1f %8.1f %8.2f %8.2f\n", name.c_str(), r.wgmma, r.nochain, r.narrow, r.floor,
                r.wgmma / r.floor, r.narrow / r.wgmma);
  }
}

}  // namespace
}  // namespace banyan::attention

int main(int argc, char** argv) {
  using namespace banyan::attention;
  const Column columns[] = {
      {KernelVariant::kWgmma, true, &Row::wgmma, "wgmma"},
      {KernelVariant::kWgmma, false, &Row::nochain, "nochain"},
      {KernelVariant::kNarrow, true, &Row::narrow, "narrow"},
  };
  for (const Shape& shape : Shapes()) {
    Order().push_back(shape.name);
    for (const Column& c : columns) {
      benchmark::RegisterBenchmark(absl::StrCat("wgmma/", c.tag, "/", shape.name).c_str(),
                                   [shape, c](benchmark::State& st) { RunShape(st, shape, c); })
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

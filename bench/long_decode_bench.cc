// Long-context decode (DESIGN.md "Stream-K long-context decode"): a few
// sequences of 32K-256K tokens, one query row each, h32/8, head dim 128,
// bf16, 16-token pages in order. Columns, all TreeAttention on the same KV:
//   auto      the defaults: the cost model's path, the plan placed from whole
//             runs (work_plan.h StreamKMode::kAuto: one wave of equal pieces
//             for these memory-bound plans)
//   skcut     the stream-K cut forced (StreamKMode::kAlways: equal cost per
//             CTA, runs cut into unequal pieces, work_plan_stream_k.h)
//   fixed     split-K chunks placed whole (StreamKMode::kOff: the planner
//             before this placement)
//   fa2split  the same kernels with FlashAttention-2's split rule for
//             FlashDecoding (num splits per (sequence, KV head) from the wave
//             efficiency over the SMs, FlashDecodingSplits below)
//   flatfd    FlashDecoding itself: SIMT split-K items (PathChoice::kFlattened)
//             with that split rule, placed whole: the fixed-split baseline
//   flatsk    the SIMT items with the stream-K cut
// Time: cudaEvents around Run (the item kernel + the merge), median of the
// iterations. Bandwidth = the KV bytes (each token's K and V once) / time,
// against a device-to-device copy's (read + write bytes / time) measured in
// the same process.
//
//   long_decode_bench [--benchmark_filter=...]   prints a table last
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "attention/testing/device_fill.h"
#include "attention/testing/random_plan.h"
#include "attention/tree_attention.h"
#include "bench/bench_median.h"
#include "bench/bench_status.h"
#include "bench/event_timer.h"
#include "bench/long_sequences.h"
#include "benchmark/benchmark.h"
#include "sdk/gpu/cuda_status.h"
#include "sdk/gpu/device_buffer.h"
#include "sdk/gpu/device_info.h"

namespace banyan::attention {
namespace {

constexpr int32_t kQHeads = 32, kKvHeads = 8, kHeadDim = 128;

struct Variant {
  const char* tag;
  PathChoice path;
  StreamKMode stream_k;
  bool fa2_splits;
};
constexpr Variant kVariants[] = {{"auto", PathChoice::kAuto, StreamKMode::kAuto, false},
                                 {"skcut", PathChoice::kAuto, StreamKMode::kAlways, false},
                                 {"fixed", PathChoice::kAuto, StreamKMode::kOff, false},
                                 {"fa2split", PathChoice::kAuto, StreamKMode::kOff, true},
                                 {"flatfd", PathChoice::kFlattened, StreamKMode::kOff, true},
                                 {"flatsk", PathChoice::kFlattened, StreamKMode::kAlways, false}};

struct Shape {
  int32_t batch, length;
  std::string Name() const { return absl::StrFormat("B%d N%dK", batch, length / 1024); }
};

std::map<std::string, std::map<std::string, double>>& Results() {
  static auto* r = new std::map<std::string, std::map<std::string, double>>;
  return *r;
}
std::vector<std::string>& Order() {
  static auto* o = new std::vector<std::string>;
  return *o;
}
double& CopyBytesPerUs() {
  static double v = 0;
  return v;
}

// FlashAttention-2's split count for FlashDecoding: with `units` CTAs of
// work without splitting (here sequences x KV heads, GQA heads packed),
// none when they fill most of the SMs; else the fewest splits whose waves
// are at least 85% as full as the best count's (at most 128, one per
// 128-token block). Written from the rule's description, not its code.
int32_t FlashDecodingSplits(int32_t units, int32_t sms, int32_t length) {
  if (units >= 0.8 * sms) return 1;
  const int32_t blocks = (length + 127) / 128;
  const int32_t max_splits = std::min({128, sms, blocks});
  auto efficiency = [&](int32_t s) {
    const double waves = static_cast<double>(units) * s / sms;
    return waves / std::ceil(waves);
  };
  double best = 0.0;
  for (int32_t s = 1; s <= max_splits; ++s) best = std::max(best, efficiency(s));
  for (int32_t s = 1; s <= max_splits; ++s) {
    if (efficiency(s) >= 0.85 * best) return s;
  }
  return 1;
}

void MeasureCopy(benchmark::State& state) {
  if (!gpu::HasGpu()) {
    state.SkipWithError("no GPU");
    return;
  }
  const size_t bytes = size_t{1} << 30;
  auto a = gpu::DeviceBuffer::Allocate(bytes);
  auto b = gpu::DeviceBuffer::Allocate(bytes);
  auto stream = gpu::Stream::Create();
  BENCH_OK(a.status());
  BENCH_OK(b.status());
  BENCH_OK(stream.status());
  auto timer = bench::EventTimer::Create();
  BENCH_OK(timer.status());
  std::vector<double> times;
  for (auto _ : state) {
    auto us = timer->TimeUs(stream->get(), [&] {
      return BANYAN_CUDA_STATUS(cudaMemcpyAsync(b->data(), a->data(), bytes, cudaMemcpyDeviceToDevice, stream->get()));
    });
    BENCH_OK(us.status());
    state.SetIterationTime(*us / 1e6);
    times.push_back(*us);
  }
  CopyBytesPerUs() = 2.0 * bytes / bench::Median(times);
  state.counters["TB_per_s"] = CopyBytesPerUs() / 1e6;
}

void RunShape(benchmark::State& state, const Shape& shape, const Variant& v) {
  if (!gpu::HasGpu()) {
    state.SkipWithError("no GPU");
    return;
  }
  const bench::LongSequences seqs = bench::MakeLongSequences(shape.batch, shape.length, kKvHeads, kHeadDim, 7);
  const AttentionPlan& plan = seqs.tree.plan;
  const KvLayout& layout = seqs.layout;
  const int64_t q_elems = int64_t{plan.num_queries} * kQHeads * kHeadDim;
  auto stream = gpu::Stream::Create();
  BENCH_OK(stream.status());
  auto kv = gpu::DeviceBuffer::Allocate(layout.TotalBytes());
  auto q = gpu::DeviceBuffer::Allocate(q_elems * 2);
  auto out = gpu::DeviceBuffer::Allocate(q_elems * 2);
  BENCH_OK(kv.status());
  BENCH_OK(q.status());
  BENCH_OK(out.status());
  BENCH_OK(testing::FillUniformDevice(kv->data(), DType::kBf16, layout.TotalBytes() / 2, 1, stream->get()));
  BENCH_OK(testing::FillUniformDevice(q->data(), DType::kBf16, q_elems, 2, stream->get()));
  AttentionArgs args;
  args.plan = &plan;
  args.layout = layout;
  args.kv_dtype = DType::kBf16;
  args.kv_pool = kv->data();
  args.q = q->data();
  args.q_dtype = DType::kBf16;
  args.num_q_heads = kQHeads;
  args.scale = 1.0f / std::sqrt(static_cast<float>(kHeadDim));
  args.out = out->data();
  args.out_dtype = DType::kBf16;
  auto runner = TreeAttention::Create();
  BENCH_OK(runner.status());
  (*runner)->set_stream_k(v.stream_k);
  int32_t splits = 0;
  if (v.fa2_splits) {
    int sms = 0;
    BENCH_OK(BANYAN_CUDA_STATUS(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0)));
    splits = FlashDecodingSplits(shape.batch * kKvHeads, sms, shape.length);
    (*runner)->set_min_chunk((shape.length + splits - 1) / splits);
  }
  BENCH_OK((*runner)->Prepare(args, v.path, stream->get()));
  auto timer = bench::EventTimer::Create();
  BENCH_OK(timer.status());
  // Warm-up for at least 200 ms of GPU time: after a shape's buffers are
  // allocated and filled the first ~20 runs of 32K-token shapes ran up to 17%
  // slow whatever the plan (H100, run192: the same plan 829 us first, 708 us
  // later), likely clocks coming back after the host's allocations.
  for (double warm_us = 0; warm_us < 2e5;) {
    auto us = timer->TimeUs(stream->get(), [&] { return (*runner)->Run(args, stream->get()); });
    BENCH_OK(us.status());
    warm_us += *us;
  }
  std::vector<double> times;
  for (auto _ : state) {
    auto us = timer->TimeUs(stream->get(), [&] { return (*runner)->Run(args, stream->get()); });
    BENCH_OK(us.status());
    state.SetIterationTime(*us / 1e6);
    times.push_back(*us);
  }
  const double median = bench::Median(times);
  const double kv_bytes = 2.0 * shape.batch * shape.length * kKvHeads * kHeadDim * 2;
  const WorkPlan& work = (*runner)->work_plan();
  state.counters["median_us"] = median;
  state.counters["TB_per_s"] = kv_bytes / median / 1e6;
  state.counters["items"] = static_cast<double>(work.items.size());
  state.counters["placement"] = static_cast<int>(work.placement);  // 0 chunks, 1 stream-K, 2 one wave
  state.counters["splits"] = splits;
  Results()[shape.Name()][v.tag] = median;
  Results()[shape.Name()]["bytes"] = kv_bytes;
}

void PrintTable() {
  const double copy = CopyBytesPerUs();
  std::printf("\ndevice copy %.2f TB/s (read + write); KV bandwidth = KV bytes / time\n", copy / 1e6);
  std::printf("%-12s %9s %9s %9s %9s %9s %9s %8s %8s %8s %8s %8s\n", "shape", "auto", "skcut", "fixed", "fa2split",
              "flatfd", "flatsk", "TB/s", "%copy", "fd/auto", "fix/auto", "sk/auto");
  for (const std::string& name : Order()) {
    auto& r = Results()[name];
    if (r["auto"] <= 0) continue;
    const double tbs = r["bytes"] / r["auto"] / 1e6;
    std::printf("%-12s %9.1f %9.1f %9.1f %9.1f %9.1f %9.1f %8.2f %7.1f%% %8.2f %8.2f %8.2f\n", name.c_str(), r["auto"],
                r["skcut"], r["fixed"], r["fa2split"], r["flatfd"], r["flatsk"], tbs,
                copy > 0 ? 100.0 * tbs * 1e6 / copy : 0.0, r["flatfd"] / r["auto"], r["fixed"] / r["auto"],
                r["skcut"] / r["auto"]);
  }
}

}  // namespace
}  // namespace banyan::attention

int main(int argc, char** argv) {
  using namespace banyan::attention;
  benchmark::RegisterBenchmark("copy/1GiB", MeasureCopy)
      ->UseManualTime()
      ->Unit(benchmark::kMicrosecond)
      ->Iterations(20);
  for (const int32_t batch : {1, 2, 3, 4, 8, 16, 24}) {
    for (const int32_t length : {32768, 65536, 131072, 262144}) {
      if (batch > 8 && length > 65536) continue;  // batch x KV heads >= 128: fixed splits fill the grid
      const Shape shape{batch, length};
      Order().push_back(shape.Name());
      for (const Variant& v : kVariants) {
        benchmark::RegisterBenchmark(absl::StrCat("long/", v.tag, "/", shape.Name()).c_str(),
                                     [shape, v](benchmark::State& st) { RunShape(st, shape, v); })
            ->UseManualTime()
            ->Unit(benchmark::kMicrosecond)
            ->Iterations(10);
      }
    }
  }
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  PrintTable();
  return 0;
}

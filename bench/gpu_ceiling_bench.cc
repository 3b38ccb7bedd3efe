// The device's two ceilings, measured the way METHOD.md asks: a large
// device-to-device copy (bytes read + bytes written) and a large bf16 GEMM
// through cuBLAS on random data. Every "floor" in bench/RESULTS.md divides by
// these two numbers.
//
//   gpu_ceiling_bench --benchmark_counters_tabular=true
//
// Shapes: copy 256 MiB / 1 GiB; GEMM 4096^3 and 8192^3 (m = n = k).
#include <vector>

#include "bench/bench_status.h"
#include "benchmark/benchmark.h"
#include "banyan/status_macros.h"
#include "sdk/base/half.h"
#include "sdk/base/rng.h"
#include "sdk/gpu/blas.h"
#include "sdk/gpu/cuda_status.h"
#include "sdk/gpu/device_buffer.h"
#include "sdk/gpu/device_info.h"

namespace banyan::gpu {
namespace {

// Fills a device buffer with random bf16 normals (never time on zeros).
absl::Status FillRandomBf16(DeviceBuffer& buf, uint64_t seed) {
  std::vector<Bf16> host(buf.size() / 2);
  Rng rng(seed);
  for (auto& x : host) x = Bf16(rng.Uniform(-1.0f, 1.0f));
  BANYAN_RETURN_IF_ERROR(buf.CopyFromHost(host.data(), host.size() * 2));
  return BANYAN_CUDA_STATUS(cudaDeviceSynchronize());
}

void BM_DeviceCopy(benchmark::State& state) {
  if (!HasGpu()) {
    state.SkipWithError("no GPU");
    return;
  }
  const size_t bytes = static_cast<size_t>(state.range(0)) << 20;
  auto src = DeviceBuffer::Allocate(bytes);
  auto dst = DeviceBuffer::Allocate(bytes);
  auto stream = Stream::Create();
  auto start = Event::Create();
  auto stop = Event::Create();
  BENCH_OK(src.status());
  BENCH_OK(dst.status());
  BENCH_OK(stream.status());
  BENCH_OK(start.status());
  BENCH_OK(stop.status());
  BENCH_OK(src->Fill(0x3c));
  for (int i = 0; i < 3; ++i) {  // warm-up
    BENCH_OK(BANYAN_CUDA_STATUS(
        cudaMemcpyAsync(dst->data(), src->data(), bytes, cudaMemcpyDeviceToDevice, stream->get())));
  }
  for (auto _ : state) {
    BENCH_OK(start->Record(stream->get()));
    BENCH_OK(BANYAN_CUDA_STATUS(
        cudaMemcpyAsync(dst->data(), src->data(), bytes, cudaMemcpyDeviceToDevice, stream->get())));
    BENCH_OK(stop->Record(stream->get()));
    BENCH_OK(stream->Synchronize());
    auto ms = stop->ElapsedMsSince(*start);
    BENCH_OK(ms.status());
    state.SetIterationTime(*ms / 1e3);
  }
  state.counters["TB/s"] = benchmark::Counter(
      2.0 * bytes * state.iterations() / 1e12, benchmark::Counter::kIsRate);
}
BENCHMARK(BM_DeviceCopy)->Arg(256)->Arg(1024)->UseManualTime()->Unit(benchmark::kMicrosecond)
    ->Repetitions(5)->ReportAggregatesOnly(true);

void BM_GemmBf16(benchmark::State& state) {
  if (!HasGpu()) {
    state.SkipWithError("no GPU");
    return;
  }
  const int n = static_cast<int>(state.range(0));
  const size_t elems = static_cast<size_t>(n) * n;
  auto a = DeviceBuffer::Allocate(elems * 2);
  auto b = DeviceBuffer::Allocate(elems * 2);
  auto c = DeviceBuffer::Allocate(elems * 2);
  auto blas = BlasHandle::Create();
  auto stream = Stream::Create();
  auto start = Event::Create();
  auto stop = Event::Create();
  BENCH_OK(a.status());
  BENCH_OK(b.status());
  BENCH_OK(c.status());
  BENCH_OK(blas.status());
  BENCH_OK(stream.status());
  BENCH_OK(start.status());
  BENCH_OK(stop.status());
  BENCH_OK(FillRandomBf16(*a, 1));
  BENCH_OK(FillRandomBf16(*b, 2));
  const GemmArgs args{.m = n, .n = n, .k = n, .a = a->data(), .b = b->data(), .c = c->data(),
                      .ab_dtype = DType::kBf16, .c_dtype = DType::kBf16};
  for (int i = 0; i < 3; ++i) BENCH_OK(Gemm(*blas, args, stream->get()));
  for (auto _ : state) {
    BENCH_OK(start->Record(stream->get()));
    BENCH_OK(Gemm(*blas, args, stream->get()));
    BENCH_OK(stop->Record(stream->get()));
    BENCH_OK(stream->Synchronize());
    auto ms = stop->ElapsedMsSince(*start);
    BENCH_OK(ms.status());
    state.SetIterationTime(*ms / 1e3);
  }
  state.counters["TFLOP/s"] = benchmark::Counter(
      2.0 * n * n * static_cast<double>(n) * state.iterations() / 1e12, benchmark::Counter::kIsRate);
}
BENCHMARK(BM_GemmBf16)->Arg(4096)->Arg(8192)->UseManualTime()->Unit(benchmark::kMicrosecond)
    ->Repetitions(5)->ReportAggregatesOnly(true);

}  // namespace
}  // namespace banyan::gpu

BENCHMARK_MAIN();

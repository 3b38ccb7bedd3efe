// Decode attention over 256K-1M tokens on 1, 2 and 4 GPUs of one host
// (DESIGN.md "Multi-GPU"): h32/8, head dim 128, bf16, 16-token pages, a batch
// of 1 or 4 sequences. One GPU: TreeAttention over the whole plan. p GPUs:
// the plan's KV cut by token range (ShardPlan: each device its own pool of
// 1/p of the pages), TreeAttention per device (fp32 out and lse), then
// CombineShards (NCCL all-reduces of the max and of the numerators and
// denominators, tree-attention Algorithm 3).
// Time: wall clock of one step (each device's attention launched as a CUDA
// graph, then the combine; wait for all), median of the iterations;
// `combine` = CombineShards alone (queued and waited for).
//
//   NCCL_NVLS_ENABLE=0 multi_gpu_decode_bench     prints a table last
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "attention/shard_plan.h"
#include "attention/testing/device_fill.h"
#include "attention/testing/random_plan.h"
#include "attention/tree_allreduce.h"
#include "attention/tree_attention.h"
#include "banyan/status_macros.h"
#include "bench/bench_median.h"
#include "bench/long_sequences.h"
#include "sdk/gpu/cuda_status.h"
#include "sdk/gpu/device_buffer.h"

namespace banyan::attention {
namespace {

constexpr int32_t kQHeads = 32, kKvHeads = 8, kHeadDim = 128;
constexpr int kIterations = 20;

struct Device {
  std::unique_ptr<gpu::Stream> stream;
  gpu::DeviceBuffer pool, q, out, lse, scratch;
  std::unique_ptr<TreeAttention> runner;
  AttentionArgs args;
};

double NowUs() {
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// One step on `shards` devices (1: the plain single-GPU path): median us of
// the whole step and of the combine alone.
absl::Status TimeStep(int32_t batch, int32_t length, int shards, double* step_us, double* combine_us) {
  const bench::LongSequences seqs = bench::MakeLongSequences(batch, length, kKvHeads, kHeadDim, 5);
  const testing::TreePlan& tree = seqs.tree;
  BANYAN_ASSIGN_OR_RETURN(std::vector<PlanShard> plan_shards, ShardPlan(tree.plan, shards));
  const int64_t pairs = int64_t{tree.plan.num_queries} * kQHeads;
  std::vector<ncclComm_t> comms(shards);
  std::vector<int> ordinals(shards);
  for (int i = 0; i < shards; ++i) ordinals[i] = i;
  if (shards > 1) {
    BANYAN_RETURN_IF_ERROR(
        gpu::NcclStatus(ncclCommInitAll(comms.data(), shards, ordinals.data()), "ncclCommInitAll", __FILE__, __LINE__));
  }
  std::vector<Device> dev(shards);
  std::vector<ShardState> states(shards);
  for (int i = 0; i < shards; ++i) {
    Device& d = dev[i];
    BANYAN_RETURN_IF_ERROR(BANYAN_CUDA_STATUS(cudaSetDevice(i)));
    BANYAN_ASSIGN_OR_RETURN(gpu::Stream stream, gpu::Stream::Create());
    d.stream = std::make_unique<gpu::Stream>(std::move(stream));
    KvLayout layout = seqs.layout;  // this device's pool: its shard's pages only
    layout.num_pages = static_cast<int64_t>(plan_shards[i].source_pages.size());
    BANYAN_ASSIGN_OR_RETURN(d.pool, gpu::DeviceBuffer::Allocate(layout.TotalBytes()));
    BANYAN_ASSIGN_OR_RETURN(d.q, gpu::DeviceBuffer::Allocate(pairs * kHeadDim * 2));
    BANYAN_ASSIGN_OR_RETURN(d.out, gpu::DeviceBuffer::Allocate(pairs * kHeadDim * 4));
    BANYAN_ASSIGN_OR_RETURN(d.lse, gpu::DeviceBuffer::Allocate(pairs * 4));
    BANYAN_ASSIGN_OR_RETURN(d.scratch, gpu::DeviceBuffer::Allocate(CombineScratchFloats(pairs, kHeadDim, shards) * 4));
    BANYAN_RETURN_IF_ERROR(
        testing::FillUniformDevice(d.pool.data(), DType::kBf16, layout.TotalBytes() / 2, 1 + i, d.stream->get()));
    BANYAN_RETURN_IF_ERROR(testing::FillUniformDevice(d.q.data(), DType::kBf16, pairs * kHeadDim, 9, d.stream->get()));
    BANYAN_ASSIGN_OR_RETURN(d.runner, TreeAttention::Create());
    d.args.plan = &plan_shards[i].plan;
    d.args.layout = layout;
    d.args.kv_dtype = DType::kBf16;
    d.args.kv_pool = d.pool.data();
    d.args.q = d.q.data();
    d.args.q_dtype = DType::kBf16;
    d.args.num_q_heads = kQHeads;
    d.args.scale = 1.0f / std::sqrt(static_cast<float>(kHeadDim));
    d.args.out = d.out.data();
    // One GPU: bf16 out, no lse (what a single-GPU step writes); shards: fp32 out and lse for the combine.
    d.args.out_dtype = shards > 1 ? DType::kF32 : DType::kBf16;
    d.args.lse = shards > 1 ? d.lse.As<float>() : nullptr;
    BANYAN_RETURN_IF_ERROR(d.runner->Prepare(d.args, PathChoice::kAuto, d.stream->get()));
    states[i] = {i, comms[i], d.stream->get(), d.out.As<float>(), d.lse.As<float>(), d.scratch.As<float>()};
  }
  auto sync_all = [&]() -> absl::Status {
    for (int i = 0; i < shards; ++i) {
      BANYAN_RETURN_IF_ERROR(BANYAN_CUDA_STATUS(cudaSetDevice(i)));
      BANYAN_RETURN_IF_ERROR(dev[i].stream->Synchronize());
    }
    return absl::OkStatus();
  };
  // Each device's attention as a CUDA graph (one launch from the host per
  // device, so that the devices start within a few microseconds of each other).
  std::vector<cudaGraphExec_t> graphs(shards, nullptr);
  for (int i = 0; i < shards; ++i) {
    BANYAN_RETURN_IF_ERROR(BANYAN_CUDA_STATUS(cudaSetDevice(i)));
    BANYAN_RETURN_IF_ERROR(dev[i].runner->Run(dev[i].args, dev[i].stream->get()));  // warm, outside the capture
    BANYAN_RETURN_IF_ERROR(
        BANYAN_CUDA_STATUS(cudaStreamBeginCapture(dev[i].stream->get(), cudaStreamCaptureModeThreadLocal)));
    BANYAN_RETURN_IF_ERROR(dev[i].runner->Run(dev[i].args, dev[i].stream->get()));
    cudaGraph_t graph = nullptr;
    BANYAN_RETURN_IF_ERROR(BANYAN_CUDA_STATUS(cudaStreamEndCapture(dev[i].stream->get(), &graph)));
    const absl::Status made = BANYAN_CUDA_STATUS(cudaGraphInstantiate(&graphs[i], graph, 0));
    cudaGraphDestroy(graph);
    BANYAN_RETURN_IF_ERROR(made);
  }
  auto step = [&](bool attend, bool combine) -> absl::Status {
    for (int i = 0; attend && i < shards; ++i) {
      BANYAN_RETURN_IF_ERROR(BANYAN_CUDA_STATUS(cudaSetDevice(i)));
      BANYAN_RETURN_IF_ERROR(BANYAN_CUDA_STATUS(cudaGraphLaunch(graphs[i], dev[i].stream->get())));
    }
    if (combine && shards > 1) BANYAN_RETURN_IF_ERROR(CombineShards(states, pairs, kHeadDim));
    return sync_all();
  };
  BANYAN_RETURN_IF_ERROR(sync_all());
  for (int i = 0; i < 3; ++i) BANYAN_RETURN_IF_ERROR(step(true, true));
  std::vector<double> steps, combines;
  for (int it = 0; it < kIterations; ++it) {
    double t0 = NowUs();
    BANYAN_RETURN_IF_ERROR(step(true, true));
    steps.push_back(NowUs() - t0);
    t0 = NowUs();
    BANYAN_RETURN_IF_ERROR(step(false, true));
    combines.push_back(NowUs() - t0);
  }
  *step_us = bench::Median(steps);
  *combine_us = shards > 1 ? bench::Median(combines) : 0.0;
  for (int i = 0; i < shards; ++i) {
    BANYAN_RETURN_IF_ERROR(BANYAN_CUDA_STATUS(cudaSetDevice(i)));
    cudaGraphExecDestroy(graphs[i]);
    dev[i] = Device{};
    if (shards > 1) ncclCommDestroy(comms[i]);
  }
  return BANYAN_CUDA_STATUS(cudaSetDevice(0));
}

}  // namespace
}  // namespace banyan::attention

int main() {
  using namespace banyan::attention;
  const int devices = banyan::bench::PrintGpus();
  if (devices == 0) return 0;
  std::printf("%-14s %6s %10s %10s %8s %10s\n", "shape", "gpus", "step_us", "combine_us", "speedup", "KV GB/s/gpu");
  for (const int32_t batch : {1, 4}) {
    for (const int32_t length : {262144, 524288, 1048576}) {
      const std::string name = absl::StrFormat("B%d N%dK", batch, length / 1024);
      double one = 0.0;
      for (const int shards : {1, 2, 4}) {
        if (shards > devices) continue;
        double step = 0.0, combine = 0.0;
        const absl::Status status = TimeStep(batch, length, shards, &step, &combine);
        if (!status.ok()) {
          std::printf("%-14s %6d error: %s\n", name.c_str(), shards, std::string(status.message()).c_str());
          continue;
        }
        if (shards == 1) one = step;
        const double kv_bytes = 2.0 * batch * length * kKvHeads * kHeadDim * 2;
        std::printf("%-14s %6d %10.1f %10.1f %8.2f %10.0f\n", name.c_str(), shards, step, combine,
                    one > 0 ? one / step : 0.0, kv_bytes / shards / step / 1e3);
        std::fflush(stdout);
      }
    }
  }
  return 0;
}

// SparQ against dense decode attention (DESIGN.md "SparQ at 1/8 transfer ratio
// (r = 16..32 of 128, k = S / 8): at least 3x faster than dense at S >= 16K").
// B sequences of S tokens, one query token each, 32 query / 8 KV heads of 128,
// bf16, 16-token pages in order, local window 64. dense = TreeAttention's
// defaults over the same KV (the long-context placement, long_decode_bench);
// sparq r16 / r32 = SparqAttention::Run on the path Prepare picks (cluster =
// its cluster size, 0 for the eight launches), r16_8L = the eight launches
// (set_cluster_size(-1)); Prepare, the transposed K copy and the V means are
// outside the timed region. Time: cudaEvents around the call, median of 20
// after >= 200 ms of warm-up.
//
//   sparq_bench      prints a table
#include <cuda_runtime_api.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "attention/sparq.h"
#include "attention/testing/device_fill.h"
#include "attention/testing/random_plan.h"
#include "attention/tree_attention.h"
#include "banyan/status_macros.h"
#include "bench/bench_median.h"
#include "bench/event_timer.h"
#include "bench/long_sequences.h"
#include "sdk/gpu/device_buffer.h"

namespace banyan::attention {
namespace {

constexpr int32_t kQHeads = 32, kKvHeads = 8, kHeadDim = 128;

// Median microseconds of `run` on `stream` after >= 200 ms of warm-up.
template <typename Run>
absl::StatusOr<double> TimeIt(cudaStream_t stream, Run&& run) {
  BANYAN_ASSIGN_OR_RETURN(bench::EventTimer timer, bench::EventTimer::Create());
  for (double warm = 0; warm < 2e5;) {
    BANYAN_ASSIGN_OR_RETURN(const double us, timer.TimeUs(stream, run));
    warm += us;
  }
  std::vector<double> times;
  for (int i = 0; i < 20; ++i) {
    BANYAN_ASSIGN_OR_RETURN(const double us, timer.TimeUs(stream, run));
    times.push_back(us);
  }
  return bench::Median(times);
}

absl::Status Row(int32_t batch, int32_t length) {
  const bench::LongSequences seqs = bench::MakeLongSequences(batch, length, kKvHeads, kHeadDim, 3);
  const AttentionPlan& plan = seqs.tree.plan;
  const KvLayout& layout = seqs.layout;
  BANYAN_ASSIGN_OR_RETURN(gpu::Stream stream, gpu::Stream::Create());
  const int64_t q_elems = int64_t{batch} * kQHeads * kHeadDim;
  BANYAN_ASSIGN_OR_RETURN(gpu::DeviceBuffer kv, gpu::DeviceBuffer::Allocate(layout.TotalBytes()));
  BANYAN_ASSIGN_OR_RETURN(gpu::DeviceBuffer kt, gpu::DeviceBuffer::Allocate(layout.TotalBytes() / 2));
  BANYAN_ASSIGN_OR_RETURN(gpu::DeviceBuffer q, gpu::DeviceBuffer::Allocate(q_elems * 2));
  BANYAN_ASSIGN_OR_RETURN(gpu::DeviceBuffer out, gpu::DeviceBuffer::Allocate(q_elems * 2));
  BANYAN_ASSIGN_OR_RETURN(gpu::DeviceBuffer v_mean,
                          gpu::DeviceBuffer::Allocate(int64_t{batch} * kKvHeads * kHeadDim * 4));
  BANYAN_RETURN_IF_ERROR(testing::FillUniformDevice(kv.data(), DType::kBf16, layout.TotalBytes() / 2, 1, stream.get()));
  BANYAN_RETURN_IF_ERROR(testing::FillUniformDevice(q.data(), DType::kBf16, q_elems, 2, stream.get()));
  BANYAN_RETURN_IF_ERROR(
      testing::FillUniformDevice(v_mean.data(), DType::kF32, int64_t{batch} * kKvHeads * kHeadDim, 3, stream.get()));
  BANYAN_RETURN_IF_ERROR(WriteKTransposed(layout, DType::kBf16, kv.data(), kt.data(), stream.get()));
  // Dense.
  AttentionArgs args;
  args.plan = &plan;
  args.layout = layout;
  args.kv_dtype = DType::kBf16;
  args.kv_pool = kv.data();
  args.q = q.data();
  args.q_dtype = DType::kBf16;
  args.num_q_heads = kQHeads;
  args.scale = 1.0f / std::sqrt(static_cast<float>(kHeadDim));
  args.out = out.data();
  args.out_dtype = DType::kBf16;
  BANYAN_ASSIGN_OR_RETURN(auto dense, TreeAttention::Create());
  BANYAN_RETURN_IF_ERROR(dense->Prepare(args, PathChoice::kAuto, stream.get()));
  BANYAN_ASSIGN_OR_RETURN(const double dense_us, TimeIt(stream.get(), [&] { return dense->Run(args, stream.get()); }));
  // SparQ: the plan's arrays from the host (Prepare validates and uploads them).
  SparqArgs s;
  s.layout = layout;
  s.kv_dtype = DType::kBf16;
  s.kv_pool = kv.data();
  s.k_transposed = kt.data();
  s.num_seqs = batch;
  s.seq_page_indptr = plan.segment_page_indptr.data();
  s.page_indices = plan.page_indices.data();
  s.seq_length = plan.segment_length.data();
  s.max_length = length;
  s.v_mean = v_mean.As<float>();
  s.q = q.data();
  s.q_dtype = DType::kBf16;
  s.num_q_heads = kQHeads;
  s.scale = args.scale;
  s.out = out.data();
  s.out_dtype = DType::kBf16;
  BANYAN_ASSIGN_OR_RETURN(auto sparq, SparqAttention::Create());
  // r = 16 and 32 on the path Prepare picks, r = 16 on the eight launches.
  double sparq_us[3] = {0, 0, 0};
  const int32_t rs[3] = {16, 32, 16};
  int32_t cluster = 0;
  for (int i = 0; i < 3; ++i) {
    sparq->set_cluster_size(i == 2 ? -1 : 0);
    s.config = SparqConfig{rs[i], length / 8, 64, true};
    BANYAN_RETURN_IF_ERROR(sparq->Prepare(s, stream.get()));
    if (i == 0) cluster = sparq->cluster_size();
    BANYAN_ASSIGN_OR_RETURN(sparq_us[i], TimeIt(stream.get(), [&] { return sparq->Run(s, stream.get()); }));
  }
  std::printf("B%d S%-7d %10.1f %10.1f %10.1f %10.1f %8d %8.2f %8.2f %8.2f\n", batch, length, dense_us, sparq_us[0],
              sparq_us[1], sparq_us[2], cluster, dense_us / sparq_us[0], dense_us / sparq_us[1],
              dense_us / sparq_us[2]);
  std::fflush(stdout);
  return absl::OkStatus();
}

}  // namespace
}  // namespace banyan::attention

int main(int argc, char** argv) {
  if (banyan::bench::PrintGpus() == 0) return 0;
  std::printf("h32/8 D128 bf16, k = S / 8, local window 64\n%-10s %10s %10s %10s %10s %8s %8s %8s %8s\n", "shape",
              "dense_us", "r16_us", "r32_us", "r16_8L_us", "cluster", "x_r16", "x_r32", "x_r16_8L");
  if (argc == 3) {  // one row: sparq_bench BATCH LENGTH (e.g. under ncu)
    const absl::Status status = banyan::attention::Row(std::atoi(argv[1]), std::atoi(argv[2]));
    if (!status.ok()) std::printf("error: %s\n", std::string(status.message()).c_str());
    return 0;
  }
  for (const int32_t batch : {1, 4}) {
    for (const int32_t length : {16384, 32768, 65536, 131072}) {
      const absl::Status status = banyan::attention::Row(batch, length);
      if (!status.ok()) std::printf("B%d S%d error: %s\n", batch, length, std::string(status.message()).c_str());
    }
  }
  return 0;
}

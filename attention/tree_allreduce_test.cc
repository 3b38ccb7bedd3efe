// Multi-GPU tests (skip below two GPUs): a plan sharded by token range over
// 2..4 devices (shard_plan.h), each device's TreeAttention over its own pool,
// the partial states combined with NCCL (tree_allreduce.h), against the CPU
// reference, on every device, outputs poisoned (NaN) before each run.
#include "attention/tree_allreduce.h"

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <vector>

#include "attention/reference/reference_attention.h"
#include "attention/shard_plan.h"
#include "attention/testing/random_plan.h"
#include "attention/tree_attention.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "sdk/base/status_testing.h"
#include "sdk/gpu/cuda_status.h"
#include "sdk/gpu/device_buffer.h"

namespace banyan::attention {
namespace {

using ::banyan::testing::StatusIs;

int DeviceCount() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) return 0;
  return n;
}

// One device's copies of its shard and its runner.
struct Device {
  int ordinal = 0;
  std::unique_ptr<gpu::Stream> stream;
  gpu::DeviceBuffer pool, q, out, lse, scratch;
  std::unique_ptr<TreeAttention> runner;
};

struct Case {
  std::vector<testing::TreeNode> nodes;
  int32_t kv_heads, q_heads, head_dim;
};

// A long sequence (h32/8, D 128) and a tree of 12 leaves under a long prefix
// (h8/1, D 64; the leaves' own tokens are on few shards) over 2 and all (up
// to 4) devices: every device ends with the reference's out and lse.
TEST(TreeAllReduceGpuTest, ShardedAttentionMatchesTheReference) {
  const int devices = std::min(DeviceCount(), 4);
  if (devices < 2) GTEST_SKIP() << "needs two GPUs, found " << devices;
  std::vector<testing::TreeNode> tree_nodes = {{-1, 30000}};
  for (int i = 0; i < 12; ++i) tree_nodes.push_back({0, 40 + 37 * i});
  for (const Case& c : {Case{{{-1, 70001}}, 8, 32, 128}, Case{tree_nodes, 1, 8, 64}}) {
    Rng rng(c.head_dim + static_cast<int>(c.nodes.size()));
    const testing::TreePlan tree = testing::BuildTreePlan(c.nodes, {}, rng);
    const testing::AttentionProblem p =
        testing::MakeProblem(tree, {c.kv_heads, c.q_heads, c.head_dim, 2, 1, DType::kBf16, DType::kBf16}, rng);
    const int64_t pairs = int64_t{tree.plan.num_queries} * c.q_heads;
    const int64_t n = pairs * c.head_dim;
    std::vector<float> want(n), want_lse(pairs);
    BANYAN_ASSERT_OK(ReferenceAttention(p.Args(tree.plan, want.data(), DType::kF32, want_lse.data())));
    for (const int shards : {2, devices}) {
      SCOPED_TRACE(::testing::Message() << "D" << c.head_dim << " shards " << shards);
      BANYAN_ASSERT_OK_AND_ASSIGN(std::vector<PlanShard> plan_shards, ShardPlan(tree.plan, shards));
      std::vector<int> ordinals(shards);
      for (int i = 0; i < shards; ++i) ordinals[i] = i;
      std::vector<ncclComm_t> comms(shards);
      BANYAN_ASSERT_OK(gpu::NcclStatus(ncclCommInitAll(comms.data(), shards, ordinals.data()), "ncclCommInitAll",
                                       __FILE__, __LINE__));
      std::vector<Device> dev(shards);
      std::vector<ShardState> states(shards);
      for (int i = 0; i < shards; ++i) {
        Device& d = dev[i];
        d.ordinal = i;
        BANYAN_ASSERT_OK(BANYAN_CUDA_STATUS(cudaSetDevice(i)));
        BANYAN_ASSERT_OK_AND_ASSIGN(gpu::Stream stream, gpu::Stream::Create());
        d.stream = std::make_unique<gpu::Stream>(std::move(stream));
        KvLayout shard_layout;
        const std::vector<uint8_t> pool = testing::GatherPages(p, plan_shards[i].source_pages, &shard_layout);
        BANYAN_ASSERT_OK_AND_ASSIGN(d.pool, gpu::DeviceBuffer::Allocate(pool.size()));
        BANYAN_ASSERT_OK_AND_ASSIGN(d.q, gpu::DeviceBuffer::Allocate(p.q.size()));
        BANYAN_ASSERT_OK_AND_ASSIGN(d.out, gpu::DeviceBuffer::Allocate(n * 4));
        BANYAN_ASSERT_OK_AND_ASSIGN(d.lse, gpu::DeviceBuffer::Allocate(pairs * 4));
        BANYAN_ASSERT_OK_AND_ASSIGN(d.scratch,
                                    gpu::DeviceBuffer::Allocate(CombineScratchFloats(pairs, c.head_dim, shards) * 4));
        BANYAN_ASSERT_OK(d.pool.CopyFromHost(pool.data(), pool.size()));
        BANYAN_ASSERT_OK(d.q.CopyFromHost(p.q.data(), p.q.size()));
        BANYAN_ASSERT_OK(d.out.Fill(0xff, d.stream->get()));  // NaN
        BANYAN_ASSERT_OK(d.lse.Fill(0xff, d.stream->get()));
        BANYAN_ASSERT_OK_AND_ASSIGN(d.runner, TreeAttention::Create());
        AttentionArgs args = p.Args(plan_shards[i].plan, d.out.data(), DType::kF32, d.lse.As<float>());
        args.layout = shard_layout;
        args.kv_pool = d.pool.data();
        args.q = d.q.data();
        BANYAN_ASSERT_OK(d.runner->Attend(args, PathChoice::kAuto, d.stream->get()));
        states[i] = {i, comms[i], d.stream->get(), d.out.As<float>(), d.lse.As<float>(), d.scratch.As<float>()};
      }
      BANYAN_ASSERT_OK(CombineShards(states, pairs, c.head_dim));
      for (int i = 0; i < shards; ++i) {
        BANYAN_ASSERT_OK(BANYAN_CUDA_STATUS(cudaSetDevice(i)));
        BANYAN_ASSERT_OK(dev[i].stream->Synchronize());
        std::vector<float> got(n), got_lse(pairs);
        BANYAN_ASSERT_OK(dev[i].out.CopyToHost(got.data(), n * 4));
        BANYAN_ASSERT_OK(dev[i].lse.CopyToHost(got_lse.data(), pairs * 4));
        const double err = testing::RelativeError(testing::ToDoubles(got.data(), DType::kF32, n),
                                                  testing::ToDoubles(want.data(), DType::kF32, n));
        const double lse_err = testing::RelativeError(testing::ToDoubles(got_lse.data(), DType::kF32, pairs),
                                                      testing::ToDoubles(want_lse.data(), DType::kF32, pairs));
        std::printf("[ shards ] D%d shards %d device %d rel_err %.3g lse_rel_err %.3g\n", c.head_dim, shards, i, err,
                    lse_err);
        EXPECT_LT(err, 1e-2) << "device " << i;
        EXPECT_LT(lse_err, 2e-3) << "device " << i;
      }
      for (int i = 0; i < shards; ++i) {  // each device's buffers freed with it current
        BANYAN_ASSERT_OK(BANYAN_CUDA_STATUS(cudaSetDevice(i)));
        dev[i] = Device{};
        ncclCommDestroy(comms[i]);
      }
    }
  }
  BANYAN_ASSERT_OK(BANYAN_CUDA_STATUS(cudaSetDevice(0)));
}

// Bad arguments are refused before anything is queued.
TEST(TreeAllReduceGpuTest, BadArgumentsAreRefused) {
  EXPECT_THAT(CombineShards({}, 4, 64), StatusIs(absl::StatusCode::kInvalidArgument));
  ShardState s;
  EXPECT_THAT(CombineShards({s}, 4, 64), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(CombineShards({s}, -1, 64), StatusIs(absl::StatusCode::kInvalidArgument));
}

}  // namespace
}  // namespace banyan::attention

// The long-context benchmarks' common setup (long_decode_bench,
// sparq_bench, multi_gpu_decode_bench): `batch` sequences of `length`
// tokens each, one query row per sequence, 16-token pages handed out in
// order from slot 0 (what kv_tree gives a long prompt), and the bf16 pool
// layout of one layer for them.
#ifndef BANYAN_BENCH_LONG_SEQUENCES_H_
#define BANYAN_BENCH_LONG_SEQUENCES_H_

#include <cuda_runtime_api.h>

#include <cstdint>
#include <cstdio>
#include <vector>

#include "attention/kv_layout.h"
#include "attention/testing/random_plan.h"

namespace banyan::bench {

struct LongSequences {
  attention::testing::TreePlan tree;
  attention::KvLayout layout;
};

inline LongSequences MakeLongSequences(int32_t batch, int32_t length, int32_t kv_heads, int32_t head_dim,
                                       uint64_t seed) {
  Rng rng(seed);
  attention::testing::PlanOptions options;
  options.random_first_slot = false;
  options.shuffle_pages = false;
  LongSequences s;
  s.tree = attention::testing::BuildTreePlan(
      std::vector<attention::testing::TreeNode>(batch, attention::testing::TreeNode{-1, length}), options, rng);
  s.layout.num_layers = 1;
  s.layout.num_kv_heads = kv_heads;
  s.layout.head_dim = head_dim;
  s.layout.page_size = s.tree.plan.page_size;
  s.layout.num_pages = s.tree.num_pages;
  s.layout.dtype_bytes = 2;
  return s;
}

// Prints "<count> x <GPU name>" (or "no GPU"); returns the GPU count.
inline int PrintGpus() {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices < 1) {
    std::printf("no GPU\n");
    return 0;
  }
  cudaDeviceProp prop{};
  cudaGetDeviceProperties(&prop, 0);
  std::printf("%d x %s\n", devices, prop.name);
  return devices;
}

}  // namespace banyan::bench

#endif  // BANYAN_BENCH_LONG_SEQUENCES_H_

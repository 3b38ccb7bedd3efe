// CombineShards: the partial attention states of the shards of one plan
// (shard_plan.h: each device attended its own token range of the KV, with the
// same query rows) combined across devices into the whole attention, on every
// device at once. Tree-attention 5.2 / Algorithm 3 all-reduces the max, then
// the numerators n = o exp(lse - m) and denominators d = exp(lse - m); here one
// NCCL group all-gathers every shard's (o, lse) instead and each device merges
// them itself (m = max lse_i, o = sum_i exp(lse_i - m) o_i / sum_i exp(lse_i - m),
// lse = m + log sum_i exp(lse_i - m)): the same result with one collective's
// latency instead of two (the data is a few KB per row). The communication is
// 4 * rows * heads * (head_dim + 1) bytes per device, whatever the context length.
//
//   std::vector<ShardState> s = ...;   // per device: its TreeAttention's fp32 out and lse
//   BANYAN_RETURN_IF_ERROR(CombineShards(s, rows * num_q_heads, head_dim));
//
// Ownership: every pointer and handle is borrowed; the work is queued on each
// shard's stream (asynchronous: the buffers must live until it has run).
// Thread-compatible: one caller drives all of the shards' devices (the
// collectives of all ranks go in one NCCL group).
#ifndef BANYAN_ATTENTION_TREE_ALLREDUCE_H_
#define BANYAN_ATTENTION_TREE_ALLREDUCE_H_

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <cstdint>

#include "absl/status/status.h"
#include "absl/types/span.h"

namespace banyan::attention {

// One device's side. shards[i] must be rank i of the communicators.
struct ShardState {
  int device = 0;             // CUDA device ordinal
  ncclComm_t comm = nullptr;  // this device's communicator
  cudaStream_t stream = nullptr;
  float* out = nullptr;      // [rows_heads][head_dim]: the shard's normalized o in, the combined o out
  float* lse = nullptr;      // [rows_heads], natural log: the shard's in (-inf: empty), the combined out
  float* scratch = nullptr;  // CombineScratchFloats(rows_heads, head_dim, shards) floats on `device`
};

// Floats of scratch one device needs for rows_heads (row, head) pairs and
// `shards` shards (every shard's o and lse).
constexpr int64_t CombineScratchFloats(int64_t rows_heads, int32_t head_dim, int32_t shards) {
  return int64_t{shards} * rows_heads * (head_dim + 1);
}

// Combines in place on every shard's device (above). A (row, head) whose lse
// is -inf on every shard stays empty (o = 0, lse = -inf). Returns
// kInvalidArgument for no shards, rows_heads < 0, head_dim < 1 or a null
// pointer; the first CUDA or NCCL error otherwise (the shards' buffers are
// then undefined).
[[nodiscard]] absl::Status CombineShards(absl::Span<const ShardState> shards, int64_t rows_heads, int32_t head_dim);

}  // namespace banyan::attention

#endif  // BANYAN_ATTENTION_TREE_ALLREDUCE_H_

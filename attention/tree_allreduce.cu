#include <math_constants.h>

#include <functional>

#include "absl/strings/str_cat.h"
#include "attention/tree_allreduce.h"
#include "banyan/status_macros.h"
#include "sdk/gpu/cuda_status.h"

namespace banyan::attention {
namespace {

constexpr int kThreads = 256;

// Per (row, head) pair and output column: the merge of the `shards` gathered
// partials (o_all [shards][pairs][d], lse_all [shards][pairs], natural log)
// into out and lse; an empty partial (lse -inf) weighs 0, an all-empty pair
// gives o = 0, lse = -inf. Thread (pair, d) writes the pair's lse.
__global__ void MergeGathered(const float* __restrict__ o_all, const float* __restrict__ lse_all, int32_t shards,
                              float* __restrict__ out /* [pairs][d] */, float* __restrict__ lse /* [pairs] */,
                              int64_t pairs, int32_t d) {
  const int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  if (i >= pairs * (d + 1)) return;
  const int64_t pair = i / (d + 1);
  const int32_t col = static_cast<int32_t>(i % (d + 1));
  float m = -CUDART_INF_F;
  for (int32_t s = 0; s < shards; ++s) m = fmaxf(m, lse_all[s * pairs + pair]);
  float den = 0.0f, num = 0.0f;
  for (int32_t s = 0; s < shards; ++s) {
    const float w = m == -CUDART_INF_F ? 0.0f : expf(lse_all[s * pairs + pair] - m);
    den += w;
    if (col < d) num += w * o_all[(s * pairs + pair) * d + col];
  }
  if (col < d) {
    out[pair * d + col] = den > 0.0f ? num / den : 0.0f;
  } else {
    lse[pair] = den > 0.0f ? m + logf(den) : -CUDART_INF_F;
  }
}

absl::Status ForEachShard(absl::Span<const ShardState> shards, bool group,
                          const std::function<absl::Status(const ShardState&)>& f) {
  if (group) BANYAN_NCCL_RETURN_IF_ERROR(ncclGroupStart());
  absl::Status status;  // the first error (Update keeps it)
  for (const ShardState& s : shards) {
    status.Update(BANYAN_CUDA_STATUS(cudaSetDevice(s.device)));
    if (status.ok()) status.Update(f(s));
    if (!status.ok()) break;
  }
  // Closed even after an error, so that NCCL's group state stays balanced.
  if (group) status.Update(::banyan::gpu::NcclStatus(ncclGroupEnd(), "ncclGroupEnd()", __FILE__, __LINE__));
  return status;
}

}  // namespace

absl::Status CombineShards(absl::Span<const ShardState> shards, int64_t rows_heads, int32_t head_dim) {
  if (shards.empty()) return absl::InvalidArgumentError("combine shards: no shards");
  if (rows_heads < 0 || head_dim < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("combine shards: rows_heads = ", rows_heads, ", head_dim = ", head_dim));
  }
  for (size_t i = 0; i < shards.size(); ++i) {
    const ShardState& s = shards[i];
    if (s.comm == nullptr || s.out == nullptr || s.lse == nullptr || s.scratch == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat("combine shards: shard ", i, " has a null pointer"));
    }
  }
  if (rows_heads == 0) return absl::OkStatus();
  int current = 0;
  BANYAN_CUDA_RETURN_IF_ERROR(cudaGetDevice(&current));
  const int32_t count = static_cast<int32_t>(shards.size());
  const int64_t elements = rows_heads * (head_dim + 1);
  const int blocks = static_cast<int>((elements + kThreads - 1) / kThreads);
  // Scratch: every shard's o ([shards][rows_heads][head_dim]), then every shard's lse.
  auto o_all = [&](const ShardState& s) { return s.scratch; };
  auto lse_all = [&](const ShardState& s) { return s.scratch + int64_t{count} * rows_heads * head_dim; };
  absl::Status status = ForEachShard(shards, /*group=*/true, [&](const ShardState& s) -> absl::Status {
    BANYAN_NCCL_RETURN_IF_ERROR(ncclAllGather(s.out, o_all(s), rows_heads * head_dim, ncclFloat, s.comm, s.stream));
    BANYAN_NCCL_RETURN_IF_ERROR(ncclAllGather(s.lse, lse_all(s), rows_heads, ncclFloat, s.comm, s.stream));
    return absl::OkStatus();
  });
  if (status.ok()) {
    status.Update(ForEachShard(shards, /*group=*/false, [&](const ShardState& s) {
      MergeGathered<<<blocks, kThreads, 0, s.stream>>>(o_all(s), lse_all(s), count, s.out, s.lse, rows_heads, head_dim);
      return BANYAN_CUDA_STATUS(cudaGetLastError());
    }));
  }
  status.Update(BANYAN_CUDA_STATUS(cudaSetDevice(current)));
  return status;
}

}  // namespace banyan::attention

// Host launchers for the kernels in *_kernels.cuh: argument checks, the
// dispatch of runtime sizes to compile-time vector widths, and the launch.
#include <cuda_runtime.h>

#include <climits>
#include <cstdint>

#include "absl/strings/str_cat.h"
#include "banyan/status_macros.h"
#include "model/cuda/elementwise_kernels.cuh"
#include "model/cuda/memory_kernels.cuh"
#include "model/cuda/norm_kernels.cuh"
#include "model/cuda/ops.h"
#include "model/cuda/rope_kernels.cuh"
#include "sdk/gpu/cuda_status.h"

namespace banyan::model::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = 65535LL * 8;

bool Aligned(const void* p, uintptr_t bytes) { return reinterpret_cast<uintptr_t>(p) % bytes == 0; }

// Blocks for a grid-stride loop over `work` items, kThreads per block.
unsigned GridFor(int64_t work) {
  const int64_t blocks = (work + kThreads - 1) / kThreads;
  return static_cast<unsigned>(blocks < 1 ? 1 : (blocks > kMaxBlocks ? kMaxBlocks : blocks));
}

absl::Status CheckCount(const char* what, int64_t value, int64_t min) {
  if (value < min) {
    return absl::InvalidArgumentError(absl::StrCat(what, " must be >= ", min, ", got ", value));
  }
  return absl::OkStatus();
}

// Threads for a one-block-per-row kernel over `chunks` vector chunks.
int RowThreads(int64_t chunks) {
  int threads = 32;
  while (threads < chunks && threads < 1024) threads *= 2;
  return threads;
}

}  // namespace

absl::Status LaunchRmsNorm(const RmsNormParams& p, cudaStream_t stream) {
  if (p.rows == 0) return absl::OkStatus();
  if (p.rows < 0 || p.dim <= 0 || !(p.eps >= 0.0f)) {
    return absl::InvalidArgumentError(absl::StrCat("RmsNorm: bad sizes rows=", p.rows, " dim=", p.dim));
  }
  if (p.residual == nullptr || p.weight == nullptr || p.out == nullptr) {
    return absl::InvalidArgumentError("RmsNorm: null pointer");
  }
  if (p.add_lo != nullptr && p.add == nullptr) return absl::InvalidArgumentError("RmsNorm: add_lo without add");
  const bool vec8 = p.dim % 8 == 0 && Aligned(p.residual, 16) && Aligned(p.weight, 16) &&
                    Aligned(p.out, 16) && Aligned(p.add, 16) && Aligned(p.add_lo, 16) &&
                    Aligned(p.out_lo, 16);
  const int threads = RowThreads(vec8 ? p.dim / 8 : p.dim);
  const dim3 grid(static_cast<unsigned>(p.rows));
  if (vec8) {
    if (p.add != nullptr) RmsNormKernel<8, true><<<grid, threads, 0, stream>>>(p);
    else RmsNormKernel<8, false><<<grid, threads, 0, stream>>>(p);
  } else {
    if (p.add != nullptr) RmsNormKernel<1, true><<<grid, threads, 0, stream>>>(p);
    else RmsNormKernel<1, false><<<grid, threads, 0, stream>>>(p);
  }
  BANYAN_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  return absl::OkStatus();
}

absl::Status LaunchQkvEpilogue(const QkvEpilogueParams& p, cudaStream_t stream) {
  BANYAN_RETURN_IF_ERROR(CheckCount("QkvEpilogue rows", p.rows, 0));
  if (p.rows == 0) return absl::OkStatus();
  BANYAN_RETURN_IF_ERROR(CheckCount("QkvEpilogue num_q_heads", p.num_q_heads, 1));
  BANYAN_RETURN_IF_ERROR(CheckCount("QkvEpilogue num_kv_heads", p.num_kv_heads, 1));
  if (p.head_dim <= 0 || p.head_dim % 2 != 0 || p.head_dim / 2 > kMaxHalf) {
    return absl::InvalidArgumentError(
        absl::StrCat("QkvEpilogue: head_dim must be even and at most ", 2 * kMaxHalf, ", got ", p.head_dim));
  }
  const attention::KvLayout& l = p.layout;
  if (l.dtype_bytes != 2) return absl::InvalidArgumentError("QkvEpilogue: the pool must be 16-bit");
  if (l.num_kv_heads != p.num_kv_heads || l.head_dim != p.head_dim || l.page_size <= 0 ||
      l.num_pages <= 0 || p.layer < 0 || p.layer >= l.num_layers) {
    return absl::InvalidArgumentError(absl::StrCat("QkvEpilogue: layout does not match the heads or layer ",
                                                   p.layer));
  }
  if (p.qkv == nullptr || p.positions == nullptr || p.inv_freq == nullptr || p.q_out == nullptr ||
      p.page == nullptr || p.slot == nullptr || p.pool == nullptr) {
    return absl::InvalidArgumentError("QkvEpilogue: null pointer");
  }
  QkvEpilogueKernel<<<static_cast<unsigned>(p.rows), 128, 0, stream>>>(p);
  BANYAN_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  return absl::OkStatus();
}

absl::Status LaunchSwiGlu(const SwiGluParams& p, cudaStream_t stream) {
  if (p.rows == 0) return absl::OkStatus();
  BANYAN_RETURN_IF_ERROR(CheckCount("SwiGlu rows", p.rows, 0));
  BANYAN_RETURN_IF_ERROR(CheckCount("SwiGlu intermediate", p.intermediate, 1));
  if (p.gate_up == nullptr || p.out == nullptr) return absl::InvalidArgumentError("SwiGlu: null pointer");
  const bool vec8 = p.intermediate % 8 == 0 && Aligned(p.gate_up, 16) && Aligned(p.gate_up_lo, 16) &&
                    Aligned(p.out, 16) && Aligned(p.out_lo, 16);
  if (vec8) {
    SwiGluKernel<8><<<GridFor(int64_t{p.rows} * p.intermediate / 8), kThreads, 0, stream>>>(p);
  } else {
    SwiGluKernel<1><<<GridFor(int64_t{p.rows} * p.intermediate), kThreads, 0, stream>>>(p);
  }
  BANYAN_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  return absl::OkStatus();
}

absl::Status LaunchEmbedding(const EmbeddingParams& p, cudaStream_t stream) {
  if (p.rows == 0) return absl::OkStatus();
  BANYAN_RETURN_IF_ERROR(CheckCount("Embedding rows", p.rows, 0));
  BANYAN_RETURN_IF_ERROR(CheckCount("Embedding dim", p.dim, 1));
  BANYAN_RETURN_IF_ERROR(CheckCount("Embedding vocab", p.vocab, 1));
  if (p.ids == nullptr || p.table == nullptr || p.out == nullptr || p.bad_row == nullptr) {
    return absl::InvalidArgumentError("Embedding: null pointer");
  }
  const bool vec8 = p.dim % 8 == 0 && Aligned(p.table, 16) && Aligned(p.table_lo, 16) && Aligned(p.out, 16);
  const int threads = RowThreads(vec8 ? p.dim / 8 : p.dim);
  const dim3 grid(static_cast<unsigned>(p.rows));
  if (vec8) EmbeddingKernel<8><<<grid, threads, 0, stream>>>(p);
  else EmbeddingKernel<1><<<grid, threads, 0, stream>>>(p);
  BANYAN_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  return absl::OkStatus();
}

absl::Status EmbeddingBadRowStatus(int32_t bad_row_value) {
  if (bad_row_value == INT32_MAX) return absl::OkStatus();
  return absl::OutOfRangeError(
      absl::StrCat("token id outside the vocabulary at row ", bad_row_value));
}

absl::Status LaunchGatherRows(const GatherRowsParams& p, cudaStream_t stream) {
  if (p.rows == 0) return absl::OkStatus();
  BANYAN_RETURN_IF_ERROR(CheckCount("GatherRows rows", p.rows, 0));
  BANYAN_RETURN_IF_ERROR(CheckCount("GatherRows cols", p.cols, 1));
  if (p.src == nullptr || p.index == nullptr || p.dst == nullptr) {
    return absl::InvalidArgumentError("GatherRows: null pointer");
  }
  const bool vec8 = p.cols % 8 == 0 && Aligned(p.src, 16) && Aligned(p.dst, 16);
  const int threads = RowThreads(vec8 ? p.cols / 8 : p.cols);
  const dim3 grid(static_cast<unsigned>(p.rows));
  if (vec8) GatherRowsKernel<8><<<grid, threads, 0, stream>>>(p);
  else GatherRowsKernel<1><<<grid, threads, 0, stream>>>(p);
  BANYAN_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  return absl::OkStatus();
}

}  // namespace banyan::model::cuda

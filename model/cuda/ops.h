// The CUDA backend's elementwise and row-wise kernels, as host launchers.
// They sit between the cuBLAS GEMMs: they read the GEMMs' fp32 outputs and
// write their bf16 inputs (the residual stream stays fp32); every reduction
// and every piece of arithmetic is done in fp32, and results are rounded once.
//
// One params struct per kernel family; the shapes are written on every
// pointer. Every launcher checks its sizes and pointers (kInvalidArgument),
// enqueues one kernel on `stream` and returns the launch error as a Status
// (cudaGetLastError after each launch). Nothing is synchronized: kernel faults
// surface at the caller's next synchronization.
//
//   RmsNormParams p{.rows = n, .dim = d, .eps = 1e-5f, .residual = h, .add = x,
//                   .weight = w, .out = y};
//   BANYAN_RETURN_IF_ERROR(LaunchRmsNorm(p, stream));
//
// Device pointers are borrowed; the caller keeps them alive until the work
// has run. The launchers are thread-safe (no state).
#ifndef BANYAN_MODEL_CUDA_OPS_H_
#define BANYAN_MODEL_CUDA_OPS_H_

#include <cuda_runtime_api.h>

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "attention/kv_layout.h"
#include "model/model_config.h"

namespace banyan::model::cuda {

// bf16 storage as seen by host code (bit-compatible with __nv_bfloat16).
using bf16_bits = uint16_t;

// Fused residual add + RMSNorm:
//   if add != nullptr: residual[r] += add[r] (+ add_lo[r] when set)   (fp32, written back)
//   y = residual[r] * rsqrt(mean(residual[r]^2) + eps) * weight        (fp32)
//   out[r] = bf16(y); when out_lo is set, out_lo[r] = bf16(y - out[r])
// `add` is a projection GEMM's fp32 output. With split activations (see
// CudaBackendOptions) the GEMM ran over [hi; lo] input rows and add_lo is the
// lo rows' product, and out/out_lo are the hi and lo halves of the next GEMM
// input: hi + lo carries y to about 16 significant bits.
struct RmsNormParams {
  int32_t rows = 0;
  int32_t dim = 0;
  float eps = 1e-5f;
  float* residual = nullptr;         // [rows, dim] fp32, read (and written when add)
  const float* add = nullptr;        // [rows, dim] fp32, or nullptr: no add
  const float* add_lo = nullptr;     // [rows, dim] fp32, or nullptr; only with add
  const float* weight = nullptr;     // [dim] fp32
  bf16_bits* out = nullptr;          // [rows, dim] bf16
  bf16_bits* out_lo = nullptr;       // [rows, dim] bf16, or nullptr
};
[[nodiscard]] absl::Status LaunchRmsNorm(const RmsNormParams& p, cudaStream_t stream);

// The RoPE inverse frequencies theta^(-2i/d) for i < head_dim/2, with the
// config's scaling applied (llama3 piecewise or linear), computed in double
// and rounded to fp32. kInvalidArgument for an odd or non-positive head_dim,
// a non-positive theta or inconsistent llama3 factors.
[[nodiscard]] absl::StatusOr<std::vector<float>> RopeInvFreq(const ModelConfig& config);

// g|u = gate_up[r] (+ gate_up_lo[r] when set), in fp32; for j < intermediate:
//   y = silu(g[j]) * u[j];  out[r][j] = bf16(y);  out_lo[r][j] = bf16(y - out[r][j])
// (out_lo when set): the fused gate|up GEMM's fp32 output in, the down
// projection's input out (split as in RmsNormParams).
struct SwiGluParams {
  int32_t rows = 0;
  int32_t intermediate = 0;
  const float* gate_up = nullptr;     // [rows, 2 * intermediate] fp32
  const float* gate_up_lo = nullptr;  // [rows, 2 * intermediate] fp32, or nullptr
  bf16_bits* out = nullptr;           // [rows, intermediate] bf16
  bf16_bits* out_lo = nullptr;        // [rows, intermediate] bf16, or nullptr
};
[[nodiscard]] absl::Status LaunchSwiGlu(const SwiGluParams& p, cudaStream_t stream);

// out[r] = float(table[ids[r]]) (+ float(table_lo[ids[r]]) when table_lo is
// set: split weights, the sum in fp32). An id outside [0, vocab) never reads the
// table: its row is written with zeros and the smallest such r is recorded in
// *bad_row (atomicMin), which the caller initializes to INT32_MAX and reads
// back (see EmbeddingBadRowStatus).
struct EmbeddingParams {
  int32_t rows = 0;
  int32_t dim = 0;
  int32_t vocab = 0;
  const int32_t* ids = nullptr;      // [rows]
  const bf16_bits* table = nullptr;  // [vocab, dim]
  const bf16_bits* table_lo = nullptr;  // [vocab, dim], or nullptr
  float* out = nullptr;              // [rows, dim] fp32 (the residual stream)
  int32_t* bad_row = nullptr;        // [1]
};
[[nodiscard]] absl::Status LaunchEmbedding(const EmbeddingParams& p, cudaStream_t stream);
// kOutOfRange naming the row when bad_row_value != INT32_MAX (as model/forward.h).
[[nodiscard]] absl::Status EmbeddingBadRowStatus(int32_t bad_row_value);

// The QKV projection's epilogue, one block per row: in fp32,
//   x = qkv[r] (+ qkv_lo[r] when set) (+ bias when set)     (q heads, k heads, v heads)
// then RoPE (Hugging Face rotate_half: element i pairs with i + head_dim/2) on
// the q and k heads at positions[r]:
//   x'[i]     = x[i] cos(a) - x[i+h] sin(a)
//   x'[i + h] = x[i+h] cos(a) + x[i] sin(a),    a = position * inv_freq[i]
// and one rounding to bf16 of each value: q to q_out (contiguous, as
// attention wants it), k and v into layer `layer` of the paged pool at
// (page[r], slot[r]) in KvLayout order. The row's cos/sin table is computed
// once (shared memory) for all of its heads.
// REQUIRES (checked by the caller on the host, not here): 0 <= page[r] <
// layout.num_pages, 0 <= slot[r] < layout.page_size, no two rows share a
// (page, slot). Checked here: sizes, pointers, layout.num_kv_heads ==
// num_kv_heads, layout.head_dim == head_dim (even, <= 512), 16-bit pool.
struct QkvEpilogueParams {
  int32_t rows = 0;
  int32_t num_q_heads = 0;
  int32_t num_kv_heads = 0;
  int32_t head_dim = 0;
  const float* qkv = nullptr;          // [rows, (num_q_heads + 2 num_kv_heads) * head_dim] fp32
  const float* qkv_lo = nullptr;       // same shape, or nullptr
  const float* bias = nullptr;         // [(num_q_heads + 2 num_kv_heads) * head_dim], or nullptr
  const int32_t* positions = nullptr;  // [rows], >= 0
  const float* inv_freq = nullptr;     // [head_dim / 2], from RopeInvFreq
  bf16_bits* q_out = nullptr;          // [rows, num_q_heads * head_dim]
  int32_t layer = 0;
  attention::KvLayout layout;          // dtype_bytes must be 2
  const int32_t* page = nullptr;       // [rows]
  const int32_t* slot = nullptr;       // [rows]
  bf16_bits* pool = nullptr;           // layout.TotalBytes() bytes
};
[[nodiscard]] absl::Status LaunchQkvEpilogue(const QkvEpilogueParams& p, cudaStream_t stream);

// dst[r] = src[rows_index[r]] for fp32 / bf16 rows of `cols` elements: picks
// the rows whose logits are wanted before the LM head.
struct GatherRowsParams {
  int32_t rows = 0;
  int32_t cols = 0;
  const bf16_bits* src = nullptr;     // [>= max(index)+1, cols]
  const int32_t* index = nullptr;     // [rows]
  bf16_bits* dst = nullptr;           // [rows, cols]
};
[[nodiscard]] absl::Status LaunchGatherRows(const GatherRowsParams& p, cudaStream_t stream);

}  // namespace banyan::model::cuda

#endif  // BANYAN_MODEL_CUDA_OPS_H_

// The CUDA backend's elementwise and row-wise kernels, as host launchers.
// Activations are bf16 (the residual stream fp32), every reduction and every
// piece of arithmetic is done in fp32, and results are rounded once.
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
//   if add != nullptr: residual[r] += add[r]   (written back, fp32)
//   out[r] = bf16(residual[r] * rsqrt(mean(residual[r]^2) + eps) * weight)
struct RmsNormParams {
  int32_t rows = 0;
  int32_t dim = 0;
  float eps = 1e-5f;
  float* residual = nullptr;         // [rows, dim] fp32, read (and written when add)
  const bf16_bits* add = nullptr;    // [rows, dim] bf16, or nullptr: no add
  const bf16_bits* weight = nullptr; // [dim] bf16
  bf16_bits* out = nullptr;          // [rows, dim] bf16
};
[[nodiscard]] absl::Status LaunchRmsNorm(const RmsNormParams& p, cudaStream_t stream);

// RoPE in place (Hugging Face rotate_half: element i pairs with i + head_dim/2)
// on the q and k heads of each row, at that row's position:
//   x'[i]     = x[i] cos(a) - x[i+h] sin(a)
//   x'[i + h] = x[i+h] cos(a) + x[i] sin(a),    a = position * inv_freq[i]
// q and k may live inside one fused QKV row (row strides in elements). When
// q_out is set, the rotated q goes there and q is only read (attention wants
// q contiguous); k is always rotated in place.
struct RopeParams {
  int32_t rows = 0;
  int32_t num_q_heads = 0;
  int32_t num_kv_heads = 0;
  int32_t head_dim = 0;                  // even
  bf16_bits* q = nullptr;                // row r head h at q[r * q_row_stride + h * head_dim]
  int64_t q_row_stride = 0;
  bf16_bits* k = nullptr;                // same, num_kv_heads heads
  int64_t k_row_stride = 0;
  const int32_t* positions = nullptr;    // [rows], >= 0
  const float* inv_freq = nullptr;       // [head_dim / 2], from RopeInvFreq
  bf16_bits* q_out = nullptr;            // optional, like q with q_out_row_stride
  int64_t q_out_row_stride = 0;
};
[[nodiscard]] absl::Status LaunchRope(const RopeParams& p, cudaStream_t stream);

// The RoPE inverse frequencies theta^(-2i/d) for i < head_dim/2, with the
// config's scaling applied (llama3 piecewise or linear), computed in double
// and rounded to fp32. kInvalidArgument for an odd or non-positive head_dim,
// a non-positive theta or inconsistent llama3 factors.
[[nodiscard]] absl::StatusOr<std::vector<float>> RopeInvFreq(const ModelConfig& config);

// out[r] = bf16(silu(gate_up[r][j]) * gate_up[r][intermediate + j]) for
// j < intermediate: reads the fused gate|up GEMM output.
struct SwiGluParams {
  int32_t rows = 0;
  int32_t intermediate = 0;
  const bf16_bits* gate_up = nullptr;  // [rows, 2 * intermediate]
  bf16_bits* out = nullptr;            // [rows, intermediate]
};
[[nodiscard]] absl::Status LaunchSwiGlu(const SwiGluParams& p, cudaStream_t stream);

// out[r] = float(table[ids[r]]). An id outside [0, vocab) never reads the
// table: its row is written with zeros and the smallest such r is recorded in
// *bad_row (atomicMin), which the caller initializes to INT32_MAX and reads
// back (see EmbeddingBadRowStatus).
struct EmbeddingParams {
  int32_t rows = 0;
  int32_t dim = 0;
  int32_t vocab = 0;
  const int32_t* ids = nullptr;      // [rows]
  const bf16_bits* table = nullptr;  // [vocab, dim]
  float* out = nullptr;              // [rows, dim] fp32 (the residual stream)
  int32_t* bad_row = nullptr;        // [1]
};
[[nodiscard]] absl::Status LaunchEmbedding(const EmbeddingParams& p, cudaStream_t stream);
// kOutOfRange naming the row when bad_row_value != INT32_MAX (as model/forward.h).
[[nodiscard]] absl::Status EmbeddingBadRowStatus(int32_t bad_row_value);

// Writes each row's K and V heads (bf16) into the paged pool of layer `layer`
// at (page[r], slot[r]) in KvLayout order. REQUIRES (checked by the caller on
// the host, not here): 0 <= page[r] < layout.num_pages, 0 <= slot[r] <
// layout.page_size, no two rows share a (page, slot).
struct KvWriteParams {
  int32_t rows = 0;
  int32_t layer = 0;
  attention::KvLayout layout;          // dtype_bytes must be 2
  const bf16_bits* k = nullptr;        // row r head h at k[r * k_row_stride + h * head_dim]
  int64_t k_row_stride = 0;
  const bf16_bits* v = nullptr;
  int64_t v_row_stride = 0;
  const int32_t* page = nullptr;       // [rows]
  const int32_t* slot = nullptr;       // [rows]
  bf16_bits* pool = nullptr;           // layout.TotalBytes() bytes
};
[[nodiscard]] absl::Status LaunchKvWrite(const KvWriteParams& p, cudaStream_t stream);

// RoPE and the KV write fused, one block per row: the row's cos/sin table is
// computed once (shared memory) for all of its heads; rotated q goes to
// rope.q_out (REQUIRED here) or in place; rotated k and v go straight into
// the pool (the k in the QKV row is left unrotated). Same numerics as
// LaunchRope followed by LaunchKvWrite, bit for bit. REQUIRES: rope.k ==
// kv.k with equal row strides, rope.rows == kv.rows, head_dim <= 512, and the
// requirements of both launchers.
[[nodiscard]] absl::Status LaunchRopeKvWrite(const RopeParams& rope, const KvWriteParams& kv,
                                             cudaStream_t stream);

// x[r][j] = bf16(x[r][j] + bias[j]) (Qwen2's q/k/v projection bias).
struct BiasAddParams {
  int32_t rows = 0;
  int32_t cols = 0;
  bf16_bits* x = nullptr;             // [rows, cols]
  const bf16_bits* bias = nullptr;    // [cols]
};
[[nodiscard]] absl::Status LaunchBiasAdd(const BiasAddParams& p, cudaStream_t stream);

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

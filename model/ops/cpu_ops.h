// The CPU backend's transformer ops on fp32 row-major arrays: RMSNorm, RoPE
// (Hugging Face rotate_half, with llama3 and linear frequency scaling), SwiGLU,
// residual add, embedding lookup and the multi-threaded matmul y = x . W^T.
// Each op has a double-precision reference in cpu_ops_test.cc.
//
// These are internal building blocks: the callers (model/cpu/) validate shapes
// and token ids before calling, so the ops state their preconditions with
// REQUIRES: and do not fail. Pointers are borrowed; outputs may not alias
// inputs unless said. Thread-safety: pure functions; MatMul uses the given
// pool (see thread_pool.h for its calling rules).
#ifndef BANYAN_MODEL_OPS_CPU_OPS_H_
#define BANYAN_MODEL_OPS_CPU_OPS_H_

#include <cstdint>
#include <vector>

#include "model/model_config.h"
#include "model/ops/thread_pool.h"

namespace banyan::model::ops {

// out[r][i] = x[r][i] / sqrt(mean_i(x[r][i]^2) + eps) * weight[i] for r < rows,
// i < dim (Llama's RMSNorm, statistics in fp32 like HF). out may equal x.
void RmsNorm(const float* x /*[rows][dim]*/, const float* weight /*[dim]*/, int64_t rows,
             int64_t dim, float eps, float* out /*[rows][dim]*/);

// The RoPE inverse frequencies inv_freq[i], i < head_dim / 2, for a config:
// theta^(-2i/head_dim), then scaled per config.rope_scaling (kLinear divides by
// factor; kLlama3 applies Llama 3.1's wavelength bands). Computed as HF does
// (fp32 values). REQUIRES: head_dim even and > 0.
std::vector<float> RopeInverseFrequencies(int32_t head_dim, float theta, const RopeScaling& scaling);

// Rotates each of `num_heads` heads of x[rows][num_heads][head_dim] in place
// by angle positions[r] * inv_freq[i] with HF's rotate_half pairing (element i
// pairs with i + head_dim/2). REQUIRES: inv_freq has head_dim / 2 entries.
void ApplyRope(float* x, int64_t rows, int32_t num_heads, int32_t head_dim,
               const int32_t* positions /*[rows]*/, const std::vector<float>& inv_freq);

// out[i] = silu(gate[i]) * up[i] for i < n, silu(g) = g / (1 + e^-g). out may
// equal gate or up.
void SwiGlu(const float* gate, const float* up, int64_t n, float* out);

// x[i] += y[i] for i < n (the residual add).
void AddInPlace(float* x, const float* y, int64_t n);

// out[r] = table[ids[r]] (rows of `dim` floats). REQUIRES: 0 <= ids[r] < the
// table's row count (checked by the caller).
void EmbeddingLookup(const float* table /*[vocab][dim]*/, const int32_t* ids, int64_t rows,
                     int64_t dim, float* out /*[rows][dim]*/);

// y[r][o] = sum_k x[r][k] * w[o][k] (+ bias[o] when bias != nullptr) for
// r < rows, o < out_features: x . W^T with W stored [out_features][in_features]
// as in HF linears. fp32 with fp32 accumulation; split over output features on
// `pool` (nullptr: the calling thread only). Uses AVX2+FMA when the CPU has it.
// y must not alias x or w.
void MatMul(const float* x /*[rows][in]*/, const float* w /*[out][in]*/, const float* bias /*[out]*/,
            int64_t rows, int64_t in_features, int64_t out_features, float* y /*[rows][out]*/,
            ThreadPool* pool);

}  // namespace banyan::model::ops

#endif  // BANYAN_MODEL_OPS_CPU_OPS_H_

// The CUDA backend: the Llama-family forward pass (Llama 2/3 incl. llama3 RoPE
// scaling, Qwen2 QKV bias, Mistral, SmolLM2; GQA; tied or untied embeddings)
// on one GPU, behind model/forward.h's Backend.
//
// Numerics: weight matrices, GEMM inputs, the KV cache and attention in
// bf16; GEMM outputs, the residual stream, norm weights and biases in fp32;
// every GEMM (cuBLAS) and every reduction accumulated in fp32, logits fp32.
// Each GEMM's fp32 output is consumed by a row kernel that rounds once: the
// QKV projections are one fused GEMM whose epilogue adds the bias, applies
// RoPE and writes the KV cache; gate|up is one GEMM feeding SwiGLU; the
// o_proj and down outputs are added to the residual by the next RMSNorm
// (model/cuda/ops.h). Optionally (CudaBackendOptions::activations) GEMM
// inputs are carried as bf16 hi + lo pairs for ~16-bit activations, and
// (CudaBackendOptions::weights) the weight matrices as bf16 hi + lo pairs for
// ~16-bit weights; both together are the high-precision mode. Attention
// runs through
// attention/'s TreeAttention over the batch's AttentionPlan (or its CPU path,
// CudaBackendOptions::attention). Logits land fastest in pinned host memory.
//
//   BANYAN_ASSIGN_OR_RETURN(std::unique_ptr<Backend> gpu, CreateCudaBackend(weights));
//   KvCache kv{KvLayoutFor(config, pages, 16, DType::kBf16), DType::kBf16, device_pool};
//   BANYAN_RETURN_IF_ERROR(gpu->Forward(batch, kv, absl::MakeSpan(logits)));
//
// The KV pool (KvCache::data) is device memory in bf16 that the caller owns.
// Forward validates the batch like every backend (ValidateForwardBatch: its
// plan half, ValidateForwardPlan, runs while the GPU computes layer 0's QKV
// product, before anything writes the pool or logits), enqueues the whole
// pass on the backend's stream and waits for it; logits come back in host
// memory. Errors: those of model/forward.h, plus
// kInvalidArgument for a KV dtype other than bf16, kResourceExhausted when
// device memory runs out, kUnavailable without a device, kInternal for other
// CUDA or cuBLAS failures.
//
// Thread-compatible: one Forward at a time per backend (it owns scratch
// buffers, a stream and a cuBLAS handle). The weights are copied to the
// device at creation; the host ModelWeights may be freed afterwards.
#ifndef BANYAN_MODEL_CUDA_CUDA_BACKEND_H_
#define BANYAN_MODEL_CUDA_CUDA_BACKEND_H_

#include <memory>

#include "absl/status/statusor.h"
#include "model/cuda/attention_call.h"
#include "model/forward.h"
#include "model/model_weights.h"

namespace banyan::model {

// How the inputs of the QKV, gate|up and down GEMMs (the RMSNorm and SwiGLU
// outputs) are represented.
enum class Activations {
  // One bf16 value each: the fast default.
  kBf16,
  // Each value x as a bf16 pair, hi = bf16(x) and lo = bf16(x - hi); one GEMM
  // over the stacked [hi; lo] rows multiplies both by the bf16 weights and
  // the two products are summed in fp32 by the consuming kernel (the LM
  // head: a second GEMM accumulating into the logits). The activations then
  // carry ~16 significant bits instead of 8 (weights, KV cache, attention
  // and the o_proj input stay bf16), for twice the GEMM work of the QKV,
  // gate|up, down and LM head projections (bench/RESULTS.md has the cost).
  kSplitBf16,
};

// How the weight matrices (every projection, the embedding table and the LM
// head, tied or not) are held on the device.
enum class Weights {
  // One bf16 value each: the fast default. Exact for checkpoints stored in
  // bf16; quantized GGUF blocks (d * q + m, d and m fp16) mostly are not
  // bf16 values, and rounding them costs top-1 agreement on near-ties (the
  // default model's Q4_1: 99.3% against fp32 weights, bench/RESULTS.md).
  kBf16,
  // Each weight w as a bf16 pair, hi = bf16(w) and lo = bf16(w - hi) (~16
  // significant bits). Every projection runs a second GEMM over the lo
  // matrix that accumulates (beta = 1, fp32) into the hi GEMM's fp32 output,
  // so the consuming row kernels are unchanged; the embedding lookup adds the
  // two rows. With split activations the lo-weight GEMM reads only the hi
  // activation rows (x_lo . w_lo, ~2^-16 of x . w, is skipped): the products
  // are x_hi.w_hi + x_lo.w_hi + x_hi.w_lo. Cost: twice the device memory for
  // the matrices and 1.5x (split activations) or 2x (bf16 activations) the
  // GEMM work, two GEMM launches per projection (bench/RESULTS.md has the
  // decode cost). For numerics checks against fp32 references; off by default.
  kSplitBf16,
};

struct CudaBackendOptions {
  int device = 0;  // CUDA device ordinal the backend runs on
  Activations activations = Activations::kBf16;
  Weights weights = Weights::kBf16;
  // Where attention runs (attention_call.h): attention/'s CUDA kernels, or
  // its CPU path on host copies (slow; for cross-checks).
  cuda::AttentionPath attention = cuda::AttentionPath::kDevice;
  // true (default): after queuing a pass, while the GPU runs it, the host
  // plans the attention of the next decode pass on the guess that every
  // branch grows by one token (attention::TreeAttention::PrepareAhead); the
  // next pass keeps that work when the guess holds (most decode steps) and
  // plans as usual otherwise. A failure of that speculative planning is
  // logged (WARNING) and never fails the pass whose results are already
  // queued. false: every pass plans its own attention.
  bool plan_ahead = true;
};

// Checks the weights against their config (as the CPU backend does), converts
// them to bf16 (or bf16 hi + lo pairs, options.weights) and uploads them once. Errors: kInvalidArgument for a config
// that cannot run (non-positive sizes, odd head_dim, q heads not a multiple of
// kv heads, bad RoPE scaling) or a tensor of the wrong shape; kNotFound for a
// missing tensor (named); kUnavailable without a device; kResourceExhausted
// when the weights do not fit on the device.
[[nodiscard]] absl::StatusOr<std::unique_ptr<Backend>> CreateCudaBackend(
    const ModelWeights& weights, const CudaBackendOptions& options = {});

}  // namespace banyan::model

#endif  // BANYAN_MODEL_CUDA_CUDA_BACKEND_H_

// The CPU backend: the Llama-family forward pass (Llama 2/3 incl. llama3 RoPE
// scaling, Qwen2 QKV bias, Mistral, SmolLM2; GQA; tied or untied embeddings)
// in fp32 on host memory, multi-threaded over output features. Attention runs
// through attention/cpu (CpuAttention) on the caller's paged KV pool, which
// may hold fp32 (default), bf16 or fp16. Mistral's sliding window is not
// applied (exact up to the window, 4096 tokens for v0.1; later Mistrals have
// none).
//
//   auto weights = std::make_shared<const ModelWeights>(std::move(loaded));
//   BANYAN_ASSIGN_OR_RETURN(std::unique_ptr<Backend> cpu,
//                           CreateCpuBackend(weights, {.num_threads = 2}));
//
// See model/forward.h for Forward's contract. Thread-compatible (one Forward
// at a time); the backend shares ownership of the weights.
#ifndef BANYAN_MODEL_CPU_CPU_BACKEND_H_
#define BANYAN_MODEL_CPU_CPU_BACKEND_H_

#include <memory>

#include "absl/status/statusor.h"
#include "model/forward.h"
#include "model/model_weights.h"

namespace banyan::model {

struct CpuBackendOptions {
  int num_threads = 0;  // threads for matmuls and attention; <= 0: hardware concurrency
};

// Checks the weights against their config and returns a backend reading them
// in place (no copy). Errors: kInvalidArgument for a config that cannot run
// (non-positive sizes, odd head_dim, q heads not a multiple of kv heads) or a
// tensor whose shape differs from model_weights.h; kNotFound for a missing
// tensor (named); kInvalidArgument for a null weights pointer.
[[nodiscard]] absl::StatusOr<std::unique_ptr<Backend>> CreateCpuBackend(
    std::shared_ptr<const ModelWeights> weights, const CpuBackendOptions& options = {});

}  // namespace banyan::model

#endif  // BANYAN_MODEL_CPU_CPU_BACKEND_H_

// Internal (not API): building an Engine from parts instead of a model file,
// for tests, benchmarks and the search engineers' exact-expectation tests.
//
//   #include "sdk/engine/testing/counting_backend.h"   // a deterministic model
//   BANYAN_ASSIGN_OR_RETURN(auto backend, testing::CreateCountingBackend({}));
//   BANYAN_ASSIGN_OR_RETURN(std::unique_ptr<Engine> engine,
//       CreateEngineForTesting(std::move(backend),
//                              std::make_unique<testing::ByteTokenizer>(), EngineOptions{}));
//
// Thread-safe (no shared state). The returned Engine is the same
// implementation Engine::Create returns, with the same contract (engine.h).
#ifndef BANYAN_SDK_ENGINE_ENGINE_TESTING_H_
#define BANYAN_SDK_ENGINE_ENGINE_TESTING_H_

#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "banyan/engine.h"
#include "model/chat/chat_format.h"
#include "model/forward.h"
#include "model/tokenizer/tokenizer.h"
#include "sdk/base/tensor_view.h"

namespace banyan::engine {

// What an engine runs on. The engine takes ownership of all of it.
struct EngineParts {
  std::unique_ptr<model::Backend> backend;      // required
  std::unique_ptr<model::Tokenizer> tokenizer;  // required
  // Without one, ApplyChatTemplate returns kFailedPrecondition.
  std::optional<model::ChatFormat> chat_format;
  // dtype of the KV pool (the CUDA backend needs bf16; the CPU backend takes
  // f32, bf16 or f16). The pool lives where backend->kv_memory_space() says.
  DType kv_dtype = DType::kF32;
  std::string device_name = "cpu";  // EngineStats::device
  int cuda_device = 0;              // GPU ordinal of a device KV pool
  // Model identity for prefix-sharing namespaces and snapshots; empty: the
  // backend config's name.
  std::string model_name;
};

// An engine over `parts` with `options` (model_path and device are ignored).
// Errors: kInvalidArgument for a missing part, a tokenizer whose vocabulary is
// larger than the model's, or bad options (page_size outside [1, 4096],
// max_batch or prefill_chunk < 1); kResourceExhausted when the KV budget holds
// too few pages for one step; kUnavailable for device KV without CUDA.
absl::StatusOr<std::unique_ptr<Engine>> CreateEngineFromParts(EngineParts parts,
                                                              const EngineOptions& options);

// CreateEngineFromParts with no chat format and the backend's config name;
// the KV pool is f32 host memory for a host backend, bf16 on GPU 0 for a
// device backend.
absl::StatusOr<std::unique_ptr<Engine>> CreateEngineForTesting(
    std::unique_ptr<model::Backend> backend, std::unique_ptr<model::Tokenizer> tokenizer,
    const EngineOptions& options);

}  // namespace banyan::engine

#endif  // BANYAN_SDK_ENGINE_ENGINE_TESTING_H_

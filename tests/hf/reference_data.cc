#include "tests/hf/reference_data.h"

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "banyan/status_macros.h"
#include "model/cpu/forked_branches.h"
#include "sdk/base/build_config.h"

#if BANYAN_BUILT_WITH_CUDA
#include <cuda_runtime_api.h>
#endif

namespace banyan::testing {

std::string SourceDir() {
  if (const char* dir = std::getenv("BANYAN_SOURCE_DIR"); dir != nullptr && *dir != '\0') return dir;
  return BANYAN_SOURCE_DIR;
}

absl::StatusOr<std::string> ReadFileBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError("cannot open " + path);
  std::ostringstream bytes;
  bytes << in.rdbuf();
  return bytes.str();
}

absl::StatusOr<std::vector<float>> PrefillLogits(model::Backend& backend,
                                                 const std::vector<int32_t>& tokens,
                                                 DType kv_dtype) {
  constexpr int32_t kPageSize = 16;
  const int64_t pages = static_cast<int64_t>(tokens.size()) / kPageSize + 2;
  model::ForkedBranches branches(kPageSize, pages);
  BANYAN_RETURN_IF_ERROR(branches.SetPrompt(tokens));
  const model::Step step = branches.PrefillStep(/*all_logits=*/true);
  const model::ModelConfig& config = backend.config();
  const attention::KvLayout layout = model::KvLayoutFor(config, pages, kPageSize, kv_dtype);
  std::vector<float> logits(tokens.size() * static_cast<size_t>(config.vocab_size));
  if (backend.kv_memory_space() == MemorySpace::kHost) {
    std::vector<char> pool(layout.TotalBytes());
    model::KvCache kv{layout, kv_dtype, pool.data()};
    BANYAN_RETURN_IF_ERROR(backend.Forward(step.batch(), kv, absl::MakeSpan(logits)));
    return logits;
  }
#if BANYAN_BUILT_WITH_CUDA
  void* pool = nullptr;
  if (cudaMalloc(&pool, layout.TotalBytes()) != cudaSuccess) {
    return absl::ResourceExhaustedError("cudaMalloc of the KV pool failed");
  }
  model::KvCache kv{layout, kv_dtype, pool};
  const absl::Status status = backend.Forward(step.batch(), kv, absl::MakeSpan(logits));
  cudaFree(pool);
  BANYAN_RETURN_IF_ERROR(status);
  return logits;
#else
  return absl::UnavailableError("device backend in a CPU-only build");
#endif
}

}  // namespace banyan::testing

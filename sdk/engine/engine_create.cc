// Creating an engine: Engine::Create (a model file and a device), the parts
// factory for tests, and EngineImpl's setup of the KV pool, tree and
// scheduler thread.
#include <algorithm>
#include <chrono>
#include <thread>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/match.h"
#include "banyan/status_macros.h"
#include "kv_tree/kv_storage.h"
#include "model/cpu/cpu_backend.h"
#include "model/default_model.h"
#include "model/loader.h"
#include "sdk/base/build_config.h"
#include "sdk/engine/engine_impl.h"
#include "sdk/gpu/device_info.h"

#if BANYAN_BUILT_WITH_CUDA
#include "sdk/engine/device_kv_storage.h"
#endif
// Defined by sdk/CMakeLists.txt when banyan_model_cuda holds the CUDA backend.
#if BANYAN_BUILT_WITH_CUDA && defined(BANYAN_ENGINE_HAS_CUDA_BACKEND)
#define BANYAN_ENGINE_CUDA 1
#include "model/cuda/cuda_backend.h"
#else
#define BANYAN_ENGINE_CUDA 0
#endif

namespace banyan::engine {

absl::StatusOr<int> ParseDevice(const std::string& device);

namespace {

constexpr uint64_t kDefaultHostBudget = uint64_t{1} << 30;

}  // namespace

// "auto" -> -1 (CPU) or a GPU ordinal; "cpu" -> -1; "cuda" -> 0; "cuda:N" -> N.
absl::StatusOr<int> ParseDevice(const std::string& device) {
  if (device == "cpu") return -1;
  if (device == "auto" || device.empty()) return gpu::HasGpu() ? 0 : -1;
  int ordinal = 0;
  if (device == "cuda") {
    ordinal = 0;
  } else if (absl::StartsWith(device, "cuda:") &&
             absl::SimpleAtoi(absl::string_view(device).substr(5), &ordinal) && ordinal >= 0) {
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("device \"", device, "\" is not auto, cpu, cuda or cuda:N"));
  }
  absl::StatusOr<std::vector<gpu::GpuInfo>> gpus = gpu::ListGpus();
  if (!gpus.ok()) {
    return absl::UnavailableError(absl::StrCat("device ", device, ": ", gpus.status().message()));
  }
  if (ordinal >= static_cast<int>(gpus->size())) {
    return absl::UnavailableError(absl::StrCat("device ", device, " does not exist (", gpus->size(),
                                               " GPUs visible)"));
  }
  return ordinal;
}

}  // namespace banyan::engine

namespace banyan {

absl::StatusOr<std::unique_ptr<Engine>> Engine::Create(const EngineOptions& options) {
  BANYAN_ASSIGN_OR_RETURN(const int device, engine::ParseDevice(options.device));
  std::string path = options.model_path;
  if (path.empty()) {
    BANYAN_ASSIGN_OR_RETURN(path, model::FindDefaultModel());
  }
  BANYAN_ASSIGN_OR_RETURN(model::ModelWeights weights, model::LoadModelWeights(path));
  engine::EngineParts parts;
  BANYAN_ASSIGN_OR_RETURN(parts.tokenizer, model::LoadTokenizer(path));
  absl::StatusOr<model::ChatFormat> chat = model::LoadChatFormat(path);
  if (chat.ok()) parts.chat_format = std::move(*chat);
  parts.model_name = weights.config.name.empty() ? path : weights.config.name;
  if (device < 0) {
    parts.kv_dtype = DType::kF32;
    parts.device_name = "cpu";
    model::CpuBackendOptions cpu;
    cpu.num_threads = options.threads;
    BANYAN_ASSIGN_OR_RETURN(parts.backend, model::CreateCpuBackend(
                                               std::make_shared<const model::ModelWeights>(std::move(weights)), cpu));
  } else {
#if BANYAN_ENGINE_CUDA
    model::CudaBackendOptions cuda;
    cuda.device = device;
    if (options.precision == EngineOptions::Precision::kHigh) {
      cuda.activations = model::Activations::kSplitBf16;
      cuda.weights = model::Weights::kSplitBf16;
    }
    BANYAN_ASSIGN_OR_RETURN(parts.backend, model::CreateCudaBackend(weights, cuda));
    parts.kv_dtype = DType::kBf16;
    BANYAN_ASSIGN_OR_RETURN(std::vector<gpu::GpuInfo> gpus, gpu::ListGpus());
    parts.device_name = absl::StrCat("cuda:", device, " (", gpus[device].name, ")");
    parts.cuda_device = device;
#else
    return absl::UnavailableError("this build of Banyan has no CUDA backend");
#endif
  }
  return engine::CreateEngineFromParts(std::move(parts), options);
}

}  // namespace banyan

namespace banyan::engine {

absl::StatusOr<std::unique_ptr<Engine>> CreateEngineFromParts(EngineParts parts,
                                                              const EngineOptions& options) {
  BANYAN_ASSIGN_OR_RETURN(std::unique_ptr<EngineImpl> engine,
                          EngineImpl::Create(std::move(parts), options));
  return std::unique_ptr<Engine>(std::move(engine));
}

absl::StatusOr<std::unique_ptr<Engine>> CreateEngineForTesting(
    std::unique_ptr<model::Backend> backend, std::unique_ptr<model::Tokenizer> tokenizer,
    const EngineOptions& options) {
  EngineParts parts;
  if (backend != nullptr && backend->kv_memory_space() == MemorySpace::kDevice) {
    parts.kv_dtype = DType::kBf16;
    parts.device_name = std::string(backend->name());
  }
  parts.backend = std::move(backend);
  parts.tokenizer = std::move(tokenizer);
  return CreateEngineFromParts(std::move(parts), options);
}

// ----------------------------------------------------------------- EngineImpl

EngineImpl::EngineImpl(EngineParts parts, const EngineOptions& options)
    : options_(options),
      backend_(std::move(parts.backend)),
      tokenizer_(std::move(parts.tokenizer)),
      chat_format_(std::move(parts.chat_format)),
      kv_dtype_(parts.kv_dtype),
      device_name_(std::move(parts.device_name)),
      model_name_(std::move(parts.model_name)),
      cuda_device_(parts.cuda_device) {}

absl::StatusOr<std::unique_ptr<EngineImpl>> EngineImpl::Create(EngineParts parts,
                                                               const EngineOptions& options) {
  if (parts.backend == nullptr || parts.tokenizer == nullptr) {
    return absl::InvalidArgumentError("engine parts: a backend and a tokenizer are required");
  }
  if (options.page_size < 1 || options.page_size > 4096) {
    return absl::InvalidArgumentError(absl::StrCat("page_size ", options.page_size,
                                                   " outside [1, 4096]"));
  }
  if (options.max_batch < 1 || options.prefill_chunk < 1 || options.threads < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "max_batch (", options.max_batch, ") and prefill_chunk (", options.prefill_chunk,
        ") must be >= 1 and threads (", options.threads, ") >= 0"));
  }
  if (parts.tokenizer->vocab_size() > parts.backend->config().vocab_size) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the tokenizer's vocabulary (", parts.tokenizer->vocab_size(),
        ") is larger than the model's (", parts.backend->config().vocab_size, ")"));
  }
  std::unique_ptr<EngineImpl> engine(new EngineImpl(std::move(parts), options));
  BANYAN_RETURN_IF_ERROR(engine->Init());
  return engine;
}

absl::Status EngineImpl::Init() {
  config_ = backend_->config();
  if (model_name_.empty()) model_name_ = config_.name.empty() ? "model" : config_.name;
  for (int32_t id : {config_.eos_token_id, tokenizer_->eos_id()}) {
    if (id >= 0 && id < config_.vocab_size) eos_tokens_.push_back(id);
  }
  if (chat_format_.has_value()) {
    if (std::optional<int32_t> eot = tokenizer_->FindToken(chat_format_->end_of_turn())) {
      eos_tokens_.push_back(*eot);
    }
  }
  std::sort(eos_tokens_.begin(), eos_tokens_.end());
  eos_tokens_.erase(std::unique(eos_tokens_.begin(), eos_tokens_.end()), eos_tokens_.end());

  kv_tree::KvPoolConfig pool;
  pool.dtype = kv_dtype_;
  pool.num_layers = config_.num_layers;
  pool.num_kv_heads = config_.num_kv_heads;
  pool.head_dim = config_.head_dim;
  pool.page_size = options_.page_size;
  pool.byte_budget = options_.kv_budget_bytes;
  std::unique_ptr<kv_tree::KvStorage> storage;
  if (backend_->kv_memory_space() == MemorySpace::kHost) {
    if (pool.byte_budget == 0) pool.byte_budget = kDefaultHostBudget;
    BANYAN_ASSIGN_OR_RETURN(storage, kv_tree::HostKvStorage::Create(pool));
  } else {
#if BANYAN_BUILT_WITH_CUDA
    BANYAN_ASSIGN_OR_RETURN(std::unique_ptr<DeviceKvStorage> device, DeviceKvStorage::Create(pool, cuda_device_));
    DeviceKvStorage* raw = device.get();
    before_forward_ = [raw] { return raw->Synchronize(); };
    auto pinned = std::make_shared<gpu::PinnedBuffer>();
    pinned_logits_ = [pinned](size_t floats) -> absl::StatusOr<float*> {
      if (pinned->size() < floats * sizeof(float)) {
        BANYAN_ASSIGN_OR_RETURN(*pinned, gpu::PinnedBuffer::Allocate(floats * sizeof(float) * 5 / 4));
      }
      return pinned->As<float>();
    };
    storage = std::move(device);
#else
    return absl::UnavailableError("device KV memory needs a CUDA build");
#endif
  }
  // Scratch slots for rows that only need logits (engine_impl.h).
  const int64_t scratch = int64_t{options_.max_batch} + options_.prefill_chunk;
  const int64_t scratch_pages = (scratch + options_.page_size - 1) / options_.page_size;
  if (storage->layout().num_pages <= scratch_pages) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "KV budget of ", pool.byte_budget, " bytes holds ", storage->layout().num_pages,
        " pages; the engine needs more than ", scratch_pages, " (max_batch + prefill_chunk tokens)"));
  }
  kv_.layout = storage->layout();
  kv_.dtype = kv_dtype_;
  kv_.data = storage->data();
  BANYAN_ASSIGN_OR_RETURN(tree_, kv_tree::KvTree::Create(std::move(storage)));
  std::vector<int32_t> zeros(static_cast<size_t>(scratch), 0);
  BANYAN_ASSIGN_OR_RETURN(kv_tree::Extension ext,
                          tree_->Insert(kv_tree::KvNamespace{"\x01scratch", ""}, zeros));
  scratch_branch_ = ext.branch;
  scratch_slots_.assign(ext.write_slots.begin(), ext.write_slots.end());

  threads_ = options_.threads > 0 ? options_.threads
                                  : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  sample_pool_ = std::make_unique<model::ops::ThreadPool>(std::min(threads_, 16));
  scheduler_ = std::thread([this] { SchedulerLoop(); });
  return absl::OkStatus();
}

EngineImpl::~EngineImpl() {
  {
    EngineLock lock(&mu_);
    stopping_ = true;
    work_cv_.notify_all();
  }
  if (scheduler_.joinable()) scheduler_.join();
  // Callers woken with kCancelled may still be on their way out of RunRequest.
  while (calls_in_flight_.load() > 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
}

}  // namespace banyan::engine

// `banyan info`: see info_command.h.
#include "sdk/cli/info_command.h"

#include <chrono>
#include <iostream>
#include <memory>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "banyan/engine.h"
#include "banyan/status_macros.h"
#include "google/protobuf/util/json_util.h"
#include "model/default_model.h"
#include "sdk/cli/args.h"
#include "sdk/cli/command.h"
#include "sdk/cli/system_info.h"

namespace banyan::cli {
namespace {

std::string Gib(uint64_t bytes) { return absl::StrFormat("%.1f GiB", bytes / 1073741824.0); }

void FillEngine(const EngineInfo& e, proto::EngineSummary* s) {
  s->set_status("ok");
  s->set_device(e.device);
  s->set_backend(e.backend);
  s->set_model(e.model);
  s->set_architecture(e.architecture);
  s->set_num_layers(e.num_layers);
  s->set_hidden_size(e.hidden_size);
  s->set_num_q_heads(e.num_q_heads);
  s->set_num_kv_heads(e.num_kv_heads);
  s->set_head_dim(e.head_dim);
  s->set_vocab_size(e.vocab_size);
  s->set_max_position(e.max_position);
  s->set_parameters(e.parameters);
  s->set_chat_format(e.chat_format);
  for (int32_t t : e.stop_tokens) s->add_stop_tokens(t);
  s->set_kv_dtype(e.kv_dtype);
  s->set_page_size(e.page_size);
  s->set_kv_pages(e.kv_pages);
  s->set_kv_tokens(e.kv_tokens);
  s->set_kv_bytes(e.kv_bytes);
  s->set_kv_bytes_per_token(e.kv_bytes_per_token);
  s->set_max_batch(e.max_batch);
  s->set_prefill_chunk(e.prefill_chunk);
  s->set_threads(e.threads);
  s->set_attention_mode(e.attention_mode);
}

void PrintEngine(const proto::EngineSummary& e) {
  if (e.status() != "ok") {
    std::cout << "engine:        none (" << e.status() << ")\n";
    return;
  }
  std::cout << absl::StrFormat("engine:        %s, backend %s, created in %.2f s\n", e.device(), e.backend(),
                               e.load_seconds());
  std::cout << absl::StrFormat(
      "  model:       %s (%s, %d layers, hidden %d, heads %d/%d x %d, vocab %d, %.1fM parameters%s)\n",
      e.model(), e.architecture(), e.num_layers(), e.hidden_size(), e.num_q_heads(), e.num_kv_heads(),
      e.head_dim(), e.vocab_size(), e.parameters() / 1e6,
      e.chat_format().empty() ? ", no chat template" : ", chat " + e.chat_format());
  std::cout << absl::StrFormat("  KV pool:     %s, %d tokens/page, %d pages = %d tokens, %s (%d bytes/token)\n",
                               e.kv_dtype(), e.page_size(), e.kv_pages(), e.kv_tokens(), Gib(e.kv_bytes()),
                               e.kv_bytes_per_token());
  std::cout << absl::StrFormat("  scheduler:   max batch %d rows, prefill chunk %d, %d threads, %s attention\n",
                               e.max_batch(), e.prefill_chunk(), e.threads(), e.attention_mode());
}

void PrintText(const proto::SystemInfo& info) {
  std::cout << "banyan " << info.version() << "\n";
  std::cout << "backends:      " << absl::StrJoin(info.backends(), ", ");
  if (!info.cuda_architectures().empty()) std::cout << "  (CUDA archs " << info.cuda_architectures() << ")";
  std::cout << "\n";
  if (info.gpus().empty()) {
    std::cout << "GPUs:          none (" << info.gpu_status() << ")\n";
  }
  for (const auto& g : info.gpus()) {
    std::cout << absl::StrFormat("GPU %d:         %s, %s total, %s free, %d SMs, sm_%s\n", g.index(),
                                 g.name(), Gib(g.total_bytes()), Gib(g.free_bytes()),
                                 g.multiprocessors(), g.compute_capability());
  }
  const auto& l = info.libraries();
  std::cout << "libraries:     Abseil " << l.abseil() << ", Protobuf " << l.protobuf() << ", "
            << l.lua();
  if (!l.cuda_runtime().empty()) {
    std::cout << ", CUDA runtime " << l.cuda_runtime()
              << (l.cuda_driver().empty() ? " (no driver)" : ", driver " + l.cuda_driver())
              << ", cuBLAS " << l.cublas() << ", NCCL " << l.nccl();
  }
  std::cout << "\n";
  const auto& m = info.default_model();
  std::cout << "default model: " << m.name() << "\n               " << m.path() << " ("
            << (m.present() ? absl::StrFormat("present, %.1f MB", m.size_bytes() / 1e6)
                            : std::string("missing: run scripts/setup.sh"))
            << ")\n";
  if (info.has_engine()) PrintEngine(info.engine());
}

}  // namespace

proto::SystemInfo CollectInfo(const InfoRequest& request, absl::Status* engine_status) {
  proto::SystemInfo info = CollectSystemInfo();
  if (engine_status != nullptr) *engine_status = absl::OkStatus();
  if (!request.engine) return info;
  proto::EngineSummary* summary = info.mutable_engine();
  EngineOptions options;
  options.model_path = request.model_path;
  options.device = request.device;
  options.kv_budget_bytes = request.kv_budget_bytes;
  options.threads = request.threads;
  if (options.model_path.empty()) {
    if (!info.default_model().present()) {
      summary->set_status("the default model is missing: run scripts/setup.sh");
      return info;
    }
    options.model_path = info.default_model().path();
  }
  summary->set_model_path(options.model_path);
  const auto start = std::chrono::steady_clock::now();
  absl::StatusOr<std::unique_ptr<Engine>> engine = Engine::Create(options);
  if (!engine.ok()) {
    summary->set_status(engine.status().ToString());
    if (engine_status != nullptr) *engine_status = engine.status();
    return info;
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  FillEngine((*engine)->Info(), summary);
  summary->set_load_seconds(seconds);
  return info;
}

absl::Status RunInfo(const std::vector<std::string>& argv) {
  BANYAN_ASSIGN_OR_RETURN(Args args, ParseFlags("info", argv));
  InfoRequest request;
  request.engine = !args.GetBool("no-engine");
  request.model_path = args.GetString("model");
  request.device = args.GetString("device", "auto");
  BANYAN_ASSIGN_OR_RETURN(const int64_t budget_mb, args.GetInt("kv-budget-mb", 0));
  BANYAN_ASSIGN_OR_RETURN(const int64_t threads, args.GetInt("threads", 0));
  if (budget_mb < 0 || budget_mb > (int64_t{1} << 24)) {
    return absl::InvalidArgumentError("--kv-budget-mb must be in [0, 2^24]");
  }
  if (threads < 0 || threads > 1024) return absl::InvalidArgumentError("--threads must be in [0, 1024]");
  request.kv_budget_bytes = static_cast<uint64_t>(budget_mb) << 20;
  request.threads = static_cast<int>(threads);
  absl::Status engine_status;
  const proto::SystemInfo info = CollectInfo(request, &engine_status);
  if (args.GetBool("json")) {
    std::string json;
    google::protobuf::util::JsonPrintOptions options;
    options.add_whitespace = true;
    options.preserve_proto_field_names = true;
    const auto status = google::protobuf::util::MessageToJsonString(info, &json, options);
    if (!status.ok()) return absl::InternalError(std::string(status.message()));
    std::cout << json;
  } else {
    PrintText(info);
  }
  // A model or device named on the command line must work; the defaults are optional.
  if (args.Has("model") || args.Has("device")) return engine_status;
  return absl::OkStatus();
}

}  // namespace banyan::cli

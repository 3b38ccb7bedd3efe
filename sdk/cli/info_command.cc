// `banyan info [--json]`: what this build is and what it can see.
#include <iostream>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "banyan/status_macros.h"
#include "google/protobuf/util/json_util.h"
#include "sdk/cli/args.h"
#include "sdk/cli/command.h"
#include "sdk/cli/system_info.h"

namespace banyan::cli {
namespace {

std::string Gib(uint64_t bytes) { return absl::StrFormat("%.1f GiB", bytes / 1073741824.0); }

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
}

}  // namespace

absl::Status RunInfo(const std::vector<std::string>& argv) {
  BANYAN_ASSIGN_OR_RETURN(Args args, Args::Parse(argv, {}, {"json"}));
  const proto::SystemInfo info = CollectSystemInfo();
  if (args.GetBool("json")) {
    std::string json;
    google::protobuf::util::JsonPrintOptions options;
    options.add_whitespace = true;
    options.preserve_proto_field_names = true;
    const auto status = google::protobuf::util::MessageToJsonString(info, &json, options);
    if (!status.ok()) return absl::InternalError(std::string(status.message()));
    std::cout << json;
    return absl::OkStatus();
  }
  PrintText(info);
  return absl::OkStatus();
}

}  // namespace banyan::cli

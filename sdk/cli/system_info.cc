#include "sdk/cli/system_info.h"

#include <filesystem>

#include "absl/strings/str_cat.h"
#include "banyan/version.h"
#include "google/protobuf/stubs/common.h"
#include "model/default_model.h"
#include "scripting/lua_info.h"
#include "sdk/base/build_config.h"
#include "sdk/gpu/device_info.h"

namespace banyan::cli {
namespace {

// 13000 -> "13.0"; 130102 (cuBLAS style) handled by the caller.
std::string MajorMinor(int version) {
  return absl::StrCat(version / 1000, ".", (version % 1000) / 10);
}

}  // namespace

proto::SystemInfo CollectSystemInfo() {
  proto::SystemInfo info;
  info.set_version(std::string(Version()));
  info.add_backends("cpu");
  if (BuiltWithCuda()) {
    info.add_backends("cuda");
    info.set_cuda_architectures(BANYAN_CUDA_ARCHITECTURES);
  }

  auto gpus = gpu::ListGpus();
  if (gpus.ok()) {
    for (const auto& g : *gpus) {
      auto* d = info.add_gpus();
      d->set_index(g.index);
      d->set_name(g.name);
      d->set_total_bytes(g.total_bytes);
      d->set_free_bytes(g.free_bytes);
      d->set_multiprocessors(g.multiprocessors);
      d->set_compute_capability(absl::StrCat(g.compute_major, ".", g.compute_minor));
    }
    if (gpus->empty()) info.set_gpu_status("no GPU visible");
  } else {
    info.set_gpu_status(std::string(gpus.status().message()));
  }

  auto* libs = info.mutable_libraries();
  libs->set_abseil(BANYAN_ABSL_VERSION);
  libs->set_protobuf(google::protobuf::internal::VersionString(GOOGLE_PROTOBUF_VERSION));
  libs->set_lua(scripting::LuaRelease());
  if (auto v = gpu::GetCudaLibraryVersions(); v.ok()) {
    libs->set_cuda_runtime(MajorMinor(v->runtime));
    if (v->driver > 0) libs->set_cuda_driver(MajorMinor(v->driver));
    libs->set_cublas(absl::StrCat(v->cublas / 10000, ".", (v->cublas / 100) % 100, ".", v->cublas % 100));
    libs->set_nccl(absl::StrCat(v->nccl / 10000, ".", (v->nccl / 100) % 100, ".", v->nccl % 100));
  }

  auto* model = info.mutable_default_model();
  model->set_name(std::string(model::kDefaultModelName));
  model->set_path(model::DefaultModelPath());
  std::error_code error;
  const bool present = std::filesystem::is_regular_file(model->path(), error);
  model->set_present(present);
  if (present) model->set_size_bytes(std::filesystem::file_size(model->path(), error));
  return info;
}

}  // namespace banyan::cli

// What GPUs this process can see, and which CUDA library versions it runs
// with. Works in every build: a CPU-only build (BANYAN_CUDA=OFF) or a machine
// without a driver reports no GPUs and says why. Thread-safe.
#ifndef BANYAN_SDK_GPU_DEVICE_INFO_H_
#define BANYAN_SDK_GPU_DEVICE_INFO_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace banyan::gpu {

struct GpuInfo {
  int index = 0;
  std::string name;
  uint64_t total_bytes = 0;
  uint64_t free_bytes = 0;
  int multiprocessors = 0;
  int compute_major = 0;
  int compute_minor = 0;
};

// The GPUs visible to this process. kUnavailable (with the driver's reason)
// when there is no driver or no device, or when built without CUDA.
absl::StatusOr<std::vector<GpuInfo>> ListGpus();

// True when at least one GPU is usable. GPU tests skip when this is false.
bool HasGpu();

struct CudaLibraryVersions {
  int runtime = 0;  // cudaRuntimeGetVersion, e.g. 13000
  int driver = 0;   // cudaDriverGetVersion; 0 without a driver
  int cublas = 0;   // cublasGetProperty major*10000 + minor*100 + patch
  int nccl = 0;     // ncclGetVersion, e.g. 22809
};

// Versions of the CUDA libraries this build links. kUnavailable when built
// without CUDA. Never fails for a missing driver (driver is then 0).
absl::StatusOr<CudaLibraryVersions> GetCudaLibraryVersions();

}  // namespace banyan::gpu

#endif  // BANYAN_SDK_GPU_DEVICE_INFO_H_

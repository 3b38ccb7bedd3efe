#include "sdk/gpu/device_info.h"

#include "sdk/base/build_config.h"

#if BANYAN_BUILT_WITH_CUDA
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <nccl.h>

#include "banyan/status_macros.h"
#include "sdk/gpu/cuda_status.h"
#endif

namespace banyan::gpu {

#if BANYAN_BUILT_WITH_CUDA

absl::StatusOr<std::vector<GpuInfo>> ListGpus() {
  int count = 0;
  BANYAN_CUDA_RETURN_IF_ERROR(cudaGetDeviceCount(&count));
  std::vector<GpuInfo> gpus;
  for (int i = 0; i < count; ++i) {
    cudaDeviceProp prop{};
    BANYAN_CUDA_RETURN_IF_ERROR(cudaGetDeviceProperties(&prop, i));
    GpuInfo info;
    info.index = i;
    info.name = prop.name;
    info.total_bytes = prop.totalGlobalMem;
    info.multiprocessors = prop.multiProcessorCount;
    info.compute_major = prop.major;
    info.compute_minor = prop.minor;
    int previous = 0;
    BANYAN_CUDA_RETURN_IF_ERROR(cudaGetDevice(&previous));
    BANYAN_CUDA_RETURN_IF_ERROR(cudaSetDevice(i));
    size_t free_bytes = 0, total_bytes = 0;
    BANYAN_CUDA_RETURN_IF_ERROR(cudaMemGetInfo(&free_bytes, &total_bytes));
    BANYAN_CUDA_RETURN_IF_ERROR(cudaSetDevice(previous));
    info.free_bytes = free_bytes;
    gpus.push_back(std::move(info));
  }
  return gpus;
}

bool HasGpu() {
  static const bool has_gpu = [] {
    int count = 0;
    return cudaGetDeviceCount(&count) == cudaSuccess && count > 0;
  }();
  return has_gpu;
}

absl::StatusOr<CudaLibraryVersions> GetCudaLibraryVersions() {
  CudaLibraryVersions v;
  BANYAN_CUDA_RETURN_IF_ERROR(cudaRuntimeGetVersion(&v.runtime));
  if (cudaDriverGetVersion(&v.driver) != cudaSuccess) v.driver = 0;
  int major = 0, minor = 0, patch = 0;
  BANYAN_CUBLAS_RETURN_IF_ERROR(cublasGetProperty(MAJOR_VERSION, &major));
  BANYAN_CUBLAS_RETURN_IF_ERROR(cublasGetProperty(MINOR_VERSION, &minor));
  BANYAN_CUBLAS_RETURN_IF_ERROR(cublasGetProperty(PATCH_LEVEL, &patch));
  v.cublas = major * 10000 + minor * 100 + patch;
  BANYAN_NCCL_RETURN_IF_ERROR(ncclGetVersion(&v.nccl));
  return v;
}

#else  // CPU-only build

absl::StatusOr<std::vector<GpuInfo>> ListGpus() {
  return absl::UnavailableError("Banyan was built without CUDA (BANYAN_CUDA=OFF)");
}

bool HasGpu() { return false; }

absl::StatusOr<CudaLibraryVersions> GetCudaLibraryVersions() {
  return absl::UnavailableError("Banyan was built without CUDA (BANYAN_CUDA=OFF)");
}

#endif

}  // namespace banyan::gpu

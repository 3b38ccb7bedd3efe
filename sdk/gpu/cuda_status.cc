#include "sdk/gpu/cuda_status.h"

#include "absl/strings/str_cat.h"

namespace banyan::gpu {
namespace {

std::string Where(const char* expr, const char* file, int line) {
  return absl::StrCat(" in `", expr, "` at ", file, ":", line);
}

}  // namespace

absl::Status CudaStatus(cudaError_t error, const char* expr, const char* file, int line) {
  if (error == cudaSuccess) return absl::OkStatus();
  const std::string message = absl::StrCat("CUDA error ", cudaGetErrorName(error), " (",
                                           cudaGetErrorString(error), ")", Where(expr, file, line));
  switch (error) {
    case cudaErrorMemoryAllocation:
      return absl::ResourceExhaustedError(message);
    case cudaErrorNoDevice:
    case cudaErrorInsufficientDriver:
    case cudaErrorDevicesUnavailable:
      return absl::UnavailableError(message);
    case cudaErrorInvalidValue:
    case cudaErrorInvalidDevice:
    case cudaErrorInvalidConfiguration:
    case cudaErrorInvalidDevicePointer:
    case cudaErrorInvalidMemcpyDirection:
      return absl::InvalidArgumentError(message);
    case cudaErrorNotSupported:
    case cudaErrorNoKernelImageForDevice:
      return absl::UnimplementedError(message);
    default:
      return absl::InternalError(message);
  }
}

absl::Status CublasStatus(cublasStatus_t error, const char* expr, const char* file, int line) {
  if (error == CUBLAS_STATUS_SUCCESS) return absl::OkStatus();
  const std::string message =
      absl::StrCat("cuBLAS error ", cublasGetStatusName(error), " (", cublasGetStatusString(error),
                   ")", Where(expr, file, line));
  switch (error) {
    case CUBLAS_STATUS_ALLOC_FAILED:
      return absl::ResourceExhaustedError(message);
    case CUBLAS_STATUS_NOT_INITIALIZED:
      return absl::UnavailableError(message);
    case CUBLAS_STATUS_INVALID_VALUE:
      return absl::InvalidArgumentError(message);
    case CUBLAS_STATUS_NOT_SUPPORTED:
    case CUBLAS_STATUS_ARCH_MISMATCH:
      return absl::UnimplementedError(message);
    default:
      return absl::InternalError(message);
  }
}

absl::Status NcclStatus(ncclResult_t error, const char* expr, const char* file, int line) {
  if (error == ncclSuccess) return absl::OkStatus();
  const std::string message =
      absl::StrCat("NCCL error ", static_cast<int>(error), " (", ncclGetErrorString(error), ")",
                   Where(expr, file, line));
  switch (error) {
    case ncclInvalidArgument:
    case ncclInvalidUsage:
      return absl::InvalidArgumentError(message);
    case ncclSystemError:
    case ncclRemoteError:
      return absl::UnavailableError(message);
    default:
      return absl::InternalError(message);
  }
}

}  // namespace banyan::gpu

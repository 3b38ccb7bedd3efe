// The edge where CUDA, cuBLAS and NCCL error codes become absl::Status. Nothing
// in Banyan aborts on a device error: every runtime call is wrapped here.
//
//   BANYAN_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(dst, src, n, kind, stream));
//   BANYAN_CUBLAS_RETURN_IF_ERROR(cublasGemmEx(...));
//   BANYAN_NCCL_RETURN_IF_ERROR(ncclAllReduce(...));
//   BANYAN_CUDA_RETURN_IF_ERROR(cudaGetLastError());  // after every launch
//
// Code mapping: out of memory -> kResourceExhausted; no device or driver ->
// kUnavailable; invalid arguments -> kInvalidArgument; unsupported features ->
// kUnimplemented; everything else -> kInternal. The message names the failing
// expression, the library's error name and text, and the file and line.
// Thread-safe (pure functions).
#ifndef BANYAN_SDK_GPU_CUDA_STATUS_H_
#define BANYAN_SDK_GPU_CUDA_STATUS_H_

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <nccl.h>

#include "absl/status/status.h"

namespace banyan::gpu {

absl::Status CudaStatus(cudaError_t error, const char* expr, const char* file, int line);
absl::Status CublasStatus(cublasStatus_t error, const char* expr, const char* file, int line);
absl::Status NcclStatus(ncclResult_t error, const char* expr, const char* file, int line);

}  // namespace banyan::gpu

#define BANYAN_GPU_RETURN_IF_ERROR_IMPL_(kind, expr)                                   \
  do {                                                                                 \
    auto banyan_gpu_error_ = (expr);                                                   \
    ::absl::Status banyan_gpu_status_ =                                                \
        ::banyan::gpu::kind##Status(banyan_gpu_error_, #expr, __FILE__, __LINE__);     \
    if (!banyan_gpu_status_.ok()) return banyan_gpu_status_;                           \
  } while (false)

#define BANYAN_CUDA_RETURN_IF_ERROR(expr) BANYAN_GPU_RETURN_IF_ERROR_IMPL_(Cuda, expr)
#define BANYAN_CUBLAS_RETURN_IF_ERROR(expr) BANYAN_GPU_RETURN_IF_ERROR_IMPL_(Cublas, expr)
#define BANYAN_NCCL_RETURN_IF_ERROR(expr) BANYAN_GPU_RETURN_IF_ERROR_IMPL_(Nccl, expr)

// Converts without returning (destructors, or to collect a Status value).
#define BANYAN_CUDA_STATUS(expr) ::banyan::gpu::CudaStatus((expr), #expr, __FILE__, __LINE__)

#endif  // BANYAN_SDK_GPU_CUDA_STATUS_H_

#include "sdk/gpu/blas.h"

#include "absl/strings/str_cat.h"
#include "banyan/status_macros.h"
#include "sdk/base/logging.h"
#include "sdk/gpu/cuda_status.h"

namespace banyan::gpu {
namespace {

cudaDataType_t ToCuda(DType dtype) {
  switch (dtype) {
    case DType::kF32: return CUDA_R_32F;
    case DType::kBf16: return CUDA_R_16BF;
    case DType::kF16: return CUDA_R_16F;
  }
  return CUDA_R_32F;
}

}  // namespace

absl::StatusOr<BlasHandle> BlasHandle::Create() {
  cublasHandle_t handle = nullptr;
  BANYAN_CUBLAS_RETURN_IF_ERROR(cublasCreate(&handle));
  return BlasHandle(handle);
}

BlasHandle& BlasHandle::operator=(BlasHandle&& other) noexcept {
  if (this != &other) {
    if (handle_ != nullptr) cublasDestroy(handle_);
    handle_ = std::exchange(other.handle_, nullptr);
  }
  return *this;
}

BlasHandle::~BlasHandle() {
  if (handle_ != nullptr) {
    const cublasStatus_t status = cublasDestroy(handle_);
    if (status != CUBLAS_STATUS_SUCCESS) BANYAN_LOG(ERROR) << "cublasDestroy: " << status;
  }
}

absl::Status Gemm(const BlasHandle& blas, const GemmArgs& args, cudaStream_t stream) {
  if (args.m <= 0 || args.n <= 0 || args.k <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("GEMM sizes must be positive, got m=", args.m, " n=", args.n, " k=", args.k));
  }
  if (args.a == nullptr || args.b == nullptr || args.c == nullptr) {
    return absl::InvalidArgumentError("GEMM operand is null");
  }
  if (args.c_dtype != args.ab_dtype && args.c_dtype != DType::kF32) {
    return absl::InvalidArgumentError(absl::StrCat("GEMM output dtype ", std::string(DTypeName(args.c_dtype)),
                                                   " with inputs ", std::string(DTypeName(args.ab_dtype))));
  }
  BANYAN_CUBLAS_RETURN_IF_ERROR(cublasSetStream(blas.get(), stream));
  // Row-major C[m,n] is column-major C^T[n,m] = B[n,k] . A^T, with B stored as
  // column-major (k x n) and A as column-major (k x m).
  const cublasComputeType_t compute = CUBLAS_COMPUTE_32F;  // fp32 accumulation, no tf32
  BANYAN_CUBLAS_RETURN_IF_ERROR(cublasGemmEx(
      blas.get(), CUBLAS_OP_T, CUBLAS_OP_N, args.n, args.m, args.k, &args.alpha, args.b,
      ToCuda(args.ab_dtype), args.k, args.a, ToCuda(args.ab_dtype), args.k, &args.beta, args.c,
      ToCuda(args.c_dtype), args.n, compute, CUBLAS_GEMM_DEFAULT));
  return absl::OkStatus();
}

}  // namespace banyan::gpu

// cuBLAS, the Banyan way: an owning handle and one GEMM entry point in the
// layout every linear layer uses (row-major activations times row-major
// weights transposed). Errors come back as absl::Status.
//
//   BANYAN_ASSIGN_OR_RETURN(auto blas, gpu::BlasHandle::Create());
//   BANYAN_RETURN_IF_ERROR(gpu::Gemm(blas, {.m = tokens, .n = out, .k = in,
//                                           .a = x, .b = w, .c = y}, stream));
//
// BlasHandle is move-only and not thread-safe: use one per thread or stream.
#ifndef BANYAN_SDK_GPU_BLAS_H_
#define BANYAN_SDK_GPU_BLAS_H_

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "sdk/base/tensor_view.h"

namespace banyan::gpu {

class BlasHandle {
 public:
  // kUnavailable without a usable GPU.
  static absl::StatusOr<BlasHandle> Create();
  BlasHandle(BlasHandle&& other) noexcept : handle_(std::exchange(other.handle_, nullptr)) {}
  BlasHandle& operator=(BlasHandle&& other) noexcept;
  BlasHandle(const BlasHandle&) = delete;
  BlasHandle& operator=(const BlasHandle&) = delete;
  ~BlasHandle();

  cublasHandle_t get() const { return handle_; }

 private:
  explicit BlasHandle(cublasHandle_t handle) : handle_(handle) {}
  cublasHandle_t handle_ = nullptr;
};

// C[m, n] = alpha * A[m, k] . B[n, k]^T + beta * C[m, n], all row-major and
// contiguous, accumulated in fp32. A and B share a dtype (bf16, f16 or f32;
// f32 uses tf32-free fp32 math); C is that dtype or f32.
struct GemmArgs {
  int m = 0, n = 0, k = 0;
  const void* a = nullptr;  // [m, k] device
  const void* b = nullptr;  // [n, k] device
  void* c = nullptr;        // [m, n] device
  DType ab_dtype = DType::kBf16;
  DType c_dtype = DType::kBf16;
  float alpha = 1.0f;
  float beta = 0.0f;
};

// Enqueues the product on `stream`. kInvalidArgument for non-positive sizes,
// null pointers or an unsupported dtype pair; cuBLAS errors map as in
// cuda_status.h.
absl::Status Gemm(const BlasHandle& blas, const GemmArgs& args, cudaStream_t stream);

}  // namespace banyan::gpu

#endif  // BANYAN_SDK_GPU_BLAS_H_

// Runs on every machine: the conversion needs no GPU.
#include "sdk/gpu/cuda_status.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "sdk/base/status_testing.h"
#include "sdk/gpu/device_info.h"

namespace banyan::gpu {
namespace {

using ::banyan::testing::StatusIs;
using ::testing::HasSubstr;

TEST(CudaStatusTest, MapsCodesAndNamesTheExpression) {
  EXPECT_TRUE(CudaStatus(cudaSuccess, "x", "f.cc", 1).ok());
  EXPECT_THAT(CudaStatus(cudaErrorMemoryAllocation, "cudaMalloc(&p, n)", "f.cc", 7),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       HasSubstr("cudaErrorMemoryAllocation")));
  EXPECT_THAT(CudaStatus(cudaErrorNoDevice, "cudaSetDevice(0)", "f.cc", 7),
              StatusIs(absl::StatusCode::kUnavailable, HasSubstr("cudaSetDevice(0)")));
  EXPECT_THAT(CudaStatus(cudaErrorInvalidValue, "e", "f.cc", 9),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("f.cc:9")));
  EXPECT_THAT(CudaStatus(cudaErrorLaunchFailure, "e", "f.cc", 9),
              StatusIs(absl::StatusCode::kInternal));
}

TEST(CudaStatusTest, CublasAndNcclCodes) {
  EXPECT_TRUE(CublasStatus(CUBLAS_STATUS_SUCCESS, "x", "f", 1).ok());
  EXPECT_THAT(CublasStatus(CUBLAS_STATUS_ALLOC_FAILED, "x", "f", 1),
              StatusIs(absl::StatusCode::kResourceExhausted, HasSubstr("CUBLAS_STATUS_ALLOC_FAILED")));
  EXPECT_THAT(CublasStatus(CUBLAS_STATUS_INVALID_VALUE, "x", "f", 1),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_TRUE(NcclStatus(ncclSuccess, "x", "f", 1).ok());
  EXPECT_THAT(NcclStatus(ncclInvalidArgument, "ncclAllReduce(...)", "f", 1),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("ncclAllReduce")));
}

TEST(DeviceInfoTest, LibraryVersionsAreReadableWithoutAGpu) {
  auto versions = GetCudaLibraryVersions();
  ASSERT_TRUE(versions.ok()) << versions.status();
  EXPECT_GE(versions->runtime, 13000);
  EXPECT_GE(versions->nccl, 22800);
  EXPECT_GE(versions->cublas, 130000);
  auto gpus = ListGpus();
  if (HasGpu()) {
    ASSERT_TRUE(gpus.ok()) << gpus.status();
    ASSERT_FALSE(gpus->empty());
    EXPECT_GT((*gpus)[0].total_bytes, 0u);
  } else {
    EXPECT_FALSE(gpus.ok());
  }
}

}  // namespace
}  // namespace banyan::gpu

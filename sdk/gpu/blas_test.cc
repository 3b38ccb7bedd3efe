// The first real GPU test: a cuBLAS bf16 GEMM against a double-accumulation
// CPU reference on fresh random inputs, output poisoned before the run.
#include "sdk/gpu/blas.h"

#include <cmath>
#include <vector>

#include "gtest/gtest.h"
#include "sdk/base/half.h"
#include "sdk/base/rng.h"
#include "sdk/base/status_testing.h"
#include "sdk/gpu/device_buffer.h"
#include "sdk/gpu/gpu_test_util.h"

namespace banyan::gpu {
namespace {

using ::banyan::testing::StatusIs;

struct Shape {
  int m, n, k;
};

class GemmTest : public ::testing::TestWithParam<Shape> {};

TEST_P(GemmTest, Bf16MatchesDoubleReference) {
  BANYAN_SKIP_WITHOUT_GPU();
  const auto [m, n, k] = GetParam();
  Rng rng(::testing::UnitTest::GetInstance()->random_seed() + m * 131 + n * 7 + k);
  std::vector<Bf16> a(static_cast<size_t>(m) * k), b(static_cast<size_t>(n) * k);
  for (auto& x : a) x = Bf16(rng.Normal());
  for (auto& x : b) x = Bf16(rng.Normal());

  BANYAN_ASSERT_OK_AND_ASSIGN(auto stream, Stream::Create());
  BANYAN_ASSERT_OK_AND_ASSIGN(auto blas, BlasHandle::Create());
  BANYAN_ASSERT_OK_AND_ASSIGN(auto da, DeviceBuffer::Allocate(a.size() * 2));
  BANYAN_ASSERT_OK_AND_ASSIGN(auto db, DeviceBuffer::Allocate(b.size() * 2));
  BANYAN_ASSERT_OK_AND_ASSIGN(auto dc, DeviceBuffer::Allocate(size_t{4} * m * n));
  BANYAN_ASSERT_OK(da.CopyFromHost(a.data(), a.size() * 2, stream.get()));
  BANYAN_ASSERT_OK(db.CopyFromHost(b.data(), b.size() * 2, stream.get()));
  BANYAN_ASSERT_OK(dc.Fill(0xff, stream.get()));  // NaN poison
  BANYAN_ASSERT_OK(Gemm(blas, {.m = m, .n = n, .k = k, .a = da.data(), .b = db.data(),
                               .c = dc.data(), .ab_dtype = DType::kBf16, .c_dtype = DType::kF32},
                        stream.get()));
  std::vector<float> c(static_cast<size_t>(m) * n);
  BANYAN_ASSERT_OK(dc.CopyToHost(c.data(), c.size() * 4, stream.get()));
  BANYAN_ASSERT_OK(stream.Synchronize());

  double err_sq = 0, ref_sq = 0;
  for (int i = 0; i < m; ++i) {
    for (int j = 0; j < n; ++j) {
      double ref = 0;
      for (int p = 0; p < k; ++p) {
        ref += static_cast<double>(static_cast<float>(a[size_t(i) * k + p])) *
               static_cast<float>(b[size_t(j) * k + p]);
      }
      const double got = c[size_t(i) * n + j];
      ASSERT_TRUE(std::isfinite(got)) << "unwritten output at " << i << "," << j;
      err_sq += (got - ref) * (got - ref);
      ref_sq += ref * ref;
    }
  }
  // bf16 inputs are exact in the reference; only fp32 accumulation differs.
  EXPECT_LT(std::sqrt(err_sq / ref_sq), 1e-5);
}

INSTANTIATE_TEST_SUITE_P(Shapes, GemmTest,
                         ::testing::Values(Shape{1, 64, 128}, Shape{17, 33, 65},
                                           Shape{128, 256, 512}, Shape{257, 96, 1024}));

TEST(GemmArgsTest, RejectsBadArguments) {
  BANYAN_SKIP_WITHOUT_GPU();
  BANYAN_ASSERT_OK_AND_ASSIGN(auto blas, BlasHandle::Create());
  EXPECT_THAT(Gemm(blas, {.m = 0, .n = 1, .k = 1}, nullptr),
              StatusIs(absl::StatusCode::kInvalidArgument));
  int dummy = 0;
  EXPECT_THAT(Gemm(blas, {.m = 1, .n = 1, .k = 1, .a = &dummy, .b = &dummy, .c = &dummy,
                          .ab_dtype = DType::kF32, .c_dtype = DType::kBf16},
                   nullptr),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

}  // namespace
}  // namespace banyan::gpu

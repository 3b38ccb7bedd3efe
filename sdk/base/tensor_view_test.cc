#include "sdk/base/tensor_view.h"

#include <vector>

#include "gtest/gtest.h"

namespace banyan {
namespace {

TEST(TensorViewTest, RowMajorStridesAndOffsets) {
  std::vector<float> data(2 * 3 * 4);
  TensorView view(data.data(), DType::kF32, {2, 3, 4});
  EXPECT_EQ(view.rank(), 3);
  EXPECT_EQ(view.NumElements(), 24);
  EXPECT_EQ(view.SizeBytes(), 96u);
  EXPECT_EQ(view.stride(0), 12);
  EXPECT_EQ(view.stride(2), 1);
  EXPECT_EQ(view.Offset({1, 2, 3}), 23);
  EXPECT_TRUE(view.IsContiguous());
  EXPECT_EQ(view.DebugString(), "f32[2,3,4]");
}

TEST(TensorViewTest, StridedRejectsBadShapes) {
  const int64_t shape[2] = {4, -1};
  const int64_t strides[2] = {1, 4};
  auto bad = TensorView::Strided(nullptr, DType::kBf16, shape, strides, 2, MemorySpace::kHost);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  auto too_deep = TensorView::Strided(nullptr, DType::kBf16, shape, strides, 9, MemorySpace::kHost);
  EXPECT_EQ(too_deep.status().code(), absl::StatusCode::kInvalidArgument);
  const int64_t ok_shape[2] = {4, 3};
  const int64_t transposed[2] = {1, 4};
  auto view = TensorView::Strided(nullptr, DType::kBf16, ok_shape, transposed, 2, MemorySpace::kDevice);
  ASSERT_TRUE(view.ok());
  EXPECT_FALSE(view->IsContiguous());
  EXPECT_EQ(view->space(), MemorySpace::kDevice);
}

TEST(TensorViewTest, DTypeNamesRoundTrip) {
  for (DType t : {DType::kF32, DType::kBf16, DType::kF16}) {
    auto parsed = ParseDType(DTypeName(t));
    ASSERT_TRUE(parsed.ok());
    EXPECT_EQ(*parsed, t);
  }
  EXPECT_EQ(ParseDType("int8").status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace banyan

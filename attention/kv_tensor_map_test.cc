// The TMA descriptors of the KV pool (kv_tensor_map.h): which layouts the
// TMA kernel can read, and every error EncodeKvTensorMaps returns before it
// reaches the driver (these run without a GPU); with a GPU, both maps encode
// for a real pool.
#include "attention/kv_tensor_map.h"

#include <cstdint>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "sdk/base/status_testing.h"
#include "sdk/gpu/device_buffer.h"
#include "sdk/gpu/gpu_test_util.h"

namespace banyan::attention {
namespace {

using ::banyan::testing::StatusIs;

KvLayout Layout(int32_t page_size, int32_t head_dim) {
  KvLayout layout;
  layout.num_layers = 2;
  layout.num_kv_heads = 4;
  layout.head_dim = head_dim;
  layout.page_size = page_size;
  layout.num_pages = 37;
  layout.dtype_bytes = 2;
  return layout;
}

TEST(KvTensorMapTest, SupportsPowerOfTwoPagesOfAtLeastEightAnd16BitKv) {
  for (const int32_t page : {8, 16, 32, 64, 128, 256}) {
    for (const int32_t dim : {64, 128}) {
      EXPECT_TRUE(KvTensorMapSupported(Layout(page, dim), DType::kBf16)) << page << " " << dim;
      EXPECT_TRUE(KvTensorMapSupported(Layout(page, dim), DType::kF16)) << page << " " << dim;
      EXPECT_FALSE(KvTensorMapSupported(Layout(page, dim), DType::kF32)) << page << " " << dim;
    }
    EXPECT_EQ(KvTensorMapBoxRows(Layout(page, 128)), page < 64 ? page : 64);
  }
  for (const int32_t page : {1, 2, 4, 5, 7, 12, 24, 48, 96}) {
    EXPECT_FALSE(KvTensorMapSupported(Layout(page, 128), DType::kBf16)) << page;
  }
  EXPECT_FALSE(KvTensorMapSupported(Layout(16, 96), DType::kBf16));
  KvLayout empty = Layout(16, 128);
  empty.num_pages = 0;
  EXPECT_FALSE(KvTensorMapSupported(empty, DType::kBf16));
  KvLayout huge = Layout(16, 128);
  huge.num_layers = 64;
  huge.num_pages = int64_t{1} << 25;  // 2^32 plane pages: past the int32 coordinate
  EXPECT_FALSE(KvTensorMapSupported(huge, DType::kBf16));
}

TEST(KvTensorMapTest, RejectsUnreadableLayoutsAndBadPointers) {
  KvTensorMaps maps;
  alignas(16) static uint8_t pool[64];
  EXPECT_THAT(EncodeKvTensorMaps(pool, Layout(7, 128), DType::kBf16, &maps),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(EncodeKvTensorMaps(pool, Layout(16, 128), DType::kF32, &maps),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(EncodeKvTensorMaps(nullptr, Layout(16, 128), DType::kBf16, &maps),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(EncodeKvTensorMaps(pool + 8, Layout(16, 128), DType::kBf16, &maps),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(KvTensorMapGpuTest, EncodesBothMapsForARealPool) {
  BANYAN_SKIP_WITHOUT_GPU();
  for (const int32_t page : {8, 16, 128}) {
    for (const int32_t dim : {64, 128}) {
      const KvLayout layout = Layout(page, dim);
      BANYAN_ASSERT_OK_AND_ASSIGN(gpu::DeviceBuffer pool, gpu::DeviceBuffer::Allocate(layout.TotalBytes()));
      KvTensorMaps maps;
      BANYAN_ASSERT_OK(EncodeKvTensorMaps(pool.data(), layout, DType::kBf16, &maps));
      int nonzero = 0;
      for (const uint8_t b : maps.multi.bytes) nonzero += b != 0;
      EXPECT_GT(nonzero, 0) << "page " << page << " dim " << dim;
    }
  }
}

}  // namespace
}  // namespace banyan::attention

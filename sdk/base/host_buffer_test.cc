#include "sdk/base/host_buffer.h"

#include <cstdint>
#include <cstring>

#include "gtest/gtest.h"
#include "sdk/base/status_testing.h"

namespace banyan {
namespace {

using ::banyan::testing::StatusIs;

TEST(HostBufferTest, AllocatesAlignedAndMoves) {
  BANYAN_ASSERT_OK_AND_ASSIGN(HostBuffer a, HostBuffer::Allocate(1000));
  EXPECT_EQ(a.size(), 1000u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(a.data()) % HostBuffer::kAlignment, 0u);
  std::memset(a.data(), 0x5a, a.size());
  void* raw = a.data();
  HostBuffer b = std::move(a);
  EXPECT_EQ(b.data(), raw);
  EXPECT_EQ(a.data(), nullptr);  // NOLINT(bugprone-use-after-move): moved-from is empty
  EXPECT_EQ(b.As<uint8_t>()[999], 0x5a);
}

TEST(HostBufferTest, ImpossibleSizeIsResourceExhausted) {
  EXPECT_THAT(HostBuffer::Allocate(size_t{1} << 62), StatusIs(absl::StatusCode::kResourceExhausted));
  BANYAN_ASSERT_OK_AND_ASSIGN(HostBuffer empty, HostBuffer::Allocate(0));
  EXPECT_EQ(empty.data(), nullptr);
}

}  // namespace
}  // namespace banyan

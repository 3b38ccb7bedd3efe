#include "sdk/gpu/device_buffer.h"

#include <cstdint>
#include <vector>

#include "gtest/gtest.h"
#include "sdk/base/rng.h"
#include "sdk/base/status_testing.h"
#include "sdk/gpu/gpu_test_util.h"

namespace banyan::gpu {
namespace {

using ::banyan::testing::StatusIs;

TEST(DeviceBufferTest, RoundTripsRandomBytes) {
  BANYAN_SKIP_WITHOUT_GPU();
  Rng rng(5);
  std::vector<uint64_t> host(4099);
  for (auto& x : host) x = rng.Next();
  BANYAN_ASSERT_OK_AND_ASSIGN(auto stream, Stream::Create());
  BANYAN_ASSERT_OK_AND_ASSIGN(auto buf, DeviceBuffer::Allocate(host.size() * 8));
  BANYAN_ASSERT_OK(buf.Fill(0xab, stream.get()));
  BANYAN_ASSERT_OK(buf.CopyFromHost(host.data(), host.size() * 8, stream.get()));
  std::vector<uint64_t> back(host.size(), 0);
  BANYAN_ASSERT_OK(buf.CopyToHost(back.data(), back.size() * 8, stream.get()));
  BANYAN_ASSERT_OK(stream.Synchronize());
  EXPECT_EQ(back, host);
}

TEST(DeviceBufferTest, OversizedCopyIsOutOfRange) {
  BANYAN_SKIP_WITHOUT_GPU();
  BANYAN_ASSERT_OK_AND_ASSIGN(auto buf, DeviceBuffer::Allocate(16));
  std::vector<char> host(32);
  EXPECT_THAT(buf.CopyFromHost(host.data(), 32), StatusIs(absl::StatusCode::kOutOfRange));
}

TEST(DeviceBufferTest, ImpossibleAllocationIsResourceExhausted) {
  BANYAN_SKIP_WITHOUT_GPU();
  EXPECT_THAT(DeviceBuffer::Allocate(size_t{1} << 52), StatusIs(absl::StatusCode::kResourceExhausted));
}

TEST(EventTest, MeasuresElapsedTime) {
  BANYAN_SKIP_WITHOUT_GPU();
  BANYAN_ASSERT_OK_AND_ASSIGN(auto stream, Stream::Create());
  BANYAN_ASSERT_OK_AND_ASSIGN(auto start, Event::Create());
  BANYAN_ASSERT_OK_AND_ASSIGN(auto stop, Event::Create());
  BANYAN_ASSERT_OK_AND_ASSIGN(auto buf, DeviceBuffer::Allocate(size_t{64} << 20));
  BANYAN_ASSERT_OK(start.Record(stream.get()));
  BANYAN_ASSERT_OK(buf.Fill(1, stream.get()));
  BANYAN_ASSERT_OK(stop.Record(stream.get()));
  BANYAN_ASSERT_OK(stream.Synchronize());
  BANYAN_ASSERT_OK_AND_ASSIGN(float ms, stop.ElapsedMsSince(start));
  EXPECT_GT(ms, 0.0f);
}

}  // namespace
}  // namespace banyan::gpu

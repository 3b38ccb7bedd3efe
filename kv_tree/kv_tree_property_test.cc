// Randomized property tests: the operation-stream driver (kv_tree_op_driver.h)
// checks every invariant after every operation. Default sizes keep this under
// ~30 s in RelWithDebInfo on one core; BANYAN_KV_TREE_OPS=<n> scales the Rng
// runs (n operations per seed), e.g. for a long soak.
#include <cstdlib>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "kv_tree/kv_tree_op_driver.h"
#include "sdk/base/rng.h"

namespace banyan::kv_tree::testing {
namespace {

int64_t OpsPerSeed(int64_t fallback) {
  const char* env = std::getenv("BANYAN_KV_TREE_OPS");
  if (env == nullptr) return fallback;
  const int64_t n = std::atoll(env);
  return n > 0 ? n : fallback;
}

class RandomOps : public ::testing::TestWithParam<uint64_t> {};

TEST_P(RandomOps, InvariantsHoldAfterEveryOperation) {
  DriverStats stats;
  const absl::Status status = RunRandomOps(GetParam(), OpsPerSeed(40000), 1, &stats);
  ASSERT_TRUE(status.ok()) << "seed " << GetParam() << ": " << status;
  EXPECT_GT(stats.plans, 0);
  EXPECT_GT(stats.evicted_nodes, 0);
  EXPECT_GT(stats.copied_pages, 0);
  EXPECT_GT(stats.reused_tokens, 0);
  EXPECT_GT(stats.resource_exhausted, 0);
  RecordProperty("ops", std::to_string(stats.ops));
}

INSTANTIATE_TEST_SUITE_P(Seeds, RandomOps, ::testing::Range<uint64_t>(1, 9));

// The fuzz entry point's function over many random byte strings, so builds
// without libFuzzer (gcc CI) exercise the same decoder.
TEST(OpStream, RandomByteStrings) {
  Rng rng(20261122);
  int64_t ops = 0;
  for (int i = 0; i < 3000; ++i) {
    std::vector<uint8_t> bytes(rng.UniformInt(i < 2000 ? 64 : 2048));
    for (uint8_t& b : bytes) b = static_cast<uint8_t>(rng.Next());
    DriverStats stats;
    const absl::Status status = RunOpStream(bytes.data(), bytes.size(), &stats);
    ASSERT_TRUE(status.ok()) << "case " << i << ": " << status;
    ops += stats.ops;
  }
  RecordProperty("ops", std::to_string(ops));
}

TEST(OpStream, EmptyAndTinyInputs) {
  ASSERT_TRUE(RunOpStream(nullptr, 0).ok());
  for (int b = 0; b < 256; ++b) {
    const uint8_t byte = static_cast<uint8_t>(b);
    ASSERT_TRUE(RunOpStream(&byte, 1).ok()) << b;
  }
}

// A long soak, run by hand: --gtest_also_run_disabled_tests.
TEST(RandomOpsLong, DISABLED_MillionsOfOperations) {
  for (uint64_t seed = 100; seed < 110; ++seed) {
    const absl::Status status = RunRandomOps(seed, OpsPerSeed(500000), 1);
    ASSERT_TRUE(status.ok()) << "seed " << seed << ": " << status;
  }
}

}  // namespace
}  // namespace banyan::kv_tree::testing

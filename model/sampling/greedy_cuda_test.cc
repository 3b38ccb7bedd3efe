// LaunchGreedyRows on the GPU against SampleGreedy on the host: same tokens,
// logprobs within 1e-5, bad rows flagged; outputs poisoned before each launch.
#include "model/sampling/greedy_cuda.h"

#include <cmath>
#include <limits>
#include <vector>

#include "gtest/gtest.h"
#include "model/sampling/sampler.h"
#include "sdk/base/rng.h"
#include "sdk/base/status_testing.h"
#include "sdk/gpu/device_buffer.h"
#include "sdk/gpu/gpu_test_util.h"

namespace banyan::model::sampling {
namespace {

using ::banyan::testing::StatusIs;
constexpr float kInf = std::numeric_limits<float>::infinity();

struct Outputs {
  std::vector<int32_t> tokens;
  std::vector<float> logprobs;
  std::vector<int32_t> bad;
};

Outputs RunOnGpu(const std::vector<float>& logits, int32_t rows, int32_t vocab) {
  Outputs out;
  auto d_logits = gpu::DeviceBuffer::Allocate(logits.size() * sizeof(float));
  auto d_tokens = gpu::DeviceBuffer::Allocate(rows * sizeof(int32_t));
  auto d_logprobs = gpu::DeviceBuffer::Allocate(rows * sizeof(float));
  auto d_bad = gpu::DeviceBuffer::Allocate(rows * sizeof(int32_t));
  EXPECT_TRUE(d_logits.ok() && d_tokens.ok() && d_logprobs.ok() && d_bad.ok());
  EXPECT_EQ(cudaMemcpy(d_logits->data(), logits.data(), logits.size() * sizeof(float), cudaMemcpyHostToDevice),
            cudaSuccess);
  // Poison: tokens -7, logprobs and bad all-ones bytes.
  EXPECT_EQ(cudaMemset(d_tokens->data(), 0xff, rows * sizeof(int32_t)), cudaSuccess);
  EXPECT_EQ(cudaMemset(d_logprobs->data(), 0x7f, rows * sizeof(float)), cudaSuccess);
  EXPECT_EQ(cudaMemset(d_bad->data(), 0x55, rows * sizeof(int32_t)), cudaSuccess);
  GreedyRowsArgs args{.logits = d_logits->As<float>(), .rows = rows, .vocab = vocab,
                      .tokens = d_tokens->As<int32_t>(), .logprobs = d_logprobs->As<float>(),
                      .bad = d_bad->As<int32_t>()};
  EXPECT_TRUE(LaunchGreedyRows(args, nullptr).ok());
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  out.tokens.resize(rows);
  out.logprobs.resize(rows);
  out.bad.resize(rows);
  EXPECT_EQ(cudaMemcpy(out.tokens.data(), d_tokens->data(), rows * sizeof(int32_t), cudaMemcpyDeviceToHost),
            cudaSuccess);
  EXPECT_EQ(cudaMemcpy(out.logprobs.data(), d_logprobs->data(), rows * sizeof(float), cudaMemcpyDeviceToHost),
            cudaSuccess);
  EXPECT_EQ(cudaMemcpy(out.bad.data(), d_bad->data(), rows * sizeof(int32_t), cudaMemcpyDeviceToHost),
            cudaSuccess);
  return out;
}

TEST(GreedyCudaTest, MatchesSampleGreedyOnRandomRows) {
  BANYAN_SKIP_WITHOUT_GPU();
  Rng rng(21);
  for (int32_t vocab : {1, 33, 511, 512, 513, 32000, 49152, 128256}) {
    const int32_t rows = vocab > 50000 ? 40 : 300;
    std::vector<float> logits(static_cast<size_t>(rows) * vocab);
    for (float& x : logits) x = 3.0f * rng.Normal();
    for (int32_t r = 0; r < rows; ++r) {
      float* row = logits.data() + static_cast<size_t>(r) * vocab;
      if (vocab > 1 && r % 3 == 0) row[rng.UniformInt(vocab)] = -kInf;
      if (vocab > 1 && r % 4 == 1) {  // a tie for the max: the lower index wins
        const size_t a = rng.UniformInt(vocab), b = rng.UniformInt(vocab);
        row[a] = row[b] = 50.0f;
      }
      if (r % 5 == 2) row[rng.UniformInt(vocab)] = 12.0f + rng.Uniform();  // a clear winner
    }
    const Outputs got = RunOnGpu(logits, rows, vocab);
    for (int32_t r = 0; r < rows; ++r) {
      const absl::Span<const float> row(logits.data() + static_cast<size_t>(r) * vocab, vocab);
      BANYAN_ASSERT_OK_AND_ASSIGN(SampleResult want, SampleGreedy(row));
      ASSERT_EQ(got.bad[r], 0) << "vocab " << vocab << " row " << r;
      EXPECT_EQ(got.tokens[r], want.token) << "vocab " << vocab << " row " << r;
      EXPECT_NEAR(got.logprobs[r], want.raw_logprob, 1e-5) << "vocab " << vocab << " row " << r;
    }
  }
}

TEST(GreedyCudaTest, FlagsBadRowsAndRejectsBadArguments) {
  BANYAN_SKIP_WITHOUT_GPU();
  constexpr int32_t kVocab = 1000, kRows = 4;
  Rng rng(22);
  std::vector<float> logits(kRows * kVocab);
  for (float& x : logits) x = rng.Normal();
  logits[0 * kVocab + 17] = std::nanf("");
  logits[1 * kVocab + 999] = kInf;
  for (int32_t v = 0; v < kVocab; ++v) logits[2 * kVocab + v] = -kInf;
  const Outputs got = RunOnGpu(logits, kRows, kVocab);
  EXPECT_EQ(got.bad, (std::vector<int32_t>{1, 1, 1, 0}));
  for (int32_t r = 0; r < 3; ++r) {
    EXPECT_FALSE(SampleGreedy(absl::MakeConstSpan(logits.data() + r * kVocab, kVocab)).ok());
  }
  GreedyRowsArgs args;
  EXPECT_THAT(LaunchGreedyRows(args, nullptr), StatusIs(absl::StatusCode::kInvalidArgument));
  float f;
  int32_t i;
  args = {.logits = &f, .rows = 0, .vocab = 5, .tokens = &i, .logprobs = &f, .bad = &i};
  EXPECT_THAT(LaunchGreedyRows(args, nullptr), StatusIs(absl::StatusCode::kInvalidArgument));
}

}  // namespace
}  // namespace banyan::model::sampling

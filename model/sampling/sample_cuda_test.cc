// LaunchSampleRows on the GPU against ReferenceDraw on the host: the same
// tokens except where the reference says a cumulative sum lies within
// rounding of a boundary, logprobs within float rounding, bad rows and rows
// out of range flagged, repeated launches bit-identical; outputs poisoned
// before each launch.
#include "model/sampling/sample_cuda.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "model/sampling/draw_reference.h"
#include "sdk/base/rng.h"
#include "sdk/base/status_testing.h"
#include "sdk/gpu/device_buffer.h"
#include "sdk/gpu/gpu_test_util.h"

namespace banyan::model::sampling {
namespace {

using ::banyan::testing::StatusIs;
constexpr float kInf = std::numeric_limits<float>::infinity();

std::vector<DrawResult> RunOnGpu(const std::vector<float>& logits, int32_t rows, int32_t vocab,
                                 const std::vector<DeviceDraw>& draws) {
  auto d_logits = gpu::DeviceBuffer::Allocate(logits.size() * sizeof(float));
  auto d_draws = gpu::DeviceBuffer::Allocate(draws.size() * sizeof(DeviceDraw) + 1);
  auto d_results = gpu::DeviceBuffer::Allocate(draws.size() * sizeof(DrawResult) + 1);
  EXPECT_TRUE(d_logits.ok() && d_draws.ok() && d_results.ok());
  EXPECT_EQ(cudaMemcpy(d_logits->data(), logits.data(), logits.size() * sizeof(float),
                       cudaMemcpyHostToDevice),
            cudaSuccess);
  EXPECT_EQ(cudaMemcpy(d_draws->data(), draws.data(), draws.size() * sizeof(DeviceDraw),
                       cudaMemcpyHostToDevice),
            cudaSuccess);
  EXPECT_EQ(cudaMemset(d_results->data(), 0x7f, draws.size() * sizeof(DrawResult)),
            cudaSuccess);  // poison
  const SampleRowsArgs args{.logits = d_logits->As<float>(),
                            .rows = rows,
                            .vocab = vocab,
                            .draws = d_draws->As<DeviceDraw>(),
                            .num_draws = static_cast<int32_t>(draws.size()),
                            .results = d_results->As<DrawResult>()};
  EXPECT_TRUE(LaunchSampleRows(args, nullptr).ok());
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  std::vector<DrawResult> out(draws.size());
  EXPECT_EQ(cudaMemcpy(out.data(), d_results->data(), draws.size() * sizeof(DrawResult),
                       cudaMemcpyDeviceToHost),
            cudaSuccess);
  return out;
}

// Language-model-like rows: Gaussian values of a random spread, a few strong
// tokens, some masked; every third row rounded to quarters (long runs of ties
// at the cuts); a few rows of one value, a few of a vast range.
std::vector<float> RandomRows(Rng& rng, int32_t rows, int32_t vocab) {
  std::vector<float> logits(static_cast<size_t>(rows) * vocab);
  for (int32_t r = 0; r < rows; ++r) {
    float* row = logits.data() + static_cast<size_t>(r) * vocab;
    const float spread = 0.3f + 4.0f * rng.Uniform();
    for (int32_t i = 0; i < vocab; ++i) row[i] = spread * rng.Normal();
    for (int k = 0; k < 4; ++k) row[rng.UniformInt(vocab)] += 3.0f * spread * rng.Uniform();
    if (r % 3 == 0) {
      for (int32_t i = 0; i < vocab; ++i) row[i] = std::round(4.0f * row[i]) / 4.0f;
    }
    if (r % 7 == 5) {  // one value everywhere: a zero value range
      for (int32_t i = 0; i < vocab; ++i) row[i] = 1.5f;
    }
    if (r % 11 == 4) {  // a range far beyond exp's (every other token has probability 0)
      for (int32_t i = 0; i < vocab; ++i) row[i] = 1e30f * rng.Normal();
    }
    if (vocab > 1 && r % 2 == 1) row[rng.UniformInt(vocab)] = -kInf;
  }
  return logits;
}

DeviceDraw RandomDraw(Rng& rng, int32_t rows, int trial) {
  DeviceDraw d;
  d.row = static_cast<int32_t>(rng.UniformInt(rows));
  d.temperature = trial % 9 == 0 ? 0.0f : 0.2f + 1.6f * rng.Uniform();
  if (trial % 3 == 1) d.top_k = 1 + static_cast<int32_t>(rng.UniformInt(trial % 2 == 0 ? 5 : 400));
  if (trial % 4 != 0) d.top_p = 0.2f + 0.79f * rng.Uniform();
  if (trial % 5 == 2) d.min_p = 0.3f * rng.Uniform();
  d.uniform = rng.UniformDouble();
  return d;
}

TEST(SampleCudaTest, MatchesReferenceDrawOnRandomRows) {
  BANYAN_SKIP_WITHOUT_GPU();
  Rng rng(31);
  for (int32_t vocab : {1, 2, 37, 511, 512, 513, 32000, 49152, 128256}) {
    const int32_t rows = vocab > 50000 ? 6 : 24;
    const int32_t num_draws = vocab > 50000 ? 60 : 400;
    const std::vector<float> logits = RandomRows(rng, rows, vocab);
    std::vector<DeviceDraw> draws;
    for (int t = 0; t < num_draws; ++t) draws.push_back(RandomDraw(rng, rows, t));
    const std::vector<DrawResult> got = RunOnGpu(logits, rows, vocab, draws);
    int near = 0;
    for (int t = 0; t < num_draws; ++t) {
      const DeviceDraw& d = draws[t];
      const absl::Span<const float> row(logits.data() + static_cast<size_t>(d.row) * vocab, vocab);
      DrawMargins margins;
      const DrawResult want = ReferenceDraw(row, d, &margins);
      ASSERT_GE(want.token, 0);
      const std::string what =
          absl::StrCat("vocab ", vocab, " draw ", t, " row ", d.row, " T ", d.temperature,
                       " top_k ", d.top_k, " top_p ", d.top_p, " min_p ", d.min_p);
      ASSERT_GE(got[t].token, 0) << what;
      ASSERT_LT(got[t].token, vocab) << what;
      if (got[t].token != want.token) {
        ++near;
        EXPECT_LT(margins.smallest(), 1e-5)
            << what << " got " << got[t].token << " want " << want.token;
        continue;
      }
      EXPECT_NEAR(got[t].logprob, want.logprob, 2e-4) << what;
      EXPECT_NEAR(got[t].raw_logprob, want.raw_logprob, 2e-4) << what;
    }
    EXPECT_LE(near, num_draws / 50) << "vocab " << vocab;
  }
}

TEST(SampleCudaTest, RepeatedLaunchesGiveTheSameBits) {
  BANYAN_SKIP_WITHOUT_GPU();
  Rng rng(32);
  const int32_t rows = 8, vocab = 32000;
  const std::vector<float> logits = RandomRows(rng, rows, vocab);
  std::vector<DeviceDraw> draws;
  for (int t = 0; t < 200; ++t) draws.push_back(RandomDraw(rng, rows, t));
  const std::vector<DrawResult> a = RunOnGpu(logits, rows, vocab, draws);
  const std::vector<DrawResult> b = RunOnGpu(logits, rows, vocab, draws);
  ASSERT_EQ(a.size(), b.size());
  EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(DrawResult)), 0);
}

TEST(SampleCudaTest, EvenlySpacedUniformsWalkTheKeptTokensById) {
  BANYAN_SKIP_WITHOUT_GPU();
  Rng rng(33);
  const int32_t vocab = 3000;
  const std::vector<float> logits = RandomRows(rng, 1, vocab);
  DeviceDraw d;
  d.temperature = 0.7f;
  d.top_p = 0.8f;
  d.top_k = 100;
  const std::vector<uint8_t> kept = ReferenceKept(logits, d);
  std::vector<DeviceDraw> draws;
  constexpr int kDraws = 2000;
  for (int j = 0; j < kDraws; ++j) {
    d.uniform = (j + 0.5) / kDraws;
    draws.push_back(d);
  }
  const std::vector<DrawResult> got = RunOnGpu(logits, 1, vocab, draws);
  int32_t previous = -1;
  for (int j = 0; j < kDraws; ++j) {
    ASSERT_GE(got[j].token, previous) << j;
    ASSERT_TRUE(kept[got[j].token]) << j;
    previous = got[j].token;
  }
}

TEST(SampleCudaTest, BadRowsAndRowsOutOfRangeGiveMinusOne) {
  BANYAN_SKIP_WITHOUT_GPU();
  const int32_t vocab = 1000;
  Rng rng(34);
  std::vector<float> logits = RandomRows(rng, 4, vocab);
  logits[17] = std::numeric_limits<float>::quiet_NaN();               // row 0
  logits[vocab + 3] = kInf;                                           // row 1
  for (int32_t i = 0; i < vocab; ++i) logits[2 * vocab + i] = -kInf;  // row 2
  std::vector<DeviceDraw> draws;
  for (int32_t row : {0, 1, 2, 3, 4, -1}) {
    for (float t : {0.0f, 0.8f}) {
      DeviceDraw d;
      d.row = row;
      d.temperature = t;
      d.top_p = 0.9f;
      d.uniform = 0.25;
      draws.push_back(d);
    }
  }
  const std::vector<DrawResult> got = RunOnGpu(logits, 4, vocab, draws);
  for (size_t i = 0; i < draws.size(); ++i) {
    const bool fine = draws[i].row == 3;
    EXPECT_EQ(got[i].token >= 0, fine) << "draw " << i;
  }
}

TEST(SampleCudaTest, RejectsBadArguments) {
  BANYAN_SKIP_WITHOUT_GPU();
  auto buf = gpu::DeviceBuffer::Allocate(1024);
  ASSERT_TRUE(buf.ok());
  SampleRowsArgs args{.logits = buf->As<float>(),
                      .rows = 1,
                      .vocab = 4,
                      .draws = buf->As<DeviceDraw>(),
                      .num_draws = 1,
                      .results = buf->As<DrawResult>()};
  SampleRowsArgs bad = args;
  bad.results = nullptr;
  EXPECT_THAT(LaunchSampleRows(bad, nullptr), StatusIs(absl::StatusCode::kInvalidArgument));
  bad = args;
  bad.vocab = 0;
  EXPECT_THAT(LaunchSampleRows(bad, nullptr), StatusIs(absl::StatusCode::kInvalidArgument));
  bad = args;
  bad.num_draws = -1;
  EXPECT_THAT(LaunchSampleRows(bad, nullptr), StatusIs(absl::StatusCode::kInvalidArgument));
  bad = args;
  bad.num_draws = 0;
  EXPECT_TRUE(LaunchSampleRows(bad, nullptr).ok());
}

}  // namespace
}  // namespace banyan::model::sampling

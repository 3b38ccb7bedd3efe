// CudaBackend::ForwardGreedy (greedy rows on the device) against the same
// pass through Forward + SampleGreedy on the host: same tokens, logprobs
// within 1e-5, outputs poisoned first; and its argument errors.
#include <cmath>
#include <limits>
#include <vector>

#include "gtest/gtest.h"
#include "model/cpu/forked_branches.h"
#include "model/cpu/random_weights.h"
#include "model/cuda/cuda_backend.h"
#include "model/sampling/sampler.h"
#include "sdk/base/rng.h"
#include "sdk/base/status_testing.h"
#include "sdk/gpu/device_buffer.h"
#include "sdk/gpu/gpu_test_util.h"

namespace banyan::model {
namespace {

using ::banyan::testing::StatusIs;

ModelConfig SmallConfig() {
  ModelConfig c;
  c.vocab_size = 3001;  // odd: rows are not a multiple of any vector width
  c.num_layers = 2;
  c.num_q_heads = 8;
  c.num_kv_heads = 2;
  c.head_dim = 64;
  c.hidden_size = 512;
  c.intermediate_size = 1024;
  c.rope_theta = 10000.0f;
  return c;
}

TEST(ForwardGreedyCudaTest, MatchesForwardThenSampleGreedy) {
  BANYAN_SKIP_WITHOUT_GPU();
  const ModelConfig config = SmallConfig();
  BANYAN_ASSERT_OK_AND_ASSIGN(std::unique_ptr<Backend> backend, CreateCudaBackend(MakeRandomWeights(config, 5)));
  ASSERT_TRUE(backend->supports_greedy());
  constexpr int32_t kPages = 64;
  KvCache kv;
  kv.layout = KvLayoutFor(config, kPages, 16, DType::kBf16);
  kv.dtype = DType::kBf16;
  BANYAN_ASSERT_OK_AND_ASSIGN(gpu::DeviceBuffer pool, gpu::DeviceBuffer::Allocate(kv.layout.TotalBytes()));
  kv.data = pool.data();

  Rng rng(6);
  std::vector<int32_t> prompt(150);
  for (int32_t& t : prompt) t = static_cast<int32_t>(rng.UniformInt(config.vocab_size));
  ForkedBranches fb(16, kPages);
  BANYAN_ASSERT_OK(fb.SetPrompt(prompt));
  const Step step = fb.PrefillStep(/*all_logits=*/true);  // 150 logit rows
  const size_t rows = step.logit_rows.size(), vocab = static_cast<size_t>(config.vocab_size);
  ASSERT_EQ(rows, prompt.size());

  std::vector<float> logits(rows * vocab, std::numeric_limits<float>::quiet_NaN());
  BANYAN_ASSERT_OK(backend->Forward(step.batch(), kv, absl::MakeSpan(logits)));
  // The same pass again (it rewrites the same K/V), greedy on the device.
  std::vector<int32_t> tokens(rows, -7);
  std::vector<float> logprobs(rows, std::numeric_limits<float>::quiet_NaN());
  BANYAN_ASSERT_OK(backend->ForwardGreedy(step.batch(), kv, absl::MakeSpan(tokens), absl::MakeSpan(logprobs)));
  for (size_t r = 0; r < rows; ++r) {
    BANYAN_ASSERT_OK_AND_ASSIGN(SampleResult want, SampleGreedy(absl::MakeConstSpan(logits.data() + r * vocab, vocab)));
    EXPECT_EQ(tokens[r], want.token) << "row " << r;
    EXPECT_NEAR(logprobs[r], want.raw_logprob, 1e-5) << "row " << r;
  }

  // Too little room for the results: kInvalidArgument, nothing run.
  std::vector<int32_t> short_tokens(rows - 1);
  EXPECT_THAT(backend->ForwardGreedy(step.batch(), kv, absl::MakeSpan(short_tokens), absl::MakeSpan(logprobs)),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

}  // namespace
}  // namespace banyan::model

// The CUDA backend (bf16) against the CPU backend (fp32) on random small
// models: prefill of a prompt, then forked paged decode of several branches
// in one batch per step. Over every position: relative logit error <= 2e-2
// and top-1 agreement >= 99%. Plus the bad-input contract.
#include "model/cuda/cuda_backend.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "model/cpu/cpu_backend.h"
#include "model/cpu/forked_branches.h"
#include "model/cpu/random_weights.h"
#include "sdk/base/rng.h"
#include "sdk/base/status_testing.h"
#include "sdk/gpu/cuda_status.h"
#include "sdk/gpu/device_buffer.h"
#include "sdk/gpu/gpu_test_util.h"

namespace banyan::model {
namespace {

using ::banyan::testing::StatusIs;

ModelConfig SmallConfig(int variant) {
  ModelConfig c;
  c.vocab_size = 1000;
  c.num_layers = 3;
  c.rms_norm_eps = 1e-5f;
  switch (variant) {
    case 0:  // Llama 3 style: GQA 4:1, tied, llama3 scaling with all three bands
      c.num_q_heads = 8;
      c.num_kv_heads = 2;
      c.head_dim = 64;
      c.hidden_size = 512;
      c.intermediate_size = 1024;
      c.tie_word_embeddings = true;
      c.rope_theta = 500000.0f;
      c.rope_scaling.type = RopeScaling::Type::kLlama3;
      c.rope_scaling.factor = 8.0f;
      c.rope_scaling.original_max_position = 256;
      break;
    case 1:  // Qwen2: QKV bias, an odd number of heads (5:1), head_dim 128, untied
      c.architecture = Architecture::kQwen2;
      c.attention_bias = true;
      c.num_q_heads = 5;
      c.num_kv_heads = 1;
      c.head_dim = 128;
      c.hidden_size = 640;
      c.intermediate_size = 1200;
      c.rope_theta = 1000000.0f;
      c.rms_norm_eps = 1e-6f;
      break;
    default:  // Llama 2 style, linear scaling, GQA 4:1 with an odd KV head count, untied
      c.num_q_heads = 12;
      c.num_kv_heads = 3;
      c.head_dim = 64;
      c.hidden_size = 768;
      c.intermediate_size = 1536;
      c.vocab_size = 997;
      c.rope_scaling.type = RopeScaling::Type::kLinear;
      c.rope_scaling.factor = 2.0f;
      break;
  }
  return c;
}

std::vector<int32_t> RandomTokens(Rng& rng, int n, int vocab) {
  std::vector<int32_t> t(n);
  for (int32_t& x : t) x = static_cast<int32_t>(rng.UniformInt(vocab));
  return t;
}

// A bf16 pool on the device, poisoned (NaN), and an fp32 pool on the host.
struct Pools {
  Pools(const ModelConfig& c, int64_t pages, int32_t page_size)
      : host_bytes(KvLayoutFor(c, pages, page_size, DType::kF32).TotalBytes(), static_cast<char>(0xff)) {
    host.layout = KvLayoutFor(c, pages, page_size, DType::kF32);
    host.dtype = DType::kF32;
    host.data = host_bytes.data();
    device.layout = KvLayoutFor(c, pages, page_size, DType::kBf16);
    device.dtype = DType::kBf16;
    auto buf = gpu::DeviceBuffer::Allocate(device.layout.TotalBytes());
    EXPECT_TRUE(buf.ok()) << buf.status();
    device_buf = std::move(buf).value();
    EXPECT_TRUE(device_buf.Fill(0xff).ok());
    device.data = device_buf.data();
  }
  // Copy on write of one page in both pools.
  void CopyPage(int32_t src, int32_t dst) {
    CopyKvPage(host, src, dst);
    const attention::KvLayout& l = device.layout;
    auto* base = static_cast<char*>(device.data);
    for (int32_t layer = 0; layer < l.num_layers; ++layer) {
      for (int32_t kv = 0; kv < 2; ++kv) {
        EXPECT_TRUE(BANYAN_CUDA_STATUS(cudaMemcpy(base + 2 * l.Offset(layer, kv, dst, 0, 0),
                                                  base + 2 * l.Offset(layer, kv, src, 0, 0),
                                                  2 * l.PageElements(), cudaMemcpyDeviceToDevice))
                        .ok());
      }
    }
  }
  std::vector<char> host_bytes;
  gpu::DeviceBuffer device_buf;
  KvCache host, device;
};

// Logit agreement accumulated over positions.
struct Agreement {
  double err_sq = 0, ref_sq = 0;
  int positions = 0, top1 = 0, top1_within_tol = 0;

  void Add(const float* want, const float* got, int vocab) {
    const int want_top = static_cast<int>(std::max_element(want, want + vocab) - want);
    const int got_top = static_cast<int>(std::max_element(got, got + vocab) - got);
    double row_sq = 0;
    for (int v = 0; v < vocab; ++v) {
      ASSERT_TRUE(std::isfinite(got[v])) << "non-finite logit at position " << positions << " vocab " << v;
      err_sq += (double{got[v]} - want[v]) * (double{got[v]} - want[v]);
      row_sq += double{want[v]} * want[v];
    }
    ref_sq += row_sq;
    ++positions;
    top1 += want_top == got_top;
    // A near tie in the reference (the GPU's pick within 2e-2 of the row's
    // RMS of the reference's best) is not a real disagreement.
    top1_within_tol += want[got_top] >= want[want_top] - 2e-2 * std::sqrt(row_sq / vocab);
  }
  double rel_error() const { return std::sqrt(err_sq / ref_sq); }
};

// The backend's precision settings under test: bf16 activations and weights,
// split activations, split activations and weights (the high-precision mode).
enum class Precision { kBf16, kSplitActivations, kSplitAll };

class CudaBackendTest
    : public ::testing::TestWithParam<std::tuple<int, cuda::AttentionPath, Precision>> {};

TEST_P(CudaBackendTest, MatchesCpuBackendOnPrefillAndForkedDecode) {
  BANYAN_SKIP_WITHOUT_GPU();
  const auto [variant, path, precision] = GetParam();
  const Activations activations = precision == Precision::kBf16 ? Activations::kBf16 : Activations::kSplitBf16;
  const Weights weight_mode = precision == Precision::kSplitAll ? Weights::kSplitBf16 : Weights::kBf16;
  const ModelConfig c = SmallConfig(variant);
  auto weights = std::make_shared<const ModelWeights>(MakeRandomWeights(c, 500 + variant));
  BANYAN_ASSERT_OK_AND_ASSIGN(auto cpu, CreateCpuBackend(weights, {.num_threads = 2}));
  BANYAN_ASSERT_OK_AND_ASSIGN(auto gpu, CreateCudaBackend(*weights, {.activations = activations, .weights = weight_mode, .attention = path}));
  EXPECT_EQ(gpu->name(), "cuda");
  EXPECT_EQ(gpu->kv_memory_space(), MemorySpace::kDevice);

  Rng rng(::testing::UnitTest::GetInstance()->random_seed() + 31 * variant);
  const int page_size = 16, branches = 6, steps = 25, prompt_len = 50;
  const auto prompt = RandomTokens(rng, prompt_len, c.vocab_size);
  Pools pools(c, 128, page_size);
  ForkedBranches fb(page_size, 128);
  BANYAN_ASSERT_OK(fb.SetPrompt(prompt));
  Agreement agree;
  const int V = c.vocab_size;
  {
    const Step pre = fb.PrefillStep(/*all_logits=*/true);
    std::vector<float> want(prompt_len * V), got(prompt_len * V, std::numeric_limits<float>::quiet_NaN());
    BANYAN_ASSERT_OK(cpu->Forward(pre.batch(), pools.host, absl::MakeSpan(want)));
    BANYAN_ASSERT_OK(gpu->Forward(pre.batch(), pools.device, absl::MakeSpan(got)));
    for (int t = 0; t < prompt_len; ++t) agree.Add(want.data() + t * V, got.data() + t * V, V);
  }
  BANYAN_ASSERT_OK_AND_ASSIGN(auto copies, fb.Fork(branches));
  for (auto [src, dst] : copies) pools.CopyPage(src, dst);
  for (int step = 0; step < steps; ++step) {
    if (step == 10) fb.Finish(2);  // one branch stops; the others go on
    const auto active = fb.active_branches();
    BANYAN_ASSERT_OK_AND_ASSIGN(const Step s, fb.DecodeStep(RandomTokens(rng, active.size(), V)));
    std::vector<float> want(active.size() * V), got(active.size() * V, std::numeric_limits<float>::quiet_NaN());
    BANYAN_ASSERT_OK(cpu->Forward(s.batch(), pools.host, absl::MakeSpan(want)));
    BANYAN_ASSERT_OK(gpu->Forward(s.batch(), pools.device, absl::MakeSpan(got)));
    for (size_t r = 0; r < active.size(); ++r) agree.Add(want.data() + r * V, got.data() + r * V, V);
  }
  const double top1 = double(agree.top1) / agree.positions;
  const double top1_tol = double(agree.top1_within_tol) / agree.positions;
  std::printf("[ cuda vs cpu ] config %d path %d precision %d: %d positions, rel error %.3e, top-1 %.4f "
              "(ties within tolerance counted: %.4f)\n",
              variant, static_cast<int>(path), static_cast<int>(precision), agree.positions, agree.rel_error(),
              top1, top1_tol);
  EXPECT_LE(agree.rel_error(), 2e-2);
  EXPECT_GE(top1_tol, 0.99);
  EXPECT_GE(top1, 0.95);
}

INSTANTIATE_TEST_SUITE_P(Configs, CudaBackendTest,
                         ::testing::Combine(::testing::Values(0, 1, 2),
                                            ::testing::Values(cuda::AttentionPath::kDevice,
                                                              cuda::AttentionPath::kHost),
                                            ::testing::Values(Precision::kBf16, Precision::kSplitActivations,
                                                              Precision::kSplitAll)),
                         [](const auto& info) {
                           return "config" + std::to_string(std::get<0>(info.param)) +
                                  (std::get<1>(info.param) == cuda::AttentionPath::kDevice ? "_device" : "_host") +
                                  (std::get<2>(info.param) == Precision::kBf16               ? "_bf16"
                                   : std::get<2>(info.param) == Precision::kSplitActivations ? "_split"
                                                                                             : "_splitweights");
                         });

TEST(CudaBackendErrorsTest, BadInputsGiveSpecificCodes) {
  BANYAN_SKIP_WITHOUT_GPU();
  const ModelConfig c = SmallConfig(0);
  ModelWeights weights = MakeRandomWeights(c, 9);
  BANYAN_ASSERT_OK_AND_ASSIGN(auto gpu, CreateCudaBackend(weights, {.attention = cuda::AttentionPath::kHost}));
  Pools pools(c, 8, 16);
  ForkedBranches fb(16, 8);
  BANYAN_ASSERT_OK(fb.SetPrompt({1, 2, 3, 4, 5}));
  Step s = fb.PrefillStep();
  std::vector<float> logits(c.vocab_size);
  // An fp32 pool is not what this backend reads.
  EXPECT_THAT(gpu->Forward(s.batch(), pools.host, absl::MakeSpan(logits)),
              StatusIs(absl::StatusCode::kInvalidArgument, ::testing::HasSubstr("bf16")));
  s.tokens[2] = c.vocab_size;
  EXPECT_THAT(gpu->Forward(s.batch(), pools.device, absl::MakeSpan(logits)),
              StatusIs(absl::StatusCode::kOutOfRange));
  s.tokens[2] = 3;
  s.kv_slots[1] = 16;
  EXPECT_THAT(gpu->Forward(s.batch(), pools.device, absl::MakeSpan(logits)),
              StatusIs(absl::StatusCode::kOutOfRange));
  s.kv_slots[1] = 1;
  EXPECT_THAT(gpu->Forward(s.batch(), pools.device, absl::MakeSpan(logits).subspan(1)),
              StatusIs(absl::StatusCode::kInvalidArgument));
  BANYAN_EXPECT_OK(gpu->Forward(s.batch(), pools.device, absl::MakeSpan(logits)));

  // A plan the pass checks only after queuing layer 0's QKV product (the
  // rows were checked first): its errors, and the pool untouched.
  std::vector<char> pool_before(pools.device.layout.TotalBytes()), pool_after(pool_before.size());
  BANYAN_ASSERT_OK(pools.device_buf.CopyToHost(pool_before.data(), pool_before.size()));
  Step bad = s;
  bad.plan.page_indices[0] = static_cast<int32_t>(pools.device.layout.num_pages);
  EXPECT_THAT(gpu->Forward(bad.batch(), pools.device, absl::MakeSpan(logits)),
              StatusIs(absl::StatusCode::kOutOfRange, ::testing::HasSubstr("plan page")));
  bad = s;
  bad.plan.entry_kv_limit[0] = 0;
  EXPECT_THAT(gpu->Forward(bad.batch(), pools.device, absl::MakeSpan(logits)),
              StatusIs(absl::StatusCode::kInvalidArgument, ::testing::HasSubstr("invalid attention plan")));
  std::vector<int32_t> token(1);
  std::vector<float> logprob(1);
  EXPECT_THAT(gpu->ForwardGreedy(bad.batch(), pools.device, absl::MakeSpan(token), absl::MakeSpan(logprob)),
              StatusIs(absl::StatusCode::kInvalidArgument, ::testing::HasSubstr("invalid attention plan")));
  BANYAN_ASSERT_OK(pools.device_buf.CopyToHost(pool_after.data(), pool_after.size()));
  EXPECT_TRUE(pool_after == pool_before) << "a rejected pass wrote the KV pool";
  BANYAN_EXPECT_OK(gpu->Forward(s.batch(), pools.device, absl::MakeSpan(logits)));

  ModelWeights missing = MakeRandomWeights(c, 9);
  missing.tensors.erase("model.layers.1.mlp.up_proj.weight");
  EXPECT_THAT(CreateCudaBackend(missing), StatusIs(absl::StatusCode::kNotFound, ::testing::HasSubstr("up_proj")));
  ModelWeights bad_shape = MakeRandomWeights(c, 9);
  bad_shape.tensors["model.norm.weight"].shape = {c.hidden_size - 1};
  EXPECT_THAT(CreateCudaBackend(bad_shape), StatusIs(absl::StatusCode::kInvalidArgument));
  ModelWeights bad_heads = MakeRandomWeights(c, 9);
  bad_heads.config.num_kv_heads = 3;
  EXPECT_THAT(CreateCudaBackend(bad_heads), StatusIs(absl::StatusCode::kInvalidArgument));
}

}  // namespace
}  // namespace banyan::model

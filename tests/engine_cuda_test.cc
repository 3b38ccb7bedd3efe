// The Engine on the CUDA backend (bf16, device KV pool, device copy on write)
// against the Engine on the CPU backend (fp32) with the same random small
// model: a tree of branches (a shared prompt, forks, a second fork level that
// splits a partly filled page) is scored through both; log-likelihoods agree
// within bf16 tolerance, and the three attention modes of the CUDA engine
// agree with each other. Skips without a GPU.
#include <cmath>
#include <memory>
#include <vector>

#include "banyan/engine.h"
#include "gtest/gtest.h"
#include "model/cpu/cpu_backend.h"
#include "model/cpu/random_weights.h"
#include "model/cuda/cuda_backend.h"
#include "sdk/base/rng.h"
#include "sdk/base/status_testing.h"
#include "sdk/engine/engine_testing.h"
#include "sdk/engine/testing/counting_backend.h"
#include "sdk/gpu/gpu_test_util.h"

namespace banyan::engine {
namespace {

model::ModelConfig SmallConfig() {
  model::ModelConfig c;
  c.vocab_size = 512;
  c.num_layers = 3;
  c.num_q_heads = 8;
  c.num_kv_heads = 2;
  c.head_dim = 64;
  c.hidden_size = 512;
  c.intermediate_size = 1024;
  c.rope_theta = 10000.0f;
  return c;
}

std::unique_ptr<Engine> MakeEngine(bool cuda, EngineOptions::AttentionMode mode, uint64_t seed,
                                   bool device_sampling = true) {
  EngineParts parts;
  if (cuda) {
    parts.backend = model::CreateCudaBackend(model::MakeRandomWeights(SmallConfig(), seed)).value();
    parts.kv_dtype = DType::kBf16;
    parts.device_name = "cuda:0";
  } else {
    parts.backend = model::CreateCpuBackend(
                        std::make_shared<const model::ModelWeights>(model::MakeRandomWeights(SmallConfig(), seed)))
                        .value();
  }
  parts.tokenizer = std::make_unique<testing::ByteTokenizer>();
  EngineOptions o;
  o.kv_budget_bytes = 64 << 20;
  o.page_size = 16;
  o.max_batch = 64;
  o.prefill_chunk = 40;  // a 100-token prompt takes three chunks
  o.attention_mode = mode;
  o.device_sampling = device_sampling;
  auto engine = CreateEngineFromParts(std::move(parts), o);
  EXPECT_TRUE(engine.ok()) << engine.status();
  return std::move(engine).value();
}

// Scores of every leaf of a small tree, in a fixed order.
std::vector<double> TreeScores(Engine& engine) {
  Rng rng(3);
  std::vector<int32_t> prompt(100);
  for (int32_t& t : prompt) t = static_cast<int32_t>(rng.UniformInt(512));
  BranchId root = engine.NewBranch(Prompt::Tokens(prompt)).value();
  std::vector<BranchId> kids = engine.Fork(root, 4).value();
  GenerateOptions g;
  g.sampling.temperature = 0.0f;
  g.max_tokens = 9;  // ends mid-page: the next fork level copies on write
  g.ignore_eos = true;
  for (auto& r : engine.GenerateMany(kids, g)) EXPECT_TRUE(r.ok()) << r.status();
  std::vector<double> scores;
  for (BranchId k : kids) {
    std::vector<BranchId> grandkids = engine.Fork(k, 2).value();
    for (int i = 0; i < 2; ++i) {
      std::vector<int32_t> cont(12);
      for (int32_t& t : cont) t = static_cast<int32_t>(rng.UniformInt(512));
      EXPECT_TRUE(engine.Append(grandkids[i], Prompt::Tokens(cont)).ok());
      std::vector<int32_t> probe = {7, 8, 9, 10};
      scores.push_back(engine.Score(grandkids[i], Prompt::Tokens(probe)).value().logprob);
    }
  }
  // The generated tokens themselves (greedy), scored from the root.
  for (BranchId k : kids) {
    BranchInfo info = engine.Inspect(k).value();
    std::vector<int32_t> generated(info.tokens.begin() + 100, info.tokens.end());
    scores.push_back(engine.Score(root, Prompt::Tokens(generated)).value().logprob);
  }
  return scores;
}

TEST(EngineCudaTest, CudaEngineMatchesCpuEngineOnATree) {
  BANYAN_SKIP_WITHOUT_GPU();
  const auto cpu = MakeEngine(false, EngineOptions::AttentionMode::kTree, 11);
  const auto tree = MakeEngine(true, EngineOptions::AttentionMode::kTree, 11);
  const auto flat = MakeEngine(true, EngineOptions::AttentionMode::kPerSequence, 11);
  const std::vector<double> a = TreeScores(*cpu);
  const std::vector<double> b = TreeScores(*tree);
  const std::vector<double> c = TreeScores(*flat);
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    // Sums of 4..9 log-probabilities; bf16 weights and KV.
    EXPECT_NEAR(a[i], b[i], 0.05 * std::abs(a[i]) + 0.2) << "score " << i;
    EXPECT_NEAR(b[i], c[i], 0.02 * std::abs(b[i]) + 0.05) << "score " << i;
  }
  const EngineStats s = tree->Stats();
  EXPECT_GT(s.kv_tokens_attended, s.kv_tokens_read);
}

TEST(EngineCudaTest, NoAttentionModeRuns) {
  BANYAN_SKIP_WITHOUT_GPU();
  const auto engine = MakeEngine(true, EngineOptions::AttentionMode::kNone, 12);
  BranchId root = engine->NewBranch(Prompt::Tokens({1, 2, 3, 4, 5})).value();
  std::vector<BranchId> kids = engine->Fork(root, 8).value();
  GenerateOptions g;
  g.max_tokens = 20;
  g.ignore_eos = true;
  for (auto& r : engine->GenerateMany(kids, g)) {
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->tokens.size(), 20u);
  }
}

// Sampled branches (temperature, top-k, top-p) drawn on the device: the same
// seed gives the same text on a second engine, each branch's reported
// log-probabilities add up to what Score says of its text, and host sampling
// on the same engine kind repeats too.
TEST(EngineCudaTest, DeviceSampledDecodingRepeatsAndReportsTheModelsLogprobs) {
  BANYAN_SKIP_WITHOUT_GPU();
  GenerateOptions g;
  g.sampling.temperature = 0.9f;
  g.sampling.top_k = 50;
  g.sampling.top_p = 0.9f;
  g.sampling.seed = 5;
  g.max_tokens = 24;
  g.ignore_eos = true;
  auto run = [&](Engine& engine, std::vector<std::vector<int32_t>>* tokens, std::vector<double>* logprob_sums) {
    BranchId root = engine.NewBranch(Prompt::Tokens({3, 1, 4, 1, 5, 9, 2, 6})).value();
    std::vector<BranchId> kids = engine.Fork(root, 8).value();
    for (auto& r : engine.GenerateMany(kids, g)) {
      ASSERT_TRUE(r.ok()) << r.status();
      ASSERT_EQ(r->tokens.size(), 24u);
      tokens->push_back(r->tokens);
      double sum = 0;
      for (float lp : r->logprobs) sum += lp;
      logprob_sums->push_back(sum);
    }
    for (size_t i = 0; i < tokens->size(); ++i) {
      const double score = engine.Score(root, Prompt::Tokens((*tokens)[i])).value().logprob;
      EXPECT_NEAR((*logprob_sums)[i], score, 0.02 * std::abs(score) + 0.1) << "branch " << i;
    }
  };
  std::vector<std::vector<int32_t>> a, b, c, d;
  std::vector<double> sa, sb, sc, sd;
  const auto first = MakeEngine(true, EngineOptions::AttentionMode::kTree, 13);
  const auto second = MakeEngine(true, EngineOptions::AttentionMode::kTree, 13);
  run(*first, &a, &sa);
  run(*second, &b, &sb);
  EXPECT_EQ(a, b);
  int distinct = 0;
  for (size_t i = 1; i < a.size(); ++i) distinct += a[i] != a[0];
  EXPECT_GT(distinct, 4);  // branches sample their own streams
  const auto host = MakeEngine(true, EngineOptions::AttentionMode::kTree, 13, /*device_sampling=*/false);
  const auto host2 = MakeEngine(true, EngineOptions::AttentionMode::kTree, 13, /*device_sampling=*/false);
  run(*host, &c, &sc);
  run(*host2, &d, &sd);
  EXPECT_EQ(c, d);
}

}  // namespace
}  // namespace banyan::engine

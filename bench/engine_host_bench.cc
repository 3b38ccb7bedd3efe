// Host-side cost of one Engine decode step (plan building, tree appends,
// sampling, callbacks), measured over the counting backend (whose forward
// pass is nearly free) so that what remains is the engine's own overhead per
// step: 256 / 1024 sampled branches over a shared prompt, vocabulary 32000.
// BM_EngineHostGreedyStep: the same with greedy branches over a backend whose
// greedy pass (Backend::ForwardGreedy) validates the batch and returns a token
// per row at no cost, as a device backend returns them: what remains is what
// the CUDA engine's greedy steps pay on the host between forward passes
// (engine_bench's host_ms) plus the batch validation inside them.
// Counters: step_ms (wall per decode step), forward_ms (inside Forward).
#include <algorithm>
#include <memory>
#include <utility>
#include <vector>

#include "absl/time/clock.h"
#include "banyan/engine.h"
#include "banyan/status_macros.h"
#include "benchmark/benchmark.h"
#include "model/forward.h"
#include "sdk/engine/engine_testing.h"
#include "sdk/engine/testing/counting_backend.h"

namespace banyan {
namespace {

// Per iteration: the prompt forked into `branches` branches (with
// distinct_paths, each given two tokens of its own: branches with equal tokens
// would share tree nodes, one per token, kv_tree.h), then one GenerateMany;
// counters step_ms (wall per decode step), forward_ms, rows.
void TimeDecodeSteps(benchmark::State& state, Engine& engine, const std::vector<int32_t>& prompt, int32_t branches,
                     const GenerateOptions& gen, bool distinct_paths) {
  double step_ms = 0, forward_ms = 0;
  for (auto _ : state) {
    BranchId root = engine.NewBranch(Prompt::Tokens(prompt)).value();
    std::vector<BranchId> kids = engine.Fork(root, branches).value();
    for (int32_t i = 0; distinct_paths && i < branches; ++i) {
      (void)engine.Append(kids[i], Prompt::Tokens({i % 250, i / 250}));
    }
    const EngineStats before = engine.Stats();
    const absl::Time t0 = absl::Now();
    for (auto& r : engine.GenerateMany(kids, gen)) benchmark::DoNotOptimize(r.ok());
    const double wall = absl::ToDoubleSeconds(absl::Now() - t0);
    const EngineStats after = engine.Stats();
    const double steps = static_cast<double>(after.decode_steps - before.decode_steps);
    step_ms = 1e3 * wall / steps;
    forward_ms = 1e3 * (after.decode_seconds - before.decode_seconds) / steps;
    state.counters["rows"] = static_cast<double>(after.max_rows_in_step);
    for (BranchId k : kids) (void)engine.Release(k);
    (void)engine.Release(root);
  }
  state.counters["step_ms"] = step_ms;
  state.counters["forward_ms"] = forward_ms;
}

void BM_EngineHostStep(benchmark::State& state) {
  const int32_t branches = static_cast<int32_t>(state.range(0));
  const int32_t prefix = static_cast<int32_t>(state.range(1));
  engine::testing::CountingBackendOptions model;
  model.vocab_size = 32000;
  model.num_layers = 1;
  model.first_logit = 1.0f;  // nearly flat: sampled branches diverge
  model.second_logit = 0.5f;
  EngineOptions options;
  options.kv_budget_bytes = size_t{1} << 30;
  options.max_batch = branches;
  options.prefill_chunk = 4096;
  std::unique_ptr<Engine> engine = engine::testing::CreateCountingEngine(model, options).value();
  std::vector<int32_t> prompt(static_cast<size_t>(prefix));
  for (int32_t i = 0; i < prefix; ++i) prompt[i] = (i * 7919) % 32000;
  GenerateOptions gen;
  gen.sampling.temperature = 1.0f;
  gen.sampling.seed = 3;
  gen.max_tokens = 32;
  gen.ignore_eos = true;
  TimeDecodeSteps(state, *engine, prompt, branches, gen, /*distinct_paths=*/false);
}

// A backend with the counting model's config whose passes cost nothing but the
// batch validation every backend does: Forward writes each logits row as the
// counting model would (token + 1 first) and ForwardGreedy answers token + 1
// (kept to bytes, so the ByteTokenizer can show it). It writes no K/V: it is
// for timing the engine's host work, not for checking it.
class FreeGreedyBackend final : public model::Backend {
 public:
  explicit FreeGreedyBackend(model::ModelConfig config) : config_(std::move(config)) {}
  std::string_view name() const override { return "free-greedy"; }
  const model::ModelConfig& config() const override { return config_; }
  MemorySpace kv_memory_space() const override { return MemorySpace::kHost; }
  absl::Status Forward(const model::ForwardBatch& batch, const model::KvCache& kv,
                       absl::Span<float> logits) override {
    BANYAN_RETURN_IF_ERROR(model::ValidateForwardBatch(config_, batch, kv, logits.size()));
    const size_t vocab = static_cast<size_t>(config_.vocab_size);
    std::fill(logits.begin(), logits.end(), 0.0f);
    for (size_t i = 0; i < batch.logit_rows.size(); ++i) {
      logits[i * vocab + static_cast<size_t>(Next(batch, i))] = 8.0f;
    }
    return absl::OkStatus();
  }
  bool supports_greedy() const override { return true; }
  absl::Status ForwardGreedy(const model::ForwardBatch& batch, const model::KvCache& kv,
                             absl::Span<int32_t> tokens, absl::Span<float> logprobs) override {
    const size_t m = batch.logit_rows.size();
    BANYAN_RETURN_IF_ERROR(model::ValidateForwardBatch(config_, batch, kv, m * config_.vocab_size));
    for (size_t i = 0; i < m; ++i) {
      tokens[i] = Next(batch, i);
      logprobs[i] = -0.5f;
    }
    return absl::OkStatus();
  }

 private:
  static int32_t Next(const model::ForwardBatch& batch, size_t i) {
    return (batch.tokens[batch.logit_rows[i]] + 1) % 250;
  }
  model::ModelConfig config_;
};

void BM_EngineHostGreedyStep(benchmark::State& state) {
  const int32_t branches = static_cast<int32_t>(state.range(0));
  const int32_t prefix = static_cast<int32_t>(state.range(1));
  engine::testing::CountingBackendOptions model;
  model.vocab_size = 32000;
  model.num_layers = 1;
  EngineOptions options;
  options.kv_budget_bytes = size_t{1} << 30;
  options.max_batch = branches;
  options.prefill_chunk = 4096;
  auto backend = std::make_unique<FreeGreedyBackend>(engine::testing::CountingModelConfig(model));
  std::unique_ptr<Engine> engine =
      engine::CreateEngineForTesting(std::move(backend), std::make_unique<engine::testing::ByteTokenizer>(), options)
          .value();
  std::vector<int32_t> prompt(static_cast<size_t>(prefix));
  for (int32_t i = 0; i < prefix; ++i) prompt[i] = (i * 7919) % 250;
  GenerateOptions gen;
  gen.sampling.temperature = 0.0f;
  gen.max_tokens = 128;
  gen.ignore_eos = true;
  TimeDecodeSteps(state, *engine, prompt, branches, gen, /*distinct_paths=*/true);
}

BENCHMARK(BM_EngineHostGreedyStep)->ArgNames({"branches", "prefix"})->Args({256, 2048})->Args({1024, 2048})
    ->Iterations(1)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_EngineHostStep)->ArgNames({"branches", "prefix"})->Args({256, 2048})->Args({1024, 2048})
    ->Iterations(1)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace banyan

BENCHMARK_MAIN();

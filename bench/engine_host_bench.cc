// Host-side cost of one Engine decode step (plan building, tree appends,
// sampling, callbacks), measured over the counting backend (whose forward
// pass is nearly free) so that what remains is the engine's own overhead per
// step: 256 / 1024 sampled branches over a shared prompt, vocabulary 32000.
// Counters: step_ms (wall per decode step), forward_ms (inside Forward).
#include <memory>
#include <vector>

#include "absl/time/clock.h"
#include "banyan/engine.h"
#include "benchmark/benchmark.h"
#include "sdk/engine/testing/counting_backend.h"

namespace banyan {
namespace {

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
  double step_ms = 0, forward_ms = 0;
  for (auto _ : state) {
    BranchId root = engine->NewBranch(Prompt::Tokens(prompt)).value();
    std::vector<BranchId> kids = engine->Fork(root, branches).value();
    const EngineStats before = engine->Stats();
    const absl::Time t0 = absl::Now();
    for (auto& r : engine->GenerateMany(kids, gen)) benchmark::DoNotOptimize(r.ok());
    const double wall = absl::ToDoubleSeconds(absl::Now() - t0);
    const EngineStats after = engine->Stats();
    const double steps = static_cast<double>(after.decode_steps - before.decode_steps);
    step_ms = 1e3 * wall / steps;
    forward_ms = 1e3 * (after.decode_seconds - before.decode_seconds) / steps;
    state.counters["rows"] = static_cast<double>(after.max_rows_in_step);
    for (BranchId k : kids) (void)engine->Release(k);
    (void)engine->Release(root);
  }
  state.counters["step_ms"] = step_ms;
  state.counters["forward_ms"] = forward_ms;
}

BENCHMARK(BM_EngineHostStep)->ArgNames({"branches", "prefix"})->Args({256, 2048})->Args({1024, 2048})
    ->Iterations(1)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace banyan

BENCHMARK_MAIN();

// Host sampling cost per decode step: `rows` logits rows of `vocab` values,
// each sampled by its own branch's Sampler, rows spread over a thread pool of
// `threads` threads (as the engine does), fast Sampler vs ReferenceSampler.
//
//   BM_Sample/impl/mode/vocab/rows/threads[/peaked]
//     impl 0 = Sampler (model/sampling/sampler.h), 1 = ReferenceSampler (double).
//     mode 0 greedy: temperature 0, through Sampler::Sample
//          1 greedy row: SampleGreedy (the engine's shared greedy rows)
//          2 temperature 1 (no filters)
//          3 temperature 0.8, top-k 50
//          4 temperature 0.8, top-p 0.95
//          5 temperature 1, min-p 0.05
//          6 temperature 0.8, top-p 0.95, repetition 1.1, frequency 0.2,
//            presence 0.1 over a 2,048-token prompt + 128 generated tokens
// Logits: Normal(0, 2) per token plus 8 boosted tokens per row (a broad
// distribution like a random model's: top-p keeps thousands of tokens, the
// hard case for selection); peaked = 1 adds 14 to one token per row (a
// trained model's confident step: top-p keeps a handful). Counters:
// us_per_row = wall per step / rows.
#include <map>
#include <utility>
#include <memory>
#include <vector>

#include "bench/bench_status.h"
#include "benchmark/benchmark.h"
#include "model/ops/thread_pool.h"
#include "model/sampling/reference_sampler.h"
#include "model/sampling/sampler.h"
#include "sdk/base/rng.h"

namespace banyan {
namespace {

model::SamplingParams Params(int mode) {
  model::SamplingParams p;
  switch (mode) {
    case 0:
    case 1: p.temperature = 0.0f; break;
    case 2: break;
    case 3: p.temperature = 0.8f; p.top_k = 50; break;
    case 4: p.temperature = 0.8f; p.top_p = 0.95f; break;
    case 5: p.min_p = 0.05f; break;
    default:
      p.temperature = 0.8f;
      p.top_p = 0.95f;
      p.repetition_penalty = 1.1f;
      p.frequency_penalty = 0.2f;
      p.presence_penalty = 0.1f;
  }
  return p;
}

// 64 distinct rows per vocabulary (reused cyclically: bounded memory at
// 1,024 x 128K), made once per vocabulary.
constexpr int kDistinct = 64;

const std::vector<float>& Logits(size_t vocab, bool peaked) {
  static std::map<std::pair<size_t, bool>, std::vector<float>>* cache =
      new std::map<std::pair<size_t, bool>, std::vector<float>>;
  std::vector<float>& logits = (*cache)[{vocab, peaked}];
  if (logits.empty()) {
    Rng rng(5);
    logits.resize(kDistinct * vocab);
    for (float& x : logits) x = 2.0f * rng.Normal();
    for (int r = 0; r < kDistinct; ++r) {
      for (int i = 0; i < 8; ++i) logits[r * vocab + rng.UniformInt(vocab)] += 8.0f;
      if (peaked) logits[r * vocab + rng.UniformInt(vocab)] += 14.0f;
    }
  }
  return logits;
}

void BM_Sample(benchmark::State& state) {
  const bool reference = state.range(0) == 1;
  const int mode = static_cast<int>(state.range(1));
  const size_t vocab = static_cast<size_t>(state.range(2));
  const int rows = static_cast<int>(state.range(3));
  const int threads = static_cast<int>(state.range(4));
  const bool peaked = state.range(5) != 0;
  if (reference && mode == 1) {
    state.SkipWithError("no reference for SampleGreedy (mode 0 is the same work)");
    return;
  }
  const std::vector<float>& logits = Logits(vocab, peaked);
  Rng rng(6);
  std::vector<int32_t> prompt, generated;
  if (mode == 6) {
    for (int i = 0; i < 2048; ++i) prompt.push_back(static_cast<int32_t>(rng.UniformInt(vocab)));
    for (int i = 0; i < 128; ++i) generated.push_back(static_cast<int32_t>(rng.UniformInt(vocab)));
  }
  const model::SamplingParams p = Params(mode);
  std::vector<model::Sampler> fast;
  std::vector<model::sampling::ReferenceSampler> ref;
  for (int r = 0; r < rows; ++r) {
    if (reference) {
      absl::StatusOr<model::sampling::ReferenceSampler> s =
          model::sampling::ReferenceSampler::Create(p, Rng(1).Derive(r));
      BENCH_OK(s.status());
      ref.push_back(*std::move(s));
    } else {
      absl::StatusOr<model::Sampler> s = model::Sampler::Create(p, Rng(1).Derive(r));
      BENCH_OK(s.status());
      fast.push_back(*std::move(s));
    }
  }
  model::ops::ThreadPool pool(threads);
  std::vector<int32_t> tokens(rows);
  std::vector<char> ok(rows);
  for (auto _ : state) {
    pool.ParallelFor(rows, 1, [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r) {
        const absl::Span<const float> row(logits.data() + (r % kDistinct) * vocab, vocab);
        absl::StatusOr<model::SampleResult> s =
            reference ? ref[r].Sample(row, prompt, generated)
            : mode == 1 ? model::SampleGreedy(row)
                        : fast[r].Sample(row, prompt, generated);
        ok[r] = s.ok();
        tokens[r] = s.ok() ? s->token : -1;
      }
    });
    benchmark::DoNotOptimize(tokens.data());
  }
  for (int r = 0; r < rows; ++r) {
    if (!ok[r]) {
      state.SkipWithError("a Sample call failed");
      return;
    }
  }
  state.counters["us_per_row"] = benchmark::Counter(static_cast<double>(rows) * 1e-6,
                                                    benchmark::Counter::kIsIterationInvariantRate |
                                                        benchmark::Counter::kInvert);
}

void Shapes(benchmark::internal::Benchmark* b) {
  b->ArgNames({"impl", "mode", "vocab", "rows", "threads", "peaked"});
  for (int64_t vocab : {49152, 128256}) {
    for (int64_t mode = 0; mode <= 6; ++mode) {
      for (int64_t rows : {1, 256, 1024}) {
        b->Args({0, mode, vocab, rows, 1, 0});
        if (rows > 1) b->Args({0, mode, vocab, rows, 16, 0});
        // The reference is slow: one thread, up to 256 rows.
        if (rows <= 256 && mode != 1) b->Args({1, mode, vocab, rows, 1, 0});
      }
    }
    // Confident rows, where top-p keeps a handful of tokens.
    for (int64_t mode : {4, 6}) {
      b->Args({0, mode, vocab, 256, 1, 1});
      b->Args({0, mode, vocab, 256, 16, 1});
      b->Args({1, mode, vocab, 256, 1, 1});
    }
  }
}

BENCHMARK(BM_Sample)->Apply(Shapes)->UseRealTime()->Unit(benchmark::kMillisecond)->MinTime(0.2);

}  // namespace
}  // namespace banyan

BENCHMARK_MAIN();

// End-to-end decode throughput of the Engine on one GPU, with a ~1B
// Llama-shaped randomly initialized model (hidden 2048, 16 layers, 32 query /
// 8 KV heads of 64, intermediate 8192, vocab 32000; bf16 on the CUDA backend):
//
//   BM_Decode/mode/branches/prefix/sampled   a prompt of `prefix` random
//       tokens, prefilled once, forked into `branches` branches that share its
//       KV, each given its own first token, then decoding 128 new tokens (EOS
//       ignored) in one GenerateMany. mode 0 = tree attention (the default), 1
//       = per-sequence attention (every node flattened: each branch reads its
//       whole path), 2 = no attention over the context (the ceiling).
//       sampled 0 = greedy, 1 = temperature 0.8 + top-p 0.95 (every branch
//       draws from its row on the device: Backend::ForwardSample), 2 = the
//       same on the host Sampler (EngineOptions::device_sampling false).
//   BM_Decode/0/1024/{1K..16K}/0    the prefix sweep at 1,024 branches.
//
// Counters: decode_tok_s = generated tokens / seconds inside decode forward
// passes (EngineStats::decode_seconds; a pass includes the copy of its
// results to the host: 12 bytes per row for greedy steps, else the logits); wall_tok_s = generated tokens / wall time
// of the GenerateMany call (adds sampling, plan building and host work); step_ms = mean decode forward pass; host_ms =
// wall per step - step_ms (the engine's host work between forward passes); kv_share = KV tokens attended / KV tokens
// read. Where the step goes, measured beside the engine on the same shapes: copy_ms = one pinned device-to-host copy of
// the step's logits (branches x 32000 fp32); greedy_ms = SampleGreedy over those rows on the engine's sampling threads
// (min(cores, 16)); greedy_ref_ms = the same with the plain double reference sampler (the Sampler before this session:
// two double exp passes per greedy row; the engine's former shared-row loop made one); host_sample_ms / gpu_sample_ms
// (sampled rows) = one step's draws at T 0.8, top-p 0.95 by the host Sampler (after the logits copy, not included) / by
// LaunchSampleRows with its 32 + 12 bytes per draw copied up and back;
// gpu_greedy_ms = LaunchGreedyRows on the device logits plus the copy of 12
// bytes per row back (what the engine's greedy steps now pay, through
// Backend::ForwardGreedy; gpu_greedy_mismatch counts rows whose token differs
// from SampleGreedy's);
// attention = step_ms(mode 0 or 1) - step_ms(mode 2).
// BANYAN_BENCH_PAGE_SIZE=n runs every row with KV pages of n tokens (default:
// EngineOptions' 16); BANYAN_BENCH_REPEATS=n runs every row n times and
// reports medians (one GenerateMany of 128 steps is noisy: the same binary
// measured 83% and 96% of the ceiling two minutes apart), each repetition
// with a fresh prompt unless BANYAN_BENCH_SAME_PROMPT=1.
// BANYAN_BENCH_PLAN_AHEAD=0 turns off CudaBackendOptions::plan_ahead (each
// decode pass then plans its own attention while the GPU waits); =ab runs
// two engines, on and off, repetitions alternating (counters step_ms_ahead,
// step_ms_no_ahead, ahead_saves_ms: the median of paired differences).
// BANYAN_BENCH_KV_MIB=n: a KV budget of n MiB instead of 24 GiB; at about
// twice one repetition's KV, every repetition's prompt is written into the
// pages the repetition before freed (a churned pool, not a fresh one).
// The HF transformers baseline on the same model runs from
// bench/hf_generate_baseline.py in the same device session.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/time/clock.h"
#include "banyan/engine.h"
#include "banyan/status_macros.h"
#include "bench/bench_median.h"
#include "benchmark/benchmark.h"
#include "model/cpu/random_weights.h"
#include "model/cuda/cuda_backend.h"
#include "model/ops/thread_pool.h"
#include "model/sampling/greedy_cuda.h"
#include "model/sampling/reference_sampler.h"
#include "model/sampling/sample_cuda.h"
#include "model/sampling/sampler.h"
#include "sdk/base/rng.h"
#include "sdk/engine/engine_testing.h"
#include "sdk/engine/testing/counting_backend.h"
#include "sdk/gpu/cuda_status.h"
#include "sdk/gpu/device_buffer.h"
#include "sdk/gpu/device_info.h"

namespace banyan {
namespace {

const model::ModelWeights& Weights() {
  static const model::ModelWeights* weights = [] {
    const absl::Time start = absl::Now();
    auto* w = new model::ModelWeights(model::MakeRandomWeights(model::Llama1bShapedConfig(), /*seed=*/1));
    std::fprintf(stderr, "[engine_bench] random 1B weights in %.1f s\n",
                 absl::ToDoubleSeconds(absl::Now() - start));
    return w;
  }();
  return *weights;
}

// Mean milliseconds of fn() over `reps` runs after one warm-up run.
template <typename Fn>
double MeanMs(int reps, Fn fn) {
  fn();
  const absl::Time start = absl::Now();
  for (int i = 0; i < reps; ++i) fn();
  return 1e3 * absl::ToDoubleSeconds(absl::Now() - start) / reps;
}

// The step's logits copy and greedy sampling, timed alone (see the header).
struct StepParts {
  double copy_ms = 0, greedy_ms = 0, greedy_ref_ms = 0, gpu_greedy_ms = 0;
  int64_t gpu_greedy_mismatch = 0;
};

// One step's logits (rows x vocab, Gaussian with sd 2), in pinned host memory
// and on the device, and a stream to time on.
struct StepLogits {
  gpu::DeviceBuffer device;
  gpu::PinnedBuffer host;
  gpu::Stream stream;
};

absl::StatusOr<StepLogits> RandomStepLogits(int32_t rows, int32_t vocab, uint64_t seed) {
  const size_t floats = static_cast<size_t>(rows) * vocab;
  BANYAN_ASSIGN_OR_RETURN(gpu::DeviceBuffer device, gpu::DeviceBuffer::Allocate(floats * sizeof(float)));
  BANYAN_ASSIGN_OR_RETURN(gpu::PinnedBuffer host, gpu::PinnedBuffer::Allocate(floats * sizeof(float)));
  BANYAN_ASSIGN_OR_RETURN(gpu::Stream stream, gpu::Stream::Create());
  Rng rng(seed);
  for (size_t i = 0; i < floats; ++i) host.As<float>()[i] = 2.0f * rng.Normal();
  BANYAN_CUDA_RETURN_IF_ERROR(cudaMemcpy(device.data(), host.data(), floats * sizeof(float), cudaMemcpyHostToDevice));
  return StepLogits{std::move(device), std::move(host), std::move(stream)};
}

absl::StatusOr<StepParts> MeasureStepParts(int32_t rows, int32_t vocab) {
  const size_t floats = static_cast<size_t>(rows) * vocab;
  BANYAN_ASSIGN_OR_RETURN(StepLogits step, RandomStepLogits(rows, vocab, 9));
  gpu::DeviceBuffer& device = step.device;
  gpu::Stream& stream = step.stream;
  float* logits = step.host.As<float>();
  StepParts parts;
  absl::Status status;
  parts.copy_ms = MeanMs(10, [&] {
    status.Update(BANYAN_CUDA_STATUS(cudaMemcpyAsync(logits, device.data(), floats * sizeof(float),
                                                     cudaMemcpyDeviceToHost, stream.get())));
    status.Update(stream.Synchronize());
  });
  BANYAN_RETURN_IF_ERROR(status);
  const int threads = static_cast<int>(std::min(16u, std::max(1u, std::thread::hardware_concurrency())));
  model::ops::ThreadPool pool(threads);
  std::vector<int32_t> tokens(rows);
  parts.greedy_ms = MeanMs(10, [&] {
    pool.ParallelFor(rows, 4, [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r) {
        tokens[r] = model::SampleGreedy(absl::MakeConstSpan(logits + r * vocab, vocab)).value().token;
      }
    });
  });
  model::SamplingParams greedy;
  greedy.temperature = 0.0f;
  BANYAN_ASSIGN_OR_RETURN(model::sampling::ReferenceSampler ref,
                          model::sampling::ReferenceSampler::Create(greedy, Rng(1)));
  parts.greedy_ref_ms = MeanMs(3, [&] {
    pool.ParallelFor(rows, 4, [&](int64_t begin, int64_t end) {
      model::sampling::ReferenceSampler local = ref;
      for (int64_t r = begin; r < end; ++r) {
        tokens[r] = local.Sample(absl::MakeConstSpan(logits + r * vocab, vocab), {}, {}).value().token;
      }
    });
  });
  // Greedy on the device: 12 bytes per row come back instead of the row.
  BANYAN_ASSIGN_OR_RETURN(gpu::DeviceBuffer d_out, gpu::DeviceBuffer::Allocate(static_cast<size_t>(rows) * 12));
  BANYAN_ASSIGN_OR_RETURN(gpu::PinnedBuffer h_out, gpu::PinnedBuffer::Allocate(static_cast<size_t>(rows) * 12));
  model::sampling::GreedyRowsArgs args{.logits = device.As<float>(), .rows = rows, .vocab = vocab,
                                       .tokens = d_out.As<int32_t>(), .logprobs = d_out.As<float>() + rows,
                                       .bad = d_out.As<int32_t>() + 2 * rows};
  parts.gpu_greedy_ms = MeanMs(10, [&] {
    status.Update(model::sampling::LaunchGreedyRows(args, stream.get()));
    status.Update(BANYAN_CUDA_STATUS(cudaMemcpyAsync(h_out.data(), d_out.data(), static_cast<size_t>(rows) * 12,
                                                     cudaMemcpyDeviceToHost, stream.get())));
    status.Update(stream.Synchronize());
  });
  BANYAN_RETURN_IF_ERROR(status);
  for (int32_t r = 0; r < rows; ++r) {
    parts.gpu_greedy_mismatch += h_out.As<int32_t>()[r] != tokens[r] || h_out.As<int32_t>()[2 * rows + r] != 0;
  }
  return parts;
}

// The sampled rows' draws timed alone (T 0.8, top-p 0.95, one draw per row):
// the host Sampler on the engine's sampling threads after the logits copy,
// and LaunchSampleRows on the device logits plus the 12-byte results back.
struct SampledParts {
  double host_sample_ms = 0, gpu_sample_ms = 0;
};

absl::StatusOr<SampledParts> MeasureSampledParts(int32_t rows, int32_t vocab) {
  BANYAN_ASSIGN_OR_RETURN(StepLogits step, RandomStepLogits(rows, vocab, 10));
  gpu::DeviceBuffer& device = step.device;
  gpu::Stream& stream = step.stream;
  const float* logits = step.host.As<float>();
  model::SamplingParams params;
  params.temperature = 0.8f;
  params.top_p = 0.95f;
  std::vector<model::Sampler> samplers;
  std::vector<model::sampling::DeviceDraw> draws;
  for (int32_t r = 0; r < rows; ++r) {
    BANYAN_ASSIGN_OR_RETURN(model::Sampler sampler, model::Sampler::Create(params, Rng(r)));
    draws.push_back(model::sampling::MakeDeviceDraw(r, params, sampler.PeekUniform()));
    samplers.push_back(sampler);
  }
  SampledParts parts;
  absl::Status status;
  const int threads = static_cast<int>(std::min(16u, std::max(1u, std::thread::hardware_concurrency())));
  model::ops::ThreadPool pool(threads);
  parts.host_sample_ms = MeanMs(5, [&] {
    pool.ParallelFor(rows, 8, [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r) {
        (void)samplers[r].Sample(absl::MakeConstSpan(logits + r * vocab, vocab), {}, {});
      }
    });
  });
  const size_t up = draws.size() * sizeof(model::sampling::DeviceDraw);
  const size_t down = draws.size() * sizeof(model::sampling::DrawResult);
  BANYAN_ASSIGN_OR_RETURN(gpu::DeviceBuffer d_draws, gpu::DeviceBuffer::Allocate(up));
  BANYAN_ASSIGN_OR_RETURN(gpu::DeviceBuffer d_out, gpu::DeviceBuffer::Allocate(down));
  BANYAN_ASSIGN_OR_RETURN(gpu::PinnedBuffer h_io, gpu::PinnedBuffer::Allocate(up + down));
  std::memcpy(h_io.data(), draws.data(), up);
  const model::sampling::SampleRowsArgs args{.logits = device.As<float>(), .rows = rows, .vocab = vocab,
                                             .draws = d_draws.As<model::sampling::DeviceDraw>(),
                                             .num_draws = rows,
                                             .results = d_out.As<model::sampling::DrawResult>()};
  parts.gpu_sample_ms = MeanMs(10, [&] {
    status.Update(BANYAN_CUDA_STATUS(
        cudaMemcpyAsync(d_draws.data(), h_io.data(), up, cudaMemcpyHostToDevice, stream.get())));
    status.Update(model::sampling::LaunchSampleRows(args, stream.get()));
    status.Update(BANYAN_CUDA_STATUS(
        cudaMemcpyAsync(h_io.As<char>() + up, d_out.data(), down, cudaMemcpyDeviceToHost, stream.get())));
    status.Update(stream.Synchronize());
  });
  BANYAN_RETURN_IF_ERROR(status);
  return parts;
}

// BANYAN_BENCH_REPEATS=n (default 1): every row runs its prefill + fork +
// GenerateMany n times; the counters are medians (step_ms_min / _max: spread).
int Repeats() {
  const char* repeats = std::getenv("BANYAN_BENCH_REPEATS");
  const int n = repeats == nullptr ? 1 : std::atoi(repeats);
  return n < 1 ? 1 : n;
}

void BM_Decode(benchmark::State& state) {
  if (!gpu::HasGpu()) {
    state.SkipWithError("no GPU");
    return;
  }
  const auto mode = static_cast<EngineOptions::AttentionMode>(state.range(0));
  const int32_t branches = static_cast<int32_t>(state.range(1));
  const int32_t prefix = static_cast<int32_t>(state.range(2));
  const bool sampled = state.range(3) != 0;
  const bool host_sampling = state.range(3) == 2;
  constexpr int32_t kNewTokens = 128;

  // BANYAN_BENCH_PLAN_AHEAD=0 / 1: the backend option; =ab: two engines in
  // this process, planning ahead on and off, repetitions alternating between
  // them (a side-by-side closer than two processes: separate runs of one
  // binary differ by 2-3% in step time).
  const char* ahead_env = std::getenv("BANYAN_BENCH_PLAN_AHEAD");
  const bool ab = ahead_env != nullptr && std::string(ahead_env) == "ab";
  std::vector<std::unique_ptr<Engine>> engines;
  for (int e = 0; e < (ab ? 2 : 1); ++e) {
    model::CudaBackendOptions backend_options;
    if (ab) {
      backend_options.plan_ahead = e == 0;
    } else if (ahead_env != nullptr) {
      backend_options.plan_ahead = std::atoi(ahead_env) != 0;
    }
    absl::StatusOr<std::unique_ptr<model::Backend>> backend = model::CreateCudaBackend(Weights(), backend_options);
    if (!backend.ok()) {
      state.SkipWithError(std::string(backend.status().message()).c_str());
      return;
    }
    engine::EngineParts parts;
    parts.backend = std::move(*backend);
    parts.tokenizer = std::make_unique<engine::testing::ByteTokenizer>();
    parts.kv_dtype = DType::kBf16;
    parts.device_name = "cuda:0";
    EngineOptions options;
    options.kv_budget_bytes = (ab ? uint64_t{16} : uint64_t{24}) << 30;
    // BANYAN_BENCH_KV_MIB=n: a KV budget of n MiB instead (small enough, every repetition's prompt evicts the
    // repetition before and takes its pages: a churned pool, kv_tree/page_pool.h placement).
    if (const char* mib = std::getenv("BANYAN_BENCH_KV_MIB"); mib != nullptr) {
      options.kv_budget_bytes = static_cast<uint64_t>(std::atoll(mib)) << 20;
    }
    options.max_batch = branches;
    options.prefill_chunk = 4096;
    options.attention_mode = mode;
    options.device_sampling = !host_sampling;
    // BANYAN_BENCH_PAGE_SIZE=n: KV pages of n tokens instead of the default.
    if (const char* page = std::getenv("BANYAN_BENCH_PAGE_SIZE"); page != nullptr) options.page_size = std::atoi(page);
    absl::StatusOr<std::unique_ptr<Engine>> created = engine::CreateEngineFromParts(std::move(parts), options);
    if (!created.ok()) {
      state.SkipWithError(std::string(created.status().message()).c_str());
      return;
    }
    engines.push_back(std::move(*created));
  }
  // With ab: per repetition, which engine ran it (0: ahead on) and its step time.
  std::vector<double> ab_step_ms[2];
  int64_t repetition = 0;
  // A fresh random prompt per repetition, unless BANYAN_BENCH_SAME_PROMPT=1
  // (then every repetition after the first decodes along the cached
  // continuations of the one before: RESULTS.md, session 4).
  Rng rng(42);
  std::vector<int32_t> prompt(static_cast<size_t>(prefix));
  auto new_prompt = [&] {
    for (int32_t& t : prompt) t = static_cast<int32_t>(rng.UniformInt(32000));
  };
  new_prompt();

  GenerateOptions gen;
  gen.sampling.temperature = sampled ? 0.8f : 0.0f;
  gen.sampling.top_p = sampled ? 0.95f : 1.0f;
  gen.sampling.seed = 7;
  gen.max_tokens = kNewTokens;
  gen.ignore_eos = true;
  // Per repetition (BANYAN_BENCH_REPEATS); the counters report medians.
  std::vector<double> decode_tok_s, wall_tok_s, step_ms, host_ms, prefill_s;
  double share = 0;
  // BANYAN_BENCH_SAME_PROMPT=1: every repetition the same prompt (decodes along
  // the cached continuations of the repetition before).
  const char* same = std::getenv("BANYAN_BENCH_SAME_PROMPT");
  const bool same_prompt = same != nullptr && same[0] == '1';
  bool first = true;
  for (auto _ : state) {
    if (!first && !same_prompt) new_prompt();
    first = false;
    Engine& engine = *engines[static_cast<size_t>(repetition++ % static_cast<int64_t>(engines.size()))];
    const absl::Time p0 = absl::Now();
    absl::StatusOr<BranchId> root = engine.NewBranch(Prompt::Tokens(prompt));
    if (!root.ok()) {
      state.SkipWithError(std::string(root.status().message()).c_str());
      return;
    }
    prefill_s.push_back(absl::ToDoubleSeconds(absl::Now() - p0));
    std::vector<BranchId> kids = engine.Fork(*root, branches).value();
    // Each branch starts with its own token, so that greedy branches differ
    // (identical branches would share one row per step). The appends of all
    // threads are batched into a few steps.
    std::vector<std::thread> appenders;
    constexpr int kAppenders = 16;
    for (int a = 0; a < kAppenders; ++a) {
      appenders.emplace_back([&, a] {
        for (int32_t i = a; i < branches; i += kAppenders) {
          (void)engine.Append(kids[i], Prompt::Tokens({1000 + i}));
        }
      });
    }
    for (auto& th : appenders) th.join();
    const EngineStats before = engine.Stats();
    const absl::Time t0 = absl::Now();
    std::vector<absl::StatusOr<GenerateResult>> results = engine.GenerateMany(kids, gen);
    const double wall = absl::ToDoubleSeconds(absl::Now() - t0);
    state.SetIterationTime(wall);
    for (auto& r : results) {
      if (!r.ok()) {
        state.SkipWithError(std::string(r.status().message()).c_str());
        return;
      }
    }
    const EngineStats after = engine.Stats();
    const double generated = static_cast<double>(after.tokens_generated - before.tokens_generated);
    const double decode_s = after.decode_seconds - before.decode_seconds;
    decode_tok_s.push_back(generated / decode_s);
    wall_tok_s.push_back(generated / wall);
    const double steps = static_cast<double>(after.decode_steps - before.decode_steps);
    step_ms.push_back(1e3 * decode_s / steps);
    if (ab) ab_step_ms[(repetition - 1) % 2].push_back(step_ms.back());
    host_ms.push_back(1e3 * wall / steps - step_ms.back());
    share = static_cast<double>(after.kv_tokens_attended - before.kv_tokens_attended) /
            static_cast<double>(after.kv_tokens_read - before.kv_tokens_read);
    for (BranchId k : kids) (void)engine.Release(k);
    (void)engine.Release(*root);
  }
  state.counters["decode_tok_s"] = bench::Median(decode_tok_s);
  state.counters["wall_tok_s"] = bench::Median(wall_tok_s);
  state.counters["step_ms"] = bench::Median(step_ms);
  state.counters["step_ms_min"] = *std::min_element(step_ms.begin(), step_ms.end());
  state.counters["step_ms_max"] = *std::max_element(step_ms.begin(), step_ms.end());
  state.counters["host_ms"] = bench::Median(host_ms);
  state.counters["prefill_s"] = bench::Median(prefill_s);
  state.counters["kv_share"] = share;
  state.counters["rows"] = static_cast<double>(engines[0]->Stats().max_rows_in_step);
  if (ab && !ab_step_ms[1].empty()) {
    state.counters["step_ms_ahead"] = bench::Median(ab_step_ms[0]);
    state.counters["step_ms_no_ahead"] = bench::Median(ab_step_ms[1]);
    // Paired: each repetition without planning ahead minus the one before it (with).
    std::vector<double> saved;
    for (size_t i = 0; i < ab_step_ms[1].size(); ++i) saved.push_back(ab_step_ms[1][i] - ab_step_ms[0][i]);
    state.counters["ahead_saves_ms"] = bench::Median(saved);
  }
  if (mode == EngineOptions::AttentionMode::kTree && !sampled) {
    absl::StatusOr<StepParts> parts = MeasureStepParts(branches, model::Llama1bShapedConfig().vocab_size);
    if (!parts.ok()) {
      state.SkipWithError(std::string(parts.status().message()).c_str());
      return;
    }
    state.counters["copy_ms"] = parts->copy_ms;
    state.counters["greedy_ms"] = parts->greedy_ms;
    state.counters["greedy_ref_ms"] = parts->greedy_ref_ms;
    state.counters["gpu_greedy_ms"] = parts->gpu_greedy_ms;
    state.counters["gpu_greedy_mismatch"] = static_cast<double>(parts->gpu_greedy_mismatch);
  }
  if (mode == EngineOptions::AttentionMode::kTree && sampled) {
    absl::StatusOr<SampledParts> parts = MeasureSampledParts(branches, model::Llama1bShapedConfig().vocab_size);
    if (!parts.ok()) {
      state.SkipWithError(std::string(parts.status().message()).c_str());
      return;
    }
    state.counters["host_sample_ms"] = parts->host_sample_ms;
    state.counters["gpu_sample_ms"] = parts->gpu_sample_ms;
  }
}

BENCHMARK(BM_Decode)
    ->ArgNames({"mode", "branches", "prefix", "sampled"})
    ->Args({0, 256, 2048, 0})
    ->Args({1, 256, 2048, 0})
    ->Args({2, 256, 2048, 0})
    ->Args({0, 256, 2048, 1})
    ->Args({0, 256, 2048, 2})
    ->Args({0, 1024, 2048, 1})
    ->Args({0, 1024, 2048, 2})
    ->Args({0, 1024, 1024, 0})
    ->Args({0, 1024, 2048, 0})
    ->Args({0, 1024, 4096, 0})
    ->Args({0, 1024, 8192, 0})
    ->Args({0, 1024, 16384, 0})
    ->Args({2, 1024, 16384, 0})
    ->Iterations(Repeats())
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace banyan

BENCHMARK_MAIN();

// Decode throughput of the CUDA backend on a ~1B Llama-shaped model with
// random weights built in memory (no file): hidden 2048, 16 layers, 32 q / 8
// KV heads (head_dim 64), intermediate 8192, vocab 32000, untied LM head.
// For batch B in {1, 64, 256}: a 512-token prompt (2048 in the last rows, the
// tree-search shape of DESIGN.md) is prefilled through the backend, then 128
// decode steps run, one Forward per step with B rows (one
// per branch), logits for every row copied back to the host (the Backend
// contract). Two KV arrangements:
//   shared=1  one prompt forked into B branches: the prompt's pages are one
//             segment every row attends (Banyan's tree), each branch has its
//             own pages for its new tokens.
//   shared=0  B independent copies of the prompt, each in its own pages (what
//             HF transformers' generate does).
// Where the logits go (the Backend contract returns fp32 logits in host memory):
//   logits=2  every row's logits into pinned host memory (what an engine that
//             samples on the host should hand Forward: the copy is one DMA)
//   logits=1  every row's logits into ordinary pageable memory (std::vector)
//   logits=0  no logit rows (the forward pass alone, for the breakdown)
// Counters: tok_per_s = B * steps / seconds of the timed decode steps (host
// clock around Forward, which synchronizes), ms_per_step. Fed tokens are
// random ids (no sampling on the host); the work does not depend on them.
// Compare with bench/peers/hf_generate.py run in the same device session.
//
//   model_cuda_bench --benchmark_counters_tabular=true
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "attention/attention_plan.h"
#include "bench/bench_status.h"
#include "benchmark/benchmark.h"
#include "model/cpu/random_weights.h"
#include "model/cuda/cuda_backend.h"
#include "model/forward.h"
#include "model/model_weights.h"
#include "sdk/base/rng.h"
#include "sdk/gpu/device_buffer.h"
#include "sdk/gpu/device_info.h"

namespace banyan::model {
namespace {

constexpr int kSteps = 128;
constexpr int kWarmupSteps = 2;
constexpr int kPageSize = 16;

// Fills `t` with uniform values of standard deviation `std` (mean `mean`),
// on all cores. Values are never all equal (no zeros to time on).
void FillUniform(HostTensor& t, std::vector<int64_t> shape, float mean, float std, uint64_t seed) {
  t.shape = std::move(shape);
  t.data.resize(static_cast<size_t>(t.NumElements()));
  const unsigned threads = std::max(1u, std::thread::hardware_concurrency());
  const size_t chunk = (t.data.size() + threads - 1) / threads;
  const float half_width = std * std::sqrt(3.0f);
  std::vector<std::thread> pool;
  for (unsigned i = 0; i < threads; ++i) {
    pool.emplace_back([&, i] {
      Rng rng = Rng(seed).Derive(i);
      const size_t end = std::min(t.data.size(), (i + 1) * chunk);
      for (size_t j = i * chunk; j < end; ++j) t.data[j] = mean + rng.Uniform(-half_width, half_width);
    });
  }
  for (auto& th : pool) th.join();
}

ModelWeights RandomWeights(const ModelConfig& c) {
  ModelWeights w;
  w.config = c;
  const int64_t H = c.hidden_size, I = c.intermediate_size, V = c.vocab_size;
  const int64_t q = int64_t{c.num_q_heads} * c.head_dim, kv = int64_t{c.num_kv_heads} * c.head_dim;
  uint64_t seed = 1;
  auto linear = [&](const std::string& name, int64_t out, int64_t in) {
    FillUniform(w.tensors[name], {out, in}, 0.0f, 1.0f / std::sqrt(static_cast<float>(in)), seed++);
  };
  auto norm = [&](const std::string& name) { FillUniform(w.tensors[name], {H}, 1.0f, 0.1f, seed++); };
  FillUniform(w.tensors["model.embed_tokens.weight"], {V, H}, 0.0f, 1.0f, seed++);
  norm("model.norm.weight");
  linear("lm_head.weight", V, H);
  for (int32_t i = 0; i < c.num_layers; ++i) {
    const std::string p = absl::StrCat("model.layers.", i, ".");
    norm(p + "input_layernorm.weight");
    norm(p + "post_attention_layernorm.weight");
    linear(p + "self_attn.q_proj.weight", q, H);
    linear(p + "self_attn.k_proj.weight", kv, H);
    linear(p + "self_attn.v_proj.weight", kv, H);
    linear(p + "self_attn.o_proj.weight", H, q);
    linear(p + "mlp.gate_proj.weight", I, H);
    linear(p + "mlp.up_proj.weight", I, H);
    linear(p + "mlp.down_proj.weight", H, I);
  }
  return w;
}

// The backend, built once for every benchmark of the run.
// BANYAN_BENCH_ACTIVATIONS=split selects split-bf16 activations,
// BANYAN_BENCH_WEIGHTS=split split-bf16 weights.
absl::StatusOr<Backend*> SharedBackend() {
  static absl::StatusOr<std::unique_ptr<Backend>>* backend = [] {
    const ModelWeights w = RandomWeights(Llama1bShapedConfig());
    const char* mode = std::getenv("BANYAN_BENCH_ACTIVATIONS");
    const bool split = mode != nullptr && std::string_view(mode) == "split";
    const char* weights_mode = std::getenv("BANYAN_BENCH_WEIGHTS");
    const bool split_weights = weights_mode != nullptr && std::string_view(weights_mode) == "split";
    return new absl::StatusOr<std::unique_ptr<Backend>>(
        CreateCudaBackend(w, {.activations = split ? Activations::kSplitBf16 : Activations::kBf16,
                              .weights = split_weights ? Weights::kSplitBf16 : Weights::kBf16}));
  }();
  if (!backend->ok()) return backend->status();
  return backend->value().get();
}

// Appends a segment over `pages` (starting at slot 0) holding `length`
// tokens, read by `rows` with visible lengths `limits`.
void AddSegment(attention::AttentionPlan& plan, const std::vector<int32_t>& pages, int32_t length,
                const std::vector<int32_t>& rows, const std::vector<int32_t>& limits) {
  const int32_t used = (length + plan.page_size - 1) / plan.page_size;
  plan.page_indices.insert(plan.page_indices.end(), pages.begin(), pages.begin() + used);
  plan.segment_page_indptr.push_back(static_cast<int32_t>(plan.page_indices.size()));
  plan.segment_first_slot.push_back(0);
  plan.segment_length.push_back(length);
  plan.entry_query.insert(plan.entry_query.end(), rows.begin(), rows.end());
  plan.entry_kv_limit.insert(plan.entry_kv_limit.end(), limits.begin(), limits.end());
  plan.segment_entry_indptr.push_back(static_cast<int32_t>(plan.entry_query.size()));
}

struct Batch {
  std::vector<int32_t> tokens, positions, pages, slots, logit_rows;
  attention::AttentionPlan plan;
  ForwardBatch view() const {
    ForwardBatch b;
    b.tokens = tokens;
    b.positions = positions;
    b.kv_pages = pages;
    b.kv_slots = slots;
    b.plan = &plan;
    b.logit_rows = logit_rows;
    return b;
  }
};

// Causal prefill of one prompt stored in `pages`; logits for the last row.
Batch PrefillBatch(const std::vector<int32_t>& prompt, const std::vector<int32_t>& pages) {
  Batch b;
  const int32_t n = static_cast<int32_t>(prompt.size());
  b.tokens = prompt;
  b.plan.page_size = kPageSize;
  b.plan.num_queries = n;
  std::vector<int32_t> rows(n), limits(n);
  for (int32_t t = 0; t < n; ++t) {
    b.positions.push_back(t);
    b.pages.push_back(pages[t / kPageSize]);
    b.slots.push_back(t % kPageSize);
    rows[t] = t;
    limits[t] = t + 1;
  }
  AddSegment(b.plan, pages, n, rows, limits);
  attention::FillQueryEntries(b.plan);
  b.logit_rows = {n - 1};
  return b;
}

void BM_Decode(benchmark::State& state) {
  if (!gpu::HasGpu()) {
    state.SkipWithError("no GPU");
    return;
  }
  const int32_t B = static_cast<int32_t>(state.range(0));
  const bool shared = state.range(1) != 0;
  const int64_t logits_mode = state.range(2);
  const int32_t prompt_len = static_cast<int32_t>(state.range(3));  // multiple of kPageSize
  auto backend_or = SharedBackend();
  BENCH_OK(backend_or.status());
  Backend& backend = **backend_or;
  const ModelConfig& c = backend.config();
  const int32_t total_steps = kWarmupSteps + kSteps;
  const int32_t prompt_pages = prompt_len / kPageSize;
  const int32_t own_pages = (total_steps + kPageSize - 1) / kPageSize;
  // shared: the prompt's pages once + B private runs; independent: B full sequences.
  const int64_t num_pages = shared ? prompt_pages + int64_t{B} * own_pages
                                   : int64_t{B} * ((prompt_len + total_steps + kPageSize - 1) / kPageSize);
  KvCache kv;
  kv.layout = KvLayoutFor(c, num_pages, kPageSize, DType::kBf16);
  kv.dtype = DType::kBf16;
  auto pool = gpu::DeviceBuffer::Allocate(kv.layout.TotalBytes());
  BENCH_OK(pool.status());
  kv.data = pool->data();

  Rng rng(42);
  std::vector<int32_t> prompt(prompt_len);
  for (int32_t& t : prompt) t = static_cast<int32_t>(rng.UniformInt(c.vocab_size));
  const size_t logit_count = static_cast<size_t>(B) * c.vocab_size;
  std::vector<float> pageable(logits_mode == 1 ? logit_count : 0);
  auto pinned = gpu::PinnedBuffer::Allocate(logits_mode == 2 ? logit_count * 4 : 16);
  BENCH_OK(pinned.status());
  const absl::Span<float> logits = logits_mode == 2   ? absl::MakeSpan(pinned->As<float>(), logit_count)
                                   : logits_mode == 1 ? absl::MakeSpan(pageable)
                                                      : absl::Span<float>();
  std::vector<float> prefill_logits(c.vocab_size);
  // Page lists: seq_pages[b] = every page branch/sequence b writes.
  std::vector<int32_t> prompt_page_ids(prompt_pages);
  std::vector<std::vector<int32_t>> seq_pages(B);
  int32_t next_page = 0;
  if (shared) {
    for (int32_t& p : prompt_page_ids) p = next_page++;
    for (auto& pages : seq_pages) {
      for (int32_t i = 0; i < own_pages; ++i) pages.push_back(next_page++);
    }
    const Batch pre = PrefillBatch(prompt, prompt_page_ids);
    BENCH_OK(backend.Forward(pre.view(), kv, absl::MakeSpan(prefill_logits)));
  } else {
    const int32_t pages_per_seq = static_cast<int32_t>(num_pages / B);
    for (int32_t b = 0; b < B; ++b) {
      for (int32_t i = 0; i < pages_per_seq; ++i) seq_pages[b].push_back(next_page++);
      const Batch pre = PrefillBatch(prompt, seq_pages[b]);
      BENCH_OK(backend.Forward(pre.view(), kv, absl::MakeSpan(prefill_logits)));
    }
  }

  // One decode step: every branch appends one token at position prompt_len + step.
  auto decode_batch = [&](int32_t step) {
    Batch d;
    d.plan.page_size = kPageSize;
    d.plan.num_queries = B;
    const int32_t pos = prompt_len + step;
    std::vector<int32_t> all_rows(B), prompt_limits(B, prompt_len);
    for (int32_t b = 0; b < B; ++b) {
      all_rows[b] = b;
      d.tokens.push_back(static_cast<int32_t>(rng.UniformInt(c.vocab_size)));
      d.positions.push_back(pos);
      if (logits_mode != 0) d.logit_rows.push_back(b);
      if (shared) {
        d.pages.push_back(seq_pages[b][step / kPageSize]);
        d.slots.push_back(step % kPageSize);
      } else {
        d.pages.push_back(seq_pages[b][pos / kPageSize]);
        d.slots.push_back(pos % kPageSize);
      }
    }
    if (shared) {
      AddSegment(d.plan, prompt_page_ids, prompt_len, all_rows, prompt_limits);
      for (int32_t b = 0; b < B; ++b) AddSegment(d.plan, seq_pages[b], step + 1, {b}, {step + 1});
    } else {
      for (int32_t b = 0; b < B; ++b) AddSegment(d.plan, seq_pages[b], pos + 1, {b}, {pos + 1});
    }
    attention::FillQueryEntries(d.plan);
    return d;
  };

  for (auto _ : state) {
    double seconds = 0;
    for (int32_t step = 0; step < total_steps; ++step) {
      const Batch d = decode_batch(step);  // host planning stays outside the timed region
      const auto start = std::chrono::steady_clock::now();
      BENCH_OK(backend.Forward(d.view(), kv, logits));
      const auto stop = std::chrono::steady_clock::now();
      if (step >= kWarmupSteps) seconds += std::chrono::duration<double>(stop - start).count();
    }
    state.SetIterationTime(seconds);
    state.counters["tok_per_s"] = static_cast<double>(B) * kSteps / seconds;
    state.counters["ms_per_step"] = seconds * 1e3 / kSteps;
  }
  state.counters["batch"] = B;
  state.counters["shared"] = shared;
  state.counters["logits"] = static_cast<double>(logits_mode);
  state.counters["prompt"] = prompt_len;
  state.counters["logit_ok"] = logits.empty() || (std::isfinite(logits[0]) && std::isfinite(logits.back()));
}

BENCHMARK(BM_Decode)
    ->ArgNames({"batch", "shared", "logits", "prompt"})
    ->ArgsProduct({{1, 64, 256}, {1, 0}, {2}, {512}})
    ->Args({1, 1, 1, 512})
    ->Args({64, 1, 1, 512})
    ->Args({256, 1, 1, 512})
    ->Args({256, 1, 0, 512})
    ->Args({256, 1, 2, 2048})
    ->Args({256, 0, 2, 2048})
    ->Iterations(1)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace banyan::model

BENCHMARK_MAIN();

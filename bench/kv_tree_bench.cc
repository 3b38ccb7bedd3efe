// kv_tree CPU benchmarks (Google Benchmark). Figures and the command line are
// in bench/RESULTS.md, section "kv_tree (CPU)".
//
//   BM_DecodePlan/<flatten>      plan for 4,096 active leaves of a 3-level tree
//                                of 100,000 nodes (prompt 2048 tokens -> 64
//                                problems of 512 -> 99,935 samples of 64); 64
//                                active samples per problem. flatten=1 flattens
//                                the 64 problem nodes (a cost-model hook).
//   BM_DecodeStepAppend          one token appended to each of the 4,096 active
//                                leaves (in place), truncated back every 16 steps.
//   BM_ForkAppendRelease/<base>/<layout>
//                                fork a branch, append one new token (a new
//                                child node), release it; the pool stays full so
//                                every iteration also evicts an LRU leaf.
//                                base = tokens of the forked node (96: page
//                                aligned, 100: partly filled page, copied on
//                                write); layout 0 = 1 layer x 1 head x dim 1
//                                fp32, 1 = SmolLM2-135M (30 layers x 3 KV heads
//                                x dim 64, bf16).
//   BM_ForkAppendReleaseHit      the same, appending a token whose child is
//                                cached (a reuse: no page, no node).
#include <cstdint>
#include <memory>
#include <numeric>
#include <vector>

#include "benchmark/benchmark.h"
#include "kv_tree/kv_tree.h"

namespace banyan::kv_tree {
namespace {

std::unique_ptr<KvTree> MakeTree(KvPoolConfig config, int64_t pages) {
  const size_t per_page = static_cast<size_t>(config.num_layers) * 2 * config.num_kv_heads *
                          config.head_dim * config.page_size * DTypeSize(config.dtype);
  config.byte_budget = per_page * pages;
  return KvTree::Create(HostKvStorage::Create(config).value()).value();
}

std::vector<int32_t> Tokens(int32_t first, int32_t n) {
  std::vector<int32_t> t(n);
  std::iota(t.begin(), t.end(), first);
  return t;
}

struct ThreeLevelTree {
  std::unique_ptr<KvTree> tree;
  std::vector<Branch> active;
  int64_t nodes = 0;
};

ThreeLevelTree BuildThreeLevelTree() {
  constexpr int32_t kProblems = 64, kActivePerProblem = 64, kNodes = 100000;
  constexpr int32_t kPrompt = 2048, kProblem = 512, kSample = 64;
  const int32_t samples = kNodes - 1 - kProblems;
  const int64_t pages = 2 + kPrompt / 16 + int64_t{kProblems} * (kProblem / 16 + 2) +
                        int64_t{samples} * (kSample / 16 + 2);
  ThreeLevelTree out;
  out.tree = MakeTree(KvPoolConfig{DType::kF32, 1, 1, 1, 16, 0}, pages);
  KvTree& tree = *out.tree;
  const Branch prompt = tree.Insert(KvNamespace{"bench", ""}, Tokens(0, kPrompt)).value().branch;
  int32_t made = 0;
  for (int32_t q = 0; q < kProblems; ++q) {
    const Branch problem = tree.Fork(prompt).value();
    (void)tree.Append(problem, Tokens(1000000 + q * kProblem, kProblem)).value();
    const int32_t here = samples / kProblems + (q < samples % kProblems ? 1 : 0);
    for (int32_t s = 0; s < here; ++s, ++made) {
      const Branch sample = tree.Fork(problem).value();
      std::vector<int32_t> t = Tokens(2000000 + s * kSample, kSample);
      (void)tree.Append(sample, t).value();
      if (s < kActivePerProblem) {
        out.active.push_back(sample);
      } else {
        (void)tree.Release(sample);
      }
    }
  }
  out.nodes = tree.Stats().nodes;
  return out;
}

ThreeLevelTree& SharedTree() {
  static ThreeLevelTree* tree = new ThreeLevelTree(BuildThreeLevelTree());
  return *tree;
}

void BM_DecodePlan(benchmark::State& state) {
  ThreeLevelTree& t = SharedTree();
  PlanOptions options;
  if (state.range(0) == 1) {
    options.flatten = [](const NodeShareInfo& info) { return info.length <= 512 && info.num_readers <= 64; };
  }
  attention::AttentionPlan plan;
  for (auto _ : state) {
    if (!t.tree->BuildDecodePlan(t.active, options, &plan).ok()) state.SkipWithError("plan failed");
    benchmark::DoNotOptimize(plan.query_entries.data());
  }
  state.counters["nodes"] = static_cast<double>(t.nodes);
  state.counters["leaves"] = static_cast<double>(t.active.size());
  state.counters["segments"] = plan.num_segments();
  state.counters["entries"] = plan.num_entries();
  state.counters["pages"] = static_cast<double>(plan.page_indices.size());
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(t.active.size()));
}
BENCHMARK(BM_DecodePlan)->Arg(0)->Arg(1)->Unit(benchmark::kMicrosecond);

void BM_DecodeStepAppend(benchmark::State& state) {
  ThreeLevelTree& t = SharedTree();
  int64_t step = 0;
  const int32_t token[1] = {7};
  for (auto _ : state) {
    for (Branch b : t.active) {
      if (!t.tree->Append(b, token).ok()) state.SkipWithError("append failed");
    }
    if (++step % 16 == 0) {
      for (Branch b : t.active) {
        if (!t.tree->Truncate(b, 2048 + 512 + 64).ok()) state.SkipWithError("truncate failed");
      }
    }
  }
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(t.active.size()));
}
BENCHMARK(BM_DecodeStepAppend)->Unit(benchmark::kMicrosecond);

// Long generations: 64 branches forked from a 2,048-token prompt each decode
// `range(0)` tokens of their own one append at a time (then are released). The time per
// append should not grow with the leaf's length (a leaf's token list grows
// geometrically; an exact reserve per append made this quadratic).
void BM_DecodeAppendLongLeaves(benchmark::State& state) {
  const int32_t length = static_cast<int32_t>(state.range(0));
  constexpr int32_t kBranches = 64;
  std::unique_ptr<KvTree> tree =
      MakeTree(KvPoolConfig{DType::kF32, 1, 1, 1, 16, 0}, (2048 + int64_t{kBranches} * (length + 16)) / 16 + 16);
  const Branch prompt = tree->Insert(KvNamespace{"bench", ""}, Tokens(0, 2048)).value().branch;
  for (auto _ : state) {
    std::vector<Branch> leaves = tree->Fork(prompt, kBranches).value();
    for (int32_t step = 0; step < length; ++step) {
      for (int32_t i = 0; i < kBranches; ++i) {  // tokens of its own: no leaf is shared
        const int32_t token[1] = {100000 + i};
        if (!tree->Append(leaves[i], token).ok()) state.SkipWithError("append failed");
      }
    }
    for (Branch b : leaves) (void)tree->Release(b);
  }
  state.SetItemsProcessed(state.iterations() * int64_t{kBranches} * length);
}
BENCHMARK(BM_DecodeAppendLongLeaves)->Arg(128)->Arg(2048)->Unit(benchmark::kMillisecond);

KvPoolConfig Layout(int64_t which) {
  if (which == 0) return KvPoolConfig{DType::kF32, 1, 1, 1, 16, 0};
  return KvPoolConfig{DType::kBf16, 30, 3, 64, 16, 0};
}

void BM_ForkAppendRelease(benchmark::State& state) {
  const int32_t base_len = static_cast<int32_t>(state.range(0));
  auto tree = MakeTree(Layout(state.range(1)), 256);
  const Branch base = tree->Insert(KvNamespace{"bench", ""}, Tokens(0, base_len)).value().branch;
  int32_t token = 1 << 20;
  for (auto _ : state) {
    const Branch f = tree->Fork(base).value();
    const int32_t t[1] = {token++};
    if (!tree->Append(f, t).ok()) state.SkipWithError("append failed");
    if (!tree->Release(f).ok()) state.SkipWithError("release failed");
  }
  const KvTreeStats s = tree->Stats();
  state.counters["evicted"] = static_cast<double>(s.evicted_nodes);
  state.counters["copied"] = static_cast<double>(s.copied_pages);
  state.counters["page_bytes"] = static_cast<double>(s.bytes_per_page);
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_ForkAppendRelease)
    ->Args({96, 0})
    ->Args({100, 0})
    ->Args({96, 1})
    ->Args({100, 1})
    ->Unit(benchmark::kNanosecond);

void BM_ForkAppendReleaseHit(benchmark::State& state) {
  auto tree = MakeTree(Layout(0), 256);
  const Branch base = tree->Insert(KvNamespace{"bench", ""}, Tokens(0, 100)).value().branch;
  int32_t i = 0;
  for (auto _ : state) {
    const Branch f = tree->Fork(base).value();
    const int32_t t[1] = {1 << 20 | (i++ & 63)};
    if (!tree->Append(f, t).ok()) state.SkipWithError("append failed");
    if (!tree->Release(f).ok()) state.SkipWithError("release failed");
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_ForkAppendReleaseHit)->Unit(benchmark::kNanosecond);

}  // namespace
}  // namespace banyan::kv_tree

BENCHMARK_MAIN();

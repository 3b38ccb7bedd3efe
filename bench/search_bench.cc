// The search layer's own overhead at 256 active branches, on the CPU, with the
// engine over the deterministic counting backend (sdk/engine/testing), and the
// Lua hook call overhead. Figures and the command line are in bench/RESULTS.md,
// section "search (CPU)".
//
//   BM_DecodeStep/256          one decode step of 256 forked branches (GenerateMany
//                              of 32 greedy tokens, time / 32): the yardstick
//   BM_Fork/256                Engine::Fork(root, 256) + Release of the 256
//   BM_EngineExpand/256        Fork 256 + GenerateMany(1 token) + Release: what an
//                              expansion costs the engine alone
//   BM_SearchExpand/256        SearchTree::ExpandSampled(root, 256, 1 token) + Prune
//                              of the 256: the same expansion through the search
//                              layer (bookkeeping, trace, seeds, budgets)
//   BM_PlanUpdate/256          rank 256 candidates (TopK) + UCT over 256 children
//   BM_LuaSelect/256           a policy select() sorting a 256-node frontier
//   BM_LuaSelectNoText/256     the same without node texts (pass_text = false)
//   BM_LuaSelectTrivial/256    select() returning 1: the cost of passing 256 nodes
//   BM_LuaScore                one trivial score(node) hook call (hook overhead)
//   BM_LuaShouldStop           one trivial should_stop(stats) hook call
#include <memory>
#include <string>
#include <vector>

#include "benchmark/benchmark.h"
#include "scripting/lua_policy.h"
#include "sdk/engine/testing/counting_backend.h"
#include "search/search_tree.h"
#include "search/strategies.h"

namespace banyan::search {
namespace {

constexpr char kPrompt[] = "The search layer benchmark prompt: a shared prefix of 64 bytes.";

Engine& SharedEngine() {
  static Engine* engine = [] {
    EngineOptions eo;
    eo.max_batch = 512;
    return engine::testing::CreateCountingEngine({}, eo).value().release();
  }();
  return *engine;
}

GenerateOptions GreedyTokens(int32_t n) {
  GenerateOptions g;
  g.sampling.temperature = 0;
  g.max_tokens = n;
  g.ignore_eos = true;
  return g;
}

void BM_DecodeStep(benchmark::State& state) {
  Engine& engine = SharedEngine();
  const int32_t n = static_cast<int32_t>(state.range(0));
  constexpr int32_t kSteps = 32;
  BranchId root = engine.NewBranch(Prompt::Text(kPrompt)).value();
  for (auto _ : state) {
    state.PauseTiming();
    std::vector<BranchId> kids = engine.Fork(root, n).value();
    state.ResumeTiming();
    auto results = engine.GenerateMany(kids, GreedyTokens(kSteps));
    state.PauseTiming();
    for (auto& r : results) {
      if (!r.ok()) state.SkipWithError("generate failed");
    }
    for (BranchId b : kids) engine.Release(b).IgnoreError();
    state.ResumeTiming();
  }
  engine.Release(root).IgnoreError();
  state.counters["step"] = benchmark::Counter(static_cast<double>(state.iterations()) * kSteps,
                                              benchmark::Counter::kIsRate |
                                                  benchmark::Counter::kInvert);
}
BENCHMARK(BM_DecodeStep)->Arg(256)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_Fork(benchmark::State& state) {
  Engine& engine = SharedEngine();
  BranchId root = engine.NewBranch(Prompt::Text(kPrompt)).value();
  for (auto _ : state) {
    std::vector<BranchId> kids = engine.Fork(root, static_cast<int32_t>(state.range(0))).value();
    for (BranchId b : kids) engine.Release(b).IgnoreError();
  }
  engine.Release(root).IgnoreError();
}
BENCHMARK(BM_Fork)->Arg(256)->Unit(benchmark::kMicrosecond)->UseRealTime();

void BM_EngineExpand(benchmark::State& state) {
  Engine& engine = SharedEngine();
  BranchId root = engine.NewBranch(Prompt::Text(kPrompt)).value();
  for (auto _ : state) {
    std::vector<BranchId> kids = engine.Fork(root, static_cast<int32_t>(state.range(0))).value();
    auto results = engine.GenerateMany(kids, GreedyTokens(1));
    benchmark::DoNotOptimize(results);
    for (BranchId b : kids) engine.Release(b).IgnoreError();
  }
  engine.Release(root).IgnoreError();
}
BENCHMARK(BM_EngineExpand)->Arg(256)->Unit(benchmark::kMicrosecond)->UseRealTime();

void BM_SearchExpand(benchmark::State& state) {
  Engine& engine = SharedEngine();
  SearchOptions o;
  o.prompt = kPrompt;
  o.sampling.temperature = 0;
  o.step_delimiter = "";
  o.seed = 1;
  const int32_t n = static_cast<int32_t>(state.range(0));
  std::unique_ptr<SearchTree> tree;
  int64_t root = 0;
  int64_t expansions = 0;
  for (auto _ : state) {
    if (expansions++ % 64 == 0) {  // bound the node table's growth
      state.PauseTiming();
      tree.reset();
      tree = std::make_unique<SearchTree>(engine, o, "bench");
      root = tree->CreateRoot().value();
      state.ResumeTiming();
    }
    std::vector<int64_t> kids = tree->ExpandSampled(root, n, 1).value();
    if (static_cast<int32_t>(kids.size()) != n) state.SkipWithError("short expansion");
    for (int64_t k : kids) tree->Prune(k).IgnoreError();
  }
}
BENCHMARK(BM_SearchExpand)->Arg(256)->Unit(benchmark::kMicrosecond)->UseRealTime();

void BM_PlanUpdate(benchmark::State& state) {
  const size_t n = static_cast<size_t>(state.range(0));
  std::vector<double> values(n), sums(n);
  std::vector<int64_t> visits(n);
  for (size_t i = 0; i < n; ++i) {
    values[i] = static_cast<double>((i * 7919) % 1000) / 1000.0;
    sums[i] = values[i] * static_cast<double>(i % 5 + 1);
    visits[i] = static_cast<int64_t>(i % 5 + 1);
  }
  for (auto _ : state) {
    std::vector<size_t> keep = TopK(values, 16);
    benchmark::DoNotOptimize(keep);
    double best = -1;
    size_t arg = 0;
    for (size_t i = 0; i < n; ++i) {
      const double u = Uct(sums[i], visits[i], 3 * static_cast<int64_t>(n), 1.4);
      if (u > best) {
        best = u;
        arg = i;
      }
    }
    benchmark::DoNotOptimize(arg);
  }
}
BENCHMARK(BM_PlanUpdate)->Arg(256)->Unit(benchmark::kMicrosecond);

std::unique_ptr<scripting::LuaPolicy> LoadPolicy(bool pass_text = true) {
  const char* script = R"(
    function score(node) return node.score end
    function should_stop(stats) return stats.iterations > 1000000 end
    function select(frontier)
      local order = {}
      for i = 1, #frontier do order[i] = i end
      table.sort(order, function(a, b)
        local na, nb = frontier[a], frontier[b]
        if na.score ~= nb.score then return na.score > nb.score end
        return na.id < nb.id
      end)
      local keep = {}
      for i = 1, math.min(16, #order) do keep[i] = order[i] end
      return keep
    end
  )";
  scripting::LuaPolicyOptions options;
  options.pass_text = pass_text;
  return scripting::LuaPolicy::Load("bench", script, options).value();
}

std::vector<std::string> g_texts;

std::vector<scripting::NodeView> Frontier(size_t n) {
  g_texts.resize(n);
  std::vector<scripting::NodeView> views(n);
  for (size_t i = 0; i < n; ++i) {
    g_texts[i] = "step " + std::to_string(i) + ": some reasoning text of a typical length\n";
    views[i].id = static_cast<int64_t>(i + 1);
    views[i].parent = 0;
    views[i].text = g_texts[i];
    views[i].token_count = 16;
    views[i].depth = 1;
    views[i].score = static_cast<double>((i * 7919) % 1000) / 1000.0;
  }
  return views;
}

void BM_LuaSelect(benchmark::State& state) {
  auto policy = LoadPolicy();
  const std::vector<scripting::NodeView> frontier = Frontier(static_cast<size_t>(state.range(0)));
  for (auto _ : state) {
    auto keep = policy->Select(frontier);
    if (!keep.ok()) state.SkipWithError("select failed");
    benchmark::DoNotOptimize(keep);
  }
}
BENCHMARK(BM_LuaSelect)->Arg(256)->Unit(benchmark::kMicrosecond);

// The same select() without node texts in the tables (LuaPolicyOptions::pass_text).
void BM_LuaSelectNoText(benchmark::State& state) {
  auto policy = LoadPolicy(false);
  const std::vector<scripting::NodeView> frontier = Frontier(static_cast<size_t>(state.range(0)));
  for (auto _ : state) {
    auto keep = policy->Select(frontier);
    if (!keep.ok()) state.SkipWithError("select failed");
    benchmark::DoNotOptimize(keep);
  }
}
BENCHMARK(BM_LuaSelectNoText)->Arg(256)->Unit(benchmark::kMicrosecond);

// Only the cost of handing 256 nodes to Lua: a select() that returns 1.
void BM_LuaSelectTrivial(benchmark::State& state) {
  auto policy = scripting::LuaPolicy::Load("trivial", "function select(f) return 1 end", {}).value();
  const std::vector<scripting::NodeView> frontier = Frontier(static_cast<size_t>(state.range(0)));
  for (auto _ : state) {
    auto keep = policy->Select(frontier);
    if (!keep.ok()) state.SkipWithError("select failed");
    benchmark::DoNotOptimize(keep);
  }
}
BENCHMARK(BM_LuaSelectTrivial)->Arg(256)->Unit(benchmark::kMicrosecond);

void BM_LuaScore(benchmark::State& state) {
  auto policy = LoadPolicy();
  const std::vector<scripting::NodeView> node = Frontier(1);
  for (auto _ : state) {
    auto v = policy->Score(node[0]);
    if (!v.ok()) state.SkipWithError("score failed");
    benchmark::DoNotOptimize(v);
  }
}
BENCHMARK(BM_LuaScore)->Unit(benchmark::kMicrosecond);

void BM_LuaShouldStop(benchmark::State& state) {
  auto policy = LoadPolicy();
  scripting::SearchStats stats;
  for (auto _ : state) {
    auto v = policy->ShouldStop(stats);
    if (!v.ok()) state.SkipWithError("should_stop failed");
    benchmark::DoNotOptimize(v);
  }
}
BENCHMARK(BM_LuaShouldStop)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace banyan::search

BENCHMARK_MAIN();

// Lua policy hook overhead: what one call of score() or select() costs the search layer, over a
// frontier of 256 nodes, for trivial hooks (pure crossing cost: building the node tables,
// the protected call, the budget hook, checking the result) and for the example policies.
//
//   build-lua/bench/lua_policy_bench --benchmark_repetitions=5 --benchmark_report_aggregates_only
//
// Counters: us_per_call = microseconds per hook call (score: per node; select: per frontier).
#include <benchmark/benchmark.h>

#include <string>
#include <vector>

#include "scripting/lua_policy.h"
#include "sdk/base/rng.h"

namespace banyan::scripting {
namespace {

constexpr int kFrontier = 256;

std::string PolicyDir() {
  const std::string file = __FILE__;
  return file.substr(0, file.find_last_of('/')) + "/../scripting/policies/";
}

struct Frontier {
  std::vector<std::string> texts;
  std::vector<NodeView> nodes;
};

Frontier MakeFrontier(size_t text_bytes) {
  Frontier f;
  Rng rng(42);
  const char alphabet[] = "abcdefghij klmnopqrst uvwxyz 0123456789.";
  for (int i = 0; i < kFrontier; ++i) {
    std::string text(text_bytes, ' ');
    for (char& c : text) c = alphabet[rng.UniformInt(sizeof(alphabet) - 1)];
    f.texts.push_back(std::move(text));
  }
  for (int i = 0; i < kFrontier; ++i) {
    NodeView v;
    v.id = i + 1;
    v.parent = 0;
    v.text = f.texts[i];
    v.token_count = static_cast<int64_t>(text_bytes / 4);
    v.depth = 3;
    v.score = rng.UniformDouble();
    v.visits = 1 + static_cast<int64_t>(rng.UniformInt(50));
    f.nodes.push_back(v);
  }
  return f;
}

PolicyCallbacks Callbacks(const Frontier& f) {
  PolicyCallbacks cb;
  cb.model_score = [&f](int64_t id) -> absl::StatusOr<double> {  // real work: a character count
    const std::string& t = f.texts.at(static_cast<size_t>(id - 1));
    size_t digits = 0;
    for (char c : t) digits += (c >= '0' && c <= '9');
    return static_cast<double>(digits) / static_cast<double>(t.size());
  };
  return cb;
}

std::unique_ptr<LuaPolicy> LoadOrDie(benchmark::State& state, const std::string& name,
                                     const std::string& inline_script, const Frontier& f,
                                     bool pass_text) {
  LuaPolicyOptions options;
  options.pass_text = pass_text;
  absl::StatusOr<std::unique_ptr<LuaPolicy>> policy =
      inline_script.empty() ? LuaPolicy::LoadFile(PolicyDir() + name, options, Callbacks(f))
                            : LuaPolicy::Load(name, inline_script, options, Callbacks(f));
  if (!policy.ok()) {
    state.SkipWithError(std::string(policy.status().message()).c_str());
    return nullptr;
  }
  return std::move(policy).value();
}

constexpr const char* kTrivial = R"lua(
  function score(node) return node.score * 0.5 + node.visits end
  function select(frontier) return 1 end
)lua";

void RunScore(benchmark::State& state, const std::string& name, const std::string& script) {
  const Frontier f = MakeFrontier(static_cast<size_t>(state.range(0)));
  auto policy = LoadOrDie(state, name, script, f, state.range(1) != 0);
  if (policy == nullptr) return;
  double sum = 0;
  for (auto _ : state) {
    for (const NodeView& node : f.nodes) {
      absl::StatusOr<double> s = policy->Score(node);
      if (!s.ok()) {
        state.SkipWithError(std::string(s.status().message()).c_str());
        return;
      }
      sum += *s;
    }
  }
  benchmark::DoNotOptimize(sum);
  state.counters["us_per_call"] = benchmark::Counter(
      kFrontier * 1e-6, benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}

void RunSelect(benchmark::State& state, const std::string& name, const std::string& script) {
  const Frontier f = MakeFrontier(static_cast<size_t>(state.range(0)));
  auto policy = LoadOrDie(state, name, script, f, state.range(1) != 0);
  if (policy == nullptr) return;
  size_t picked = 0;
  for (auto _ : state) {
    absl::StatusOr<std::vector<size_t>> chosen = policy->Select(f.nodes);
    if (!chosen.ok()) {
      state.SkipWithError(std::string(chosen.status().message()).c_str());
      return;
    }
    picked += chosen->front();
  }
  benchmark::DoNotOptimize(picked);
  state.counters["us_per_call"] = benchmark::Counter(
      1e-6, benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}

void BM_ScoreTrivial(benchmark::State& state) { RunScore(state, "trivial.lua", kTrivial); }
void BM_ScoreTotBfs(benchmark::State& state) { RunScore(state, "tot_bfs.lua", ""); }
void BM_SelectTrivial(benchmark::State& state) { RunSelect(state, "trivial.lua", kTrivial); }
void BM_SelectTotBfs(benchmark::State& state) { RunSelect(state, "tot_bfs.lua", ""); }
void BM_SelectMcts(benchmark::State& state) { RunSelect(state, "mcts.lua", ""); }

// Args: {text bytes per node, pass the text to Lua (1) or not (0)}.
#define BANYAN_LUA_ARGS ArgNames({"text", "pass_text"})->Args({64, 1})->Args({1024, 1})->Args({1024, 0})
BENCHMARK(BM_ScoreTrivial)->BANYAN_LUA_ARGS;
BENCHMARK(BM_ScoreTotBfs)->BANYAN_LUA_ARGS;
BENCHMARK(BM_SelectTrivial)->BANYAN_LUA_ARGS;
BENCHMARK(BM_SelectTotBfs)->BANYAN_LUA_ARGS;
BENCHMARK(BM_SelectMcts)->BANYAN_LUA_ARGS;

}  // namespace
}  // namespace banyan::scripting

BENCHMARK_MAIN();

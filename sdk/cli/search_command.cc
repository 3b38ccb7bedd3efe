// `banyan search`: runs one search strategy (search/strategy.h) on the engine
// and prints the answer, the tree's shape and the cost.
//
//   banyan search --strategy self-consistency|tot-bfs|tot-dfs|mcts|best-of-n|beam
//       --prompt TEXT [--policy FILE.lua] [--n N] [--max-tokens M] [--seed S]
//       [--model PATH] [--device D] [--trace FILE] [--json]
//       [--temperature T] [--top-k K] [--depth D] [--beam W] [--iterations I]
//       [--evaluation none|model-value|model-vote|policy] [--threshold V]
//       [--answer-pattern RE2] [--weighted] [--wave W] [--delimiter TEXT]
//       [--budget-tokens T] [--budget-branches B] [--budget-seconds S] [--raw]
//
// --max-tokens is the most tokens per sample (self-consistency, best-of-n) or
// per step (tree searches); the --budget-* flags cap the whole search. The
// prompt becomes one user turn of the model's chat template unless --raw (or
// the model has none). With --policy the Lua script's hooks drive the search;
// `--evaluation policy` values nodes with its score(). --trace writes the
// trace: JSON when FILE ends in .json, binary protobuf otherwise.
// `banyan search --replay FILE [--model PATH] [--device D] [--policy FILE.lua]`
// runs the traced search again from the trace's config and checks that every
// decision is the same (kFailedPrecondition naming the first difference).
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "banyan/engine.h"
#include "banyan/status_macros.h"
#include "scripting/lua_policy.h"
#include "sdk/cli/args.h"
#include "sdk/cli/command.h"
#include "search/policy_binding.h"
#include "search/strategy.h"

namespace banyan::cli {
namespace {

absl::StatusOr<search::Evaluation> ParseEvaluation(const std::string& name) {
  if (name == "none") return search::Evaluation::kNone;
  if (name == "model-value") return search::Evaluation::kModelValue;
  if (name == "model-vote") return search::Evaluation::kModelVote;
  if (name == "policy") return search::Evaluation::kPolicy;
  return absl::InvalidArgumentError(absl::StrCat(
      "--evaluation: unknown '", name, "' (none, model-value, model-vote, policy)"));
}

absl::StatusOr<int32_t> GetInt32(const Args& args, std::string_view name, int64_t fallback,
                                 int64_t min) {
  BANYAN_ASSIGN_OR_RETURN(int64_t v, args.GetInt(name, fallback));
  if (v < min || v > (int64_t{1} << 30)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", std::string(name), " must be in [", min, ", 2^30], got ", v));
  }
  return static_cast<int32_t>(v);
}

void PrintText(const search::SearchResult& r) {
  std::cout << "answer: " << r.answer << "\n";
  if (!r.best_text.empty() && r.best_text != r.answer) std::cout << "best:   " << r.best_text << "\n";
  if (r.votes.empty()) std::cout << absl::StrFormat("value:  %.3f\n", r.best_value);
  if (!r.votes.empty()) {
    std::cout << "votes: ";
    for (const search::VoteEntry& v : r.votes) {
      std::cout << absl::StrFormat(" %s x%d (%.3f)", v.answer, v.count, v.weight);
    }
    std::cout << "\n";
  }
  std::vector<int64_t> width(static_cast<size_t>(r.max_depth) + 1, 0);
  for (const auto& n : r.trace.nodes()) ++width[static_cast<size_t>(n.depth())];
  std::cout << absl::StrFormat("tree:   %d nodes, depth %d, %d leaves; nodes per depth: %s\n",
                               r.nodes, r.max_depth, r.leaves, absl::StrJoin(width, " "));
  const search::SearchCost& c = r.cost;
  std::cout << absl::StrFormat(
      "cost:   %d tokens generated, %d scored, %d branches, %d generate / %d score requests, "
      "%d policy calls, %.3f s\n",
      c.tokens_generated, c.tokens_scored, c.branches_created, c.generate_calls, c.score_calls,
      c.policy_calls, c.wall_seconds);
  std::cout << "stop:   " << r.stop_reason << "\n";
}

absl::StatusOr<std::unique_ptr<Engine>> MakeEngine(const Args& args) {
  EngineOptions eo;
  eo.model_path = args.GetString("model");
  eo.device = args.GetString("device", "auto");
  BANYAN_ASSIGN_OR_RETURN(const int64_t threads, args.GetInt("threads", 0));
  eo.threads = static_cast<int32_t>(threads);
  return Engine::Create(eo);
}

// --replay FILE: runs the search a trace recorded again and compares decisions.
absl::Status Replay(const Args& args) {
  BANYAN_ASSIGN_OR_RETURN(proto::SearchTrace trace, search::ReadTrace(args.GetString("replay")));
  BANYAN_ASSIGN_OR_RETURN(search::StrategyKind kind, search::StrategyFromConfig(trace.config()));
  BANYAN_ASSIGN_OR_RETURN(search::SearchOptions o, search::OptionsFromConfig(trace.config()));
  std::unique_ptr<search::BoundPolicy> policy;
  const std::string policy_path = args.GetString("policy", trace.config().policy());
  if (!policy_path.empty()) {
    scripting::LuaPolicyOptions lua;
    lua.limits.random_seed = o.seed;
    BANYAN_ASSIGN_OR_RETURN(policy, search::BoundPolicy::LoadFile(policy_path, lua));
    o.policy = policy.get();
  }
  BANYAN_ASSIGN_OR_RETURN(std::unique_ptr<Engine> engine, MakeEngine(args));
  BANYAN_ASSIGN_OR_RETURN(search::SearchResult r, search::CreateStrategy(kind)->Run(*engine, o));
  BANYAN_RETURN_IF_ERROR(search::CompareDecisions(trace, r.trace));
  std::cout << "replay: " << trace.events_size() << " decisions of " << search::StrategyName(kind)
            << " replayed identically; answer: " << r.answer << "\n";
  return absl::OkStatus();
}

}  // namespace

absl::Status RunSearch(const std::vector<std::string>& argv) {
  BANYAN_ASSIGN_OR_RETURN(
      Args args,
      ParseFlags("search", argv));
  if (args.Has("replay")) return Replay(args);
  if (!args.Has("prompt")) return absl::InvalidArgumentError("--prompt is required");
  BANYAN_ASSIGN_OR_RETURN(search::StrategyKind kind,
                          search::ParseStrategyKind(args.GetString("strategy", "self-consistency")));
  search::SearchOptions o;
  BANYAN_ASSIGN_OR_RETURN(o.n, GetInt32(args, "n", 8, 1));
  BANYAN_ASSIGN_OR_RETURN(const int32_t max_tokens, GetInt32(args, "max-tokens", 64, 1));
  o.sample_tokens = max_tokens;
  o.step_tokens = max_tokens;
  BANYAN_ASSIGN_OR_RETURN(const int64_t seed, args.GetInt("seed", 0));
  o.seed = static_cast<uint64_t>(seed);
  BANYAN_ASSIGN_OR_RETURN(const double temperature, args.GetDouble("temperature", 0.8));
  o.sampling.temperature = static_cast<float>(temperature);
  BANYAN_ASSIGN_OR_RETURN(o.sampling.top_k, GetInt32(args, "top-k", 0, 0));
  BANYAN_ASSIGN_OR_RETURN(o.max_depth, GetInt32(args, "depth", 3, 1));
  BANYAN_ASSIGN_OR_RETURN(o.beam_width, GetInt32(args, "beam", 2, 1));
  BANYAN_ASSIGN_OR_RETURN(o.iterations, GetInt32(args, "iterations", 8, 1));
  BANYAN_ASSIGN_OR_RETURN(o.wave_size, GetInt32(args, "wave", 0, 0));
  BANYAN_ASSIGN_OR_RETURN(o.value_threshold, args.GetDouble("threshold", 0.5));
  BANYAN_ASSIGN_OR_RETURN(o.budget.max_tokens, args.GetInt("budget-tokens", 0));
  BANYAN_ASSIGN_OR_RETURN(o.budget.max_branches, args.GetInt("budget-branches", 0));
  BANYAN_ASSIGN_OR_RETURN(o.budget.max_seconds, args.GetDouble("budget-seconds", 0));
  o.answer_pattern = args.GetString("answer-pattern");
  o.weighted_vote = args.GetBool("weighted");
  if (args.Has("delimiter")) o.step_delimiter = args.GetString("delimiter");
  BANYAN_ASSIGN_OR_RETURN(
      o.evaluation,
      ParseEvaluation(args.GetString("evaluation", args.Has("policy") ? "policy" : "model-value")));

  std::unique_ptr<search::BoundPolicy> policy;
  if (args.Has("policy")) {
    scripting::LuaPolicyOptions lua;
    lua.limits.random_seed = o.seed;
    BANYAN_ASSIGN_OR_RETURN(policy, search::BoundPolicy::LoadFile(args.GetString("policy"), lua));
    o.policy = policy.get();
    if (o.evaluation == search::Evaluation::kPolicy && !policy->lua().has_score()) {
      o.evaluation = search::Evaluation::kModelValue;
    }
  }

  BANYAN_ASSIGN_OR_RETURN(std::unique_ptr<Engine> engine, MakeEngine(args));
  o.prompt = args.GetString("prompt");
  if (!args.GetBool("raw")) {
    const ChatMessage turn{"user", o.prompt};
    absl::StatusOr<std::string> chat = engine->ApplyChatTemplate({&turn, 1}, true);
    if (chat.ok()) o.prompt = *chat;
  }

  std::unique_ptr<search::Strategy> strategy = search::CreateStrategy(kind);
  BANYAN_ASSIGN_OR_RETURN(search::SearchResult r, strategy->Run(*engine, o));
  if (args.Has("trace")) BANYAN_RETURN_IF_ERROR(search::WriteTrace(r.trace, args.GetString("trace")));
  if (args.GetBool("json")) {
    proto::SearchTrace summary = r.trace;
    summary.clear_events();
    summary.clear_nodes();
    BANYAN_ASSIGN_OR_RETURN(std::string json, search::TraceToJson(summary));
    std::cout << json;
    return absl::OkStatus();
  }
  std::cout << "strategy: " << search::StrategyName(kind)
            << (policy ? absl::StrCat(" (policy ", policy->name(), ")") : std::string()) << "\n";
  PrintText(r);
  return absl::OkStatus();
}

}  // namespace banyan::cli

#include "sdk/cli/command.h"

#include <algorithm>
#include <iostream>
#include <set>

#include "absl/strings/str_cat.h"

namespace banyan::cli {
namespace {

// Flags several commands share.
constexpr Flag kModel{"model", "PATH", "a GGUF file or safetensors directory (default: the embedded default model)"};
constexpr Flag kThreads{"threads", "N", "CPU threads (0: all)"};
constexpr Flag kSeed{"seed", "S", "sampling seed (a run is reproducible under one seed)"};
constexpr Flag kMaxTokens{"max-tokens", "N", "tokens generated per branch at most"};
constexpr Flag kTemperature{"temperature", "T", "sampling temperature (0: greedy)"};
constexpr Flag kTopK{"top-k", "K", "keep the K most likely tokens (0: off)"};
constexpr Flag kJson{"json", "", "print JSON instead of text"};
constexpr Flag kKvBudget{"kv-budget-mb", "M", "the engine's KV budget in MiB (0: the default)"};
constexpr Flag kDeviceAuto{"device", "D", "auto|cpu|cuda:N (default auto)"};

}  // namespace

const std::vector<Command>& Commands() {
  static const auto* commands = new std::vector<Command>{
      {"info", "version, backends, GPUs, libraries, the default model and what an engine over it sees", RunInfo,
       {kModel, kDeviceAuto, kKvBudget, kThreads, kJson,
        {"no-engine", "", "do not create an engine (no model load)"}}},
      {"demo", "the main job: forked sampling + self-consistency vote + forked chat on the default model",
       RunDemoCommand,
       {kModel, kDeviceAuto, {"samples", "N", "sampled branches of the question"}, kMaxTokens, kTemperature, kSeed,
        kThreads, {"question", "TEXT", "the question to vote on"}}},
      {"tokenize", "text on stdin -> token ids as a JSON array (--decode: ids -> text)", RunTokenize,
       {kModel, {"tokenizer", "PATH", "a tokenizer.json or GGUF vocabulary instead of a model"},
        {"decode", "", "read a JSON array of ids, print the text"},
        {"no-special", "", "no BOS / special tokens added"}}},
      {"generate", "sample N completions of a prompt that share its KV (prefill once, fork)", RunGenerate,
       {{"prompt", "TEXT", "the prompt (required; wrapped in the model's chat template unless --raw)"},
        {"n", "N", "completions, forked from the prompt (default 1)"}, kMaxTokens, kTemperature,
        {"top-p", "P", "nucleus sampling (default 0.95)"}, kTopK, {"min-p", "P", "min-p sampling (0: off)"},
        {"repetition-penalty", "R", "1: off"}, kSeed, {"stop", "TEXT", "end a completion at TEXT (may repeat)"}, kModel,
        kDeviceAuto, kThreads, {"precision", "fast|high", "CUDA numerics (default fast)"}, kJson,
        {"raw", "", "the prompt as is, no chat template"}, {"quiet", "", "no progress on stderr"}}},
      {"search", "run a search strategy (self-consistency, tree of thought, MCTS, best-of-N)", RunSearch,
       {{"strategy", "S", "self-consistency|tot-bfs|tot-dfs|mcts|best-of-n|beam (default self-consistency)"},
        {"prompt", "TEXT", "the question"}, {"policy", "FILE.lua", "a Lua policy (expand / score / select / stop)"},
        {"n", "N", "samples, or children per expansion (default 8)"}, kMaxTokens, kTemperature, kTopK, kSeed,
        {"depth", "N", "tree depth at most (default 3)"}, {"beam", "N", "beam width (default 2)"},
        {"iterations", "N", "MCTS iterations (default 8)"},
        {"evaluation", "E", "none|model-value|model-vote|policy (default model-value; policy with --policy)"},
        {"threshold", "V", "ToT DFS: a node valued at least V is a solution (default 0.5)"},
        {"answer-pattern", "REGEX", "self-consistency: the answer's regex (default: the last number)"},
        {"weighted", "", "self-consistency: votes weighted by likelihood"},
        {"wave", "N", "self-consistency: samples per wave before the early-stop check (0: n / 4)"},
        {"delimiter", "TEXT", "a thought ends at TEXT (default a newline)"},
        {"budget-tokens", "N", "stop after N generated tokens (0: none)"},
        {"budget-branches", "N", "stop after N branches (0: none)"},
        {"budget-seconds", "S", "stop after S seconds (0: none)"}, {"trace", "FILE", "write the trace (JSON)"},
        {"replay", "FILE", "replay a trace and check every decision repeats"}, kModel, kDeviceAuto, kThreads,
        kJson, {"raw", "", "the prompt as is, no chat template"}}},
      {"chat", "explore a conversation as a tree: fork, regenerate, edit, compare, save/load", RunChat,
       {kModel, kDeviceAuto, kThreads, kKvBudget, kTemperature, {"top-p", "P", "nucleus sampling"}, kTopK,
        kMaxTokens, kSeed, {"system", "TEXT", "a system prompt to open with"}, {"load", "FILE", "a saved tree"},
        {"script", "FILE", "commands from FILE, one per line"}, {"echo", "", "print each command read"},
        {"strict", "", "stop at the first failing command (exit 1)"}}},
      {"eval", "code evaluation with pass@k: MBPP / APPS problems sampled on the shared tree, checked in a sandbox",
       RunEval,
       {{"data", "FILE.jsonl", "the problems (default: samples/data/mbpp_tiny.jsonl)"},
        {"format", "F", "auto|mbpp|apps (default auto: APPS when the first record has problem_id)"},
        {"difficulty", "D", "APPS: introductory|interview|competition only"},
        {"limit", "P", "the first P problems only"}, {"n", "N", "samples per problem (default 4)"},
        {"k", "K,K...", "pass@k for each k (default 1)"}, {"max-tokens", "N", "tokens per sample at most (default 96)"},
        {"temperature", "T", "sampling temperature (default 0.8)"}, kSeed,
        {"parallel", "P", "problems decoding at once (default 16)"},
        {"jobs", "J", "checks running at once (default: the hardware threads)"},
        {"report", "FILE", "one JSON line per sample, written atomically"},
        {"check-reference", "", "check each problem's reference solution instead (no model)"},
        {"verbose", "", "print every sample's outcome and code"}, kModel, kDeviceAuto}},
  };
  return *commands;
}

const Command* FindCommand(std::string_view name) {
  for (const Command& c : Commands()) {
    if (c.name == name) return &c;
  }
  return nullptr;
}

absl::StatusOr<Args> ParseFlags(std::string_view command, const std::vector<std::string>& argv) {
  std::set<std::string> values, bools;
  for (const Flag& f : FindCommand(command)->flags) (f.value.empty() ? bools : values).insert(std::string(f.name));
  return Args::Parse(argv, values, bools);
}

std::string CommandHelp(const Command& command) {
  std::string text = absl::StrCat("usage: banyan ", std::string(command.name), " [flags]\n  ",
                                  std::string(command.summary), "\n\nflags:\n");
  size_t width = 0;
  for (const Flag& f : command.flags) width = std::max(width, f.name.size() + f.value.size() + 1);
  for (const Flag& f : command.flags) {
    const std::string left = absl::StrCat("--", std::string(f.name), f.value.empty() ? "" : " ", std::string(f.value));
    absl::StrAppend(&text, "  ", left, std::string(width + 4 - left.size(), ' '), std::string(f.help), "\n");
  }
  return text;
}

int RunAsProgram(std::string_view program, absl::Status (*run)(const std::vector<std::string>&), int argc,
                 char** argv) {
  const absl::Status status = run(std::vector<std::string>(argv + 1, argv + argc));
  if (status.ok()) return 0;
  std::cerr << program << ": " << status << "\n";
  return 1;
}

}  // namespace banyan::cli

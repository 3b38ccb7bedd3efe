// Search strategies over the engine's branches: self-consistency, tree of
// thought (BFS, DFS, beam), MCTS and best-of-N. Every expansion is an
// Engine::Fork in the shared KV tree, so siblings share their prefix's KV and
// its attention reads; a strategy never holds a private copy of model state.
//
//   SearchOptions options;
//   options.prompt = "Q: 17 * 23 = ? Think step by step.\nA:";
//   options.n = 16;
//   options.budget.max_tokens = 4096;
//   options.seed = 7;
//   BANYAN_ASSIGN_OR_RETURN(std::unique_ptr<Strategy> strategy,
//                           CreateStrategy(StrategyKind::kSelfConsistency));
//   BANYAN_ASSIGN_OR_RETURN(SearchResult result, strategy->Run(*engine, options));
//   std::cout << result.answer << " after " << result.cost.tokens_generated << " tokens\n";
//
// Dependency direction. DESIGN.md orders the layers sdk -> search ->
// {kv_tree, model, scripting}. Strategies need an Engine, which lives in sdk.
// The cycle is broken by depending on the PUBLIC, abstract interface
// sdk/include/banyan/engine.h only (header-only: no link to sdk/engine):
// banyan_search links banyan_base, banyan_scripting, banyan_proto, RE2 and
// Abseil. Tests, samples, benchmarks and the CLI link the implementation
// (banyan_sdk) and hand a concrete Engine in.
//
// Budgets (SearchBudget): tokens generated, branches created and wall time.
// Strategies plan every request so that the worst case stays inside the token
// and branch budgets (a step that cannot fit is not started); the wall-clock
// budget becomes the engine requests' deadline. When a budget runs out, the
// search stops and returns what it has (stop_reason says which budget). The
// same holds when the engine's KV budget cannot take more branches
// (kResourceExhausted from Fork / GenerateMany): stop_reason "kv_budget".
//
// Cancellation: SearchOptions::cancel (banyan::CancelToken) is checked before
// every decision and handed to every engine request; a cancelled search
// returns OK with stop_reason "cancelled" and the partial result. A Lua
// policy's running hook is cancelled too (the token is forwarded to its
// sandbox): the search then fails with the sandbox's kCancelled instead.
//
// Determinism: the engine derives each branch's RNG from the request seed and
// the branch's position; strategies derive every request's seed from
// SearchOptions::seed and a request counter, and break ties by node id. The
// same options on the same model give the same decisions (the trace's events
// compare equal with CompareDecisions, timings aside).
//
// Errors. Run returns a non-OK Status when the search cannot proceed:
// kInvalidArgument for bad options (n < 1, empty prompt, missing callback for
// the chosen evaluation, a policy without the hook an option requires), the
// engine's own error for a failed request (kNotFound, kInternal...),
// and the sandbox's Status when a Lua policy fails (kDeadlineExceeded,
// kResourceExhausted, kInvalidArgument with the Lua traceback). Whatever
// happens, every branch the search created is released before Run returns;
// the engine keeps serving other callers.
//
// Thread-safety: a Strategy object is stateless between runs and may be used
// by one thread at a time; run separate searches on separate Strategy objects
// concurrently (the Engine is thread-safe). The LuaPolicy, if any, must not be
// shared between concurrent searches.
#ifndef BANYAN_SEARCH_STRATEGY_H_
#define BANYAN_SEARCH_STRATEGY_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "banyan/engine.h"
#include "sdk/proto/search_trace.pb.h"
#include "search/vote.h"

namespace banyan::search {

class BoundPolicy;  // search/policy_binding.h

enum class StrategyKind { kSelfConsistency, kTotBfs, kTotDfs, kMcts, kBestOfN, kBeam };

// "self-consistency", "tot-bfs", "tot-dfs", "mcts", "best-of-n", "beam".
std::string_view StrategyName(StrategyKind kind);
// kInvalidArgument for an unknown name (the message lists the known ones).
absl::StatusOr<StrategyKind> ParseStrategyKind(std::string_view name);

struct SearchBudget {
  int64_t max_tokens = 0;    // tokens generated (all branches); 0 = unlimited
  int64_t max_branches = 0;  // branches created by Fork / NewBranch; 0 = unlimited
  double max_seconds = 0;    // wall time; 0 = unlimited
};

// How a tree search values a node.
enum class Evaluation {
  kNone,        // the step's mean token probability exp(logprob / tokens) (1 for
                // explicit continuations): the model's own confidence
  kModelValue,  // value prompt: P(good) / (P(good) + P(bad)) with Engine::Score
  kModelVote,   // vote prompt: the model picks the best of the siblings
  kCallback,    // SearchOptions::scorer
  kPolicy,      // the Lua policy's score()
};

// A node as the C++ callbacks see it (borrowed; valid for the call).
struct NodeContext {
  int64_t id = 0;
  int64_t parent = -1;
  int32_t depth = 0;
  std::string_view step_text;   // what this node added
  std::string_view path_text;   // every step from the root's child down to it
  std::string_view prompt;      // the search's prompt
  BranchId branch;              // live while the callback runs
};

using Scorer = std::function<absl::StatusOr<double>(const NodeContext&)>;
// Best-of-N: accept or reject a candidate, with a score for ranking.
struct Verdict {
  bool accepted = false;
  double score = 0;
};
using Verifier = std::function<absl::StatusOr<Verdict>(const NodeContext&)>;

struct SearchOptions {
  std::string prompt;  // text (no BOS added; use the chat template if wanted)
  int32_t n = 8;       // samples (SC, best-of-N) / children per expansion (ToT, MCTS, beam)
  uint64_t seed = 0;
  SamplingOptions sampling;  // seed is overwritten per request from `seed`
  SearchBudget budget;
  std::shared_ptr<CancelToken> cancel;  // optional

  // Steps (ToT, MCTS, beam): one step is sampled up to the delimiter.
  std::string step_delimiter = "\n";
  int32_t step_tokens = 64;   // most tokens per step
  int32_t max_depth = 4;      // most steps below the prompt
  // Self-consistency and best-of-N: most tokens per sample.
  int32_t sample_tokens = 256;
  // Extra stop strings for complete samples (SC, best-of-N).
  std::vector<std::string> stop_strings;

  // Self-consistency.
  int32_t wave_size = 0;          // samples per wave; 0 = max(1, n / 4)
  std::string answer_pattern;     // RE2 for AnswerExtractor; empty = the last number
  bool weighted_vote = false;     // weight = sequence probability (or the scorer's value)

  // Tree of thought and beam.
  int32_t beam_width = 2;         // BFS / beam: nodes kept per level
  double value_threshold = 0.5;   // DFS: children below it are pruned
  Evaluation evaluation = Evaluation::kNone;
  // kModelValue: the value prompt appended after a node, and the two verdicts
  // whose likelihoods are compared.
  std::string value_prompt = "\nIs this reasoning correct? Answer:";
  std::string value_good = " yes";
  std::string value_bad = " no";
  // kModelVote: the vote prompt (the candidates are listed after it, "Choice
  // i:" each, then " The best choice is i" is scored for every i).
  std::string vote_prompt = "\nWhich choice is the most promising?\n";
  Scorer scorer;                  // kCallback (also SC weights when set)

  // MCTS.
  int32_t iterations = 16;
  double exploration = 1.4;       // UCT constant c
  int32_t rollout_tokens = 0;     // > 0: value by a greedy rollout of that length scored
                                  // by the evaluation; 0: value the node itself

  // Best-of-N.
  Verifier verifier;

  // Optional Lua policy (borrowed; must outlive Run). Hooks it defines
  // replace the built-in decisions: expand (children per node or explicit
  // continuations), score (node value), select (beam / UCT child), should_stop
  // (after every level / iteration / wave), answer (SC extraction). Its
  // `banyan` API is bound to this search's nodes (see policy_binding.h).
  BoundPolicy* policy = nullptr;
};

struct SearchCost {
  int64_t tokens_generated = 0;
  int64_t tokens_scored = 0;
  int64_t branches_created = 0;
  int64_t generate_calls = 0;
  int64_t score_calls = 0;
  int64_t policy_calls = 0;
  double wall_seconds = 0;
};

struct SearchResult {
  std::string answer;      // extracted answer (SC) or the best node's path text
  std::string best_text;   // the best node's path text (SC: a sample with the answer)
  double best_value = 0;
  std::vector<VoteEntry> votes;  // SC, by decreasing weight
  SearchCost cost;
  std::string stop_reason;  // "done", "decided", "max_tokens", "max_branches",
                            // "max_seconds", "cancelled", "policy", "kv_budget",
                            // "solved" / "unsolved" (ToT DFS: a node at or
                            // above value_threshold found, or not)
  int64_t nodes = 0;        // tree shape
  int32_t max_depth = 0;
  int64_t leaves = 0;
  proto::SearchTrace trace;
};

class Strategy {
 public:
  virtual ~Strategy() = default;
  virtual StrategyKind kind() const = 0;
  // Runs one search on `engine` (borrowed). See the file comment for errors.
  virtual absl::StatusOr<SearchResult> Run(Engine& engine, const SearchOptions& options) = 0;
};

std::unique_ptr<Strategy> CreateStrategy(StrategyKind kind);

// OK when both traces made the same decisions (events equal except their
// timings, same answer); otherwise kFailedPrecondition naming the first
// difference.
absl::Status CompareDecisions(const proto::SearchTrace& a, const proto::SearchTrace& b);

// The trace as JSON (MessageToJsonString) / written to `path`: JSON when the
// path ends in ".json", binary protobuf otherwise, written atomically (a
// temporary file renamed over `path`). Text fields hold valid UTF-8 (the
// search writes U+FFFD for invalid bytes of model output). kInternal /
// kPermissionDenied / kDataLoss when the file cannot be written.
absl::StatusOr<std::string> TraceToJson(const proto::SearchTrace& trace);
absl::Status WriteTrace(const proto::SearchTrace& trace, const std::string& path);
// Reads a trace written by WriteTrace (JSON for ".json", else binary).
// kNotFound: no file; kDataLoss: not a trace.
absl::StatusOr<proto::SearchTrace> ReadTrace(const std::string& path);

// Replay: the strategy and the options a trace's config recorded. Callbacks
// (scorer, verifier), the policy and the cancel token are not part of a trace:
// set them again before running (the evaluation is kept: "callback" needs a
// scorer, "policy" a policy). kInvalidArgument for an unknown strategy or
// evaluation name.
absl::StatusOr<StrategyKind> StrategyFromConfig(const proto::SearchConfig& config);
absl::StatusOr<SearchOptions> OptionsFromConfig(const proto::SearchConfig& config);

}  // namespace banyan::search

#endif  // BANYAN_SEARCH_STRATEGY_H_

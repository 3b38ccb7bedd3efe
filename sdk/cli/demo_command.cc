// `banyan demo`: the main job. On the default model (the GPU when there is
// one, else the CPU) it
//   1. asks a small arithmetic question, forks the prompt into many sampled
//      branches that share its KV, extracts each branch's answer and votes
//      (self-consistency);
//   2. holds a chat turn and forks the conversation into alternative replies;
//   3. prints the KV tree (ASCII), the answer and the throughput.
// Progress goes to stderr; the report to stdout.
//
//   banyan demo [--model PATH] [--device auto|cpu|cuda:N] [--samples N]
//               [--max-tokens M] [--temperature T] [--seed S] [--threads T]
//               [--question TEXT]
#include <algorithm>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "banyan/engine.h"
#include "banyan/status_macros.h"
#include "sdk/cli/args.h"
#include "sdk/cli/command.h"
#include "sdk/cli/tree_printer.h"
#include "search/answer_extractor.h"
#include "search/vote.h"

namespace banyan::cli {
namespace {

constexpr char kQuestion[] = "What is 12 + 7? Reply with the number only.";
constexpr char kChatFirst[] = "Name one fun hobby to try this weekend, in one sentence.";
constexpr char kChatSecond[] = "Give me a different idea, in one sentence.";

// Streams progress to stderr from the engine's scheduler thread.
class Progress {
 public:
  explicit Progress(std::string what) : what_(std::move(what)), start_(absl::Now()) {}
  StreamCallbacks Callbacks() {
    StreamCallbacks c;
    c.on_token = [this](BranchId, int32_t, std::string_view, float) {
      ++tokens_;
      const absl::Time now = absl::Now();
      if (now - last_ > absl::Milliseconds(250)) {
        last_ = now;
        const double s = absl::ToDoubleSeconds(now - start_);
        std::cerr << absl::StrFormat("\r  %s: %d tokens, %.1f s, %.1f tokens/s   ", what_, tokens_, s,
                                     s > 0 ? tokens_ / s : 0.0)
                  << std::flush;
      }
      return true;
    };
    return c;
  }
  void Done() {
    const double s = absl::ToDoubleSeconds(absl::Now() - start_);
    std::cerr << absl::StrFormat("\r  %s: %d tokens in %.1f s (%.1f tokens/s)      \n", what_, tokens_, s,
                                 s > 0 ? tokens_ / s : 0.0);
  }

 private:
  std::string what_;
  absl::Time start_;
  absl::Time last_ = absl::InfinitePast();
  int64_t tokens_ = 0;
};

struct DemoConfig {
  EngineOptions engine;
  int32_t samples = 12;
  int32_t max_tokens = 24;
  float temperature = 0.8f;
  uint64_t seed = 1;
  std::string question = kQuestion;
};

absl::StatusOr<std::vector<int32_t>> TokensOf(Engine& engine, BranchId b) {
  BANYAN_ASSIGN_OR_RETURN(BranchInfo info, engine.Inspect(b));
  return info.tokens;
}

absl::Status RunDemo(const DemoConfig& cfg) {
  const absl::Time start = absl::Now();
  std::cerr << "[demo] loading the model...\n";
  BANYAN_ASSIGN_OR_RETURN(std::unique_ptr<Engine> engine, Engine::Create(cfg.engine));
  const EngineStats at_start = engine->Stats();
  std::cout << "Banyan demo on " << at_start.device << " ("
            << absl::StrFormat("%.1f s to load", absl::ToDoubleSeconds(absl::Now() - start)) << ")\n\n";
  std::vector<LabeledSequence> tree;

  // ---- 1. Self-consistency over forked samples --------------------------------
  std::cout << "1. Self-consistency: \"" << cfg.question << "\"\n";
  BANYAN_ASSIGN_OR_RETURN(std::string prompt,
                          engine->ApplyChatTemplate({{"user", cfg.question}}, true));
  BANYAN_ASSIGN_OR_RETURN(BranchId question, engine->NewBranch(Prompt::Text(prompt)));
  BANYAN_ASSIGN_OR_RETURN(std::vector<int32_t> prompt_tokens, TokensOf(*engine, question));
  BANYAN_ASSIGN_OR_RETURN(std::vector<BranchId> samples, engine->Fork(question, cfg.samples));
  std::cout << absl::StrFormat("   prompt of %d tokens prefilled once, forked into %d samples sharing its KV\n",
                               prompt_tokens.size(), samples.size());
  GenerateOptions gen;
  gen.sampling.temperature = cfg.temperature;
  gen.sampling.top_p = 0.95f;
  gen.sampling.seed = cfg.seed;
  gen.max_tokens = cfg.max_tokens;
  gen.stop_strings = {"\n"};
  Progress sampling("sampling");
  gen.callbacks = sampling.Callbacks();
  std::vector<absl::StatusOr<GenerateResult>> results = engine->GenerateMany(samples, gen);
  sampling.Done();
  BANYAN_ASSIGN_OR_RETURN(search::AnswerExtractor extractor, search::AnswerExtractor::Create());
  search::VoteTally tally;
  for (size_t i = 0; i < results.size(); ++i) {
    if (!results[i].ok()) return results[i].status();
    const std::optional<std::string> answer = extractor.Extract(results[i]->text);
    if (answer.has_value()) {
      tally.Add(*answer);
    } else {
      tally.AddAbstention();
    }
    const std::string label = absl::StrCat("sample ", i + 1, " -> ", answer.value_or("(no answer)"));
    std::cout << absl::StrFormat("   %2d. %-40s -> %s\n", i + 1,
                                 absl::StrCat("\"", Snippet(results[i]->text, 36), "\""), answer.value_or("(none)"));
    BANYAN_ASSIGN_OR_RETURN(std::vector<int32_t> tokens, TokensOf(*engine, samples[i]));
    tree.push_back({std::move(tokens), label});
  }
  std::cout << "   vote:";
  for (const search::VoteEntry& e : tally.Ranking()) {
    std::cout << absl::StrFormat("  %s x%d", e.answer, e.count);
  }
  if (tally.abstentions() > 0) std::cout << absl::StrFormat("  (no answer) x%d", tally.abstentions());
  const search::VoteEntry leader = tally.Leader();
  std::cout << "\n   ANSWER: " << (leader.answer.empty() ? "(no answer)" : leader.answer)
            << absl::StrFormat("  (%d of %d samples agree)\n\n", leader.count, results.size());

  // ---- 2. A forked chat turn --------------------------------------------------------
  std::cout << "2. Forked chat turn\n";
  std::vector<ChatMessage> chat = {{"user", kChatFirst}};
  BANYAN_ASSIGN_OR_RETURN(std::string chat_prompt, engine->ApplyChatTemplate(chat, true));
  BANYAN_ASSIGN_OR_RETURN(BranchId convo, engine->NewBranch(Prompt::Text(chat_prompt)));
  GenerateOptions reply;
  reply.sampling.temperature = 0.0f;  // the first reply: greedy
  reply.max_tokens = cfg.max_tokens + 16;
  Progress first_reply("first reply");
  reply.callbacks = first_reply.Callbacks();
  BANYAN_ASSIGN_OR_RETURN(GenerateResult r1, engine->Generate(convo, reply));
  first_reply.Done();
  std::cout << "   user:      " << kChatFirst << "\n   assistant: " << Snippet(r1.text, 200) << "\n";
  chat.push_back({"assistant", r1.text});
  chat.push_back({"user", kChatSecond});
  BANYAN_ASSIGN_OR_RETURN(std::string full, engine->ApplyChatTemplate(chat, true));
  BANYAN_ASSIGN_OR_RETURN(BranchInfo so_far, engine->Inspect(convo));
  BranchId second;
  if (full.compare(0, so_far.text.size(), so_far.text) == 0) {
    // The conversation continues in place: append only the new turn.
    BANYAN_RETURN_IF_ERROR(engine->Append(convo, Prompt::Text(full.substr(so_far.text.size()))));
    second = convo;
  } else {
    // The rendering differs from what was generated: a new branch, which still
    // reuses the cached KV of the common prefix.
    BANYAN_ASSIGN_OR_RETURN(second, engine->NewBranch(Prompt::Text(full)));
  }
  std::cout << "   user:      " << kChatSecond << "\n";
  constexpr int kAlternatives = 3;
  BANYAN_ASSIGN_OR_RETURN(std::vector<BranchId> alternatives, engine->Fork(second, kAlternatives));
  GenerateOptions alt = reply;
  alt.sampling.temperature = 0.9f;
  alt.sampling.top_p = 0.95f;
  alt.sampling.seed = cfg.seed + 1;
  Progress forked("alternative replies");
  alt.callbacks = forked.Callbacks();
  std::vector<absl::StatusOr<GenerateResult>> alts = engine->GenerateMany(alternatives, alt);
  forked.Done();
  for (int i = 0; i < kAlternatives; ++i) {
    if (!alts[i].ok()) return alts[i].status();
    std::cout << absl::StrFormat("   reply %c:   %s\n", 'A' + i, Snippet(alts[i]->text, 200));
    BANYAN_ASSIGN_OR_RETURN(std::vector<int32_t> tokens, TokensOf(*engine, alternatives[i]));
    tree.push_back({std::move(tokens), absl::StrCat("chat reply ", std::string(1, 'A' + i))});
  }
  if (second != convo) {
    BANYAN_ASSIGN_OR_RETURN(std::vector<int32_t> tokens, TokensOf(*engine, convo));
    tree.push_back({std::move(tokens), "first reply"});
  }

  // ---- 3. The tree and the numbers -------------------------------------------------
  std::cout << "\nKV tree (each node's KV is stored once and read once per step by every branch below it):\n";
  Engine& e = *engine;
  std::cout << PrintTokenTree(tree, [&e](absl::Span<const int32_t> t) {
    return e.Detokenize(t).value_or("?");
  });
  const EngineStats s = engine->Stats();
  const double wall = absl::ToDoubleSeconds(absl::Now() - start);
  std::cout << "\nThroughput (" << s.device << "):\n";
  std::cout << absl::StrFormat("   decode:   %d tokens in %d steps, %.1f tokens/s (%.2f s in decode passes)\n",
                               s.tokens_generated, s.decode_steps,
                               s.decode_seconds > 0 ? s.tokens_generated / s.decode_seconds : 0.0,
                               s.decode_seconds);
  std::cout << absl::StrFormat("   prefill:  %d tokens computed; KV reused: %d tokens from the prefix cache "
                               "+ %d tokens shared by forks\n",
                               s.tokens_prefilled, s.tokens_reused, s.tokens_forked);
  std::cout << absl::StrFormat("   attention read %d KV tokens for %d attended (%.1fx sharing); most rows in "
                               "one pass: %d\n",
                               s.kv_tokens_read, s.kv_tokens_attended,
                               s.kv_tokens_read > 0 ? static_cast<double>(s.kv_tokens_attended) / s.kv_tokens_read
                                                    : 0.0,
                               s.max_rows_in_step);
  std::cout << absl::StrFormat("   KV pages: %d of %d in use; %d tree nodes; wall time %.1f s\n", s.kv_pages_used,
                               s.kv_pages_total, s.tree_nodes, wall);
  return absl::OkStatus();
}

}  // namespace

absl::Status RunDemoCommand(const std::vector<std::string>& argv) {
  BANYAN_ASSIGN_OR_RETURN(
      Args args, ParseFlags("demo", argv));
  DemoConfig cfg;
  cfg.engine.model_path = args.GetString("model");
  cfg.engine.device = args.GetString("device", "auto");
  BANYAN_ASSIGN_OR_RETURN(const int64_t samples, args.GetInt("samples", cfg.samples));
  BANYAN_ASSIGN_OR_RETURN(const int64_t max_tokens, args.GetInt("max-tokens", cfg.max_tokens));
  BANYAN_ASSIGN_OR_RETURN(const int64_t seed, args.GetInt("seed", 1));
  BANYAN_ASSIGN_OR_RETURN(const int64_t threads, args.GetInt("threads", 0));
  BANYAN_ASSIGN_OR_RETURN(const double temperature, args.GetDouble("temperature", cfg.temperature));
  if (samples < 1 || samples > 1024) return absl::InvalidArgumentError("--samples must be in [1, 1024]");
  if (max_tokens < 1 || max_tokens > 4096) return absl::InvalidArgumentError("--max-tokens must be in [1, 4096]");
  if (threads < 0 || threads > 1024) return absl::InvalidArgumentError("--threads must be in [0, 1024]");
  cfg.samples = static_cast<int32_t>(samples);
  cfg.max_tokens = static_cast<int32_t>(max_tokens);
  cfg.seed = static_cast<uint64_t>(seed);
  cfg.temperature = static_cast<float>(temperature);
  cfg.engine.threads = static_cast<int32_t>(threads);
  if (args.Has("question")) cfg.question = args.GetString("question");
  return RunDemo(cfg);
}

}  // namespace banyan::cli

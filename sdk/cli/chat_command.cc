// `banyan chat`: the branching chat explorer (samples/branching_chat/) on the
// default model or --model: talk, fork replies, regenerate, edit earlier
// turns, compare branches, save and reload the tree. Reads commands from
// stdin (or --script FILE); /help lists them.
//
//   banyan chat [--model PATH] [--device auto|cpu|cuda:N] [--threads N]
//               [--kv-budget-mb M] [--temperature T] [--top-p P] [--top-k K]
//               [--max-tokens N] [--seed S] [--system TEXT] [--load FILE]
//               [--script FILE] [--echo] [--strict]
#include <signal.h>
#include <unistd.h>

#include <atomic>

#include <fstream>
#include <iostream>
#include <memory>

#include "absl/strings/str_cat.h"
#include "banyan/engine.h"
#include "banyan/status_macros.h"
#include "samples/branching_chat/chat_repl.h"
#include "samples/branching_chat/chat_session.h"
#include "sdk/cli/args.h"
#include "sdk/cli/command.h"

namespace banyan::cli {
namespace {

// Ctrl-C while a reply streams stops that reply; at the prompt it ends the
// read (no SA_RESTART), so the program quits.
std::atomic<bool> g_interrupt{false};
void OnInterrupt(int) { g_interrupt.store(true); }

}  // namespace

absl::Status RunChat(const std::vector<std::string>& argv) {
  namespace chat = ::banyan::samples::chat;
  BANYAN_ASSIGN_OR_RETURN(
      Args args, ParseFlags("chat", argv));
  if (!args.positional().empty()) {
    return absl::InvalidArgumentError(absl::StrCat("banyan chat takes no positional arguments (got \"",
                                                    args.positional()[0], "\")"));
  }
  chat::ChatSettings settings;
  for (const auto& [flag, key] : {std::pair<const char*, const char*>{"temperature", "temperature"},
                                  {"top-p", "top_p"},
                                  {"top-k", "top_k"},
                                  {"max-tokens", "max_tokens"},
                                  {"seed", "seed"}}) {
    if (args.Has(flag)) {
      const absl::Status s = chat::ApplySetting(settings, key, args.GetString(flag));
      if (!s.ok()) return absl::InvalidArgumentError(absl::StrCat("--", flag, ": ", s.message()));
    }
  }
  EngineOptions eo;
  eo.model_path = args.GetString("model");
  eo.device = args.GetString("device", "auto");
  BANYAN_ASSIGN_OR_RETURN(const int64_t threads, args.GetInt("threads", 0));
  BANYAN_ASSIGN_OR_RETURN(const int64_t budget_mb, args.GetInt("kv-budget-mb", 0));
  if (threads < 0 || threads > 1024) return absl::InvalidArgumentError("--threads must be in [0, 1024]");
  if (budget_mb < 0 || budget_mb > (int64_t{1} << 24)) {
    return absl::InvalidArgumentError("--kv-budget-mb must be in [0, 2^24]");
  }
  eo.threads = static_cast<int32_t>(threads);
  eo.kv_budget_bytes = static_cast<uint64_t>(budget_mb) << 20;

  std::ifstream script;
  if (args.Has("script")) {
    script.open(args.GetString("script"));
    if (!script) return absl::NotFoundError(absl::StrCat("cannot open --script ", args.GetString("script")));
  }
  std::istream& in = args.Has("script") ? static_cast<std::istream&>(script) : std::cin;
  const bool interactive = !args.Has("script") && isatty(0) == 1;

  std::cerr << "[chat] loading the model...\n";
  BANYAN_ASSIGN_OR_RETURN(std::unique_ptr<Engine> engine, Engine::Create(eo));
  const EngineInfo info = engine->Info();
  std::cout << "Branching chat on " << info.model << " (" << info.device << ", chat format "
            << (info.chat_format.empty() ? "none" : info.chat_format) << "). /help lists the commands.\n";
  {
    chat::ChatSession session(engine.get(), settings);
    if (args.Has("load")) BANYAN_RETURN_IF_ERROR(session.Load(args.GetString("load")));
    if (args.Has("system")) BANYAN_RETURN_IF_ERROR(session.System(args.GetString("system")).status());
    chat::ReplOptions options;
    options.prompt = interactive || args.GetBool("echo") ? "> " : "";
    options.echo = args.GetBool("echo");
    options.stop_on_error = args.GetBool("strict");
    if (interactive) {
      struct sigaction sa = {};
      sa.sa_handler = OnInterrupt;
      sigemptyset(&sa.sa_mask);
      sigaction(SIGINT, &sa, nullptr);
      options.interrupt = &g_interrupt;
    }
    int failures = 0;
    BANYAN_RETURN_IF_ERROR(chat::RunRepl(session, in, std::cout, options, &failures));
    if (failures > 0) std::cerr << "[chat] " << failures << " command(s) failed\n";
  }
  return absl::OkStatus();
}

}  // namespace banyan::cli

// The branching chat's line-oriented loop: reads commands (chat_parser.h)
// from a stream, runs them on a ChatSession and writes the results, streamed
// replies included, to another. Works the same typed or piped from a file.
// Every failure is printed as "error: CODE: message" and the loop goes on.
//
//   ChatSession session(engine.get(), ChatSettings{});
//   RunRepl(session, std::cin, std::cout, ReplOptions{});
//
// Thread-compatible (one thread drives the loop).
#ifndef BANYAN_SAMPLES_BRANCHING_CHAT_CHAT_REPL_H_
#define BANYAN_SAMPLES_BRANCHING_CHAT_CHAT_REPL_H_

#include <atomic>
#include <istream>
#include <ostream>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "samples/branching_chat/chat_session.h"

namespace banyan::samples::chat {

struct ReplOptions {
  std::string prompt = "> ";  // printed before each line is read ("" for none)
  bool echo = false;          // write each line read after the prompt (for piped scripts)
  bool stop_on_error = false;  // return the first failing command's status
  // When set (e.g. by a SIGINT handler) while a reply streams, the reply stops
  // there and the flag is cleared. Not owned.
  std::atomic<bool>* interrupt = nullptr;
};

struct LineResult {
  absl::Status status;  // the command's (already printed when not OK)
  bool quit = false;    // /quit
};

// Runs one line (`interrupt` as in ReplOptions; may be null).
LineResult ExecuteLine(ChatSession& session, std::string_view line, std::ostream& out,
                       std::atomic<bool>* interrupt = nullptr);

// Reads lines until end of input or /quit. A line ending in '\' continues on
// the next one (joined with a newline). Returns OK, or with stop_on_error the
// first failure. `failures`, when given, counts the failed commands.
absl::Status RunRepl(ChatSession& session, std::istream& in, std::ostream& out,
                     const ReplOptions& options, int* failures = nullptr);

}  // namespace banyan::samples::chat

#endif  // BANYAN_SAMPLES_BRANCHING_CHAT_CHAT_REPL_H_

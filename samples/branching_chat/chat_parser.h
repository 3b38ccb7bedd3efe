// The branching chat's command language: one line in, one ChatCommand out.
//
//   plain text            a user turn on the current branch (a reply follows)
//   /fork [N]             N sampled alternative replies to the current user turn
//   /regen                one more reply to the current user turn
//   /go ID                make turn ID current (0: the empty conversation)
//   /tree                 the turn tree
//   /show [ID]            the conversation from the start to turn ID (default: current)
//   /compare A B          the last replies of two branches side by side, scored
//   /edit K TEXT          a sibling of user turn K with TEXT, then a reply
//   /branch ID TEXT       a new user turn TEXT after turn ID, then a reply
//   /system TEXT          a new conversation that starts with system prompt TEXT
//   /save FILE, /load FILE
//   /set [KEY VALUE]      change (or, bare, list) a sampling setting
//   /stats, /help, /quit (or /exit)
// Lines whose first non-blank character is '#' are comments; a leading '\'
// makes the rest of the line literal user text ("\/etc is a path").
//
// Parsing is pure and thread-safe. Errors are kInvalidArgument with a message
// fit to show the user (unknown command, missing or extra arguments, bad ids,
// bad setting values, invalid UTF-8, control characters, overlong lines).
#ifndef BANYAN_SAMPLES_BRANCHING_CHAT_CHAT_PARSER_H_
#define BANYAN_SAMPLES_BRANCHING_CHAT_CHAT_PARSER_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "sdk/base/utf8.h"

namespace banyan::samples::chat {

enum class CommandKind {
  kNone,  // blank line or comment
  kSay,
  kFork,
  kRegen,
  kGo,
  kTree,
  kShow,
  kCompare,
  kEdit,
  kBranch,
  kSystem,
  kSave,
  kLoad,
  kSet,
  kStats,
  kHelp,
  kQuit,
};

// Longest accepted line (bytes).
inline constexpr size_t kMaxLineBytes = 64 * 1024;
// Most replies one /fork asks for.
inline constexpr int32_t kMaxFork = 32;
// Turn ids are 0 (the root) .. kMaxTurnId.
inline constexpr int64_t kMaxTurnId = 999'999'999;

struct ChatCommand {
  CommandKind kind = CommandKind::kNone;
  std::string text;    // kSay / kEdit / kBranch / kSystem: the message; kSave / kLoad: the path;
                       // kSet: the value
  std::string key;     // kSet: the setting's name (empty: list the settings)
  int64_t id = -1;     // kGo / kEdit / kBranch / kCompare (first) / kShow (-1: current)
  int64_t id2 = -1;    // kCompare (second)
  int32_t count = 0;   // kFork
};

// Parses one line (a trailing "\r" is ignored; newlines inside it, from a
// continued line, are message text).
absl::StatusOr<ChatCommand> ParseCommand(std::string_view line);

// Sampling settings a session uses for its replies.
struct ChatSettings {
  float temperature = 0.7f;
  float top_p = 0.95f;
  int32_t top_k = 0;
  float min_p = 0.0f;
  float repetition_penalty = 1.0f;
  int32_t max_tokens = 200;
  uint64_t seed = 1;
};

// Sets `key` (temperature, top_p, top_k, min_p, repetition_penalty,
// max_tokens, seed) from `value`. kInvalidArgument for an unknown key, a
// value that is not a number or is out of range; `settings` is then unchanged.
absl::Status ApplySetting(ChatSettings& settings, std::string_view key, std::string_view value);

// "temperature=0.7 top_p=0.95 ..." (parseable back by ParseSettings).
std::string FormatSettings(const ChatSettings& settings);
// The inverse of FormatSettings; kInvalidArgument for anything malformed.
absl::StatusOr<ChatSettings> ParseSettings(std::string_view text);

// The /help text.
std::string HelpText();

// UTF-8 checks (sdk/base/utf8.h): valid means no overlongs, surrogates or code
// points above U+10FFFF; ToValidUtf8 replaces each invalid byte by U+FFFD.
using ::banyan::IsValidUtf8;
using ::banyan::ToValidUtf8;

}  // namespace banyan::samples::chat

#endif  // BANYAN_SAMPLES_BRANCHING_CHAT_CHAT_PARSER_H_

#include "samples/branching_chat/chat_parser.h"

#include <charconv>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "banyan/status_macros.h"

namespace banyan::samples::chat {
namespace {

// Debian's Abseil has its own string_view: StrCat takes std::string.
std::string S(std::string_view s) { return std::string(s); }

bool IsBlank(char c) { return c == ' ' || c == '\t'; }

std::string_view Trim(std::string_view s) {
  while (!s.empty() && IsBlank(s.front())) s.remove_prefix(1);
  while (!s.empty() && IsBlank(s.back())) s.remove_suffix(1);
  return s;
}

// Splits off the first blank-separated word of `s` (trimmed); `rest` is the
// remainder, trimmed.
std::string_view NextWord(std::string_view s, std::string_view* rest) {
  s = Trim(s);
  size_t end = 0;
  while (end < s.size() && !IsBlank(s[end])) ++end;
  *rest = Trim(s.substr(end));
  return s.substr(0, end);
}

// Shows the user what they typed, shortened, with control bytes escaped.
std::string Quote(std::string_view s) {
  std::string out;
  for (const unsigned char c : s.substr(0, 40)) {
    if (c < 0x20 || c == 0x7f) {
      absl::StrAppend(&out, absl::StrFormat("\\x%02x", c));
    } else {
      out += static_cast<char>(c);
    }
  }
  if (s.size() > 40) out += "...";
  return absl::StrCat("\"", ToValidUtf8(out), "\"");
}

absl::StatusOr<int64_t> ParseId(std::string_view word, std::string_view what) {
  if (!word.empty() && word.front() == '#') word.remove_prefix(1);
  int64_t value = 0;
  if (word.empty() || word.size() > 9) {
    return absl::InvalidArgumentError(absl::StrCat(S(what), " must be a turn id (0..", kMaxTurnId, "), got ",
                                                   Quote(word)));
  }
  for (const char c : word) {
    if (c < '0' || c > '9') {
      return absl::InvalidArgumentError(
          absl::StrCat(S(what), " must be a turn id (0..", kMaxTurnId, "), got ", Quote(word)));
    }
    value = value * 10 + (c - '0');
  }
  return value;
}

absl::Status NoArguments(std::string_view name, std::string_view rest) {
  if (rest.empty()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("/", S(S(name)), " takes no arguments (got ", Quote(rest), ")"));
}

absl::StatusOr<double> ParseNumber(std::string_view key, std::string_view value) {
  double d = 0;
  const char* begin = value.data();
  const char* end = value.data() + value.size();
  const auto [ptr, ec] = std::from_chars(begin, end, d);
  if (value.empty() || ec != std::errc() || ptr != end || !std::isfinite(d)) {
    return absl::InvalidArgumentError(absl::StrCat(S(key), " must be a number, got ", Quote(value)));
  }
  return d;
}

absl::Status Range(std::string_view key, double v, double lo, double hi) {
  if (v >= lo && v <= hi) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(S(key), " must be in [", lo, ", ", hi, "], got ", v));
}

absl::Status Integer(std::string_view key, double v) {
  if (v == std::floor(v)) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(S(key), " must be a whole number, got ", v));
}

}  // namespace

absl::StatusOr<ChatCommand> ParseCommand(std::string_view line) {
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  if (line.size() > kMaxLineBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("line of ", line.size(), " bytes is too long (at most ", kMaxLineBytes, ")"));
  }
  if (!IsValidUtf8(line)) return absl::InvalidArgumentError("line is not valid UTF-8");
  for (const unsigned char c : line) {
    if ((c < 0x20 && c != '\t' && c != '\n') || c == 0x7f) {
      return absl::InvalidArgumentError(
          absl::StrFormat("line holds control character 0x%02x (only tabs and newlines are allowed)", c));
    }
  }
  ChatCommand cmd;
  const std::string_view trimmed = Trim(line);
  if (trimmed.empty() || trimmed.front() == '#') return cmd;
  if (trimmed.front() == '\\') {
    cmd.kind = CommandKind::kSay;
    cmd.text = std::string(Trim(trimmed.substr(1)));
    if (cmd.text.empty()) return absl::InvalidArgumentError("empty message after '\\'");
    return cmd;
  }
  if (trimmed.front() != '/') {
    cmd.kind = CommandKind::kSay;
    cmd.text = std::string(trimmed);
    return cmd;
  }
  std::string_view rest;
  const std::string_view name = NextWord(trimmed.substr(1), &rest);
  if (name == "fork") {
    cmd.kind = CommandKind::kFork;
    cmd.count = 3;
    if (!rest.empty()) {
      std::string_view extra;
      const std::string_view word = NextWord(rest, &extra);
      BANYAN_RETURN_IF_ERROR(NoArguments("fork N", extra));
      int64_t n = 0;
      const auto [ptr, ec] = std::from_chars(word.data(), word.data() + word.size(), n);
      if (ec != std::errc() || ptr != word.data() + word.size() || n < 1 || n > kMaxFork) {
        return absl::InvalidArgumentError(
            absl::StrCat("/fork N: N must be a whole number in [1, ", kMaxFork, "], got ", Quote(word)));
      }
      cmd.count = static_cast<int32_t>(n);
    }
  } else if (name == "regen") {
    cmd.kind = CommandKind::kRegen;
    BANYAN_RETURN_IF_ERROR(NoArguments(name, rest));
  } else if (name == "go") {
    cmd.kind = CommandKind::kGo;
    std::string_view extra;
    const std::string_view word = NextWord(rest, &extra);
    if (word.empty()) return absl::InvalidArgumentError("/go needs a turn id (see /tree)");
    BANYAN_ASSIGN_OR_RETURN(cmd.id, ParseId(word, "/go ID"));
    BANYAN_RETURN_IF_ERROR(NoArguments("go ID", extra));
  } else if (name == "tree") {
    cmd.kind = CommandKind::kTree;
    BANYAN_RETURN_IF_ERROR(NoArguments(name, rest));
  } else if (name == "show" || name == "history") {
    cmd.kind = CommandKind::kShow;
    if (!rest.empty()) {
      std::string_view extra;
      BANYAN_ASSIGN_OR_RETURN(cmd.id, ParseId(NextWord(rest, &extra), "/show ID"));
      BANYAN_RETURN_IF_ERROR(NoArguments("show ID", extra));
    }
  } else if (name == "compare") {
    cmd.kind = CommandKind::kCompare;
    std::string_view after_first, extra;
    const std::string_view a = NextWord(rest, &after_first);
    const std::string_view b = NextWord(after_first, &extra);
    if (a.empty() || b.empty()) return absl::InvalidArgumentError("/compare needs two turn ids");
    BANYAN_ASSIGN_OR_RETURN(cmd.id, ParseId(a, "/compare A B: A"));
    BANYAN_ASSIGN_OR_RETURN(cmd.id2, ParseId(b, "/compare A B: B"));
    BANYAN_RETURN_IF_ERROR(NoArguments("compare A B", extra));
  } else if (name == "edit" || name == "branch") {
    cmd.kind = name == "edit" ? CommandKind::kEdit : CommandKind::kBranch;
    std::string_view text;
    const std::string_view word = NextWord(rest, &text);
    if (word.empty()) return absl::InvalidArgumentError(absl::StrCat("/", S(S(name)), " needs a turn id and a message"));
    BANYAN_ASSIGN_OR_RETURN(cmd.id, ParseId(word, absl::StrCat("/", S(S(name)), " ID")));
    if (text.empty()) return absl::InvalidArgumentError(absl::StrCat("/", S(S(name)), " ", cmd.id, " needs a message"));
    cmd.text = std::string(text);
  } else if (name == "system") {
    cmd.kind = CommandKind::kSystem;
    if (rest.empty()) return absl::InvalidArgumentError("/system needs the system prompt text");
    cmd.text = std::string(rest);
  } else if (name == "save" || name == "load") {
    cmd.kind = name == "save" ? CommandKind::kSave : CommandKind::kLoad;
    if (rest.empty()) return absl::InvalidArgumentError(absl::StrCat("/", S(S(name)), " needs a file name"));
    cmd.text = std::string(rest);
  } else if (name == "set") {
    cmd.kind = CommandKind::kSet;
    std::string_view value;
    const std::string_view key = NextWord(rest, &value);
    if (!key.empty()) {
      std::string_view extra;
      const std::string_view v = NextWord(value, &extra);
      if (v.empty()) return absl::InvalidArgumentError(absl::StrCat("/set ", S(S(key)), " needs a value"));
      BANYAN_RETURN_IF_ERROR(NoArguments("set KEY VALUE", extra));
      ChatSettings probe;  // validates key and value now, not at use
      BANYAN_RETURN_IF_ERROR(ApplySetting(probe, key, v));
      cmd.key = std::string(key);
      cmd.text = std::string(v);
    }
  } else if (name == "stats") {
    cmd.kind = CommandKind::kStats;
    BANYAN_RETURN_IF_ERROR(NoArguments(name, rest));
  } else if (name == "help" || name == "?") {
    cmd.kind = CommandKind::kHelp;
  } else if (name == "quit" || name == "exit") {
    cmd.kind = CommandKind::kQuit;
    BANYAN_RETURN_IF_ERROR(NoArguments(name, rest));
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown command ", Quote(absl::StrCat("/", S(S(name)))),
                     "; /help lists the commands (start a message with '\\' to send a literal '/')"));
  }
  return cmd;
}

absl::Status ApplySetting(ChatSettings& settings, std::string_view key, std::string_view value) {
  BANYAN_ASSIGN_OR_RETURN(const double v, ParseNumber(key, value));
  ChatSettings s = settings;
  if (key == "temperature") {
    BANYAN_RETURN_IF_ERROR(Range(key, v, 0, 100));
    s.temperature = static_cast<float>(v);
  } else if (key == "top_p") {
    BANYAN_RETURN_IF_ERROR(Range(key, v, 0, 1));
    if (v == 0) return absl::InvalidArgumentError("top_p must be > 0 (1 turns it off)");
    s.top_p = static_cast<float>(v);
  } else if (key == "top_k") {
    BANYAN_RETURN_IF_ERROR(Range(key, v, 0, 1 << 30));
    BANYAN_RETURN_IF_ERROR(Integer(key, v));
    s.top_k = static_cast<int32_t>(v);
  } else if (key == "min_p") {
    BANYAN_RETURN_IF_ERROR(Range(key, v, 0, 1));
    s.min_p = static_cast<float>(v);
  } else if (key == "repetition_penalty") {
    BANYAN_RETURN_IF_ERROR(Range(key, v, 0.01, 100));
    s.repetition_penalty = static_cast<float>(v);
  } else if (key == "max_tokens") {
    BANYAN_RETURN_IF_ERROR(Range(key, v, 1, 1 << 20));
    BANYAN_RETURN_IF_ERROR(Integer(key, v));
    s.max_tokens = static_cast<int32_t>(v);
  } else if (key == "seed") {
    BANYAN_RETURN_IF_ERROR(Range(key, v, 0, 9007199254740992.0));  // 2^53: exact in a double
    BANYAN_RETURN_IF_ERROR(Integer(key, v));
    s.seed = static_cast<uint64_t>(v);
  } else {
    return absl::InvalidArgumentError(absl::StrCat(
        "unknown setting ", Quote(S(key)),
        " (temperature, top_p, top_k, min_p, repetition_penalty, max_tokens, seed)"));
  }
  settings = s;
  return absl::OkStatus();
}

std::string FormatSettings(const ChatSettings& s) {
  return absl::StrCat("temperature=", s.temperature, " top_p=", s.top_p, " top_k=", s.top_k,
                      " min_p=", s.min_p, " repetition_penalty=", s.repetition_penalty,
                      " max_tokens=", s.max_tokens, " seed=", s.seed);
}

absl::StatusOr<ChatSettings> ParseSettings(std::string_view text) {
  ChatSettings s;
  for (absl::string_view item : absl::StrSplit(absl::string_view(text.data(), text.size()), ' ',
                                               absl::SkipEmpty())) {
    const size_t eq = item.find('=');
    if (eq == absl::string_view::npos) {
      return absl::InvalidArgumentError(absl::StrCat("settings entry without '=': ", Quote(std::string(item))));
    }
    const std::string key(item.substr(0, eq));
    const std::string value(item.substr(eq + 1));
    BANYAN_RETURN_IF_ERROR(ApplySetting(s, key, value));
  }
  return s;
}

std::string HelpText() {
  return R"(Type a message to talk on the current branch; the reply streams as it is written.
Every turn has an id (see /tree); branches share the KV cache of their common start.
  /fork [N]          N alternative replies (sampled, default 3) to the current user turn
  /regen             one more alternative reply to the current user turn
  /go ID             switch to turn ID (0: an empty conversation)
  /tree              the turn tree: ids, previews, tokens, KV shared with the parent
  /show [ID]         the conversation from the start to turn ID (default: the current turn)
  /compare A B       the last replies of two branches side by side, a word diff and their
                     log-likelihoods (each under its own prompt and under the other's)
  /edit K TEXT       change user turn K: a sibling turn with TEXT, then a reply
  /branch ID TEXT    continue after turn ID with the user message TEXT, then a reply
  /system TEXT       start a new conversation with system prompt TEXT
  /save FILE         save the whole tree (atomically); /load FILE replaces it
  /set KEY VALUE     temperature, top_p, top_k, min_p, repetition_penalty, max_tokens, seed
  /set               show the settings
  /stats             tokens generated, prefilled, reused from the cache, shared by forks; tok/s
  /help, /quit
Lines starting with '#' are comments; start a message with '\' to send it literally.
)";
}

}  // namespace banyan::samples::chat

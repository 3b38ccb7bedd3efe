#include "samples/branching_chat/chat_repl.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "samples/branching_chat/chat_parser.h"
#include "samples/branching_chat/chat_view.h"

namespace banyan::samples::chat {
namespace {

// Streams a reply: a header when it starts, its text as it comes.
ReplyObserver Streaming(std::ostream& out, std::atomic<bool>* interrupt, bool* started) {
  ReplyObserver o;
  if (interrupt != nullptr) {
    interrupt->store(false);
    o.keep_going = [interrupt] { return !interrupt->exchange(false); };
  }
  o.on_start = [&out, started](int32_t user, int32_t reply) {
    *started = true;
    out << "[" << reply << "] assistant (reply to [" << user << "]):\n    " << std::flush;
  };
  o.on_text = [&out](std::string_view delta) {
    // Keep the reply indented under its header.
    for (const char c : Printable(delta)) {
      out << c;
      if (c == '\n') out << "    ";
    }
    out << std::flush;
  };
  return o;
}

// A reply that failed after its header was printed: end that line first.
absl::Status Unfinished(absl::Status status, bool started, std::ostream& out) {
  if (started) out << "\n";
  return status;
}

void ReplyFooter(const ChatSession& session, int32_t id, std::ostream& out) {
  const Turn& t = *session.Find(id);
  out << absl::StrFormat("\n    (%d tokens, %.1f tok/s, %s, logp %.2f)\n", t.reply_tokens,
                         t.seconds > 0 ? t.reply_tokens / t.seconds : 0.0, t.finish, t.logprob);
}

absl::Status Run(ChatSession& session, const ChatCommand& cmd, std::ostream& out, bool& quit,
                 std::atomic<bool>* interrupt) {
  switch (cmd.kind) {
    case CommandKind::kNone:
      return absl::OkStatus();
    case CommandKind::kSay:
    case CommandKind::kEdit:
    case CommandKind::kBranch: {
      bool started = false;
      const ReplyObserver observer = Streaming(out, interrupt, &started);
      absl::StatusOr<int32_t> reply =
          cmd.kind == CommandKind::kSay    ? session.Say(cmd.text, observer)
          : cmd.kind == CommandKind::kEdit ? session.Edit(cmd.id, cmd.text, observer)
                                           : session.BranchFrom(cmd.id, cmd.text, observer);
      if (!reply.ok()) return Unfinished(reply.status(), started, out);
      ReplyFooter(session, *reply, out);
      return absl::OkStatus();
    }
    case CommandKind::kRegen: {
      bool started = false;
      absl::StatusOr<int32_t> reply = session.Regen(Streaming(out, interrupt, &started));
      if (!reply.ok()) return Unfinished(reply.status(), started, out);
      ReplyFooter(session, *reply, out);
      return absl::OkStatus();
    }
    case CommandKind::kFork: {
      absl::StatusOr<std::vector<int32_t>> replies = session.Fork(cmd.count);
      if (!replies.ok()) return replies.status();
      const Turn& user = *session.Find(session.Find(replies->front())->parent);
      out << replies->size() << " replies to [" << user.id << "], decoded together sharing its "
          << user.tokens.size() << " tokens of KV:\n";
      for (int32_t id : *replies) {
        const Turn& t = *session.Find(id);
        out << absl::StrFormat("[%d] (%d tokens, logp %.2f, %s)\n    %s\n", id, t.reply_tokens, t.logprob,
                               t.finish, Preview(t.content, 400));
      }
      if (session.settings().temperature == 0 && replies->size() > 1) {
        out << "note: temperature 0 is greedy, so the replies are the same; /set temperature 0.7\n";
      }
      out << "current: [" << session.current() << "]\n";
      return absl::OkStatus();
    }
    case CommandKind::kGo: {
      if (absl::Status s = session.Go(cmd.id); !s.ok()) return s;
      out << RenderConversation(session, session.current());
      return absl::OkStatus();
    }
    case CommandKind::kTree:
      out << RenderTree(session);
      return absl::OkStatus();
    case CommandKind::kShow: {
      const int64_t id = cmd.id < 0 ? session.current() : cmd.id;
      if (id != 0 && session.Find(id) == nullptr) {
        return absl::NotFoundError(absl::StrCat("/show: there is no turn ", id, " (see /tree)"));
      }
      out << RenderConversation(session, static_cast<int32_t>(id));
      return absl::OkStatus();
    }
    case CommandKind::kCompare: {
      absl::StatusOr<Comparison> c = session.Compare(cmd.id, cmd.id2);
      if (!c.ok()) return c.status();
      out << RenderComparison(*c);
      return absl::OkStatus();
    }
    case CommandKind::kSystem: {
      absl::StatusOr<int32_t> id = session.System(cmd.text);
      if (!id.ok()) return id.status();
      out << "[" << *id << "] system prompt set: a new conversation starts here\n";
      return absl::OkStatus();
    }
    case CommandKind::kSave: {
      if (absl::Status s = session.Save(cmd.text); !s.ok()) return s;
      out << "saved " << session.turns().size() << " turns to " << cmd.text << "\n";
      return absl::OkStatus();
    }
    case CommandKind::kLoad: {
      if (absl::Status s = session.Load(cmd.text); !s.ok()) return s;
      out << "loaded " << session.turns().size() << " turns from " << cmd.text << "; current: ["
          << session.current() << "]\n";
      return absl::OkStatus();
    }
    case CommandKind::kSet:
      if (!cmd.key.empty()) {
        if (absl::Status s = ApplySetting(session.settings(), cmd.key, cmd.text); !s.ok()) return s;
      }
      out << FormatSettings(session.settings()) << "\n";
      return absl::OkStatus();
    case CommandKind::kStats:
      out << RenderStats(session);
      return absl::OkStatus();
    case CommandKind::kHelp:
      out << HelpText();
      return absl::OkStatus();
    case CommandKind::kQuit:
      quit = true;
      return absl::OkStatus();
  }
  return absl::InternalError("unhandled command");
}

}  // namespace

LineResult ExecuteLine(ChatSession& session, std::string_view line, std::ostream& out,
                       std::atomic<bool>* interrupt) {
  LineResult result;
  absl::StatusOr<ChatCommand> cmd = ParseCommand(line);
  result.status = cmd.ok() ? Run(session, *cmd, out, result.quit, interrupt) : cmd.status();
  if (!result.status.ok()) out << "error: " << result.status.ToString() << "\n";
  out << std::flush;
  return result;
}

absl::Status RunRepl(ChatSession& session, std::istream& in, std::ostream& out, const ReplOptions& options,
                     int* failures) {
  if (failures != nullptr) *failures = 0;
  std::string line;
  while (true) {
    out << options.prompt << std::flush;
    std::string joined;
    bool got = false;
    while (std::getline(in, line)) {
      got = true;
      if (!line.empty() && line.back() == '\r') line.pop_back();
      if (!line.empty() && line.back() == '\\' && joined.size() < kMaxLineBytes) {
        line.pop_back();
        absl::StrAppend(&joined, line, "\n");
        continue;
      }
      joined += line;
      break;
    }
    if (!got) {
      if (!options.prompt.empty()) out << "\n";
      return absl::OkStatus();
    }
    if (options.echo) out << joined << "\n";
    LineResult r = ExecuteLine(session, joined, out, options.interrupt);
    if (!r.status.ok()) {
      if (failures != nullptr) ++*failures;
      if (options.stop_on_error) return r.status;
    }
    if (r.quit) return absl::OkStatus();
  }
}

}  // namespace banyan::samples::chat

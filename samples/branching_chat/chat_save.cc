// ChatSession::Save / Load: the engine's snapshot plus the chat's structure in
// branch metadata (see chat_session.h for the keys).
#include <charconv>
#include <map>
#include <set>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "banyan/status_macros.h"
#include "samples/branching_chat/chat_session.h"

namespace banyan::samples::chat {
namespace {

constexpr char kVersion[] = "1";

std::string Get(const std::map<std::string, std::string>& m, const std::string& key) {
  auto it = m.find(key);
  return it == m.end() ? std::string() : it->second;
}

absl::StatusOr<int64_t> GetInt(const std::map<std::string, std::string>& m, const std::string& key,
                               const std::string& where) {
  int64_t v = 0;
  const std::string s = Get(m, key);
  if (!absl::SimpleAtoi(s, &v) || v < 0 || v > kMaxTurnId + 1) {
    return absl::DataLossError(absl::StrCat(where, ": metadata ", key, " is not a valid number"));
  }
  return v;
}

// One loaded branch, checked and turned into a Turn.
absl::StatusOr<Turn> TurnFromBranch(BranchId id, const BranchInfo& info, const std::string& where) {
  const std::map<std::string, std::string>& m = info.metadata;
  Turn t;
  t.branch = id;
  BANYAN_ASSIGN_OR_RETURN(const int64_t turn_id, GetInt(m, "chat.id", where));
  BANYAN_ASSIGN_OR_RETURN(const int64_t parent, GetInt(m, "chat.parent", where));
  BANYAN_ASSIGN_OR_RETURN(const int64_t tokens, GetInt(m, "chat.tokens", where));
  if (turn_id < 1 || turn_id > kMaxTurnId || parent >= turn_id) {
    return absl::DataLossError(absl::StrCat(where, ": turn ", turn_id, " with parent ", parent,
                                            " (ids are positive and parents come first)"));
  }
  t.id = static_cast<int32_t>(turn_id);
  t.parent = static_cast<int32_t>(parent);
  const std::string role = Get(m, "chat.role");
  if (role == "system") {
    t.role = Role::kSystem;
  } else if (role == "user") {
    t.role = Role::kUser;
  } else if (role == "assistant") {
    t.role = Role::kAssistant;
  } else {
    return absl::DataLossError(absl::StrCat(where, ": turn ", t.id, " has an unknown role"));
  }
  t.content = Get(m, "chat.content");
  t.tokens = info.tokens;
  if (static_cast<int64_t>(t.tokens.size()) != tokens) {
    return absl::DataLossError(absl::StrCat(where, ": turn ", t.id, " holds ", t.tokens.size(),
                                            " tokens, its metadata says ", tokens));
  }
  if (t.role == Role::kAssistant) {
    const std::string reply = Get(m, "chat.reply");
    std::vector<std::string> parts = absl::StrSplit(reply, absl::MaxSplits(' ', 3));
    if (parts.size() != 4 || !absl::SimpleAtoi(parts[0], &t.reply_tokens) ||
        !absl::SimpleAtod(parts[1], &t.logprob) || !absl::SimpleAtod(parts[2], &t.seconds) ||
        t.reply_tokens < 0) {
      return absl::DataLossError(absl::StrCat(where, ": reply ", t.id, " has malformed chat.reply metadata"));
    }
    t.finish = parts[3];
  }
  return t;
}

}  // namespace

absl::Status ChatSession::Save(const std::string& path) {
  if (turns_.empty()) return absl::FailedPreconditionError("nothing to save: the conversation is empty");
  // The session's own state rides on the first turn's branch for the save.
  const BranchId anchor = turns_.begin()->second.branch;
  const std::pair<const char*, std::string> session[] = {
      {"chat.session.current", absl::StrCat(current_)},
      {"chat.session.next_id", absl::StrCat(next_id_)},
      {"chat.session.generations", absl::StrCat(generations_)},
      {"chat.session.settings", FormatSettings(settings_)},
  };
  absl::Status status;
  for (const auto& [key, value] : session) {
    if (status.ok()) status = engine_->SetMetadata(anchor, key, value);
  }
  if (status.ok()) status = engine_->Save(path);
  for (const auto& [key, value] : session) (void)engine_->SetMetadata(anchor, key, "");
  return status;
}

absl::Status ChatSession::Load(const std::string& path) {
  BANYAN_ASSIGN_OR_RETURN(std::vector<BranchId> loaded, engine_->Load(path));
  std::map<int32_t, Turn> turns;
  std::vector<BranchId> foreign;  // branches without chat metadata: not ours
  std::map<std::string, std::string> session;
  auto build = [&]() -> absl::Status {
    for (size_t i = 0; i < loaded.size(); ++i) {
      BANYAN_ASSIGN_OR_RETURN(BranchInfo info, engine_->Inspect(loaded[i]));
      if (!info.metadata.contains("chat.id")) {
        foreign.push_back(loaded[i]);
        continue;
      }
      const std::string version = Get(info.metadata, "chat.version");
      if (version != kVersion) {
        return absl::InvalidArgumentError(absl::StrCat(path, ": chat save version \"", version,
                                                       "\" (this program reads ", kVersion, ")"));
      }
      BANYAN_ASSIGN_OR_RETURN(Turn t, TurnFromBranch(loaded[i], info, path));
      if (info.metadata.contains("chat.session.next_id")) {
        if (!session.empty()) return absl::DataLossError(absl::StrCat(path, ": two session records"));
        for (const auto& [k, v] : info.metadata) {
          if (k.starts_with("chat.session.")) session[k] = v;
        }
      }
      const int32_t id = t.id;
      if (!turns.emplace(id, std::move(t)).second) {
        return absl::DataLossError(absl::StrCat(path, ": turn ", id, " appears twice"));
      }
    }
    if (turns.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": not a branching-chat save (no branch carries chat metadata)"));
    }
    if (session.empty()) return absl::DataLossError(absl::StrCat(path, ": the session record is missing"));
    // Structure: parents exist and the roles alternate as the chat builds them.
    for (auto& [id, t] : turns) {
      if (t.parent == 0) {
        if (t.role == Role::kAssistant) {
          return absl::DataLossError(absl::StrCat(path, ": reply ", id, " answers no user turn"));
        }
        continue;
      }
      auto p = turns.find(t.parent);
      if (p == turns.end()) {
        return absl::DataLossError(absl::StrCat(path, ": turn ", id, "'s parent ", t.parent, " is missing"));
      }
      const Role pr = p->second.role;
      const bool ok = t.role == Role::kAssistant ? pr == Role::kUser
                      : t.role == Role::kUser    ? pr != Role::kUser
                                                 : false;  // system turns open conversations
      if (!ok) {
        return absl::DataLossError(absl::StrCat(path, ": a ", RoleName(t.role), " turn (", id,
                                                ") cannot follow a ", RoleName(pr), " turn"));
      }
      p->second.children.push_back(id);
    }
    return absl::OkStatus();
  };
  absl::Status status = build();
  int64_t current = 0, next_id = 0;
  uint64_t generations = 0;
  absl::StatusOr<ChatSettings> settings = settings_;
  if (status.ok()) {
    const std::string where = absl::StrCat(path, " (session)");
    absl::StatusOr<int64_t> c = GetInt(session, "chat.session.current", where);
    absl::StatusOr<int64_t> n = GetInt(session, "chat.session.next_id", where);
    settings = ParseSettings(Get(session, "chat.session.settings"));
    if (!c.ok()) {
      status = c.status();
    } else if (!n.ok()) {
      status = n.status();
    } else if (!settings.ok()) {
      status = absl::DataLossError(absl::StrCat(where, ": ", settings.status().message()));
    } else if (!absl::SimpleAtoi(Get(session, "chat.session.generations"), &generations)) {
      status = absl::DataLossError(absl::StrCat(where, ": malformed generation counter"));
    } else if ((*c != 0 && !turns.contains(static_cast<int32_t>(*c))) || *n <= turns.rbegin()->first) {
      status = absl::DataLossError(absl::StrCat(where, ": current turn or next id out of place"));
    }
    if (status.ok()) {
      current = *c;
      next_id = *n;
    }
  }
  if (!status.ok()) {
    for (BranchId b : loaded) (void)engine_->Release(b);
    return status;
  }
  for (BranchId b : foreign) (void)engine_->Release(b);
  for (const auto& [id, t] : turns_) (void)engine_->Release(t.branch);
  turns_ = std::move(turns);
  // The anchor's session entries would otherwise be copied into its forks.
  for (const auto& [id, t] : turns_) {
    for (const auto& [k, v] : session) (void)engine_->SetMetadata(t.branch, k, "");
  }
  current_ = static_cast<int32_t>(current);
  next_id_ = static_cast<int32_t>(next_id);
  generations_ = generations;
  settings_ = *settings;
  return absl::OkStatus();
}

}  // namespace banyan::samples::chat

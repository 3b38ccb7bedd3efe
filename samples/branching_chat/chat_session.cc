// ChatSession: turns, branches and replies (Save / Load are in chat_save.cc).
#include "samples/branching_chat/chat_session.h"

#include <algorithm>
#include <chrono>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "banyan/status_macros.h"

namespace banyan::samples::chat {
namespace {

// splitmix64: a seed per reply request from (settings seed, request number).
uint64_t Mix(uint64_t a, uint64_t b) {
  uint64_t z = a + 0x9e3779b97f4a7c15ULL * (b + 1);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

std::string FinishName(FinishReason r) {
  switch (r) {
    case FinishReason::kEos: return "end of turn";
    case FinishReason::kStop: return "stop";
    case FinishReason::kLength: return "length";
    case FinishReason::kCallback: return "stopped";
  }
  return "?";
}

}  // namespace

const char* RoleName(Role role) {
  switch (role) {
    case Role::kSystem: return "system";
    case Role::kUser: return "user";
    case Role::kAssistant: return "assistant";
  }
  return "?";
}

ChatSession::ChatSession(Engine* engine, ChatSettings settings)
    : engine_(engine), settings_(settings) {}

ChatSession::~ChatSession() {
  for (const auto& [id, turn] : turns_) (void)engine_->Release(turn.branch);
}

const Turn* ChatSession::Find(int64_t id) const {
  auto it = turns_.find(static_cast<int32_t>(std::clamp<int64_t>(id, -1, kMaxTurnId)));
  return it == turns_.end() ? nullptr : &it->second;
}

absl::StatusOr<Turn*> ChatSession::Lookup(int64_t id, std::string_view what) {
  auto it = turns_.find(static_cast<int32_t>(std::clamp<int64_t>(id, -1, kMaxTurnId)));
  if (it == turns_.end()) {
    return absl::NotFoundError(absl::StrCat(std::string(what), ": there is no turn ", id, " (see /tree)"));
  }
  return &it->second;
}

std::vector<int32_t> ChatSession::RootTurns() const {
  std::vector<int32_t> out;
  for (const auto& [id, turn] : turns_) {
    if (turn.parent == 0) out.push_back(id);
  }
  return out;
}

std::vector<int32_t> ChatSession::PathTo(int32_t id) const {
  std::vector<int32_t> path;
  for (const Turn* t = Find(id); t != nullptr; t = Find(t->parent)) path.push_back(t->id);
  std::reverse(path.begin(), path.end());
  return path;
}

std::vector<ChatMessage> ChatSession::Messages(int32_t upto) const {
  std::vector<ChatMessage> messages;
  for (int32_t id : PathTo(upto)) {
    const Turn& t = turns_.at(id);
    messages.push_back({std::string(RoleName(t.role)), t.content});
  }
  return messages;
}

GenerateOptions ChatSession::Options() {
  GenerateOptions g;
  g.sampling.temperature = settings_.temperature;
  g.sampling.top_p = settings_.top_p;
  g.sampling.top_k = settings_.top_k;
  g.sampling.min_p = settings_.min_p;
  g.sampling.repetition_penalty = settings_.repetition_penalty;
  g.sampling.seed = Mix(settings_.seed, generations_);
  g.max_tokens = settings_.max_tokens;
  return g;
}

absl::StatusOr<Turn> ChatSession::MakeTurn(int32_t parent, Role role, std::string content) {
  std::vector<ChatMessage> messages = Messages(parent);
  messages.push_back({std::string(RoleName(role)), content});
  BANYAN_ASSIGN_OR_RETURN(std::string full,
                          engine_->ApplyChatTemplate(messages, role == Role::kUser));
  Turn turn;
  turn.id = next_id_;
  turn.parent = parent;
  turn.role = role;
  turn.content = std::move(content);
  const Turn* p = Find(parent);
  bool fresh = false;
  std::string parent_text;
  if (p != nullptr) {
    BANYAN_ASSIGN_OR_RETURN(parent_text, engine_->Detokenize(p->tokens));
  }
  if (p != nullptr && full.size() > parent_text.size() &&
      full.compare(0, parent_text.size(), parent_text) == 0) {
    // The conversation continues the parent's text: fork it, share its KV.
    BANYAN_ASSIGN_OR_RETURN(std::vector<BranchId> kid, engine_->Fork(p->branch, 1));
    turn.branch = kid[0];
    const absl::Status appended =
        engine_->Append(turn.branch, Prompt::Text(full.substr(parent_text.size())));
    if (!appended.ok()) {
      (void)engine_->Release(turn.branch);
      return appended;
    }
  } else {
    // A rendering that does not extend the parent's (or the first turn): a
    // new branch; the engine still reuses the cached KV of the common prefix.
    BANYAN_ASSIGN_OR_RETURN(turn.branch, engine_->NewBranch(Prompt::Text(full)));
    fresh = true;
  }
  absl::StatusOr<BranchInfo> info = engine_->Inspect(turn.branch);
  if (!info.ok()) {
    (void)engine_->Release(turn.branch);
    return info.status();
  }
  turn.tokens = std::move(info->tokens);
  if (fresh) turn.cache_reused = info->tokens_reused;
  return turn;
}

absl::Status ChatSession::WriteMetadata(const Turn& t) {
  const BranchId b = t.branch;
  // Forks inherit their parent's metadata: every key is rewritten or erased.
  BANYAN_RETURN_IF_ERROR(engine_->SetMetadata(b, "chat.version", "1"));
  BANYAN_RETURN_IF_ERROR(engine_->SetMetadata(b, "chat.id", absl::StrCat(t.id)));
  BANYAN_RETURN_IF_ERROR(engine_->SetMetadata(b, "chat.parent", absl::StrCat(t.parent)));
  BANYAN_RETURN_IF_ERROR(engine_->SetMetadata(b, "chat.role", std::string(RoleName(t.role))));
  BANYAN_RETURN_IF_ERROR(engine_->SetMetadata(b, "chat.content", t.content));
  BANYAN_RETURN_IF_ERROR(engine_->SetMetadata(b, "chat.tokens", absl::StrCat(t.tokens.size())));
  BANYAN_RETURN_IF_ERROR(engine_->SetMetadata(
      b, "chat.reply",
      t.role == Role::kAssistant
          ? absl::StrFormat("%d %.17g %.17g %s", t.reply_tokens, t.logprob, t.seconds, t.finish)
          : ""));
  for (const char* key : {"chat.session.current", "chat.session.next_id", "chat.session.generations",
                          "chat.session.settings"}) {
    BANYAN_RETURN_IF_ERROR(engine_->SetMetadata(b, key, ""));
  }
  return absl::OkStatus();
}

absl::Status ChatSession::Adopt(Turn turn) {
  const absl::Status written = WriteMetadata(turn);
  if (!written.ok()) {
    (void)engine_->Release(turn.branch);
    return written;
  }
  const int32_t id = turn.id;
  next_id_ = std::max(next_id_, id + 1);
  if (Turn* p = turn.parent == 0 ? nullptr : &turns_.at(turn.parent)) p->children.push_back(id);
  turns_.emplace(id, std::move(turn));
  return absl::OkStatus();
}

void ChatSession::Remove(int32_t id) {
  auto it = turns_.find(id);
  if (it == turns_.end()) return;
  (void)engine_->Release(it->second.branch);
  if (auto p = turns_.find(it->second.parent); p != turns_.end()) {
    std::erase(p->second.children, id);
  }
  turns_.erase(it);
}

absl::StatusOr<int32_t> ChatSession::ReplyTarget() const {
  const Turn* t = Find(current_);
  if (t != nullptr && t->role == Role::kAssistant) t = Find(t->parent);
  if (t == nullptr || t->role != Role::kUser) {
    return absl::FailedPreconditionError(
        "no user turn to reply to here: say something first (or /go to a user turn or a reply)");
  }
  return t->id;
}

absl::StatusOr<std::vector<int32_t>> ChatSession::Reply(int32_t user, int32_t n,
                                                        const ReplyObserver* observer) {
  if (n < 1 || n > kMaxFork) {
    return absl::InvalidArgumentError(absl::StrCat("replies per request must be in [1, ", kMaxFork, "]"));
  }
  const Turn& u = turns_.at(user);
  BANYAN_ASSIGN_OR_RETURN(std::vector<BranchId> kids, engine_->Fork(u.branch, n));
  GenerateOptions g = Options();
  ++generations_;
  if (observer != nullptr && observer->on_start) observer->on_start(user, next_id_);
  if (observer != nullptr && (observer->on_text || observer->keep_going)) {
    g.callbacks.on_token = [observer](BranchId, int32_t, std::string_view delta, float) {
      if (!delta.empty() && observer->on_text) observer->on_text(delta);
      return !observer->keep_going || observer->keep_going();
    };
  }
  const auto start = std::chrono::steady_clock::now();
  std::vector<absl::StatusOr<GenerateResult>> results = engine_->GenerateMany(kids, g);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::vector<int32_t> ids;
  absl::Status first_error;
  for (int32_t i = 0; i < n; ++i) {
    absl::StatusOr<BranchInfo> info =
        results[i].ok() ? engine_->Inspect(kids[i]) : absl::StatusOr<BranchInfo>(results[i].status());
    if (!info.ok()) {
      (void)engine_->Release(kids[i]);
      if (first_error.ok()) first_error = info.status();
      continue;
    }
    Turn t;
    t.id = next_id_;
    t.parent = user;
    t.role = Role::kAssistant;
    t.content = ToValidUtf8(results[i]->text);
    t.branch = kids[i];
    t.tokens = std::move(info->tokens);
    t.reply_tokens = static_cast<int32_t>(results[i]->tokens.size());
    for (float lp : results[i]->logprobs) t.logprob += lp;
    t.finish = FinishName(results[i]->finish);
    t.seconds = seconds;
    reply_tokens_ += t.reply_tokens;
    const absl::Status adopted = Adopt(std::move(t));
    if (!adopted.ok()) {
      if (first_error.ok()) first_error = adopted;
      continue;
    }
    ids.push_back(next_id_ - 1);
  }
  reply_seconds_ += seconds;
  if (ids.empty()) return first_error;
  current_ = ids.front();
  return ids;
}

absl::StatusOr<int32_t> ChatSession::UserTurnAndReply(int32_t parent, std::string_view text,
                                                      const ReplyObserver& observer) {
  BANYAN_ASSIGN_OR_RETURN(Turn user, MakeTurn(parent, Role::kUser, std::string(text)));
  const int32_t id = user.id;
  BANYAN_RETURN_IF_ERROR(Adopt(std::move(user)));
  absl::StatusOr<std::vector<int32_t>> replies = Reply(id, 1, &observer);
  if (!replies.ok()) {
    Remove(id);  // nothing half-done stays behind
    next_id_ = id;
    return replies.status();
  }
  return replies->front();
}

absl::StatusOr<int32_t> ChatSession::Say(std::string_view text, const ReplyObserver& observer) {
  if (const Turn* t = Find(current_); t != nullptr && t->role == Role::kUser) {
    return absl::FailedPreconditionError(absl::StrCat(
        "turn ", current_, " is a user turn: /regen for a reply to it, /edit ", current_,
        " TEXT to change it, or /go to a reply first"));
  }
  return UserTurnAndReply(current_, text, observer);
}

absl::StatusOr<std::vector<int32_t>> ChatSession::Fork(int32_t n) {
  BANYAN_ASSIGN_OR_RETURN(const int32_t user, ReplyTarget());
  return Reply(user, n, nullptr);
}

absl::StatusOr<int32_t> ChatSession::Regen(const ReplyObserver& observer) {
  BANYAN_ASSIGN_OR_RETURN(const int32_t user, ReplyTarget());
  BANYAN_ASSIGN_OR_RETURN(std::vector<int32_t> ids, Reply(user, 1, &observer));
  return ids.front();
}

absl::Status ChatSession::Go(int64_t id) {
  if (id != 0) BANYAN_RETURN_IF_ERROR(Lookup(id, "/go").status());
  current_ = static_cast<int32_t>(id);
  return absl::OkStatus();
}

absl::StatusOr<int32_t> ChatSession::Edit(int64_t user_turn, std::string_view text,
                                          const ReplyObserver& observer) {
  BANYAN_ASSIGN_OR_RETURN(Turn * t, Lookup(user_turn, "/edit"));
  if (t->role != Role::kUser) {
    return absl::InvalidArgumentError(absl::StrCat("turn ", user_turn, " (", RoleName(t->role),
                                                   ") is not a user turn; /edit changes user turns (/branch ",
                                                   user_turn, " TEXT continues after it)"));
  }
  return UserTurnAndReply(t->parent, text, observer);
}

absl::StatusOr<int32_t> ChatSession::BranchFrom(int64_t turn, std::string_view text,
                                                const ReplyObserver& observer) {
  if (turn != 0) {
    BANYAN_ASSIGN_OR_RETURN(Turn * t, Lookup(turn, "/branch"));
    if (t->role == Role::kUser) {
      return absl::InvalidArgumentError(absl::StrCat("turn ", turn, " is a user turn; /branch continues after a "
                                                     "reply or a system prompt (/edit ", turn,
                                                     " TEXT replaces a user turn)"));
    }
  }
  return UserTurnAndReply(static_cast<int32_t>(turn), text, observer);
}

absl::StatusOr<int32_t> ChatSession::System(std::string_view text) {
  BANYAN_ASSIGN_OR_RETURN(Turn turn, MakeTurn(0, Role::kSystem, std::string(text)));
  const int32_t id = turn.id;
  BANYAN_RETURN_IF_ERROR(Adopt(std::move(turn)));
  current_ = id;
  return id;
}

absl::StatusOr<Comparison> ChatSession::Compare(int64_t a, int64_t b) {
  Comparison c;
  int32_t ids[2];
  const int64_t asked[2] = {a, b};
  for (int k = 0; k < 2; ++k) {
    BANYAN_ASSIGN_OR_RETURN(const Turn* t, Lookup(asked[k], "/compare"));
    while (t != nullptr && t->role != Role::kAssistant) t = Find(t->parent);
    if (t == nullptr) {
      return absl::FailedPreconditionError(absl::StrCat("no reply on the path to turn ", asked[k]));
    }
    ids[k] = t->id;
  }
  // Each reply's own tokens: what its branch adds to its user turn's.
  std::vector<int32_t> reply_tokens[2];
  CompareSide* sides[2] = {&c.a, &c.b};
  for (int k = 0; k < 2; ++k) {
    const Turn& r = turns_.at(ids[k]);
    const Turn& u = turns_.at(r.parent);
    if (r.tokens.size() >= u.tokens.size() && std::equal(u.tokens.begin(), u.tokens.end(), r.tokens.begin())) {
      reply_tokens[k].assign(r.tokens.begin() + static_cast<std::ptrdiff_t>(u.tokens.size()), r.tokens.end());
    } else {
      BANYAN_ASSIGN_OR_RETURN(reply_tokens[k], engine_->Tokenize(r.content));
    }
    if (reply_tokens[k].empty()) {
      return absl::FailedPreconditionError(absl::StrCat("reply ", r.id, " is empty: nothing to score"));
    }
    sides[k]->reply = r.id;
    sides[k]->context = u.id;
    sides[k]->text = r.content;
    sides[k]->tokens = static_cast<int32_t>(reply_tokens[k].size());
  }
  for (int k = 0; k < 2; ++k) {
    const Turn& own = turns_.at(sides[k]->context);
    BANYAN_ASSIGN_OR_RETURN(ScoreResult s, engine_->Score(own.branch, Prompt::Tokens(reply_tokens[k])));
    sides[k]->logprob = s.logprob;
    if (sides[0]->context != sides[1]->context) {
      const Turn& other = turns_.at(sides[1 - k]->context);
      BANYAN_ASSIGN_OR_RETURN(ScoreResult x, engine_->Score(other.branch, Prompt::Tokens(reply_tokens[k])));
      sides[k]->logprob_other = x.logprob;
    }
  }
  const std::vector<int32_t>& ta = turns_.at(ids[0]).tokens;
  const std::vector<int32_t>& tb = turns_.at(ids[1]).tokens;
  const size_t n = std::min(ta.size(), tb.size());
  size_t shared = 0;
  while (shared < n && ta[shared] == tb[shared]) ++shared;
  c.shared_prefix_tokens = static_cast<int32_t>(shared);
  return c;
}

}  // namespace banyan::samples::chat

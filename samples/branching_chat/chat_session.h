// ChatSession: one conversation explored as a tree of turns, over the public
// Engine API (banyan/engine.h) only.
//
// Every turn (system prompt, user message or assistant reply) holds a live
// engine branch with the whole conversation up to and including that turn,
// rendered with the model's own chat template (Engine::ApplyChatTemplate).
// A turn's branch is a fork of its parent's branch whenever the rendering
// allows (the parent's text is a prefix of the child's), so siblings share the
// KV of everything before them; otherwise it is a new branch that still reuses
// the cached KV of the common prefix. Replies stop at the template's
// end-of-turn token (the engine's stop tokens).
//
//   ChatSession session(engine.get(), ChatSettings{});
//   BANYAN_ASSIGN_OR_RETURN(int32_t reply, session.Say("Hi!", observer));
//   BANYAN_ASSIGN_OR_RETURN(std::vector<int32_t> alts, session.Fork(3));
//   BANYAN_RETURN_IF_ERROR(session.Save("chat.banyan"));
//
// Ids: turn ids are 1, 2, 3, ... in creation order and never reused; 0 is the
// root (the empty conversation). Saving and loading keep them.
//
// Save files are the engine's snapshot (Engine::Save: versioned protobuf,
// written atomically) with the chat's own structure in the branches' metadata
// (keys "chat.*": version, id, parent, role, content, token count, and the
// session's current turn, settings and generation counter). Engine::Save
// writes every live branch of the engine: a session should own its engine.
//
// Errors (every method leaves the session as it was when it fails):
//   kNotFound           no turn with that id
//   kInvalidArgument    a turn of the wrong role for the operation, a save
//                       from another model or of another program
//   kFailedPrecondition nothing to reply to, nothing to save
//   kResourceExhausted  the KV budget cannot hold the conversation
//   kDataLoss           a corrupt save file (engine framing or chat metadata)
//   and the engine's own errors (see banyan/engine.h).
//
// Thread-compatible: one thread drives a session. The observer's on_text runs
// on the engine's scheduler thread while the calling thread waits.
#ifndef BANYAN_SAMPLES_BRANCHING_CHAT_CHAT_SESSION_H_
#define BANYAN_SAMPLES_BRANCHING_CHAT_CHAT_SESSION_H_

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "banyan/engine.h"
#include "samples/branching_chat/chat_parser.h"

namespace banyan::samples::chat {

enum class Role { kSystem, kUser, kAssistant };
const char* RoleName(Role role);

struct Turn {
  int32_t id = 0;
  int32_t parent = 0;  // 0: the root
  Role role = Role::kUser;
  std::string content;
  BranchId branch;              // the conversation up to and including this turn
  std::vector<int32_t> tokens;  // that branch's tokens
  std::vector<int32_t> children;
  // Tokens of a branch created anew (not forked) whose KV came from the
  // engine's prefix cache (BranchInfo::tokens_reused); not saved.
  int64_t cache_reused = 0;
  // Assistant turns: the reply's tokens, their summed log-probability as
  // sampled, why it ended ("end of turn", "length", ...) and its decode time.
  int32_t reply_tokens = 0;
  double logprob = 0;
  std::string finish;
  double seconds = 0;
};

// What the caller sees of a reply while it is written.
struct ReplyObserver {
  // Before generation: the user turn replied to and the id the reply gets.
  std::function<void(int32_t user_turn, int32_t reply_turn)> on_start;
  // Text as it is generated (scheduler thread).
  std::function<void(std::string_view delta)> on_text;
  // Asked after every token (scheduler thread): false stops the reply there
  // (it is kept, its finish "stopped"). Must be quick.
  std::function<bool()> keep_going;
};

// One side of a /compare.
struct CompareSide {
  int32_t reply = 0;    // the assistant turn compared
  int32_t context = 0;  // the user turn it answers
  std::string text;
  int32_t tokens = 0;
  double logprob = 0;  // Score of the reply's tokens after its own context
  // Score of the same tokens after the other side's context; absent when both
  // answer the same turn.
  std::optional<double> logprob_other;
};

struct Comparison {
  CompareSide a, b;
  // Tokens the two conversations share from the start (stored once in KV).
  int32_t shared_prefix_tokens = 0;
};

class ChatSession {
 public:
  // `engine` is not owned and must outlive the session. The session owns the
  // branches it creates and releases them when destroyed.
  ChatSession(Engine* engine, ChatSettings settings);
  ~ChatSession();
  ChatSession(const ChatSession&) = delete;
  ChatSession& operator=(const ChatSession&) = delete;

  // A user turn after the current turn, then a (streamed) reply; both become
  // current. Returns the reply's id. REQUIRES: the current turn is not a user
  // turn (kFailedPrecondition: use Regen or Edit).
  absl::StatusOr<int32_t> Say(std::string_view text, const ReplyObserver& observer);
  // n sampled replies to the current user turn (the current turn's own, or the
  // one the current reply answers), decoded together sharing its KV. The
  // first becomes current. Returns their ids.
  absl::StatusOr<std::vector<int32_t>> Fork(int32_t n);
  // One more (streamed) reply to the current user turn; it becomes current.
  absl::StatusOr<int32_t> Regen(const ReplyObserver& observer);
  // Makes turn `id` current (0: the empty conversation).
  absl::Status Go(int64_t id);
  // A sibling of user turn `user_turn` saying `text`, then a reply.
  absl::StatusOr<int32_t> Edit(int64_t user_turn, std::string_view text, const ReplyObserver& observer);
  // A user turn `text` after turn `turn` (not a user turn), then a reply.
  absl::StatusOr<int32_t> BranchFrom(int64_t turn, std::string_view text, const ReplyObserver& observer);
  // A new conversation opened by system prompt `text`; it becomes current.
  absl::StatusOr<int32_t> System(std::string_view text);
  // The last replies on the paths to turns a and b, scored.
  absl::StatusOr<Comparison> Compare(int64_t a, int64_t b);
  // The whole tree, atomically. kFailedPrecondition when there are no turns.
  absl::Status Save(const std::string& path);
  // Replaces the tree with a saved one; on failure the current tree stays.
  absl::Status Load(const std::string& path);

  ChatSettings& settings() { return settings_; }
  const ChatSettings& settings() const { return settings_; }
  int32_t current() const { return current_; }
  // nullptr when there is no such turn (the root 0 included).
  const Turn* Find(int64_t id) const;
  const std::map<int32_t, Turn>& turns() const { return turns_; }
  // Turns whose parent is the root, in creation order.
  std::vector<int32_t> RootTurns() const;
  // Turn ids from the first turn to `id`. REQUIRES: id is 0 or a turn.
  std::vector<int32_t> PathTo(int32_t id) const;
  // Summed over this session's replies: tokens and seconds of generation.
  int64_t reply_tokens() const { return reply_tokens_; }
  double reply_seconds() const { return reply_seconds_; }
  uint64_t generations() const { return generations_; }
  Engine& engine() const { return *engine_; }

 private:
  absl::StatusOr<Turn*> Lookup(int64_t id, std::string_view what);
  // The user turn that /fork and /regen reply to.
  absl::StatusOr<int32_t> ReplyTarget() const;
  // Creates turn (parent, role, content) with its branch (not yet in turns_).
  absl::StatusOr<Turn> MakeTurn(int32_t parent, Role role, std::string content);
  // Adds `turn` to the tree and writes its metadata.
  absl::Status Adopt(Turn turn);
  // n replies to user turn `user`; streams when n == 1 and the observer
  // wants it.
  absl::StatusOr<std::vector<int32_t>> Reply(int32_t user, int32_t n, const ReplyObserver* observer);
  // A user turn under `parent` and its reply; the user turn is removed again
  // when the reply fails.
  absl::StatusOr<int32_t> UserTurnAndReply(int32_t parent, std::string_view text,
                                           const ReplyObserver& observer);
  void Remove(int32_t id);
  absl::Status WriteMetadata(const Turn& turn);
  GenerateOptions Options();
  std::vector<ChatMessage> Messages(int32_t upto) const;

  Engine* engine_;
  ChatSettings settings_;
  std::map<int32_t, Turn> turns_;
  int32_t current_ = 0;
  int32_t next_id_ = 1;
  uint64_t generations_ = 0;  // replies requested so far; seeds each request
  int64_t reply_tokens_ = 0;
  double reply_seconds_ = 0;
};

}  // namespace banyan::samples::chat

#endif  // BANYAN_SAMPLES_BRANCHING_CHAT_CHAT_SESSION_H_

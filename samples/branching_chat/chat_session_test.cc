// ChatSession and the REPL on two engines: the counting engine (a
// deterministic byte-level model with a ChatML template: fast, always there)
// for structure, persistence and every error path, and the real default model
// (SmolLM2-135M-Instruct on the CPU; skipped when absent) for a scripted
// session whose save -> load -> continue must equal continuing in place.
#include <cmath>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "model/default_model.h"
#include "samples/branching_chat/chat_repl.h"
#include "samples/branching_chat/chat_session.h"
#include "samples/branching_chat/chat_view.h"
#include "sdk/base/status_testing.h"
#include "sdk/engine/testing/counting_backend.h"
#include "sdk/proto/engine_snapshot.pb.h"
#include "zlib.h"

namespace banyan::samples::chat {
namespace {

using ::banyan::testing::StatusIs;
using ::testing::HasSubstr;

std::string TempPath(const std::string& name) { return ::testing::TempDir() + "/" + name; }

// Everything a turn is, without its (engine-local) branch id.
struct TurnShape {
  int32_t id, parent;
  Role role;
  std::string content;
  std::vector<int32_t> tokens, children;
  int32_t reply_tokens;
  double logprob;
  std::string finish;
  bool operator==(const TurnShape&) const = default;
};

std::vector<TurnShape> Shape(const ChatSession& s) {
  std::vector<TurnShape> out;
  for (const auto& [id, t] : s.turns()) {
    out.push_back({t.id, t.parent, t.role, t.content, t.tokens, t.children, t.reply_tokens, t.logprob, t.finish});
  }
  return out;
}

size_t SharedPrefix(const std::vector<int32_t>& a, const std::vector<int32_t>& b) {
  size_t n = 0;
  while (n < a.size() && n < b.size() && a[n] == b[n]) ++n;
  return n;
}

// The snapshot file framing (Engine::Save): magic, payload size, CRC-32.
proto::EngineSnapshot ReadSnapshot(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::string framed((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  proto::EngineSnapshot s;
  EXPECT_GT(framed.size(), 20u);
  EXPECT_TRUE(s.ParseFromString(framed.substr(20)));
  return s;
}

void WriteSnapshot(const proto::EngineSnapshot& s, const std::string& path) {
  std::string payload;
  ASSERT_TRUE(s.SerializeToString(&payload));
  std::string framed = "BANYANES";
  const uint64_t size = payload.size();
  const uint32_t crc = static_cast<uint32_t>(
      crc32(0, reinterpret_cast<const Bytef*>(payload.data()), static_cast<uInt>(payload.size())));
  for (int i = 0; i < 8; ++i) framed += static_cast<char>((size >> (8 * i)) & 0xff);
  for (int i = 0; i < 4; ++i) framed += static_cast<char>((crc >> (8 * i)) & 0xff);
  std::ofstream(path, std::ios::binary) << framed + payload;
}

ChatSettings Small(int max_tokens) {
  ChatSettings s;
  s.max_tokens = max_tokens;
  s.top_k = 2;
  s.seed = 11;
  return s;
}

std::unique_ptr<Engine> CountingEngine(uint64_t kv_budget = 0) {
  EngineOptions o;
  o.kv_budget_bytes = kv_budget;
  absl::StatusOr<std::unique_ptr<Engine>> e = engine::testing::CreateCountingEngine({}, o);
  EXPECT_TRUE(e.ok()) << e.status();
  return e.ok() ? std::move(*e) : nullptr;
}

TEST(ChatSessionTest, TreeOfTurnsSharesKv) {
  std::unique_ptr<Engine> engine = CountingEngine();
  ASSERT_NE(engine, nullptr);
  ChatSession s(engine.get(), Small(8));
  std::string streamed;
  int32_t started_reply = -1;
  ReplyObserver obs;
  obs.on_start = [&](int32_t, int32_t reply) { started_reply = reply; };
  obs.on_text = [&](std::string_view d) { streamed += d; };
  BANYAN_ASSERT_OK_AND_ASSIGN(int32_t sys, s.System("Be brief."));
  BANYAN_ASSERT_OK_AND_ASSIGN(int32_t r1, s.Say("hello", obs));
  EXPECT_EQ(sys, 1);
  EXPECT_EQ(r1, 3);
  EXPECT_EQ(started_reply, 3);
  EXPECT_EQ(s.current(), 3);
  EXPECT_EQ(ToValidUtf8(streamed), s.Find(3)->content);
  EXPECT_EQ(s.Find(3)->reply_tokens, 8);
  BANYAN_ASSERT_OK_AND_ASSIGN(std::vector<int32_t> alts, s.Fork(3));
  EXPECT_EQ(alts, std::vector<int32_t>({4, 5, 6}));
  BANYAN_ASSERT_OK_AND_ASSIGN(int32_t regen, s.Regen({}));
  EXPECT_EQ(regen, 7);
  EXPECT_EQ(s.Find(2)->children, std::vector<int32_t>({3, 4, 5, 6, 7}));
  // Every turn's branch extends its parent's: forks share the KV before them.
  BANYAN_ASSERT_OK(s.Go(3));
  BANYAN_ASSERT_OK_AND_ASSIGN(int32_t r2, s.Say("more", {}));
  BANYAN_ASSERT_OK_AND_ASSIGN(int32_t r3, s.Edit(2, "hi there", {}));
  BANYAN_ASSERT_OK_AND_ASSIGN(int32_t r4, s.BranchFrom(4, "thanks", {}));
  EXPECT_EQ(r2, 9);
  EXPECT_EQ(r3, 11);
  EXPECT_EQ(r4, 13);
  EXPECT_EQ(s.Find(10)->parent, 1);  // the edit is a sibling of turn 2
  for (const auto& [id, t] : s.turns()) {
    if (t.parent == 0) continue;
    const Turn& p = *s.Find(t.parent);
    EXPECT_EQ(SharedPrefix(t.tokens, p.tokens), p.tokens.size()) << "turn " << id;
    EXPECT_GT(t.tokens.size(), p.tokens.size());
  }
  EXPECT_EQ(s.turns().size(), 13u);
  EXPECT_EQ(s.PathTo(13), std::vector<int32_t>({1, 2, 4, 12, 13}));
  EXPECT_EQ(engine->Stats().live_branches, 13);
  EXPECT_GT(engine->Stats().tokens_forked, 0);
  const std::string tree = RenderTree(s);
  EXPECT_THAT(tree, HasSubstr("[13] assistant"));
  EXPECT_THAT(tree, HasSubstr("<- current"));
  EXPECT_THAT(tree, HasSubstr("13 turns, 6 conversations"));

  // Compare: siblings are scored under their shared prompt; the counting
  // model's log-probabilities depend on the previous token only, so Score
  // agrees with the sampled log-probabilities.
  BANYAN_ASSERT_OK_AND_ASSIGN(Comparison c, s.Compare(4, 5));
  EXPECT_EQ(c.a.context, 2);
  EXPECT_FALSE(c.a.logprob_other.has_value());
  EXPECT_NEAR(c.a.logprob, s.Find(4)->logprob, 1e-3);
  EXPECT_NEAR(c.b.logprob, s.Find(5)->logprob, 1e-3);
  EXPECT_GE(c.shared_prefix_tokens, static_cast<int32_t>(s.Find(2)->tokens.size()));
  BANYAN_ASSERT_OK_AND_ASSIGN(c, s.Compare(12, 11));  // a user turn resolves to its last reply
  EXPECT_EQ(c.a.reply, 4);
  EXPECT_EQ(c.b.reply, 11);
  ASSERT_TRUE(c.a.logprob_other.has_value());
  EXPECT_THAT(RenderComparison(c), HasSubstr("after [10]'s prompt"));

  // Errors leave the tree as it was.
  const std::vector<TurnShape> before = Shape(s);
  EXPECT_THAT(s.Go(99), StatusIs(absl::StatusCode::kNotFound, HasSubstr("no turn 99")));
  EXPECT_THAT(s.Edit(3, "x", {}).status(), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("user turns")));
  EXPECT_THAT(s.BranchFrom(2, "x", {}).status(), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(s.BranchFrom(77, "x", {}).status(), StatusIs(absl::StatusCode::kNotFound));
  EXPECT_THAT(s.Compare(1, 3).status(), StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_THAT(s.Compare(3, 1000).status(), StatusIs(absl::StatusCode::kNotFound));
  BANYAN_ASSERT_OK(s.Go(2));
  EXPECT_THAT(s.Say("x", {}).status(), StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("/regen")));
  BANYAN_ASSERT_OK(s.Go(0));
  EXPECT_THAT(s.Fork(2).status(), StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_THAT(s.Regen({}).status(), StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_EQ(Shape(s), before);
  EXPECT_EQ(engine->Stats().live_branches, 13);

  // An observer can stop a reply early: it is kept, cut there.
  ReplyObserver stopper;
  int seen = 0;
  stopper.keep_going = [&seen] { return ++seen < 3; };
  BANYAN_ASSERT_OK_AND_ASSIGN(int32_t cut, s.Say("stop early", stopper));
  EXPECT_EQ(s.Find(cut)->reply_tokens, 3);
  EXPECT_EQ(s.Find(cut)->finish, "stopped");
}

TEST(ChatSessionTest, SaveLoadRoundTripAndBadFiles) {
  std::unique_ptr<Engine> engine = CountingEngine();
  ASSERT_NE(engine, nullptr);
  ChatSession s(engine.get(), Small(6));
  EXPECT_THAT(s.Save(TempPath("empty.chat")), StatusIs(absl::StatusCode::kFailedPrecondition));
  BANYAN_ASSERT_OK(s.Say("abc", {}).status());
  BANYAN_ASSERT_OK(s.Fork(2).status());
  BANYAN_ASSERT_OK(s.Go(3));
  BANYAN_ASSERT_OK(s.Say("def", {}).status());
  BANYAN_ASSERT_OK(ApplySetting(s.settings(), "temperature", "1.5"));
  const std::string path = TempPath("chat.banyan");
  BANYAN_ASSERT_OK(s.Save(path));
  const std::vector<TurnShape> saved = Shape(s);
  const int32_t saved_current = s.current();
  // Continue in place ...
  BANYAN_ASSERT_OK_AND_ASSIGN(int32_t here, s.Regen({}));
  const Turn continued = *s.Find(here);

  // ... and after loading into a fresh engine: the same tree, the same reply.
  std::unique_ptr<Engine> other = CountingEngine();
  ASSERT_NE(other, nullptr);
  ChatSession t(other.get(), ChatSettings{});
  BANYAN_ASSERT_OK(t.Load(path));
  EXPECT_EQ(Shape(t), saved);
  EXPECT_EQ(t.current(), saved_current);
  EXPECT_EQ(t.settings().temperature, 1.5f);
  EXPECT_EQ(t.settings().max_tokens, 6);
  EXPECT_EQ(other->Stats().live_branches, static_cast<int64_t>(saved.size()));
  BANYAN_ASSERT_OK_AND_ASSIGN(int32_t there, t.Regen({}));
  EXPECT_EQ(there, here);
  EXPECT_EQ(t.Find(there)->tokens, continued.tokens);
  EXPECT_EQ(t.Find(there)->content, continued.content);
  // Loading into a session that has turns replaces them.
  BANYAN_ASSERT_OK(s.Load(path));
  EXPECT_EQ(Shape(s), saved);
  EXPECT_EQ(engine->Stats().live_branches, static_cast<int64_t>(saved.size()));

  // Bad files: the session keeps its tree and leaks no branches.
  auto expect_refused = [&](const std::string& file, absl::StatusCode code, const std::string& message) {
    EXPECT_THAT(s.Load(file), StatusIs(code, HasSubstr(message))) << file;
    EXPECT_EQ(Shape(s), saved);
    EXPECT_EQ(engine->Stats().live_branches, static_cast<int64_t>(saved.size()));
  };
  expect_refused(TempPath("missing.chat"), absl::StatusCode::kNotFound, "");
  std::ofstream(TempPath("garbage.chat")) << "not a snapshot at all";
  expect_refused(TempPath("garbage.chat"), absl::StatusCode::kDataLoss, "");
  {
    std::ifstream f(path, std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    std::ofstream(TempPath("truncated.chat"), std::ios::binary) << bytes.substr(0, bytes.size() / 2);
  }
  expect_refused(TempPath("truncated.chat"), absl::StatusCode::kDataLoss, "");
  const proto::EngineSnapshot snap = ReadSnapshot(path);
  proto::EngineSnapshot m = snap;
  m.set_model_fingerprint("arch=0;vocab=32000;another model");
  WriteSnapshot(m, TempPath("other_model.chat"));
  expect_refused(TempPath("other_model.chat"), absl::StatusCode::kInvalidArgument, "another model");
  // A snapshot of plain branches (no chat metadata).
  m = snap;
  for (proto::SavedBranch& b : *m.mutable_branches()) b.clear_metadata();
  WriteSnapshot(m, TempPath("plain.chat"));
  expect_refused(TempPath("plain.chat"), absl::StatusCode::kInvalidArgument, "not a branching-chat save");
  // Hostile chat metadata.
  auto with_entry = [&](int branch, const std::string& key, const std::string& value, const std::string& name) {
    proto::EngineSnapshot x = snap;
    for (proto::MetadataEntry& e : *x.mutable_branches(branch)->mutable_metadata()) {
      if (e.key() == key) e.set_value(value);
    }
    WriteSnapshot(x, TempPath(name));
    return TempPath(name);
  };
  expect_refused(with_entry(0, "chat.version", "2", "v2.chat"), absl::StatusCode::kInvalidArgument, "version");
  expect_refused(with_entry(1, "chat.parent", "7", "cycle.chat"), absl::StatusCode::kDataLoss, "parents come first");
  expect_refused(with_entry(1, "chat.role", "wizard", "role.chat"), absl::StatusCode::kDataLoss, "unknown role");
  expect_refused(with_entry(1, "chat.role", "user", "roles.chat"), absl::StatusCode::kDataLoss, "cannot follow");
  expect_refused(with_entry(2, "chat.id", "2", "dup.chat"), absl::StatusCode::kDataLoss, "twice");
  expect_refused(with_entry(1, "chat.tokens", "3", "count.chat"), absl::StatusCode::kDataLoss, "tokens");
  expect_refused(with_entry(1, "chat.reply", "x y", "reply.chat"), absl::StatusCode::kDataLoss, "chat.reply");
  expect_refused(with_entry(0, "chat.session.current", "999", "current.chat"), absl::StatusCode::kDataLoss,
                 "out of place");
  expect_refused(with_entry(0, "chat.session.settings", "top_p=7", "settings.chat"), absl::StatusCode::kDataLoss,
                 "top_p");
  // Still works after all that.
  BANYAN_ASSERT_OK(s.Say("ghi", {}).status());
}

// Replies need not be valid UTF-8 (a byte-level model can stop inside a
// character): the turn's content is sanitized, and the tree saves and loads
// with the exact tokens.
TEST(ChatSessionTest, RepliesWithBrokenUtf8) {
  std::unique_ptr<Engine> engine = CountingEngine();
  ASSERT_NE(engine, nullptr);
  ChatSettings settings = Small(5);
  settings.temperature = 0;
  ChatSession s(engine.get(), settings);
  const std::string path = TempPath("broken_utf8.chat");
  BANYAN_ASSERT_OK(s.Say("go", {}).status());
  s.settings().max_tokens = 130;  // greedy: bytes 11, 12, ... 140 after the prompt's "\n"
  BANYAN_ASSERT_OK_AND_ASSIGN(int32_t reply, s.Regen({}));
  EXPECT_TRUE(IsValidUtf8(s.Find(reply)->content));
  EXPECT_THAT(s.Find(reply)->content, HasSubstr("\xef\xbf\xbd"));
  BANYAN_ASSERT_OK(s.Save(path));
  std::unique_ptr<Engine> other = CountingEngine();
  ChatSession t(other.get(), ChatSettings{});
  BANYAN_ASSERT_OK(t.Load(path));
  EXPECT_EQ(Shape(t), Shape(s));
  EXPECT_EQ(t.Find(reply)->content, s.Find(reply)->content);
}

TEST(ChatSessionTest, ExhaustedKvBudgetIsReportedAndNothingIsLeft) {
  // The counting model's KV: 2 layers x 1 KV head x 4 dims x K,V x f32 = 64
  // bytes per token; 62 pages, of which the engine keeps 48 as scratch
  // (max_batch + prefill_chunk tokens).
  std::unique_ptr<Engine> engine = CountingEngine(64 * 16 * 62);
  ASSERT_NE(engine, nullptr);
  ChatSession s(engine.get(), Small(4));
  BANYAN_ASSERT_OK(s.Say("short", {}).status());
  const std::vector<TurnShape> before = Shape(s);
  const absl::Status long_turn = s.Say(std::string(4000, 'x'), {}).status();
  EXPECT_THAT(long_turn, StatusIs(absl::StatusCode::kResourceExhausted));
  EXPECT_EQ(Shape(s), before);
  EXPECT_EQ(engine->Stats().live_branches, static_cast<int64_t>(before.size()));
  std::ostringstream out;
  EXPECT_THAT(ExecuteLine(s, std::string(4000, 'y'), out).status, StatusIs(absl::StatusCode::kResourceExhausted));
  EXPECT_THAT(out.str(), HasSubstr("error: RESOURCE_EXHAUSTED"));
  EXPECT_EQ(Shape(s), before);
  BANYAN_ASSERT_OK(s.Say("ok", {}).status());  // and the session goes on
}

TEST(ChatReplTest, ScriptedSessionPrintsErrorsAndGoesOn) {
  std::unique_ptr<Engine> engine = CountingEngine();
  ASSERT_NE(engine, nullptr);
  ChatSession s(engine.get(), Small(5));
  const std::string path = TempPath("repl.chat");
  std::istringstream in("/system terse\n"
                        "# a comment\n"
                        "hello\n"
                        "/fork 2\n"
                        "/go 99\n"
                        "/frobnicate\n"
                        "/edit 3 nope\n"
                        "/regen\n"
                        "/tree\n"
                        "/compare 4 5\n"
                        "/set max_tokens 3\n"
                        "two \\\nlines\n"
                        "/save " + path + "\n"
                        "/load " + TempPath("nope.chat") + "\n"
                        "/stats\n"
                        "/help\n"
                        "/quit\n"
                        "never read\n");
  std::ostringstream out;
  int failures = 0;
  BANYAN_ASSERT_OK(RunRepl(s, in, out, ReplOptions{.prompt = "", .echo = true}, &failures));
  const std::string text = out.str();
  EXPECT_EQ(failures, 4) << text;
  EXPECT_THAT(text, HasSubstr("error: NOT_FOUND: /go: there is no turn 99"));
  EXPECT_THAT(text, HasSubstr("error: INVALID_ARGUMENT: unknown command \"/frobnicate\""));
  EXPECT_THAT(text, HasSubstr("error: INVALID_ARGUMENT: turn 3 (assistant) is not a user turn"));
  EXPECT_THAT(text, HasSubstr("2 replies to [2]"));
  EXPECT_THAT(text, HasSubstr("word diff"));
  EXPECT_THAT(text, HasSubstr("saved 8 turns"));
  EXPECT_THAT(text, HasSubstr("/compare A B"));
  EXPECT_THAT(text, ::testing::Not(HasSubstr("never read")));
  EXPECT_EQ(s.Find(7)->content, "two \nlines");
  EXPECT_EQ(s.Find(8)->reply_tokens, 3);
  // --strict: the first failure ends the run with its status.
  std::istringstream strict_in("/go 42\nhello\n");
  EXPECT_THAT(RunRepl(s, strict_in, out, ReplOptions{.stop_on_error = true}),
              StatusIs(absl::StatusCode::kNotFound));
  EXPECT_EQ(s.turns().size(), 8u);
}

// ----------------------------------------------------------- the default model

class DefaultModelChatTest : public ::testing::Test {
 protected:
  static std::unique_ptr<Engine> Create() {
    EngineOptions o;
    o.device = "cpu";
    o.threads = 2;
    o.kv_budget_bytes = 256 << 20;
    absl::StatusOr<std::unique_ptr<Engine>> e = Engine::Create(o);
    EXPECT_TRUE(e.ok()) << e.status();
    return e.ok() ? std::move(*e) : nullptr;
  }
  void SetUp() override {
    if (!model::FindDefaultModel().ok()) GTEST_SKIP() << "default model missing: run scripts/setup.sh";
    engine_ = Create();
    ASSERT_NE(engine_, nullptr);
  }
  std::unique_ptr<Engine> engine_;
};

TEST_F(DefaultModelChatTest, ScriptedSessionSaveLoadContinue) {
  ChatSettings settings;
  settings.max_tokens = 10;
  settings.seed = 5;
  ChatSession s(engine_.get(), settings);
  const std::string path = TempPath("default_model.chat");
  std::istringstream in("What is the capital of France?\n"
                        "/fork 2\n"
                        "/go 2\n"
                        "Thanks. And of Spain?\n"
                        "/edit 1 Name a color.\n"
                        "/regen\n"
                        "/compare 2 8\n"
                        "/tree\n"
                        "/save " + path + "\n");
  std::ostringstream out;
  int failures = 0;
  BANYAN_ASSERT_OK(RunRepl(s, in, out, ReplOptions{.prompt = "> ", .echo = true}, &failures));
  std::cout << out.str();
  EXPECT_EQ(failures, 0) << out.str();
  // 1 user, replies 2 3 4; 5 user after 2, reply 6; 7 user (edit of 1), replies 8 9.
  ASSERT_EQ(s.turns().size(), 9u);
  EXPECT_EQ(s.Find(1)->children, std::vector<int32_t>({2, 3, 4}));
  EXPECT_EQ(s.Find(7)->parent, 0);
  EXPECT_EQ(s.Find(7)->children, std::vector<int32_t>({8, 9}));
  EXPECT_EQ(s.Find(5)->content, "Thanks. And of Spain?");
  EXPECT_EQ(s.current(), 9);
  // The follow-up forks its reply's branch (the chat template renders the
  // history exactly as it was generated): it shares the whole conversation.
  EXPECT_EQ(SharedPrefix(s.Find(5)->tokens, s.Find(2)->tokens), s.Find(2)->tokens.size());
  EXPECT_GE(SharedPrefix(s.Find(3)->tokens, s.Find(4)->tokens), s.Find(1)->tokens.size());
  // The edited question shares the default system prompt's KV with the first.
  EXPECT_GT(SharedPrefix(s.Find(7)->tokens, s.Find(1)->tokens), 10u);
  // Score of a reply after its own prompt = the log-probabilities it was sampled with.
  BANYAN_ASSERT_OK_AND_ASSIGN(Comparison c, s.Compare(3, 4));
  EXPECT_NEAR(c.a.logprob, s.Find(3)->logprob, 2e-2 * std::abs(s.Find(3)->logprob) + 1e-2);
  EXPECT_NEAR(c.b.logprob, s.Find(4)->logprob, 2e-2 * std::abs(s.Find(4)->logprob) + 1e-2);
  EXPECT_GT(engine_->Stats().tokens_forked, 0);

  const std::vector<TurnShape> saved = Shape(s);
  BANYAN_ASSERT_OK(s.Go(6));
  BANYAN_ASSERT_OK_AND_ASSIGN(int32_t here, s.Say("Why?", {}));
  std::unique_ptr<Engine> other = Create();
  ASSERT_NE(other, nullptr);
  ChatSession t(other.get(), ChatSettings{});
  BANYAN_ASSERT_OK(t.Load(path));
  EXPECT_EQ(Shape(t), saved);
  BANYAN_ASSERT_OK(t.Go(6));
  BANYAN_ASSERT_OK_AND_ASSIGN(int32_t there, t.Say("Why?", {}));
  EXPECT_EQ(there, here);
  EXPECT_EQ(t.Find(there)->tokens, s.Find(here)->tokens);
  EXPECT_EQ(t.Find(there)->content, s.Find(here)->content);
  std::cout << "continued after load: " << t.Find(there)->content << "\n";
}

}  // namespace
}  // namespace banyan::samples::chat

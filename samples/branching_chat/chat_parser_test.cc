#include "samples/branching_chat/chat_parser.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "sdk/base/rng.h"
#include "sdk/base/status_testing.h"

namespace banyan::samples::chat {
namespace {

using ::banyan::testing::StatusIs;
using ::testing::HasSubstr;

ChatCommand Parse(std::string_view line) {
  absl::StatusOr<ChatCommand> c = ParseCommand(line);
  EXPECT_TRUE(c.ok()) << line << ": " << c.status();
  return c.value_or(ChatCommand{});
}

TEST(ChatParserTest, PlainTextIsAUserTurn) {
  ChatCommand c = Parse("  Hello there!  ");
  EXPECT_EQ(c.kind, CommandKind::kSay);
  EXPECT_EQ(c.text, "Hello there!");
  c = Parse("\\/etc/passwd is a path\r");
  EXPECT_EQ(c.kind, CommandKind::kSay);
  EXPECT_EQ(c.text, "/etc/passwd is a path");
  c = Parse("two\nlines");
  EXPECT_EQ(c.kind, CommandKind::kSay);
  EXPECT_EQ(c.text, "two\nlines");
  EXPECT_EQ(Parse("").kind, CommandKind::kNone);
  EXPECT_EQ(Parse(" \t ").kind, CommandKind::kNone);
  EXPECT_EQ(Parse("# a comment /fork 3").kind, CommandKind::kNone);
  EXPECT_EQ(Parse("Ünïcödé ✓ 日本語").text, "Ünïcödé ✓ 日本語");
}

TEST(ChatParserTest, Commands) {
  ChatCommand c = Parse("/fork 5");
  EXPECT_EQ(c.kind, CommandKind::kFork);
  EXPECT_EQ(c.count, 5);
  EXPECT_EQ(Parse("/fork").count, 3);
  EXPECT_EQ(Parse("/regen").kind, CommandKind::kRegen);
  c = Parse("/go #12");
  EXPECT_EQ(c.kind, CommandKind::kGo);
  EXPECT_EQ(c.id, 12);
  EXPECT_EQ(Parse("/go 0").id, 0);
  EXPECT_EQ(Parse("/tree").kind, CommandKind::kTree);
  EXPECT_EQ(Parse("/show").id, -1);
  EXPECT_EQ(Parse("/show 4").id, 4);
  c = Parse("/compare 3   7");
  EXPECT_EQ(c.kind, CommandKind::kCompare);
  EXPECT_EQ(c.id, 3);
  EXPECT_EQ(c.id2, 7);
  c = Parse("/edit 2 What about Spain?");
  EXPECT_EQ(c.kind, CommandKind::kEdit);
  EXPECT_EQ(c.id, 2);
  EXPECT_EQ(c.text, "What about Spain?");
  c = Parse("/branch 0 Start over");
  EXPECT_EQ(c.kind, CommandKind::kBranch);
  EXPECT_EQ(c.id, 0);
  EXPECT_EQ(c.text, "Start over");
  c = Parse("/system You are a pirate.");
  EXPECT_EQ(c.kind, CommandKind::kSystem);
  EXPECT_EQ(c.text, "You are a pirate.");
  c = Parse("/save /tmp/my chat.banyan");
  EXPECT_EQ(c.kind, CommandKind::kSave);
  EXPECT_EQ(c.text, "/tmp/my chat.banyan");
  EXPECT_EQ(Parse("/load x").kind, CommandKind::kLoad);
  c = Parse("/set temperature 0.25");
  EXPECT_EQ(c.kind, CommandKind::kSet);
  EXPECT_EQ(c.key, "temperature");
  EXPECT_EQ(c.text, "0.25");
  EXPECT_EQ(Parse("/set").key, "");
  EXPECT_EQ(Parse("/stats").kind, CommandKind::kStats);
  EXPECT_EQ(Parse("/help").kind, CommandKind::kHelp);
  EXPECT_EQ(Parse("/quit").kind, CommandKind::kQuit);
  EXPECT_EQ(Parse("/exit").kind, CommandKind::kQuit);
}

TEST(ChatParserTest, BadCommandsGetSpecificMessages) {
  struct Case {
    std::string line;
    std::string message;
  };
  const Case cases[] = {
      {"/frobnicate", "unknown command \"/frobnicate\""},
      {"/", "unknown command"},
      {"/fork 0", "N must be a whole number in [1, 32]"},
      {"/fork 33", "[1, 32]"},
      {"/fork -1", "[1, 32]"},
      {"/fork 2x", "[1, 32]"},
      {"/fork 2 3", "takes no arguments"},
      {"/go", "needs a turn id"},
      {"/go abc", "must be a turn id"},
      {"/go -3", "must be a turn id"},
      {"/go 99999999999999999999", "must be a turn id"},
      {"/go 1 2", "takes no arguments"},
      {"/compare 1", "needs two turn ids"},
      {"/compare 1 x", "B must be a turn id"},
      {"/edit", "needs a turn id and a message"},
      {"/edit 3", "needs a message"},
      {"/edit x hello", "must be a turn id"},
      {"/branch 2", "needs a message"},
      {"/system", "needs the system prompt"},
      {"/save", "needs a file name"},
      {"/load   ", "needs a file name"},
      {"/set temperature", "needs a value"},
      {"/set temperature hot", "temperature must be a number"},
      {"/set temperature -1", "temperature must be in [0, 100]"},
      {"/set temperature nan", "must be a number"},
      {"/set temperature inf", "must be a number"},
      {"/set top_p 0", "top_p must be > 0"},
      {"/set top_p 1.5", "top_p must be in"},
      {"/set max_tokens 2.5", "whole number"},
      {"/set max_tokens 0", "max_tokens must be in"},
      {"/set warp 9", "unknown setting \"warp\""},
      {"/set seed 1 2", "takes no arguments"},
      {"/regen now", "takes no arguments"},
      {"/tree x", "takes no arguments"},
      {"\\", "empty message"},
      {"bell\x07", "control character 0x07"},
      {std::string("nul\0byte", 8), "control character 0x00"},
      {"\xff\xfe", "not valid UTF-8"},
      {"\xc0\xaf", "not valid UTF-8"},          // overlong '/'
      {"\xed\xa0\x80", "not valid UTF-8"},      // a surrogate
      {"\xf4\x90\x80\x80", "not valid UTF-8"},  // above U+10FFFF
      {"caf\xc3", "not valid UTF-8"},           // truncated
      {std::string(kMaxLineBytes + 1, 'a'), "too long"},
  };
  for (const Case& c : cases) {
    EXPECT_THAT(ParseCommand(c.line).status(),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(c.message)))
        << c.line.substr(0, 60);
  }
}

TEST(ChatParserTest, SettingsRoundTrip) {
  ChatSettings s;
  BANYAN_ASSERT_OK(ApplySetting(s, "temperature", "0.3"));
  BANYAN_ASSERT_OK(ApplySetting(s, "top_k", "40"));
  BANYAN_ASSERT_OK(ApplySetting(s, "seed", "123456789"));
  BANYAN_ASSERT_OK(ApplySetting(s, "max_tokens", "17"));
  BANYAN_ASSERT_OK(ApplySetting(s, "repetition_penalty", "1.1"));
  BANYAN_ASSERT_OK_AND_ASSIGN(ChatSettings back, ParseSettings(FormatSettings(s)));
  EXPECT_EQ(back.temperature, s.temperature);
  EXPECT_EQ(back.top_p, s.top_p);
  EXPECT_EQ(back.top_k, 40);
  EXPECT_EQ(back.seed, 123456789u);
  EXPECT_EQ(back.max_tokens, 17);
  EXPECT_FLOAT_EQ(back.repetition_penalty, 1.1f);
  // A failed setting changes nothing.
  const ChatSettings before = s;
  EXPECT_THAT(ApplySetting(s, "top_k", "-4"), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_EQ(s.top_k, before.top_k);
  EXPECT_THAT(ParseSettings("temperature=0.5 junk").status(), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(ParseSettings("top_k=1e99").status(), StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(ChatParserTest, Utf8Helpers) {
  EXPECT_TRUE(IsValidUtf8("plain ascii"));
  EXPECT_TRUE(IsValidUtf8("\xf0\x9f\x8c\xb3 banyan"));
  EXPECT_FALSE(IsValidUtf8("\xf0\x9f\x8c"));
  EXPECT_EQ(ToValidUtf8("ok\xff!"), "ok\xef\xbf\xbd!");
  EXPECT_EQ(ToValidUtf8("\xe6\x97"), "\xef\xbf\xbd\xef\xbf\xbd");
  EXPECT_EQ(ToValidUtf8("\xe6\x97\xa5"), "\xe6\x97\xa5");
}

// Random lines of every flavour: printable text, command words with random
// arguments, raw bytes. Parsing never crashes; it either succeeds or fails with
// kInvalidArgument, and whatever it accepts is well formed.
TEST(ChatParserTest, HostileRandomLines) {
  Rng rng(20261122);
  const char* words[] = {"/fork", "/regen", "/go",   "/tree", "/show", "/compare", "/edit", "/branch",
                         "/system", "/save", "/load", "/set",  "/stats", "/help",   "/quit", "/",
                         "//",    "\\",     "#",     "temperature", "top_p", "-1", "0", "4294967296",
                         "1e309", "nan",    " ",     "\t",    "\xc3\xa9", "\xff", "\r", "\n", "\x01"};
  int accepted = 0;
  for (int i = 0; i < 20000; ++i) {
    std::string line;
    const int pieces = static_cast<int>(rng.UniformInt(8));
    for (int p = 0; p < pieces; ++p) {
      switch (rng.UniformInt(4)) {
        case 0:
          line += words[rng.UniformInt(sizeof(words) / sizeof(words[0]))];
          break;
        case 1:
          line += std::to_string(static_cast<int64_t>(rng.UniformInt(uint64_t{1} << 31)) - (1 << 30));
          break;
        case 2:
          line += static_cast<char>(rng.UniformInt(256));
          break;
        default:
          line += ' ';
          line += static_cast<char>('a' + rng.UniformInt(26));
      }
    }
    absl::StatusOr<ChatCommand> c = ParseCommand(line);
    if (!c.ok()) {
      EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument) << line;
      EXPECT_FALSE(c.status().message().empty());
      EXPECT_TRUE(IsValidUtf8(std::string(c.status().message()))) << line;
      continue;
    }
    ++accepted;
    switch (c->kind) {
      case CommandKind::kFork:
        EXPECT_GE(c->count, 1);
        EXPECT_LE(c->count, kMaxFork);
        break;
      case CommandKind::kGo:
      case CommandKind::kEdit:
      case CommandKind::kBranch:
        EXPECT_GE(c->id, 0);
        EXPECT_LE(c->id, kMaxTurnId);
        break;
      case CommandKind::kCompare:
        EXPECT_GE(std::min(c->id, c->id2), 0);
        break;
      case CommandKind::kSay:
        EXPECT_FALSE(c->text.empty());
        EXPECT_TRUE(IsValidUtf8(c->text));
        break;
      default:
        break;
    }
  }
  EXPECT_GT(accepted, 1000);
  // Pure noise, long lines included.
  for (int i = 0; i < 2000; ++i) {
    std::string line(static_cast<size_t>(rng.UniformInt(i % 100 == 0 ? 70000 : 300)), '\0');
    for (char& ch : line) ch = static_cast<char>(rng.UniformInt(256));
    absl::StatusOr<ChatCommand> c = ParseCommand(line);
    if (!c.ok()) {
      EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
    }
  }
}

}  // namespace
}  // namespace banyan::samples::chat

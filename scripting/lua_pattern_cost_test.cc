#include "scripting/lua_pattern_cost.h"

#include <lua.hpp>

#include <chrono>
#include <cstdio>
#include <string>

#include "gtest/gtest.h"
#include "sdk/base/rng.h"

namespace banyan::scripting {
namespace {

TEST(PatternCostTest, ClassicBombsHaveHugeBounds) {
  const std::string a100k(100000, 'a');
  EXPECT_GT(PatternCostBound(a100k, ".-.-.-.-.-.-.-b", PatternOp::kFind), 1e30);
  EXPECT_GT(PatternCostBound(a100k, "(.*)(.*)(.*)b", PatternOp::kMatch), 1e15);
  EXPECT_GT(PatternCostBound(a100k, "a*a*a*c", PatternOp::kGmatch), 1e15);
  EXPECT_GT(PatternCostBound(a100k, "a-a-b", PatternOp::kMatch), 1e10);
  // Quadratic plain search: a long needle of the subject's own letter.
  EXPECT_GT(PatternCostBound(a100k, std::string(50000, 'a') + "b", PatternOp::kFindPlain), 1e7);
}

TEST(PatternCostTest, OrdinaryPatternsOnTextAreCheap) {
  std::string text;
  for (int i = 0; i < 200; ++i) text += "Step " + std::to_string(i) + ": the answer is 42. ";
  EXPECT_LT(PatternCostBound(text, "answer is (%d+)", PatternOp::kMatch), 1e6);
  EXPECT_LT(PatternCostBound(text, "%d+", PatternOp::kGmatch), 1e6);
  EXPECT_LT(PatternCostBound(text, "^(%w+)%s*:%s*(.-)$", PatternOp::kMatch), 1e8);
  EXPECT_LT(PatternCostBound(text, "answer", PatternOp::kFind), 1e4);  // no specials: memchr
  EXPECT_LT(PatternCostBound(text, "[%a_][%w_]*", PatternOp::kGmatch), 1e6);
}

TEST(PatternCostTest, AnchorsAndClassesFollowLua) {
  const std::string s(1000, 'x');
  // '^' anchors find/match/gsub, but is an ordinary character for gmatch.
  EXPECT_LT(PatternCostBound(s, "^x*y", PatternOp::kMatch), 1e4);
  EXPECT_GT(PatternCostBound(s, "^x*y", PatternOp::kGmatch), 1e5);
  // A class that matches nothing in the subject has no run to backtrack over.
  EXPECT_LT(PatternCostBound(s, "%d*%d*%d*y", PatternOp::kFind), 1e4);
  EXPECT_LT(PatternCostBound(s, "[^x]*[^x]*y", PatternOp::kFind), 1e4);
  EXPECT_GT(PatternCostBound(s, "[%a]*[w-z]*y", PatternOp::kFind), 1e8);
  EXPECT_TRUE(PatternHasNoSpecials("plain text"));
  EXPECT_FALSE(PatternHasNoSpecials("a.b"));
  // Malformed patterns get a finite bound (Lua raises its own error before any work).
  EXPECT_LT(PatternCostBound(s, "[abc", PatternOp::kFind), 1e5);
  EXPECT_LT(PatternCostBound(s, "abc%", PatternOp::kFind), 1e5);
}

// Calibration: random patterns whose bound is within the sandbox's default limit (2e7) finish
// quickly in real Lua. This is what makes refusing above the limit both safe and not too strict.
TEST(PatternCostTest, PatternsWithinTheDefaultLimitRunQuickly) {
  lua_State* L = luaL_newstate();
  ASSERT_NE(L, nullptr);
  luaL_requiref(L, LUA_STRLIBNAME, luaopen_string, 1);
  lua_pop(L, 1);
  Rng rng(17);
  const char* items[] = {"a", "b", ".", "%a", "[ab]", "[^b]", "(a)", "%1"};
  const char* quantifiers[] = {"", "", "*", "-", "+", "?"};
  double worst_seconds = 0;
  int run = 0;
  for (int trial = 0; trial < 400; ++trial) {
    std::string subject(1 + rng.UniformInt(20000), 'a');
    for (char& c : subject) {
      if (rng.UniformInt(8) == 0) c = 'b';
    }
    std::string pattern;
    const int n = 1 + static_cast<int>(rng.UniformInt(6));
    for (int i = 0; i < n; ++i) {
      pattern += items[rng.UniformInt(7)];  // the back-reference only after a capture below
      pattern += quantifiers[rng.UniformInt(6)];
    }
    if (rng.UniformInt(4) == 0) pattern = "(a+)" + pattern + "%1";
    pattern += "c";  // never matches: the worst case, every start and every backtrack is tried
    const double bound = PatternCostBound(subject, pattern, PatternOp::kFind);
    if (bound > 2e7) continue;
    lua_getglobal(L, "string");
    lua_getfield(L, -1, "find");
    lua_pushlstring(L, subject.data(), subject.size());
    lua_pushlstring(L, pattern.data(), pattern.size());
    const auto start = std::chrono::steady_clock::now();
    const int status = lua_pcall(L, 2, 1, 0);
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    lua_settop(L, 0);
    if (status != LUA_OK) continue;  // e.g. "invalid capture index" for a stray %1
    ++run;
    worst_seconds = std::max(worst_seconds, seconds);
    EXPECT_LT(seconds, 1.0) << pattern << " on " << subject.size() << " bytes, bound " << bound;
  }
  EXPECT_GT(run, 100);
  // Worst cases by design: for each bomb shape, the longest all-'a' subject whose bound is still
  // within the limit, so the matcher really does close to the bounded work.
  for (const char* pattern : {".-c", ".*c", ".-.-c", "a*a*a*c", "(a*)%1c", "[ab]-[ab]-[ab]-c"}) {
    size_t lo = 1, hi = 1 << 24;
    while (lo + 1 < hi) {
      const size_t mid = (lo + hi) / 2;
      (PatternCostBound(std::string(mid, 'a'), pattern, PatternOp::kFind) <= 2e7 ? lo : hi) = mid;
    }
    const std::string subject(lo, 'a');
    lua_getglobal(L, "string");
    lua_getfield(L, -1, "find");
    lua_pushlstring(L, subject.data(), subject.size());
    lua_pushstring(L, pattern);
    const auto start = std::chrono::steady_clock::now();
    ASSERT_EQ(lua_pcall(L, 2, 1, 0), LUA_OK) << lua_tostring(L, -1);
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    lua_settop(L, 0);
    std::printf("pattern %-18s subject %8zu bytes  bound %.3g  %.1f ms\n", pattern, lo,
                PatternCostBound(subject, pattern, PatternOp::kFind), seconds * 1e3);
    worst_seconds = std::max(worst_seconds, seconds);
    EXPECT_LT(seconds, 1.0) << pattern;
  }
  lua_close(L);
  std::printf("slowest pattern call within the default limit: %.1f ms\n", worst_seconds * 1e3);
}

}  // namespace
}  // namespace banyan::scripting

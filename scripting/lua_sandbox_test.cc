// The hostile-script suite: each script must fail with its specific code, within its budget,
// and leave the sandbox able to run a normal script afterwards.
#include "scripting/lua_sandbox.h"

#include <atomic>
#include <chrono>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "sdk/base/status_testing.h"

namespace banyan::scripting {
namespace {

using ::banyan::testing::StatusIs;
using ::testing::AllOf;
using ::testing::HasSubstr;
using Code = absl::StatusCode;

SandboxLimits SuiteLimits() {
  SandboxLimits limits;
  limits.memory_bytes = 8u << 20;
  limits.instructions_per_call = 5'000'000;
  limits.time_per_call = absl::Seconds(1);
  return limits;
}

std::unique_ptr<LuaSandbox> NewSandbox(const SandboxLimits& limits = SuiteLimits()) {
  auto box = LuaSandbox::Create(limits);
  EXPECT_TRUE(box.ok()) << box.status();
  return box.ok() ? std::move(box).value() : nullptr;
}

struct Outcome {
  absl::Status status;
  double seconds;
};

Outcome RunTimed(LuaSandbox& box, std::string_view code) {
  const auto start = std::chrono::steady_clock::now();
  absl::Status status = box.Run("hostile.lua", code);
  const std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - start;
  return {status, elapsed.count()};
}

// A normal script still runs, and its result is right.
void ExpectHealthy(LuaSandbox& box) {
  BANYAN_ASSERT_OK(box.Run("healthy.lua", R"lua(
    local t = {}
    for i = 1, 1000 do t[i] = i end
    local sum = 0
    for _, v in ipairs(t) do sum = sum + v end
    assert(sum == 500500, "sum")
    assert(("abc"):rep(2) == "abcabc")
    assert(("answer is 42"):match("answer is (%d+)") == "42")
    local co = coroutine.wrap(function(a) local b = coroutine.yield(a + 1) return b * 2 end)
    assert(co(1) == 2 and co(5) == 10)
  )lua"));
}

struct HostileCase {
  const char* name;
  const char* code;
  Code code_expected;
  const char* message_part;
};

class HostileScriptTest : public ::testing::TestWithParam<HostileCase> {};

TEST_P(HostileScriptTest, FailsWithItsCodeWithinBudgetAndSandboxSurvives) {
  const HostileCase& c = GetParam();
  auto box = NewSandbox();
  ASSERT_NE(box, nullptr);
  const Outcome outcome = RunTimed(*box, c.code);
  EXPECT_THAT(outcome.status, StatusIs(c.code_expected, HasSubstr(c.message_part)));
  EXPECT_LT(outcome.seconds, 2.0) << c.name;
  ExpectHealthy(*box);
  // Still bounded on the next call.
  EXPECT_THAT(box->Run("again.lua", "while true do end"), StatusIs(Code::kDeadlineExceeded));
  ExpectHealthy(*box);
}

const HostileCase kHostileCases[] = {
    {"InfiniteLoop", "while true do end", Code::kDeadlineExceeded, "instruction budget"},
    {"InfiniteRecursionOfCalls", "local function f() return f() end f()",
     Code::kDeadlineExceeded, "instruction budget"},
    {"LoopSwallowingErrorsWithPcall",
     "while true do pcall(function() while true do end end) end", Code::kDeadlineExceeded,
     "instruction budget"},
    {"LoopSwallowingErrorsWithXpcall",
     "while true do xpcall(function() while true do end end, function(m) while true do end end) "
     "end",
     Code::kDeadlineExceeded, "instruction budget"},
    {"HandlerLoopsOnAnOrdinaryError",
     "xpcall(function() error('x') end, function() while true do end end)",
     Code::kDeadlineExceeded, "instruction budget"},
    {"LoopInsideCoroutineCreate",
     "local co = coroutine.create(function() while true do end end) coroutine.resume(co)",
     Code::kDeadlineExceeded, "instruction budget"},
    {"LoopInsideCoroutineWrap", "coroutine.wrap(function() while true do end end)()",
     Code::kDeadlineExceeded, "instruction budget"},
    {"LoopAcrossYields",
     "local co = coroutine.wrap(function() while true do coroutine.yield() end end) "
     "while true do co() end",
     Code::kDeadlineExceeded, "exceeded"},  // instruction budget or deadline, whichever first
    {"LoopInSortComparator",
     "local t = {3, 2, 1} table.sort(t, function(a, b) while true do end end)",
     Code::kDeadlineExceeded, "instruction budget"},
    {"LoopInTostringOfErrorObject",
     "error(setmetatable({}, {__tostring = function() while true do end end}))",
     Code::kDeadlineExceeded, "instruction budget"},
    {"TableGrowthBomb", "local t, i = {}, 0 while true do i = i + 1 t[i] = i end",
     Code::kResourceExhausted, "memory"},
    {"TableOfTablesBomb", "local t = {} while true do t[#t + 1] = {1, 2, 3, 4} end",
     Code::kResourceExhausted, "memory"},
    {"StringDoublingBomb", "local s = 'x' while true do s = s .. s end",
     Code::kResourceExhausted, "memory"},
    {"TableConcatBomb",
     "local t = {} for i = 1, 64 do t[i] = ('y'):rep(1 << 16) end "
     "local s = '' while true do s = table.concat({s, s, table.concat(t)}) end",
     Code::kResourceExhausted, "memory"},
    {"StringRepBomb", "local s = string.rep('x', 1e10)", Code::kResourceExhausted,
     "string.rep"},
    {"StringRepMethodBombWithSeparator", "local s = ('ab'):rep(1 << 24, ('-'):rep(8))",
     Code::kResourceExhausted, "string.rep"},
    {"StringRepBombCaughtByPcallIsSticky", "pcall(string.rep, 'x', 1 << 40) return 1",
     Code::kResourceExhausted, "string.rep"},
    {"PatternBombFind", "string.find(string.rep('a', 1e5), '.-.-.-.-.-.-.-b')",
     Code::kDeadlineExceeded, "matcher steps"},
    {"PatternBombMatch", "string.match(string.rep('a', 4e4), '(.*)(.*)(.*)(.*)b')",
     Code::kDeadlineExceeded, "matcher steps"},
    {"PatternBombGmatch",
     "for w in string.gmatch(string.rep('a', 1e5), 'a*a*a*a*c') do end",
     Code::kDeadlineExceeded, "matcher steps"},
    {"PatternBombGsub", "string.gsub(string.rep('a', 1e5), '.-.-.-b', 'x')",
     Code::kDeadlineExceeded, "matcher steps"},
    {"PatternBombPlainFind",
     "string.find(string.rep('a', 1 << 20), string.rep('a', 1 << 19) .. 'b', 1, true)",
     Code::kDeadlineExceeded, "matcher steps"},
    {"EscapeThroughEnv", "local e = _ENV return e.io.open('/etc/passwd')",
     Code::kInvalidArgument, "attempt to index a nil value"},
    {"EscapeThroughG", "return _G.debug.getregistry()", Code::kInvalidArgument,
     "attempt to index a nil value"},
    {"EscapeByReplacingEnv", "_ENV = setmetatable({}, {__index = _G}) return io.lines('/')",
     Code::kInvalidArgument, "attempt to index a nil value"},
    {"StringMetatableIsProtected", "getmetatable('').__index = {}", Code::kInvalidArgument,
     "attempt to index a string value"},
    {"StringMetatableCannotBeReplaced", "setmetatable('', {})", Code::kInvalidArgument,
     "bad argument"},
    {"LibraryTablesAreReadOnly", "string.rep = function() end", Code::kInvalidArgument,
     "read-only"},
    {"RawsetOnLibraryTable", "rawset(string, 'rep', print)", Code::kInvalidArgument,
     "read-only"},
    {"SetmetatableOnLibraryTable", "setmetatable(string, {})", Code::kInvalidArgument,
     "protected metatable"},
    {"GcFinalizerRefused", "setmetatable({}, {__gc = function() while true do end end})",
     Code::kInvalidArgument, "__gc"},
    {"CloseMetamethodRefused",
     "local x <close> = setmetatable({}, {__close = function() while true do end end})",
     Code::kInvalidArgument, "__close"},
    {"LoadBinaryChunk", "local f, err = load('\\27LuaT\\0\\25\\147\\r\\n\\26\\n') assert(f, err)",
     Code::kInvalidArgument, "binary chunk"},
    {"LoadInBinaryMode", "assert(load('return 1', 'x', 'b'))", Code::kInvalidArgument,
     "binary chunks are not allowed"},
    {"LoadWithReaderFunction", "load(function() return nil end)", Code::kInvalidArgument,
     "only string chunks"},
    {"LoadstringIsGone", "loadstring('x = 1')", Code::kInvalidArgument, "loadstring"},
    {"StringDumpIsGone", "return load(string.dump(function() end), 'd', 'b')",
     Code::kInvalidArgument, "dump"},
    {"RequireIsGone", "require('os')", Code::kInvalidArgument, "require"},
    {"DofileIsGone", "dofile('/etc/passwd')", Code::kInvalidArgument, "dofile"},
    {"IoIsGone", "io.open('/etc/passwd')", Code::kInvalidArgument, "io"},
    {"OsExecuteIsGone", "os.execute('true')", Code::kInvalidArgument, "execute"},
    {"OsExitIsGone", "os.exit(1)", Code::kInvalidArgument, "exit"},
    {"DebugSethookIsGone", "debug.sethook() while true do end", Code::kInvalidArgument,
     "debug"},
    {"CollectgarbageStopIsRefused", "collectgarbage('stop')", Code::kInvalidArgument,
     "not allowed"},
    {"TableErrorObject", "error({code = 7})", Code::kInvalidArgument, "table value"},
    {"ErrorObjectWithFailingTostring",
     "error(setmetatable({}, {__tostring = function() error('inner') end}))",
     Code::kInvalidArgument, "table value"},
    {"ErrorObjectWithTostring", "error(setmetatable({}, {__tostring = function() return "
     "'custom failure' end}))",
     Code::kInvalidArgument, "custom failure"},
    {"DeepRecursionHitsTheMemoryCap", "local function f() return 1 + f() end f()",
     Code::kResourceExhausted, "memory"},
    {"SyntaxError", "x = = 1", Code::kInvalidArgument, "unexpected symbol"},
    {"YieldOutsideCoroutine", "coroutine.yield(1)", Code::kInvalidArgument,
     "outside a coroutine"},
};

INSTANTIATE_TEST_SUITE_P(Suite, HostileScriptTest, ::testing::ValuesIn(kHostileCases),
                         [](const ::testing::TestParamInfo<HostileCase>& info) {
                           return std::string(info.param.name);
                         });

TEST(LuaSandboxTest, ErrorsCarryTheTraceback) {
  auto box = NewSandbox();
  ASSERT_NE(box, nullptr);
  const absl::Status status = box->Run("tb.lua", R"lua(
    local function inner() error("bad thing") end
    local function outer() inner() end
    outer()
  )lua");
  EXPECT_THAT(status, StatusIs(Code::kInvalidArgument,
                               AllOf(HasSubstr("tb.lua"), HasSubstr("bad thing"),
                                     HasSubstr("stack traceback"), HasSubstr("inner"),
                                     HasSubstr("outer"))));
  const absl::Status budget = box->Run("loop.lua", "local function spin() while true do end end\n"
                                                   "spin()");
  EXPECT_THAT(budget, StatusIs(Code::kDeadlineExceeded,
                               AllOf(HasSubstr("stack traceback"), HasSubstr("spin"))));
  // Gradual growth is caught at a hook tick, with the script's position.
  const absl::Status memory = box->Run("grow.lua", "local t = {}\nwhile true do t[#t + 1] = {1, 2} end");
  EXPECT_THAT(memory, StatusIs(Code::kResourceExhausted,
                               AllOf(HasSubstr("memory cap"), HasSubstr("grow.lua:2"))));
  const absl::Status in_coroutine =
      box->Run("co.lua", "coroutine.wrap(function() error('deep') end)()");
  EXPECT_THAT(in_coroutine, StatusIs(Code::kInvalidArgument,
                                     AllOf(HasSubstr("deep"), HasSubstr("stack traceback"))));
}

TEST(LuaSandboxTest, LuaStackOverflowIsARuntimeError) {
  SandboxLimits limits = SuiteLimits();
  limits.memory_bytes = 96u << 20;  // room for Lua's own stack limit to be reached first
  limits.time_per_call = absl::Seconds(30);  // ~330k frames; slow under sanitizers
  auto box = NewSandbox(limits);
  ASSERT_NE(box, nullptr);
  EXPECT_THAT(box->Run("deep.lua", "local function f() return 1 + f() end f()"),
              StatusIs(Code::kInvalidArgument, HasSubstr("stack overflow")));
  ExpectHealthy(*box);
}

TEST(LuaSandboxTest, WallClockDeadlineStopsALoopWithAHugeInstructionBudget) {
  SandboxLimits limits = SuiteLimits();
  limits.instructions_per_call = int64_t{1} << 60;
  limits.time_per_call = absl::Milliseconds(100);
  auto box = NewSandbox(limits);
  ASSERT_NE(box, nullptr);
  const Outcome outcome = RunTimed(*box, "while true do end");
  EXPECT_THAT(outcome.status, StatusIs(Code::kDeadlineExceeded, HasSubstr("wall-clock")));
  EXPECT_GE(outcome.seconds, 0.09);
  EXPECT_LT(outcome.seconds, 1.0);
  ExpectHealthy(*box);
}

TEST(LuaSandboxTest, CancelFromAnotherThreadStopsTheScript) {
  SandboxLimits limits = SuiteLimits();
  limits.instructions_per_call = int64_t{1} << 60;
  limits.time_per_call = absl::Seconds(30);
  auto box = NewSandbox(limits);
  ASSERT_NE(box, nullptr);
  std::thread canceller([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    box->Cancel();
  });
  const Outcome outcome =
      RunTimed(*box, "coroutine.wrap(function() while true do end end)()");
  canceller.join();
  EXPECT_THAT(outcome.status, StatusIs(Code::kCancelled));
  EXPECT_LT(outcome.seconds, 2.0);
  EXPECT_THAT(box->Run("later.lua", "x = 1"), StatusIs(Code::kCancelled));  // sticky
  box->ResetCancel();
  ExpectHealthy(*box);
}

TEST(LuaSandboxTest, ExternalCancelFlag) {
  std::atomic<bool> flag{false};
  SandboxLimits limits = SuiteLimits();
  limits.instructions_per_call = int64_t{1} << 60;
  limits.time_per_call = absl::Seconds(30);
  limits.cancel_flag = &flag;
  auto box = NewSandbox(limits);
  ASSERT_NE(box, nullptr);
  ExpectHealthy(*box);
  std::thread canceller([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
    flag.store(true);
  });
  const Outcome outcome = RunTimed(*box, "while true do end");
  canceller.join();
  EXPECT_THAT(outcome.status, StatusIs(Code::kCancelled));
  EXPECT_LT(outcome.seconds, 2.0);
  flag.store(false);
  ExpectHealthy(*box);
}

TEST(LuaSandboxTest, TotalInstructionBudgetSpansCalls) {
  SandboxLimits limits = SuiteLimits();
  limits.instructions_total = 1'000'000;
  limits.hook_interval = 100;
  auto box = NewSandbox(limits);
  ASSERT_NE(box, nullptr);
  const char* kWork = "local x = 0 for i = 1, 200000 do x = x + i end";  // ~400k instructions
  BANYAN_EXPECT_OK(box->Run("w1", kWork));
  EXPECT_GT(box->instructions_last_call(), 300'000);
  BANYAN_EXPECT_OK(box->Run("w2", kWork));
  EXPECT_THAT(box->Run("w3", kWork), StatusIs(Code::kDeadlineExceeded, HasSubstr("sandbox")));
  EXPECT_THAT(box->Run("w4", "x = 1"), StatusIs(Code::kDeadlineExceeded, HasSubstr("spent")));
}

// The environment holds exactly the allow-list: nothing else is reachable through _ENV or _G.
TEST(LuaSandboxTest, GlobalsAreExactlyTheAllowList) {
  auto box = NewSandbox();
  ASSERT_NE(box, nullptr);
  std::set<std::string> names;
  BANYAN_ASSERT_OK(box->Protected("enumerate", [&](lua_State* L) {
    lua_pushglobaltable(L);
    lua_pushnil(L);
    while (lua_next(L, -2) != 0) {
      lua_pop(L, 1);
      names.insert(lua_tostring(L, -1));
    }
  }));
  const std::set<std::string> expected = {
      "_G",      "_VERSION", "assert",   "collectgarbage", "coroutine",    "error",
      "getmetatable", "ipairs", "load",   "math",           "next",         "os",
      "pairs",   "pcall",    "print",    "rawequal",       "rawget",       "rawlen",
      "rawset",  "select",   "setmetatable", "string",     "table",        "tonumber",
      "tostring", "type",    "utf8",     "xpcall"};
  EXPECT_EQ(names, expected);
  BANYAN_EXPECT_OK(box->Run("libs.lua", R"lua(
    assert(getmetatable("") == "protected")
    assert(string.dump == nil and string.pack == nil and string.unpack == nil)
    assert(os.execute == nil and os.getenv == nil and os.remove == nil and os.exit == nil)
    assert(type(os.clock()) == "number" and math.type(os.time()) == "integer")
    assert(next(string) == nil)   -- proxies expose nothing to pairs/next
    assert(collectgarbage("count") > 0)
    local f = load("return 1 + 1") assert(f() == 2)
    local env = {y = 5}
    local g = load("return y", "chunk", "t", env) assert(g() == 5)
    print("hello", 42)
  )lua"));
  EXPECT_EQ(box->TakeLog(), "hello\t42\n");
  BANYAN_EXPECT_OK(box->Run("flood.lua", "local s = ('z'):rep(1 << 20) for i = 1, 100 do print(s) end"));
  EXPECT_EQ(box->TakeLog().size(), box->limits().max_log_bytes);
}

TEST(LuaSandboxTest, RandomNumbersFollowTheSeed) {
  SandboxLimits limits = SuiteLimits();
  limits.random_seed = 1234;
  auto a = NewSandbox(limits);
  auto b = NewSandbox(limits);
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  const char* kDraw = "draw = math.random(1, 1 << 40)";
  BANYAN_ASSERT_OK(a->Run("r", kDraw));
  BANYAN_ASSERT_OK(b->Run("r", kDraw));
  lua_Integer da = 0, db = 0;
  BANYAN_ASSERT_OK(a->Protected("get", [&](lua_State* L) {
    lua_getglobal(L, "draw");
    da = lua_tointeger(L, -1);
  }));
  BANYAN_ASSERT_OK(b->Protected("get", [&](lua_State* L) {
    lua_getglobal(L, "draw");
    db = lua_tointeger(L, -1);
  }));
  EXPECT_EQ(da, db);
}

size_t LuaCountedBytes(LuaSandbox& box) {
  size_t bytes = 0;
  EXPECT_TRUE(box.Protected("count", [&](lua_State* L) {
                   bytes = static_cast<size_t>(lua_gc(L, LUA_GCCOUNT)) * 1024 +
                           static_cast<size_t>(lua_gc(L, LUA_GCCOUNTB));
                 }).ok());
  return bytes;
}

// Every realloc is counted old size -> new size: the allocator's total equals Lua's own count
// at every point, and returns exactly to the baseline once the garbage is collected.
TEST(LuaSandboxTest, ReallocAccountingIsExact) {
  auto box = NewSandbox();
  ASSERT_NE(box, nullptr);
  size_t counted = LuaCountedBytes(*box);
  EXPECT_EQ(box->memory_in_use(), counted);
  const char* kWorkload = R"lua(
    local t = {}
    for i = 1, 20000 do t[i] = i end            -- array part grows by realloc
    for i = 1, 20000 do t[i] = nil end
    local h = {}
    for i = 1, 5000 do h["k" .. i] = {i} end    -- hash part grows, strings interned
    local s = ""
    for i = 1, 200 do s = s .. "abcdefgh" end   -- strings grow
    local parts = {}
    for w in ("one two three four"):gmatch("%a+") do parts[#parts + 1] = w:upper() end
    local co = coroutine.wrap(function() for i = 1, 100 do coroutine.yield(i) end end)
    for i = 1, 50 do co() end
  )lua";
  BANYAN_ASSERT_OK(box->Run("warm", kWorkload));
  counted = LuaCountedBytes(*box);
  EXPECT_EQ(box->memory_in_use(), counted);
  BANYAN_ASSERT_OK(box->CollectGarbage());
  BANYAN_ASSERT_OK(box->CollectGarbage());
  const size_t baseline = box->memory_in_use();
  counted = LuaCountedBytes(*box);
  EXPECT_EQ(baseline, counted);
  BANYAN_ASSERT_OK(box->Run("again", kWorkload));
  EXPECT_GT(box->memory_peak(), baseline);
  BANYAN_ASSERT_OK(box->CollectGarbage());
  BANYAN_ASSERT_OK(box->CollectGarbage());
  EXPECT_EQ(box->memory_in_use(), baseline);
  // After a memory failure too.
  EXPECT_THAT(box->Run("bomb", "local t = {} while true do t[#t + 1] = {} end"),
              StatusIs(Code::kResourceExhausted));
  EXPECT_LE(box->memory_peak(), box->limits().memory_bytes + (64u << 10));
  BANYAN_ASSERT_OK(box->CollectGarbage());
  counted = LuaCountedBytes(*box);
  EXPECT_EQ(box->memory_in_use(), counted);
  ExpectHealthy(*box);
}

TEST(LuaSandboxTest, RejectsBadLimitsAndTinyCaps) {
  SandboxLimits limits;
  limits.hook_interval = 0;
  EXPECT_THAT(LuaSandbox::Create(limits), StatusIs(Code::kInvalidArgument));
  limits = SandboxLimits();
  limits.memory_bytes = 1024;
  EXPECT_THAT(LuaSandbox::Create(limits), StatusIs(Code::kInvalidArgument));
  limits.memory_bytes = 64u << 10;  // accepted, but the libraries may not fit: either is fine
  auto box = LuaSandbox::Create(limits);
  if (!box.ok()) {
    EXPECT_THAT(box, StatusIs(Code::kResourceExhausted));
  }
}

TEST(LuaSandboxTest, ReentrantCallIsRefused) {
  auto box = NewSandbox();
  ASSERT_NE(box, nullptr);
  absl::Status inner = absl::OkStatus();
  BANYAN_ASSERT_OK(box->Protected("outer", [&](lua_State*) {
    inner = box->Run("inner", "x = 1");
  }));
  EXPECT_THAT(inner, StatusIs(Code::kFailedPrecondition));
}

TEST(LuaSandboxTest, HostExceptionBecomesInternal) {
  auto box = NewSandbox();
  ASSERT_NE(box, nullptr);
  EXPECT_THAT(box->Protected("throws", [](lua_State*) { throw std::runtime_error("oops"); }),
              StatusIs(Code::kInternal, HasSubstr("oops")));
  ExpectHealthy(*box);
}

// Patterns well inside the bound keep Lua's exact semantics.
TEST(LuaSandboxTest, OrdinaryPatternsStillWork) {
  auto box = NewSandbox();
  ASSERT_NE(box, nullptr);
  BANYAN_EXPECT_OK(box->Run("patterns.lua", R"lua(
    local text = ("The answer is 42. "):rep(200) .. "Final answer: 17"
    assert(text:match("Final answer: (%d+)") == "17")
    assert(select(2, text:gsub("answer", "")) == 201)
    local n = 0 for d in text:gmatch("%d+") do n = n + 1 end assert(n == 201)
    assert(text:find("answer", 1, true) == 5)
    assert(("[x]"):find("[", 1, true) == 1)
    assert(("key = value"):match("^(%w+)%s*=%s*(%w+)$") == "key")
    assert(("f(a(b)c)"):match("%b()") == "(a(b)c)")
    assert(("THE (quick) fox"):find("%f[%a]%a+%f[%A]") == 1)
    assert(string.gsub("hello world", "(%w+)", "<%1>") == "<hello> <world>")
    local ok, err = pcall(string.find, "x", "[a")
    assert(not ok and err:find("malformed"))
  )lua"));
}

}  // namespace
}  // namespace banyan::scripting

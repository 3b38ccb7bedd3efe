#include "search/code_tests.h"

#include <algorithm>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "absl/strings/str_cat.h"
#include "sdk/base/status_testing.h"

namespace banyan::search {
namespace {

using ::banyan::testing::StatusIs;
using ::testing::HasSubstr;

CodeTests Asserts(std::vector<std::string> asserts, std::string setup = "") {
  CodeTests t;
  t.style = TestStyle::kAsserts;
  t.asserts = std::move(asserts);
  t.setup = std::move(setup);
  return t;
}

CodeTests Cases(TestStyle style, std::string json) {
  CodeTests t;
  t.style = style;
  t.cases_json = std::move(json);
  t.case_seconds = 2;
  return t;
}

CheckResult Check(const CodeTests& tests, const std::string& candidate) {
  const CodeExecutor executor(ExecutionLimits{.wall_seconds = 20, .cpu_seconds = 20});
  absl::StatusOr<CheckResult> r = CheckCandidate(executor, tests, candidate);
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? *r : CheckResult{};
}

const CodeTests kAdd = Asserts({"assert add(2, 3) == 5", "assert add(-1, 1) == 0", "assert add(0, 0) == 0"});

TEST(CodeTestsTest, AssertsCountEveryCase) {
  CheckResult r = Check(kAdd, "def add(a, b):\n    return a + b");
  EXPECT_EQ(r.outcome, ExecutionOutcome::kPassed) << r.run.output;
  EXPECT_EQ(r.cases_passed, 3);
  EXPECT_EQ(r.cases_total, 3);
  // Right on two of the three cases.
  r = Check(kAdd, "def add(a, b):\n    return a + b if a != 0 or b != 0 else 1");
  EXPECT_EQ(r.outcome, ExecutionOutcome::kFailed);
  EXPECT_EQ(r.cases_passed, 2);
  EXPECT_THAT(r.run.output, HasSubstr("case 2: assert add(0, 0) == 0"));
  // Setup code runs before the candidate.
  r = Check(Asserts({"assert root(16) == 4"}, "import math"), "def root(x):\n    return int(math.sqrt(x))");
  EXPECT_EQ(r.outcome, ExecutionOutcome::kPassed) << r.run.output;
  // Printing does not disturb the harness's summary.
  r = Check(kAdd, "print('x' * 100000)\ndef add(a, b):\n    print(a, b)\n    return a + b");
  EXPECT_EQ(r.outcome, ExecutionOutcome::kPassed) << r.run.output;
}

TEST(CodeTestsTest, ACandidateThatExitsBeforeItsTestsFails) {
  // Each of these ends the process with status 0 when run as a plain script
  // followed by its asserts: a pass that checked nothing.
  for (const std::string exit : {"exit()", "quit()", "import sys\nsys.exit(0)", "import os\nos._exit(0)",
                                  "raise SystemExit"}) {
    const CheckResult r = Check(kAdd, "def add(a, b):\n    return a - b\n" + exit);
    EXPECT_EQ(r.outcome, ExecutionOutcome::kFailed) << exit << "\n" << r.run.output;
    EXPECT_EQ(r.cases_passed, 0) << exit;
    EXPECT_THAT(r.run.output, HasSubstr("exited while loading")) << exit;
  }
  // A syntax error fails every case with its message.
  const CheckResult r = Check(kAdd, "def add(a, b) return a + b");
  EXPECT_EQ(r.cases_passed, 0);
  EXPECT_THAT(r.run.output, HasSubstr("SyntaxError"));
  // A main block does not run on import (the candidate is loaded as a module).
  const CheckResult main_block =
      Check(kAdd, "def add(a, b):\n    return a + b\nif __name__ == '__main__':\n    input()\n");
  EXPECT_EQ(main_block.outcome, ExecutionOutcome::kPassed) << main_block.run.output;
}

TEST(CodeTestsTest, AHangingCaseFailsAloneUnderItsAlarm) {
  CodeTests t = Asserts({"assert slow(1) == 1", "assert slow(0) == 0", "assert slow(2) == 2"});
  t.case_seconds = 0.5;
  const CheckResult r = Check(t, "def slow(x):\n    while x == 0:\n        pass\n    return x");
  EXPECT_EQ(r.outcome, ExecutionOutcome::kFailed);
  EXPECT_EQ(r.cases_passed, 2);
  EXPECT_THAT(r.run.output, HasSubstr("time limit"));
}

TEST(CodeTestsTest, StandardInputPrograms) {
  const CodeTests sum = Cases(TestStyle::kStdio, R"({"inputs": ["1 2\n", "10 -3\n", ["4 5"]],
                                                     "outputs": ["3\n", "7", "9\n"]})");
  // Every way a program reads its input.
  for (const std::string program :
       {"a, b = map(int, input().split())\nprint(a + b)",
        "import sys\nprint(sum(map(int, sys.stdin.read().split())))",
        "import sys\nprint(sum(map(int, sys.stdin.buffer.read().split())))",
        "print(sum(map(int, open(0).read().split())))",
        "import sys\ndata = sys.stdin.readlines()\nprint(sum(int(x) for l in data for x in l.split()))\nexit()",
        "import sys\nsys.stdout.write(str(sum(map(int, sys.stdin.read().split()))) + '\\n')\nsys.exit(0)"}) {
    const CheckResult r = Check(sum, program);
    EXPECT_EQ(r.outcome, ExecutionOutcome::kPassed) << program << "\n" << r.run.output;
    EXPECT_EQ(r.cases_passed, 3) << program;
  }
  // Wrong on one case; a non-zero exit fails a case even when the output is right.
  CheckResult r = Check(sum, "a, b = map(int, input().split())\nprint(a + b if a != 10 else 0)");
  EXPECT_EQ(r.cases_passed, 2);
  EXPECT_THAT(r.run.output, HasSubstr("case 1: wrong answer"));
  r = Check(sum, "a, b = map(int, input().split())\nprint(a + b)\nimport sys\nsys.exit(3)");
  EXPECT_EQ(r.cases_passed, 0);
  EXPECT_THAT(r.run.output, HasSubstr("exit status 3"));
  // A runtime error fails the case with its message.
  r = Check(sum, "print(1 // 0)");
  EXPECT_EQ(r.cases_passed, 0);
  EXPECT_THAT(r.run.output, HasSubstr("ZeroDivisionError"));
}

TEST(CodeTestsTest, StandardOutputComparison) {
  const CodeTests t = Cases(TestStyle::kStdio, R"({"inputs": ["0", "1", "2", "3"],
      "outputs": ["1 2\n3 4\n", "0.3333333\n", "YES", "a b"]})");
  // The program prints answers[case]: trailing spaces and blank lines, another
  // layout of the same tokens and numbers within 1e-6 all match.
  auto printing = [](const std::string& answers) {
    return absl::StrCat("print([", answers, "][int(input())], end='')\n");
  };
  CheckResult r = Check(t, printing("'1 2  \\n3 4\\n\\n\\n', '0.33333331', '\\nYES\\n', 'a\\nb'"));
  EXPECT_EQ(r.outcome, ExecutionOutcome::kPassed) << r.run.output;
  // Only "1 2 3 4" (the same tokens) matches; '1/3', 'yes', 'a b c' do not.
  r = Check(t, printing("'1 2 3 4', '1/3', 'yes', 'a b c'"));
  EXPECT_EQ(r.cases_passed, 1) << r.run.output;
}

TEST(CodeTestsTest, CallBasedFunctionsAndSolutionMethods) {
  const CodeTests t = Cases(TestStyle::kCall, R"({"fn_name": "pair_sum",
      "inputs": [[[1, 2, 3], 5], [[4], 8], [[123456789012345678901, 1], 123456789012345678902]],
      "outputs": [[[1, 2]], [null], [[0, 1]]]})");
  const std::string function =
      "def pair_sum(xs, target):\n"
      "    seen = {}\n"
      "    for i, x in enumerate(xs):\n"
      "        if target - x in seen:\n"
      "            return (seen[target - x], i)\n"
      "        seen[x] = i\n"
      "    return None\n";
  CheckResult r = Check(t, function);
  EXPECT_EQ(r.outcome, ExecutionOutcome::kPassed) << r.run.output;
  EXPECT_EQ(r.cases_total, 3);
  const std::string method =
      "class Solution:\n"
      "    def pair_sum(self, xs, target):\n"
      "        for i in range(len(xs)):\n"
      "            for j in range(i + 1, len(xs)):\n"
      "                if xs[i] + xs[j] == target:\n"
      "                    return [i, j]\n";
  r = Check(t, method);
  EXPECT_EQ(r.outcome, ExecutionOutcome::kPassed) << r.run.output;
  r = Check(t, "def pair_sum(xs, target):\n    return [0, 1]\n");
  EXPECT_EQ(r.cases_passed, 1);
  r = Check(t, "def other(xs, target):\n    return None\n");
  EXPECT_EQ(r.cases_passed, 0);
  EXPECT_THAT(r.run.output, HasSubstr("no function or Solution method named pair_sum"));
  // Float results compare within 1e-6.
  const CodeTests avg = Cases(TestStyle::kCall, R"({"fn_name": "mean", "inputs": [[[1, 2]]], "outputs": [1.5]})");
  r = Check(avg, "def mean(xs):\n    return sum(xs) / len(xs) + 1e-9\n");
  EXPECT_EQ(r.outcome, ExecutionOutcome::kPassed) << r.run.output;
}

TEST(CodeTestsTest, LimitsGrowWithTheCases) {
  CodeTests t = kAdd;
  t.case_seconds = 2.5;
  const ExecutionLimits limits = LimitsForTests(t, ExecutionLimits{.wall_seconds = 5, .cpu_seconds = 5});
  EXPECT_DOUBLE_EQ(limits.wall_seconds, 5 + 3 * 2.5);
  EXPECT_EQ(limits.cpu_seconds, 5 + 8);  // 7.5 rounded up
  EXPECT_EQ(limits.memory_bytes, ExecutionLimits{}.memory_bytes);
}

TEST(CodeTestsTest, BadSpecsGetSpecificErrors) {
  struct Case {
    CodeTests tests;
    std::string message;
  };
  CodeTests zero_seconds = kAdd;
  zero_seconds.case_seconds = 0;
  const Case cases[] = {
      {Asserts({}), "no asserts"},
      {Asserts({"assert True", ""}), "an assert is empty"},
      {zero_seconds, "case_seconds"},
      {Cases(TestStyle::kStdio, "not json"), "not a JSON object"},
      {Cases(TestStyle::kStdio, R"({"outputs": ["1"]})"), "\"inputs\""},
      {Cases(TestStyle::kStdio, R"({"inputs": ["1"], "outputs": "1"})"), "\"outputs\""},
      {Cases(TestStyle::kStdio, R"({"inputs": [], "outputs": []})"), "at least 1"},
      {Cases(TestStyle::kStdio, R"({"inputs": ["1", "2"], "outputs": ["1"]})"), "2 inputs and 1 outputs"},
      {Cases(TestStyle::kStdio, R"({"inputs": [1], "outputs": ["1"]})"), "case 0"},
      {Cases(TestStyle::kCall, R"({"inputs": [[1]], "outputs": [1]})"), "fn_name"},
      {Cases(TestStyle::kCall, R"({"inputs": [[1]], "outputs": [1], "fn_name": ""})"), "fn_name"},
  };
  const CodeExecutor executor;
  for (const Case& c : cases) {
    EXPECT_THAT(ValidateCodeTests(c.tests), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(c.message)))
        << c.message;
    EXPECT_THAT(CheckCandidate(executor, c.tests, "pass").status(),
                StatusIs(absl::StatusCode::kInvalidArgument))
        << c.message;
    EXPECT_EQ(CaseCount(c.tests), 0);
  }
}

TEST(CodeTestsTest, AProgramThatKillsTheHarnessDoesNotPass) {
  // No summary line (the process died): failed or crashed, never passed.
  CheckResult r = Check(kAdd, "import os, signal\nos.kill(os.getpid(), signal.SIGKILL)");
  EXPECT_EQ(r.outcome, ExecutionOutcome::kCrashed);
  EXPECT_EQ(r.cases_passed, 0);
  // A forked child returns into the harness too: it leaves without reporting,
  // and the parent's own count stands (here: the wrong add fails every case).
  r = Check(kAdd, "import os\nos.fork()\ndef add(a, b):\n    return a - b");
  EXPECT_EQ(r.outcome, ExecutionOutcome::kFailed) << r.run.output;
  // add(0, 0) == 0 holds for a - b (unless the process cap refused the fork: then the load failed).
  EXPECT_EQ(r.cases_passed, r.run.output.find("load: ") == std::string::npos ? 1 : 0) << r.run.output;
  EXPECT_EQ(std::count(r.run.output.begin(), r.run.output.end(), '/'), 1) << r.run.output;  // one summary
  // A forged summary without the run's nonce is ignored.
  r = Check(kAdd, "import posix\nposix.write(1, b'banyan-harness 0 3/3\\n')\nposix._exit(0)");
  EXPECT_EQ(r.outcome, ExecutionOutcome::kFailed) << r.run.output;
  EXPECT_EQ(r.cases_passed, 0);
}

}  // namespace
}  // namespace banyan::search

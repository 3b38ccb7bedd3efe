// CodeTests: how a sampled program is checked, in the three styles of code
// benchmarks, and CheckCandidate, which runs one candidate against them in a
// CodeExecutor subprocess and counts the test cases it passes.
//
//   kAsserts  MBPP / HumanEval: `setup`, then the candidate, then each assert
//             statement of `asserts` (one case each).
//   kStdio    APPS "standard input": the candidate is a whole program; case i
//             runs it afresh with inputs[i] on standard input (sys.stdin,
//             input(), open(0) all see it) and compares what it printed with
//             outputs[i]: equal lines after trailing spaces and blank lines are
//             dropped, else equal whitespace-separated tokens, numbers equal
//             within 1e-6 (absolute or relative). A program that ends itself
//             with exit() / sys.exit(0) / os._exit(0) after printing is fine; a
//             non-zero exit status fails the case.
//   kCall     APPS "call-based": the candidate defines `fn_name`, as a function
//             or as a method of class Solution (LeetCode style); case i calls
//             it with the arguments inputs[i] and compares the result with
//             outputs[i] (tuples as lists, numbers within 1e-6; an expected
//             value wrapped in a one-element list, as APPS writes them, also
//             matches the bare result).
//
// `cases_json` is the APPS `input_output` object as JSON text:
//   {"inputs": [...], "outputs": [...], "fn_name": "..."}   (fn_name: kCall)
// It reaches the checking program unchanged, so integers of any size survive.
//
// The checking program (a Python harness, HarnessProgram) loads the candidate
// into a fresh namespace per case, with its standard output and error
// captured, a per-case alarm of `case_seconds`, and its attempts to leave the
// process turned into exceptions: in kAsserts and kCall a candidate that exits
// while it loads fails every case instead of passing unchecked (a bare
// `exit()` before the tests ran used to read as exit status 0). The harness
// ends with a summary line carrying a per-run nonce; CheckCandidate passes a
// candidate only when the process exited 0 and that line says every case
// passed.
//
// Thread-safe (pure functions; CheckCandidate is as thread-safe as the
// executor's Run, which is).
#ifndef BANYAN_SEARCH_CODE_TESTS_H_
#define BANYAN_SEARCH_CODE_TESTS_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "search/code_executor.h"

namespace banyan::search {

enum class TestStyle { kAsserts, kStdio, kCall };

struct CodeTests {
  TestStyle style = TestStyle::kAsserts;
  std::string setup;                 // kAsserts: run before the candidate (imports, helpers)
  std::vector<std::string> asserts;  // kAsserts: one statement per case
  std::string cases_json;            // kStdio / kCall: {"inputs": [...], "outputs": [...], "fn_name": ...}
  double case_seconds = 4.0;         // each case's alarm (the executor's limits bound the whole run)
};

// OK, or kInvalidArgument naming what is wrong: no asserts (or an empty one);
// cases_json not a JSON object, without "inputs" / "outputs" lists of one
// length >= 1, or (kCall) without a non-empty string "fn_name"; kStdio inputs
// and outputs must be strings or lists of strings (lines); case_seconds <= 0.
absl::Status ValidateCodeTests(const CodeTests& tests);

// The number of cases (asserts, or entries of "inputs"); 0 when invalid.
int32_t CaseCount(const CodeTests& tests);

// The Python program that checks `candidate` against `tests` and ends by
// printing "banyan-harness <nonce> <passed>/<total>" on its own line.
// REQUIRES: ValidateCodeTests(tests).ok(); `nonce` is [0-9a-f]+.
std::string HarnessProgram(const CodeTests& tests, std::string_view candidate,
                           std::string_view nonce);

// `base` with its wall and CPU seconds raised by every case's alarm
// (CaseCount x case_seconds): limits under which a run that uses each case's
// whole time is still not cut short.
ExecutionLimits LimitsForTests(const CodeTests& tests, ExecutionLimits base);

struct CheckResult {
  // kPassed only when every case passed; kFailed when a case failed or the
  // harness could not report; kTimeout / kCrashed as the executor saw the run.
  ExecutionOutcome outcome = ExecutionOutcome::kFailed;
  int32_t cases_passed = 0;
  int32_t cases_total = 0;
  ExecutionResult run;  // the harness's output: one line per failed case, then the summary
};

// Validates `tests`, runs the harness for `candidate` and reads its summary.
// Errors: kInvalidArgument from ValidateCodeTests; the executor's own errors
// (kUnavailable, kInternal). Anything the candidate does is a CheckResult.
absl::StatusOr<CheckResult> CheckCandidate(const CodeExecutor& executor, const CodeTests& tests,
                                           std::string_view candidate);

}  // namespace banyan::search

#endif  // BANYAN_SEARCH_CODE_TESTS_H_

// MBPP-style problems from JSON Lines: one object per line,
//
//   {"task_id": 1, "text": "Write a function ...", "code": "def f(...): ...",
//    "test_list": ["assert f(1) == 2", ...], "test_setup_code": "import math"}
//
// `task_id` (a non-negative integer), `text` (non-empty) and `test_list` (a
// non-empty list of strings) are required; `code` (the reference solution) and
// `test_setup_code` are optional; other keys are ignored. Blank lines are
// skipped. Thread-safe (pure functions).
//
// Errors (every message names the file and the 1-based line):
//   kNotFound          the file does not exist
//   kPermissionDenied  it cannot be read
//   kInvalidArgument   a line is not JSON, not an object, misses a required
//                      key, has a key of the wrong type, or repeats a task_id
//   kFailedPrecondition the file holds no problem
#ifndef BANYAN_SAMPLES_CODE_EVAL_MBPP_DATASET_H_
#define BANYAN_SAMPLES_CODE_EVAL_MBPP_DATASET_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "search/code_tests.h"

namespace banyan::samples {

struct MbppProblem {
  int64_t task_id = 0;
  std::string text;
  std::string code;  // reference solution; may be empty
  std::vector<std::string> tests;
  std::string setup;  // test_setup_code
};

// One line (without its newline). `where` prefixes error messages.
absl::StatusOr<MbppProblem> ParseMbppLine(std::string_view line, std::string_view where);

// Every problem of a JSONL file, in file order.
absl::StatusOr<std::vector<MbppProblem>> LoadMbpp(const std::string& path);

// The problem's tests for search::CheckCandidate: its setup code, then each
// assert as one case.
search::CodeTests MbppTests(const MbppProblem& problem);

}  // namespace banyan::samples

#endif  // BANYAN_SAMPLES_CODE_EVAL_MBPP_DATASET_H_

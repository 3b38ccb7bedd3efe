// APPS problems from JSON Lines, as the dataset is published (the Hugging Face
// `codeparrot/apps` files): one object per line,
//
//   {"problem_id": 12, "question": "...", "starter_code": "",
//    "input_output": "{\"inputs\": [\"1 2\\n\"], \"outputs\": [\"3\\n\"]}",
//    "solutions": "[\"a, b = ...\"]", "difficulty": "introductory", "url": "..."}
//
// `problem_id` (a non-negative integer) and `question` (non-empty) are
// required. `input_output` is a string holding the JSON of the tests, as APPS
// writes it: {"inputs": [...], "outputs": [...]} for standard-input problems,
// plus "fn_name" for call-based ones (search/code_tests.h says how each is
// checked); the text is passed to the checker unchanged, so large integers stay
// exact. `solutions` (a string holding a JSON list of programs; the first is the
// reference), `starter_code` and `difficulty` are optional; other keys are
// ignored. A problem whose `input_output` is absent or "" has no tests: it is
// skipped and counted (the APPS training split has some). Blank lines are
// skipped. Thread-safe (pure functions).
//
// Errors (every message names the file and the 1-based line): those of
// jsonl.h; kInvalidArgument also for a repeated problem_id, an `input_output`
// or `solutions` that is not a string of the JSON described, or tests that
// search::ValidateCodeTests rejects; kFailedPrecondition when no problem with
// tests is left.
#ifndef BANYAN_SAMPLES_CODE_EVAL_APPS_DATASET_H_
#define BANYAN_SAMPLES_CODE_EVAL_APPS_DATASET_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "search/code_tests.h"

namespace banyan::samples {

struct AppsProblem {
  int64_t problem_id = 0;
  std::string question;
  std::string starter_code;
  std::string difficulty;  // "introductory", "interview", "competition" or ""
  std::string reference;   // the first of `solutions`; may be empty
  search::CodeTests tests;  // kStdio, or kCall when input_output names fn_name
};

struct AppsDataset {
  std::vector<AppsProblem> problems;  // file order
  int64_t skipped_without_tests = 0;
};

absl::StatusOr<AppsDataset> LoadApps(const std::string& path);

}  // namespace banyan::samples

#endif  // BANYAN_SAMPLES_CODE_EVAL_APPS_DATASET_H_

// A code benchmark in the form the evaluator (code_eval.h) runs: a few-shot
// prompt prefilled once, the strings that end a sample, and per task the text
// appended after the few-shot prompt and the tests its samples must pass.
//
//   MBPP: "You are an expert Python programmer, and here is your task: <text>
//         Your code should pass these tests: <asserts> [BEGIN]", the code up to
//         "[DONE]" (the MBPP paper's prompt, one worked example as the shot).
//   APPS: "QUESTION: <question> <starter code> Use Standard Input format |
//         Use Call-Based format ANSWER:" (the APPS paper's prompt), one worked
//         example as the shot, the code in a ```python fence.
//
// Thread-safe (pure functions).
#ifndef BANYAN_SAMPLES_CODE_EVAL_CODE_SUITE_H_
#define BANYAN_SAMPLES_CODE_EVAL_CODE_SUITE_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "samples/code_eval/apps_dataset.h"
#include "samples/code_eval/mbpp_dataset.h"
#include "search/code_tests.h"

namespace banyan::samples {

struct CodeTask {
  int64_t id = 0;
  std::string prompt;     // appended to the few-shot prompt
  std::string reference;  // a known-good solution; may be empty
  search::CodeTests tests;
};

struct CodeSuite {
  std::string few_shot;
  std::vector<std::string> stop_strings;
  std::vector<CodeTask> tasks;
};

CodeSuite MbppSuite(const std::vector<MbppProblem>& problems);
CodeSuite AppsSuite(const std::vector<AppsProblem>& problems);

// The code in a completion: up to "[DONE]", inside ``` fences when there are
// some (an unclosed fence runs to the end), trailing whitespace removed.
std::string ExtractCode(std::string_view completion);

}  // namespace banyan::samples

#endif  // BANYAN_SAMPLES_CODE_EVAL_CODE_SUITE_H_

#include "samples/code_eval/code_suite.h"

#include "absl/strings/str_cat.h"

namespace banyan::samples {
namespace {

constexpr std::string_view kDone = "[DONE]";

std::string MbppTask(const std::string& text, const std::vector<std::string>& tests) {
  std::string s = absl::StrCat("You are an expert Python programmer, and here is your task: ", text,
                               " Your code should pass these tests:\n\n");
  for (const std::string& t : tests) absl::StrAppend(&s, t, "\n");
  return s + "[BEGIN]\n";
}

std::string AppsTask(const std::string& question, const std::string& starter_code, bool call_based) {
  return absl::StrCat("QUESTION:\n", question, "\n", starter_code, "\n",
                      call_based ? "Use Call-Based format" : "Use Standard Input format", "\nANSWER:\n");
}

}  // namespace

CodeSuite MbppSuite(const std::vector<MbppProblem>& problems) {
  CodeSuite suite;
  // One worked example (not one of the dataset's problems).
  suite.few_shot = MbppTask("Write a function min_of_two(a, b) that returns the smaller of two numbers.",
                            {"assert min_of_two(3, 7) == 3", "assert min_of_two(-2, -5) == -5"}) +
                   "def min_of_two(a, b):\n    return a if a < b else b\n[DONE]\n\n";
  suite.stop_strings = {std::string(kDone)};
  for (const MbppProblem& p : problems) {
    suite.tasks.push_back(CodeTask{.id = p.task_id, .prompt = MbppTask(p.text, p.tests), .reference = p.code,
                                   .tests = MbppTests(p)});
  }
  return suite;
}

CodeSuite AppsSuite(const std::vector<AppsProblem>& problems) {
  CodeSuite suite;
  suite.few_shot = AppsTask("Read two integers a and b from one line of standard input and print their sum.", "",
                            false) +
                   "```python\na, b = map(int, input().split())\nprint(a + b)\n```\n\n";
  suite.stop_strings = {"\nQUESTION:", "\n```\n"};
  for (const AppsProblem& p : problems) {
    const bool call = p.tests.style == search::TestStyle::kCall;
    suite.tasks.push_back(CodeTask{.id = p.problem_id, .prompt = AppsTask(p.question, p.starter_code, call),
                                   .reference = p.reference, .tests = p.tests});
  }
  return suite;
}

std::string ExtractCode(std::string_view completion) {
  std::string_view code = completion;
  if (size_t done = code.find(kDone); done != std::string_view::npos) code = code.substr(0, done);
  if (size_t open = code.find("```"); open != std::string_view::npos) {
    size_t start = code.find('\n', open);
    start = start == std::string_view::npos ? code.size() : start + 1;
    const size_t close = code.find("```", start);
    code = code.substr(start, close == std::string_view::npos ? std::string_view::npos : close - start);
  }
  while (!code.empty() && (code.back() == ' ' || code.back() == '\n' || code.back() == '\r' || code.back() == '\t')) {
    code.remove_suffix(1);
  }
  return std::string(code);
}

}  // namespace banyan::samples

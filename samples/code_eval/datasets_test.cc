#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "samples/code_eval/apps_dataset.h"
#include "samples/code_eval/mbpp_dataset.h"
#include "sdk/base/rng.h"
#include "samples/code_eval/shipped_data.h"
#include "sdk/base/status_testing.h"
#include "search/code_tests.h"

namespace banyan::samples {
namespace {

using ::banyan::testing::StatusIs;
using ::testing::HasSubstr;

std::string WriteFile(const std::string& name, const std::string& text) {
  const std::string path = ::testing::TempDir() + "/" + name;
  std::ofstream(path) << text;
  return path;
}

// A malformed line and the words its error must hold.
struct BadLine {
  std::string line;
  std::string message;
};

// Each bad line, third in a file after a good line and a blank one, fails `load` with kInvalidArgument naming the
// file, the line number and the message.
template <typename Load>
void ExpectLineErrors(Load load, const std::string& file, const std::string& good, const std::vector<BadLine>& cases) {
  for (const BadLine& c : cases) {
    const std::string path = WriteFile(file, good + "\n\n" + c.line + "\n");
    EXPECT_THAT(load(path).status(), StatusIs(absl::StatusCode::kInvalidArgument,
                                              ::testing::AllOf(HasSubstr(file + ":3"), HasSubstr(c.message))))
        << c.line;
  }
}

search::CheckResult Check(const search::CodeTests& tests, const std::string& candidate) {
  const search::CodeExecutor executor(search::ExecutionLimits{.wall_seconds = 30, .cpu_seconds = 30});
  absl::StatusOr<search::CheckResult> r = search::CheckCandidate(executor, tests, candidate);
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? *r : search::CheckResult{};
}

TEST(MbppDatasetTest, ShippedProblemsParseAndTheirReferencesPass) {
  BANYAN_ASSERT_OK_AND_ASSIGN(std::vector<MbppProblem> problems, LoadMbpp(ShippedMbppTiny()));
  ASSERT_EQ(problems.size(), 5u);
  for (const MbppProblem& p : problems) {
    EXPECT_GE(p.tests.size(), 3u);
    const search::CheckResult r = Check(MbppTests(p), p.code);
    EXPECT_EQ(r.outcome, search::ExecutionOutcome::kPassed) << p.task_id << ": " << r.run.output;
    EXPECT_EQ(r.cases_passed, static_cast<int32_t>(p.tests.size()));
  }
  // A wrong solution fails its tests.
  const search::CheckResult r = Check(MbppTests(problems[0]), "def add_numbers(a, b):\n    return a - b");
  EXPECT_EQ(r.outcome, search::ExecutionOutcome::kFailed);
  EXPECT_LT(r.cases_passed, 3);
}

TEST(MbppDatasetTest, MalformedLinesGetSpecificErrors) {
  const std::string good = R"({"task_id": 1, "text": "t", "test_list": ["assert True"]})";
  ExpectLineErrors(LoadMbpp, "bad.jsonl", good, {
      {"{not json", "not a JSON object"},
      {"[1, 2]", "not a JSON object"},
      {R"({"text": "t", "test_list": ["a"]})", "missing key \"task_id\""},
      {R"({"task_id": -1, "text": "t", "test_list": ["a"]})", "non-negative integer"},
      {R"({"task_id": 1.5, "text": "t", "test_list": ["a"]})", "non-negative integer"},
      {R"({"task_id": "7", "text": "t", "test_list": ["a"]})", "non-negative integer"},
      {R"({"task_id": 2, "test_list": ["a"]})", "missing key \"text\""},
      {R"({"task_id": 2, "text": 5, "test_list": ["a"]})", "\"text\" must be a string"},
      {R"({"task_id": 2, "text": "t"})", "missing key \"test_list\""},
      {R"({"task_id": 2, "text": "t", "test_list": []})", "non-empty list"},
      {R"({"task_id": 2, "text": "t", "test_list": [3]})", "non-empty list"},
      {R"({"task_id": 2, "text": "t", "test_list": ["a"], "code": 1})", "\"code\" must be"},
      {good, "appears twice"},
  });
  EXPECT_THAT(LoadMbpp("/nonexistent/mbpp.jsonl").status(), StatusIs(absl::StatusCode::kNotFound));
  EXPECT_THAT(LoadMbpp(WriteFile("empty.jsonl", "\n\n")).status(), StatusIs(absl::StatusCode::kFailedPrecondition));
}

TEST(AppsDatasetTest, ShippedProblemsParseAndTheirReferencesPass) {
  BANYAN_ASSERT_OK_AND_ASSIGN(AppsDataset apps, LoadApps(ShippedAppsTiny()));
  ASSERT_EQ(apps.problems.size(), 5u);
  EXPECT_EQ(apps.skipped_without_tests, 1);  // problem 5 was published without tests
  int call_based = 0;
  for (const AppsProblem& p : apps.problems) {
    EXPECT_FALSE(p.reference.empty()) << p.problem_id;
    EXPECT_FALSE(p.difficulty.empty()) << p.problem_id;
    if (p.tests.style == search::TestStyle::kCall) ++call_based;
    const search::CheckResult r = Check(p.tests, p.reference);
    EXPECT_EQ(r.outcome, search::ExecutionOutcome::kPassed) << p.problem_id << ": " << r.run.output;
    EXPECT_GE(r.cases_total, 2) << p.problem_id;
    EXPECT_EQ(r.cases_passed, r.cases_total) << p.problem_id;
  }
  EXPECT_EQ(call_based, 2);
  // Another problem's reference fails this one's tests.
  const search::CheckResult wrong = Check(apps.problems[0].tests, apps.problems[1].reference);
  EXPECT_EQ(wrong.outcome, search::ExecutionOutcome::kFailed);
}

TEST(AppsDatasetTest, MalformedLinesGetSpecificErrors) {
  const std::string io = R"("input_output": "{\"inputs\": [\"1\\n\"], \"outputs\": [\"1\\n\"]}")";
  const std::string good = R"({"problem_id": 1, "question": "q", )" + io + "}";
  ExpectLineErrors(LoadApps, "bad_apps.jsonl", good, {
      {"{not json", "not a JSON object"},
      {R"({"question": "q"})", "missing key \"problem_id\""},
      {R"({"problem_id": -3, "question": "q"})", "non-negative integer"},
      {R"({"problem_id": 2})", "missing key \"question\""},
      {R"({"problem_id": 2, "question": ""})", "\"question\" is empty"},
      {R"({"problem_id": 2, "question": "q", "input_output": {"inputs": []}})", "must be a string holding"},
      {R"({"problem_id": 2, "question": "q", "input_output": "[1]"})", "input_output"},
      {R"({"problem_id": 2, "question": "q", "input_output": "{\"inputs\": [\"1\"], \"outputs\": []}"})",
       "1 inputs and 0 outputs"},
      {R"({"problem_id": 2, "question": "q", "input_output": "{\"inputs\": [[1]], \"outputs\": [1], \"fn_name\": 7}"})",
       "fn_name"},
      {R"({"problem_id": 2, "question": "q", "solutions": "not a list", )" + io + "}", "\"solutions\""},
      {R"({"problem_id": 2, "question": "q", "solutions": "[1]", )" + io + "}", "\"solutions\""},
      {R"({"problem_id": 2, "question": "q", "starter_code": 0, )" + io + "}", "\"starter_code\" must be a string"},
      {good, "appears twice"},
  });
  EXPECT_THAT(LoadApps("/nonexistent/apps.jsonl").status(), StatusIs(absl::StatusCode::kNotFound));
  // Only problems without tests: nothing to evaluate.
  EXPECT_THAT(LoadApps(WriteFile("untested.jsonl", R"({"problem_id": 1, "question": "q", "input_output": ""})")).status(),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("1 without")));
}

// The shipped files truncated and with random bytes changed: each load is OK
// or one of the documented statuses, never a crash; tests that load validate.
TEST(DatasetFuzzTest, MutatedFilesGetDocumentedStatuses) {
  Rng rng(44);
  for (const std::string& path : {ShippedMbppTiny(), ShippedAppsTiny()}) {
    std::stringstream text;
    text << std::ifstream(path).rdbuf();
    const std::string seed = text.str();
    ASSERT_FALSE(seed.empty()) << path;
    for (int i = 0; i < 150; ++i) {
      std::string m = seed;
      if (i % 3 == 0) {
        m = m.substr(0, rng.UniformInt(m.size() + 1));
      } else {
        const int flips = 1 + static_cast<int>(rng.UniformInt(6));
        for (int k = 0; k < flips; ++k) m[rng.UniformInt(m.size())] = static_cast<char>(rng.UniformInt(256));
      }
      const std::string file = WriteFile("mutated.jsonl", m);
      const absl::Status status = path == ShippedMbppTiny() ? LoadMbpp(file).status() : LoadApps(file).status();
      EXPECT_TRUE(status.ok() || status.code() == absl::StatusCode::kInvalidArgument ||
                  status.code() == absl::StatusCode::kFailedPrecondition)
          << status;
      if (path != ShippedAppsTiny() || !status.ok()) continue;
      BANYAN_ASSERT_OK_AND_ASSIGN(AppsDataset apps, LoadApps(file));
      for (const AppsProblem& p : apps.problems) {
        EXPECT_TRUE(search::ValidateCodeTests(p.tests).ok());
        EXPECT_GT(search::CaseCount(p.tests), 0);
        EXPECT_FALSE(search::HarnessProgram(p.tests, p.reference, "0123abcd").empty());
      }
    }
  }
}

}  // namespace
}  // namespace banyan::samples

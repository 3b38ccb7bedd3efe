// `banyan eval`: flag and data errors, --check-reference on both shipped
// datasets, and a run on the default model (skipped when it is absent) that
// prints pass@k and writes the per-sample report.
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "model/default_model.h"
#include "samples/code_eval/shipped_data.h"
#include "sdk/base/status_testing.h"
#include "sdk/cli/command.h"

namespace banyan::cli {
namespace {

using ::banyan::testing::StatusIs;
using ::testing::HasSubstr;

const std::string kApps = samples::ShippedAppsTiny();

std::string Captured(const std::vector<std::string>& args, absl::Status& status) {
  ::testing::internal::CaptureStdout();
  status = RunEval(args);
  return ::testing::internal::GetCapturedStdout();
}

TEST(EvalCommandTest, BadFlagsAndData) {
  EXPECT_THAT(RunEval({"--format", "xml"}), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("--format")));
  EXPECT_THAT(RunEval({"--data", "/nonexistent/problems.jsonl"}), StatusIs(absl::StatusCode::kNotFound));
  EXPECT_THAT(RunEval({"--data", kApps, "--difficulty", "legendary"}),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("no task selected")));
  EXPECT_THAT(RunEval({"--k", "one"}), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("--k")));
  EXPECT_THAT(RunEval({"--bogus"}), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("unknown flag")));
}

TEST(EvalCommandTest, ReferencesPassOnBothDatasets) {
  absl::Status status;
  std::string out = Captured({"--check-reference"}, status);
  BANYAN_ASSERT_OK(status);
  EXPECT_THAT(out, HasSubstr("task 1: passed (3/3 cases)"));
  EXPECT_THAT(out, ::testing::Not(HasSubstr("failed")));
  out = Captured({"--data", kApps, "--check-reference", "--difficulty", "interview"}, status);
  BANYAN_ASSERT_OK(status);
  EXPECT_EQ(out, "task 3: passed (3/3 cases)\ntask 4: passed (3/3 cases)\n");  // the two call-based problems
}

TEST(EvalCommandTest, RunsOnTheDefaultModelAndWritesTheReport) {
  if (!model::FindDefaultModel().ok()) GTEST_SKIP() << "default model absent";
  const std::string report = ::testing::TempDir() + "/eval_report.jsonl";
  absl::Status status;
  const std::string out = Captured({"--data", kApps, "--limit", "1", "--n", "2", "--k", "1,2", "--max-tokens",
                                    "8", "--seed", "3", "--report", report},
                                   status);
  BANYAN_ASSERT_OK(status);
  EXPECT_THAT(out, HasSubstr("task 1: "));
  EXPECT_THAT(out, HasSubstr("pass@2"));
  EXPECT_THAT(out, HasSubstr("1 problems x 2 samples"));
  std::ifstream in(report);
  std::string line;
  int lines = 0;
  while (std::getline(in, line)) {
    // Keys in the documented order, one sample per line.
    EXPECT_THAT(line, ::testing::StartsWith(absl::StrCat("{\"task_id\": 1, \"sample\": ", lines, ", \"outcome\": ")));
    EXPECT_THAT(line, HasSubstr("\"cases_total\": 3, \"tokens\": "));
    EXPECT_THAT(line, ::testing::EndsWith("\"}"));
    ++lines;
  }
  EXPECT_EQ(lines, 2);
}

}  // namespace
}  // namespace banyan::cli

// `banyan search`: flag errors, and a run on the default model (skipped when
// it is absent) that prints the answer, the shape and the cost, writes a trace
// and replays it.
#include <fstream>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "model/default_model.h"
#include "sdk/base/status_testing.h"
#include "sdk/cli/command.h"
#include "search/strategy.h"

namespace banyan::cli {
namespace {

using ::banyan::testing::StatusIs;
using ::testing::HasSubstr;

TEST(SearchCommandTest, BadFlags) {
  EXPECT_THAT(RunSearch({"--strategy", "tot-bfs"}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("--prompt")));
  EXPECT_THAT(RunSearch({"--strategy", "astar", "--prompt", "x"}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("unknown strategy")));
  EXPECT_THAT(RunSearch({"--prompt", "x", "--n", "0"}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("--n")));
  EXPECT_THAT(RunSearch({"--prompt", "x", "--evaluation", "oracle"}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("--evaluation")));
  EXPECT_THAT(RunSearch({"--prompt", "x", "--bogus", "1"}),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(RunSearch({"--prompt", "x", "--policy", "/nonexistent/p.lua"}),
              StatusIs(absl::StatusCode::kNotFound));
  EXPECT_THAT(RunSearch({"--replay", "/nonexistent/t.pb"}), StatusIs(absl::StatusCode::kNotFound));
}

TEST(SearchCommandTest, RunsTracesAndReplaysOnTheDefaultModel) {
  if (!model::FindDefaultModel().ok()) GTEST_SKIP() << "default model absent";
  const std::string trace = ::testing::TempDir() + "/search_cli_trace.json";
  ::testing::internal::CaptureStdout();
  const absl::Status run =
      RunSearch({"--strategy", "tot-bfs", "--prompt", "Name a fruit.", "--n", "2", "--beam", "1",
                 "--depth", "1", "--max-tokens", "6", "--seed", "4", "--device", "cpu",
                 "--trace", trace});
  const std::string out = ::testing::internal::GetCapturedStdout();
  BANYAN_ASSERT_OK(run);
  EXPECT_THAT(out, HasSubstr("strategy: tot-bfs"));
  EXPECT_THAT(out, HasSubstr("answer: "));
  EXPECT_THAT(out, HasSubstr("value:  "));  // the best node's value (no votes in a tree search)
  EXPECT_THAT(out, HasSubstr("tree:   3 nodes, depth 1, 2 leaves; nodes per depth: 1 2"));
  EXPECT_THAT(out, HasSubstr("cost: "));
  BANYAN_ASSERT_OK_AND_ASSIGN(proto::SearchTrace t, search::ReadTrace(trace));
  EXPECT_EQ(t.config().strategy(), "tot-bfs");
  EXPECT_EQ(t.node_count(), 3);

  ::testing::internal::CaptureStdout();
  const absl::Status replay = RunSearch({"--replay", trace, "--device", "cpu"});
  const std::string replayed = ::testing::internal::GetCapturedStdout();
  BANYAN_ASSERT_OK(replay);
  EXPECT_THAT(replayed, HasSubstr("replayed identically"));
}

}  // namespace
}  // namespace banyan::cli

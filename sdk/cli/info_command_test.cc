// `banyan info`: flags, a missing model, and an engine over the default model
// (skipped when it is absent) whose KV pool and model shape are reported.
#include "sdk/cli/info_command.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "model/default_model.h"
#include "sdk/base/status_testing.h"
#include "sdk/cli/command.h"

namespace banyan::cli {
namespace {

using ::banyan::testing::StatusIs;
using ::testing::HasSubstr;

TEST(InfoCommandTest, BadFlags) {
  EXPECT_THAT(RunInfo({"--kv-budget-mb", "-1"}), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(RunInfo({"--threads", "x"}), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(RunInfo({"--bogus"}), StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(InfoCommandTest, NoEngineAndMissingModel) {
  InfoRequest request;
  request.engine = false;
  EXPECT_FALSE(CollectInfo(request).has_engine());

  request.engine = true;
  request.model_path = "/nonexistent/model.gguf";
  absl::Status status;
  const proto::SystemInfo info = CollectInfo(request, &status);
  EXPECT_THAT(status, StatusIs(absl::StatusCode::kNotFound));
  EXPECT_THAT(info.engine().status(), HasSubstr("NOT_FOUND"));
  ::testing::internal::CaptureStdout();
  EXPECT_THAT(RunInfo({"--model", "/nonexistent/model.gguf"}), StatusIs(absl::StatusCode::kNotFound));
  EXPECT_THAT(::testing::internal::GetCapturedStdout(), HasSubstr("engine:        none ("));
}

TEST(InfoCommandTest, EngineOverTheDefaultModel) {
  if (!model::FindDefaultModel().ok()) GTEST_SKIP() << "default model absent";
  InfoRequest request;
  request.device = "cpu";
  request.kv_budget_bytes = 64 << 20;
  request.threads = 2;
  absl::Status status;
  const proto::SystemInfo info = CollectInfo(request, &status);
  BANYAN_ASSERT_OK(status);
  const proto::EngineSummary& e = info.engine();
  EXPECT_EQ(e.status(), "ok");
  EXPECT_EQ(e.device(), "cpu");
  EXPECT_EQ(e.kv_dtype(), "f32");
  EXPECT_GT(e.num_layers(), 0);
  EXPECT_GT(e.parameters(), 1000000);
  EXPECT_EQ(e.kv_bytes_per_token(), int64_t{e.num_layers()} * 2 * e.num_kv_heads() * e.head_dim() * 4);
  EXPECT_EQ(e.kv_tokens(), e.kv_pages() * e.page_size());
  EXPECT_EQ(e.kv_bytes(), e.kv_tokens() * e.kv_bytes_per_token());
  EXPECT_LE(e.kv_bytes(), int64_t{64} << 20);
  EXPECT_EQ(e.threads(), 2);
  EXPECT_FALSE(e.stop_tokens().empty());

  ::testing::internal::CaptureStdout();
  BANYAN_ASSERT_OK(RunInfo({"--json", "--device", "cpu", "--kv-budget-mb", "64", "--threads", "2"}));
  const std::string json = ::testing::internal::GetCapturedStdout();
  EXPECT_THAT(json, HasSubstr("\"kv_bytes_per_token\""));
  EXPECT_THAT(json, HasSubstr("\"status\": \"ok\""));
  ::testing::internal::CaptureStdout();
  BANYAN_ASSERT_OK(RunInfo({"--device", "cpu", "--kv-budget-mb", "64"}));
  EXPECT_THAT(::testing::internal::GetCapturedStdout(), HasSubstr("KV pool:     f32, 16 tokens/page"));
}

TEST(InfoCommandTest, AMissingDeviceIsUnavailable) {
  if (!model::FindDefaultModel().ok()) GTEST_SKIP() << "default model absent";
  ::testing::internal::CaptureStdout();
  const absl::Status status = RunInfo({"--device", "cuda:99"});
  ::testing::internal::GetCapturedStdout();
  EXPECT_THAT(status, StatusIs(absl::StatusCode::kUnavailable));
}

}  // namespace
}  // namespace banyan::cli

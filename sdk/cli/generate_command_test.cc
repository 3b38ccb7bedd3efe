// `banyan generate` on the real default model (SmolLM2-135M-Instruct GGUF):
// forked greedy branches agree with each other and with a single branch,
// seeds reproduce, and bad flags give specific codes.
#include "sdk/cli/generate_command.h"

#include <set>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "model/default_model.h"
#include "sdk/base/status_testing.h"
#include "sdk/cli/command.h"
#include "sdk/gpu/device_info.h"

namespace banyan::cli {
namespace {

using ::banyan::testing::StatusIs;

class GenerateTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto path = model::FindDefaultModel();
    ASSERT_TRUE(path.ok()) << path.status();
  }
  GenerateRequest Request() {
    GenerateRequest r;
    r.prompt = "What is the capital of France?";
    r.max_tokens = 6;
    r.device = "cpu";  // exact agreement across batch shapes is a CPU property
    r.threads = 2;
    return r;
  }
};

TEST_F(GenerateTest, GreedyBranchesAgreeWithASingleBranch) {
  GenerateRequest r = Request();
  r.sampling.temperature = 0;
  r.n = 1;
  BANYAN_ASSERT_OK_AND_ASSIGN(const GenerateResult one, Generate(r));
  ASSERT_EQ(one.completions.size(), 1u);
  EXPECT_EQ(one.device, "cpu");
  EXPECT_FALSE(one.completions[0].tokens.empty());
  r.n = 3;
  r.page_size = 8;  // a different page size and partial page: same tokens
  BANYAN_ASSERT_OK_AND_ASSIGN(const GenerateResult three, Generate(r));
  ASSERT_EQ(three.completions.size(), 3u);
  for (const Completion& c : three.completions) {
    EXPECT_EQ(c.tokens, one.completions[0].tokens);
    EXPECT_EQ(c.text, one.completions[0].text);
  }
  EXPECT_GT(three.prompt_tokens, 5);
  std::cout << "greedy: " << one.completions[0].text << "\n";
}

TEST_F(GenerateTest, SeedReproducesAndBranchesDiffer) {
  GenerateRequest r = Request();
  r.n = 4;
  r.sampling.temperature = 1.5f;
  r.seed = 7;
  BANYAN_ASSERT_OK_AND_ASSIGN(const GenerateResult a, Generate(r));
  BANYAN_ASSERT_OK_AND_ASSIGN(const GenerateResult b, Generate(r));
  std::set<std::vector<int32_t>> distinct;
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(a.completions[i].tokens, b.completions[i].tokens);
    distinct.insert(a.completions[i].tokens);
  }
  EXPECT_GT(distinct.size(), 1u);
}

TEST_F(GenerateTest, BadFlags) {
  EXPECT_THAT(RunGenerate({"--prompt", "hi", "--n", "0"}), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(RunGenerate({"--prompt", "hi", "--device", "tpu"}), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(RunGenerate({"--prompt", "hi", "--temperature", "-1"}), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(RunGenerate({"--n", "2"}), StatusIs(absl::StatusCode::kInvalidArgument));  // no prompt
  EXPECT_THAT(RunGenerate({"--prompt", "hi", "--bogus", "1"}), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(RunGenerate({"--prompt", "hi", "--precision", "medium"}),
              StatusIs(absl::StatusCode::kInvalidArgument, ::testing::HasSubstr("--precision")));
  EXPECT_THAT(RunGenerate({"--prompt", "hi", "--model", "/nonexistent/model.gguf"}),
              StatusIs(absl::StatusCode::kNotFound));
  if (!gpu::HasGpu()) {
    EXPECT_THAT(RunGenerate({"--prompt", "hi", "--device", "cuda"}), StatusIs(absl::StatusCode::kUnavailable));
  }
}

}  // namespace
}  // namespace banyan::cli

#include "samples/mbpp_eval/mbpp_eval.h"

#include <fstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "model/default_model.h"
#include "sdk/base/status_testing.h"
#include "sdk/engine/testing/counting_backend.h"

namespace banyan::samples {
namespace {

using ::banyan::testing::StatusIs;
using ::testing::HasSubstr;

const std::string kData = std::string(BANYAN_SOURCE_DIR) + "/samples/data/mbpp_tiny.jsonl";

std::string WriteFile(const std::string& name, const std::string& text) {
  const std::string path = ::testing::TempDir() + "/" + name;
  std::ofstream(path) << text;
  return path;
}

TEST(MbppDatasetTest, ShippedProblemsParseAndTheirReferencesPass) {
  BANYAN_ASSERT_OK_AND_ASSIGN(std::vector<MbppProblem> problems, LoadMbpp(kData));
  ASSERT_EQ(problems.size(), 5u);
  const search::CodeExecutor executor;
  for (const MbppProblem& p : problems) {
    EXPECT_GE(p.tests.size(), 3u);
    BANYAN_ASSERT_OK_AND_ASSIGN(search::ExecutionResult r, executor.Run(TestProgram(p, p.code)));
    EXPECT_EQ(r.outcome, search::ExecutionOutcome::kPassed) << p.task_id << ": " << r.output;
  }
  // A wrong solution fails its tests.
  BANYAN_ASSERT_OK_AND_ASSIGN(
      search::ExecutionResult r,
      executor.Run(TestProgram(problems[0], "def add_numbers(a, b):\n    return a - b")));
  EXPECT_EQ(r.outcome, search::ExecutionOutcome::kFailed);
}

TEST(MbppDatasetTest, MalformedLinesGetSpecificErrors) {
  const std::string good = R"({"task_id": 1, "text": "t", "test_list": ["assert True"]})";
  struct Case {
    std::string line;
    std::string message;
  };
  const Case cases[] = {
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
  };
  for (const Case& c : cases) {
    const std::string path = WriteFile("bad.jsonl", good + "\n\n" + c.line + "\n");
    EXPECT_THAT(LoadMbpp(path).status(),
                StatusIs(absl::StatusCode::kInvalidArgument,
                         ::testing::AllOf(HasSubstr("bad.jsonl:3"), HasSubstr(c.message))))
        << c.line;
  }
  EXPECT_THAT(LoadMbpp("/nonexistent/mbpp.jsonl").status(), StatusIs(absl::StatusCode::kNotFound));
  EXPECT_THAT(LoadMbpp(WriteFile("empty.jsonl", "\n\n")).status(),
              StatusIs(absl::StatusCode::kFailedPrecondition));
}

TEST(MbppEvalTest, ExtractCode) {
  EXPECT_EQ(ExtractCode("def f():\n    return 1\n[DONE]\nmore"), "def f():\n    return 1");
  EXPECT_EQ(ExtractCode("Here:\n```python\ndef f():\n    pass\n```\ntext"), "def f():\n    pass");
  EXPECT_EQ(ExtractCode("```\nx = 1\n"), "x = 1");
  EXPECT_EQ(ExtractCode("  \n"), "");
}

TEST(MbppEvalTest, TwoLevelSharingOnTheCountingEngine) {
  BANYAN_ASSERT_OK_AND_ASSIGN(std::vector<MbppProblem> problems, LoadMbpp(kData));
  problems.resize(2);
  BANYAN_ASSERT_OK_AND_ASSIGN(
      auto engine, engine::testing::CreateCountingEngine({}, EngineOptions{}));
  MbppEvalOptions o;
  o.n = 3;
  o.ks = {1, 3};
  o.max_tokens = 6;
  EXPECT_THAT(EvaluateMbpp(*engine, problems, MbppEvalOptions{.n = 2, .ks = {3}}).status(),
              StatusIs(absl::StatusCode::kInvalidArgument));
  BANYAN_ASSERT_OK_AND_ASSIGN(MbppReport r, EvaluateMbpp(*engine, problems, o));
  ASSERT_EQ(r.problems.size(), 2u);
  // The counting model writes control bytes, not Python: every sample fails.
  for (const ProblemReport& p : r.problems) {
    EXPECT_EQ(p.samples.size(), 3u);
    EXPECT_EQ(p.passed, 0);
    EXPECT_EQ(p.pass_at_k, std::vector<double>({0.0, 0.0}));
  }
  EXPECT_EQ(r.tokens_generated, 2 * 3 * 6);
  // Byte tokenizer: tokens are bytes. The few-shot prompt and each problem
  // were prefilled exactly once; the samples are forks.
  const int64_t expected = static_cast<int64_t>(FewShotPrompt().size() +
                                                ProblemPrompt(problems[0]).size() +
                                                ProblemPrompt(problems[1]).size());
  EXPECT_EQ(r.prompt_tokens, expected);
  EXPECT_EQ(r.shared_tokens, 3 * expected + 3 * static_cast<int64_t>(FewShotPrompt().size()));
  // The few-shot prompt and each problem were prefilled once (the samples are
  // forks); the problems' common opening after the few-shot prompt came from
  // the cache for whichever problem arrived second.
  const EngineStats stats = engine->Stats();
  EXPECT_EQ(stats.tokens_prefilled + stats.tokens_reused, expected);
  EXPECT_LT(stats.tokens_prefilled, r.shared_tokens / 3);
  EXPECT_EQ(engine->Stats().live_branches, 0);

  // One problem (no concurrency): exactly the few-shot prompt and the problem.
  BANYAN_ASSERT_OK_AND_ASSIGN(
      auto fresh, engine::testing::CreateCountingEngine({}, EngineOptions{}));
  problems.resize(1);
  BANYAN_ASSERT_OK_AND_ASSIGN(r, EvaluateMbpp(*fresh, problems, o));
  EXPECT_EQ(fresh->Stats().tokens_prefilled,
            static_cast<int64_t>(FewShotPrompt().size() + ProblemPrompt(problems[0]).size()));
}

TEST(MbppEvalTest, DefaultModelSmoke) {
  if (!model::FindDefaultModel().ok()) GTEST_SKIP() << "default model absent";
  BANYAN_ASSERT_OK_AND_ASSIGN(std::vector<MbppProblem> problems, LoadMbpp(kData));
  problems.resize(1);
  EngineOptions eo;
  eo.device = "cpu";
  BANYAN_ASSERT_OK_AND_ASSIGN(auto engine, Engine::Create(eo));
  MbppEvalOptions o;
  o.n = 2;
  o.ks = {1, 2};
  o.max_tokens = 32;
  BANYAN_ASSERT_OK_AND_ASSIGN(MbppReport r, EvaluateMbpp(*engine, problems, o));
  ASSERT_EQ(r.problems.size(), 1u);
  EXPECT_EQ(r.problems[0].samples.size(), 2u);
  EXPECT_GT(r.tokens_generated, 0);
  EXPECT_LE(r.problems[0].passed, 2);
  EXPECT_GE(r.mean_pass_at_k[1], r.mean_pass_at_k[0]);
}

}  // namespace
}  // namespace banyan::samples

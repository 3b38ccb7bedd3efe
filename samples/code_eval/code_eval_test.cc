#include "samples/code_eval/code_eval.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "model/default_model.h"
#include "samples/code_eval/shipped_data.h"
#include "sdk/base/status_testing.h"
#include "sdk/engine/testing/counting_backend.h"

namespace banyan::samples {
namespace {

using ::banyan::testing::StatusIs;
using ::testing::HasSubstr;


std::unique_ptr<Engine> CountingEngine() {
  absl::StatusOr<std::unique_ptr<Engine>> engine = engine::testing::CreateCountingEngine({}, EngineOptions{});
  EXPECT_TRUE(engine.ok()) << engine.status();
  return engine.ok() ? std::move(*engine) : nullptr;
}

// The suite evaluated on fresh counting engines with tasks generating one at a
// time or together and one check at a time or several.
std::vector<CodeEvalReport> EvaluateAtEachParallelism(const CodeSuite& suite, CodeEvalOptions o) {
  std::vector<CodeEvalReport> reports;
  for (const auto& [parallel, jobs] : {std::pair{1, 1}, std::pair{16, 4}, std::pair{2, 0}}) {
    o.parallel_problems = parallel;
    o.jobs = jobs;
    std::unique_ptr<Engine> engine = CountingEngine();
    if (engine == nullptr) return {};
    absl::StatusOr<CodeEvalReport> r = EvaluateCode(*engine, suite, o);
    EXPECT_TRUE(r.ok()) << r.status();
    if (!r.ok()) return {};
    EXPECT_EQ(engine->Stats().live_branches, 0);
    reports.push_back(std::move(*r));
  }
  return reports;
}

TEST(CodeEvalTest, ExtractCode) {
  EXPECT_EQ(ExtractCode("def f():\n    return 1\n[DONE]\nmore"), "def f():\n    return 1");
  EXPECT_EQ(ExtractCode("Here:\n```python\ndef f():\n    pass\n```\ntext"), "def f():\n    pass");
  EXPECT_EQ(ExtractCode("```\nx = 1\n"), "x = 1");
  EXPECT_EQ(ExtractCode("```python\nprint(1)"), "print(1)");  // APPS: the stop string ate the closing fence
  EXPECT_EQ(ExtractCode("  \n"), "");
}

TEST(CodeEvalTest, TwoLevelSharingOnTheCountingEngine) {
  BANYAN_ASSERT_OK_AND_ASSIGN(std::vector<MbppProblem> problems, LoadMbpp(ShippedMbppTiny()));
  problems.resize(2);
  const CodeSuite suite = MbppSuite(problems);
  std::unique_ptr<Engine> engine = CountingEngine();
  ASSERT_NE(engine, nullptr);
  CodeEvalOptions o;
  o.n = 3;
  o.ks = {1, 3};
  o.max_tokens = 6;
  BANYAN_ASSERT_OK_AND_ASSIGN(CodeEvalReport r, EvaluateCode(*engine, suite, o));
  ASSERT_EQ(r.problems.size(), 2u);
  // The counting model writes control bytes, not Python: every sample fails every case.
  for (const ProblemReport& p : r.problems) {
    EXPECT_EQ(p.samples.size(), 3u);
    EXPECT_EQ(p.passed, 0);
    EXPECT_EQ(p.pass_at_k, std::vector<double>({0.0, 0.0}));
    EXPECT_EQ(p.case_fraction, 0.0);
    for (const SampleReport& s : p.samples) EXPECT_EQ(s.cases_total, 3);
  }
  EXPECT_EQ(r.tokens_generated, 2 * 3 * 6);
  // Byte tokenizer: tokens are bytes. The few-shot prompt and each problem
  // were prefilled exactly once; the samples are forks.
  const int64_t expected =
      static_cast<int64_t>(suite.few_shot.size() + suite.tasks[0].prompt.size() + suite.tasks[1].prompt.size());
  EXPECT_EQ(r.prompt_tokens, expected);
  EXPECT_EQ(r.shared_tokens, 3 * expected + 3 * static_cast<int64_t>(suite.few_shot.size()));
  // The problems' common opening after the few-shot prompt came from the cache
  // for whichever problem arrived second.
  const EngineStats stats = engine->Stats();
  EXPECT_EQ(stats.tokens_prefilled + stats.tokens_reused, expected);
  EXPECT_LT(stats.tokens_prefilled, r.shared_tokens / 3);
  EXPECT_EQ(engine->Stats().live_branches, 0);

  // One problem (no concurrency): exactly the few-shot prompt and the problem.
  std::unique_ptr<Engine> fresh = CountingEngine();
  ASSERT_NE(fresh, nullptr);
  const CodeSuite one = MbppSuite({problems[0]});
  BANYAN_ASSERT_OK_AND_ASSIGN(r, EvaluateCode(*fresh, one, o));
  EXPECT_EQ(fresh->Stats().tokens_prefilled, static_cast<int64_t>(one.few_shot.size() + one.tasks[0].prompt.size()));
}

// Greedy after byte '0' the counting model writes "123456789": a Python
// program that loads and prints nothing, so the tests decide exactly.
CodeTask CountingTask(int64_t id, std::vector<std::string> asserts) {
  CodeTask task;
  task.id = id;
  task.prompt = absl::StrCat("task ", id, ": 0");
  task.tests.asserts = std::move(asserts);
  return task;
}

TEST(CodeEvalTest, PassesAndCaseFractionsAreCountedExactly) {
  CodeSuite suite;
  suite.few_shot = "shots\n";
  suite.tasks = {CountingTask(7, {"assert True", "assert 2 > 1"}),
                 CountingTask(8, {"assert True", "assert 1 == 2", "assert 3 == 3", "assert None"}),
                 CountingTask(9, {"assert False"})};
  CodeEvalOptions o;
  o.n = 4;
  o.ks = {1, 4};
  o.max_tokens = 9;
  o.sampling.temperature = 0;
  // The same counts however many tasks generate and checks run at once.
  const std::vector<CodeEvalReport> reports = EvaluateAtEachParallelism(suite, o);
  ASSERT_EQ(reports.size(), 3u);
  for (const CodeEvalReport& r : reports) {
    ASSERT_EQ(r.problems.size(), 3u);
    for (const ProblemReport& p : r.problems) {
      ASSERT_EQ(p.samples.size(), 4u);
      for (const SampleReport& s : p.samples) EXPECT_EQ(s.code, "123456789");
    }
    EXPECT_EQ(r.problems[0].task_id, 7);
    EXPECT_EQ(r.problems[0].passed, 4);
    EXPECT_EQ(r.problems[0].pass_at_k, std::vector<double>({1.0, 1.0}));
    EXPECT_EQ(r.problems[0].case_fraction, 1.0);
    EXPECT_EQ(r.problems[1].passed, 0);
    EXPECT_EQ(r.problems[1].case_fraction, 0.5);
    EXPECT_EQ(r.problems[1].samples[0].cases_passed, 2);
    EXPECT_EQ(r.problems[2].passed, 0);
    EXPECT_EQ(r.problems[2].case_fraction, 0.0);
    EXPECT_DOUBLE_EQ(r.mean_pass_at_k[0], 1.0 / 3);
    EXPECT_DOUBLE_EQ(r.mean_case_fraction, 0.5);
    EXPECT_GT(r.execute_seconds, 0);
    EXPECT_GE(r.wall_seconds, r.generate_seconds);
  }
}

TEST(CodeEvalTest, ResultsDoNotDependOnHowManyTasksOrChecksRunAtOnce) {
  BANYAN_ASSERT_OK_AND_ASSIGN(AppsDataset apps, LoadApps(ShippedAppsTiny()));
  const CodeSuite suite = AppsSuite(apps.problems);
  CodeEvalOptions o;
  o.n = 3;
  o.max_tokens = 12;
  o.seed = 5;
  std::vector<std::vector<std::string>> codes;
  const std::vector<CodeEvalReport> reports = EvaluateAtEachParallelism(suite, o);
  ASSERT_EQ(reports.size(), 3u);
  for (const CodeEvalReport& r : reports) {
    ASSERT_EQ(r.problems.size(), apps.problems.size());
    std::vector<std::string> run;
    for (size_t i = 0; i < r.problems.size(); ++i) {
      EXPECT_EQ(r.problems[i].task_id, apps.problems[i].problem_id);
      for (const SampleReport& s : r.problems[i].samples) {
        run.push_back(s.code);
        EXPECT_EQ(s.cases_total, search::CaseCount(apps.problems[i].tests));
      }
    }
    codes.push_back(run);
  }
  EXPECT_EQ(codes[0], codes[1]);
  EXPECT_EQ(codes[0], codes[2]);
}

TEST(CodeEvalTest, BadOptionsAndTestsGetInvalidArgument) {
  BANYAN_ASSERT_OK_AND_ASSIGN(std::vector<MbppProblem> problems, LoadMbpp(ShippedMbppTiny()));
  CodeSuite suite = MbppSuite(problems);
  std::unique_ptr<Engine> engine = CountingEngine();
  ASSERT_NE(engine, nullptr);
  EXPECT_THAT(EvaluateCode(*engine, suite, CodeEvalOptions{.n = 0}).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("n must be")));
  EXPECT_THAT(EvaluateCode(*engine, suite, CodeEvalOptions{.n = 2, .ks = {3}}).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("k = 3")));
  EXPECT_THAT(EvaluateCode(*engine, suite, CodeEvalOptions{.parallel_problems = 0}).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("parallel_problems")));
  EXPECT_THAT(EvaluateCode(*engine, suite, CodeEvalOptions{.jobs = -1}).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("jobs")));
  suite.tasks[2].tests.asserts.clear();
  EXPECT_THAT(EvaluateCode(*engine, suite, CodeEvalOptions{}).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("task 3: code tests: no asserts")));
  EXPECT_EQ(engine->Stats().live_branches, 0);
}

TEST(CodeEvalTest, DefaultModelSmoke) {
  if (!model::FindDefaultModel().ok()) GTEST_SKIP() << "default model absent";
  BANYAN_ASSERT_OK_AND_ASSIGN(std::vector<MbppProblem> problems, LoadMbpp(ShippedMbppTiny()));
  BANYAN_ASSERT_OK_AND_ASSIGN(AppsDataset apps, LoadApps(ShippedAppsTiny()));
  EngineOptions eo;
  eo.device = "cpu";
  BANYAN_ASSERT_OK_AND_ASSIGN(auto engine, Engine::Create(eo));
  CodeEvalOptions o;
  o.n = 2;
  o.ks = {1, 2};
  o.max_tokens = 32;
  for (const CodeSuite& suite : {MbppSuite({problems[0]}), AppsSuite({apps.problems[0]})}) {
    BANYAN_ASSERT_OK_AND_ASSIGN(CodeEvalReport r, EvaluateCode(*engine, suite, o));
    ASSERT_EQ(r.problems.size(), 1u);
    EXPECT_EQ(r.problems[0].samples.size(), 2u);
    EXPECT_GT(r.tokens_generated, 0);
    EXPECT_LE(r.problems[0].passed, 2);
    EXPECT_GE(r.mean_pass_at_k[1], r.mean_pass_at_k[0]);
  }
}

}  // namespace
}  // namespace banyan::samples

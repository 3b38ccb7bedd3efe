// A failed forward pass (engine_impl.h): the step's requests fail with the
// backend's error and their branches are restored; the engine keeps serving,
// and the K/V the failed pass left garbage in is recomputed before anything
// reads it. The counting backend poisons the K/V slots of a failing pass and
// checks every K/V it attends on every later pass, so reusing an unrepaired
// token fails these tests with kInternal.
#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"

#include "banyan/engine.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "sdk/base/status_testing.h"
#include "sdk/engine/testing/counting_backend.h"
#include "sdk/engine/testing/test_options.h"

namespace banyan::engine {
namespace {

using ::banyan::engine::testing::CountingBackendOptions;
using ::banyan::engine::testing::CountingBackendStats;
using ::banyan::engine::testing::CreateCountingEngine;
using ::banyan::engine::testing::GreedyOptions;
using ::banyan::engine::testing::SmallEngineOptions;
using ::banyan::testing::StatusIs;
using ::testing::HasSubstr;
using Code = absl::StatusCode;

// Prefill chunks of 8 tokens: prompts take several passes.
EngineOptions Options() { return SmallEngineOptions(1 << 20, 16, 8); }

GenerateOptions Greedy(int max_tokens) { return GreedyOptions(max_tokens, /*ignore_eos=*/true); }

std::string CountFrom(char last, int n) {
  std::string s;
  for (int i = 1; i <= n; ++i) s += static_cast<char>(last + i);
  return s;
}

struct Rig {
  std::shared_ptr<std::atomic<int>> fail = std::make_shared<std::atomic<int>>(0);
  std::shared_ptr<CountingBackendStats> stats = std::make_shared<CountingBackendStats>();
  CountingBackendOptions model;
  std::unique_ptr<Engine> engine;

  Rig() {
    model.fail_forwards = fail;
    model.stats = stats;
    engine = CreateCountingEngine(model, Options()).value();
  }
};

TEST(EngineRecoveryTest, FailedDecodeStepRestoresItsBranchesAndRepairsTheirKv) {
  Rig rig;
  BANYAN_ASSERT_OK_AND_ASSIGN(BranchId root, rig.engine->NewBranch(Prompt::Text("recover: a")));
  BANYAN_ASSERT_OK_AND_ASSIGN(std::vector<BranchId> kids, rig.engine->Fork(root, 3));
  // Fail the pass after the third sampled token: that pass appends sampled
  // tokens (new K/V) for every kid.
  GenerateOptions g = Greedy(20);
  int seen = 0;
  g.callbacks.on_token = [&](BranchId, int32_t, std::string_view, float) {
    if (++seen == 3 * 3) rig.fail->store(1);
    return true;
  };
  for (auto& r : rig.engine->GenerateMany(kids, g)) {
    EXPECT_THAT(r, StatusIs(Code::kUnavailable, HasSubstr("forward pass failed")));
  }
  EXPECT_EQ(rig.fail->load(), 0);  // the injected failure happened
  for (BranchId k : kids) {
    BANYAN_ASSERT_OK_AND_ASSIGN(BranchInfo info, rig.engine->Inspect(k));
    EXPECT_EQ(info.text, "recover: a");
  }
  // The same greedy text again reuses the cached tokens, including those the
  // failed pass poisoned: they were recomputed.
  const int64_t calls = rig.stats->forward_calls.load();
  for (auto& r : rig.engine->GenerateMany(kids, Greedy(8))) {
    BANYAN_ASSERT_OK(r.status());
    EXPECT_EQ(r->text, CountFrom('a', 8));
  }
  EXPECT_GT(rig.stats->forward_calls.load(), calls);
  EXPECT_EQ(rig.engine->Stats().live_branches, 4);
}

TEST(EngineRecoveryTest, FailedPrefillIsUndoneAndItsTokensAreRepaired) {
  Rig rig;
  const std::string prompt = "a prompt that takes a few passes to prefill: x";
  BANYAN_ASSERT_OK_AND_ASSIGN(BranchId warm, rig.engine->NewBranch(Prompt::Text("warm")));
  rig.fail->store(1);  // the prompt's first prefill pass fails
  EXPECT_THAT(rig.engine->NewBranch(Prompt::Text(prompt)),
              StatusIs(Code::kUnavailable, HasSubstr("injected")));
  EXPECT_EQ(rig.engine->Stats().live_branches, 1);
  // A request after the failure first pays for the repair pass, then runs.
  BANYAN_ASSERT_OK_AND_ASSIGN(GenerateResult w, rig.engine->Generate(warm, Greedy(2)));
  EXPECT_EQ(w.text, "no");
  BANYAN_ASSERT_OK_AND_ASSIGN(BranchId b, rig.engine->NewBranch(Prompt::Text(prompt)));
  BANYAN_ASSERT_OK_AND_ASSIGN(BranchInfo info, rig.engine->Inspect(b));
  EXPECT_EQ(info.text, prompt);
  EXPECT_GE(info.tokens_reused, 8);  // the repaired first chunk, at least
  BANYAN_ASSERT_OK_AND_ASSIGN(GenerateResult r, rig.engine->Generate(b, Greedy(4)));
  EXPECT_EQ(r.text, CountFrom('x', 4));
}

TEST(EngineRecoveryTest, PersistentFailureFailsEachStepUntilTheBackendRecovers) {
  Rig rig;
  BANYAN_ASSERT_OK_AND_ASSIGN(BranchId before, rig.engine->NewBranch(Prompt::Text("before: k")));
  rig.fail->store(1000);
  EXPECT_THAT(rig.engine->NewBranch(Prompt::Text("first victim")), StatusIs(Code::kUnavailable));
  // The repair pass fails too: nothing else runs, each request fails alike.
  EXPECT_THAT(rig.engine->Generate(before, Greedy(3)), StatusIs(Code::kUnavailable));
  EXPECT_THAT(rig.engine->Score(before, Prompt::Text("lm")), StatusIs(Code::kUnavailable));
  BANYAN_ASSERT_OK_AND_ASSIGN(BranchInfo info, rig.engine->Inspect(before));
  EXPECT_EQ(info.text, "before: k");
  rig.fail->store(0);
  BANYAN_ASSERT_OK_AND_ASSIGN(GenerateResult r, rig.engine->Generate(before, Greedy(3)));
  EXPECT_EQ(r.text, "lmn");
  BANYAN_ASSERT_OK_AND_ASSIGN(BranchId again, rig.engine->NewBranch(Prompt::Text("first victim")));
  BANYAN_ASSERT_OK_AND_ASSIGN(GenerateResult v, rig.engine->Generate(again, Greedy(2)));
  EXPECT_EQ(v.text, "no");
  BANYAN_ASSERT_OK_AND_ASSIGN(ScoreResult s, rig.engine->Score(again, Prompt::Text("pq")));
  EXPECT_NEAR(s.logprob,
              testing::ExpectedLogprob(rig.model, 'o', 'p') + testing::ExpectedLogprob(rig.model, 'p', 'q'),
              1e-4);
}

TEST(EngineRecoveryTest, FailedScoreLeavesTheBranchAndScoresAgain) {
  Rig rig;
  BANYAN_ASSERT_OK_AND_ASSIGN(BranchId b, rig.engine->NewBranch(Prompt::Text("score: c")));
  rig.fail->store(1);
  EXPECT_THAT(rig.engine->Score(b, Prompt::Text("defghijklmnopq")), StatusIs(Code::kUnavailable));
  BANYAN_ASSERT_OK_AND_ASSIGN(BranchInfo info, rig.engine->Inspect(b));
  EXPECT_EQ(info.text, "score: c");
  BANYAN_ASSERT_OK_AND_ASSIGN(ScoreResult s, rig.engine->Score(b, Prompt::Text("defghijklmnopq")));
  double expect = 0;
  const std::string cont = "cdefghijklmnopq";
  for (size_t i = 0; i + 1 < cont.size(); ++i) expect += testing::ExpectedLogprob(rig.model, cont[i], cont[i + 1]);
  EXPECT_NEAR(s.logprob, expect, 1e-3);
  BANYAN_ASSERT_OK_AND_ASSIGN(GenerateResult r, rig.engine->Generate(b, Greedy(14)));
  EXPECT_EQ(r.text, "defghijklmnopq");  // over the cached (repaired) continuation
}

TEST(EngineRecoveryTest, ThreadsSurviveIntermittentFailures) {
  Rig rig;
  std::atomic<bool> stop{false};
  std::atomic<int> ok{0}, failed{0}, wrong{0};
  rig.fail->store(1);  // the first pass fails whatever the thread timing
  std::thread chaos([&] {
    while (!stop) {
      rig.fail->store(1);
      std::this_thread::sleep_for(std::chrono::microseconds(700));
    }
  });
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int round = 0; round < 6; ++round) {
        const std::string prompt = absl::StrCat("shared part, thread ", t, " round ", round, " a");
        absl::StatusOr<BranchId> root = rig.engine->NewBranch(Prompt::Text(prompt));
        if (!root.ok()) {
          (absl::IsUnavailable(root.status()) ? failed : wrong)++;
          continue;
        }
        absl::StatusOr<std::vector<BranchId>> kids = rig.engine->Fork(*root, 2 + t % 2);
        if (!kids.ok()) {
          ++wrong;
          continue;
        }
        for (auto& r : rig.engine->GenerateMany(*kids, Greedy(12))) {
          if (r.ok()) {
            (r->text == CountFrom('a', 12) ? ok : wrong)++;
          } else {
            (absl::IsUnavailable(r.status()) ? failed : wrong)++;
          }
        }
        for (BranchId k : *kids) {
          absl::StatusOr<BranchInfo> info = rig.engine->Inspect(k);
          // Restored on failure, extended on success: never anything else.
          if (!info.ok() || (info->text != prompt && info->text != prompt + CountFrom('a', 12))) ++wrong;
          if (!rig.engine->Release(k).ok()) ++wrong;
        }
        if (!rig.engine->Release(*root).ok()) ++wrong;
      }
    });
  }
  for (auto& th : threads) th.join();
  stop = true;
  chaos.join();
  rig.fail->store(0);
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_GT(failed.load(), 0);
  EXPECT_EQ(rig.engine->Stats().live_branches, 0);
  // Everything cached is valid: the same prompts decode correctly now.
  for (int t = 0; t < 4; ++t) {
    BANYAN_ASSERT_OK_AND_ASSIGN(
        BranchId b, rig.engine->NewBranch(Prompt::Text(absl::StrCat("shared part, thread ", t, " round 5 a"))));
    BANYAN_ASSERT_OK_AND_ASSIGN(GenerateResult r, rig.engine->Generate(b, Greedy(12)));
    EXPECT_EQ(r.text, CountFrom('a', 12));
  }
}

}  // namespace
}  // namespace banyan::engine

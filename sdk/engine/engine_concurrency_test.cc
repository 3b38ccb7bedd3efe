// Many client threads on one engine (run under TSan too), determinism of
// seeded sampling regardless of what else is batched, fairness, and
// save -> load -> continue == continue.
#include <atomic>
#include <set>
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

EngineOptions Options() { return SmallEngineOptions(8 << 20, 32, 24); }

GenerateOptions Greedy(int max_tokens) { return GreedyOptions(max_tokens, /*ignore_eos=*/true); }

GenerateOptions TopTwo(int max_tokens, uint64_t seed) {
  GenerateOptions g;
  g.sampling.temperature = 1.0f;
  g.sampling.top_k = 2;
  g.sampling.seed = seed;
  g.max_tokens = max_tokens;
  g.ignore_eos = true;
  return g;
}

// The greedy continuation of `last` for n tokens, as text (byte tokens only).
std::string CountFrom(char last, int n) {
  std::string s;
  for (int i = 1; i <= n; ++i) s += static_cast<char>(last + i);
  return s;
}

TEST(EngineConcurrencyTest, ThreadsForkGenerateScoreAndReleaseTogether) {
  auto stats = std::make_shared<CountingBackendStats>();
  CountingBackendOptions model;
  model.stats = stats;
  BANYAN_ASSERT_OK_AND_ASSIGN(std::unique_ptr<Engine> engine, CreateCountingEngine(model, Options()));
  constexpr int kThreads = 6;
  constexpr int kRounds = 4;
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int round = 0; round < kRounds; ++round) {
        // A shared system prefix (cache reuse across threads) + a private part.
        const std::string prompt = absl::StrCat("shared prefix for everyone: thread ", t, " round ", round, " ");
        absl::StatusOr<BranchId> root = engine->NewBranch(Prompt::Text(prompt + "A"));
        if (!root.ok()) {
          ++failures;
          ADD_FAILURE() << root.status();
          return;
        }
        absl::StatusOr<std::vector<BranchId>> kids = engine->Fork(*root, 3 + t % 3);
        if (!kids.ok()) {
          ++failures;
          return;
        }
        auto results = engine->GenerateMany(*kids, Greedy(10 + t));
        for (auto& r : results) {
          if (!r.ok() || r->text != CountFrom('A', 10 + t)) {
            ++failures;
            ADD_FAILURE() << (r.ok() ? r->text : r.status().ToString());
          }
        }
        absl::StatusOr<ScoreResult> score = engine->Score(*root, Prompt::Text("BC"));
        if (!score.ok()) {
          ++failures;
        } else {
          EXPECT_NEAR(score->logprob,
                      testing::ExpectedLogprob(model, 'A', 'B') + testing::ExpectedLogprob(model, 'B', 'C'),
                      1e-4);
        }
        for (BranchId k : *kids) {
          if (!engine->Release(k).ok()) ++failures;
        }
        if (round % 2 == 0 && !engine->Release(*root).ok()) ++failures;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
  // Work of different threads shared forward passes.
  EXPECT_GT(stats->max_rows.load(), 6);
  const EngineStats s = engine->Stats();
  EXPECT_GT(s.tokens_reused, 0);
}

TEST(EngineConcurrencyTest, SeededSamplingIsDeterministicWhateverElseRuns) {
  CountingBackendOptions model;
  auto run = [&](bool with_noise) {
    std::unique_ptr<Engine> engine = CreateCountingEngine(model, Options()).value();
    std::atomic<bool> stop{false};
    std::thread noise;
    if (with_noise) {
      noise = std::thread([&] {
        BranchId other = engine->NewBranch(Prompt::Text("noise noise")).value();
        while (!stop) {
          std::vector<BranchId> kids = engine->Fork(other, 5).value();
          (void)engine->GenerateMany(kids, TopTwo(7, 99));
          for (BranchId k : kids) (void)engine->Release(k);
        }
      });
    }
    BranchId root = engine->NewBranch(Prompt::Text("seed test ")).value();
    std::vector<BranchId> kids = engine->Fork(root, 8).value();
    std::vector<std::string> texts;
    for (auto& r : engine->GenerateMany(kids, TopTwo(12, 1234))) texts.push_back(r.value().text);
    // The tree: every branch's tokens.
    for (BranchId k : kids) texts.push_back(absl::StrCat(engine->Inspect(k).value().tokens.size()));
    stop = true;
    if (noise.joinable()) noise.join();
    return texts;
  };
  const std::vector<std::string> a = run(false);
  const std::vector<std::string> b = run(true);
  EXPECT_EQ(a, b);
  std::set<std::string> distinct(a.begin(), a.begin() + 8);
  EXPECT_GT(distinct.size(), 1u);  // different branches, different samples
}

TEST(EngineConcurrencyTest, ShortRequestIsNotStarvedByABigOne) {
  CountingBackendOptions model;
  model.forward_delay = absl::Milliseconds(1);
  EngineOptions o = Options();
  o.max_batch = 4;  // the big request alone needs 4x the batch
  std::unique_ptr<Engine> engine = CreateCountingEngine(model, o).value();
  BranchId big_root = engine->NewBranch(Prompt::Text("big")).value();
  std::vector<BranchId> big = engine->Fork(big_root, 16).value();
  BranchId small = engine->NewBranch(Prompt::Text("small")).value();
  std::atomic<bool> big_done{false};
  std::atomic<bool> small_done_first{false};
  std::thread big_thread([&] {
    for (auto& r : engine->GenerateMany(big, Greedy(60))) EXPECT_TRUE(r.ok());
    big_done = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  BANYAN_ASSERT_OK_AND_ASSIGN(GenerateResult r, engine->Generate(small, Greedy(5)));
  small_done_first = !big_done;
  big_thread.join();
  EXPECT_EQ(r.text, CountFrom('l', 5));
  EXPECT_TRUE(small_done_first.load());
}

TEST(EngineConcurrencyTest, SaveLoadContinueEqualsContinue) {
  CountingBackendOptions model;
  const std::string path = ::testing::TempDir() + "/engine_concurrency_snapshot.bin";
  std::vector<std::string> direct;
  {
    std::unique_ptr<Engine> engine = CreateCountingEngine(model, Options()).value();
    BranchId root = engine->NewBranch(Prompt::Text("persist me ")).value();
    std::vector<BranchId> kids = engine->Fork(root, 4).value();
    (void)engine->GenerateMany(kids, TopTwo(6, 5));
    BANYAN_ASSERT_OK(engine->SetMetadata(kids[2], "score", "0.75"));
    BANYAN_ASSERT_OK(engine->Save(path));
    // Continue directly.
    for (auto& r : engine->GenerateMany(kids, TopTwo(9, 77))) direct.push_back(r.value().text);
    for (BranchId k : kids) direct.push_back(engine->Inspect(k).value().text);
  }
  std::vector<std::string> loaded;
  {
    std::unique_ptr<Engine> engine = CreateCountingEngine(model, Options()).value();
    BANYAN_ASSERT_OK_AND_ASSIGN(std::vector<BranchId> ids, engine->Load(path));
    ASSERT_EQ(ids.size(), 5u);  // root + 4 kids, in the saved order
    EXPECT_EQ(engine->Inspect(ids[0]).value().text, "persist me ");
    EXPECT_EQ(engine->Inspect(ids[3]).value().metadata.at("score"), "0.75");
    // The loaded branches share their prompt's KV again.
    EXPECT_GT(engine->Stats().tokens_reused, 0);
    std::vector<BranchId> kids(ids.begin() + 1, ids.end());
    for (auto& r : engine->GenerateMany(kids, TopTwo(9, 77))) loaded.push_back(r.value().text);
    for (BranchId k : kids) loaded.push_back(engine->Inspect(k).value().text);
  }
  EXPECT_EQ(direct, loaded);
}

}  // namespace
}  // namespace banyan::engine

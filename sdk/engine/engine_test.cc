// The Engine over the counting model (sdk/engine/testing/counting_backend.h):
// exact expectations for generation, forking, scoring, streaming, batching,
// determinism and persistence.
#include <cmath>
#include <cstdio>
#include <set>
#include <string>
#include <vector>

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
using ::banyan::engine::testing::SmallEngineOptions;
using ::banyan::engine::testing::GreedyOptions;
using ::banyan::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

EngineOptions SmallOptions() { return SmallEngineOptions(4 << 20, 64, 32); }

std::unique_ptr<Engine> MakeEngine(CountingBackendOptions model = {},
                                   EngineOptions options = SmallOptions()) {
  absl::StatusOr<std::unique_ptr<Engine>> engine = CreateCountingEngine(model, options);
  EXPECT_TRUE(engine.ok()) << engine.status();
  return engine.ok() ? std::move(*engine) : nullptr;
}

TEST(EngineTest, GreedyCountsUp) {
  auto engine = MakeEngine();
  BANYAN_ASSERT_OK_AND_ASSIGN(BranchId b, engine->NewBranch(Prompt::Text("a")));
  BANYAN_ASSERT_OK_AND_ASSIGN(GenerateResult r, engine->Generate(b, GreedyOptions(5)));
  EXPECT_EQ(r.text, "bcdef");
  EXPECT_THAT(r.tokens, ElementsAre('b', 'c', 'd', 'e', 'f'));
  EXPECT_EQ(r.finish, FinishReason::kLength);
  CountingBackendOptions model;
  ASSERT_EQ(r.logprobs.size(), 5u);
  EXPECT_NEAR(r.logprobs[0], testing::ExpectedLogprob(model, 'a', 'b'), 1e-5);
  BANYAN_ASSERT_OK_AND_ASSIGN(BranchInfo info, engine->Inspect(b));
  EXPECT_EQ(info.text, "abcdef");
  EXPECT_EQ(info.tokens.size(), 6u);
  // The branch continues where it stopped.
  BANYAN_ASSERT_OK_AND_ASSIGN(r, engine->Generate(b, GreedyOptions(3)));
  EXPECT_EQ(r.text, "ghi");
  BANYAN_ASSERT_OK(engine->Release(b));
}

TEST(EngineTest, LongPromptIsChunked) {
  auto engine = MakeEngine();
  std::string prompt;
  for (int i = 0; i < 100; ++i) prompt += static_cast<char>('A' + i % 26);
  BANYAN_ASSERT_OK_AND_ASSIGN(BranchId b, engine->NewBranch(Prompt::Text(prompt)));
  BANYAN_ASSERT_OK_AND_ASSIGN(GenerateResult r, engine->Generate(b, GreedyOptions(2)));
  // The last prompt byte is 'A' + 99 % 26 = 'V'.
  EXPECT_EQ(r.text, "WX");
  EXPECT_GE(engine->Stats().forward_passes, 4);  // 100 tokens in chunks of 32
}

TEST(EngineTest, EosStopsAndStopStringsCut) {
  auto engine = MakeEngine();
  // 254 -> 255 -> BOS (256) -> EOS (257).
  BANYAN_ASSERT_OK_AND_ASSIGN(BranchId b, engine->NewBranch(Prompt::Tokens({254})));
  BANYAN_ASSERT_OK_AND_ASSIGN(GenerateResult r, engine->Generate(b, GreedyOptions(10)));
  EXPECT_EQ(r.finish, FinishReason::kEos);
  EXPECT_THAT(r.tokens, ElementsAre(255, 256, 257));
  EXPECT_EQ(r.text, "\xff<s>");

  BANYAN_ASSERT_OK_AND_ASSIGN(BranchId c, engine->NewBranch(Prompt::Text("a")));
  GenerateOptions g = GreedyOptions(20);
  g.stop_strings = {"ef"};
  BANYAN_ASSERT_OK_AND_ASSIGN(r, engine->Generate(c, g));
  EXPECT_EQ(r.finish, FinishReason::kStop);
  EXPECT_EQ(r.text, "bcd");
  EXPECT_EQ(r.tokens.size(), 5u);  // ... 'e', 'f' were generated and appended
  g.stop_strings.clear();
  g.stop_tokens = {'k'};
  BANYAN_ASSERT_OK_AND_ASSIGN(r, engine->Generate(c, g));
  EXPECT_EQ(r.finish, FinishReason::kStop);
  EXPECT_EQ(r.text, "ghij");
}

TEST(EngineTest, ForkSharesKvAndDecodesTogether) {
  auto stats = std::make_shared<CountingBackendStats>();
  CountingBackendOptions model;
  model.stats = stats;
  auto engine = MakeEngine(model);
  BANYAN_ASSERT_OK_AND_ASSIGN(BranchId root, engine->NewBranch(Prompt::Text("hello world")));
  BANYAN_ASSERT_OK_AND_ASSIGN(std::vector<BranchId> kids, engine->Fork(root, 16));
  const int64_t calls_before = stats->forward_calls.load();
  GenerateOptions g = GreedyOptions(8);
  std::vector<absl::StatusOr<GenerateResult>> results = engine->GenerateMany(kids, g);
  for (auto& r : results) {
    BANYAN_ASSERT_OK(r.status());
    EXPECT_EQ(r->text, "efghijkl");
  }
  // 8 sampling steps plus one step appending the last tokens: all 16 branches
  // share each forward pass.
  EXPECT_EQ(stats->forward_calls.load() - calls_before, 9);
  const EngineStats s = engine->Stats();
  EXPECT_EQ(s.tokens_forked, 16 * 11);
  EXPECT_GT(s.kv_tokens_attended, s.kv_tokens_read);  // the prompt is read once per step
}

// The CUDA backend plans each decode pass's attention during the pass
// before, on the guess that every branch grows by one token
// (attention/next_decode_plan.h): the engine's decode steps make that guess
// come true except where a branch's next token needs a new KV page.
TEST(EngineTest, DecodePlansAreTheGuessOfTheStepBefore) {
  auto stats = std::make_shared<CountingBackendStats>();
  CountingBackendOptions model;
  model.stats = stats;
  auto engine = MakeEngine(model);
  BANYAN_ASSERT_OK_AND_ASSIGN(BranchId root, engine->NewBranch(Prompt::Text("hello world")));
  BANYAN_ASSERT_OK_AND_ASSIGN(std::vector<BranchId> kids, engine->Fork(root, 12));
  for (int i = 0; i < 12; ++i) BANYAN_ASSERT_OK(engine->Append(kids[i], Prompt::Tokens({'A' + 3 * i})));
  const int64_t calls_before = stats->forward_calls.load(), guessed_before = stats->plans_guessed.load();
  GenerateOptions g = GreedyOptions(40);
  g.ignore_eos = true;
  for (auto& r : engine->GenerateMany(kids, g)) BANYAN_ASSERT_OK(r.status());
  const int64_t calls = stats->forward_calls.load() - calls_before;
  const int64_t guessed = stats->plans_guessed.load() - guessed_before;
  // Pages of 4 tokens: every branch needs a new page at one step in 4; the
  // first pass (the forked tokens) follows no decode step.
  EXPECT_GE(calls, 40);
  EXPECT_GE(guessed, calls * 3 / 4 - 2) << calls << " passes";
  EXPECT_LE(guessed, calls - 1) << calls << " passes";
}

TEST(EngineTest, SampledBranchesChooseBetweenTheTwoDocumentedTokens) {
  CountingBackendOptions model;
  auto engine = MakeEngine(model);
  BANYAN_ASSERT_OK_AND_ASSIGN(BranchId root, engine->NewBranch(Prompt::Text("a")));
  BANYAN_ASSERT_OK_AND_ASSIGN(std::vector<BranchId> kids, engine->Fork(root, 12));
  GenerateOptions g;
  g.sampling.temperature = 1.0f;
  g.sampling.top_k = 2;
  g.sampling.seed = 7;
  g.max_tokens = 6;
  auto results = engine->GenerateMany(kids, g);
  std::set<std::string> distinct;
  for (auto& r : results) {
    BANYAN_ASSERT_OK(r.status());
    int32_t prev = 'a';
    for (int32_t t : r->tokens) {
      EXPECT_TRUE(t == testing::FirstChoice(model, prev) || t == testing::SecondChoice(model, prev));
      prev = t;
    }
    distinct.insert(r->text);
  }
  EXPECT_GT(distinct.size(), 1u);
}

TEST(EngineTest, ScoreIsTheExactLogLikelihood) {
  CountingBackendOptions model;
  auto engine = MakeEngine(model);
  BANYAN_ASSERT_OK_AND_ASSIGN(BranchId b, engine->NewBranch(Prompt::Text("abc")));
  BANYAN_ASSERT_OK_AND_ASSIGN(ScoreResult s, engine->Score(b, Prompt::Text("dfz")));
  ASSERT_EQ(s.tokens, 3);
  const double e0 = testing::ExpectedLogprob(model, 'c', 'd');
  const double e1 = testing::ExpectedLogprob(model, 'd', 'f');
  const double e2 = testing::ExpectedLogprob(model, 'f', 'z');
  EXPECT_NEAR(s.token_logprobs[0], e0, 1e-5);
  EXPECT_NEAR(s.token_logprobs[1], e1, 1e-5);
  EXPECT_NEAR(s.token_logprobs[2], e2, 1e-5);
  EXPECT_NEAR(s.logprob, e0 + e1 + e2, 1e-4);
  // The branch is unchanged, and scoring again (now from cached KV) agrees.
  BANYAN_ASSERT_OK_AND_ASSIGN(BranchInfo info, engine->Inspect(b));
  EXPECT_EQ(info.text, "abc");
  BANYAN_ASSERT_OK_AND_ASSIGN(ScoreResult again, engine->Score(b, Prompt::Text("dfz")));
  EXPECT_NEAR(again.logprob, s.logprob, 1e-6);
  // A long continuation spans several chunks.
  std::string lng(70, 'q');
  BANYAN_ASSERT_OK_AND_ASSIGN(ScoreResult longer, engine->Score(b, Prompt::Text(lng)));
  double expect = testing::ExpectedLogprob(model, 'c', 'q');
  for (int i = 1; i < 70; ++i) expect += testing::ExpectedLogprob(model, 'q', 'q');
  EXPECT_NEAR(longer.logprob, expect, 1e-3);
}

TEST(EngineTest, ScoreProgressesWithAOneTokenPrefillBudget) {
  CountingBackendOptions model;
  EngineOptions o = SmallOptions();
  o.prefill_chunk = 1;
  auto engine = MakeEngine(model, o);
  BANYAN_ASSERT_OK_AND_ASSIGN(BranchId b, engine->NewBranch(Prompt::Text("ab")));
  BANYAN_ASSERT_OK_AND_ASSIGN(ScoreResult s, engine->Score(b, Prompt::Text("cd")));
  EXPECT_NEAR(s.logprob,
              testing::ExpectedLogprob(model, 'b', 'c') + testing::ExpectedLogprob(model, 'c', 'd'), 1e-4);
}

TEST(EngineTest, StreamingCallbackSeesEveryTokenAndCanStop) {
  auto engine = MakeEngine();
  BANYAN_ASSERT_OK_AND_ASSIGN(BranchId b, engine->NewBranch(Prompt::Text("a")));
  std::string streamed;
  int calls = 0;
  GenerateOptions g = GreedyOptions(10);
  g.callbacks.on_token = [&](BranchId id, int32_t, std::string_view delta, float) {
    EXPECT_EQ(id, b);
    streamed += std::string(delta);
    return ++calls < 4;
  };
  BANYAN_ASSERT_OK_AND_ASSIGN(GenerateResult r, engine->Generate(b, g));
  EXPECT_EQ(r.finish, FinishReason::kCallback);
  EXPECT_EQ(r.text, "bcde");
  EXPECT_EQ(streamed, "bcde");
}

TEST(EngineTest, PromptCacheIsReused) {
  auto engine = MakeEngine();
  const std::string prompt = "the quick brown fox jumps over the lazy dog";
  BANYAN_ASSERT_OK_AND_ASSIGN(BranchId a, engine->NewBranch(Prompt::Text(prompt)));
  BANYAN_ASSERT_OK(engine->Release(a));
  BANYAN_ASSERT_OK_AND_ASSIGN(BranchId b, engine->NewBranch(Prompt::Text(prompt + "!")));
  BANYAN_ASSERT_OK_AND_ASSIGN(BranchInfo info, engine->Inspect(b));
  EXPECT_EQ(info.tokens_reused, static_cast<int64_t>(prompt.size()));
  BANYAN_ASSERT_OK_AND_ASSIGN(GenerateResult r, engine->Generate(b, GreedyOptions(2)));
  EXPECT_EQ(r.text, "\"#");
  // Another namespace shares nothing.
  BranchOptions other;
  other.kv_namespace = "adapter-x";
  BANYAN_ASSERT_OK_AND_ASSIGN(BranchId c, engine->NewBranch(Prompt::Text(prompt), other));
  BANYAN_ASSERT_OK_AND_ASSIGN(info, engine->Inspect(c));
  EXPECT_EQ(info.tokens_reused, 0);
}

TEST(EngineTest, AppendThenGenerate) {
  auto engine = MakeEngine();
  BANYAN_ASSERT_OK_AND_ASSIGN(BranchId b, engine->NewBranch(Prompt::Text("")));
  BANYAN_ASSERT_OK(engine->Append(b, Prompt::Text("xy")));
  BANYAN_ASSERT_OK(engine->Append(b, Prompt::Tokens({'m'})));
  BANYAN_ASSERT_OK_AND_ASSIGN(GenerateResult r, engine->Generate(b, GreedyOptions(2)));
  EXPECT_EQ(r.text, "no");
  BANYAN_ASSERT_OK_AND_ASSIGN(BranchInfo info, engine->Inspect(b));
  EXPECT_EQ(info.text, "xymno");
}

TEST(EngineTest, ChatTemplate) {
  auto engine = MakeEngine();
  std::vector<ChatMessage> chat = {{"user", "hi"}};
  BANYAN_ASSERT_OK_AND_ASSIGN(std::string text, engine->ApplyChatTemplate(chat, true));
  EXPECT_EQ(text, "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n");
}

TEST(EngineTest, InfoDescribesDeviceModelAndKvPool) {
  CountingBackendOptions model;  // 2 layers, 1 KV head of 4 dims, vocab 258
  EngineOptions options = SmallOptions();
  auto engine = MakeEngine(model, options);
  const EngineInfo info = engine->Info();
  EXPECT_EQ(info.device, engine->Stats().device);
  EXPECT_EQ(info.backend, "counting");
  EXPECT_EQ(info.model, "counting");
  EXPECT_EQ(info.architecture, "llama");
  EXPECT_EQ(info.num_layers, 2);
  EXPECT_EQ(info.num_kv_heads, 1);
  EXPECT_EQ(info.head_dim, 4);
  EXPECT_EQ(info.vocab_size, 258);
  EXPECT_GT(info.parameters, 258 * 4);
  EXPECT_EQ(info.chat_format, "chatml");
  EXPECT_THAT(info.stop_tokens, ::testing::Contains(testing::ByteTokenizer::kEos));
  EXPECT_EQ(info.kv_dtype, "f32");
  EXPECT_EQ(info.page_size, 4);
  EXPECT_EQ(info.kv_bytes_per_token, 2 * 2 * 4 * 4);  // layers x (K, V) x dims x f32
  EXPECT_EQ(info.kv_tokens, info.kv_pages * 4);
  EXPECT_EQ(info.kv_bytes, info.kv_tokens * info.kv_bytes_per_token);
  EXPECT_LE(info.kv_bytes, static_cast<int64_t>(options.kv_budget_bytes));
  EXPECT_GT(info.kv_bytes, static_cast<int64_t>(options.kv_budget_bytes) / 2);
  EXPECT_EQ(info.kv_pages, engine->Stats().kv_pages_total);
  EXPECT_EQ(info.max_batch, 64);
  EXPECT_EQ(info.prefill_chunk, 32);
  EXPECT_EQ(info.threads, 2);
  EXPECT_EQ(info.attention_mode, "tree");
}

TEST(EngineTest, RepeatedBatchDecodesWithoutFragmentingTheTree) {
  // The same prompt, fork and greedy decode three times over one engine: the
  // later rounds decode along the cached continuations of the first and must
  // neither split them into one node per token nor change what they generate.
  EngineOptions options = SmallOptions();
  options.kv_budget_bytes = 64 << 20;
  auto engine = MakeEngine({}, options);
  std::vector<int32_t> prompt;
  for (int i = 0; i < 64; ++i) prompt.push_back(3 + (i * 7) % 200);
  GenerateOptions gen = GreedyOptions(16);
  gen.ignore_eos = true;
  // Nodes after each round; before the fix, round 1 added one node per
  // generated token per branch (12 -> 141). A repeated prompt may split its
  // cached node once (at the token whose logits a new branch recomputes).
  std::vector<int64_t> nodes;
  std::vector<std::vector<int32_t>> first_tokens;
  for (int round = 0; round < 3; ++round) {
    BranchId root = engine->NewBranch(Prompt::Tokens(prompt)).value();
    std::vector<BranchId> kids = engine->Fork(root, 8).value();
    for (int i = 0; i < 8; ++i) BANYAN_ASSERT_OK(engine->Append(kids[i], Prompt::Tokens({100 + i})));
    std::vector<absl::StatusOr<GenerateResult>> results = engine->GenerateMany(kids, gen);
    std::vector<std::vector<int32_t>> tokens;
    for (auto& r : results) {
      BANYAN_ASSERT_OK(r.status());
      tokens.push_back(r->tokens);
    }
    nodes.push_back(engine->Stats().tree_nodes);
    if (round == 0) {
      first_tokens = tokens;
    } else {
      EXPECT_LE(nodes[round], nodes[0] + 1) << "round " << round;
      EXPECT_EQ(tokens, first_tokens) << "round " << round;
    }
    for (BranchId k : kids) BANYAN_ASSERT_OK(engine->Release(k));
    BANYAN_ASSERT_OK(engine->Release(root));
  }
  EXPECT_EQ(nodes[2], nodes[1]);
}

}  // namespace
}  // namespace banyan::engine

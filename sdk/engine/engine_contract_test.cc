// Every Status the Engine API returns (banyan/engine.h), each asserted by
// code, and that a failing call leaves the engine usable and the other
// branches intact (the counting backend checks every row's KV on every pass).
#include <atomic>
#include <cstdio>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "banyan/engine.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "sdk/base/status_testing.h"
#include "sdk/engine/engine_testing.h"
#include "sdk/engine/testing/counting_backend.h"
#include "sdk/engine/testing/test_options.h"

namespace banyan::engine {
namespace {

using ::banyan::engine::testing::CountingBackendOptions;
using ::banyan::engine::testing::CreateCountingEngine;
using ::banyan::engine::testing::SmallEngineOptions;
using ::banyan::engine::testing::GreedyOptions;
using ::banyan::testing::StatusIs;
using ::testing::HasSubstr;
using Code = absl::StatusCode;

EngineOptions Options(uint64_t budget = 1 << 20) { return SmallEngineOptions(budget, 16, 16); }

std::unique_ptr<Engine> Make(CountingBackendOptions model = {}, EngineOptions o = Options()) {
  auto e = CreateCountingEngine(model, o);
  EXPECT_TRUE(e.ok()) << e.status();
  return e.ok() ? std::move(*e) : nullptr;
}

std::string TempPath(const std::string& name) {
  return ::testing::TempDir() + "/engine_contract_" + name;
}

TEST(EngineContractTest, StaleAndUnknownHandlesAreNotFound) {
  auto engine = Make();
  BANYAN_ASSERT_OK_AND_ASSIGN(BranchId b, engine->NewBranch(Prompt::Text("abc")));
  BANYAN_ASSERT_OK(engine->Release(b));
  EXPECT_THAT(engine->Release(b), StatusIs(Code::kNotFound));  // double release
  EXPECT_THAT(engine->Inspect(b), StatusIs(Code::kNotFound));
  EXPECT_THAT(engine->Generate(b, GreedyOptions(2)), StatusIs(Code::kNotFound));
  EXPECT_THAT(engine->Fork(b, 2), StatusIs(Code::kNotFound));
  EXPECT_THAT(engine->Append(b, Prompt::Text("x")), StatusIs(Code::kNotFound));
  EXPECT_THAT(engine->Score(b, Prompt::Text("x")), StatusIs(Code::kNotFound));
  EXPECT_THAT(engine->SetMetadata(b, "k", "v"), StatusIs(Code::kNotFound));
  EXPECT_THAT(engine->Inspect(BranchId{}), StatusIs(Code::kNotFound));
  EXPECT_THAT(engine->Inspect(BranchId{999999}), StatusIs(Code::kNotFound));
  // Ids are never reused: a new branch gets a new id.
  BANYAN_ASSERT_OK_AND_ASSIGN(BranchId c, engine->NewBranch(Prompt::Text("abc")));
  EXPECT_NE(c, b);
  auto many = engine->GenerateMany({c, b}, GreedyOptions(2));
  BANYAN_EXPECT_OK(many[0].status());
  EXPECT_THAT(many[1], StatusIs(Code::kNotFound));
}

TEST(EngineContractTest, BadArgumentsAreInvalidArgument) {
  auto engine = Make();
  BANYAN_ASSERT_OK_AND_ASSIGN(BranchId b, engine->NewBranch(Prompt::Text("abc")));
  EXPECT_THAT(engine->Fork(b, 0), StatusIs(Code::kInvalidArgument));
  EXPECT_THAT(engine->Fork(b, -3), StatusIs(Code::kInvalidArgument));
  GenerateOptions g = GreedyOptions(2);
  g.sampling.temperature = -1.0f;
  EXPECT_THAT(engine->Generate(b, g), StatusIs(Code::kInvalidArgument));
  g = GreedyOptions(2);
  g.sampling.top_p = 0.0f;
  EXPECT_THAT(engine->Generate(b, g), StatusIs(Code::kInvalidArgument));
  g = GreedyOptions(-1);
  EXPECT_THAT(engine->Generate(b, g), StatusIs(Code::kInvalidArgument));
  g = GreedyOptions(2);
  g.stop_strings = {""};
  EXPECT_THAT(engine->Generate(b, g), StatusIs(Code::kInvalidArgument));
  EXPECT_THAT(engine->SetMetadata(b, "", "v"), StatusIs(Code::kInvalidArgument));
  EngineOptions bad = Options();
  bad.page_size = 0;
  EXPECT_THAT(CreateCountingEngine({}, bad), StatusIs(Code::kInvalidArgument));
  bad = Options();
  bad.max_batch = 0;
  EXPECT_THAT(CreateCountingEngine({}, bad), StatusIs(Code::kInvalidArgument));
  EngineOptions device = Options();
  device.device = "tpu:0";
  EXPECT_THAT(Engine::Create(device), StatusIs(Code::kInvalidArgument));
  // The branch is still usable.
  BANYAN_ASSERT_OK_AND_ASSIGN(GenerateResult r, engine->Generate(b, GreedyOptions(2)));
  EXPECT_EQ(r.text, "de");
}

TEST(EngineContractTest, TokenIdsOutsideTheVocabularyAreOutOfRange) {
  auto engine = Make();
  EXPECT_THAT(engine->NewBranch(Prompt::Tokens({1, 258})), StatusIs(Code::kOutOfRange));
  EXPECT_THAT(engine->NewBranch(Prompt::Tokens({-1})), StatusIs(Code::kOutOfRange));
  BANYAN_ASSERT_OK_AND_ASSIGN(BranchId b, engine->NewBranch(Prompt::Text("abc")));
  EXPECT_THAT(engine->Append(b, Prompt::Tokens({300})), StatusIs(Code::kOutOfRange));
  EXPECT_THAT(engine->Score(b, Prompt::Tokens({5, 1000})), StatusIs(Code::kOutOfRange));
  EXPECT_THAT(engine->Detokenize({99999}), StatusIs(Code::kOutOfRange));
  GenerateOptions g = GreedyOptions(2);
  g.stop_tokens = {4000};
  EXPECT_THAT(engine->Generate(b, g), StatusIs(Code::kOutOfRange));
  BANYAN_ASSERT_OK_AND_ASSIGN(BranchInfo info, engine->Inspect(b));
  EXPECT_EQ(info.text, "abc");  // nothing changed
}

TEST(EngineContractTest, BusyBranchIsFailedPrecondition) {
  CountingBackendOptions slow;
  slow.forward_delay = absl::Milliseconds(5);
  auto engine = Make(slow);
  BANYAN_ASSERT_OK_AND_ASSIGN(BranchId b, engine->NewBranch(Prompt::Text("a")));
  std::atomic<bool> started{false};
  GenerateOptions g = GreedyOptions(40);
  g.callbacks.on_token = [&](BranchId, int32_t, std::string_view, float) {
    started = true;
    return true;
  };
  std::thread generator([&] {
    auto r = engine->Generate(b, g);
    EXPECT_TRUE(r.ok()) << r.status();
  });
  while (!started) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EXPECT_THAT(engine->Generate(b, GreedyOptions(2)), StatusIs(Code::kFailedPrecondition));
  EXPECT_THAT(engine->Append(b, Prompt::Text("x")), StatusIs(Code::kFailedPrecondition));
  EXPECT_THAT(engine->Fork(b, 2), StatusIs(Code::kFailedPrecondition));
  EXPECT_THAT(engine->Release(b), StatusIs(Code::kFailedPrecondition));
  EXPECT_THAT(engine->Score(b, Prompt::Text("x")), StatusIs(Code::kFailedPrecondition));
  BANYAN_EXPECT_OK(engine->Inspect(b).status());        // reading is allowed
  BANYAN_EXPECT_OK(engine->SetMetadata(b, "k", "v"));   // so is metadata
  // The same branch twice in one call: the second is busy.
  generator.join();
  auto twice = engine->GenerateMany({b, b}, GreedyOptions(1));
  BANYAN_EXPECT_OK(twice[0].status());
  EXPECT_THAT(twice[1], StatusIs(Code::kFailedPrecondition));
  // An empty branch has nothing to continue.
  BANYAN_ASSERT_OK_AND_ASSIGN(BranchId empty, engine->NewBranch(Prompt::Text("")));
  EXPECT_THAT(engine->Generate(empty, GreedyOptions(2)), StatusIs(Code::kFailedPrecondition));
  EXPECT_THAT(engine->Score(empty, Prompt::Text("x")), StatusIs(Code::kFailedPrecondition));
  // No chat template.
  auto bare = CreateEngineForTesting(testing::CreateCountingBackend({}).value(),
                                     std::make_unique<testing::ByteTokenizer>(), Options());
  ASSERT_TRUE(bare.ok()) << bare.status();
  EXPECT_THAT((*bare)->ApplyChatTemplate({{"user", "hi"}}, true), StatusIs(Code::kFailedPrecondition));
}

TEST(EngineContractTest, CancelledRequestRestoresTheBranch) {
  CountingBackendOptions slow;
  slow.forward_delay = absl::Milliseconds(2);
  auto engine = Make(slow);
  BANYAN_ASSERT_OK_AND_ASSIGN(BranchId root, engine->NewBranch(Prompt::Text("a")));
  BANYAN_ASSERT_OK_AND_ASSIGN(std::vector<BranchId> kids, engine->Fork(root, 3));
  GenerateOptions g = GreedyOptions(100);
  g.cancel = std::make_shared<CancelToken>();
  int seen = 0;
  g.callbacks.on_token = [&](BranchId, int32_t, std::string_view, float) {
    if (++seen == 6) g.cancel->Cancel();
    return true;
  };
  auto results = engine->GenerateMany(kids, g);
  for (auto& r : results) EXPECT_THAT(r, StatusIs(Code::kCancelled));
  for (BranchId k : kids) {
    BANYAN_ASSERT_OK_AND_ASSIGN(BranchInfo info, engine->Inspect(k));
    EXPECT_EQ(info.text, "a");
  }
  // Cancelled before it starts: nothing runs.
  GenerateOptions pre = GreedyOptions(5);
  pre.cancel = std::make_shared<CancelToken>();
  pre.cancel->Cancel();
  EXPECT_THAT(engine->Generate(kids[0], pre), StatusIs(Code::kCancelled));
  // The engine and the branches work afterwards.
  BANYAN_ASSERT_OK_AND_ASSIGN(GenerateResult r, engine->Generate(kids[1], GreedyOptions(3)));
  EXPECT_EQ(r.text, "bcd");
}

TEST(EngineContractTest, DeadlineExceededRestoresTheBranch) {
  CountingBackendOptions slow;
  slow.forward_delay = absl::Milliseconds(5);
  auto engine = Make(slow);
  BANYAN_ASSERT_OK_AND_ASSIGN(BranchId b, engine->NewBranch(Prompt::Text("a")));
  GenerateOptions g = GreedyOptions(1000);
  g.deadline = absl::Now() + absl::Milliseconds(60);
  EXPECT_THAT(engine->Generate(b, g), StatusIs(Code::kDeadlineExceeded));
  BANYAN_ASSERT_OK_AND_ASSIGN(BranchInfo info, engine->Inspect(b));
  EXPECT_EQ(info.text, "a");
  g.deadline = absl::Now() - absl::Seconds(1);
  EXPECT_THAT(engine->Generate(b, g), StatusIs(Code::kDeadlineExceeded));
  BANYAN_ASSERT_OK_AND_ASSIGN(GenerateResult r, engine->Generate(b, GreedyOptions(2)));
  EXPECT_EQ(r.text, "bc");
}

TEST(EngineContractTest, BudgetExhaustedChangesNothingAndCachedNodesGoFirst) {
  // 2 layers x K,V x 4 floats x 4 bytes = 64 bytes per token; pages of 4 tokens.
  // 32 KiB = 128 pages = 512 tokens, of which 32 (max_batch + prefill_chunk)
  // are the engine's scratch.
  auto engine = Make({}, Options(32 << 10));
  EXPECT_THAT(CreateCountingEngine({}, Options(1 << 10)), StatusIs(Code::kResourceExhausted));
  // Cached, released prompts are evicted to make room for new ones.
  for (int i = 0; i < 12; ++i) {
    std::string prompt(100, static_cast<char>('A' + i));
    BANYAN_ASSERT_OK_AND_ASSIGN(BranchId b, engine->NewBranch(Prompt::Text(prompt)));
    BANYAN_ASSERT_OK(engine->Release(b));
  }
  EXPECT_GT(engine->Stats().evicted_nodes, 0);
  // Live branches cannot be evicted: a prompt that does not fit fails...
  BANYAN_ASSERT_OK_AND_ASSIGN(BranchId keep, engine->NewBranch(Prompt::Text(std::string(300, 'k'))));
  EXPECT_THAT(engine->NewBranch(Prompt::Text(std::string(300, 'z'))),
              StatusIs(Code::kResourceExhausted, HasSubstr("KV budget")));
  // ... and so does generation past the budget, restoring the branches.
  BANYAN_ASSERT_OK_AND_ASSIGN(std::vector<BranchId> kids, engine->Fork(keep, 4));
  GenerateOptions g = GreedyOptions(200);
  g.ignore_eos = true;
  auto results = engine->GenerateMany(kids, g);
  int exhausted = 0;
  for (auto& r : results) exhausted += absl::IsResourceExhausted(r.status());
  EXPECT_GT(exhausted, 0);
  for (BranchId k : kids) BANYAN_ASSERT_OK(engine->Release(k));
  // Everything still works (and the KV the counting model checks is intact).
  BANYAN_ASSERT_OK_AND_ASSIGN(GenerateResult r, engine->Generate(keep, GreedyOptions(3)));
  EXPECT_EQ(r.text, "lmn");
  BANYAN_ASSERT_OK_AND_ASSIGN(BranchInfo info, engine->Inspect(keep));
  EXPECT_EQ(info.tokens.size(), 303u);
}

TEST(EngineContractTest, CorruptOrForeignSnapshotsAreRejected) {
  auto engine = Make();
  BANYAN_ASSERT_OK_AND_ASSIGN(BranchId b, engine->NewBranch(Prompt::Text("hello")));
  const std::string path = TempPath("snap.bin");
  BANYAN_ASSERT_OK(engine->Save(path));
  EXPECT_THAT(engine->Load(TempPath("missing.bin")), StatusIs(Code::kNotFound));
  // Flip one byte of the payload.
  std::string bytes;
  {
    std::ifstream in(path, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  std::string flipped = bytes;
  flipped[flipped.size() - 2] ^= 0x40;
  std::ofstream(TempPath("flipped.bin"), std::ios::binary) << flipped;
  EXPECT_THAT(engine->Load(TempPath("flipped.bin")), StatusIs(Code::kDataLoss));
  std::ofstream(TempPath("short.bin"), std::ios::binary) << bytes.substr(0, bytes.size() - 3);
  EXPECT_THAT(engine->Load(TempPath("short.bin")), StatusIs(Code::kDataLoss));
  std::ofstream(TempPath("junk.bin"), std::ios::binary) << "not a snapshot at all";
  EXPECT_THAT(engine->Load(TempPath("junk.bin")), StatusIs(Code::kDataLoss));
  // A snapshot of another model.
  CountingBackendOptions other;
  other.num_layers = 3;
  auto engine2 = Make(other);
  EXPECT_THAT(engine2->Load(path), StatusIs(Code::kInvalidArgument, HasSubstr("another model")));
  // Saving into a folder that does not exist fails and leaves nothing.
  EXPECT_THAT(engine->Save("/nonexistent-dir/x/snap.bin"), StatusIs(Code::kNotFound));
  BANYAN_EXPECT_OK(engine->Inspect(b).status());
}

// Text that is not valid UTF-8 (a reply cut inside a character, binary
// metadata) saves and loads byte for byte.
TEST(EngineContractTest, SnapshotKeepsTextThatIsNotUtf8) {
  auto engine = Make();
  const std::vector<int32_t> cut = {'c', 'a', 'f', 0xC3};  // "caf" + half of "\u00e9"
  BANYAN_ASSERT_OK_AND_ASSIGN(BranchId b, engine->NewBranch(Prompt::Tokens(cut)));
  BANYAN_ASSERT_OK(engine->SetMetadata(b, "key\xff", "value\xfe\xc0"));
  const std::string path = TempPath("not_utf8.bin");
  BANYAN_ASSERT_OK(engine->Save(path));
  auto fresh = Make();
  BANYAN_ASSERT_OK_AND_ASSIGN(std::vector<BranchId> loaded, fresh->Load(path));
  ASSERT_EQ(loaded.size(), 1u);
  BANYAN_ASSERT_OK_AND_ASSIGN(BranchInfo info, fresh->Inspect(loaded[0]));
  EXPECT_EQ(info.tokens, cut);
  EXPECT_EQ(info.metadata.at("key\xff"), "value\xfe\xc0");
}

TEST(EngineContractTest, UnavailableDeviceAndMissingModel) {
  EngineOptions o = Options();
  o.device = "cuda:7";
  EXPECT_THAT(Engine::Create(o), StatusIs(Code::kUnavailable));
  o.device = "cpu";
  o.model_path = "/nonexistent/model.gguf";
  EXPECT_THAT(Engine::Create(o), StatusIs(Code::kNotFound));
}

TEST(EngineContractTest, DestroyingTheEngineCancelsPendingRequests) {
  CountingBackendOptions slow;
  slow.forward_delay = absl::Milliseconds(2);
  auto engine = Make(slow);
  BANYAN_ASSERT_OK_AND_ASSIGN(BranchId b, engine->NewBranch(Prompt::Text("a")));
  std::atomic<bool> started{false};
  absl::Status status;
  GenerateOptions g = GreedyOptions(100000);
  g.ignore_eos = true;
  g.callbacks.on_token = [&](BranchId, int32_t, std::string_view, float) {
    started = true;
    return true;
  };
  std::thread generator([&] { status = engine->Generate(b, g).status(); });
  while (!started) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  engine.reset();
  generator.join();
  EXPECT_THAT(status, StatusIs(Code::kCancelled));
}

}  // namespace
}  // namespace banyan::engine

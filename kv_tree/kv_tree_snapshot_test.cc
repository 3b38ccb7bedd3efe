// Snapshot / Restore / ValidateSnapshot (core, no protobuf) and the protobuf
// round trip with hostile inputs (banyan_kv_tree_proto).
#include <numeric>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "google/protobuf/stubs/logging.h"
#include "gtest/gtest.h"
#include "kv_tree/kv_tree.h"
#include "kv_tree/kv_tree_proto.h"
#include "sdk/base/rng.h"
#include "sdk/base/status_testing.h"

namespace banyan::kv_tree {
namespace {

using ::banyan::testing::StatusIs;
using ::testing::HasSubstr;

std::unique_ptr<KvTree> MakeTree(int32_t page_size, int32_t pages) {
  KvPoolConfig config{DType::kF16, 1, 1, 4, page_size, 0};
  config.byte_budget = static_cast<size_t>(pages) * 2 * 4 * page_size * 2;
  return KvTree::Create(HostKvStorage::Create(config).value()).value();
}

// A random tree: inserts, forks, appends, truncates and releases.
void Grow(KvTree& tree, uint64_t seed, std::vector<Branch>* keep) {
  Rng rng(seed);
  std::vector<Branch> live;
  for (int i = 0; i < 200; ++i) {
    const uint64_t op = rng.UniformInt(5);
    std::vector<int32_t> tokens(1 + rng.UniformInt(9));
    for (int32_t& t : tokens) t = static_cast<int32_t>(rng.UniformInt(4));
    if (op == 0 || live.empty()) {
      auto e = tree.Insert(KvNamespace{rng.UniformInt(3) == 0 ? "b" : "a", "x"}, tokens);
      if (e.ok()) live.push_back(e->branch);
    } else if (op == 1) {
      auto f = tree.Fork(live[rng.UniformInt(live.size())]);
      if (f.ok()) live.push_back(*f);
    } else if (op == 2) {
      (void)tree.Append(live[rng.UniformInt(live.size())], tokens);
    } else if (op == 3) {
      const Branch b = live[rng.UniformInt(live.size())];
      (void)tree.Truncate(b, static_cast<int64_t>(rng.UniformInt(tree.Length(b).value() + 1)));
    } else {
      const size_t k = rng.UniformInt(live.size());
      ASSERT_TRUE(tree.Release(live[k]).ok());
      live.erase(live.begin() + k);
    }
  }
  *keep = live;
}

TEST(SnapshotTest, RoundTripThroughProtoRebuildsTheSameStructure) {
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    auto tree = MakeTree(4, 400);
    std::vector<Branch> live;
    Grow(*tree, seed, &live);
    BANYAN_ASSERT_OK(tree->CheckInvariants());
    const TreeSnapshot snap = tree->Snapshot();
    BANYAN_ASSERT_OK(ValidateSnapshot(snap));
    const std::string bytes = SerializeSnapshot(snap);
    BANYAN_ASSERT_OK_AND_ASSIGN(TreeSnapshot parsed, ParseSnapshot(bytes));
    ASSERT_EQ(parsed.nodes.size(), snap.nodes.size());
    for (size_t i = 0; i < snap.nodes.size(); ++i) {
      EXPECT_EQ(parsed.nodes[i].parent, snap.nodes[i].parent);
      EXPECT_EQ(parsed.nodes[i].tokens, snap.nodes[i].tokens);
      EXPECT_EQ(parsed.nodes[i].branch_refs, snap.nodes[i].branch_refs);
      EXPECT_EQ(parsed.nodes[i].last_access, snap.nodes[i].last_access);
    }
    auto other = MakeTree(3, 1000);  // another page size: structure only
    BANYAN_ASSERT_OK_AND_ASSIGN(auto restored, other->Restore(parsed));
    ASSERT_EQ(restored.size(), snap.nodes.size());
    BANYAN_ASSERT_OK(other->CheckInvariants());
    const TreeSnapshot again = other->Snapshot();
    ASSERT_EQ(again.nodes.size(), snap.nodes.size()) << seed;
    int64_t to_write = 0, tokens = 0;
    for (size_t i = 0; i < snap.nodes.size(); ++i) {
      EXPECT_EQ(again.nodes[i].parent, snap.nodes[i].parent);
      EXPECT_EQ(again.nodes[i].tokens, snap.nodes[i].tokens);
      to_write += static_cast<int64_t>(restored[i].write_slots.size());
      tokens += static_cast<int64_t>(snap.nodes[i].tokens.size());
      // Each restored branch reads the node's whole path.
      BANYAN_ASSERT_OK_AND_ASSIGN(int64_t len, other->Length(restored[i].branch));
      EXPECT_EQ(len, static_cast<int64_t>(snap.nodes[i].tokens.size()) +
                         (snap.nodes[i].parent < 0 ? 0 : other->Length(restored[snap.nodes[i].parent].branch).value()));
    }
    EXPECT_EQ(to_write, tokens);  // a fresh tree recomputes every token's K/V
    // Restoring again into the same tree reuses everything.
    BANYAN_ASSERT_OK_AND_ASSIGN(auto twice, other->Restore(parsed));
    for (const auto& r : twice) EXPECT_TRUE(r.write_slots.empty());
    for (const auto& r : restored) BANYAN_ASSERT_OK(other->Release(r.branch));
    for (const auto& r : twice) BANYAN_ASSERT_OK(other->Release(r.branch));
    BANYAN_ASSERT_OK(other->CheckInvariants());
  }
}

TEST(SnapshotTest, RestoreFailsWholeWhenThePoolIsTooSmall) {
  auto tree = MakeTree(4, 400);
  std::vector<Branch> live;
  Grow(*tree, 5, &live);
  const TreeSnapshot snap = tree->Snapshot();
  auto small = MakeTree(4, 3);
  EXPECT_THAT(small->Restore(snap), StatusIs(absl::StatusCode::kResourceExhausted));
  BANYAN_ASSERT_OK(small->CheckInvariants());
  EXPECT_EQ(small->Stats().branches, 0);
}

TreeSnapshot Valid() {
  TreeSnapshot s;
  s.namespaces = {{"m", ""}};
  s.nodes.push_back(SnapshotNode{-1, 0, {}, 1, 0, 0});
  s.nodes.push_back(SnapshotNode{0, 0, {5, 6, 7}, 2, 1, 0});
  s.nodes.push_back(SnapshotNode{1, 0, {8}, 3, 1, 1});
  s.nodes.push_back(SnapshotNode{1, 0, {9, 9}, 4, 0, 0});
  return s;
}

TEST(SnapshotTest, ValidateRejectsMalformedTrees) {
  BANYAN_ASSERT_OK(ValidateSnapshot(Valid()));
  auto expect_bad = [](TreeSnapshot s, const char* what) {
    EXPECT_THAT(ValidateSnapshot(s), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(what)));
    // The same through the wire.
    EXPECT_THAT(ParseSnapshot(SerializeSnapshot(s)), StatusIs(absl::StatusCode::kInvalidArgument));
  };
  TreeSnapshot s = Valid();
  s.format_version = 9;
  expect_bad(s, "version");
  s = Valid();
  s.nodes[2].parent = 3;
  expect_bad(s, "precede");
  s = Valid();
  s.nodes[2].parent = -7;
  expect_bad(s, "precede");
  s = Valid();
  s.nodes[3].tokens = {8, 1};
  expect_bad(s, "sibling");
  s = Valid();
  s.nodes[2].tokens = {};
  expect_bad(s, "no tokens");
  s = Valid();
  s.nodes[2].tokens = {-3};
  expect_bad(s, "negative token");
  s = Valid();
  s.nodes[0].tokens = {1};
  expect_bad(s, "root");
  s = Valid();
  s.nodes[0].namespace_index = 4;
  expect_bad(s, "namespace");
  s = Valid();
  s.nodes.push_back(SnapshotNode{-1, 0, {}, 1, 0, 0});
  expect_bad(s, "two roots");
  s = Valid();
  s.namespaces.push_back({"m", ""});
  expect_bad(s, "twice");
  s = Valid();
  s.nodes[1].branch_refs = -1;
  expect_bad(s, "negative");
  s = Valid();
  s.page_size = 0;
  expect_bad(s, "page size");
}

TEST(SnapshotTest, GarbageBytesAreDataLoss) {
  EXPECT_THAT(ParseSnapshot("\xff\xff\xff\xff"), StatusIs(absl::StatusCode::kDataLoss));
  const std::string good = SerializeSnapshot(Valid());
  BANYAN_ASSERT_OK(ParseSnapshot(good).status());
  EXPECT_THAT(ParseSnapshot(good.substr(0, good.size() - 3)), StatusIs(absl::StatusCode::kDataLoss));
  // Random mutations never crash and give one of the two codes.
  google::protobuf::LogSilencer quiet;  // invalid UTF-8 in strings is logged by protobuf
  Rng rng(11);
  for (int i = 0; i < 3000; ++i) {
    std::string bytes = good;
    const int flips = 1 + static_cast<int>(rng.UniformInt(4));
    for (int f = 0; f < flips; ++f) bytes[rng.UniformInt(bytes.size())] = static_cast<char>(rng.Next());
    absl::StatusOr<TreeSnapshot> parsed = ParseSnapshot(bytes);
    if (parsed.ok()) continue;
    EXPECT_THAT(parsed.status().code(),
                ::testing::AnyOf(absl::StatusCode::kDataLoss, absl::StatusCode::kInvalidArgument));
  }
}

}  // namespace
}  // namespace banyan::kv_tree

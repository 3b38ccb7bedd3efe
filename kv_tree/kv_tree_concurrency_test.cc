// Concurrent fork / append / truncate / release / pin / plan from several
// threads on one tree (the tree is internally synchronized). Run under TSan
// (-DBANYAN_SANITIZE=thread) to check the locking; here it also checks that
// every thread's branches keep exactly their tokens.
#include <atomic>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "kv_tree/kv_tree.h"
#include "sdk/base/rng.h"
#include "sdk/base/status_testing.h"

namespace banyan::kv_tree {
namespace {

TEST(KvTreeConcurrencyTest, ThreadsShareOneTree) {
  KvPoolConfig config{DType::kF32, 1, 1, 2, 4, 0};
  config.byte_budget = 600 * 2 * 2 * 4 * 4;
  BANYAN_ASSERT_OK_AND_ASSIGN(auto storage, HostKvStorage::Create(config));
  BANYAN_ASSERT_OK_AND_ASSIGN(std::unique_ptr<KvTree> tree, KvTree::Create(std::move(storage)));
  BANYAN_ASSERT_OK_AND_ASSIGN(Extension prompt, tree->Insert(KvNamespace{"m", ""}, {1, 2, 3, 4, 5, 6}));
  constexpr int kThreads = 4;
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      Rng rng(static_cast<uint64_t>(t) + 1);
      struct Mine {
        Branch branch;
        std::vector<int32_t> tokens;
      };
      std::vector<Mine> mine;
      attention::AttentionPlan plan;
      for (int i = 0; i < 3000; ++i) {
        const uint64_t op = rng.UniformInt(7);
        if (op == 0 || mine.empty()) {
          auto f = tree->Fork(prompt.branch);
          if (!f.ok()) { ++failures; continue; }
          mine.push_back({*f, {1, 2, 3, 4, 5, 6}});
        } else if (op <= 2) {
          Mine& m = mine[rng.UniformInt(mine.size())];
          std::vector<int32_t> add(1 + rng.UniformInt(3));
          for (int32_t& x : add) x = static_cast<int32_t>(rng.UniformInt(3));
          auto e = tree->Append(m.branch, add);
          if (e.ok()) {
            m.tokens.insert(m.tokens.end(), add.begin(), add.end());
          } else if (e.status().code() != absl::StatusCode::kResourceExhausted) {
            ++failures;
          }
        } else if (op == 3) {
          Mine& m = mine[rng.UniformInt(mine.size())];
          const size_t n = rng.UniformInt(m.tokens.size() + 1);
          if (!tree->Truncate(m.branch, static_cast<int64_t>(n)).ok()) ++failures;
          m.tokens.resize(n);
        } else if (op == 4) {
          const size_t k = rng.UniformInt(mine.size());
          if (!tree->Release(mine[k].branch).ok()) ++failures;
          mine.erase(mine.begin() + k);
        } else if (op == 5) {
          Mine& m = mine[rng.UniformInt(mine.size())];
          auto node = tree->NodeOf(m.branch);
          if (!node.ok()) { ++failures; continue; }
          auto pin = tree->Pin(*node);
          if (!pin.ok()) ++failures;  // released at scope end
        } else {
          std::vector<Branch> rows;
          for (const Mine& m : mine) {
            if (!m.tokens.empty()) rows.push_back(m.branch);
          }
          if (!tree->BuildDecodePlan(rows, {}, &plan).ok() || !plan.Validate().empty()) ++failures;
        }
        if (i % 97 == 0) {
          for (const Mine& m : mine) {
            auto tokens = tree->Tokens(m.branch);
            if (!tokens.ok() || *tokens != m.tokens) ++failures;
          }
        }
      }
      for (const Mine& m : mine) {
        if (!tree->Release(m.branch).ok()) ++failures;
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
  BANYAN_ASSERT_OK(tree->CheckInvariants());
  EXPECT_EQ(tree->Stats().branches, 1);
}

}  // namespace
}  // namespace banyan::kv_tree

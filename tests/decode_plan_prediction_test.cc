// attention::PredictNextDecodePlan against the plans kv_tree really builds at
// the next decode step (the engine's decode: one new token per branch, planned
// with BuildPrefillPlan({branch, 1})): where the guess is made it must be the
// next plan exactly, and it must be made at every step where no leaf starts a
// page and the branches neither fork nor stop.
#include <memory>
#include <vector>

#include "attention/next_decode_plan.h"
#include "gtest/gtest.h"
#include "kv_tree/kv_tree.h"
#include "sdk/base/rng.h"
#include "sdk/base/status_testing.h"

namespace banyan {
namespace {

class DecodePlanPredictionTest : public ::testing::TestWithParam<int32_t> {  // the page size
 protected:
  void SetUp() override {
    kv_tree::KvPoolConfig config{DType::kBf16, 1, 1, 8, GetParam(), 0};
    config.byte_budget = size_t{4096} * 2 * 8 * 2 * 2;  // 4,096 tokens of K and V
    auto storage = kv_tree::HostKvStorage::Create(config);
    ASSERT_TRUE(storage.ok());
    auto tree = kv_tree::KvTree::Create(std::move(storage).value());
    ASSERT_TRUE(tree.ok());
    tree_ = std::move(tree).value();
  }

  // The decode step's plan: each branch's last token is its row.
  attention::AttentionPlan Plan() {
    std::vector<kv_tree::PrefillRows> rows;
    for (kv_tree::Branch b : branches_) rows.push_back({b, 1});
    attention::AttentionPlan plan;
    const absl::Status built = tree_->BuildPrefillPlan(rows, {}, &plan);
    EXPECT_TRUE(built.ok()) << built;
    EXPECT_EQ(plan.Validate(), "");
    return plan;
  }

  // Whether some branch's next token starts a page.
  bool SomeLeafNeedsAPage() {
    for (kv_tree::Branch b : branches_) {
      if (tree_->Slots(b).value().back().slot == GetParam() - 1) return true;
    }
    return false;
  }

  const kv_tree::KvNamespace ns_{"m", ""};
  std::unique_ptr<kv_tree::KvTree> tree_;
  std::vector<kv_tree::Branch> branches_;
};

TEST_P(DecodePlanPredictionTest, TheGuessIsTheNextPlanWheneverItIsMade) {
  Rng rng(static_cast<uint64_t>(GetParam()) * 31 + 5);
  std::vector<int32_t> prompt(37 + rng.UniformInt(50));
  for (int32_t& t : prompt) t = static_cast<int32_t>(rng.UniformInt(1000));
  auto inserted = tree_->Insert(ns_, prompt);
  ASSERT_TRUE(inserted.ok());
  auto forks = tree_->Fork(inserted->branch, 6);
  ASSERT_TRUE(forks.ok());
  branches_ = *forks;
  BANYAN_ASSERT_OK(tree_->Release(inserted->branch));
  int32_t next_token = 2000;
  for (kv_tree::Branch b : branches_) ASSERT_TRUE(tree_->Append(b, {next_token++}).ok());

  int made = 0, right = 0;
  attention::AttentionPlan guess;
  bool guessed = false;
  for (int step = 0; step < 60; ++step) {
    const bool topology_changes = step == 25 || step == 40;
    if (step == 25) {  // a branch forks (a search expanding a node)
      auto fork = tree_->Fork(branches_[2]);
      ASSERT_TRUE(fork.ok());
      branches_.push_back(*fork);
      ASSERT_TRUE(tree_->Append(*fork, {next_token++}).ok());
      ASSERT_TRUE(tree_->Append(branches_[2], {next_token++}).ok());
    }
    if (step == 40) {  // a branch stops
      BANYAN_ASSERT_OK(tree_->Release(branches_[0]));
      branches_.erase(branches_.begin());
    }
    const attention::AttentionPlan plan = Plan();
    if (guessed) {
      ++made;
      if (topology_changes) {
        EXPECT_FALSE(attention::SamePlan(guess, plan)) << "step " << step;
      } else {
        EXPECT_TRUE(attention::SamePlan(guess, plan)) << "step " << step;
        ++right;
      }
    }
    const bool page_needed = SomeLeafNeedsAPage();
    guessed = attention::PredictNextDecodePlan(plan, &guess);
    EXPECT_EQ(guessed, !page_needed) << "step " << step;
    for (kv_tree::Branch b : branches_) ASSERT_TRUE(tree_->Append(b, {next_token++}).ok());
  }
  // Most steps were guessed (one in page_size needs a page).
  EXPECT_GE(right, 60 * (GetParam() - 2) / GetParam() - 3);
  EXPECT_GE(made, right);
}

INSTANTIATE_TEST_SUITE_P(PageSizes, DecodePlanPredictionTest, ::testing::Values(4, 16, 64));

}  // namespace
}  // namespace banyan

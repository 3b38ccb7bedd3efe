// Plan builder tests on hand-built trees; the randomized comparison against a
// brute-force walk of every path is in kv_tree_property_test.cc.
#include <numeric>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kv_tree/kv_tree.h"
#include "sdk/base/status_testing.h"

namespace banyan::kv_tree {
namespace {

using ::banyan::testing::StatusIs;

std::vector<int32_t> Range(int32_t begin, int32_t end) {
  std::vector<int32_t> v(end - begin);
  std::iota(v.begin(), v.end(), begin);
  return v;
}

class PlanTest : public ::testing::Test {
 protected:
  void SetUp() override {
    KvPoolConfig config{DType::kBf16, 1, 1, 8, 4, 0};
    config.byte_budget = 256 * 2 * 8 * 4 * 2;
    auto storage = HostKvStorage::Create(config);
    ASSERT_TRUE(storage.ok());
    auto tree = KvTree::Create(std::move(storage).value());
    ASSERT_TRUE(tree.ok());
    tree_ = std::move(tree).value();
    // prompt (10) -> problem q (5 or 6) -> 2 samples each (3 tokens).
    auto prompt = tree_->Insert(ns_, Range(0, 10));
    ASSERT_TRUE(prompt.ok());
    prompt_ = prompt->branch;
    for (int q = 0; q < 2; ++q) {
      auto problem = tree_->Fork(prompt_);
      ASSERT_TRUE(problem.ok());
      ASSERT_TRUE(tree_->Append(*problem, Range(100 * (q + 1), 100 * (q + 1) + 5 + q)).ok());
      problems_.push_back(*problem);
      for (int s = 0; s < 2; ++s) {
        auto sample = tree_->Fork(*problem);
        ASSERT_TRUE(sample.ok());
        ASSERT_TRUE(tree_->Append(*sample, {1000 + 10 * q + s, 7, 7}).ok());
        samples_.push_back(*sample);
      }
    }
  }

  NodeId NodeOf(Branch b) { return tree_->NodeOf(b).value(); }

  const KvNamespace ns_{"m", ""};
  std::unique_ptr<KvTree> tree_;
  Branch prompt_;
  std::vector<Branch> problems_, samples_;
};

TEST_F(PlanTest, DecodeSharesEachNodeOnce) {
  attention::AttentionPlan plan;
  std::vector<NodeId> nodes;
  BANYAN_ASSERT_OK(tree_->BuildDecodePlan(samples_, {}, &plan, &nodes));
  EXPECT_EQ(plan.Validate(), "");
  EXPECT_EQ(plan.num_queries, 4);
  EXPECT_EQ(plan.page_size, 4);
  ASSERT_EQ(plan.num_segments(), 7);  // prompt, 2 problems, 4 samples
  EXPECT_EQ(nodes[0], NodeOf(prompt_));
  EXPECT_EQ(nodes[1], NodeOf(problems_[0]));
  EXPECT_EQ(nodes[2], NodeOf(samples_[0]));
  EXPECT_EQ(plan.segment_length[0], 10);
  EXPECT_EQ(plan.segment_entry_indptr[1] - plan.segment_entry_indptr[0], 4);  // read by all 4
  EXPECT_EQ(plan.segment_entry_indptr[2] - plan.segment_entry_indptr[1], 2);
  EXPECT_EQ(plan.num_entries(), 4 + 2 * 2 + 4);
  // The problem node starts mid-page: it shares the prompt's last page.
  EXPECT_EQ(plan.segment_first_slot[1], 10 % 4);
  EXPECT_EQ(plan.page_indices[plan.segment_page_indptr[1]], plan.page_indices[plan.segment_page_indptr[1] - 1]);
  for (int32_t q = 0; q < 4; ++q) {
    ASSERT_EQ(plan.query_entry_indptr[q + 1] - plan.query_entry_indptr[q], 3);
    for (int32_t i = plan.query_entry_indptr[q]; i < plan.query_entry_indptr[q + 1]; ++i) {
      const int32_t e = plan.query_entries[i];
      int32_t s = 0;
      while (plan.segment_entry_indptr[s + 1] <= e) ++s;
      EXPECT_EQ(plan.entry_kv_limit[e], plan.segment_length[s]);  // decode: full
    }
  }
}

TEST_F(PlanTest, FlattenedNodesGetOneSegmentPerRow) {
  attention::AttentionPlan plan;
  std::vector<NodeId> nodes;
  const NodeId prompt = NodeOf(prompt_);
  int calls = 0;
  PlanOptions options;
  options.flatten = [&](const NodeShareInfo& info) {
    ++calls;
    EXPECT_GE(info.num_readers, 2);
    return info.node == prompt;
  };
  BANYAN_ASSERT_OK(tree_->BuildDecodePlan(samples_, options, &plan, &nodes));
  EXPECT_EQ(plan.Validate(), "");
  EXPECT_EQ(calls, 3);  // prompt and both problems have 2+ readers
  ASSERT_EQ(plan.num_segments(), 4 + 2 + 4);
  for (int s = 0; s < 4; ++s) {
    EXPECT_EQ(nodes[s], prompt);
    EXPECT_EQ(plan.segment_entry_indptr[s + 1] - plan.segment_entry_indptr[s], 1);
    EXPECT_EQ(plan.entry_query[plan.segment_entry_indptr[s]], s);
  }
  EXPECT_EQ(plan.num_entries(), 12);  // the same entries as unflattened
}

TEST_F(PlanTest, PrefillIsCausalInTheNodeAndFullAbove) {
  auto ext = tree_->Append(samples_[0], Range(50, 55));  // in place: the sample's node grows to 8
  ASSERT_TRUE(ext.ok());
  attention::AttentionPlan plan;
  std::vector<NodeId> nodes;
  BANYAN_ASSERT_OK(tree_->BuildPrefillPlan({PrefillRows{samples_[0], 5}}, {}, &plan, &nodes));
  EXPECT_EQ(plan.Validate(), "");
  ASSERT_EQ(plan.num_queries, 5);
  // Every row reads prompt (10), problem (5) and sample (8), whose K/V follow
  // each other in the pages (each claimed the rest of its parent's last
  // page): one segment of 23 tokens.
  ASSERT_EQ(plan.num_segments(), 1);
  EXPECT_EQ(plan.segment_length[0], 23);
  EXPECT_EQ(nodes[0], NodeOf(prompt_));
  for (int32_t q = 0; q < 5; ++q) {
    ASSERT_EQ(plan.query_entry_indptr[q + 1] - plan.query_entry_indptr[q], 1);
    EXPECT_EQ(plan.entry_kv_limit[plan.query_entries[plan.query_entry_indptr[q]]], 10 + 5 + 3 + q + 1);  // causal
  }
  // New tokens spanning two nodes: the first row ends inside the problem
  // node; the second sample copied the problem's last page (the first sample
  // had claimed its rest), so its node is a segment of its own.
  BANYAN_ASSERT_OK(tree_->BuildPrefillPlan({PrefillRows{samples_[1], 4}}, {}, &plan, &nodes));
  EXPECT_EQ(plan.Validate(), "");
  ASSERT_EQ(plan.num_queries, 4);
  ASSERT_EQ(plan.num_segments(), 2);
  EXPECT_EQ(plan.segment_length[0], 15);  // prompt + problem
  EXPECT_EQ(nodes[1], NodeOf(samples_[1]));
  EXPECT_EQ(plan.query_entry_indptr[1] - plan.query_entry_indptr[0], 1);
  EXPECT_EQ(plan.entry_kv_limit[plan.query_entries[0]], 15);
  for (int32_t q = 1; q < 4; ++q) {
    ASSERT_EQ(plan.query_entry_indptr[q + 1] - plan.query_entry_indptr[q], 2);
    EXPECT_EQ(plan.entry_kv_limit[plan.query_entries[plan.query_entry_indptr[q]]], 15);
    EXPECT_EQ(plan.entry_kv_limit[plan.query_entries[plan.query_entry_indptr[q] + 1]], q);
  }
}

// Two branches decoding the same tokens in step make one one-token node per
// step (each step the first extends the shared node by a child, the second
// follows it). The plan reads each such chain as one segment: its nodes have
// the same readers and their K/V follow each other in the pages.
TEST_F(PlanTest, ChainsOfNodesWithTheSameReadersAreOneSegment) {
  std::vector<Branch> twins;
  for (int i = 0; i < 2; ++i) {
    auto b = tree_->Fork(samples_[0]);
    ASSERT_TRUE(b.ok());
    twins.push_back(*b);
  }
  BANYAN_ASSERT_OK(tree_->Release(samples_[0]));
  for (int32_t step = 0; step < 9; ++step) {
    for (const Branch& b : twins) ASSERT_TRUE(tree_->Append(b, {500 + step}).ok());
  }
  BANYAN_ASSERT_OK_AND_ASSIGN(NodeInfo leaf, tree_->GetNode(NodeOf(twins[0])));
  EXPECT_EQ(leaf.length, 1);  // one node per step
  EXPECT_EQ(leaf.prefix_length, 26);
  attention::AttentionPlan plan;
  std::vector<NodeId> nodes;
  BANYAN_ASSERT_OK(tree_->BuildDecodePlan(twins, {}, &plan, &nodes));
  EXPECT_EQ(plan.Validate(), "");
  // prompt (10) + problem (5) + sample (3) + 9 one-token nodes, all read by both rows.
  ASSERT_EQ(plan.num_segments(), 1);
  EXPECT_EQ(plan.segment_length[0], 27);
  EXPECT_EQ(plan.segment_page_indptr[1], (27 + 3) / 4);
  for (int32_t q = 0; q < 2; ++q) {
    ASSERT_EQ(plan.query_entry_indptr[q + 1] - plan.query_entry_indptr[q], 1);
    EXPECT_EQ(plan.entry_kv_limit[plan.query_entries[plan.query_entry_indptr[q]]], 27);
  }
  // The pages are the path's, in order.
  BANYAN_ASSERT_OK_AND_ASSIGN(std::vector<KvSlot> slots, tree_->Slots(twins[0]));
  ASSERT_EQ(slots.size(), 27u);
  for (int32_t t = 0; t < 27; ++t) {
    const int32_t pos = plan.segment_first_slot[0] + t;
    EXPECT_EQ(plan.page_indices[pos / 4], slots[t].page) << t;
    EXPECT_EQ(pos % 4, slots[t].slot) << t;
  }
  // With another reader of the chain's start (the second sample), the chain
  // splits where the readers differ; flattening the shared nodes keeps them
  // out of any chain.
  std::vector<Branch> three = twins;
  three.push_back(samples_[1]);
  BANYAN_ASSERT_OK(tree_->BuildDecodePlan(three, {}, &plan, &nodes));
  EXPECT_EQ(plan.Validate(), "");
  EXPECT_EQ(plan.num_segments(), 3);  // prompt + problem (3 readers), the twins' chain, the second sample
  PlanOptions flat;
  flat.flatten = [](const NodeShareInfo&) { return true; };
  BANYAN_ASSERT_OK(tree_->BuildDecodePlan(twins, flat, &plan, &nodes));
  EXPECT_EQ(plan.Validate(), "");
  EXPECT_EQ(plan.num_segments(), 2 * (3 + 9));  // one per node and row
  EXPECT_EQ(plan.num_entries(), plan.num_segments());
}

TEST_F(PlanTest, Errors) {
  attention::AttentionPlan plan;
  auto empty = tree_->Insert(ns_, {});
  ASSERT_TRUE(empty.ok());
  EXPECT_THAT(tree_->BuildDecodePlan({empty->branch}, {}, &plan),
              StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_THAT(tree_->BuildPrefillPlan({PrefillRows{samples_[0], 0}}, {}, &plan),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(tree_->BuildPrefillPlan({PrefillRows{samples_[0], 19}}, {}, &plan),
              StatusIs(absl::StatusCode::kInvalidArgument));
  BANYAN_ASSERT_OK(tree_->Release(samples_[3]));
  EXPECT_THAT(tree_->BuildDecodePlan(samples_, {}, &plan), StatusIs(absl::StatusCode::kNotFound));
  // An empty batch is a valid, empty plan.
  BANYAN_ASSERT_OK(tree_->BuildDecodePlan({}, {}, &plan));
  EXPECT_EQ(plan.Validate(), "");
  EXPECT_EQ(plan.num_queries, 0);
}

}  // namespace
}  // namespace banyan::kv_tree

#include "kv_tree/kv_tree.h"

#include <numeric>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "sdk/base/rng.h"
#include "sdk/base/status_testing.h"

namespace banyan::kv_tree {
namespace {

using ::banyan::testing::StatusIs;
using ::testing::ElementsAreArray;
using ::testing::HasSubstr;

std::vector<int32_t> Range(int32_t begin, int32_t end) {
  std::vector<int32_t> v(end - begin);
  std::iota(v.begin(), v.end(), begin);
  return v;
}

std::vector<int32_t> Concat(std::vector<int32_t> a, const std::vector<int32_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

class KvTreeTest : public ::testing::Test {
 protected:
  void Make(int32_t page_size, int32_t pages, EvictionScoreFn score = nullptr) {
    KvPoolConfig config;
    config.dtype = DType::kF32;
    config.num_layers = 2;
    config.num_kv_heads = 2;
    config.head_dim = 3;
    config.page_size = page_size;
    config.byte_budget = static_cast<size_t>(pages) * 2 * 2 * 2 * 3 * page_size * 4;
    auto storage = HostKvStorage::Create(config);
    ASSERT_TRUE(storage.ok()) << storage.status();
    auto tree = KvTree::Create(std::move(storage).value(), std::move(score));
    ASSERT_TRUE(tree.ok()) << tree.status();
    tree_ = std::move(tree).value();
    ASSERT_EQ(tree_->Stats().pages_total, pages);
  }
  void Check() { BANYAN_EXPECT_OK(tree_->CheckInvariants()); }
  // Appends `steps` tokens to every leaf, one leaf after the other at each step (leaves decoding side by side:
  // each takes its next page at the same steps as the others); returns each leaf's written slots in order.
  std::vector<std::vector<KvSlot>> DecodeSideBySide(const std::vector<Branch>& leaves, int32_t steps) {
    std::vector<std::vector<KvSlot>> written(leaves.size());
    for (int32_t step = 0; step < steps; ++step) {
      for (size_t i = 0; i < leaves.size(); ++i) {
        absl::StatusOr<Extension> e = tree_->Append(leaves[i], {1000 + static_cast<int32_t>(i) * 1000 + step});
        EXPECT_TRUE(e.ok()) << e.status();
        if (e.ok()) written[i].insert(written[i].end(), e->write_slots.begin(), e->write_slots.end());
      }
    }
    return written;
  }

  const KvNamespace ns_{"llama", ""};
  std::unique_ptr<KvTree> tree_;
};

TEST(KvStorageTest, LayoutFromBudget) {
  KvPoolConfig config{DType::kBf16, 4, 2, 64, 16, 0};
  config.byte_budget = 10 * 4 * 2 * 2 * 64 * 16 * 2 + 5;
  BANYAN_ASSERT_OK_AND_ASSIGN(attention::KvLayout layout, MakeKvLayout(config));
  EXPECT_EQ(layout.num_pages, 10);
  EXPECT_EQ(layout.dtype_bytes, 2);
  config.byte_budget = 100;
  EXPECT_THAT(MakeKvLayout(config), StatusIs(absl::StatusCode::kResourceExhausted));
  config.head_dim = 0;
  EXPECT_THAT(MakeKvLayout(config), StatusIs(absl::StatusCode::kInvalidArgument));
  config.head_dim = 64;
  config.page_size = 0;
  EXPECT_THAT(MakeKvLayout(config), StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(KvStorageTest, CopyPageCopiesLeadingSlotsOfEveryPlane) {
  for (DType dtype : {DType::kF32, DType::kBf16, DType::kF16}) {
    KvPoolConfig config{dtype, 3, 2, 5, 4, 0};
    config.byte_budget = 6 * size_t{3} * 2 * 2 * 5 * 4 * DTypeSize(dtype);
    BANYAN_ASSERT_OK_AND_ASSIGN(auto storage, HostKvStorage::Create(config));
    const attention::KvLayout& l = storage->layout();
    uint8_t* bytes = static_cast<uint8_t*>(storage->data());
    Rng rng(7);
    for (size_t i = 0; i < l.TotalBytes(); ++i) bytes[i] = static_cast<uint8_t>(rng.Next());
    std::vector<uint8_t> before(bytes, bytes + l.TotalBytes());
    BANYAN_ASSERT_OK(storage->CopyPage(1, 4, 3));
    for (int32_t layer = 0; layer < 3; ++layer) {
      for (int32_t kv = 0; kv < 2; ++kv) {
        for (int32_t h = 0; h < 2; ++h) {
          for (int32_t slot = 0; slot < 4; ++slot) {
            const int64_t dst = l.Offset(layer, kv, 4, h, slot) * l.dtype_bytes;
            const int64_t src = (slot < 3 ? l.Offset(layer, kv, 1, h, slot) : l.Offset(layer, kv, 4, h, slot)) *
                                l.dtype_bytes;
            for (int64_t b = 0; b < l.head_dim * l.dtype_bytes; ++b) {
              ASSERT_EQ(bytes[dst + b], before[src + b]) << layer << kv << h << slot;
            }
          }
        }
      }
    }
    EXPECT_THAT(storage->CopyPage(1, 1, 2), StatusIs(absl::StatusCode::kInvalidArgument));
    EXPECT_THAT(storage->CopyPage(1, 6, 2), StatusIs(absl::StatusCode::kInvalidArgument));
    EXPECT_THAT(storage->CopyPage(1, 2, 5), StatusIs(absl::StatusCode::kInvalidArgument));
  }
}

TEST(PagePoolTest, AllocateRefAndFree) {
  PagePool pool(3);
  const int32_t a = pool.Allocate(), b = pool.Allocate(), c = pool.Allocate();
  EXPECT_EQ(pool.Allocate(), -1);
  EXPECT_EQ(pool.num_free(), 0);
  pool.AddRef(b);
  pool.Unref(b);
  EXPECT_EQ(pool.num_free(), 0);
  pool.Unref(b);
  EXPECT_EQ(pool.num_free(), 1);
  EXPECT_EQ(pool.Allocate(), b);
  pool.set_filled(a, 2);
  EXPECT_TRUE(pool.CanClaim(a, 1));  // sole holder may rewind
  pool.AddRef(a);
  EXPECT_FALSE(pool.CanClaim(a, 1));
  EXPECT_TRUE(pool.CanClaim(a, 2));
  EXPECT_EQ(pool.Check({2, 1, 1}), "");
  EXPECT_NE(pool.Check({1, 1, 1}), "");
  (void)c;
}

TEST(PagePoolTest, PlacesPagesInRunsOfConsecutiveIds) {
  PagePool pool(200, /*run_pages=*/4);
  EXPECT_EQ(pool.run_pages(), 4);
  for (int32_t p = 0; p < 8; ++p) EXPECT_EQ(pool.Allocate(), p);  // a fresh pool: 0, 1, 2, ...
  // Free 2, 5, 6, 7; every page from 8 on is free: after 4 comes 5 (its neighbour), after 0 the lowest free
  // page (1 is taken), a new run at the lowest aligned free quad, whatever `after` says.
  pool.Unref(2);
  pool.Unref(5);
  pool.Unref(6);
  pool.Unref(7);
  EXPECT_EQ(pool.Allocate(/*after=*/4), 5);
  EXPECT_EQ(pool.Allocate(/*after=*/0), 2);
  EXPECT_EQ(pool.Allocate(/*after=*/-1, /*start_run=*/true), 8);  // 6, 7 are free but not an aligned quad
  EXPECT_EQ(pool.Allocate(/*after=*/8), 9);                       // the run goes on
  EXPECT_EQ(pool.Allocate(/*after=*/9, /*start_run=*/true), 12);  // a new run: the next free quad, not 10
  EXPECT_EQ(pool.Allocate(/*after=*/199), 6);                     // past the end: the lowest free page
  std::vector<int32_t> refs(200, 0);
  for (int32_t p = 0; p < 10; ++p) refs[p] = p == 7 ? 0 : 1;
  refs[12] = 1;
  EXPECT_EQ(pool.Check(refs), "");
  // Take every page, give back 150 and the quad 180-183: one run left, then none.
  std::vector<int32_t> taken;
  while (pool.num_free() > 0) taken.push_back(pool.Allocate());
  for (int32_t p : taken) {
    if (p == 150 || (p >= 180 && p < 184)) pool.Unref(p);
  }
  for (int32_t p = 0; p < 200; ++p) refs[p] = p == 150 || (p >= 180 && p < 184) ? 0 : 1;
  ASSERT_EQ(pool.Check(refs), "");
  EXPECT_EQ(pool.Allocate(-1, true), 180);
  EXPECT_EQ(pool.Allocate(-1, true), 150);  // no run left: the lowest free page
  EXPECT_EQ(pool.Allocate(180), 181);
  EXPECT_EQ(pool.Allocate(), 182);
  EXPECT_EQ(pool.Allocate(), 183);
  EXPECT_EQ(pool.Allocate(), -1);
  PagePool plain(10, /*run_pages=*/3);  // not a power of two: no runs
  EXPECT_EQ(plain.run_pages(), 1);
}

TEST(PagePoolTest, RandomAllocationsFollowThePlacementRule) {
  Rng rng(99);
  for (int32_t size : {1, 63, 64, 65, 300, 5000}) {
    for (int32_t run : {1, 2, 4, 8, 64}) {
      PagePool pool(size, run);
      std::vector<int32_t> refs(size, 0);
      for (int step = 0; step < 3000; ++step) {
        if (rng.UniformInt(2) == 0 && pool.num_used() > 0) {  // free a random used page
          int32_t p = static_cast<int32_t>(rng.UniformInt(size));
          while (refs[p] == 0) p = (p + 1) % size;
          pool.Unref(p);
          --refs[p];
          continue;
        }
        const int32_t after = static_cast<int32_t>(rng.UniformInt(size + 1)) - 1;
        const bool start_run = rng.UniformInt(2) == 0;
        // The rule, by brute force over a copy of the free set.
        int32_t want = -1;
        if (pool.num_free() > 0) {
          for (int32_t p = 0; want < 0 && start_run && run >= 2 && p + run <= size; p += run) {
            bool all = true;
            for (int32_t q = p; q < p + run; ++q) all = all && refs[q] == 0;
            if (all) want = p;
          }
          if (want < 0 && after >= 0 && after + 1 < size && refs[after + 1] == 0) want = after + 1;
          for (int32_t p = 0; want < 0 && p < size; ++p) {
            if (refs[p] == 0) want = p;
          }
        }
        const int32_t got = pool.Allocate(after, start_run);
        ASSERT_EQ(got, want) << "size " << size << " run " << run << " step " << step << " after " << after;
        if (got >= 0) ++refs[got];
        if (step % 500 == 0) ASSERT_EQ(pool.Check(refs), "") << "size " << size << " run " << run;
      }
      EXPECT_EQ(pool.Check(refs), "");
    }
  }
}

// Branches that decoded side by side hold interleaved pages; once they are evicted, a new long prompt still
// gets one run of consecutive page ids per 64-token tile (the TMA kernel's one-box tile, PagePool::Allocate),
// where a free-list pool would hand the freed pages back in the order they were freed.
TEST_F(KvTreeTest, LongPromptsGetRunsOfConsecutivePagesAfterChurn) {
  Make(16, 64);
  BANYAN_ASSERT_OK_AND_ASSIGN(Extension root, tree_->Insert(ns_, Range(0, 40)));
  BANYAN_ASSERT_OK_AND_ASSIGN(std::vector<Branch> leaves, tree_->Fork(root.branch, 8));
  const std::vector<std::vector<KvSlot>> written = DecodeSideBySide(leaves, 60);
  // The leaves' first pages interleave (page 1 of each leaf, then page 2 of each: 16 positions apart).
  for (const std::vector<KvSlot>& slots : written) {
    ASSERT_EQ(slots.size(), 60u);
    EXPECT_NE(slots[24].page, slots[8].page + 1);
  }
  for (const Branch& b : leaves) BANYAN_ASSERT_OK(tree_->Release(b));
  BANYAN_ASSERT_OK(tree_->Release(root.branch));
  // 60 of the 64 pages: the cached leaves are all evicted and their interleaved pages reused.
  const int32_t free_before = tree_->Stats().pages_free;
  BANYAN_ASSERT_OK_AND_ASSIGN(Extension prompt, tree_->Insert(ns_, Range(5000, 5960)));
  ASSERT_LT(free_before, 30);
  ASSERT_EQ(prompt.write_slots.size(), 960u);
  for (int32_t tile = 0; tile < 15; ++tile) {
    const int32_t first = prompt.write_slots[tile * 64].page;
    for (int32_t k = 1; k < 4; ++k) EXPECT_EQ(prompt.write_slots[tile * 64 + k * 16].page, first + k) << tile;
  }
  Check();
}

// Leaves that decode side by side (one token each per step, every leaf taking its next page at the same step)
// still get one run of consecutive page ids per 64 positions of their node, after their first group.
TEST_F(KvTreeTest, LeavesDecodingSideBySideGetRunsOfConsecutivePages) {
  Make(16, 256);
  BANYAN_ASSERT_OK_AND_ASSIGN(Extension root, tree_->Insert(ns_, Range(0, 40)));
  BANYAN_ASSERT_OK_AND_ASSIGN(std::vector<Branch> leaves, tree_->Fork(root.branch, 8));
  const std::vector<std::vector<KvSlot>> written = DecodeSideBySide(leaves, 260);
  // Leaf nodes start at position 40 % 16 = 8 of their first page (the shared boundary page, or a copy of it);
  // node position p = 8 + token. Groups of 64 positions from position 64 on: [64 g, 64 g + 64), g = 1, 2, 3.
  for (size_t i = 0; i < leaves.size(); ++i) {
    for (int32_t g = 1; g <= 3; ++g) {
      const int32_t first = written[i][64 * g - 8].page;
      for (int32_t k = 1; k < 4; ++k) EXPECT_EQ(written[i][64 * g - 8 + 16 * k].page, first + k) << i << " " << g;
    }
  }
  Check();
}

TEST_F(KvTreeTest, InsertReusesCachedPrefixAndSplits) {
  Make(4, 32);
  BANYAN_ASSERT_OK_AND_ASSIGN(Extension a, tree_->Insert(ns_, Range(0, 10)));
  EXPECT_EQ(a.reused_tokens, 0);
  EXPECT_EQ(a.write_slots.size(), 10u);
  BANYAN_ASSERT_OK(tree_->Release(a.branch));
  Check();
  // Same prefix again plus more: the 10 cached tokens are reused.
  BANYAN_ASSERT_OK_AND_ASSIGN(Extension b, tree_->Insert(ns_, Range(0, 13)));
  EXPECT_EQ(b.reused_tokens, 10);
  EXPECT_EQ(b.write_slots.size(), 3u);
  Check();
  // A partial match splits the node; the lower part keeps its id.
  BANYAN_ASSERT_OK_AND_ASSIGN(NodeId b_node, tree_->NodeOf(b.branch));
  BANYAN_ASSERT_OK_AND_ASSIGN(Extension c, tree_->Insert(ns_, Concat(Range(0, 6), {99, 98})));
  EXPECT_EQ(c.reused_tokens, 6);
  EXPECT_EQ(c.write_slots.size(), 2u);
  Check();
  BANYAN_ASSERT_OK_AND_ASSIGN(std::vector<int32_t> b_tokens, tree_->Tokens(b.branch));
  EXPECT_THAT(b_tokens, ElementsAreArray(Range(0, 13)));
  BANYAN_ASSERT_OK_AND_ASSIGN(std::vector<int32_t> c_tokens, tree_->Tokens(c.branch));
  EXPECT_THAT(c_tokens, ElementsAreArray(Concat(Range(0, 6), {99, 98})));
  // Prefix slots are shared, not copied.
  BANYAN_ASSERT_OK_AND_ASSIGN(std::vector<KvSlot> b_slots, tree_->Slots(b.branch));
  BANYAN_ASSERT_OK_AND_ASSIGN(std::vector<KvSlot> c_slots, tree_->Slots(c.branch));
  for (int i = 0; i < 6; ++i) EXPECT_EQ(b_slots[i], c_slots[i]) << i;
  // The split: b's node now starts at token 6, under a new upper node.
  BANYAN_ASSERT_OK_AND_ASSIGN(NodeInfo lower, tree_->GetNode(b_node));
  EXPECT_EQ(lower.prefix_length, 6);
  EXPECT_EQ(lower.length, 7);
  BANYAN_ASSERT_OK_AND_ASSIGN(NodeInfo upper, tree_->GetNode(lower.parent));
  EXPECT_EQ(upper.length, 6);
  EXPECT_EQ(upper.num_children, 2);
  // c's first new token lands in a copy of the boundary page (slot 6 % 4 = 2
  // is taken by b's node in the shared page).
  EXPECT_EQ(c.copied_pages, 1);
  EXPECT_EQ(c.write_slots[0].slot, 2);
  EXPECT_NE(c.write_slots[0].page, b_slots[6].page);
}

TEST_F(KvTreeTest, DecodingAlongACachedContinuationDoesNotSplitPerToken) {
  Make(4, 64);
  BANYAN_ASSERT_OK_AND_ASSIGN(Extension a, tree_->Insert(ns_, Range(0, 8)));
  BANYAN_ASSERT_OK_AND_ASSIGN(std::vector<Branch> kids, tree_->Fork(a.branch, 2));
  for (int32_t t = 50; t < 60; ++t) BANYAN_ASSERT_OK(tree_->Append(kids[0], {t}).status());  // one token per step
  for (Branch k : kids) BANYAN_ASSERT_OK(tree_->Release(k));
  const int64_t nodes_before = tree_->Stats().nodes;
  const int64_t evicted_before = tree_->Stats().evicted_nodes;
  // The same decode again from a fresh fork: the cached [50, 60) node is
  // dropped at the first step and the new branch grows one node in place.
  BANYAN_ASSERT_OK_AND_ASSIGN(std::vector<Branch> again, tree_->Fork(a.branch, 2));
  for (int32_t t = 50; t < 60; ++t) {
    BANYAN_ASSERT_OK_AND_ASSIGN(Extension e, tree_->Append(again[0], {t}));
    EXPECT_EQ(e.reused_tokens, 0) << t;
    Check();
  }
  EXPECT_EQ(tree_->Stats().nodes, nodes_before);
  EXPECT_EQ(tree_->Stats().evicted_nodes, evicted_before + 1);
  BANYAN_ASSERT_OK_AND_ASSIGN(std::vector<int32_t> tokens, tree_->Tokens(again[0]));
  EXPECT_THAT(tokens, ElementsAreArray(Concat(Range(0, 8), Range(50, 60))));
  // A one-token cached node is still reused, as is a cached node a longer
  // append matches.
  BANYAN_ASSERT_OK(tree_->Append(again[1], {70}).status());
  BANYAN_ASSERT_OK(tree_->Release(again[1]));
  BANYAN_ASSERT_OK_AND_ASSIGN(Branch third, tree_->Fork(a.branch));
  BANYAN_ASSERT_OK_AND_ASSIGN(Extension e70, tree_->Append(third, {70}));
  EXPECT_EQ(e70.reused_tokens, 1);
  BANYAN_ASSERT_OK_AND_ASSIGN(Branch fourth, tree_->Fork(a.branch));
  BANYAN_ASSERT_OK_AND_ASSIGN(Extension e5, tree_->Append(fourth, {50, 51, 52}));
  EXPECT_EQ(e5.reused_tokens, 3);
  Check();
}

TEST_F(KvTreeTest, NamespacesDoNotShare) {
  Make(4, 32);
  BANYAN_ASSERT_OK_AND_ASSIGN(Extension a, tree_->Insert(ns_, Range(0, 8)));
  BANYAN_ASSERT_OK_AND_ASSIGN(Extension b, tree_->Insert(KvNamespace{"llama", "lora-1"}, Range(0, 8)));
  BANYAN_ASSERT_OK_AND_ASSIGN(Extension c, tree_->Insert(ns_, Range(0, 8)));
  EXPECT_EQ(b.reused_tokens, 0);
  EXPECT_EQ(c.reused_tokens, 8);
  EXPECT_EQ(tree_->Snapshot().namespaces.size(), 2u);
  Check();
  (void)a;
}

TEST_F(KvTreeTest, SoleUserExtendsInPlaceAndForkCreatesChildren) {
  Make(4, 32);
  BANYAN_ASSERT_OK_AND_ASSIGN(Extension a, tree_->Insert(ns_, Range(0, 5)));
  BANYAN_ASSERT_OK_AND_ASSIGN(NodeId node, tree_->NodeOf(a.branch));
  BANYAN_ASSERT_OK_AND_ASSIGN(Extension more, tree_->Append(a.branch, {50, 51}));
  EXPECT_EQ(more.branch, a.branch);
  BANYAN_ASSERT_OK_AND_ASSIGN(NodeId same, tree_->NodeOf(a.branch));
  EXPECT_EQ(same, node);  // in place
  EXPECT_EQ(a.node, node);
  EXPECT_EQ(more.node, same);
  EXPECT_EQ(more.write_slots[0].page, a.write_slots[4].page);  // continues the partly filled page
  EXPECT_EQ(more.write_slots[0].slot, 1);
  BANYAN_ASSERT_OK_AND_ASSIGN(std::vector<Branch> kids, tree_->Fork(a.branch, 3));
  ASSERT_EQ(kids.size(), 3u);
  EXPECT_EQ(tree_->Stats().branches, 4);
  // First child claims the free slots of the shared page; the second copies it.
  BANYAN_ASSERT_OK_AND_ASSIGN(Extension k0, tree_->Append(kids[0], {7}));
  BANYAN_ASSERT_OK_AND_ASSIGN(Extension k1, tree_->Append(kids[1], {8}));
  EXPECT_EQ(k0.copied_pages, 0);
  EXPECT_EQ(k0.write_slots[0].page, more.write_slots[1].page);
  EXPECT_EQ(k0.write_slots[0].slot, 3);
  EXPECT_EQ(k1.copied_pages, 1);
  EXPECT_NE(k1.write_slots[0].page, more.write_slots[1].page);
  EXPECT_EQ(k1.write_slots[0].slot, 3);  // same slot, in the copy
  // A third fork appending the same token as kids[0] reuses its node.
  BANYAN_ASSERT_OK_AND_ASSIGN(Extension k2, tree_->Append(kids[2], {7}));
  EXPECT_EQ(k2.reused_tokens, 1);
  EXPECT_TRUE(k2.write_slots.empty());
  BANYAN_ASSERT_OK_AND_ASSIGN(NodeId n0, tree_->NodeOf(kids[0]));
  BANYAN_ASSERT_OK_AND_ASSIGN(NodeId n2, tree_->NodeOf(kids[2]));
  EXPECT_EQ(n0, n2);
  // Each extension names the node its branch ended at: a new child, a reused one.
  BANYAN_ASSERT_OK_AND_ASSIGN(NodeId n1, tree_->NodeOf(kids[1]));
  EXPECT_EQ(k0.node, n0);
  EXPECT_EQ(k1.node, n1);
  EXPECT_EQ(k2.node, n2);
  EXPECT_NE(n1, n0);
  Check();
}

TEST_F(KvTreeTest, CopyOnWriteCopiesThePartlyFilledPage) {
  Make(4, 16);
  BANYAN_ASSERT_OK_AND_ASSIGN(Extension a, tree_->Insert(ns_, Range(0, 6)));  // 2 tokens in page 2
  // Mark the K/V of the shared partial page.
  const attention::KvLayout& l = tree_->storage().layout();
  float* kv = static_cast<float*>(tree_->storage().data());
  Rng rng(3);
  for (const KvSlot& s : a.write_slots) {
    for (int32_t layer = 0; layer < l.num_layers; ++layer) {
      for (int32_t k = 0; k < 2; ++k) {
        for (int32_t h = 0; h < l.num_kv_heads; ++h) {
          for (int32_t d = 0; d < l.head_dim; ++d) kv[l.Offset(layer, k, s.page, h, s.slot) + d] = rng.Normal();
        }
      }
    }
  }
  BANYAN_ASSERT_OK_AND_ASSIGN(Branch f1, tree_->Fork(a.branch));
  BANYAN_ASSERT_OK_AND_ASSIGN(Branch f2, tree_->Fork(a.branch));
  BANYAN_ASSERT_OK_AND_ASSIGN(Extension e1, tree_->Append(f1, {100, 101}));
  BANYAN_ASSERT_OK_AND_ASSIGN(Extension e2, tree_->Append(f2, {200}));
  ASSERT_EQ(e2.copied_pages, 1);
  const KvSlot shared = a.write_slots[5];
  const KvSlot copy = e2.write_slots[0];
  EXPECT_EQ(e1.write_slots[0].page, shared.page);
  EXPECT_EQ(copy.slot, 2);
  for (int32_t slot = 0; slot < 2; ++slot) {
    for (int32_t layer = 0; layer < l.num_layers; ++layer) {
      for (int32_t k = 0; k < 2; ++k) {
        for (int32_t h = 0; h < l.num_kv_heads; ++h) {
          for (int32_t d = 0; d < l.head_dim; ++d) {
            EXPECT_EQ(kv[l.Offset(layer, k, copy.page, h, slot) + d], kv[l.Offset(layer, k, shared.page, h, slot) + d]);
          }
        }
      }
    }
  }
  EXPECT_EQ(tree_->Stats().copied_pages, 1);
  Check();
}

TEST_F(KvTreeTest, TruncateShrinksOrSplits) {
  Make(4, 16);
  BANYAN_ASSERT_OK_AND_ASSIGN(Extension a, tree_->Insert(ns_, Range(0, 11)));  // 3 pages
  const int32_t free_before = tree_->Stats().pages_free;
  BANYAN_ASSERT_OK(tree_->Truncate(a.branch, 5));  // alone: shrink in place
  EXPECT_EQ(tree_->Stats().pages_free, free_before + 1);
  BANYAN_ASSERT_OK_AND_ASSIGN(int64_t len, tree_->Length(a.branch));
  EXPECT_EQ(len, 5);
  Check();
  BANYAN_ASSERT_OK_AND_ASSIGN(Branch b, tree_->Fork(a.branch));
  BANYAN_ASSERT_OK(tree_->Truncate(b, 3));  // shared: split, a keeps its node
  BANYAN_ASSERT_OK_AND_ASSIGN(std::vector<int32_t> at, tree_->Tokens(a.branch));
  BANYAN_ASSERT_OK_AND_ASSIGN(std::vector<int32_t> bt, tree_->Tokens(b));
  EXPECT_THAT(at, ElementsAreArray(Range(0, 5)));
  EXPECT_THAT(bt, ElementsAreArray(Range(0, 3)));
  BANYAN_ASSERT_OK_AND_ASSIGN(int32_t a_last, tree_->LastToken(a.branch));  // a's own node
  BANYAN_ASSERT_OK_AND_ASSIGN(int32_t b_last, tree_->LastToken(b));         // b's node after the split
  EXPECT_EQ(a_last, at.back());
  EXPECT_EQ(b_last, bt.back());
  Check();
  BANYAN_ASSERT_OK(tree_->Truncate(b, 0));
  BANYAN_ASSERT_OK_AND_ASSIGN(len, tree_->Length(b));
  EXPECT_EQ(len, 0);
  EXPECT_THAT(tree_->LastToken(b), StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_THAT(tree_->Truncate(b, 1), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(tree_->Truncate(a.branch, -1), StatusIs(absl::StatusCode::kInvalidArgument));
  // Appending after truncation rewrites the slot the branch alone had used.
  BANYAN_ASSERT_OK_AND_ASSIGN(Extension again, tree_->Append(a.branch, {42}));
  EXPECT_EQ(again.write_slots[0].slot, 1);
  Check();
}

TEST_F(KvTreeTest, StaleAndMalformedHandles) {
  Make(4, 16);
  BANYAN_ASSERT_OK_AND_ASSIGN(Extension a, tree_->Insert(ns_, Range(0, 3)));
  BANYAN_ASSERT_OK(tree_->Release(a.branch));
  EXPECT_THAT(tree_->Release(a.branch), StatusIs(absl::StatusCode::kNotFound, HasSubstr("stale")));
  EXPECT_THAT(tree_->Append(a.branch, {1}), StatusIs(absl::StatusCode::kNotFound));
  EXPECT_THAT(tree_->Fork(a.branch, 2), StatusIs(absl::StatusCode::kNotFound));
  EXPECT_THAT(tree_->Tokens(a.branch), StatusIs(absl::StatusCode::kNotFound));
  EXPECT_THAT(tree_->LastToken(a.branch), StatusIs(absl::StatusCode::kNotFound));
  EXPECT_THAT(tree_->Release(Branch{}), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(tree_->Release(Branch{77, 1}), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(tree_->GetNode(NodeId{}), StatusIs(absl::StatusCode::kInvalidArgument));
  BANYAN_ASSERT_OK_AND_ASSIGN(Extension b, tree_->Insert(ns_, Range(0, 3)));
  EXPECT_THAT(tree_->Append(b.branch, {1, -5}), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(tree_->Fork(b.branch, 0), StatusIs(absl::StatusCode::kInvalidArgument));
  // The slot is reused with a new generation: the old handle stays stale.
  EXPECT_EQ(b.branch.index, a.branch.index);
  EXPECT_THAT(tree_->Append(a.branch, {1}), StatusIs(absl::StatusCode::kNotFound));
  Check();
}

TEST_F(KvTreeTest, PinsAreReceipts) {
  Make(4, 4);
  BANYAN_ASSERT_OK_AND_ASSIGN(Extension a, tree_->Insert(ns_, Range(0, 8)));  // 2 pages
  BANYAN_ASSERT_OK_AND_ASSIGN(NodeId node, tree_->NodeOf(a.branch));
  BANYAN_ASSERT_OK_AND_ASSIGN(KvPin pin, tree_->Pin(node));
  EXPECT_TRUE(pin.held());
  BANYAN_ASSERT_OK(tree_->Release(a.branch));
  // The pinned node survives pressure: only 2 pages are free.
  EXPECT_THAT(tree_->Insert(ns_, Range(100, 112)), StatusIs(absl::StatusCode::kResourceExhausted));
  BANYAN_ASSERT_OK(tree_->GetNode(node).status());
  KvPin moved = std::move(pin);
  EXPECT_FALSE(pin.held());
  EXPECT_THAT(pin.Release(), StatusIs(absl::StatusCode::kInvalidArgument));
  BANYAN_ASSERT_OK(moved.Release());
  EXPECT_THAT(moved.Release(), StatusIs(absl::StatusCode::kInvalidArgument));
  Check();
  {
    BANYAN_ASSERT_OK_AND_ASSIGN(KvPin scoped, tree_->Pin(node));
    EXPECT_EQ(tree_->Stats().pins, 1);
  }
  EXPECT_EQ(tree_->Stats().pins, 0);
  // Unpinned and unreferenced: evicted under pressure, the id goes stale.
  BANYAN_ASSERT_OK_AND_ASSIGN(Extension big, tree_->Insert(ns_, Range(100, 112)));
  EXPECT_THAT(tree_->GetNode(node), StatusIs(absl::StatusCode::kNotFound));
  EXPECT_THAT(tree_->Pin(node), StatusIs(absl::StatusCode::kNotFound));
  Check();
  (void)big;
}

TEST_F(KvTreeTest, EvictsLeastRecentlyUsedFirst) {
  Make(4, 6);
  BANYAN_ASSERT_OK_AND_ASSIGN(Extension a, tree_->Insert(ns_, Range(0, 8)));
  BANYAN_ASSERT_OK_AND_ASSIGN(Extension b, tree_->Insert(ns_, Range(100, 108)));
  BANYAN_ASSERT_OK_AND_ASSIGN(NodeId na, tree_->NodeOf(a.branch));
  BANYAN_ASSERT_OK_AND_ASSIGN(NodeId nb, tree_->NodeOf(b.branch));
  BANYAN_ASSERT_OK(tree_->Release(b.branch));  // b released first: older
  BANYAN_ASSERT_OK(tree_->Release(a.branch));
  BANYAN_ASSERT_OK_AND_ASSIGN(Extension c, tree_->Insert(ns_, Range(200, 212)));  // needs 3, 2 free
  EXPECT_THAT(tree_->GetNode(nb), StatusIs(absl::StatusCode::kNotFound));
  BANYAN_ASSERT_OK(tree_->GetNode(na).status());
  EXPECT_EQ(tree_->Stats().evicted_nodes, 1);
  Check();
  // Reusing a (a hit) makes it recent; c is now the LRU victim after release.
  BANYAN_ASSERT_OK_AND_ASSIGN(NodeId nc, tree_->NodeOf(c.branch));
  BANYAN_ASSERT_OK(tree_->Release(c.branch));
  BANYAN_ASSERT_OK_AND_ASSIGN(Extension a2, tree_->Insert(ns_, Range(0, 8)));
  EXPECT_EQ(a2.reused_tokens, 8);
  BANYAN_ASSERT_OK(tree_->Release(a2.branch));
  BANYAN_ASSERT_OK_AND_ASSIGN(Extension d, tree_->Insert(ns_, Range(300, 316)));  // 4 pages
  EXPECT_THAT(tree_->GetNode(nc), StatusIs(absl::StatusCode::kNotFound));
  BANYAN_ASSERT_OK(tree_->GetNode(na).status());
  Check();
  (void)d;
}

TEST_F(KvTreeTest, EvictionPolicyScoreDecides) {
  // Evict the longest cached node first.
  Make(4, 8, [](const EvictionCandidate& c) { return -static_cast<double>(c.length); });
  BANYAN_ASSERT_OK_AND_ASSIGN(Extension longer, tree_->Insert(ns_, Range(0, 12)));
  BANYAN_ASSERT_OK_AND_ASSIGN(Extension shorter, tree_->Insert(ns_, Range(100, 104)));
  BANYAN_ASSERT_OK_AND_ASSIGN(NodeId nl, tree_->NodeOf(longer.branch));
  BANYAN_ASSERT_OK_AND_ASSIGN(NodeId ns, tree_->NodeOf(shorter.branch));
  BANYAN_ASSERT_OK(tree_->Release(shorter.branch));  // older, but shorter
  BANYAN_ASSERT_OK(tree_->Release(longer.branch));
  BANYAN_ASSERT_OK_AND_ASSIGN(Extension c, tree_->Insert(ns_, Range(200, 216)));  // 4 needed, 4 free... +1
  (void)c;
  BANYAN_ASSERT_OK_AND_ASSIGN(Extension d, tree_->Insert(ns_, Range(300, 304)));
  (void)d;
  EXPECT_THAT(tree_->GetNode(nl), StatusIs(absl::StatusCode::kNotFound));
  BANYAN_ASSERT_OK(tree_->GetNode(ns).status());
  Check();
}

TEST_F(KvTreeTest, ExhaustionChangesNothing) {
  Make(4, 4);
  BANYAN_ASSERT_OK_AND_ASSIGN(Extension a, tree_->Insert(ns_, Range(0, 10)));  // 3 pages
  BANYAN_ASSERT_OK_AND_ASSIGN(Branch b, tree_->Fork(a.branch));
  BANYAN_ASSERT_OK_AND_ASSIGN(NodeId node, tree_->NodeOf(b));
  const KvTreeStats before = tree_->Stats();
  const TreeSnapshot snap_before = tree_->Snapshot();
  // The child claims the 2 free slots of the shared page and needs 2 more pages; 1 is free.
  EXPECT_THAT(tree_->Append(b, Range(50, 60)),
              StatusIs(absl::StatusCode::kResourceExhausted, HasSubstr("exhausted")));
  EXPECT_THAT(tree_->Insert(KvNamespace{"other", ""}, Range(0, 5)),
              StatusIs(absl::StatusCode::kResourceExhausted));
  const KvTreeStats after = tree_->Stats();
  EXPECT_EQ(after.nodes, before.nodes);
  EXPECT_EQ(after.branches, before.branches);
  EXPECT_EQ(after.pages_free, before.pages_free);
  EXPECT_EQ(tree_->Snapshot().nodes.size(), snap_before.nodes.size());
  EXPECT_EQ(tree_->Snapshot().namespaces.size(), snap_before.namespaces.size());
  BANYAN_ASSERT_OK_AND_ASSIGN(NodeId same, tree_->NodeOf(b));
  EXPECT_EQ(same, node);
  BANYAN_ASSERT_OK_AND_ASSIGN(int64_t len, tree_->Length(b));
  EXPECT_EQ(len, 10);
  Check();
  // A smaller append that fits still works afterwards.
  BANYAN_ASSERT_OK_AND_ASSIGN(Extension ok, tree_->Append(b, {1}));
  EXPECT_EQ(ok.copied_pages, 0);
  Check();
}

}  // namespace
}  // namespace banyan::kv_tree

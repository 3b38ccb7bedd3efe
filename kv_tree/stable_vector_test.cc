#include "kv_tree/stable_vector.h"

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace banyan::kv_tree {
namespace {

struct Item {
  int64_t value = -1;  // default-constructed elements read -1
  std::string name;
};

TEST(StableVectorTest, AppendsInOrderAndIndexesAcrossChunks) {
  StableVector<Item, 3> v;  // chunks of 8
  EXPECT_TRUE(v.empty());
  std::mt19937 rng(5);
  std::vector<int64_t> expected;
  for (int i = 0; i < 100; ++i) {
    Item& item = v.emplace_back();
    EXPECT_EQ(item.value, -1);
    item.value = static_cast<int64_t>(rng());
    item.name = std::to_string(item.value);
    expected.push_back(item.value);
    ASSERT_EQ(v.size(), expected.size());
  }
  const StableVector<Item, 3>& cv = v;
  for (size_t i = 0; i < expected.size(); ++i) {
    EXPECT_EQ(v[i].value, expected[i]) << i;
    EXPECT_EQ(cv[i].name, std::to_string(expected[i])) << i;
  }
}

TEST(StableVectorTest, ElementsNeverMoveAsItGrows) {
  StableVector<Item, 2> v;  // chunks of 4: many chunk-table reallocations below
  std::vector<Item*> addresses;
  for (int i = 0; i < 1000; ++i) {
    Item& item = v.emplace_back();
    item.value = i;
    addresses.push_back(&item);
  }
  for (size_t i = 0; i < addresses.size(); ++i) {
    EXPECT_EQ(&v[i], addresses[i]) << i;
    EXPECT_EQ(addresses[i]->value, static_cast<int64_t>(i));
  }
}

}  // namespace
}  // namespace banyan::kv_tree

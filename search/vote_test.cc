#include "search/vote.h"

#include "gtest/gtest.h"
#include "sdk/base/rng.h"

namespace banyan::search {
namespace {

TEST(VoteTallyTest, MajorityAndTies) {
  VoteTally tally;
  EXPECT_EQ(tally.Leader().count, 0);
  EXPECT_FALSE(tally.Decided(0, 1.0));
  tally.Add("391");
  tally.Add("381");
  EXPECT_EQ(tally.Leader().answer, "391");  // tie: the one that reached it first
  tally.Add("391");
  tally.AddAbstention();
  EXPECT_EQ(tally.Leader().answer, "391");
  EXPECT_EQ(tally.Leader().count, 2);
  EXPECT_EQ(tally.votes(), 3);
  EXPECT_EQ(tally.abstentions(), 1);
  EXPECT_TRUE(tally.Decided(0, 1.0));
  EXPECT_FALSE(tally.Decided(1, 1.0));  // one more "381" would tie
}

TEST(VoteTallyTest, WeightedVote) {
  VoteTally tally;
  tally.Add("a", 0.2);
  tally.Add("a", 0.2);
  tally.Add("b", 0.9);
  EXPECT_EQ(tally.Leader().answer, "b");
  EXPECT_TRUE(tally.Decided(0, 1.0));
  EXPECT_FALSE(tally.Decided(1, 1.0));
}

// The early stop is sound: whenever Decided() says so, no completion of the
// remaining samples changes the leader. Checked by brute force on random tallies.
TEST(VoteTallyTest, EarlyStopIsSoundByExhaustiveCompletion) {
  Rng rng(17);
  for (int trial = 0; trial < 300; ++trial) {
    VoteTally tally;
    const int answers = 1 + static_cast<int>(rng.UniformInt(3));
    const int cast = static_cast<int>(rng.UniformInt(8));
    for (int i = 0; i < cast; ++i) tally.Add(std::string(1, 'a' + rng.UniformInt(answers)));
    const int remaining = static_cast<int>(rng.UniformInt(4));
    if (!tally.Decided(remaining, 1.0)) continue;
    const std::string leader = tally.Leader().answer;
    // Every way to cast the remaining votes over the answers plus a new one.
    const int options = answers + 1;
    int total = 1;
    for (int i = 0; i < remaining; ++i) total *= options;
    for (int code = 0; code < total; ++code) {
      VoteTally copy = tally;
      int c = code;
      for (int i = 0; i < remaining; ++i, c /= options) copy.Add(std::string(1, 'a' + c % options));
      ASSERT_EQ(copy.Leader().answer, leader) << "trial " << trial;
    }
  }
}

}  // namespace
}  // namespace banyan::search

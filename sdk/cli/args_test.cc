#include "sdk/cli/args.h"

#include "gtest/gtest.h"
#include "sdk/base/status_testing.h"

namespace banyan::cli {
namespace {

using ::banyan::testing::StatusIs;

TEST(ArgsTest, ParsesValuesBoolsAndPositionals) {
  BANYAN_ASSERT_OK_AND_ASSIGN(
      Args args, Args::Parse({"--n", "8", "--prompt=hi there", "--json", "rest"},
                             {"n", "prompt", "seed"}, {"json"}));
  EXPECT_EQ(*args.GetInt("n", 1), 8);
  EXPECT_EQ(*args.GetInt("seed", 42), 42);
  EXPECT_EQ(args.GetString("prompt"), "hi there");
  EXPECT_TRUE(args.GetBool("json"));
  ASSERT_EQ(args.positional().size(), 1u);
  EXPECT_EQ(args.positional()[0], "rest");
}

TEST(ArgsTest, RepeatedFlagsKeepEveryValueInOrder) {
  BANYAN_ASSERT_OK_AND_ASSIGN(Args args, Args::Parse({"--stop", "a", "--stop=b", "--n", "1"}, {"stop", "n"}, {}));
  EXPECT_EQ(args.GetAll("stop"), std::vector<std::string>({"a", "b"}));
  EXPECT_EQ(args.GetString("stop"), "b");  // the last one
  EXPECT_EQ(args.GetAll("n"), std::vector<std::string>({"1"}));
  EXPECT_TRUE(args.GetAll("absent").empty());
}

TEST(ArgsTest, RejectsUnknownMissingAndMalformed) {
  EXPECT_THAT(Args::Parse({"--bogus"}, {"n"}, {}), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(Args::Parse({"--n"}, {"n"}, {}), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(Args::Parse({"--json=1"}, {}, {"json"}), StatusIs(absl::StatusCode::kInvalidArgument));
  BANYAN_ASSERT_OK_AND_ASSIGN(Args args, Args::Parse({"--n", "eight"}, {"n"}, {}));
  EXPECT_THAT(args.GetInt("n", 0), StatusIs(absl::StatusCode::kInvalidArgument));
}

}  // namespace
}  // namespace banyan::cli

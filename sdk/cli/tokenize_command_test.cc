#include "sdk/cli/tokenize_command.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "sdk/base/status_testing.h"

namespace banyan::cli {
namespace {

using ::banyan::testing::StatusIs;

TEST(TokenizeCommandTest, JsonRoundTrip) {
  EXPECT_EQ(IdsToJson({}), "[]");
  EXPECT_EQ(IdsToJson({1, 22, 333}), "[1, 22, 333]");
  BANYAN_ASSERT_OK_AND_ASSIGN(auto ids, ParseIdArray(" [ 1,22 ,\n333 ]\n"));
  EXPECT_EQ(ids, (std::vector<int32_t>{1, 22, 333}));
  BANYAN_ASSERT_OK_AND_ASSIGN(ids, ParseIdArray("[]"));
  EXPECT_TRUE(ids.empty());
  BANYAN_ASSERT_OK_AND_ASSIGN(ids, ParseIdArray("[-1]"));  // rejected later by Decode (kOutOfRange)
  EXPECT_EQ(ids, std::vector<int32_t>{-1});
  for (const char* bad : {"", "1, 2", "[1,", "[1 2]", "[1,]", "[a]", "[1] x", "[99999999999]", "[1.5]"}) {
    EXPECT_THAT(ParseIdArray(bad), StatusIs(absl::StatusCode::kInvalidArgument)) << bad;
  }
}

}  // namespace
}  // namespace banyan::cli

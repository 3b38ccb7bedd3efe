#include "model/sampling/stop_matcher.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "sdk/base/status_testing.h"

namespace banyan::model {
namespace {

using ::banyan::testing::StatusIs;

TEST(StopMatcherTest, FindsAStopStringAcrossPieces) {
  BANYAN_ASSERT_OK_AND_ASSIGN(StopMatcher m, StopMatcher::Create({"END", "\n\n"}));
  EXPECT_FALSE(m.Append("The answer is 4"));
  EXPECT_EQ(m.SafeLength(), m.text().size());
  EXPECT_FALSE(m.Append(". E"));
  EXPECT_EQ(m.SafeLength(), std::string("The answer is 4. ").size());  // "E" held back
  EXPECT_FALSE(m.Append("N"));
  EXPECT_EQ(m.SafeLength(), std::string("The answer is 4. ").size());  // "EN" held back
  EXPECT_TRUE(m.Append("D and more"));
  EXPECT_TRUE(m.stopped());
  EXPECT_EQ(m.matched(), 0);
  EXPECT_EQ(m.text(), "The answer is 4. ");
  EXPECT_EQ(m.SafeLength(), m.text().size());
  EXPECT_TRUE(m.Append("ignored"));
  EXPECT_EQ(m.text(), "The answer is 4. ");
}

TEST(StopMatcherTest, EarliestOccurrenceWins) {
  BANYAN_ASSERT_OK_AND_ASSIGN(StopMatcher m, StopMatcher::Create({"bc", "a"}));
  EXPECT_TRUE(m.Append("xxbca"));
  EXPECT_EQ(m.text(), "xx");
  EXPECT_EQ(m.matched(), 0);
}

TEST(StopMatcherTest, FalseStartReleasesText) {
  BANYAN_ASSERT_OK_AND_ASSIGN(StopMatcher m, StopMatcher::Create({"<|im_end|>"}));
  EXPECT_FALSE(m.Append("a <|im"));
  EXPECT_EQ(m.SafeLength(), 2u);
  EXPECT_FALSE(m.Append("age|>"));
  EXPECT_EQ(m.SafeLength(), m.text().size());
}

TEST(StopMatcherTest, NoStopsAndBadInput) {
  BANYAN_ASSERT_OK_AND_ASSIGN(StopMatcher m, StopMatcher::Create({}));
  EXPECT_FALSE(m.Append("anything"));
  EXPECT_EQ(m.SafeLength(), 8u);
  EXPECT_THAT(StopMatcher::Create({"ok", ""}), StatusIs(absl::StatusCode::kInvalidArgument));
}

}  // namespace
}  // namespace banyan::model

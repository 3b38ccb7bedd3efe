#include "search/answer_extractor.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "sdk/base/status_testing.h"

namespace banyan::search {
namespace {

using ::banyan::testing::StatusIs;

TEST(AnswerExtractorTest, LastNumberWinsAndIsNormalized) {
  BANYAN_ASSERT_OK_AND_ASSIGN(auto extract, AnswerExtractor::Create());
  EXPECT_EQ(extract.Extract("17 * 23 = 17*20 + 17*3 = 340 + 51 = 391."), "391");
  EXPECT_EQ(extract.Extract("about 1,200.50 dollars"), "1200.5");
  EXPECT_EQ(extract.Extract("it is -0.0"), "0");
  EXPECT_EQ(extract.Extract("no digits here"), std::nullopt);
}

TEST(AnswerExtractorTest, CapturingGroupSelectsTheAnswer) {
  BANYAN_ASSERT_OK_AND_ASSIGN(auto extract, AnswerExtractor::Create(R"(answer:\s*([A-Za-z]+))"));
  EXPECT_EQ(extract.Extract("answer: Paris. Wait, answer: Lyon"), "Lyon");
  EXPECT_EQ(extract.Extract("Paris"), std::nullopt);
}

TEST(AnswerExtractorTest, EmptyMatchesDoNotLoop) {
  BANYAN_ASSERT_OK_AND_ASSIGN(auto extract, AnswerExtractor::Create("x*"));
  EXPECT_EQ(extract.Extract("abc"), "");
  EXPECT_EQ(extract.Extract("axxb"), "");  // the last match is the empty one after 'b'
}

TEST(AnswerExtractorTest, RejectsBadPatterns) {
  EXPECT_THAT(AnswerExtractor::Create("(unclosed"), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(AnswerExtractor::Create("(a)(b)"), StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(AnswerExtractorTest, NormalizeKeepsWordsAndTrimsNumbers) {
  EXPECT_EQ(AnswerExtractor::Normalize("  Paris! "), "Paris");
  EXPECT_EQ(AnswerExtractor::Normalize("007"), "7");
  EXPECT_EQ(AnswerExtractor::Normalize("+3.1400"), "3.14");
  EXPECT_EQ(AnswerExtractor::Normalize("0.5"), "0.5");
  EXPECT_EQ(AnswerExtractor::Normalize("-12,000"), "-12000");
}

}  // namespace
}  // namespace banyan::search

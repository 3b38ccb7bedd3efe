#include "sdk/base/utf8.h"

#include <random>
#include <string>

#include "gtest/gtest.h"

namespace banyan {
namespace {

const std::string kFffd = "\xef\xbf\xbd";

TEST(Utf8Test, DecodesEveryLengthAndRejectsWhatIsNotUtf8) {
  char32_t cp = 0;
  EXPECT_EQ(DecodeUtf8At("A", 0, &cp), 1);
  EXPECT_EQ(cp, U'A');
  EXPECT_EQ(DecodeUtf8At("\xc3\xa9", 0, &cp), 2);
  EXPECT_EQ(cp, U'\u00e9');
  EXPECT_EQ(DecodeUtf8At("\xe2\x82\xac", 0, &cp), 3);
  EXPECT_EQ(cp, U'\u20ac');
  EXPECT_EQ(DecodeUtf8At("\xf4\x8f\xbf\xbf", 0, &cp), 4);
  EXPECT_EQ(cp, U'\U0010ffff');
  EXPECT_EQ(DecodeUtf8At("\xe2\x82", 0, &cp), 0);          // truncated
  EXPECT_EQ(DecodeUtf8At("\x80", 0, &cp), 0);              // continuation byte
  EXPECT_EQ(DecodeUtf8At("\xc0\xaf", 0, &cp), 0);          // overlong '/'
  EXPECT_EQ(DecodeUtf8At("\xe0\x80\xaf", 0, &cp), 0);      // overlong, 3 bytes
  EXPECT_EQ(DecodeUtf8At("\xed\xa0\x80", 0, &cp), 0);      // surrogate U+D800
  EXPECT_EQ(DecodeUtf8At("\xf4\x90\x80\x80", 0, &cp), 0);  // past U+10FFFF
  EXPECT_EQ(DecodeUtf8At("\xe2\x28\xac", 0, &cp), 0);      // bad continuation
}

TEST(Utf8Test, ReplacesEachInvalidByteAndKeepsValidText) {
  EXPECT_TRUE(IsValidUtf8(""));
  EXPECT_TRUE(IsValidUtf8("caf\xc3\xa9 \xf0\x9f\x8c\xb3"));
  EXPECT_FALSE(IsValidUtf8("cut \xf0\x9f\x8c"));
  EXPECT_EQ(ToValidUtf8("caf\xc3\xa9"), "caf\xc3\xa9");
  EXPECT_EQ(ToValidUtf8("cut \xf0\x9f\x8c"), "cut " + kFffd + kFffd + kFffd);
  EXPECT_EQ(ToValidUtf8("a\xff" "b\x80\xc3\xa9"), "a" + kFffd + "b" + kFffd + "\xc3\xa9");
}

// On random bytes: the result is valid, keeps every valid sequence in place, and has as many characters as the input
// has valid sequences plus invalid bytes.
TEST(Utf8Test, RandomBytesComeOutValid) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> length(0, 32), byte(0, 255);
  for (int trial = 0; trial < 3000; ++trial) {
    std::string text;
    for (int i = length(rng); i > 0; --i) text.push_back(static_cast<char>(byte(rng) | (trial % 2 ? 0x80 : 0)));
    const std::string out = ToValidUtf8(text);
    ASSERT_TRUE(IsValidUtf8(out));
    size_t expected = 0, i = 0;
    std::string rebuilt;
    char32_t cp;
    while (i < text.size()) {
      const int len = DecodeUtf8At(text, i, &cp);
      rebuilt += len ? text.substr(i, len) : kFffd;
      i += len ? len : 1;
      ++expected;
    }
    EXPECT_EQ(out, rebuilt);
    size_t chars = 0;
    for (size_t j = 0; j < out.size(); j += DecodeUtf8At(out, j, &cp)) ++chars;
    EXPECT_EQ(chars, expected);
  }
}

}  // namespace
}  // namespace banyan

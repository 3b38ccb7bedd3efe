#include "sdk/cli/json_text.h"

#include <random>
#include <string>

#include "absl/status/statusor.h"
#include "gmock/gmock.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "model/tokenizer/unicode.h"

namespace banyan::cli {
namespace {

// What a standard JSON parser reads back from JsonString(text), or an error.
absl::StatusOr<std::string> ParsedBack(const std::string& literal) {
  google::protobuf::Value value;
  const auto status = google::protobuf::util::JsonStringToMessage(literal, &value);
  if (!status.ok()) return absl::InvalidArgumentError(std::string(status.message()));
  if (value.kind_case() != google::protobuf::Value::kStringValue) return absl::InvalidArgumentError("not a string");
  return value.string_value();
}

TEST(JsonTextTest, EscapesQuotesBackslashesAndControlCharacters) {
  EXPECT_EQ(JsonString("a\"b\\c\nd\te\rf"), "\"a\\\"b\\\\c\\nd\\te\\rf\"");
  EXPECT_EQ(JsonString(std::string("x\0y\x1f\x7f", 5)), "\"x\\u0000y\\u001f\\u007f\"");
  EXPECT_EQ(JsonString(""), "\"\"");
}

TEST(JsonTextTest, ValidUtf8PassesThrough) {
  const std::string text = "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x8c\x9f";  // é, €, a 4-byte emoji
  EXPECT_EQ(JsonString(text), "\"" + text + "\"");
  EXPECT_EQ(ParsedBack(JsonString(text)).value(), text);
}

TEST(JsonTextTest, InvalidBytesBecomeReplacementCharacters) {
  const std::string fffd = "\xef\xbf\xbd";
  // A character cut by --max-tokens (two bytes of the euro sign's three).
  EXPECT_EQ(JsonString("sum: \xe2\x82"), "\"sum: " + fffd + fffd + "\"");
  // A stray continuation byte, an overlong slash, a UTF-16 surrogate, a byte that never starts a sequence.
  EXPECT_EQ(JsonString("a\x80z"), "\"a" + fffd + "z\"");
  EXPECT_EQ(JsonString("\xc0\xaf"), "\"" + fffd + fffd + "\"");
  EXPECT_EQ(JsonString("\xed\xa0\x80"), "\"" + fffd + fffd + fffd + "\"");
  EXPECT_EQ(JsonString("\xff"), "\"" + fffd + "\"");
}

// Any bytes at all give a literal a standard parser reads back as the text with its invalid bytes replaced.
TEST(JsonTextTest, RandomBytesAlwaysGiveValidJson) {
  std::mt19937 rng(20261207);
  std::uniform_int_distribution<int> length(0, 40), byte(0, 255), kind(0, 3);
  for (int trial = 0; trial < 2000; ++trial) {
    std::string text;
    const int n = length(rng);
    for (int i = 0; i < n; ++i) {
      // Mostly bytes that start or continue multibyte sequences, so partial and valid ones both occur.
      const int k = kind(rng);
      text.push_back(static_cast<char>(k == 0 ? byte(rng) : k == 1 ? 0x80 | (byte(rng) & 0x3f)
                                                          : k == 2 ? 0xc2 + (byte(rng) % 0x33)
                                                                   : 0x20 + (byte(rng) % 0x5f)));
    }
    const std::string literal = JsonString(text);
    const absl::StatusOr<std::string> back = ParsedBack(literal);
    ASSERT_TRUE(back.ok()) << back.status() << " for " << literal;
    EXPECT_EQ(*back, model::ToValidUtf8(text));
    EXPECT_TRUE(model::IsValidUtf8(*back));
    if (model::IsValidUtf8(text)) EXPECT_EQ(*back, text);
  }
}

}  // namespace
}  // namespace banyan::cli

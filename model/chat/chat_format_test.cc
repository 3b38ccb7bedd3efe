// Chat formats against transformers' apply_chat_template (fixture written by
// model/testdata/make_chat_golden.py) for the shared templates, Mistral v0.1
// and the default model's own template.
#include "model/chat/chat_format.h"

#include <ctime>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "model/default_model.h"
#include "model/loader.h"
#include "model/testdata/test_files.h"
#include "nlohmann/json.hpp"
#include "sdk/base/status_testing.h"

namespace banyan::model {
namespace {

using ::banyan::testing::StatusIs;

const nlohmann::json& Golden() {
  static const nlohmann::json* golden = [] {
    auto text = testing::ReadTestFile(testing::SourceDir() + "/model/testdata/chat_golden.json");
    return new nlohmann::json(text.ok() ? nlohmann::json::parse(*text, nullptr, false)
                                        : nlohmann::json());
  }();
  return *golden;
}

std::vector<ChatMessage> Conversation(const nlohmann::json& conv) {
  std::vector<ChatMessage> out;
  for (const auto& m : conv) out.push_back({m["role"].get<std::string>(), m["content"].get<std::string>()});
  return out;
}

void CheckAll(const ChatFormat& format, const nlohmann::json& expected, const std::string& name) {
  const auto& convs = Golden()["conversations"];
  for (size_t c = 0; c < convs.size(); ++c) {
    const std::vector<ChatMessage> messages = Conversation(convs[c]);
    for (int gen = 0; gen < 2; ++gen) {
      const nlohmann::json& want = expected[c][gen];
      auto got = format.Apply(messages, gen == 1);
      if (want.is_null()) {
        EXPECT_THAT(got, StatusIs(absl::StatusCode::kInvalidArgument))
            << name << " conversation " << c << " should be refused";
      } else {
        ASSERT_TRUE(got.ok()) << name << " conversation " << c << ": " << got.status();
        EXPECT_EQ(*got, want.get<std::string>()) << name << " conversation " << c << " gen " << gen;
      }
    }
  }
}

TEST(ChatFormatTest, MatchesTransformersForEveryTemplate) {
  ASSERT_TRUE(Golden().is_object()) << "model/testdata/chat_golden.json missing";
  for (const auto& [name, t] : Golden()["templates"].items()) {
    std::string text = t["template"].get<std::string>();
    if (t["source"] == "asset") {
      // The asset file itself, so the test follows the shared copy.
      BANYAN_ASSERT_OK_AND_ASSIGN(text, testing::ReadTestFile(testing::AssetsDir() + "/" +
                                                              t["path"].get<std::string>()));
    }
    BANYAN_ASSERT_OK_AND_ASSIGN(
        ChatFormat format,
        ChatFormat::FromTemplate(text, t["bos"].get<std::string>(), t["eos"].get<std::string>()));
    CheckAll(format, t["expected"], name);
  }
}

TEST(ChatFormatTest, DefaultModelTemplateFromGguf) {
  auto path = FindDefaultModel();
  if (!path.ok()) GTEST_SKIP() << path.status();
  ASSERT_TRUE(Golden()["templates"].contains("default-model"));
  BANYAN_ASSERT_OK_AND_ASSIGN(ChatFormat format, LoadChatFormat(*path));
  EXPECT_EQ(format.kind(), ChatFormat::Kind::kChatMl);
  EXPECT_EQ(format.end_of_turn(), "<|im_end|>");
  CheckAll(format, Golden()["templates"]["default-model"]["expected"], "default-model");
}

TEST(ChatFormatTest, Llama32UsesTodaysDate) {
  BANYAN_ASSERT_OK_AND_ASSIGN(std::string t, testing::ReadTestFile(
      testing::AssetsDir() + "/chat_templates/meta-llama-Llama-3.1-8B-Instruct.jinja"));
  // Llama 3.2's template differs in how it sets the date.
  const std::string fixed = "{%- set date_string = \"26 Jul 2024\" %}";
  ASSERT_NE(t.find(fixed), std::string::npos);
  t.replace(t.find(fixed), fixed.size(),
            "{%- if strftime_now is defined %}{%- set date_string = strftime_now(\"%d %b %Y\") %}"
            "{%- else %}{%- set date_string = \"26 Jul 2024\" %}{%- endif %}");
  BANYAN_ASSERT_OK_AND_ASSIGN(ChatFormat format, ChatFormat::FromTemplate(t, "<|begin_of_text|>", ""));
  BANYAN_ASSERT_OK_AND_ASSIGN(std::string out, format.Apply({{"user", "hi"}}, false));
  const std::time_t now = std::time(nullptr);
  char today[32];
  std::strftime(today, sizeof(today), "%d %b %Y", std::localtime(&now));
  EXPECT_NE(out.find(std::string("Today Date: ") + today + "\n"), std::string::npos) << out;
}

TEST(ChatFormatTest, KindsAndErrors) {
  EXPECT_THAT(ChatFormat::FromTemplate("{{ messages }}", "", ""),
              StatusIs(absl::StatusCode::kUnimplemented));
  EXPECT_THAT(ChatFormat::FromTemplate("[INST] {{ system_message }} [/INST]", "", ""),
              StatusIs(absl::StatusCode::kUnimplemented));
  BANYAN_ASSERT_OK_AND_ASSIGN(ChatFormat chatml,
                              ChatFormat::FromTemplate("<|im_start|>{{ m }}<|im_end|>", "", ""));
  EXPECT_THAT(chatml.Apply({}, true), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(chatml.Apply({{"tool", "x"}}, true), StatusIs(absl::StatusCode::kUnimplemented));
  EXPECT_THAT(chatml.Apply({{"robot", "x"}}, true), StatusIs(absl::StatusCode::kInvalidArgument));
  BANYAN_ASSERT_OK_AND_ASSIGN(std::string plain, chatml.Apply({{"user", "hi"}}, true));
  EXPECT_EQ(plain, "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n");
  EXPECT_EQ(PyStrip("\t\x1c a b \xc2\xa0\n"), "a b");
}

}  // namespace
}  // namespace banyan::model

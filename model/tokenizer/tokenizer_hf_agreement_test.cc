// Agreement with the Hugging Face tokenizers library over a varied corpus
// (code, many scripts, emoji, whitespace runs, numbers, special-token text).
// The expected ids come from model/testdata/make_tokenizer_golden.py, which
// ran HF tokenizers on the same tokenizer files.
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "model/default_model.h"
#include "model/loader.h"
#include "model/testdata/test_files.h"
#include "model/tokenizer/tokenizer_loaders.h"
#include "model/tokenizer/unicode.h"
#include "nlohmann/json.hpp"
#include "sdk/base/status_testing.h"

namespace banyan::model {
namespace {

using testing::AssetsDir;
using testing::ReadTestFile;
using testing::SourceDir;

const nlohmann::json& Golden() {
  static const nlohmann::json* golden = [] {
    auto text = ReadTestFile(SourceDir() + "/model/testdata/tokenizer_hf_golden.json");
    return new nlohmann::json(text.ok() ? nlohmann::json::parse(*text, nullptr, false)
                                        : nlohmann::json());
  }();
  return *golden;
}

// Compares every corpus text; returns the indices that differ.
std::vector<size_t> Compare(const Tokenizer& tokenizer, const std::string& name,
                            bool check_decode) {
  const nlohmann::json& g = Golden();
  const auto& texts = g["texts"];
  const auto& ids = g["ids"][name];
  const auto& decoded = g["decoded"][name];
  std::vector<size_t> differ;
  for (size_t i = 0; i < texts.size(); ++i) {
    const std::string text = texts[i].get<std::string>();
    auto got = tokenizer.Encode(text);
    EXPECT_TRUE(got.ok()) << got.status();
    if (!got.ok()) continue;
    if (*got != ids[i].get<std::vector<int32_t>>()) differ.push_back(i);
    if (check_decode) {
      auto back = tokenizer.Decode(*got);
      EXPECT_TRUE(back.ok());
      EXPECT_EQ(back.value_or(""), decoded[i].get<std::string>()) << name << " case " << i;
    }
  }
  return differ;
}

TEST(HfAgreementTest, FixturePresent) {
  ASSERT_TRUE(Golden().is_object()) << "model/testdata/tokenizer_hf_golden.json missing or bad";
  EXPECT_GT(Golden()["texts"].size(), 250u);
}

class JsonTokenizerAgreement : public ::testing::TestWithParam<std::string> {};

TEST_P(JsonTokenizerAgreement, MatchesHfTokenizers) {
  ASSERT_TRUE(Golden().is_object());
  const std::string dir = AssetsDir() + "/tokenizers/" + GetParam();
  BANYAN_ASSERT_OK_AND_ASSIGN(std::string json, ReadTestFile(dir + "/tokenizer.json.gz"));
  BANYAN_ASSERT_OK_AND_ASSIGN(std::string config, ReadTestFile(dir + "/tokenizer_config.json"));
  BANYAN_ASSERT_OK_AND_ASSIGN(auto tokenizer, TokenizerFromJson(json, config));
  const std::vector<size_t> differ = Compare(*tokenizer, GetParam(), /*check_decode=*/true);
  for (size_t i : differ) {
    ADD_FAILURE() << GetParam() << " differs on case " << i << ": \""
                  << Golden()["texts"][i].get<std::string>() << "\"";
  }
}

INSTANTIATE_TEST_SUITE_P(TokenizerJson, JsonTokenizerAgreement,
                         ::testing::Values("llama3", "qwen2.5"),
                         [](const auto& info) { return info.param == "llama3" ? "llama3" : "qwen25"; });

TEST(GgufTokenizerAgreement, DefaultModelMatchesHf) {
  ASSERT_TRUE(Golden().is_object());
  auto path = FindDefaultModel();
  if (!path.ok()) GTEST_SKIP() << path.status();
  if (!Golden()["ids"].contains("smollm2_gguf_published")) GTEST_SKIP() << "fixture lacks GGUF cases";
  BANYAN_ASSERT_OK_AND_ASSIGN(auto tokenizer, LoadTokenizer(*path));
  // SmolLM2's published tokenizer (Digits(individual) + ByteLevel; llama.cpp's
  // "smollm" pre-tokenizer): exact agreement.
  const std::vector<size_t> differ =
      Compare(*tokenizer, "smollm2_gguf_published", /*check_decode=*/true);
  EXPECT_THAT(differ, ::testing::IsEmpty());
  // transformers' own GGUF conversion does not know "smollm" and falls back
  // to GPT-2's regex, which keeps runs of \p{N} together: it may differ only
  // on texts with numbers.
  for (size_t i : Compare(*tokenizer, "smollm2_gguf_transformers", false)) {
    const std::string text = Golden()["texts"][i].get<std::string>();
    bool has_number = false;
    for (const CodePoint& cp : SplitUtf8(text)) has_number |= ClassOf(cp) == CharClass::kNumber;
    EXPECT_TRUE(has_number) << "case " << i << ": " << text;
  }
}

}  // namespace
}  // namespace banyan::model

namespace banyan::model {
namespace {

// tests/hf/data/smollm2_gguf/reference.json was written on the device by
// transformers loading the default model's .gguf (tests/hf/check_gguf_logits.py):
// its texts' token ids and its rendered chat prompt must match ours.
TEST(GgufTokenizerAgreement, DeviceTransformersReference) {
  auto path = FindDefaultModel();
  if (!path.ok()) GTEST_SKIP() << path.status();
  auto text = ReadTestFile(SourceDir() + "/tests/hf/data/smollm2_gguf/reference.json");
  if (!text.ok()) GTEST_SKIP() << text.status();
  const nlohmann::json ref = nlohmann::json::parse(*text, nullptr, false);
  ASSERT_TRUE(ref.is_object());
  BANYAN_ASSERT_OK_AND_ASSIGN(auto tokenizer, LoadTokenizer(*path));
  int checked = 0;
  for (const auto& seq : ref["seqs"]) {
    if (!seq.contains("text") || !seq["text"].is_string()) continue;
    BANYAN_ASSERT_OK_AND_ASSIGN(auto ids, tokenizer->Encode(seq["text"].get<std::string>(),
                                                            ref.value("add_bos_token", false)));
    EXPECT_EQ(ids, seq["ids"].get<std::vector<int32_t>>()) << seq["text"];
    ++checked;
  }
  EXPECT_GE(checked, 4);
  BANYAN_ASSERT_OK_AND_ASSIGN(ChatFormat chat, LoadChatFormat(*path));
  std::vector<ChatMessage> messages;
  for (const auto& m : ref["chat_messages"]) {
    messages.push_back({m["role"].get<std::string>(), m["content"].get<std::string>()});
  }
  BANYAN_ASSERT_OK_AND_ASSIGN(std::string rendered, chat.Apply(messages, true));
  EXPECT_EQ(rendered, ref["chat_rendered"].get<std::string>());
}

}  // namespace
}  // namespace banyan::model

// tokenizer.json BPE with byte_fallback (Llama 2 / Mistral HF directories),
// run by SpmTokenizer in merge-rank mode. The file is Llama 2's vocabulary
// (llama.cpp's llama-spm golden GGUF) written as a Llama 2 tokenizer.json by
// model/testdata/make_byte_fallback_golden.py, which also recorded what the
// Hugging Face tokenizers library encodes and decodes for the corpus of
// tokenizer_hf_golden.json with that file in three flavors: the legacy
// Prepend + Replace normalizer, and Metaspace with prepend_scheme "first" and
// "always". The same tokenizer must also reproduce llama.cpp's llama-spm
// golden cases (its SentencePiece algorithm on the same vocabulary).
#include <algorithm>
#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "model/testdata/test_files.h"
#include "model/tokenizer/tokenizer_loaders.h"
#include "nlohmann/json.hpp"
#include "sdk/base/status_testing.h"

namespace banyan::model {
namespace {

using ::banyan::testing::StatusIs;
using testing::AssetsDir;
using testing::ReadTestFile;
using testing::SourceDir;

constexpr char kSpace[] = "\xe2\x96\x81";

nlohmann::json LoadJson(const std::string& path) {
  auto text = ReadTestFile(path);
  EXPECT_TRUE(text.ok()) << text.status();
  return text.ok() ? nlohmann::json::parse(*text, nullptr, false) : nlohmann::json();
}

// The legacy file, or its Metaspace variant with `scheme`.
std::string Flavor(const std::string& name) {
  nlohmann::json j = LoadJson(SourceDir() + "/model/testdata/llama_spm_byte_fallback.json.gz");
  if (name != "prepend") {
    j["normalizer"] = nullptr;
    j["pre_tokenizer"] = {{"type", "Metaspace"}, {"replacement", kSpace},
                          {"prepend_scheme", name == "metaspace_first" ? "first" : "always"}, {"split", false}};
  }
  return j.dump();
}

class ByteFallbackAgreement : public ::testing::TestWithParam<std::string> {};

TEST_P(ByteFallbackAgreement, MatchesHfTokenizers) {
  const nlohmann::json golden = LoadJson(SourceDir() + "/model/testdata/tokenizer_byte_fallback_golden.json");
  ASSERT_TRUE(golden.is_object());
  BANYAN_ASSERT_OK_AND_ASSIGN(auto tokenizer, TokenizerFromJson(Flavor(GetParam()), ""));
  EXPECT_EQ(tokenizer->vocab_size(), 32000);
  const auto& texts = golden["texts"];
  const auto& ids = golden["ids"][GetParam()];
  const auto& decoded = golden["decoded"][GetParam()];
  ASSERT_GT(texts.size(), 250u);
  int differ = 0;
  for (size_t i = 0; i < texts.size(); ++i) {
    const std::string text = texts[i].get<std::string>();
    BANYAN_ASSERT_OK_AND_ASSIGN(std::vector<int32_t> got, tokenizer->Encode(text));
    const std::vector<int32_t> want = ids[i].get<std::vector<int32_t>>();
    EXPECT_EQ(got, want) << GetParam() << " case " << i << ": \"" << text << "\"";
    differ += got != want;
    BANYAN_ASSERT_OK_AND_ASSIGN(std::string back, tokenizer->Decode(got));
    EXPECT_EQ(back, decoded[i].get<std::string>()) << GetParam() << " case " << i;
  }
  EXPECT_EQ(differ, 0);
  // The TemplateProcessing post-processor adds <s>.
  BANYAN_ASSERT_OK_AND_ASSIGN(std::vector<int32_t> with_bos, tokenizer->Encode("Hello", true));
  ASSERT_FALSE(with_bos.empty());
  EXPECT_EQ(with_bos[0], 1);
  EXPECT_EQ(tokenizer->bos_id(), 1);
}

INSTANTIATE_TEST_SUITE_P(Flavors, ByteFallbackAgreement,
                         ::testing::Values("prepend", "metaspace_first", "metaspace_always"),
                         [](const auto& info) { return info.param; });

// llama.cpp's golden cases for the same vocabulary (SentencePiece merging by
// score), through the legacy tokenizer.json (merging by rank).
TEST(ByteFallbackTest, ReproducesLlamaSpmGoldenCases) {
  const std::string base = AssetsDir() + "/tokenizers/golden/ggml-vocab-llama-spm.gguf";
  BANYAN_ASSERT_OK_AND_ASSIGN(std::string inp, ReadTestFile(base + ".inp"));
  BANYAN_ASSERT_OK_AND_ASSIGN(std::string out, ReadTestFile(base + ".out"));
  BANYAN_ASSERT_OK_AND_ASSIGN(auto tokenizer, TokenizerFromJson(Flavor("prepend"), ""));
  std::vector<std::string> texts = absl::StrSplit(inp, "\n__ggml_vocab_test__\n");
  if (!texts.empty() && texts.back().empty()) texts.pop_back();
  std::vector<std::string> lines = absl::StrSplit(out, '\n');
  if (!lines.empty() && lines.back().empty()) lines.pop_back();
  ASSERT_EQ(texts.size(), lines.size());
  ASSERT_GT(texts.size(), 20u);
  for (size_t i = 0; i < texts.size(); ++i) {
    std::vector<int32_t> expected;
    std::istringstream stream(lines[i]);
    for (int32_t id; stream >> id;) expected.push_back(id);
    BANYAN_ASSERT_OK_AND_ASSIGN(std::vector<int32_t> got, tokenizer->Encode(texts[i]));
    EXPECT_EQ(got, expected) << "case " << i << ": \"" << texts[i] << "\"";
  }
}

TEST(ByteFallbackTest, UnsupportedOrBrokenFilesGiveSpecificCodes) {
  nlohmann::json j = nlohmann::json::parse(Flavor("prepend"));
  ASSERT_TRUE(j.is_object());
  nlohmann::json split = j;
  split["normalizer"] = nullptr;
  split["pre_tokenizer"] = {{"type", "Metaspace"}, {"replacement", kSpace}, {"prepend_scheme", "first"},
                            {"split", true}};
  EXPECT_THAT(TokenizerFromJson(split.dump(), ""),
              StatusIs(absl::StatusCode::kUnimplemented, ::testing::HasSubstr("Metaspace")));
  nlohmann::json nfkc = j;
  nfkc["normalizer"] = {{"type", "NFKC"}};
  EXPECT_THAT(TokenizerFromJson(nfkc.dump(), ""), StatusIs(absl::StatusCode::kUnimplemented));
  nlohmann::json bad_scheme = split;
  bad_scheme["pre_tokenizer"]["split"] = false;
  bad_scheme["pre_tokenizer"]["prepend_scheme"] = "sometimes";
  EXPECT_THAT(TokenizerFromJson(bad_scheme.dump(), ""), StatusIs(absl::StatusCode::kInvalidArgument));
  nlohmann::json bad_merge = j;
  bad_merge["model"]["merges"].push_back({"no-such-piece", "x"});
  EXPECT_THAT(TokenizerFromJson(bad_merge.dump(), ""),
              StatusIs(absl::StatusCode::kInvalidArgument, ::testing::HasSubstr("no-such-piece")));
}

// Characters outside the vocabulary: byte tokens when they exist, else one
// <unk> per run of unknown characters (fuse_unk).
TEST(ByteFallbackTest, UnknownCharactersFallBackToBytesOrUnk) {
  BANYAN_ASSERT_OK_AND_ASSIGN(auto tokenizer, TokenizerFromJson(Flavor("prepend"), ""));
  BANYAN_ASSERT_OK_AND_ASSIGN(std::vector<int32_t> ids, tokenizer->Encode("\xF0\x9F\xA6\x99"));  // 🦙
  const std::vector<int32_t> bytes = {3 + 0xF0, 3 + 0x9F, 3 + 0xA6, 3 + 0x99};  // <0xNN> is id 3 + NN
  ASSERT_GE(ids.size(), 4u);
  EXPECT_EQ(std::vector<int32_t>(ids.end() - 4, ids.end()), bytes);
  BANYAN_ASSERT_OK_AND_ASSIGN(std::string back, tokenizer->Decode(ids));
  EXPECT_EQ(back, "\xF0\x9F\xA6\x99");

  nlohmann::json j = nlohmann::json::parse(Flavor("prepend"));
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof(name), "<0x%02X>", b);
    j["model"]["vocab"].erase(name);
  }
  BANYAN_ASSERT_OK_AND_ASSIGN(auto no_bytes, TokenizerFromJson(j.dump(), ""));
  BANYAN_ASSERT_OK_AND_ASSIGN(ids, no_bytes->Encode("a\xF0\x9F\xA6\x99\xF0\x9F\x9A\x80"));  // a🦙🚀
  EXPECT_EQ(ids.back(), 0);  // <unk>
  EXPECT_EQ(std::count(ids.begin(), ids.end(), 0), 1);
}

// A hand-made file: a hole in the ids (4), an added token past the
// vocabulary (9), one merge, one byte token.
TEST(ByteFallbackTest, SmallHandWrittenFile) {
  const nlohmann::json j = {
      {"added_tokens",
       {{{"id", 0}, {"content", "<unk>"}, {"special", true}}, {{"id", 1}, {"content", "<s>"}, {"special", true}},
        {{"id", 2}, {"content", "</s>"}, {"special", true}}, {{"id", 9}, {"content", "<extra>"}, {"special", true}}}},
      {"normalizer",
       {{"type", "Sequence"},
        {"normalizers",
         {{{"type", "Prepend"}, {"prepend", kSpace}},
          {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", kSpace}}}}}},
      {"pre_tokenizer", nullptr},
      {"model",
       {{"type", "BPE"}, {"byte_fallback", true}, {"fuse_unk", true}, {"unk_token", "<unk>"},
        {"vocab", {{"<unk>", 0}, {"<s>", 1}, {"</s>", 2}, {"<0x41>", 3}, {kSpace, 5}, {"a", 6},
                   {std::string(kSpace) + "a", 7}}},
        {"merges", nlohmann::json::array({nlohmann::json::array({kSpace, "a"})})}}}};
  BANYAN_ASSERT_OK_AND_ASSIGN(auto tokenizer, TokenizerFromJson(j.dump(), ""));
  EXPECT_EQ(tokenizer->vocab_size(), 10);
  // "a" -> "▁a" (merged); <extra>; "Abc" -> "▁" <0x41> <unk> (b and c fused).
  BANYAN_ASSERT_OK_AND_ASSIGN(std::vector<int32_t> ids, tokenizer->Encode("a<extra>Abc"));
  EXPECT_EQ(ids, (std::vector<int32_t>{7, 9, 5, 3, 0}));
  BANYAN_ASSERT_OK_AND_ASSIGN(std::string back, tokenizer->Decode({7, 9, 5, 3}));
  EXPECT_EQ(back, "a<extra> A");
  EXPECT_THAT(tokenizer->Decode({10}), StatusIs(absl::StatusCode::kOutOfRange));
}

}  // namespace
}  // namespace banyan::model

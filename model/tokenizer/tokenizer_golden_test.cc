// The llama.cpp golden vocabularies (shared/assets/tokenizers/golden): every
// text of X.gguf.inp must encode to the ids of X.gguf.out (no BOS), and
// decode back to the text.
#include <sstream>

#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "model/gguf/gguf_file.h"
#include "model/testdata/test_files.h"
#include "model/tokenizer/tokenizer_loaders.h"
#include "sdk/base/status_testing.h"

namespace banyan::model {
namespace {

using testing::AssetsDir;
using testing::ReadTestFile;

class GoldenVocabTest : public ::testing::TestWithParam<std::string> {};

TEST_P(GoldenVocabTest, ReproducesEveryCase) {
  const std::string base = AssetsDir() + "/tokenizers/golden/ggml-vocab-" + GetParam() + ".gguf";
  BANYAN_ASSERT_OK_AND_ASSIGN(std::string gguf_bytes, ReadTestFile(base + ".gz"));
  BANYAN_ASSERT_OK_AND_ASSIGN(std::string inp, ReadTestFile(base + ".inp"));
  BANYAN_ASSERT_OK_AND_ASSIGN(std::string out, ReadTestFile(base + ".out"));
  BANYAN_ASSERT_OK_AND_ASSIGN(
      GgufFile gguf, GgufFile::Parse(absl::MakeConstSpan(
                         reinterpret_cast<const uint8_t*>(gguf_bytes.data()), gguf_bytes.size())));
  BANYAN_ASSERT_OK_AND_ASSIGN(auto tokenizer, TokenizerFromGguf(gguf));

  std::vector<std::string> texts = absl::StrSplit(inp, "\n__ggml_vocab_test__\n");
  ASSERT_FALSE(texts.empty());
  if (texts.back().empty()) texts.pop_back();  // after the last separator
  std::vector<std::string> lines = absl::StrSplit(out, '\n');
  if (!lines.empty() && lines.back().empty()) lines.pop_back();
  ASSERT_EQ(texts.size(), lines.size());
  int mismatches = 0;
  for (size_t i = 0; i < texts.size(); ++i) {
    std::vector<int32_t> expected;
    std::istringstream ids(lines[i]);
    for (int32_t id; ids >> id;) expected.push_back(id);
    BANYAN_ASSERT_OK_AND_ASSIGN(std::vector<int32_t> got, tokenizer->Encode(texts[i]));
    EXPECT_EQ(got, expected) << "case " << i << ": \"" << texts[i] << "\"";
    mismatches += got != expected;
    BANYAN_ASSERT_OK_AND_ASSIGN(std::string decoded, tokenizer->Decode(got));
    // (SentencePiece decoding drops the one space its encoder prefixed.)
    EXPECT_EQ(decoded, texts[i]) << "case " << i;
  }
  EXPECT_EQ(mismatches, 0);
}

INSTANTIATE_TEST_SUITE_P(Vocabularies, GoldenVocabTest,
                         ::testing::Values("llama-bpe", "qwen2", "gpt-2", "llama-spm"));

}  // namespace
}  // namespace banyan::model

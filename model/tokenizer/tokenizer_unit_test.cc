// Tokenizer behaviours beyond the golden files: streaming decode, bad ids,
// merges written as pairs, added-token stripping, BOS handling, loader errors.
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "model/testdata/test_files.h"
#include "model/tokenizer/added_tokens.h"
#include "model/tokenizer/pretokenizer.h"
#include "model/tokenizer/tokenizer_loaders.h"
#include "model/tokenizer/unicode.h"
#include "sdk/base/status_testing.h"

namespace banyan::model {
namespace {

using ::banyan::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

// A tiny byte-level vocabulary over "a", "b", " " (Ġ) with merges given as
// `merges` (JSON text).
std::string TinyJson(const std::string& merges, const std::string& extra = "") {
  return R"({"model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "Ġ": 2, "ab": 3, "Ġab": 4,
  "\u00f0": 5, "\u0141": 6, "\u013a": 7, "\u0134": 8},
  "merges": )" + merges + R"(}, "added_tokens": [{"id": 9, "content": "<x>", "special": true,
  "lstrip": true, "rstrip": false}], "pre_tokenizer": {"type": "ByteLevel",
  "add_prefix_space": false, "use_regex": true}, "post_processor": {"type":
  "TemplateProcessing", "single": [{"SpecialToken": {"id": "<x>", "type_id": 0}},
  {"Sequence": {"id": "A", "type_id": 0}}]})" + extra + "}";
}

TEST(TokenizerUnitTest, MergesAsStringsOrPairsAgree) {
  BANYAN_ASSERT_OK_AND_ASSIGN(auto strings, TokenizerFromJson(TinyJson(R"(["a b", "Ġ ab"])"), ""));
  BANYAN_ASSERT_OK_AND_ASSIGN(auto pairs,
                              TokenizerFromJson(TinyJson(R"([["a", "b"], ["Ġ", "ab"]])"), ""));
  for (const auto* t : {strings.get(), pairs.get()}) {
    BANYAN_ASSERT_OK_AND_ASSIGN(auto ids, t->Encode("ab ab ba"));
    EXPECT_THAT(ids, ElementsAre(3, 4, 2, 1, 0));
    // lstrip: "<x>" absorbs the spaces before it; add_special_tokens prepends it.
    BANYAN_ASSERT_OK_AND_ASSIGN(ids, t->Encode("ab  <x>a", true));
    EXPECT_THAT(ids, ElementsAre(9, 3, 9, 0));
    EXPECT_EQ(t->bos_id(), 9);
    EXPECT_TRUE(t->IsSpecial(9));
    EXPECT_EQ(t->FindToken("ab"), 3);
  }
  EXPECT_THAT(TokenizerFromJson(TinyJson(R"(["a c"])"), ""),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("merge")));
  EXPECT_THAT(TokenizerFromJson(TinyJson(R"([1])"), ""), StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(TokenizerUnitTest, LoaderErrors) {
  EXPECT_THAT(TokenizerFromJson("{", ""), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(TokenizerFromJson(R"({"model": {"type": "WordPiece", "vocab": {}}})", ""),
              StatusIs(absl::StatusCode::kUnimplemented, HasSubstr("WordPiece")));
  std::string json = TinyJson(R"(["a b"])", R"(, "normalizer": {"type": "NFKC"})");
  EXPECT_THAT(TokenizerFromJson(json, ""), StatusIs(absl::StatusCode::kUnimplemented, HasSubstr("NFKC")));
  EXPECT_THAT(PreTokenizerFromPattern("\\w+"), StatusIs(absl::StatusCode::kUnimplemented));
  EXPECT_THAT(PreTokenizerFromGgufName("chameleon"), StatusIs(absl::StatusCode::kUnimplemented));
}

class RealTokenizerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto json = testing::ReadTestFile(testing::AssetsDir() + "/tokenizers/llama3/tokenizer.json.gz");
    if (!json.ok()) return;
    auto t = TokenizerFromJson(*json, "");
    if (t.ok()) shared_ = t->release();
  }
  void SetUp() override {
    ASSERT_NE(shared_, nullptr) << "llama3 tokenizer.json missing or unreadable";
    tokenizer_ = shared_;
  }
  static Tokenizer* shared_;
  Tokenizer* tokenizer_ = nullptr;
};
Tokenizer* RealTokenizerTest::shared_ = nullptr;

TEST_F(RealTokenizerTest, StreamingHoldsBackPartialCharacters) {
  const std::string text = "a😶‍🌫️ b 你好 ½ done";
  BANYAN_ASSERT_OK_AND_ASSIGN(auto ids, tokenizer_->Encode(text));
  StreamDecoder stream(*tokenizer_);
  std::string out;
  for (int32_t id : ids) {
    BANYAN_ASSERT_OK_AND_ASSIGN(std::string part, stream.Add(id));
    EXPECT_TRUE(IsValidUtf8(part)) << "a partial character escaped at id " << id;
    out += part;
  }
  EXPECT_EQ(stream.Flush(), "");
  EXPECT_EQ(out, text);
  // A token that is the first byte of a 4-byte character is held back.
  BANYAN_ASSERT_OK_AND_ASSIGN(auto emoji, tokenizer_->Encode("🦙"));
  ASSERT_GT(emoji.size(), 1u);
  StreamDecoder partial(*tokenizer_);
  BANYAN_ASSERT_OK_AND_ASSIGN(std::string first, partial.Add(emoji[0]));
  EXPECT_EQ(first, "");
  EXPECT_FALSE(partial.Flush().empty());
}

TEST_F(RealTokenizerTest, BadIdsAreOutOfRange) {
  const int32_t n = tokenizer_->vocab_size();
  EXPECT_EQ(n, 128256);
  EXPECT_THAT(tokenizer_->Decode(std::vector<int32_t>{1, n}), StatusIs(absl::StatusCode::kOutOfRange));
  EXPECT_THAT(tokenizer_->Decode(std::vector<int32_t>{-5}), StatusIs(absl::StatusCode::kOutOfRange));
  StreamDecoder stream(*tokenizer_);
  EXPECT_THAT(stream.Add(n + 7), StatusIs(absl::StatusCode::kOutOfRange));
  BANYAN_ASSERT_OK_AND_ASSIGN(std::string special, tokenizer_->Decode(std::vector<int32_t>{128009}));
  EXPECT_EQ(special, "<|eot_id|>");
}

TEST(TokenizerUnitTest, SentencePieceAddsBosAndStripsPrefixSpace) {
  BANYAN_ASSERT_OK_AND_ASSIGN(
      std::string bytes, testing::ReadTestFile(testing::AssetsDir() +
                                               "/tokenizers/golden/ggml-vocab-llama-spm.gguf.gz"));
  BANYAN_ASSERT_OK_AND_ASSIGN(
      GgufFile gguf, GgufFile::Parse(absl::MakeConstSpan(reinterpret_cast<const uint8_t*>(bytes.data()),
                                                         bytes.size())));
  BANYAN_ASSERT_OK_AND_ASSIGN(auto t, TokenizerFromGguf(gguf));
  BANYAN_ASSERT_OK_AND_ASSIGN(auto ids, t->Encode("Hello world", true));
  EXPECT_THAT(ids, ElementsAre(1, 15043, 3186));  // <s> ▁Hello ▁world
  BANYAN_ASSERT_OK_AND_ASSIGN(ids, t->Encode("<s>Hi</s>"));
  EXPECT_EQ(ids.front(), 1);
  EXPECT_EQ(ids.back(), 2);
  BANYAN_ASSERT_OK_AND_ASSIGN(std::string text, t->Decode(std::vector<int32_t>{15043, 3186}));
  EXPECT_EQ(text, "Hello world");
  EXPECT_EQ(CompleteUtf8Prefix("ab\xe4\xbd"), 2u);
  EXPECT_EQ(CompleteUtf8Prefix("ab\xff"), 3u);  // never completable: passed through
}

TEST(TokenizerUnitTest, NfcComposesReordersAndKeepsInvalidBytes) {
  EXPECT_EQ(NormalizeNfc("e\xcc\x81"), "\xc3\xa9");                    // e + U+0301 -> é
  EXPECT_EQ(NormalizeNfc("a\xcc\xa3\xcc\x82"), "\xe1\xba\xad");        // a + dot below + circumflex
  EXPECT_EQ(NormalizeNfc("a\xcc\x82\xcc\xa3"), "\xe1\xba\xad");        // same, marks reordered
  EXPECT_EQ(NormalizeNfc("\xe1\x84\x80\xe1\x85\xa1\xe1\x86\xa8"), "\xea\xb0\x81");  // jamo -> 각
  EXPECT_EQ(NormalizeNfc("\xe2\x84\xab"), "\xc3\x85");                 // ANGSTROM SIGN -> Å
  EXPECT_EQ(NormalizeNfc("\xef\xac\x81"), "\xef\xac\x81");            // ﬁ: compatibility only, kept
  EXPECT_EQ(NormalizeNfc("x\xff\xcc\x81"), "x\xff\xcc\x81");          // invalid UTF-8: unchanged
}

TEST(TokenizerUnitTest, AddedTokenMatcherPrefersLongest) {
  AddedTokenMatcher m({{"<a>", 1}, {"<a>b", 2}, {"x", 3, true, false, true}});
  auto segs = m.Split("q<a>bx  z<a>");
  ASSERT_EQ(segs.size(), 5u);
  EXPECT_EQ(segs[1].token, 2);
  EXPECT_EQ(segs[2].token, 3);
  EXPECT_EQ(segs[2].end, 8u);  // rstrip took the two spaces
  EXPECT_EQ(segs[4].token, 1);
}

}  // namespace
}  // namespace banyan::model

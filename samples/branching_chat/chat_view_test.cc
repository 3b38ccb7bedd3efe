#include "samples/branching_chat/chat_view.h"

#include <set>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "sdk/base/rng.h"

namespace banyan::samples::chat {
namespace {

TEST(ChatViewTest, WordDiff) {
  EXPECT_EQ(WordDiff("the cat sat", "the cat sat"), "the cat sat");
  EXPECT_EQ(WordDiff("the cat sat", "the dog sat"), "the [-cat-] {+dog+} sat");
  EXPECT_EQ(WordDiff("a b c", ""), "[-a b c-]");
  EXPECT_EQ(WordDiff("", "x  y\nz"), "{+x y z+}");
  EXPECT_EQ(WordDiff("", ""), "");
  EXPECT_EQ(WordDiff("one two three four", "one three four five"), "one [-two-] three four {+five+}");
  // Past max_words the tails are compared as one chunk each.
  EXPECT_EQ(WordDiff("a b c d", "a b x y", 2), "a b [-c d-] {+x y+}");
}

// Removing every [-...-] from the diff gives b's words, removing every
// {+...+} gives a's: checked on random word strings.
TEST(ChatViewTest, WordDiffReconstructsBothSides) {
  Rng rng(7);
  const char* vocab[] = {"a", "b", "c", "d", "e"};
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<std::string> a, b;
    for (uint64_t k = rng.UniformInt(12); k > 0; --k) a.push_back(vocab[rng.UniformInt(5)]);
    for (uint64_t k = rng.UniformInt(12); k > 0; --k) b.push_back(vocab[rng.UniformInt(5)]);
    auto join = [](const std::vector<std::string>& w) {
      std::string s;
      for (const std::string& x : w) s += (s.empty() ? "" : " ") + x;
      return s;
    };
    const std::string diff = WordDiff(join(a), join(b));
    std::vector<std::string> left, right;
    char mode = ' ';
    std::string word;
    for (size_t i = 0; i <= diff.size(); ++i) {
      if (i + 1 < diff.size() && diff[i] == '[' && diff[i + 1] == '-') { mode = '-'; ++i; continue; }
      if (i + 1 < diff.size() && diff[i] == '{' && diff[i + 1] == '+') { mode = '+'; ++i; continue; }
      const bool close = i + 1 < diff.size() && ((diff[i] == '-' && diff[i + 1] == ']') ||
                                                 (diff[i] == '+' && diff[i + 1] == '}'));
      if (i == diff.size() || diff[i] == ' ' || close) {
        if (!word.empty()) {
          if (mode != '+') left.push_back(word);
          if (mode != '-') right.push_back(word);
          word.clear();
        }
        if (close) { mode = ' '; ++i; }
        continue;
      }
      word += diff[i];
    }
    EXPECT_EQ(left, a) << diff;
    EXPECT_EQ(right, b) << diff;
  }
}

TEST(ChatViewTest, DistinctPrefixTokens) {
  EXPECT_EQ(DistinctPrefixTokens({}), 0);
  EXPECT_EQ(DistinctPrefixTokens({{1, 2, 3}}), 3);
  EXPECT_EQ(DistinctPrefixTokens({{1, 2, 3}, {1, 2, 4}, {1, 2}, {5}}), 3 + 1 + 0 + 1);
  // Against a brute-force count of distinct prefixes.
  Rng rng(3);
  for (int trial = 0; trial < 100; ++trial) {
    std::vector<std::vector<int32_t>> seqs(rng.UniformInt(8));
    for (auto& s : seqs) {
      for (uint64_t k = rng.UniformInt(10); k > 0; --k) s.push_back(static_cast<int32_t>(rng.UniformInt(3)));
    }
    std::set<std::vector<int32_t>> prefixes;
    for (const auto& s : seqs) {
      for (size_t n = 1; n <= s.size(); ++n) prefixes.insert(std::vector<int32_t>(s.begin(), s.begin() + n));
    }
    EXPECT_EQ(DistinctPrefixTokens(seqs), static_cast<int64_t>(prefixes.size()));
  }
}

TEST(ChatViewTest, PreviewAndPrintable) {
  EXPECT_EQ(Preview("short", 10), "short");
  EXPECT_EQ(Preview("a\nb\tc\x01", 20), "a\\nb\\tc\\x01");
  const std::string p = Preview("0123456789abcdefghijklmnopqrstuvwxyz", 12);
  EXPECT_EQ(p, "012345...xyz");
  // Never splits a UTF-8 character.
  const std::string accents = Preview("ééééééééééééééééééééééé", 9);
  EXPECT_EQ(accents, "éééé...éé");
  EXPECT_EQ(Printable("ok\n\tdone\r\x7f"), "ok\n\tdone\\x0d\\x7f");
}

}  // namespace
}  // namespace banyan::samples::chat

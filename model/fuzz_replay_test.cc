// Replays the fuzz entry functions (model/testdata/fuzz_entries.h) over real
// files, their truncations, random byte flips and random bytes, so every CI
// run exercises what the libFuzzer targets do. A crash or a trap fails.
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "model/testdata/fuzz_entries.h"
#include "model/testdata/test_files.h"
#include "model/testdata/tiny_models.h"
#include "sdk/base/rng.h"
#include "sdk/base/status_testing.h"

namespace banyan::model {
namespace {

using Entry = int (*)(const uint8_t*, size_t);

int Call(Entry f, const std::string& s) {
  return f(reinterpret_cast<const uint8_t*>(s.data()), s.size());
}

// Truncations at `cuts` random lengths and `flips` random mutations of 1-8 bytes.
void Mutate(Entry f, const std::string& seed, Rng& rng, int cuts, int flips) {
  EXPECT_EQ(Call(f, seed), 0);
  for (int i = 0; i < cuts; ++i) Call(f, seed.substr(0, rng.UniformInt(seed.size() + 1)));
  for (int i = 0; i < flips; ++i) {
    std::string m = seed;
    const int n = 1 + static_cast<int>(rng.UniformInt(8));
    for (int k = 0; k < n; ++k) {
      const size_t at = rng.UniformInt(m.size());
      switch (rng.UniformInt(3)) {
        case 0: m[at] = static_cast<char>(rng.UniformInt(256)); break;
        case 1: m[at] = static_cast<char>(m[at] ^ (1 << rng.UniformInt(8))); break;
        default: m[at] = static_cast<char>(0xff); break;
      }
    }
    Call(f, m);
  }
}

std::string RandomBytes(Rng& rng, size_t n) {
  std::string s(n, '\0');
  for (char& c : s) c = static_cast<char>(rng.UniformInt(256));
  return s;
}

TEST(FuzzReplayTest, Gguf) {
  Rng rng(101);
  const std::string tiny = testing::TinyModelGguf(
      testing::MakeTinyModel(Architecture::kLlama, 2, false, 9));
  Mutate(fuzz::FuzzGguf, tiny, rng, 300, 1500);
  const std::string qwen = testing::TinyModelGguf(
      testing::MakeTinyModel(Architecture::kQwen2, 1, true, 10));
  Mutate(fuzz::FuzzGguf, qwen, rng, 100, 500);
  BANYAN_ASSERT_OK_AND_ASSIGN(
      std::string spm, testing::ReadTestFile(testing::AssetsDir() +
                                             "/tokenizers/golden/ggml-vocab-llama-spm.gguf.gz"));
  Mutate(fuzz::FuzzGguf, spm, rng, 4, 12);
  for (int i = 0; i < 300; ++i) {
    std::string r = "GGUF" + RandomBytes(rng, rng.UniformInt(200));
    if (i % 2) r[4] = 3, r[5] = r[6] = r[7] = 0;  // version 3
    Call(fuzz::FuzzGguf, r);
  }
}

TEST(FuzzReplayTest, Safetensors) {
  Rng rng(102);
  const std::string dir = ::testing::TempDir() + "/banyan_fuzz_replay_st";
  testing::WriteTinyModelDirectory(testing::MakeTinyModel(Architecture::kLlama, 2, false, 11), dir,
                                   1, "BF16");
  BANYAN_ASSERT_OK_AND_ASSIGN(std::string st, testing::ReadTestFile(dir + "/model.safetensors"));
  Mutate(fuzz::FuzzSafetensors, st, rng, 300, 1500);
  BANYAN_ASSERT_OK_AND_ASSIGN(std::string config, testing::ReadTestFile(dir + "/config.json"));
  Mutate(fuzz::FuzzSafetensors, config, rng, 200, 800);
  BANYAN_ASSERT_OK_AND_ASSIGN(
      std::string chat, testing::ReadTestFile(testing::AssetsDir() +
                                              "/chat_templates/HuggingFaceTB-SmolLM3-3B.jinja"));
  Mutate(fuzz::FuzzSafetensors, chat, rng, 100, 300);
  for (int i = 0; i < 300; ++i) Call(fuzz::FuzzSafetensors, RandomBytes(rng, rng.UniformInt(100)));
}

TEST(FuzzReplayTest, Tokenizer) {
  Rng rng(103);
  const std::vector<std::string> seeds = {
      "Hello world", "  \n\n\t  x  ", "<|im_start|>user\nHi<|im_end|>", "<|begin_of_text|><s>",
      "Grüße 😶‍🌫️ 你好 ١٢٣ e\xcc\x81", "def f(x):\n    return x'll 'S",
      std::string("\xf0\x9f\x9a", 3) + "\xff\xfe\xc0\xaf", std::string(500, ' ') + "a"};
  for (const std::string& s : seeds) Mutate(fuzz::FuzzTokenizer, s, rng, 20, 200);
  for (int i = 0; i < 500; ++i) Call(fuzz::FuzzTokenizer, RandomBytes(rng, rng.UniformInt(64)));
}

}  // namespace
}  // namespace banyan::model

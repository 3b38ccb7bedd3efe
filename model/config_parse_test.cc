// ModelConfig from config.json and GGUF metadata: RoPE scaling (llama3 keys,
// transformers 4 "rope_scaling" and 5 "rope_parameters", GGUF rope_freqs),
// token ids given as lists, and errors.
#include <cmath>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "model/gguf/gguf_file.h"
#include "model/gguf/gguf_model.h"
#include "model/safetensors/hf_model.h"
#include "model/testdata/test_files.h"
#include "sdk/base/status_testing.h"

namespace banyan::model {
namespace {

using ::banyan::testing::StatusIs;
using ::testing::HasSubstr;

constexpr char kLlama31[] = R"({"model_type": "llama", "vocab_size": 128256, "hidden_size": 4096,
  "intermediate_size": 14336, "num_hidden_layers": 32, "num_attention_heads": 32,
  "num_key_value_heads": 8, "rms_norm_eps": 1e-05, "rope_theta": 500000.0,
  "max_position_embeddings": 131072, "bos_token_id": 128000,
  "eos_token_id": [128001, 128008, 128009],
  "rope_scaling": {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                   "original_max_position_embeddings": 8192, "rope_type": "llama3"}})";

TEST(ConfigParseTest, Llama31ConfigJson) {
  BANYAN_ASSERT_OK_AND_ASSIGN(ModelConfig c, ParseHfConfig(kLlama31, ""));
  EXPECT_EQ(c.num_kv_heads, 8);
  EXPECT_EQ(c.head_dim, 128);
  EXPECT_FLOAT_EQ(c.rope_theta, 500000.0f);
  EXPECT_EQ(c.rope_scaling.type, RopeScaling::Type::kLlama3);
  EXPECT_FLOAT_EQ(c.rope_scaling.factor, 8.0f);
  EXPECT_EQ(c.rope_scaling.original_max_position, 8192);
  EXPECT_EQ(c.eos_token_id, 128001);
  EXPECT_FALSE(c.tie_word_embeddings);
  EXPECT_FALSE(c.attention_bias);
}

TEST(ConfigParseTest, TransformersFiveRopeParametersAndQwen2) {
  BANYAN_ASSERT_OK_AND_ASSIGN(
      ModelConfig c,
      ParseHfConfig(R"({"model_type": "qwen2", "vocab_size": 100, "hidden_size": 64,
        "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4,
        "num_key_value_heads": 2, "head_dim": 32, "tie_word_embeddings": true,
        "rope_parameters": {"rope_theta": 1000000.0, "rope_type": "default"}})",
                    R"({"eos_token_id": [7, 8], "bos_token_id": 3})"));
  EXPECT_EQ(c.architecture, Architecture::kQwen2);
  EXPECT_TRUE(c.attention_bias);
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_EQ(c.head_dim, 32);
  EXPECT_FLOAT_EQ(c.rope_theta, 1e6f);
  EXPECT_EQ(c.rope_scaling.type, RopeScaling::Type::kNone);
  EXPECT_EQ(c.eos_token_id, 7);
  EXPECT_EQ(c.bos_token_id, 3);
}

TEST(ConfigParseTest, Errors) {
  EXPECT_THAT(ParseHfConfig("[1]", ""), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(ParseHfConfig(R"({"model_type": "gemma"})", ""),
              StatusIs(absl::StatusCode::kUnimplemented, HasSubstr("gemma")));
  EXPECT_THAT(ParseHfConfig(R"({"model_type": "llama", "vocab_size": 10})", ""),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("hidden_size")));
  std::string yarn = kLlama31;
  yarn.replace(yarn.find("\"llama3\""), 8, "\"yarn\"");
  EXPECT_THAT(ParseHfConfig(yarn, ""), StatusIs(absl::StatusCode::kUnimplemented, HasSubstr("yarn")));
  std::string odd = kLlama31;
  odd.replace(odd.find("\"num_key_value_heads\": 8"), 24, "\"num_key_value_heads\": 5");
  EXPECT_THAT(ParseHfConfig(odd, ""), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("multiple")));
}

// The divisors Llama 3.1's converter writes as rope_freqs (one per frequency).
std::vector<float> Llama3RopeFreqs(double theta, int head_dim, double factor, double low,
                                   double high, double orig) {
  std::vector<float> out;
  for (int i = 0; i < head_dim / 2; ++i) {
    const double freq = std::pow(theta, -2.0 * i / head_dim), wavelen = 2 * M_PI / freq;
    if (wavelen < orig / high) {
      out.push_back(1.0f);
    } else if (wavelen > orig / low) {
      out.push_back(static_cast<float>(factor));
    } else {
      const double smooth = (orig / wavelen - low) / (high - low);
      out.push_back(static_cast<float>(1.0 / ((1 - smooth) / factor + smooth)));
    }
  }
  return out;
}

absl::StatusOr<ModelConfig> GgufConfig(const std::string& bytes) {
  auto g = GgufFile::Parse(absl::MakeConstSpan(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()));
  if (!g.ok()) return g.status();
  return GgufModelConfig(*g);
}

testing::GgufWriter Base() {
  testing::GgufWriter w;
  w.AddString("general.architecture", "llama");
  w.AddU32("llama.block_count", 2);
  w.AddU32("llama.embedding_length", 4096);
  w.AddU32("llama.feed_forward_length", 14336);
  w.AddU32("llama.attention.head_count", 32);
  w.AddU32("llama.attention.head_count_kv", 8);
  w.AddF32("llama.rope.freq_base", 500000.0f);
  w.AddU32("llama.vocab_size", 128256);
  return w;
}

TEST(ConfigParseTest, GgufRopeScaling) {
  testing::GgufWriter keys = Base();
  keys.AddString("llama.rope.scaling.type", "llama3");
  keys.AddF32("llama.rope.scaling.factor", 32.0f);
  keys.AddU32("llama.rope.scaling.original_context_length", 8192);
  BANYAN_ASSERT_OK_AND_ASSIGN(ModelConfig c, GgufConfig(keys.Finish()));
  EXPECT_EQ(c.rope_scaling.type, RopeScaling::Type::kLlama3);
  EXPECT_FLOAT_EQ(c.rope_scaling.factor, 32.0f);
  EXPECT_EQ(c.num_kv_heads, 8);
  EXPECT_EQ(c.head_dim, 128);

  testing::GgufWriter freqs = Base();
  freqs.AddTensor("rope_freqs.weight", {64}, 0,
                  testing::FloatsToBytes(Llama3RopeFreqs(500000.0, 128, 8, 1, 4, 8192)));
  BANYAN_ASSERT_OK_AND_ASSIGN(c, GgufConfig(freqs.Finish()));
  EXPECT_EQ(c.rope_scaling.type, RopeScaling::Type::kLlama3);
  EXPECT_FLOAT_EQ(c.rope_scaling.factor, 8.0f);
  EXPECT_FLOAT_EQ(c.rope_scaling.low_freq_factor, 1.0f);
  EXPECT_FLOAT_EQ(c.rope_scaling.high_freq_factor, 4.0f);
  EXPECT_EQ(c.rope_scaling.original_max_position, 8192);

  testing::GgufWriter odd = Base();
  odd.AddTensor("rope_freqs.weight", {64}, 0,
                testing::FloatsToBytes(Llama3RopeFreqs(500000.0, 128, 3.3, 1, 4, 8192)));
  EXPECT_THAT(GgufConfig(odd.Finish()), StatusIs(absl::StatusCode::kUnimplemented));

  testing::GgufWriter yarn = Base();
  yarn.AddString("llama.rope.scaling.type", "yarn");
  EXPECT_THAT(GgufConfig(yarn.Finish()), StatusIs(absl::StatusCode::kUnimplemented, HasSubstr("yarn")));
  testing::GgufWriter bad = Base();
  bad.AddU32("llama.attention.key_length", 7);
  EXPECT_THAT(GgufConfig(bad.Finish()), StatusIs(absl::StatusCode::kInvalidArgument));
}

}  // namespace
}  // namespace banyan::model

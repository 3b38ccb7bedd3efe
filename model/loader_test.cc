// The loader entry point: GGUF and safetensors give the same weights for the
// same model (RoPE rows un-permuted), the default model's tensors agree with
// gguf-py's dequantization, and bad files give specific codes.
#include "model/loader.h"

#include <cmath>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "model/default_model.h"
#include "model/testdata/test_files.h"
#include "model/testdata/tiny_models.h"
#include "nlohmann/json.hpp"
#include "sdk/base/status_testing.h"

namespace banyan::model {
namespace {

using ::banyan::testing::StatusIs;
using ::testing::AnyOf;
using ::testing::HasSubstr;
using testing::MakeTinyModel;
using testing::TinyModel;

std::string TempDir(const std::string& name) {
  const auto dir = std::filesystem::temp_directory_path() /
                   absl::StrCat("banyan_loader_test_", getpid(), "_", name);
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir.string();
}

void ExpectConfigsEqual(const ModelConfig& a, const ModelConfig& b) {
  EXPECT_EQ(a.architecture, b.architecture);
  EXPECT_EQ(a.vocab_size, b.vocab_size);
  EXPECT_EQ(a.hidden_size, b.hidden_size);
  EXPECT_EQ(a.intermediate_size, b.intermediate_size);
  EXPECT_EQ(a.num_layers, b.num_layers);
  EXPECT_EQ(a.num_q_heads, b.num_q_heads);
  EXPECT_EQ(a.num_kv_heads, b.num_kv_heads);
  EXPECT_EQ(a.head_dim, b.head_dim);
  EXPECT_FLOAT_EQ(a.rms_norm_eps, b.rms_norm_eps);
  EXPECT_FLOAT_EQ(a.rope_theta, b.rope_theta);
  EXPECT_EQ(a.tie_word_embeddings, b.tie_word_embeddings);
  EXPECT_EQ(a.attention_bias, b.attention_bias);
  EXPECT_EQ(a.bos_token_id, b.bos_token_id);
  EXPECT_EQ(a.eos_token_id, b.eos_token_id);
}

void ExpectWeightsMatch(const ModelWeights& w, const TinyModel& m, float tolerance) {
  ASSERT_EQ(w.tensors.size(), m.tensors.size());
  for (const auto& [name, tensor] : m.tensors) {
    auto it = w.tensors.find(name);
    ASSERT_NE(it, w.tensors.end()) << name;
    EXPECT_EQ(it->second.shape, tensor.first) << name;
    ASSERT_EQ(it->second.data.size(), tensor.second.size()) << name;
    for (size_t i = 0; i < tensor.second.size(); ++i) {
      ASSERT_NEAR(it->second.data[i], tensor.second[i], tolerance * std::fabs(tensor.second[i]))
          << name << "[" << i << "]";
    }
  }
}

struct Case {
  Architecture arch;
  int kv_heads;
  bool tied;
};

class RoundTripTest : public ::testing::TestWithParam<Case> {};

TEST_P(RoundTripTest, GgufAndSafetensorsGiveTheSameWeights) {
  const Case c = GetParam();
  const TinyModel m = MakeTinyModel(c.arch, c.kv_heads, c.tied, 17 + c.kv_heads);
  const std::string dir = TempDir("roundtrip");
  ASSERT_TRUE(testing::WriteFile(dir + "/m.gguf", testing::TinyModelGguf(m)));
  BANYAN_ASSERT_OK_AND_ASSIGN(ModelWeights from_gguf, LoadModelWeights(dir + "/m.gguf"));
  ExpectConfigsEqual(from_gguf.config, m.config);
  ExpectWeightsMatch(from_gguf, m, 0.0f);  // exact: un-permuted back to HF rows
  for (int shards : {1, 3}) {
    const std::string hf = absl::StrCat(dir, "/hf", shards);
    testing::WriteTinyModelDirectory(m, hf, shards, "F32");
    BANYAN_ASSERT_OK_AND_ASSIGN(ModelWeights from_hf, LoadModelWeights(hf));
    ExpectConfigsEqual(from_hf.config, m.config);
    ExpectWeightsMatch(from_hf, m, 0.0f);
  }
  for (const std::string dtype : {"F16", "BF16"}) {
    const std::string hf = dir + "/hf_" + dtype;
    testing::WriteTinyModelDirectory(m, hf, 2, dtype);
    BANYAN_ASSERT_OK_AND_ASSIGN(ModelWeights from_hf, LoadModelWeights(hf));
    ExpectWeightsMatch(from_hf, m, dtype == "F16" ? 1e-3f : 8e-3f);
  }
  std::filesystem::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(Models, RoundTripTest,
                         ::testing::Values(Case{Architecture::kLlama, 2, false},
                                           Case{Architecture::kLlama, 4, true},
                                           Case{Architecture::kMistral, 1, false},
                                           Case{Architecture::kQwen2, 2, true}));

TEST(LoaderTest, MissingPaths) {
  EXPECT_THAT(LoadModelWeights("/nonexistent/model.gguf"), StatusIs(absl::StatusCode::kNotFound));
  EXPECT_THAT(LoadTokenizer("/nonexistent"), StatusIs(absl::StatusCode::kNotFound));
  const std::string dir = TempDir("empty");
  EXPECT_THAT(LoadModelWeights(dir), StatusIs(absl::StatusCode::kNotFound, HasSubstr("config.json")));
  std::filesystem::remove_all(dir);
}

TEST(LoaderTest, TruncatedGgufIsDataLoss) {
  const std::string bytes = testing::TinyModelGguf(MakeTinyModel(Architecture::kLlama, 2, false, 3));
  const std::string dir = TempDir("trunc");
  // Every prefix up to the end of the header region, then a stride through the data.
  for (size_t len = 0; len < bytes.size(); len += (len < 4096 ? 1 : 997)) {
    ASSERT_TRUE(testing::WriteFile(dir + "/t.gguf", bytes.substr(0, len)));
    EXPECT_THAT(LoadModelWeights(dir + "/t.gguf"), StatusIs(absl::StatusCode::kDataLoss)) << len;
  }
  std::filesystem::remove_all(dir);
}

TEST(LoaderTest, BadGgufContents) {
  const std::string dir = TempDir("bad");
  std::string bytes = testing::TinyModelGguf(MakeTinyModel(Architecture::kLlama, 2, false, 4));
  std::string bad = bytes;
  bad[0] = 'X';
  ASSERT_TRUE(testing::WriteFile(dir + "/magic.gguf", bad));
  EXPECT_THAT(LoadModelWeights(dir + "/magic.gguf"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("magic")));
  bad = bytes;
  bad[4] = 9;  // version 9
  ASSERT_TRUE(testing::WriteFile(dir + "/version.gguf", bad));
  EXPECT_THAT(LoadModelWeights(dir + "/version.gguf"), StatusIs(absl::StatusCode::kUnimplemented));
  // Unknown architecture: rewrite general.architecture's value in place.
  bad = bytes;
  const size_t at = bad.find("llama", bad.find("general.architecture"));
  bad.replace(at, 5, "gptnx");
  ASSERT_TRUE(testing::WriteFile(dir + "/arch.gguf", bad));
  EXPECT_THAT(LoadModelWeights(dir + "/arch.gguf"),
              StatusIs(absl::StatusCode::kUnimplemented, HasSubstr("gptnx")));
  std::filesystem::remove_all(dir);
}

TEST(LoaderTest, ShapeMismatchAndUnsupportedQuantization) {
  const std::string dir = TempDir("shape");
  testing::GgufWriter w;
  w.AddString("general.architecture", "llama");
  w.AddU32("llama.block_count", 1);
  w.AddU32("llama.embedding_length", 32);
  w.AddU32("llama.feed_forward_length", 64);
  w.AddU32("llama.attention.head_count", 4);
  w.AddU32("llama.vocab_size", 8);
  // token_embd with the wrong width (64 instead of 32).
  w.AddTensor("token_embd.weight", {64, 8}, 0, std::string(64 * 8 * 4, '\0'));
  ASSERT_TRUE(testing::WriteFile(dir + "/shape.gguf", w.Finish()));
  EXPECT_THAT(LoadModelWeights(dir + "/shape.gguf"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("token_embd.weight")));
  testing::GgufWriter q;
  q.AddString("general.architecture", "llama");
  q.AddU32("llama.block_count", 1);
  q.AddU32("llama.embedding_length", 32);
  q.AddU32("llama.feed_forward_length", 64);
  q.AddU32("llama.attention.head_count", 4);
  q.AddU32("llama.vocab_size", 8);
  q.AddTensor("token_embd.weight", {32, 8}, 6, std::string(8 * 22, '\0'));  // Q5_0
  ASSERT_TRUE(testing::WriteFile(dir + "/quant.gguf", q.Finish()));
  EXPECT_THAT(LoadModelWeights(dir + "/quant.gguf"),
              StatusIs(absl::StatusCode::kUnimplemented, HasSubstr("Q5_0")));
  std::filesystem::remove_all(dir);
}

TEST(LoaderTest, BadSafetensorsDirectories) {
  const TinyModel m = MakeTinyModel(Architecture::kLlama, 2, false, 5);
  const std::string dir = TempDir("hf_bad");
  testing::WriteTinyModelDirectory(m, dir, 1, "F32");
  BANYAN_ASSERT_OK_AND_ASSIGN(std::string good, testing::ReadTestFile(dir + "/model.safetensors"));
  for (size_t len : {size_t{0}, size_t{7}, size_t{8}, size_t{100}, good.size() / 2, good.size() - 1}) {
    ASSERT_TRUE(testing::WriteFile(dir + "/model.safetensors", good.substr(0, len)));
    EXPECT_THAT(LoadModelWeights(dir), StatusIs(absl::StatusCode::kDataLoss)) << len;
  }
  std::string bad = good;
  bad[9] = '[';  // header JSON broken
  ASSERT_TRUE(testing::WriteFile(dir + "/model.safetensors", bad));
  EXPECT_THAT(LoadModelWeights(dir), StatusIs(absl::StatusCode::kDataLoss));
  // Unknown architecture and a shape that disagrees with config.json.
  ASSERT_TRUE(testing::WriteFile(dir + "/model.safetensors", good));
  BANYAN_ASSERT_OK_AND_ASSIGN(std::string config, testing::ReadTestFile(dir + "/config.json"));
  std::string other = config;
  other.replace(other.find("\"llama\""), 7, "\"gpt2\"");
  ASSERT_TRUE(testing::WriteFile(dir + "/config.json", other));
  EXPECT_THAT(LoadModelWeights(dir), StatusIs(absl::StatusCode::kUnimplemented, HasSubstr("gpt2")));
  other = config;
  other.replace(other.find("\"intermediate_size\": 48"), 23, "\"intermediate_size\": 40");
  ASSERT_TRUE(testing::WriteFile(dir + "/config.json", other));
  EXPECT_THAT(LoadModelWeights(dir), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("shape")));
  ASSERT_TRUE(testing::WriteFile(dir + "/config.json", config));
  // An unsupported dtype.
  std::vector<testing::SafetensorsEntry> entries;
  for (const auto& [name, t] : m.tensors) {
    entries.push_back({name, name == "model.norm.weight" ? "I32" : "F32", t.first,
                       testing::FloatsToBytes(t.second)});
  }
  ASSERT_TRUE(testing::WriteFile(dir + "/model.safetensors", testing::WriteSafetensors(entries)));
  EXPECT_THAT(LoadModelWeights(dir), StatusIs(absl::StatusCode::kUnimplemented, HasSubstr("I32")));
  // An index naming a file outside the directory.
  ASSERT_TRUE(testing::WriteFile(dir + "/model.safetensors.index.json",
                                 "{\"weight_map\": {\"a\": \"../x.safetensors\"}}"));
  EXPECT_THAT(LoadModelWeights(dir), StatusIs(absl::StatusCode::kDataLoss));
  std::filesystem::remove_all(dir);
}

TEST(DefaultModelLoadTest, ConfigAndTensorsMatchGgufPy) {
  auto path = FindDefaultModel();
  if (!path.ok()) GTEST_SKIP() << path.status();
  BANYAN_ASSERT_OK_AND_ASSIGN(ModelConfig c, LoadModelConfig(*path));
  EXPECT_EQ(c.architecture, Architecture::kLlama);
  EXPECT_EQ(c.vocab_size, 49152);
  EXPECT_EQ(c.hidden_size, 576);
  EXPECT_EQ(c.intermediate_size, 1536);
  EXPECT_EQ(c.num_layers, 30);
  EXPECT_EQ(c.num_q_heads, 9);
  EXPECT_EQ(c.num_kv_heads, 3);
  EXPECT_EQ(c.head_dim, 64);
  EXPECT_FLOAT_EQ(c.rope_theta, 100000.0f);
  EXPECT_NEAR(c.rms_norm_eps, 1e-5f, 1e-9f);
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_FALSE(c.attention_bias);
  EXPECT_EQ(c.eos_token_id, 2);
  EXPECT_EQ(c.max_position, 8192);

  BANYAN_ASSERT_OK_AND_ASSIGN(std::string ref_text,
                              testing::ReadTestFile(testing::SourceDir() +
                                                    "/model/testdata/smollm2_gguf_reference.json"));
  const auto ref = nlohmann::json::parse(ref_text);
  BANYAN_ASSERT_OK_AND_ASSIGN(ModelWeights w, LoadModelWeights(*path));
  EXPECT_EQ(w.tensors.size(), 2u + 9u * 30u);
  for (auto it = ref["tensors"].begin(); it != ref["tensors"].end(); ++it) {
    SCOPED_TRACE(it.key());
    auto t = w.tensors.find(it.key());
    ASSERT_NE(t, w.tensors.end());
    EXPECT_EQ(t->second.shape, (*it)["shape"].get<std::vector<int64_t>>());
    double sum = 0, sum_sq = 0;
    for (float v : t->second.data) {
      sum += v;
      sum_sq += double{v} * v;
    }
    EXPECT_NEAR(sum, (*it)["sum"].get<double>(), 1e-6 * (*it)["sum_sq"].get<double>() + 1e-6);
    EXPECT_NEAR(sum_sq, (*it)["sum_sq"].get<double>(), 1e-6 * (*it)["sum_sq"].get<double>());
    const auto index = (*it)["index"].get<std::vector<int64_t>>();
    const auto value = (*it)["value"].get<std::vector<double>>();
    for (size_t k = 0; k < index.size(); ++k) {
      EXPECT_NEAR(t->second.data[index[k]], value[k], 1e-6 * std::fabs(value[k]) + 1e-9) << index[k];
    }
  }
}

}  // namespace
}  // namespace banyan::model

// The CPU backend against Hugging Face transformers' own fp32 forward: tiny
// randomly initialized LlamaForCausalLM / Qwen2ForCausalLM checkpoints saved
// with save_pretrained and their logits, made on the GPU machine by
// model/testdata/make_tiny_hf_models.py (GQA 4:1 and 3:1, an odd number of
// heads, tied and untied embeddings, QKV bias, llama3 and linear RoPE
// scaling). Loaded through model/loader.h like any HF directory. Checked both
// as one causal prefill and as a prefill of half the sequence followed by
// one-token paged decode steps.
#include <cmath>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "model/cpu/cpu_backend.h"
#include "model/cpu/forked_branches.h"
#include "model/loader.h"
#include "sdk/base/status_testing.h"

namespace banyan::model {
namespace {

constexpr double kTolerance = 1e-4;  // relative to the row's largest |logit| (at least 1)

struct Fixture {
  std::vector<std::vector<int32_t>> sequences;
  std::vector<float> logits;  // [sequences][seq_len][vocab]
};

Fixture ReadFixture(const std::string& dir) {
  Fixture f;
  std::ifstream tokens(dir + "/tokens.txt");
  EXPECT_TRUE(tokens.good()) << "missing " << dir << "/tokens.txt";
  for (std::string line; std::getline(tokens, line);) {
    std::istringstream in(line);
    std::vector<int32_t> seq;
    for (int32_t t; in >> t;) seq.push_back(t);
    if (!seq.empty()) f.sequences.push_back(std::move(seq));
  }
  std::ifstream bin(dir + "/logits.f32", std::ios::binary | std::ios::ate);
  EXPECT_TRUE(bin.good()) << "missing " << dir << "/logits.f32";
  const std::streamsize bytes = bin.tellg();
  bin.seekg(0);
  f.logits.resize(static_cast<size_t>(bytes) / sizeof(float));
  bin.read(reinterpret_cast<char*>(f.logits.data()), bytes);
  return f;
}

// Largest |got - want| relative to max(1, max |want|) over one row.
double RowError(const float* want, const float* got, int vocab) {
  double scale = 1.0, err = 0.0;
  for (int v = 0; v < vocab; ++v) scale = std::max(scale, std::fabs(double{want[v]}));
  for (int v = 0; v < vocab; ++v) err = std::max(err, std::fabs(double{got[v]} - want[v]));
  return err / scale;
}

class HfReferenceTest : public ::testing::TestWithParam<const char*> {};

TEST_P(HfReferenceTest, CpuLogitsMatchTransformers) {
  const std::string dir = std::string(BANYAN_SOURCE_DIR) + "/model/testdata/hf_tiny/" + GetParam();
  BANYAN_ASSERT_OK_AND_ASSIGN(ModelWeights loaded, LoadModelWeights(dir));
  auto weights = std::make_shared<const ModelWeights>(std::move(loaded));
  const ModelConfig& c = weights->config;
  BANYAN_ASSERT_OK_AND_ASSIGN(auto backend, CreateCpuBackend(weights, {.num_threads = 2}));
  const Fixture f = ReadFixture(dir);
  ASSERT_FALSE(f.sequences.empty());
  const int vocab = c.vocab_size;
  const size_t len = f.sequences[0].size();
  ASSERT_EQ(f.logits.size(), f.sequences.size() * len * vocab);
  double worst = 0;
  int top1_agree = 0, positions = 0;
  for (size_t s = 0; s < f.sequences.size(); ++s) {
    const std::vector<int32_t>& seq = f.sequences[s];
    const float* want = f.logits.data() + s * len * vocab;
    // (a) One causal prefill of the whole sequence.
    {
      std::vector<char> pool_bytes(KvLayoutFor(c, 8, 16, DType::kF32).TotalBytes());
      KvCache kv{KvLayoutFor(c, 8, 16, DType::kF32), DType::kF32, pool_bytes.data()};
      ForkedBranches fb(16, 8);
      BANYAN_ASSERT_OK(fb.SetPrompt(seq));
      const Step step = fb.PrefillStep(/*all_logits=*/true);
      std::vector<float> got(len * vocab, std::nanf(""));
      BANYAN_ASSERT_OK(backend->Forward(step.batch(), kv, absl::MakeSpan(got)));
      for (size_t t = 0; t < len; ++t) {
        const double e = RowError(want + t * vocab, got.data() + t * vocab, vocab);
        worst = std::max(worst, e);
        EXPECT_LE(e, kTolerance) << GetParam() << " sequence " << s << " position " << t;
        const float* w = want + t * vocab;
        const float* g = got.data() + t * vocab;
        top1_agree += (std::max_element(w, w + vocab) - w) == (std::max_element(g, g + vocab) - g);
        ++positions;
      }
    }
    // (b) Prefill of the first half (page size 4: a partial page is forked),
    // then the rest one token per step through the paged decode path.
    {
      const size_t half = len / 2 + 1;
      std::vector<char> pool_bytes(KvLayoutFor(c, 16, 4, DType::kF32).TotalBytes());
      KvCache kv{KvLayoutFor(c, 16, 4, DType::kF32), DType::kF32, pool_bytes.data()};
      ForkedBranches fb(4, 16);
      BANYAN_ASSERT_OK(fb.SetPrompt(absl::MakeConstSpan(seq.data(), half)));
      std::vector<float> got(vocab);
      BANYAN_ASSERT_OK(backend->Forward(fb.PrefillStep().batch(), kv, absl::MakeSpan(got)));
      EXPECT_LE(RowError(want + (half - 1) * vocab, got.data(), vocab), kTolerance);
      BANYAN_ASSERT_OK_AND_ASSIGN(auto copies, fb.Fork(1));
      for (auto [src, dst] : copies) CopyKvPage(kv, src, dst);
      for (size_t t = half; t < len; ++t) {
        BANYAN_ASSERT_OK_AND_ASSIGN(const Step step, fb.DecodeStep({seq[t]}));
        BANYAN_ASSERT_OK(backend->Forward(step.batch(), kv, absl::MakeSpan(got)));
        const double e = RowError(want + t * vocab, got.data(), vocab);
        worst = std::max(worst, e);
        EXPECT_LE(e, kTolerance) << GetParam() << " decode, sequence " << s << " position " << t;
      }
    }
  }
  EXPECT_EQ(top1_agree, positions);
  std::cout << GetParam() << ": worst relative logit error " << worst << ", top-1 agreement " << top1_agree
            << "/" << positions << "\n";
}

INSTANTIATE_TEST_SUITE_P(TinyModels, HfReferenceTest,
                         ::testing::Values("llama_gqa4", "llama3_odd_tied", "qwen2_gqa3_tied",
                                           "qwen2_gqa4_linear"));

}  // namespace
}  // namespace banyan::model

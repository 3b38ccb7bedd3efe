// The default model (SmolLM2-135M-Instruct, GGUF Q4_1) through our GGUF loader
// and CPU backend, against HF transformers loading the same .gguf in fp32
// (tests/hf/data/smollm2_gguf, made on the GPU machine by
// tests/hf/check_gguf_logits.py): 398 positions of texts, a chat prompt and
// random ids. Both sides dequantize the same Q4_1 blocks to fp32, so the
// logits agree to fp32 rounding of two different summation orders.
#include <cmath>
#include <cstring>
#include <memory>

#include "gtest/gtest.h"
#include "model/cpu/cpu_backend.h"
#include "model/default_model.h"
#include "model/loader.h"
#include "nlohmann/json.hpp"
#include "sdk/base/status_testing.h"
#include "tests/hf/reference_data.h"

namespace banyan {
namespace {

TEST(DefaultModelLogitsTest, CpuBackendMatchesTransformersOnTheSameGguf) {
  auto path = model::FindDefaultModel();
  if (!path.ok()) GTEST_SKIP() << path.status();
  const std::string dir = testing::SourceDir() + "/tests/hf/data/smollm2_gguf";
  BANYAN_ASSERT_OK_AND_ASSIGN(std::string json_text, testing::ReadFileBytes(dir + "/reference.json"));
  BANYAN_ASSERT_OK_AND_ASSIGN(std::string data, testing::ReadFileBytes(dir + "/data.bin"));
  const nlohmann::json ref = nlohmann::json::parse(json_text);

  BANYAN_ASSERT_OK_AND_ASSIGN(model::ModelWeights loaded, model::LoadModelWeights(*path));
  auto weights = std::make_shared<const model::ModelWeights>(std::move(loaded));
  const int vocab = weights->config.vocab_size;
  ASSERT_EQ(vocab, ref["vocab_size"].get<int>());
  BANYAN_ASSERT_OK_AND_ASSIGN(auto backend, model::CreateCpuBackend(weights, {.num_threads = 2}));
  const int topk = ref["topk"].get<int>();

  auto array_at = [&](const nlohmann::json& a) { return data.data() + a["offset"].get<size_t>(); };
  int positions = 0, top1_agree = 0;
  double worst_topk = 0, worst_lse = 0, worst_full = 0;
  for (const auto& seq : ref["seqs"]) {
    const std::vector<int32_t> ids = seq["ids"].get<std::vector<int32_t>>();
    BANYAN_ASSERT_OK_AND_ASSIGN(std::vector<float> logits,
                                testing::PrefillLogits(*backend, ids, DType::kF32));
    std::vector<int32_t> want_ids(ids.size() * topk);
    std::vector<float> want_logits(ids.size() * topk), want_lse(ids.size());
    std::memcpy(want_ids.data(), array_at(seq["arrays"]["topk_ids"]), want_ids.size() * 4);
    std::memcpy(want_logits.data(), array_at(seq["arrays"]["topk_logits"]), want_logits.size() * 4);
    std::memcpy(want_lse.data(), array_at(seq["arrays"]["lse"]), want_lse.size() * 4);
    for (size_t t = 0; t < ids.size(); ++t) {
      const float* row = logits.data() + t * vocab;
      int argmax = 0;
      double max_logit = row[0], sum = 0;
      for (int v = 1; v < vocab; ++v) {
        if (row[v] > row[argmax]) argmax = v;
        max_logit = std::max(max_logit, double{row[v]});
      }
      for (int v = 0; v < vocab; ++v) sum += std::exp(double{row[v]} - max_logit);
      const double lse = max_logit + std::log(sum);
      ++positions;
      top1_agree += argmax == want_ids[t * topk];
      const double scale = std::max(1.0, std::fabs(double{want_logits[t * topk]}));
      for (int k = 0; k < topk; ++k) {
        const double got = row[want_ids[t * topk + k]];
        worst_topk = std::max(worst_topk, std::fabs(got - want_logits[t * topk + k]) / scale);
      }
      worst_lse = std::max(worst_lse, std::fabs(lse - want_lse[t]) / std::max(1.0, std::fabs(double{want_lse[t]})));
    }
    if (seq.value("full_last", false)) {
      std::vector<float> want_full(vocab);
      std::memcpy(want_full.data(), array_at(seq["arrays"]["last_logits"]), vocab * 4);
      const float* row = logits.data() + (ids.size() - 1) * vocab;
      double scale = 1, err = 0;
      for (int v = 0; v < vocab; ++v) scale = std::max(scale, std::fabs(double{want_full[v]}));
      for (int v = 0; v < vocab; ++v) err = std::max(err, std::fabs(double{row[v]} - want_full[v]));
      worst_full = std::max(worst_full, err / scale);
    }
  }
  ASSERT_EQ(positions, ref["positions"].get<int>());
  const double agreement = static_cast<double>(top1_agree) / positions;
  std::printf("default model vs transformers: %d positions, top-1 agreement %.4f, worst top-%d logit "
              "error %.2e, worst lse error %.2e, worst full-row error %.2e\n",
              positions, agreement, topk, worst_topk, worst_lse, worst_full);
  EXPECT_GE(agreement, 0.99);
  EXPECT_LT(worst_topk, 1e-3);
  EXPECT_LT(worst_lse, 1e-3);
  EXPECT_LT(worst_full, 1e-3);
}

}  // namespace
}  // namespace banyan

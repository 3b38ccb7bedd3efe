// The default model's GGUF (SmolLM2-135M-Instruct, Q4_1) on the CUDA backend
// (bf16 weights and activations, fp32 accumulation) against the CPU backend
// (fp32) on the same loaded weights: top-1 agreement >= 99% and the logits'
// relative L2 error per position, for three precision settings of the CUDA
// backend (model/cuda/cuda_backend.h): bf16 (the default), split bf16 hi + lo
// activations, and split activations with split (hi + lo) weights, the
// high-precision mode, which must reach the 99%. Inputs:
// every sequence of the transformers reference (tests/hf/data/smollm2_gguf:
// four texts, a chat prompt, four runs of random ids; 398 positions) and two
// longer texts below (a story, and a chat answer in the model's ChatML
// format), tokenized by our GGUF tokenizer. The CUDA top-1 is also counted
// against transformers' own top-1 on the reference sequences.
//
// The model is found through $BANYAN_TEST_MODEL (a .gguf path) when set, else
// the default model's cache (model/default_model.h, $BANYAN_MODEL_DIR); the
// test skips without a model or without a GPU. GPU label.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "sdk/base/half.h"
#include "model/cpu/cpu_backend.h"
#include "model/cuda/cuda_backend.h"
#include "model/default_model.h"
#include "model/loader.h"
#include "nlohmann/json.hpp"
#include "sdk/base/status_testing.h"
#include "sdk/gpu/gpu_test_util.h"
#include "tests/hf/reference_data.h"

namespace banyan {
namespace {

constexpr char kLongText[] =
    "The old lighthouse keeper climbed the spiral stairs every evening at dusk. He carried a tin "
    "of oil, a rag, and a small notebook in which he wrote the weather, the ships he saw, and any "
    "thought that seemed worth keeping. Over forty years the notebooks filled two shelves of the "
    "cottage below.\n\nOne winter a storm pushed the sea over the harbour wall. The keeper stayed "
    "awake for three nights, trimming the wick and winding the clockwork that turned the lens. On "
    "the fourth morning a fishing boat limped into the bay with a broken mast, and its crew walked "
    "up the hill to thank him. He made them tea, showed them the notebooks, and asked them to "
    "describe the storm from the water, so that he could write it down properly.\n\n"
    "Questions for discussion:\n1. Why does the keeper write down what he sees?\n2. What does the "
    "visit of the fishermen change for him?\n3. Describe a routine of your own that gives you "
    "comfort.\n\nA short answer to the first question might be: because writing turns a long, "
    "lonely watch into a record that others can share. The second answer depends on the reader; "
    "some say the visit shows him that his work matters, others that it shows how little he "
    "needed thanks. In programming terms, the notebook is a log file: an append-only record of "
    "events, read rarely, but priceless on the day something goes wrong.\n\n"
    "def summarize(log):\n    counts = {}\n    for line in log:\n        kind = line.split(':')[0]\n"
    "        counts[kind] = counts.get(kind, 0) + 1\n    return sorted(counts.items(), key=lambda kv: "
    "-kv[1])\n";

constexpr char kSecondText[] =
    "<|im_start|>user\nExplain how a hash table works, and when I should use one.<|im_end|>\n"
    "<|im_start|>assistant\nA hash table stores key-value pairs in an array of buckets. To insert a "
    "pair, it computes a hash of the key, a number derived from the key's bytes, and uses that "
    "number modulo the array's length to choose a bucket. Looking a key up repeats the same "
    "computation, so on average both operations take constant time, no matter how many pairs the "
    "table holds.\n\nTwo different keys can land in the same bucket; this is called a collision. "
    "Separate chaining keeps a small list in every bucket, while open addressing probes the next "
    "free slot instead. When the table grows too full, say past three quarters of its capacity, it "
    "allocates a larger array and moves every pair: this resizing is expensive, but it happens "
    "rarely enough that the average cost per insertion stays constant.\n\nUse a hash table when you "
    "need fast lookups by an exact key: counting words in a document, caching the results of "
    "expensive function calls, detecting duplicates, or mapping user names to records. Prefer a "
    "sorted structure, such as a balanced tree, when you need the keys in order or want to find all "
    "keys within a range. For example, in Python:\n\n"
    "inventory = {\"apples\": 12, \"pears\": 7}\ninventory[\"plums\"] = 30\n"
    "print(inventory.get(\"kiwis\", 0))  # prints 0\n\n"
    "Dictionaries in Python, HashMap in Java and std::unordered_map in C++ are all hash tables. "
    "The main risks are a poor hash function, which puts many keys in a few buckets, and the memory "
    "overhead of keeping the array partly empty.<|im_end|>\n";

absl::StatusOr<std::string> ModelPath() {
  if (const char* p = std::getenv("BANYAN_TEST_MODEL"); p != nullptr && *p != '\0') return std::string(p);
  return model::FindDefaultModel();
}

// Top-1 agreement and per-position logits error of `got` against `want`,
// and the reference's top-2 margin (in logits) at every position and at the
// positions where the top-1 differs: disagreements on near-ties show there.
struct Tally {
  int positions = 0;
  int agree = 0;
  std::vector<double> rel_err;
  std::vector<double> margins, flipped_margins;

  void Add(const float* want, const float* got, int vocab) {
    double err = 0, norm = 0;
    for (int v = 0; v < vocab; ++v) {
      err += (double{got[v]} - want[v]) * (double{got[v]} - want[v]);
      norm += double{want[v]} * want[v];
    }
    const int top = static_cast<int>(std::max_element(want, want + vocab) - want);
    double second = -INFINITY;
    for (int v = 0; v < vocab; ++v) {
      if (v != top) second = std::max(second, double{want[v]});
    }
    margins.push_back(want[top] - second);
    ++positions;
    const bool same = static_cast<int>(std::max_element(got, got + vocab) - got) == top;
    agree += same;
    if (!same) flipped_margins.push_back(want[top] - second);
    rel_err.push_back(std::sqrt(err / norm));
  }
  double agreement() const { return static_cast<double>(agree) / positions; }
  void Print(const char* what) {
    std::sort(rel_err.begin(), rel_err.end());
    std::sort(margins.begin(), margins.end());
    std::sort(flipped_margins.begin(), flipped_margins.end());
    std::printf("%-52s %4d positions: top-1 %d/%d = %.4f; logits rel L2 median %.2e, p99 %.2e, max %.2e\n",
                what, positions, agree, positions, agreement(), rel_err[rel_err.size() / 2],
                rel_err[rel_err.size() * 99 / 100], rel_err.back());
    std::printf("%-52s reference top-2 margin: median %.3f, 1st percentile %.4f; at the %zu flips:", "",
                margins[margins.size() / 2], margins[margins.size() / 100], flipped_margins.size());
    for (double m : flipped_margins) std::printf(" %.4f", m);
    std::printf("\n");
  }
};

struct Seq {
  std::string source;             // "text", "chat", "random" (the reference's) or "long text"
  std::vector<int32_t> ids;
  std::vector<int32_t> hf_top1;   // transformers' top-1 per position; empty for the long texts
};

// What every test here shares, loaded once: the model (fp32, as the CPU
// backend runs it, and with every tensor rounded to bf16, as the CUDA backend
// holds it), the sequences, and the CPU backend's logits for both.
struct Shared {
  std::shared_ptr<const model::ModelWeights> weights;
  std::vector<Seq> seqs;
  std::vector<std::vector<float>> cpu_f32;        // per sequence [len][vocab]
  std::vector<std::vector<float>> cpu_bf16_weights;
};

absl::Status LoadShared(const std::string& path, Shared& out) {
  BANYAN_ASSIGN_OR_RETURN(model::ModelWeights loaded, model::LoadModelWeights(path));
  BANYAN_ASSIGN_OR_RETURN(model::ModelWeights rounded, model::LoadModelWeights(path));
  for (auto& [name, tensor] : rounded.tensors) {
    for (float& x : tensor.data) x = static_cast<float>(Bf16(x));
  }
  out.weights = std::make_shared<const model::ModelWeights>(std::move(loaded));
  auto rounded_ptr = std::make_shared<const model::ModelWeights>(std::move(rounded));
  BANYAN_ASSIGN_OR_RETURN(auto tokenizer, model::LoadTokenizer(path));

  const std::string dir = testing::SourceDir() + "/tests/hf/data/smollm2_gguf";
  BANYAN_ASSIGN_OR_RETURN(std::string json_text, testing::ReadFileBytes(dir + "/reference.json"));
  BANYAN_ASSIGN_OR_RETURN(std::string data, testing::ReadFileBytes(dir + "/data.bin"));
  const nlohmann::json ref = nlohmann::json::parse(json_text);
  if (ref["vocab_size"].get<int>() != out.weights->config.vocab_size) {
    return absl::FailedPreconditionError("the reference data belongs to another model");
  }
  const int topk = ref["topk"].get<int>();
  for (const auto& s : ref["seqs"]) {
    Seq seq{s["source"].get<std::string>(), s["ids"].get<std::vector<int32_t>>(), {}};
    const char* topk_ids = data.data() + s["arrays"]["topk_ids"]["offset"].get<size_t>();
    for (size_t t = 0; t < seq.ids.size(); ++t) {
      int32_t id;
      std::memcpy(&id, topk_ids + (t * topk) * 4, 4);
      seq.hf_top1.push_back(id);
    }
    out.seqs.push_back(std::move(seq));
  }
  for (const char* text : {kLongText, kSecondText}) {
    BANYAN_ASSIGN_OR_RETURN(std::vector<int32_t> ids, tokenizer->Encode(text));
    out.seqs.push_back({"long text", ids, {}});
  }
  BANYAN_ASSIGN_OR_RETURN(auto cpu, model::CreateCpuBackend(out.weights, {}));
  BANYAN_ASSIGN_OR_RETURN(auto cpu_rounded, model::CreateCpuBackend(rounded_ptr, {}));
  for (const Seq& seq : out.seqs) {
    BANYAN_ASSIGN_OR_RETURN(std::vector<float> a, testing::PrefillLogits(*cpu, seq.ids, DType::kF32));
    BANYAN_ASSIGN_OR_RETURN(std::vector<float> b, testing::PrefillLogits(*cpu_rounded, seq.ids, DType::kF32));
    out.cpu_f32.push_back(std::move(a));
    out.cpu_bf16_weights.push_back(std::move(b));
  }
  return absl::OkStatus();
}

class DefaultModelCudaTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto path = ModelPath();
    if (!path.ok()) {
      skip_reason_ = new std::string(std::string(path.status().message()));
      return;
    }
    shared_ = new Shared;
    load_status_ = new absl::Status(LoadShared(*path, *shared_));
  }
  static void TearDownTestSuite() {
    delete shared_;
    delete load_status_;
    delete skip_reason_;
    shared_ = nullptr;
    load_status_ = nullptr;
    skip_reason_ = nullptr;
  }
  void SetUp() override {
    if (skip_reason_ != nullptr) GTEST_SKIP() << *skip_reason_;
    BANYAN_ASSERT_OK(*load_status_);
  }
  static Shared* shared_;
  static absl::Status* load_status_;
  static std::string* skip_reason_;
};
Shared* DefaultModelCudaTest::shared_ = nullptr;
absl::Status* DefaultModelCudaTest::load_status_ = nullptr;
std::string* DefaultModelCudaTest::skip_reason_ = nullptr;

// CPU only: what rounding the weights to bf16 alone (fp32 arithmetic
// otherwise) does to the model. The model's Q4_1 blocks dequantize to values
// (d * q + m, d and m fp16) that bf16 cannot hold, so this is the part of the
// CUDA backend's difference from the fp32 CPU backend that no activation
// precision can remove.
TEST_F(DefaultModelCudaTest, Bf16WeightRoundingAloneOnCpu) {
  const int vocab = shared_->weights->config.vocab_size;
  Tally tally;
  for (size_t s = 0; s < shared_->seqs.size(); ++s) {
    for (size_t t = 0; t < shared_->seqs[s].ids.size(); ++t) {
      tally.Add(shared_->cpu_f32[s].data() + t * vocab, shared_->cpu_bf16_weights[s].data() + t * vocab, vocab);
    }
  }
  tally.Print("CPU, bf16-rounded weights vs fp32 weights");
  EXPECT_GE(tally.positions, 1000);
  EXPECT_GE(tally.agreement(), 0.97);
}

TEST_F(DefaultModelCudaTest, CudaBackendAgreesWithCpuBackend) {
  BANYAN_SKIP_WITHOUT_GPU();
  const int vocab = shared_->weights->config.vocab_size;
  struct Mode {
    std::string name;
    model::CudaBackendOptions options;
    double bar;  // top-1 agreement with the fp32 CPU backend that must be reached
  };
  // The default mode's bar: measured on an H100 (bench/RESULTS.md "CUDA
  // numerics, session 2" and "CUDA high precision"): 98.6% (bf16) and 99.2%
  // (split activations), all flips on near-ties. Rounding the weights alone
  // to bf16 flips 0.7% (Bf16WeightRoundingAloneOnCpu), bf16 KV cache and
  // attention most of the rest (tests/hf/bf16_error_sources.py --gguf), so
  // the bar there is 98%. Split weights remove the weight rounding: the
  // issue's 99% (H100: 99.29%; the replay predicts 99.38%).
  const std::vector<Mode> modes = {
      {"bf16", {.activations = model::Activations::kBf16}, 0.98},
      {"split-bf16", {.activations = model::Activations::kSplitBf16}, 0.98},
      {"split-all",
       {.activations = model::Activations::kSplitBf16, .weights = model::Weights::kSplitBf16}, 0.99},
  };
  for (const Mode& m : modes) {
    const std::string& mode = m.name;
    BANYAN_ASSERT_OK_AND_ASSIGN(auto gpu, model::CreateCudaBackend(*shared_->weights, m.options));
    Tally vs_f32, vs_f32_text, vs_f32_random, vs_rounded, vs_hf;
    for (size_t s = 0; s < shared_->seqs.size(); ++s) {
      const Seq& seq = shared_->seqs[s];
      BANYAN_ASSERT_OK_AND_ASSIGN(std::vector<float> got, testing::PrefillLogits(*gpu, seq.ids, DType::kBf16));
      for (size_t t = 0; t < seq.ids.size(); ++t) {
        const float* g = got.data() + t * vocab;
        for (int v = 0; v < vocab; ++v) ASSERT_TRUE(std::isfinite(g[v])) << seq.source << " position " << t;
        const float* want = shared_->cpu_f32[s].data() + t * vocab;
        vs_f32.Add(want, g, vocab);
        (seq.source == "random" ? vs_f32_random : vs_f32_text).Add(want, g, vocab);
        vs_rounded.Add(shared_->cpu_bf16_weights[s].data() + t * vocab, g, vocab);
        if (!seq.hf_top1.empty()) {
          ++vs_hf.positions;
          vs_hf.agree += std::max_element(g, g + vocab) - g == seq.hf_top1[t];
        }
      }
    }
    vs_f32.Print((mode + ": CUDA vs CPU (fp32 weights)").c_str());
    vs_f32_text.Print((mode + ":   texts, chat, long texts").c_str());
    vs_f32_random.Print((mode + ":   random ids").c_str());
    vs_rounded.Print((mode + ": CUDA vs CPU (bf16-rounded weights)").c_str());
    std::printf("%s: CUDA top-1 vs transformers (fp32, same GGUF): %d/%d = %.4f\n", mode.c_str(), vs_hf.agree,
                vs_hf.positions, vs_hf.agreement());
    EXPECT_GE(vs_f32.positions, 1000);
    EXPECT_GE(vs_f32.agreement(), m.bar) << mode;
    EXPECT_GE(vs_rounded.agreement(), 0.98) << mode;
    EXPECT_GE(vs_hf.agreement(), 0.97) << mode;
    EXPECT_LT(vs_f32.rel_err[vs_f32.rel_err.size() / 2], 2e-2) << mode;
  }
}

}  // namespace
}  // namespace banyan

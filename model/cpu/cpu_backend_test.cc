// The CPU backend against an independent dense double-precision forward pass
// (full causal attention over the whole sequence, no pages), for prefill and
// for paged decode of forked branches (shared prompt pages + copy-on-write
// tail + private pages), and the bad-input contract of model/forward.h.
#include "model/cpu/cpu_backend.h"

#include <cmath>
#include <limits>
#include <memory>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "model/cpu/forked_branches.h"
#include "model/cpu/random_weights.h"
#include "sdk/base/rng.h"
#include "sdk/base/status_testing.h"

namespace banyan::model {
namespace {

using ::banyan::testing::StatusIs;

// ---- The reference: straightforward double-precision Llama forward ----------

using Vec = std::vector<double>;

const std::vector<float>& T(const ModelWeights& w, const std::string& name) {
  return w.tensors.at(name).data;
}

// y[o] = sum_k W[o][k] x[k] (+ b[o]).
Vec Linear(const std::vector<float>& W, const Vec& x, int64_t out, const std::vector<float>* b = nullptr) {
  const int64_t in = static_cast<int64_t>(x.size());
  Vec y(out);
  for (int64_t o = 0; o < out; ++o) {
    double acc = b ? (*b)[o] : 0.0;
    for (int64_t k = 0; k < in; ++k) acc += double{W[o * in + k]} * x[k];
    y[o] = acc;
  }
  return y;
}

Vec Norm(const Vec& x, const std::vector<float>& w, double eps) {
  double ss = 0;
  for (double v : x) ss += v * v;
  const double inv = 1.0 / std::sqrt(ss / x.size() + eps);
  Vec y(x.size());
  for (size_t i = 0; i < x.size(); ++i) y[i] = x[i] * inv * w[i];
  return y;
}

double InvFreq(const ModelConfig& c, int i) {
  double f = std::pow(double{c.rope_theta}, -2.0 * i / c.head_dim);
  const RopeScaling& s = c.rope_scaling;
  if (s.type == RopeScaling::Type::kLinear) f /= s.factor;
  if (s.type == RopeScaling::Type::kLlama3) {
    const double wavelen = 2 * M_PI / f;
    const double lo = s.original_max_position / double{s.low_freq_factor};
    const double hi = s.original_max_position / double{s.high_freq_factor};
    if (wavelen > lo) {
      f /= s.factor;
    } else if (wavelen >= hi) {
      const double sm = (s.original_max_position / wavelen - s.low_freq_factor) /
                        (s.high_freq_factor - s.low_freq_factor);
      f = (1 - sm) * f / s.factor + sm * f;
    }
  }
  return f;
}

void Rope(const ModelConfig& c, Vec& v, int heads, int pos) {
  const int d = c.head_dim, half = d / 2;
  for (int h = 0; h < heads; ++h) {
    for (int i = 0; i < half; ++i) {
      const double a = pos * InvFreq(c, i);
      const double x0 = v[h * d + i], x1 = v[h * d + i + half];
      v[h * d + i] = x0 * std::cos(a) - x1 * std::sin(a);
      v[h * d + i + half] = x1 * std::cos(a) + x0 * std::sin(a);
    }
  }
}

// Logits [tokens.size()][vocab] of a causal pass over `tokens` from position 0.
std::vector<Vec> ReferenceForward(const ModelWeights& w, const std::vector<int32_t>& tokens) {
  const ModelConfig& c = w.config;
  const int L = static_cast<int>(tokens.size()), H = c.hidden_size, d = c.head_dim;
  const int hq = c.num_q_heads, hk = c.num_kv_heads, group = hq / hk;
  const bool bias = c.attention_bias || c.architecture == Architecture::kQwen2;
  std::vector<Vec> x(L, Vec(H));
  for (int t = 0; t < L; ++t) {
    for (int i = 0; i < H; ++i) x[t][i] = T(w, "model.embed_tokens.weight")[int64_t{tokens[t]} * H + i];
  }
  for (int layer = 0; layer < c.num_layers; ++layer) {
    const std::string p = "model.layers." + std::to_string(layer) + ".";
    std::vector<Vec> q(L), k(L), v(L);
    for (int t = 0; t < L; ++t) {
      const Vec h = Norm(x[t], T(w, p + "input_layernorm.weight"), c.rms_norm_eps);
      q[t] = Linear(T(w, p + "self_attn.q_proj.weight"), h, hq * d, bias ? &T(w, p + "self_attn.q_proj.bias") : nullptr);
      k[t] = Linear(T(w, p + "self_attn.k_proj.weight"), h, hk * d, bias ? &T(w, p + "self_attn.k_proj.bias") : nullptr);
      v[t] = Linear(T(w, p + "self_attn.v_proj.weight"), h, hk * d, bias ? &T(w, p + "self_attn.v_proj.bias") : nullptr);
      Rope(c, q[t], hq, t);
      Rope(c, k[t], hk, t);
    }
    for (int t = 0; t < L; ++t) {
      Vec attn(hq * d, 0.0);
      for (int h = 0; h < hq; ++h) {
        const int kh = h / group;
        Vec s(t + 1);
        double mx = -1e300;
        for (int u = 0; u <= t; ++u) {
          double dot = 0;
          for (int i = 0; i < d; ++i) dot += q[t][h * d + i] * k[u][kh * d + i];
          s[u] = dot / std::sqrt(double(d));
          mx = std::max(mx, s[u]);
        }
        double z = 0;
        for (int u = 0; u <= t; ++u) z += (s[u] = std::exp(s[u] - mx));
        for (int u = 0; u <= t; ++u) {
          for (int i = 0; i < d; ++i) attn[h * d + i] += s[u] / z * v[u][kh * d + i];
        }
      }
      const Vec o = Linear(T(w, p + "self_attn.o_proj.weight"), attn, H);
      for (int i = 0; i < H; ++i) x[t][i] += o[i];
      const Vec h2 = Norm(x[t], T(w, p + "post_attention_layernorm.weight"), c.rms_norm_eps);
      const Vec g = Linear(T(w, p + "mlp.gate_proj.weight"), h2, c.intermediate_size);
      Vec u = Linear(T(w, p + "mlp.up_proj.weight"), h2, c.intermediate_size);
      for (size_t i = 0; i < u.size(); ++i) u[i] *= g[i] / (1 + std::exp(-g[i]));
      const Vec down = Linear(T(w, p + "mlp.down_proj.weight"), u, H);
      for (int i = 0; i < H; ++i) x[t][i] += down[i];
    }
  }
  const auto& head = c.tie_word_embeddings ? T(w, "model.embed_tokens.weight") : T(w, "lm_head.weight");
  std::vector<Vec> logits(L);
  for (int t = 0; t < L; ++t) logits[t] = Linear(head, Norm(x[t], T(w, "model.norm.weight"), c.rms_norm_eps), c.vocab_size);
  return logits;
}

// ---- Configurations --------------------------------------------------------

ModelConfig SmallConfig(int variant) {
  ModelConfig c;
  c.vocab_size = 300;
  c.hidden_size = 96;
  c.intermediate_size = 160;
  c.num_layers = 2;
  c.head_dim = 64;
  c.rms_norm_eps = 1e-5f;
  switch (variant) {
    case 0:  // Llama 3 style: GQA 4:1, tied, llama3 scaling with all three bands
      c.num_q_heads = 4;
      c.num_kv_heads = 1;
      c.tie_word_embeddings = true;
      c.rope_theta = 500000.0f;
      c.rope_scaling.type = RopeScaling::Type::kLlama3;
      c.rope_scaling.factor = 8.0f;
      c.rope_scaling.original_max_position = 256;
      break;
    case 1:  // Qwen2: QKV bias, an odd number of heads, untied
      c.architecture = Architecture::kQwen2;
      c.attention_bias = true;
      c.num_q_heads = 3;
      c.num_kv_heads = 3;
      c.rope_theta = 1000000.0f;
      c.rms_norm_eps = 1e-6f;
      break;
    default:  // Llama 2 style with linear scaling, GQA 3:1, untied
      c.num_q_heads = 6;
      c.num_kv_heads = 2;
      c.rope_scaling.type = RopeScaling::Type::kLinear;
      c.rope_scaling.factor = 2.0f;
      break;
  }
  return c;
}

std::vector<int32_t> RandomTokens(Rng& rng, int n, int vocab) {
  std::vector<int32_t> t(n);
  for (int32_t& x : t) x = static_cast<int32_t>(rng.UniformInt(vocab));
  return t;
}

void ExpectLogitsNear(const Vec& want, const float* got, double tol, const std::string& where) {
  double scale = 1.0;
  for (double v : want) scale = std::max(scale, std::fabs(v));
  for (size_t i = 0; i < want.size(); ++i) {
    ASSERT_NEAR(got[i], want[i], tol * scale) << where << " vocab " << i;
  }
}

struct Pool {
  Pool(const ModelConfig& c, int64_t pages, int32_t page_size, DType dtype)
      : bytes(KvLayoutFor(c, pages, page_size, dtype).TotalBytes()) {
    kv.layout = KvLayoutFor(c, pages, page_size, dtype);
    kv.dtype = dtype;
    kv.data = bytes.data();
    std::fill(bytes.begin(), bytes.end(), static_cast<char>(0xff));  // poison: NaN in fp32/bf16
  }
  std::vector<char> bytes;
  KvCache kv;
};

class CpuBackendTest : public ::testing::TestWithParam<int> {};

TEST_P(CpuBackendTest, PrefillMatchesDoubleReference) {
  const ModelConfig c = SmallConfig(GetParam());
  auto weights = std::make_shared<const ModelWeights>(MakeRandomWeights(c, 100 + GetParam()));
  BANYAN_ASSERT_OK_AND_ASSIGN(auto backend, CreateCpuBackend(weights, {.num_threads = 2}));
  Rng rng(7);
  const auto tokens = RandomTokens(rng, 37, c.vocab_size);
  const auto want = ReferenceForward(*weights, tokens);
  Pool pool(c, 8, 16, DType::kF32);
  ForkedBranches fb(16, 8);
  BANYAN_ASSERT_OK(fb.SetPrompt(tokens));
  const Step s = fb.PrefillStep(/*all_logits=*/true);
  std::vector<float> logits(tokens.size() * c.vocab_size, std::numeric_limits<float>::quiet_NaN());
  BANYAN_ASSERT_OK(backend->Forward(s.batch(), pool.kv, absl::MakeSpan(logits)));
  for (size_t t = 0; t < tokens.size(); ++t) {
    ExpectLogitsNear(want[t], logits.data() + t * c.vocab_size, 2e-5, "position " + std::to_string(t));
  }
}

// Prefill a prompt, fork into branches (COW of the partial last page), decode
// each branch with its own forced tokens in one batch per step (one branch
// stopping early); every step's logits equal the dense reference over that
// branch's whole sequence.
void CheckForkedDecode(int variant, DType kv_dtype, double tol) {
  const ModelConfig c = SmallConfig(variant);
  auto weights = std::make_shared<const ModelWeights>(MakeRandomWeights(c, 200 + variant));
  BANYAN_ASSERT_OK_AND_ASSIGN(auto backend, CreateCpuBackend(weights, {.num_threads = 2}));
  Rng rng(11 + variant);
  const int page_size = 8, branches = 3, steps = 12;
  const auto prompt = RandomTokens(rng, 21, c.vocab_size);  // 2 full pages + 5 tokens
  std::vector<std::vector<int32_t>> own(branches);
  for (auto& t : own) t = RandomTokens(rng, steps, c.vocab_size);
  Pool pool(c, 64, page_size, kv_dtype);
  ForkedBranches fb(page_size, 64);
  BANYAN_ASSERT_OK(fb.SetPrompt(prompt));
  const Step pre = fb.PrefillStep();
  std::vector<float> logits(branches * c.vocab_size);
  BANYAN_ASSERT_OK(backend->Forward(pre.batch(), pool.kv, absl::MakeSpan(logits)));
  BANYAN_ASSERT_OK_AND_ASSIGN(auto copies, fb.Fork(branches));
  ASSERT_EQ(copies.size(), static_cast<size_t>(branches));
  for (auto [src, dst] : copies) CopyKvPage(pool.kv, src, dst);

  std::vector<std::vector<Vec>> want(branches);
  for (int b = 0; b < branches; ++b) {
    std::vector<int32_t> full = prompt;
    full.insert(full.end(), own[b].begin(), own[b].end());
    want[b] = ReferenceForward(*weights, full);
  }
  for (int step = 0; step < steps; ++step) {
    if (step == 5) fb.Finish(1);  // branch 1 stops; the others go on
    const auto active = fb.active_branches();
    std::vector<int32_t> next;
    for (int32_t b : active) next.push_back(own[b][step]);
    BANYAN_ASSERT_OK_AND_ASSIGN(const Step s, fb.DecodeStep(next));
    std::fill(logits.begin(), logits.end(), std::numeric_limits<float>::quiet_NaN());
    BANYAN_ASSERT_OK(backend->Forward(s.batch(), pool.kv, absl::MakeSpan(logits)));
    for (size_t r = 0; r < active.size(); ++r) {
      ExpectLogitsNear(want[active[r]][prompt.size() + step], logits.data() + r * c.vocab_size, tol,
                       "branch " + std::to_string(active[r]) + " step " + std::to_string(step));
    }
  }
}

TEST_P(CpuBackendTest, ForkedPagedDecodeMatchesFullSequences) { CheckForkedDecode(GetParam(), DType::kF32, 2e-5); }

INSTANTIATE_TEST_SUITE_P(Configs, CpuBackendTest, ::testing::Values(0, 1, 2));

TEST(CpuBackendKvDtypeTest, Bf16PoolStaysClose) { CheckForkedDecode(0, DType::kBf16, 3e-2); }

TEST(CpuBackendKvDtypeTest, Fp16PoolStaysClose) { CheckForkedDecode(1, DType::kF16, 5e-3); }

// ---- A three-level tree by hand ---------------------------------------------
// Node A (the prompt, 19 tokens on pages 0-2, the last one partial), node B1
// continuing A's partial page at slot 3 (no copy: A's tokens stay in A's
// segment), node B2 on a fresh page, then leaves C1, C2 under B1 and C3 under
// B2 decoded together. B1 and B2 are prefilled as nodes with an ancestor
// (causal inside the node, full over A). Every row equals the dense forward of
// its root-to-leaf sequence.

struct HandNode {
  std::vector<int32_t> pages;
  int32_t first_slot = 0;
  std::vector<int32_t> tokens;
};

// Builds the plan for `rows`, each a list of (node, kv limit) it attends.
attention::AttentionPlan HandPlan(const std::vector<HandNode*>& nodes, int32_t page_size,
                                  const std::vector<std::vector<std::pair<int, int32_t>>>& rows) {
  attention::AttentionPlan p;
  p.page_size = page_size;
  p.num_queries = static_cast<int32_t>(rows.size());
  for (size_t n = 0; n < nodes.size(); ++n) {
    std::vector<std::pair<int32_t, int32_t>> entries;  // (row, limit)
    for (size_t r = 0; r < rows.size(); ++r) {
      for (auto [node, limit] : rows[r]) {
        if (node == static_cast<int>(n)) entries.emplace_back(static_cast<int32_t>(r), limit);
      }
    }
    if (entries.empty()) continue;
    const HandNode& h = *nodes[n];
    const int32_t len = static_cast<int32_t>(h.tokens.size());
    const int32_t pages = (h.first_slot + len + page_size - 1) / page_size;
    p.page_indices.insert(p.page_indices.end(), h.pages.begin(), h.pages.begin() + pages);
    p.segment_page_indptr.push_back(static_cast<int32_t>(p.page_indices.size()));
    p.segment_first_slot.push_back(h.first_slot);
    p.segment_length.push_back(len);
    for (auto [row, limit] : entries) {
      p.entry_query.push_back(row);
      p.entry_kv_limit.push_back(limit);
    }
    p.segment_entry_indptr.push_back(static_cast<int32_t>(p.entry_query.size()));
  }
  attention::FillQueryEntries(p);
  return p;
}

TEST(CpuBackendTreeTest, ThreeLevelTreeMatchesDenseSequences) {
  const ModelConfig c = SmallConfig(2);
  auto weights = std::make_shared<const ModelWeights>(MakeRandomWeights(c, 300));
  BANYAN_ASSERT_OK_AND_ASSIGN(auto backend, CreateCpuBackend(weights, {.num_threads = 2}));
  Rng rng(23);
  const int32_t ps = 8;
  Pool pool(c, 32, ps, DType::kF32);
  HandNode a{{0, 1, 2}, 0, RandomTokens(rng, 19, c.vocab_size)};
  HandNode b1{{2, 3, 4}, 3, RandomTokens(rng, 9, c.vocab_size)};  // continues page 2 at slot 3
  HandNode b2{{5, 6}, 0, RandomTokens(rng, 6, c.vocab_size)};
  HandNode c1{{7, 8}, 0, {}}, c2{{9, 10}, 0, {}}, c3{{11, 12}, 0, {}};
  std::vector<HandNode*> nodes = {&a, &b1, &b2, &c1, &c2, &c3};
  auto run = [&](const std::vector<int32_t>& tokens, const std::vector<int32_t>& positions,
                 const std::vector<int32_t>& pages, const std::vector<int32_t>& slots,
                 const attention::AttentionPlan& plan, std::vector<float>& logits) {
    std::vector<int32_t> rows(tokens.size());
    for (size_t i = 0; i < rows.size(); ++i) rows[i] = static_cast<int32_t>(i);
    ForwardBatch batch{tokens, positions, pages, slots, &plan, rows};
    logits.assign(tokens.size() * c.vocab_size, std::numeric_limits<float>::quiet_NaN());
    return backend->Forward(batch, pool.kv, absl::MakeSpan(logits));
  };
  // Prefill a node whose ancestors' tokens number `offset`, attending `ancestors`.
  auto prefill = [&](int node, int32_t offset, const std::vector<std::pair<int, int32_t>>& ancestors,
                     std::vector<float>& logits) {
    const HandNode& h = *nodes[node];
    std::vector<int32_t> positions, pages, slots;
    std::vector<std::vector<std::pair<int, int32_t>>> rows;
    for (int32_t i = 0; i < static_cast<int32_t>(h.tokens.size()); ++i) {
      positions.push_back(offset + i);
      pages.push_back(h.pages[(h.first_slot + i) / ps]);
      slots.push_back((h.first_slot + i) % ps);
      auto row = ancestors;
      row.emplace_back(node, i + 1);
      rows.push_back(row);
    }
    return run(h.tokens, positions, pages, slots, HandPlan(nodes, ps, rows), logits);
  };
  auto expect_rows = [&](const std::vector<float>& logits, const std::vector<int32_t>& sequence, int32_t first,
                         int32_t count, const std::string& what) {
    const auto want = ReferenceForward(*weights, sequence);
    for (int32_t i = 0; i < count; ++i) {
      ExpectLogitsNear(want[first + i], logits.data() + i * c.vocab_size, 2e-5, what + " row " + std::to_string(i));
    }
  };
  std::vector<float> logits;
  BANYAN_ASSERT_OK(prefill(0, 0, {}, logits));
  expect_rows(logits, a.tokens, 0, 19, "A");
  BANYAN_ASSERT_OK(prefill(1, 19, {{0, 19}}, logits));
  std::vector<int32_t> ab1 = a.tokens, ab2 = a.tokens;
  ab1.insert(ab1.end(), b1.tokens.begin(), b1.tokens.end());
  ab2.insert(ab2.end(), b2.tokens.begin(), b2.tokens.end());
  expect_rows(logits, ab1, 19, 9, "B1");
  BANYAN_ASSERT_OK(prefill(2, 19, {{0, 19}}, logits));
  expect_rows(logits, ab2, 19, 6, "B2");
  // Decode the three leaves together for 10 steps (forced tokens).
  std::vector<std::vector<int32_t>> leaf_tokens(3);
  for (auto& t : leaf_tokens) t = RandomTokens(rng, 10, c.vocab_size);
  const std::vector<HandNode*> leaves = {&c1, &c2, &c3};
  const std::vector<int> parent = {1, 1, 2};
  for (int step = 0; step < 10; ++step) {
    std::vector<int32_t> tokens, positions, pages, slots;
    std::vector<std::vector<std::pair<int, int32_t>>> rows;
    for (int l = 0; l < 3; ++l) {
      HandNode& leaf = *leaves[l];
      const int32_t i = static_cast<int32_t>(leaf.tokens.size());
      leaf.tokens.push_back(leaf_tokens[l][step]);
      const HandNode& par = *nodes[parent[l]];
      tokens.push_back(leaf.tokens.back());
      positions.push_back(19 + static_cast<int32_t>(par.tokens.size()) + i);
      pages.push_back(leaf.pages[i / ps]);
      slots.push_back(i % ps);
      rows.push_back({{0, 19}, {parent[l], static_cast<int32_t>(par.tokens.size())}, {3 + l, i + 1}});
    }
    BANYAN_ASSERT_OK(run(tokens, positions, pages, slots, HandPlan(nodes, ps, rows), logits));
    for (int l = 0; l < 3; ++l) {
      std::vector<int32_t> seq = parent[l] == 1 ? ab1 : ab2;
      seq.insert(seq.end(), leaves[l]->tokens.begin(), leaves[l]->tokens.end());
      const auto want = ReferenceForward(*weights, seq);
      ExpectLogitsNear(want.back(), logits.data() + l * c.vocab_size, 2e-5,
                       "leaf " + std::to_string(l) + " step " + std::to_string(step));
    }
  }
}

// ---- Bad input -------------------------------------------------------------

class CpuBackendBadInputTest : public ::testing::Test {
 protected:
  void SetUp() override {
    config_ = SmallConfig(0);
    weights_ = std::make_shared<const ModelWeights>(MakeRandomWeights(config_, 5));
    BANYAN_ASSERT_OK_AND_ASSIGN(backend_, CreateCpuBackend(weights_, {.num_threads = 1}));
    ASSERT_TRUE(fb_.SetPrompt({1, 2, 3, 4, 5}).ok());
    step_ = fb_.PrefillStep();
    logits_.assign(config_.vocab_size, 1234.5f);
  }
  // Runs the modified step; checks the code and that logits are untouched.
  void Expect(absl::StatusCode code, const Step& s, const KvCache* kv = nullptr) {
    EXPECT_THAT(backend_->Forward(s.batch(), kv ? *kv : pool_.kv, absl::MakeSpan(logits_)), StatusIs(code));
    for (float v : logits_) ASSERT_EQ(v, 1234.5f);
  }
  ModelConfig config_;
  std::shared_ptr<const ModelWeights> weights_;
  std::unique_ptr<Backend> backend_;
  ForkedBranches fb_{16, 4};
  Pool pool_{SmallConfig(0), 4, 16, DType::kF32};
  Step step_;
  std::vector<float> logits_;
};

TEST_F(CpuBackendBadInputTest, TokenOutOfVocabulary) {
  Step s = step_;
  s.tokens[2] = config_.vocab_size;
  Expect(absl::StatusCode::kOutOfRange, s);
  s.tokens[2] = -1;
  Expect(absl::StatusCode::kOutOfRange, s);
}

TEST_F(CpuBackendBadInputTest, PagesSlotsAndRows) {
  Step s = step_;
  s.kv_pages[0] = 4;
  Expect(absl::StatusCode::kOutOfRange, s);
  s = step_;
  s.kv_slots[0] = 16;
  Expect(absl::StatusCode::kOutOfRange, s);
  s = step_;
  s.plan.page_indices[0] = 99;
  Expect(absl::StatusCode::kOutOfRange, s);
  s = step_;
  s.logit_rows = {5};
  Expect(absl::StatusCode::kOutOfRange, s);
  s = step_;
  s.kv_slots[1] = s.kv_slots[0];  // two rows write one slot
  Expect(absl::StatusCode::kInvalidArgument, s);
  s = step_;
  s.positions.pop_back();
  Expect(absl::StatusCode::kInvalidArgument, s);
  s = step_;
  s.positions[0] = -3;
  Expect(absl::StatusCode::kInvalidArgument, s);
}

TEST_F(CpuBackendBadInputTest, PlanAndPool) {
  Step s = step_;
  s.plan.entry_kv_limit[0] = 0;  // invalid plan
  Expect(absl::StatusCode::kInvalidArgument, s);
  s = step_;
  ForwardBatch b = s.batch();
  b.plan = nullptr;
  EXPECT_THAT(backend_->Forward(b, pool_.kv, absl::MakeSpan(logits_)), StatusIs(absl::StatusCode::kInvalidArgument));
  KvCache wrong = pool_.kv;
  wrong.layout.num_kv_heads = 2;
  Expect(absl::StatusCode::kInvalidArgument, step_, &wrong);
  wrong = pool_.kv;
  wrong.dtype = DType::kBf16;  // dtype_bytes 4 disagrees
  Expect(absl::StatusCode::kInvalidArgument, step_, &wrong);
  wrong = pool_.kv;
  wrong.data = nullptr;
  Expect(absl::StatusCode::kInvalidArgument, step_, &wrong);
  std::vector<float> small(3);
  EXPECT_THAT(backend_->Forward(step_.batch(), pool_.kv, absl::MakeSpan(small)),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(CpuBackendBadInput2Test, UnsupportedHeadDimFailsBeforeWriting) {
  ModelConfig c = SmallConfig(0);
  c.head_dim = 32;  // attention/ runs head_dim 64 and 128
  auto weights = std::make_shared<const ModelWeights>(MakeRandomWeights(c, 9));
  BANYAN_ASSERT_OK_AND_ASSIGN(auto backend, CreateCpuBackend(weights, {.num_threads = 1}));
  Pool pool(c, 2, 16, DType::kF32);
  const std::vector<char> before = pool.bytes;
  ForkedBranches fb(16, 2);
  BANYAN_ASSERT_OK(fb.SetPrompt({1, 2, 3}));
  std::vector<float> logits(c.vocab_size, 7.0f);
  EXPECT_THAT(backend->Forward(fb.PrefillStep().batch(), pool.kv, absl::MakeSpan(logits)),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_EQ(pool.bytes, before);
  for (float v : logits) ASSERT_EQ(v, 7.0f);
}

// Random corruptions of a valid decode step: every call returns OK or one of
// the documented codes, never crashes; a rejected call leaves logits alone.
TEST(CpuBackendBadInput2Test, RandomCorruptionsNeverCrash) {
  const ModelConfig c = SmallConfig(0);
  auto weights = std::make_shared<const ModelWeights>(MakeRandomWeights(c, 4));
  BANYAN_ASSERT_OK_AND_ASSIGN(auto backend, CreateCpuBackend(weights, {.num_threads = 2}));
  Pool pool(c, 16, 4, DType::kF32);
  ForkedBranches fb(4, 16);
  BANYAN_ASSERT_OK(fb.SetPrompt({5, 6, 7, 8, 9, 10}));
  std::vector<float> logits(4 * c.vocab_size);
  BANYAN_ASSERT_OK(backend->Forward(fb.PrefillStep().batch(), pool.kv, absl::MakeSpan(logits)));
  BANYAN_ASSERT_OK_AND_ASSIGN(auto copies, fb.Fork(3));
  for (auto [src, dst] : copies) CopyKvPage(pool.kv, src, dst);
  BANYAN_ASSERT_OK_AND_ASSIGN(const Step good, fb.DecodeStep({1, 2, 3}));
  Rng rng(31);
  auto pick = [&](std::vector<int32_t>& v) -> int32_t* {
    return v.empty() ? nullptr : &v[rng.UniformInt(v.size())];
  };
  int rejected = 0;
  for (int trial = 0; trial < 400; ++trial) {
    Step s = good;
    std::vector<std::vector<int32_t>*> arrays = {
        &s.tokens, &s.positions, &s.kv_pages, &s.kv_slots, &s.logit_rows, &s.plan.page_indices,
        &s.plan.segment_page_indptr, &s.plan.segment_first_slot, &s.plan.segment_length,
        &s.plan.segment_entry_indptr, &s.plan.entry_query, &s.plan.entry_kv_limit,
        &s.plan.query_entry_indptr, &s.plan.query_entries};
    const int edits = 1 + static_cast<int>(rng.UniformInt(3));
    for (int e = 0; e < edits; ++e) {
      std::vector<int32_t>& a = *arrays[rng.UniformInt(arrays.size())];
      switch (rng.UniformInt(4)) {
        case 0: if (int32_t* x = pick(a)) *x += static_cast<int32_t>(rng.UniformInt(5)) - 2; break;
        case 1: if (int32_t* x = pick(a)) *x = static_cast<int32_t>(rng.Next()); break;
        case 2: if (!a.empty()) a.pop_back(); break;
        default: a.push_back(static_cast<int32_t>(rng.UniformInt(8))); break;
      }
    }
    if (rng.UniformInt(8) == 0) s.plan.num_queries += 1;
    std::fill(logits.begin(), logits.end(), 3.0f);
    const absl::Status st = backend->Forward(s.batch(), pool.kv, absl::MakeSpan(logits));
    if (st.ok()) continue;
    ++rejected;
    EXPECT_TRUE(st.code() == absl::StatusCode::kInvalidArgument || st.code() == absl::StatusCode::kOutOfRange) << st;
    for (float v : logits) ASSERT_EQ(v, 3.0f) << st;
  }
  EXPECT_GT(rejected, 200);
}

TEST(CpuBackendCreateTest, WeightsAreChecked) {
  ModelConfig c = SmallConfig(1);
  ModelWeights w = MakeRandomWeights(c, 1);
  w.tensors.erase("model.layers.1.self_attn.k_proj.bias");
  EXPECT_THAT(CreateCpuBackend(std::make_shared<const ModelWeights>(std::move(w))),
              StatusIs(absl::StatusCode::kNotFound, ::testing::HasSubstr("k_proj.bias")));
  ModelWeights w2 = MakeRandomWeights(c, 1);
  w2.tensors["model.layers.0.mlp.up_proj.weight"].shape = {c.hidden_size, c.intermediate_size};
  EXPECT_THAT(CreateCpuBackend(std::make_shared<const ModelWeights>(std::move(w2))),
              StatusIs(absl::StatusCode::kInvalidArgument, ::testing::HasSubstr("up_proj")));
  ModelWeights w3 = MakeRandomWeights(c, 1);
  w3.config.num_kv_heads = 2;  // 3 q heads are not a multiple of 2
  EXPECT_THAT(CreateCpuBackend(std::make_shared<const ModelWeights>(std::move(w3))),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(CreateCpuBackend(nullptr), StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(ForkedBranchesTest, RunsOutOfPages) {
  ForkedBranches fb(4, 3);
  EXPECT_THAT(fb.SetPrompt({}), StatusIs(absl::StatusCode::kInvalidArgument));
  BANYAN_ASSERT_OK(fb.SetPrompt({1, 2, 3, 4, 5}));  // 2 pages
  EXPECT_THAT(fb.Fork(2), StatusIs(absl::StatusCode::kResourceExhausted));
  ForkedBranches fb2(4, 3);
  BANYAN_ASSERT_OK(fb2.SetPrompt({1, 2, 3, 4}));  // 1 full page, no copy needed
  BANYAN_ASSERT_OK_AND_ASSIGN(auto copies, fb2.Fork(2));
  EXPECT_TRUE(copies.empty());
  BANYAN_ASSERT_OK(fb2.DecodeStep({7, 8}).status());  // one new page per branch
  for (int i = 0; i < 3; ++i) BANYAN_ASSERT_OK(fb2.DecodeStep({7, 8}).status());
  EXPECT_THAT(fb2.DecodeStep({7, 8}), StatusIs(absl::StatusCode::kResourceExhausted));
  EXPECT_THAT(fb2.DecodeStep({7}), StatusIs(absl::StatusCode::kInvalidArgument));
}

}  // namespace
}  // namespace banyan::model

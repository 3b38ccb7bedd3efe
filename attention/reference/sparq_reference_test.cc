#include "attention/reference/sparq_reference.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <ostream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "attention/reference/reference_attention.h"
#include "attention/sparq_args.h"
#include "attention/testing/random_plan.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "sdk/base/rng.h"
#include "sdk/base/status_testing.h"

namespace banyan::attention {
namespace {

using ::banyan::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr int32_t kLayers = 2;
constexpr int32_t kLayer = 1;

struct Shape {
  int32_t page_size;
  int32_t head_dim;
  int32_t kv_heads;
  int32_t q_heads;
  DType kv_dtype;  // also q's dtype
};

std::string ShapeString(const Shape& s) {
  return absl::StrCat("page", s.page_size, "_d", s.head_dim, "_kv", s.kv_heads, "_q", s.q_heads, "_",
                      std::string(DTypeName(s.kv_dtype)));
}
std::string ShapeName(const ::testing::TestParamInfo<Shape>& info) { return ShapeString(info.param); }
void PrintTo(const Shape& s, std::ostream* os) { *os << ShapeString(s); }

// Random SparQ inputs: a two-layer pool (standard normal K and V) whose page
// ids are shuffled over the pool with spare pages between sequences, each
// sequence's last page partly filled when its length says so, random q, and
// v_mean = the true mean of each sequence's V. The test's own accessors
// compute offsets from kv_layout.h's documented order, not KvLayout::Offset.
struct Problem {
  Problem(const Shape& s, const std::vector<int32_t>& seq_lengths, Rng& rng) : shape(s), lengths(seq_lengths) {
    int32_t used = 0;
    indptr.push_back(0);
    for (int32_t length : lengths) {
      used += (length + s.page_size - 1) / s.page_size;
      indptr.push_back(used);
    }
    const int32_t num_pages = used + 5;
    std::vector<int32_t> ids(static_cast<size_t>(num_pages));
    for (int32_t i = 0; i < num_pages; ++i) ids[i] = i;
    for (int32_t i = num_pages - 1; i > 0; --i) std::swap(ids[i], ids[rng.UniformInt(static_cast<uint64_t>(i) + 1)]);
    pages.assign(ids.begin(), ids.begin() + used);
    layout =
        KvLayout{kLayers, s.kv_heads, s.head_dim, s.page_size, num_pages, static_cast<int32_t>(DTypeSize(s.kv_dtype))};
    kv.resize(layout.TotalBytes());
    testing::FillNormal(kv.data(), s.kv_dtype, static_cast<int64_t>(kv.size() / DTypeSize(s.kv_dtype)), rng);
    const int64_t q_elems = int64_t{num_seqs()} * s.q_heads * s.head_dim;
    q.resize(static_cast<size_t>(q_elems) * DTypeSize(s.kv_dtype));
    testing::FillNormal(q.data(), s.kv_dtype, q_elems, rng);
    out.assign(static_cast<size_t>(q_elems), std::nanf(""));
    RecomputeValueMean();
  }

  int32_t num_seqs() const { return static_cast<int32_t>(lengths.size()); }
  int32_t group() const { return shape.q_heads / shape.kv_heads; }
  float scale() const { return 1.0f / std::sqrt(static_cast<float>(shape.head_dim)); }

  // Element index of component i of (page, slot) of one KV head in layer kLayer's K (plane 0) or V (plane 1).
  int64_t SlotIndex(int32_t plane, int64_t page, int32_t kv_head, int32_t slot, int32_t i) const {
    const int64_t tile = ((int64_t{kLayer} * 2 + plane) * layout.num_pages + page) * shape.kv_heads + kv_head;
    return (tile * shape.page_size + slot) * shape.head_dim + i;
  }
  // The same for token t of sequence seq.
  int64_t PoolIndex(int32_t plane, int32_t seq, int32_t kv_head, int32_t t, int32_t i) const {
    return SlotIndex(plane, pages[indptr[seq] + t / shape.page_size], kv_head, t % shape.page_size, i);
  }
  double K(int32_t seq, int32_t kv_head, int32_t t, int32_t i) const {
    return LoadAsDouble(kv.data(), shape.kv_dtype, PoolIndex(0, seq, kv_head, t, i));
  }
  double V(int32_t seq, int32_t kv_head, int32_t t, int32_t i) const {
    return LoadAsDouble(kv.data(), shape.kv_dtype, PoolIndex(1, seq, kv_head, t, i));
  }
  int64_t QIndex(int32_t seq, int32_t head, int32_t i) const {
    return (int64_t{seq} * shape.q_heads + head) * shape.head_dim + i;
  }
  double Q(int32_t seq, int32_t head, int32_t i) const {
    return LoadAsDouble(q.data(), shape.kv_dtype, QIndex(seq, head, i));
  }

  void RecomputeValueMean() {
    const int32_t d = shape.head_dim;
    v_mean.assign(static_cast<size_t>(num_seqs()) * shape.kv_heads * d, 0.0f);
    for (int32_t s = 0; s < num_seqs(); ++s) {
      for (int32_t h = 0; h < shape.kv_heads; ++h) {
        for (int32_t i = 0; i < d; ++i) {
          double sum = 0.0;
          for (int32_t t = 0; t < lengths[s]; ++t) sum += V(s, h, t, i);
          v_mean[(int64_t{s} * shape.kv_heads + h) * d + i] = static_cast<float>(sum / lengths[s]);
        }
      }
    }
  }

  SparqArgs Args(const SparqConfig& config) {
    SparqArgs a;
    a.layout = layout;
    a.kv_dtype = shape.kv_dtype;
    a.kv_pool = kv.data();
    a.layer = kLayer;
    a.num_seqs = num_seqs();
    a.seq_page_indptr = indptr.data();
    a.page_indices = pages.data();
    a.seq_length = lengths.data();
    a.max_length = *std::max_element(lengths.begin(), lengths.end());
    a.v_mean = v_mean.data();
    a.q = q.data();
    a.q_dtype = shape.kv_dtype;
    a.num_q_heads = shape.q_heads;
    a.scale = scale();
    a.config = config;
    a.out = out.data();
    a.out_dtype = DType::kF32;
    return a;
  }

  Shape shape;
  std::vector<int32_t> lengths;
  std::vector<int32_t> indptr;
  std::vector<int32_t> pages;
  KvLayout layout;
  std::vector<uint8_t> kv;
  std::vector<uint8_t> q;
  std::vector<float> v_mean;
  std::vector<float> out;
};

// softmax(scale * q_head . k_t) over `positions`, as weights in that order.
std::vector<double> ExactWeights(const Problem& p, int32_t seq, int32_t head, const std::vector<int32_t>& positions) {
  const int32_t kv_head = head / p.group();
  std::vector<double> w;
  double max_logit = -std::numeric_limits<double>::infinity();
  for (int32_t t : positions) {
    double dot = 0.0;
    for (int32_t i = 0; i < p.shape.head_dim; ++i) dot += p.Q(seq, head, i) * p.K(seq, kv_head, t, i);
    w.push_back(dot * static_cast<double>(p.scale()));
    max_logit = std::max(max_logit, w.back());
  }
  double sum = 0.0;
  for (double& x : w) sum += (x = std::exp(x - max_logit));
  for (double& x : w) x /= sum;
  return w;
}

// sum_t weights[t] * V[positions[t]] for one head.
std::vector<double> WeightedValues(const Problem& p, int32_t seq, int32_t kv_head,
                                   const std::vector<int32_t>& positions, const std::vector<double>& weights) {
  std::vector<double> o(static_cast<size_t>(p.shape.head_dim), 0.0);
  for (size_t n = 0; n < positions.size(); ++n) {
    for (int32_t i = 0; i < p.shape.head_dim; ++i) o[i] += weights[n] * p.V(seq, kv_head, positions[n], i);
  }
  return o;
}

// Brute-force steps 1-3 for one sequence and KV head, with the test's own loops.
struct BruteSelection {
  std::vector<int32_t> components;
  std::vector<std::vector<double>> s_hat;  // [group][length]
  std::vector<double> group_score;         // [length]
  std::vector<int32_t> positions;
};

BruteSelection BruteSelect(const Problem& p, const SparqConfig& config, int32_t seq, int32_t kv_head) {
  const int32_t d = p.shape.head_dim;
  const int32_t g = p.group();
  const int32_t length = p.lengths[seq];
  BruteSelection b;
  // Step 1: repeatedly take the largest remaining summed |q| (first in index order on ties).
  std::vector<double> magnitude(static_cast<size_t>(d), 0.0);
  for (int32_t j = 0; j < g; ++j) {
    for (int32_t i = 0; i < d; ++i) magnitude[i] += std::fabs(p.Q(seq, kv_head * g + j, i));
  }
  std::vector<bool> taken(static_cast<size_t>(d), false);
  for (int32_t n = 0; n < config.r; ++n) {
    int32_t best = -1;
    for (int32_t i = 0; i < d; ++i) {
      if (!taken[i] && (best < 0 || magnitude[i] > magnitude[best])) best = i;
    }
    taken[best] = true;
  }
  for (int32_t i = 0; i < d; ++i) {
    if (taken[i]) b.components.push_back(i);
  }
  // Step 2.
  b.group_score.assign(static_cast<size_t>(length), 0.0);
  for (int32_t j = 0; j < g; ++j) {
    const int32_t head = kv_head * g + j;
    double l1 = 0.0, l1_top = 0.0;
    for (int32_t i = 0; i < d; ++i) l1 += std::fabs(p.Q(seq, head, i));
    for (int32_t i : b.components) l1_top += std::fabs(p.Q(seq, head, i));
    const double temperature = l1_top > 0.0 ? std::sqrt(l1_top / l1) : 1.0;
    std::vector<double> s(static_cast<size_t>(length));
    double max_logit = -std::numeric_limits<double>::infinity();
    for (int32_t t = 0; t < length; ++t) {
      double dot = 0.0;
      for (int32_t i : b.components) dot += p.Q(seq, head, i) * p.K(seq, kv_head, t, i);
      s[t] = dot * static_cast<double>(p.scale()) / temperature;
      max_logit = std::max(max_logit, s[t]);
    }
    double sum = 0.0;
    for (double& x : s) sum += (x = std::exp(x - max_logit));
    for (double& x : s) x /= sum;
    for (int32_t t = 0; t < length; ++t) b.group_score[t] += s[t];
    b.s_hat.push_back(std::move(s));
  }
  // Step 3: the window, then repeatedly the best remaining score (first position on ties).
  const int32_t k = std::min(config.k, length);
  const int32_t window = std::min(config.local_window, length);
  std::vector<bool> chosen(static_cast<size_t>(length), false);
  for (int32_t t = length - window; t < length; ++t) chosen[t] = true;
  for (int32_t n = window; n < k; ++n) {
    int32_t best = -1;
    for (int32_t t = 0; t < length; ++t) {
      if (!chosen[t] && (best < 0 || b.group_score[t] > b.group_score[best])) best = t;
    }
    chosen[best] = true;
  }
  for (int32_t t = 0; t < length; ++t) {
    if (chosen[t]) b.positions.push_back(t);
  }
  return b;
}

SparqConfig RandomConfig(Rng& rng, int32_t head_dim, int32_t k_min, int32_t k_max, bool reallocate_mean) {
  SparqConfig c;
  c.r = 1 + static_cast<int32_t>(rng.UniformInt(static_cast<uint64_t>(head_dim)));
  c.k = k_min + static_cast<int32_t>(rng.UniformInt(static_cast<uint64_t>(k_max - k_min + 1)));
  c.local_window = static_cast<int32_t>(rng.UniformInt(static_cast<uint64_t>(std::min(c.k, 40) + 1)));
  c.reallocate_mean = reallocate_mean;
  return c;
}

class SparqReferenceTest : public ::testing::TestWithParam<Shape> {
 protected:
  Rng MakeRng(uint64_t salt) const {
    const Shape s = GetParam();
    return Rng(salt * 7919 + s.page_size * 131 + s.head_dim * 17 + s.kv_heads * 5 + s.q_heads +
               static_cast<uint64_t>(s.kv_dtype) * 100003);
  }
  // Lengths with partly filled last pages (and one exactly full).
  std::vector<int32_t> MixedLengths(Rng& rng) const {
    const int32_t ps = GetParam().page_size;
    return {1, ps, ps + 1, 37 + static_cast<int32_t>(rng.UniformInt(60)),
            150 + static_cast<int32_t>(rng.UniformInt(150))};
  }
};

TEST_P(SparqReferenceTest, DenseWhenKCoversLength) {
  Rng rng = MakeRng(1);
  const Shape s = GetParam();
  Problem p(s, MixedLengths(rng), rng);
  const int32_t max_length = *std::max_element(p.lengths.begin(), p.lengths.end());
  for (int iter = 0; iter < 4; ++iter) {
    SparqConfig config = RandomConfig(rng, s.head_dim, max_length, max_length + 8, /*reallocate_mean=*/iter % 2 == 0);
    if (iter == 1) config.r = s.head_dim;
    if (iter == 2) config.r = 1;
    SCOPED_TRACE(::testing::Message() << "r=" << config.r << " k=" << config.k << " l=" << config.local_window
                                      << " mean=" << config.reallocate_mean);
    BANYAN_ASSERT_OK(ReferenceSparq(p.Args(config)));
    const KvSource kv{p.layout, s.kv_dtype, p.kv.data(), kLayer};
    std::vector<float> dense(static_cast<size_t>(s.q_heads) * s.head_dim);
    for (int32_t seq = 0; seq < p.num_seqs(); ++seq) {
      const absl::Span<const int32_t> pages(p.pages.data() + p.indptr[seq], p.indptr[seq + 1] - p.indptr[seq]);
      const uint8_t* q = p.q.data() + p.QIndex(seq, 0, 0) * DTypeSize(s.kv_dtype);
      BANYAN_ASSERT_OK(ReferencePagedDecode(kv, pages, p.lengths[seq], q, s.kv_dtype, s.q_heads, p.scale(),
                                            dense.data(), DType::kF32, nullptr));
      for (size_t i = 0; i < dense.size(); ++i) {
        ASSERT_NEAR(p.out[p.QIndex(seq, 0, 0) + i], dense[i], 1e-6) << "seq " << seq << " element " << i;
      }
    }
  }
}

TEST_P(SparqReferenceTest, AlphaIsExactMassWhenRIsHeadDim) {
  Rng rng = MakeRng(2);
  const Shape s = GetParam();
  Problem p(s, {120 + static_cast<int32_t>(rng.UniformInt(100)), 45}, rng);
  std::vector<int32_t> all_tokens;
  for (int iter = 0; iter < 3; ++iter) {
    SparqConfig config = RandomConfig(rng, s.head_dim, 1, 40, true);
    config.r = s.head_dim;
    const SparqArgs args = p.Args(config);
    BANYAN_ASSERT_OK(ValidateSparqArgs(args, true));
    for (int32_t seq = 0; seq < p.num_seqs(); ++seq) {
      all_tokens.clear();
      for (int32_t t = 0; t < p.lengths[seq]; ++t) all_tokens.push_back(t);
      for (int32_t kv_head = 0; kv_head < s.kv_heads; ++kv_head) {
        const SparqSelection sel = ReferenceSparqSelect(args, seq, kv_head);
        ASSERT_EQ(sel.alpha.size(), static_cast<size_t>(p.group()));
        ASSERT_EQ(sel.positions.size(), static_cast<size_t>(config.k));
        for (int32_t j = 0; j < p.group(); ++j) {
          const std::vector<double> w = ExactWeights(p, seq, kv_head * p.group() + j, all_tokens);
          double mass = 0.0;
          for (int32_t t : sel.positions) mass += w[t];
          EXPECT_LT(mass, 1.0 - 1e-9);  // some tokens were left out
          EXPECT_NEAR(sel.alpha[j], mass, 1e-12) << "seq " << seq << " head " << j << " k " << config.k;
        }
      }
    }
  }
}

TEST_P(SparqReferenceTest, SelectionMatchesBruteForce) {
  Rng rng = MakeRng(3);
  const Shape s = GetParam();
  Problem p(s,
            {1, 2, 3, s.page_size - 1, s.page_size, 17 + static_cast<int32_t>(rng.UniformInt(60)),
             100 + static_cast<int32_t>(rng.UniformInt(150)), 300},
            rng);
  for (int iter = 0; iter < 6; ++iter) {
    SparqConfig config = RandomConfig(rng, s.head_dim, 1, 320, true);
    if (iter == 0) config.r = 1;
    if (iter == 1) config.r = s.head_dim;
    if (iter == 2) config.local_window = config.k;
    const SparqArgs args = p.Args(config);
    BANYAN_ASSERT_OK(ValidateSparqArgs(args, true));
    for (int32_t seq = 0; seq < p.num_seqs(); ++seq) {
      for (int32_t kv_head = 0; kv_head < s.kv_heads; ++kv_head) {
        SCOPED_TRACE(::testing::Message() << "r=" << config.r << " k=" << config.k << " l=" << config.local_window
                                          << " length=" << p.lengths[seq] << " kv_head=" << kv_head);
        const SparqSelection sel = ReferenceSparqSelect(args, seq, kv_head);
        const BruteSelection want = BruteSelect(p, config, seq, kv_head);
        ASSERT_EQ(sel.components, want.components);
        ASSERT_EQ(sel.positions, want.positions);
        ASSERT_EQ(sel.alpha.size(), static_cast<size_t>(p.group()));
        for (int32_t j = 0; j < p.group(); ++j) {
          double alpha = 0.0;
          for (int32_t t : want.positions) alpha += want.s_hat[j][t];
          EXPECT_NEAR(sel.alpha[j], alpha, 1e-12);
        }
      }
    }
  }
}

TEST_P(SparqReferenceTest, ConstantValueRowsGiveConstantOutput) {
  Rng rng = MakeRng(4);
  const Shape s = GetParam();
  Problem p(s, MixedLengths(rng), rng);
  // Every V row of the layer (every page and slot) of KV head h is c_h; v_mean = c_h.
  std::vector<double> c(static_cast<size_t>(s.kv_heads) * s.head_dim);
  for (int32_t h = 0; h < s.kv_heads; ++h) {
    for (int32_t i = 0; i < s.head_dim; ++i) {
      const float value = rng.Normal();
      for (int64_t page = 0; page < p.layout.num_pages; ++page) {
        for (int32_t slot = 0; slot < s.page_size; ++slot) {
          StoreFromDouble(p.kv.data(), s.kv_dtype, p.SlotIndex(1, page, h, slot, i), value);
        }
      }
      c[int64_t{h} * s.head_dim + i] = p.V(0, h, 0, i);  // the value as stored in kv_dtype
    }
  }
  for (int32_t seq = 0; seq < p.num_seqs(); ++seq) {
    for (size_t n = 0; n < c.size(); ++n) p.v_mean[seq * c.size() + n] = static_cast<float>(c[n]);
  }
  for (int iter = 0; iter < 4; ++iter) {
    const SparqConfig config = RandomConfig(rng, s.head_dim, 1, 200, /*reallocate_mean=*/iter != 3);
    BANYAN_ASSERT_OK(ReferenceSparq(p.Args(config)));
    for (int32_t seq = 0; seq < p.num_seqs(); ++seq) {
      for (int32_t head = 0; head < s.q_heads; ++head) {
        for (int32_t i = 0; i < s.head_dim; ++i) {
          ASSERT_NEAR(p.out[p.QIndex(seq, head, i)], c[int64_t{head / p.group()} * s.head_dim + i], 1e-6)
              << "seq " << seq << " head " << head << " dim " << i << " k " << config.k;
        }
      }
    }
  }
}

TEST_P(SparqReferenceTest, LocalWindowSelectedEvenWithLowestScores) {
  Rng rng = MakeRng(5);
  const Shape s = GetParam();
  Problem p(s, {100, 61}, rng);
  constexpr int32_t kWindow = 8;
  // Positive queries; window keys -4 in every component, the others in (-1, 1):
  // every window token scores below every other token for every head and r.
  for (size_t n = 0; n < p.q.size() / DTypeSize(s.kv_dtype); ++n) {
    StoreFromDouble(p.q.data(), s.kv_dtype, static_cast<int64_t>(n), 0.05 + std::fabs(rng.Normal()));
  }
  for (int32_t seq = 0; seq < p.num_seqs(); ++seq) {
    for (int32_t h = 0; h < s.kv_heads; ++h) {
      for (int32_t t = 0; t < p.lengths[seq]; ++t) {
        const bool in_window = t >= p.lengths[seq] - kWindow;
        for (int32_t i = 0; i < s.head_dim; ++i) {
          StoreFromDouble(p.kv.data(), s.kv_dtype, p.PoolIndex(0, seq, h, t, i),
                          in_window ? -4.0 : rng.Uniform(-0.99f, 0.99f));
        }
      }
    }
  }
  for (int iter = 0; iter < 3; ++iter) {
    SparqConfig config = RandomConfig(rng, s.head_dim, kWindow + 1, 40, true);
    config.local_window = kWindow;
    const SparqArgs args = p.Args(config);
    BANYAN_ASSERT_OK(ValidateSparqArgs(args, true));
    for (int32_t seq = 0; seq < p.num_seqs(); ++seq) {
      const int32_t length = p.lengths[seq];
      for (int32_t kv_head = 0; kv_head < s.kv_heads; ++kv_head) {
        const BruteSelection want = BruteSelect(p, config, seq, kv_head);
        const double lowest_outside = *std::min_element(want.group_score.begin(), want.group_score.end() - kWindow);
        for (int32_t t = length - kWindow; t < length; ++t) ASSERT_LT(want.group_score[t], lowest_outside);
        const SparqSelection sel = ReferenceSparqSelect(args, seq, kv_head);
        ASSERT_EQ(sel.positions.size(), static_cast<size_t>(config.k));
        for (int32_t t = length - kWindow; t < length; ++t) {
          EXPECT_TRUE(std::binary_search(sel.positions.begin(), sel.positions.end(), t)) << t;
        }
        EXPECT_EQ(sel.positions, want.positions);
      }
    }
  }
}

TEST_P(SparqReferenceTest, WithoutReallocationIsSoftmaxOverSelected) {
  Rng rng = MakeRng(6);
  const Shape s = GetParam();
  Problem p(s, MixedLengths(rng), rng);
  // v_mean must not be read without reallocate_mean.
  std::fill(p.v_mean.begin(), p.v_mean.end(), std::nanf(""));
  for (int iter = 0; iter < 3; ++iter) {
    const SparqConfig config = RandomConfig(rng, s.head_dim, 1, 64, /*reallocate_mean=*/false);
    const SparqArgs args = p.Args(config);
    BANYAN_ASSERT_OK(ReferenceSparq(args));
    for (int32_t seq = 0; seq < p.num_seqs(); ++seq) {
      for (int32_t kv_head = 0; kv_head < s.kv_heads; ++kv_head) {
        const SparqSelection sel = ReferenceSparqSelect(args, seq, kv_head);
        for (int32_t j = 0; j < p.group(); ++j) {
          const int32_t head = kv_head * p.group() + j;
          const std::vector<double> want =
              WeightedValues(p, seq, kv_head, sel.positions, ExactWeights(p, seq, head, sel.positions));
          for (int32_t i = 0; i < s.head_dim; ++i) ASSERT_NEAR(p.out[p.QIndex(seq, head, i)], want[i], 2e-6);
        }
      }
    }
  }
}

TEST_P(SparqReferenceTest, ReallocationMixesSelectedSoftmaxWithMean) {
  Rng rng = MakeRng(7);
  const Shape s = GetParam();
  Problem p(s, MixedLengths(rng), rng);
  const SparqConfig config = RandomConfig(rng, s.head_dim, 1, 64, /*reallocate_mean=*/true);
  const SparqArgs args = p.Args(config);
  BANYAN_ASSERT_OK(ReferenceSparq(args));
  for (int32_t seq = 0; seq < p.num_seqs(); ++seq) {
    for (int32_t kv_head = 0; kv_head < s.kv_heads; ++kv_head) {
      const SparqSelection sel = ReferenceSparqSelect(args, seq, kv_head);
      // Any selection: every other position of the sequence and made-up alphas.
      SparqSelection custom;
      for (int32_t t = p.lengths[seq] - 1; t >= 0; t -= 2) custom.positions.insert(custom.positions.begin(), t);
      for (int32_t j = 0; j < p.group(); ++j) custom.alpha.push_back(0.1 + 0.8 * rng.UniformDouble());
      const std::vector<double> custom_out = ReferenceSparqOutput(args, seq, kv_head, custom);
      ASSERT_EQ(custom_out.size(), static_cast<size_t>(p.group()) * s.head_dim);
      const float* mean = p.v_mean.data() + (int64_t{seq} * s.kv_heads + kv_head) * s.head_dim;
      for (int32_t j = 0; j < p.group(); ++j) {
        const int32_t head = kv_head * p.group() + j;
        const std::vector<double> y =
            WeightedValues(p, seq, kv_head, sel.positions, ExactWeights(p, seq, head, sel.positions));
        const std::vector<double> y_custom =
            WeightedValues(p, seq, kv_head, custom.positions, ExactWeights(p, seq, head, custom.positions));
        for (int32_t i = 0; i < s.head_dim; ++i) {
          const double want = sel.alpha[j] * y[i] + (1.0 - sel.alpha[j]) * mean[i];
          ASSERT_NEAR(p.out[p.QIndex(seq, head, i)], want, 2e-6);
          const double want_custom = custom.alpha[j] * y_custom[i] + (1.0 - custom.alpha[j]) * mean[i];
          ASSERT_NEAR(custom_out[int64_t{j} * s.head_dim + i], want_custom, 1e-12);
        }
      }
    }
  }
}

TEST_P(SparqReferenceTest, ValueMeanMatchesIndependentMean) {
  Rng rng = MakeRng(8);
  const Shape s = GetParam();
  Problem p(s, MixedLengths(rng), rng);
  const KvSource kv{p.layout, s.kv_dtype, p.kv.data(), kLayer};
  std::vector<float> mean(static_cast<size_t>(s.kv_heads) * s.head_dim, std::nanf(""));
  for (int32_t seq = 0; seq < p.num_seqs(); ++seq) {
    const absl::Span<const int32_t> pages(p.pages.data() + p.indptr[seq], p.indptr[seq + 1] - p.indptr[seq]);
    BANYAN_ASSERT_OK(ReferenceValueMean(kv, pages, p.lengths[seq], mean.data()));
    for (size_t n = 0; n < mean.size(); ++n) {
      ASSERT_NEAR(mean[n], p.v_mean[seq * mean.size() + n], 1e-6) << "seq " << seq << " element " << n;
    }
    EXPECT_THAT(ReferenceValueMean(kv, pages, static_cast<int32_t>(pages.size()) * s.page_size + 1, mean.data()),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("cannot hold")));
  }
  EXPECT_THAT(ReferenceValueMean(kv, p.pages, 0, mean.data()),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("cannot hold 0 tokens")));
}

TEST_P(SparqReferenceTest, FillKTransposedRoundTrip) {
  Rng rng = MakeRng(9);
  const Shape s = GetParam();
  Problem p(s, MixedLengths(rng), rng);
  const size_t bytes = DTypeSize(s.kv_dtype);
  std::vector<uint8_t> copy(p.layout.TotalBytes() / 2, 0xff);  // NaN in fp32 and bf16
  ReferenceFillKTransposed(p.layout, s.kv_dtype, p.kv.data(), copy.data());
  const KvLayout& l = p.layout;
  for (int32_t layer = 0; layer < kLayers; ++layer) {
    for (int64_t page = 0; page < l.num_pages; ++page) {
      for (int32_t head = 0; head < s.kv_heads; ++head) {
        for (int32_t slot = 0; slot < s.page_size; ++slot) {
          for (int32_t dim = 0; dim < s.head_dim; ++dim) {
            const int64_t from = l.Offset(layer, 0, page, head, slot) + dim;
            const int64_t row = (int64_t{layer} * s.kv_heads + head) * s.head_dim + dim;
            const int64_t to = row * l.num_pages * s.page_size + page * s.page_size + slot;
            ASSERT_EQ(KvTransposedOffset(l, layer, page, head, dim, slot), to);
            ASSERT_EQ(std::memcmp(copy.data() + to * bytes, p.kv.data() + from * bytes, bytes), 0)
                << layer << " " << page << " " << head << " " << slot << " " << dim;
          }
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, SparqReferenceTest,
                         ::testing::Values(Shape{8, 64, 2, 2, DType::kF32}, Shape{16, 128, 1, 4, DType::kBf16},
                                           Shape{8, 128, 2, 16, DType::kBf16}, Shape{16, 64, 1, 8, DType::kF32},
                                           Shape{16, 128, 2, 2, DType::kBf16}, Shape{8, 64, 2, 8, DType::kBf16},
                                           Shape{16, 64, 2, 4, DType::kF32}),
                         ShapeName);

// Hand-made ties: components 5 and 9 dominate, then 0 and 1 win the tie among
// the other 62; tokens 3, 7 and 12 share the best key, and 3 and 7 win it
// (k = 3 with the window's token 19).
TEST(SparqTiesTest, TiesGoToLowerIndexAndPosition) {
  Rng rng(11);
  Problem p({16, 64, 1, 2, DType::kF32}, {20}, rng);
  const auto sign = [](int32_t i) { return i % 3 == 0 ? 1.0 : -1.0; };
  for (int32_t h = 0; h < 2; ++h) {
    for (int32_t i = 0; i < 64; ++i) {
      StoreFromDouble(p.q.data(), DType::kF32, p.QIndex(0, h, i), sign(i) * (i == 5 || i == 9 ? 3.0 : 1.0));
    }
  }
  for (int32_t t = 0; t < 20; ++t) {
    const bool strong = t == 3 || t == 7 || t == 12;
    for (int32_t i = 0; i < 64; ++i) {
      StoreFromDouble(p.kv.data(), DType::kF32, p.PoolIndex(0, 0, 0, t, i),
                      strong ? sign(i) : -0.01 * (t + 1) * sign(i));
    }
  }
  SparqConfig config;
  config.r = 4;
  config.k = 3;
  config.local_window = 1;
  const SparqArgs args = p.Args(config);
  BANYAN_ASSERT_OK(ValidateSparqArgs(args, true));
  const SparqSelection sel = ReferenceSparqSelect(args, 0, 0);
  EXPECT_THAT(sel.components, ElementsAre(0, 1, 5, 9));
  EXPECT_THAT(sel.positions, ElementsAre(3, 7, 19));
}

TEST(ValidateSparqArgsTest, RejectsEachViolation) {
  Rng rng(13);
  Problem p({16, 64, 2, 4, DType::kBf16}, {20, 33}, rng);
  SparqConfig config;
  config.r = 8;
  config.k = 12;
  config.local_window = 4;
  const SparqArgs good = p.Args(config);
  BANYAN_EXPECT_OK(ValidateSparqArgs(good, true));
  BANYAN_EXPECT_OK(ReferenceSparq(good));
  auto expect_bad = [&](const SparqArgs& a, const char* what) {
    EXPECT_THAT(ValidateSparqArgs(a, true), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(what)));
    EXPECT_THAT(ReferenceSparq(a), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(what)));
  };
  SparqArgs a = good;
  a.layout.head_dim = 96;
  expect_bad(a, "sparq: head_dim = 96");
  a = good;
  a.num_q_heads = 3;
  expect_bad(a, "num_q_heads = 3 not a positive multiple of num_kv_heads = 2");
  a = good;
  a.layout.num_kv_heads = 0;
  expect_bad(a, "num_kv_heads = 0");
  a = good;
  a.layout.dtype_bytes = 4;
  expect_bad(a, "dtype_bytes = 4");
  a = good;
  a.layout.page_size = 0;
  expect_bad(a, "page_size = 0");
  a = good;
  a.layer = 2;
  expect_bad(a, "layer = 2 outside [0, 2)");
  a = good;
  a.layer = -1;
  expect_bad(a, "layer = -1");
  a = good;
  a.scale = std::nanf("");
  expect_bad(a, "scale = nan");
  a = good;
  a.scale = 0.0f;
  expect_bad(a, "scale = 0");
  a = good;
  a.config.r = 0;
  expect_bad(a, "sparq: r = 0 outside [1, 64]");
  a = good;
  a.config.r = 65;
  expect_bad(a, "r = 65 outside [1, 64]");
  a = good;
  a.config.k = 0;
  a.config.local_window = 0;
  expect_bad(a, "k = 0 < 1");
  a = good;
  a.config.local_window = -1;
  expect_bad(a, "local_window = -1 outside [0, k = 12]");
  a = good;
  a.config.local_window = 13;
  expect_bad(a, "local_window = 13");
  a = good;
  a.num_seqs = -1;
  expect_bad(a, "num_seqs = -1");
  a = good;
  a.max_length = 0;
  expect_bad(a, "max_length = 0");
  const auto expect_null = [&](void (*clear)(SparqArgs&), const char* what) {
    SparqArgs x = good;
    clear(x);
    expect_bad(x, what);
  };
  expect_null([](SparqArgs& x) { x.kv_pool = nullptr; }, "kv_pool is null");
  expect_null([](SparqArgs& x) { x.seq_page_indptr = nullptr; }, "seq_page_indptr is null");
  expect_null([](SparqArgs& x) { x.page_indices = nullptr; }, "page_indices is null");
  expect_null([](SparqArgs& x) { x.seq_length = nullptr; }, "seq_length is null");
  expect_null([](SparqArgs& x) { x.v_mean = nullptr; }, "v_mean (reallocate_mean) is null");
  expect_null([](SparqArgs& x) { x.q = nullptr; }, "q is null");
  expect_null([](SparqArgs& x) { x.out = nullptr; }, "out is null");
  // v_mean is optional without reallocate_mean.
  a = good;
  a.v_mean = nullptr;
  a.config.reallocate_mean = false;
  BANYAN_EXPECT_OK(ValidateSparqArgs(a, true));

  // The plan (plan_on_host only).
  std::vector<int32_t> lengths = p.lengths;
  std::vector<int32_t> indptr = p.indptr;
  std::vector<int32_t> pages = p.pages;
  a = good;
  a.seq_length = lengths.data();
  a.seq_page_indptr = indptr.data();
  a.page_indices = pages.data();
  lengths[1] = 0;
  expect_bad(a, "seq_length[1] = 0 outside [1, max_length = 33]");
  lengths[1] = 34;
  expect_bad(a, "seq_length[1] = 34 outside [1, max_length = 33]");
  BANYAN_EXPECT_OK(ValidateSparqArgs(a, /*plan_on_host=*/false));
  lengths = p.lengths;
  lengths[0] = 33;  // seq 0 has 2 pages of 16 slots
  expect_bad(a, "seq_length[0] = 33 exceeds its 2 pages of 16 slots");
  lengths = p.lengths;
  pages[3] = static_cast<int32_t>(p.layout.num_pages);
  expect_bad(a, "page_indices[3] = ");
  pages[3] = -1;
  expect_bad(a, "page_indices[3] = -1 outside [0, num_pages = ");
  BANYAN_EXPECT_OK(ValidateSparqArgs(a, /*plan_on_host=*/false));
  pages = p.pages;
  indptr[2] = 1;  // seq 1's pages would run backwards from 2 to 1
  expect_bad(a, "seq_page_indptr[2] = 1 < seq_page_indptr[1]");
  indptr = p.indptr;
  indptr[0] = -1;
  expect_bad(a, "seq_page_indptr[0] = -1");
  indptr = p.indptr;
  BANYAN_EXPECT_OK(ValidateSparqArgs(a, true));
}

}  // namespace
}  // namespace banyan::attention

// Every op against a plain double-precision reference on fresh random inputs,
// outputs poisoned (NaN) before the op runs.
#include "model/ops/cpu_ops.h"

#include <cmath>
#include <limits>
#include <vector>

#include "gtest/gtest.h"
#include "model/ops/matmul_kernels.h"
#include "sdk/base/rng.h"

namespace banyan::model::ops {
namespace {

constexpr float kNan = std::numeric_limits<float>::quiet_NaN();

std::vector<float> RandomVector(Rng& rng, int64_t n, float scale = 1.0f) {
  std::vector<float> v(n);
  for (float& x : v) x = scale * rng.Normal();
  return v;
}

void ExpectClose(const std::vector<double>& want, const float* got, double rel, double abs) {
  for (size_t i = 0; i < want.size(); ++i) {
    ASSERT_NEAR(got[i], want[i], abs + rel * std::fabs(want[i])) << "at " << i;
  }
}

TEST(RmsNormTest, MatchesDoubleReference) {
  Rng rng(1);
  for (int64_t dim : {1, 7, 64, 576}) {
    const int64_t rows = 5;
    const auto x = RandomVector(rng, rows * dim, 3.0f);
    const auto w = RandomVector(rng, dim);
    const float eps = 1e-5f;
    std::vector<double> want(rows * dim);
    for (int64_t r = 0; r < rows; ++r) {
      double ss = 0;
      for (int64_t i = 0; i < dim; ++i) ss += double{x[r * dim + i]} * x[r * dim + i];
      const double inv = 1.0 / std::sqrt(ss / dim + eps);
      for (int64_t i = 0; i < dim; ++i) want[r * dim + i] = w[i] * x[r * dim + i] * inv;
    }
    std::vector<float> out(rows * dim, kNan);
    RmsNorm(x.data(), w.data(), rows, dim, eps, out.data());
    ExpectClose(want, out.data(), 1e-5, 1e-6);
    // In place.
    std::vector<float> inplace = x;
    RmsNorm(inplace.data(), w.data(), rows, dim, eps, inplace.data());
    ExpectClose(want, inplace.data(), 1e-5, 1e-6);
  }
}

// Reference inverse frequencies, written from the formulas in double.
std::vector<double> ReferenceInvFreq(int head_dim, double theta, const RopeScaling& s) {
  std::vector<double> inv(head_dim / 2);
  for (int i = 0; i < head_dim / 2; ++i) {
    double f = std::pow(theta, -2.0 * i / head_dim);
    if (s.type == RopeScaling::Type::kLinear) f /= s.factor;
    if (s.type == RopeScaling::Type::kLlama3) {
      const double wavelen = 2 * M_PI / f;
      const double lo = s.original_max_position / double{s.low_freq_factor};
      const double hi = s.original_max_position / double{s.high_freq_factor};
      if (wavelen > lo) {
        f /= s.factor;
      } else if (wavelen >= hi) {
        const double smooth =
            (s.original_max_position / wavelen - s.low_freq_factor) / (s.high_freq_factor - s.low_freq_factor);
        f = (1 - smooth) * f / s.factor + smooth * f;
      }
    }
    inv[i] = f;
  }
  return inv;
}

TEST(RopeTest, InverseFrequenciesMatchFormulas) {
  RopeScaling none;
  RopeScaling linear;
  linear.type = RopeScaling::Type::kLinear;
  linear.factor = 4.0f;
  RopeScaling llama3;
  llama3.type = RopeScaling::Type::kLlama3;
  llama3.factor = 8.0f;
  llama3.low_freq_factor = 1.0f;
  llama3.high_freq_factor = 4.0f;
  llama3.original_max_position = 64;  // small, so all three bands occur at head_dim 32
  for (const RopeScaling& s : {none, linear, llama3}) {
    for (float theta : {10000.0f, 500000.0f}) {
      const auto got = RopeInverseFrequencies(32, theta, s);
      const auto want = ReferenceInvFreq(32, theta, s);
      ASSERT_EQ(got.size(), want.size());
      ExpectClose(want, got.data(), 2e-6, 0);
    }
  }
  // The three llama3 bands really occur: some unchanged, some divided, some between.
  const auto plain = ReferenceInvFreq(32, 10000, none);
  const auto scaled = ReferenceInvFreq(32, 10000, llama3);
  int same = 0, divided = 0, between = 0;
  for (size_t i = 0; i < plain.size(); ++i) {
    if (scaled[i] == plain[i]) ++same;
    else if (std::fabs(scaled[i] * 8 - plain[i]) < 1e-12 * plain[i] + 1e-300) ++divided;
    else ++between;
  }
  EXPECT_GT(same, 0);
  EXPECT_GT(divided, 0);
  EXPECT_GT(between, 0);
}

TEST(RopeTest, RotateHalfMatchesReference) {
  Rng rng(2);
  const int rows = 6, heads = 3, head_dim = 16;
  auto x = RandomVector(rng, rows * heads * head_dim);
  std::vector<int32_t> positions = {0, 1, 5, 17, 100, 4095};
  RopeScaling s;
  const auto inv = RopeInverseFrequencies(head_dim, 10000.0f, s);
  std::vector<double> want(x.size());
  const int half = head_dim / 2;
  for (int r = 0; r < rows; ++r) {
    for (int h = 0; h < heads; ++h) {
      const float* v = x.data() + (r * heads + h) * head_dim;
      double* o = want.data() + (r * heads + h) * head_dim;
      for (int i = 0; i < half; ++i) {
        const double angle = static_cast<double>(positions[r]) * inv[i];
        o[i] = v[i] * std::cos(angle) - v[i + half] * std::sin(angle);
        o[i + half] = v[i + half] * std::cos(angle) + v[i] * std::sin(angle);
      }
    }
  }
  ApplyRope(x.data(), rows, heads, head_dim, positions.data(), inv);
  // Position 4095 in fp32 loses ~1e-4 rad of angle, as HF's fp32 RoPE does.
  ExpectClose(want, x.data(), 1e-5, 5e-4);
}

TEST(SwiGluTest, MatchesReference) {
  Rng rng(3);
  const int64_t n = 1000;
  const auto g = RandomVector(rng, n, 4.0f);
  const auto u = RandomVector(rng, n);
  std::vector<double> want(n);
  for (int64_t i = 0; i < n; ++i) want[i] = g[i] / (1.0 + std::exp(-double{g[i]})) * u[i];
  std::vector<float> out(n, kNan);
  SwiGlu(g.data(), u.data(), n, out.data());
  ExpectClose(want, out.data(), 1e-6, 1e-7);
}

TEST(ElementwiseTest, AddAndEmbedding) {
  Rng rng(4);
  auto x = RandomVector(rng, 300);
  const auto y = RandomVector(rng, 300);
  std::vector<double> want(300);
  for (int i = 0; i < 300; ++i) want[i] = double{x[i]} + y[i];
  AddInPlace(x.data(), y.data(), 300);
  ExpectClose(want, x.data(), 1e-7, 0);

  const int64_t vocab = 50, dim = 12;
  const auto table = RandomVector(rng, vocab * dim);
  const std::vector<int32_t> ids = {3, 0, 49, 3};
  std::vector<float> out(ids.size() * dim, kNan);
  EmbeddingLookup(table.data(), ids.data(), 4, dim, out.data());
  for (size_t r = 0; r < ids.size(); ++r) {
    for (int64_t i = 0; i < dim; ++i) EXPECT_EQ(out[r * dim + i], table[ids[r] * dim + i]);
  }
}

struct MatMulShape {
  int64_t rows, in, out;
  bool bias;
};

class MatMulTest : public ::testing::TestWithParam<MatMulShape> {};

TEST_P(MatMulTest, MatchesDoubleReferenceOnEveryKernelAndPool) {
  const MatMulShape s = GetParam();
  Rng rng(5 + s.rows * 131 + s.in * 7 + s.out);
  const auto x = RandomVector(rng, s.rows * s.in);
  const auto w = RandomVector(rng, s.out * s.in, 0.1f);
  const auto b = RandomVector(rng, s.out);
  std::vector<double> want(s.rows * s.out);
  for (int64_t r = 0; r < s.rows; ++r) {
    for (int64_t o = 0; o < s.out; ++o) {
      double acc = s.bias ? b[o] : 0.0;
      for (int64_t k = 0; k < s.in; ++k) acc += double{x[r * s.in + k]} * w[o * s.in + k];
      want[r * s.out + o] = acc;
    }
  }
  const double tol = 1e-5 * std::sqrt(double(s.in));
  ThreadPool pool(3);
  for (ThreadPool* p : {static_cast<ThreadPool*>(nullptr), &pool}) {
    std::vector<float> y(s.rows * s.out, kNan);
    MatMul(x.data(), w.data(), s.bias ? b.data() : nullptr, s.rows, s.in, s.out, y.data(), p);
    ExpectClose(want, y.data(), 1e-5, tol);
  }
  for (MatMulKernel kernel : {&MatMulPortable, &MatMulAvx2}) {
    if (kernel == &MatMulAvx2 && SelectMatMulKernel() != &MatMulAvx2) continue;  // CPU lacks AVX2
    std::vector<float> y(s.rows * s.out, kNan);
    kernel(x.data(), w.data(), s.bias ? b.data() : nullptr, s.rows, s.in, s.out, 0, s.out, y.data());
    ExpectClose(want, y.data(), 1e-5, tol);
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, MatMulTest,
                         ::testing::Values(MatMulShape{1, 1, 1, false}, MatMulShape{1, 576, 1536, false},
                                           MatMulShape{3, 13, 7, true}, MatMulShape{16, 64, 130, true},
                                           MatMulShape{5, 200, 33, false}, MatMulShape{2, 8, 4, true}));

}  // namespace
}  // namespace banyan::model::ops

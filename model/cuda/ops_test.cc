// GPU tests of the model/cuda kernels, each against a plain double-precision
// CPU reference written here, on fresh random inputs, outputs poisoned (NaN)
// before the kernel runs. bf16 outputs: relative error <= 1e-2; bf16 hi + lo
// pairs: 1e-4; fp32: 1e-5.
#include "model/cuda/ops.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstring>
#include <numbers>
#include <utility>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "sdk/base/half.h"
#include "sdk/base/rng.h"
#include "sdk/base/status_testing.h"
#include "sdk/gpu/cuda_status.h"
#include "sdk/gpu/device_buffer.h"
#include "sdk/gpu/gpu_test_util.h"

namespace banyan::model::cuda {
namespace {

using ::banyan::testing::StatusIs;
using gpu::DeviceBuffer;

uint64_t Seed(uint64_t salt) {
  return static_cast<uint64_t>(::testing::UnitTest::GetInstance()->random_seed()) * 1000003u + salt;
}

std::vector<Bf16> RandomBf16(Rng& rng, size_t n, float scale = 1.0f) {
  std::vector<Bf16> v(n);
  for (auto& x : v) x = Bf16(rng.Normal() * scale);
  return v;
}
std::vector<float> RandomF32(Rng& rng, size_t n) {
  std::vector<float> v(n);
  for (auto& x : v) x = rng.Normal();
  return v;
}
double F(Bf16 x) { return static_cast<float>(x); }

template <typename T>
DeviceBuffer Upload(const std::vector<T>& host) {
  auto buf = DeviceBuffer::Allocate(std::max<size_t>(host.size() * sizeof(T), 16));
  EXPECT_TRUE(buf.ok()) << buf.status();
  EXPECT_TRUE(buf->CopyFromHost(host.data(), host.size() * sizeof(T)).ok());
  return std::move(buf).value();
}
DeviceBuffer Poisoned(size_t bytes) {
  auto buf = DeviceBuffer::Allocate(bytes);
  EXPECT_TRUE(buf.ok()) << buf.status();
  EXPECT_TRUE(buf->Fill(0xff).ok());  // all-ones bits: NaN in bf16 and fp32
  return std::move(buf).value();
}
template <typename T>
std::vector<T> Download(const DeviceBuffer& buf, size_t n) {
  std::vector<T> host(n);
  EXPECT_TRUE(buf.CopyToHost(host.data(), n * sizeof(T)).ok());
  EXPECT_TRUE(BANYAN_CUDA_STATUS(cudaDeviceSynchronize()).ok());
  return host;
}

// ||got - ref|| / ||ref||, failing on any non-finite element.
template <typename T>
double RelError(const std::vector<T>& got, const std::vector<double>& ref) {
  EXPECT_EQ(got.size(), ref.size());
  double err = 0, norm = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    const double g = static_cast<float>(got[i]);
    if (!std::isfinite(g)) {
      ADD_FAILURE() << "unwritten or non-finite output at " << i;
      return INFINITY;
    }
    err += (g - ref[i]) * (g - ref[i]);
    norm += ref[i] * ref[i];
  }
  return std::sqrt(err / norm);
}

struct NormShape {
  int rows, dim;
};
class RmsNormTest : public ::testing::TestWithParam<NormShape> {};

// The three uses in the backend: no add; add (o_proj output); add + add_lo
// (the split down projection) with the output split into hi + lo.
TEST_P(RmsNormTest, FusedResidualMatchesReference) {
  BANYAN_SKIP_WITHOUT_GPU();
  const auto [rows, dim] = GetParam();
  for (int mode : {0, 1, 2}) {
    const bool with_add = mode >= 1, split = mode == 2;
    Rng rng(Seed(rows * 7919 + dim * 3 + mode));
    const size_t n = size_t(rows) * dim;
    std::vector<float> h = RandomF32(rng, n), x = RandomF32(rng, n), x_lo = RandomF32(rng, n);
    for (float& v : x_lo) v *= 1e-3f;
    std::vector<float> w = RandomF32(rng, dim);
    const float eps = 1e-5f;
    std::vector<double> ref_h(n), ref_y(n);
    for (int r = 0; r < rows; ++r) {
      double ss = 0;
      for (int i = 0; i < dim; ++i) {
        const size_t j = size_t(r) * dim + i;
        ref_h[j] = double(h[j]) + (with_add ? double(x[j]) : 0.0) + (split ? double(x_lo[j]) : 0.0);
        ss += ref_h[j] * ref_h[j];
      }
      const double scale = 1.0 / std::sqrt(ss / dim + eps);
      for (int i = 0; i < dim; ++i) {
        const size_t j = size_t(r) * dim + i;
        ref_y[j] = ref_h[j] * scale * w[i];
      }
    }
    DeviceBuffer dh = Upload(h), dx = Upload(x), dxl = Upload(x_lo), dw = Upload(w);
    DeviceBuffer dy = Poisoned(n * 2), dyl = Poisoned(n * 2);
    BANYAN_ASSERT_OK(LaunchRmsNorm({.rows = rows, .dim = dim, .eps = eps, .residual = dh.As<float>(),
                                    .add = with_add ? dx.As<float>() : nullptr,
                                    .add_lo = split ? dxl.As<float>() : nullptr, .weight = dw.As<float>(),
                                    .out = dy.As<bf16_bits>(), .out_lo = split ? dyl.As<bf16_bits>() : nullptr},
                                   nullptr));
    const std::vector<Bf16> hi = Download<Bf16>(dy, n);
    EXPECT_LT(RelError(hi, ref_y), 1e-2) << "mode " << mode;
    EXPECT_LT(RelError(Download<float>(dh, n), ref_h), 1e-5) << "mode " << mode;
    if (split) {  // hi + lo carries ~16 bits
      const std::vector<Bf16> lo = Download<Bf16>(dyl, n);
      std::vector<float> sum(n);
      for (size_t i = 0; i < n; ++i) sum[i] = static_cast<float>(hi[i]) + static_cast<float>(lo[i]);
      EXPECT_LT(RelError(sum, ref_y), 1e-4);
    }
  }
  float f = 0;
  EXPECT_THAT(LaunchRmsNorm({.rows = 1, .dim = 8, .residual = &f, .add_lo = &f, .weight = &f,
                             .out = reinterpret_cast<bf16_bits*>(&f)},
                            nullptr),
              StatusIs(absl::StatusCode::kInvalidArgument, ::testing::HasSubstr("add_lo")));
}

INSTANTIATE_TEST_SUITE_P(Shapes, RmsNormTest,
                         ::testing::Values(NormShape{1, 64}, NormShape{7, 8}, NormShape{33, 2048},
                                           NormShape{5, 100}, NormShape{3, 12288}, NormShape{2, 37}));

TEST(RopeInvFreqTest, DefaultLinearAndLlama3) {
  ModelConfig c;
  c.head_dim = 128;
  c.rope_theta = 500000.0f;
  BANYAN_ASSERT_OK_AND_ASSIGN(std::vector<float> plain, RopeInvFreq(c));
  ASSERT_EQ(plain.size(), 64u);
  for (int i = 0; i < 64; ++i) {
    EXPECT_NEAR(plain[i], std::pow(500000.0, -2.0 * i / 128), 1e-7 * plain[i]);
  }
  c.rope_scaling = {.type = RopeScaling::Type::kLinear, .factor = 4.0f};
  BANYAN_ASSERT_OK_AND_ASSIGN(std::vector<float> linear, RopeInvFreq(c));
  for (int i = 0; i < 64; ++i) EXPECT_FLOAT_EQ(linear[i], plain[i] / 4.0f);
  // Llama 3.1: factor 8, low 1, high 4, original context 8192.
  c.rope_scaling = {.type = RopeScaling::Type::kLlama3, .factor = 8.0f, .low_freq_factor = 1.0f,
                    .high_freq_factor = 4.0f, .original_max_position = 8192};
  BANYAN_ASSERT_OK_AND_ASSIGN(std::vector<float> llama3, RopeInvFreq(c));
  int high = 0, low = 0, medium = 0;
  for (int i = 0; i < 64; ++i) {
    const double wavelen = 2 * std::numbers::pi / plain[i];
    if (wavelen < 8192.0 / 4) {
      EXPECT_FLOAT_EQ(llama3[i], plain[i]);
      ++high;
    } else if (wavelen > 8192.0) {
      EXPECT_FLOAT_EQ(llama3[i], plain[i] / 8);
      ++low;
    } else {
      EXPECT_LT(llama3[i], plain[i]);
      EXPECT_GT(llama3[i], plain[i] / 8);
      ++medium;
    }
  }
  EXPECT_GT(high, 0);
  EXPECT_GT(low, 0);
  EXPECT_GT(medium, 0);
  c.head_dim = 7;
  EXPECT_THAT(RopeInvFreq(c), StatusIs(absl::StatusCode::kInvalidArgument));
}

class SwiGluTest : public ::testing::TestWithParam<NormShape> {};

TEST_P(SwiGluTest, MatchesReference) {
  BANYAN_SKIP_WITHOUT_GPU();
  const auto [rows, inter] = GetParam();
  for (bool split : {false, true}) {
    Rng rng(Seed(rows * 13 + inter * 2 + split));
    const size_t n = size_t(rows) * inter;
    std::vector<float> gu = RandomF32(rng, 2 * n), gu_lo = RandomF32(rng, 2 * n);
    for (float& v : gu) v *= 3.0f;
    for (float& v : gu_lo) v *= 1e-3f;
    std::vector<double> ref(n);
    for (int r = 0; r < rows; ++r) {
      for (int j = 0; j < inter; ++j) {
        const size_t g_at = size_t(r) * 2 * inter + j, u_at = g_at + inter;
        const double g = double(gu[g_at]) + (split ? double(gu_lo[g_at]) : 0.0);
        const double u = double(gu[u_at]) + (split ? double(gu_lo[u_at]) : 0.0);
        ref[size_t(r) * inter + j] = g / (1.0 + std::exp(-g)) * u;
      }
    }
    DeviceBuffer dgu = Upload(gu), dgl = Upload(gu_lo), dout = Poisoned(n * 2), dlo = Poisoned(n * 2);
    BANYAN_ASSERT_OK(LaunchSwiGlu({.rows = rows, .intermediate = inter, .gate_up = dgu.As<float>(),
                                   .gate_up_lo = split ? dgl.As<float>() : nullptr, .out = dout.As<bf16_bits>(),
                                   .out_lo = split ? dlo.As<bf16_bits>() : nullptr},
                                  nullptr));
    const std::vector<Bf16> hi = Download<Bf16>(dout, n);
    EXPECT_LT(RelError(hi, ref), 1e-2) << "split " << split;
    if (split) {
      const std::vector<Bf16> lo = Download<Bf16>(dlo, n);
      std::vector<float> sum(n);
      for (size_t i = 0; i < n; ++i) sum[i] = static_cast<float>(hi[i]) + static_cast<float>(lo[i]);
      EXPECT_LT(RelError(sum, ref), 1e-4);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, SwiGluTest,
                         ::testing::Values(NormShape{1, 8192}, NormShape{9, 24}, NormShape{4, 13},
                                           NormShape{130, 512}));

TEST(EmbeddingTest, GathersRowsAndReportsBadIds) {
  BANYAN_SKIP_WITHOUT_GPU();
  for (int dim : {256, 20}) {
    Rng rng(Seed(dim));
    const int vocab = 1000, rows = 50;
    std::vector<Bf16> table = RandomBf16(rng, size_t(vocab) * dim);
    std::vector<int32_t> ids(rows);
    for (auto& id : ids) id = static_cast<int32_t>(rng.UniformInt(vocab));
    std::vector<double> ref(size_t(rows) * dim);
    for (int r = 0; r < rows; ++r) {
      for (int i = 0; i < dim; ++i) ref[size_t(r) * dim + i] = F(table[size_t(ids[r]) * dim + i]);
    }
    DeviceBuffer dt = Upload(table), dids = Upload(ids), dout = Poisoned(ref.size() * 4);
    DeviceBuffer bad = Upload(std::vector<int32_t>{INT32_MAX});
    const EmbeddingParams p{.rows = rows, .dim = dim, .vocab = vocab, .ids = dids.As<int32_t>(),
                            .table = dt.As<bf16_bits>(), .out = dout.As<float>(),
                            .bad_row = bad.As<int32_t>()};
    BANYAN_ASSERT_OK(LaunchEmbedding(p, nullptr));
    EXPECT_LT(RelError(Download<float>(dout, ref.size()), ref), 1e-5);
    BANYAN_EXPECT_OK(EmbeddingBadRowStatus(Download<int32_t>(bad, 1)[0]));

    // Out-of-range ids at rows 17 and 31: no read outside the table, rows zeroed.
    ids[31] = vocab;
    ids[17] = -5;
    DeviceBuffer dids2 = Upload(ids), dout2 = Poisoned(ref.size() * 4);
    EmbeddingParams p2 = p;
    p2.ids = dids2.As<int32_t>();
    p2.out = dout2.As<float>();
    BANYAN_ASSERT_OK(LaunchEmbedding(p2, nullptr));
    std::vector<float> got = Download<float>(dout2, ref.size());
    for (int i = 0; i < dim; ++i) {
      ASSERT_EQ(got[size_t(17) * dim + i], 0.0f);
      ASSERT_EQ(got[size_t(31) * dim + i], 0.0f);
    }
    EXPECT_EQ(got[size_t(18) * dim], ref[size_t(18) * dim]);
    EXPECT_THAT(EmbeddingBadRowStatus(Download<int32_t>(bad, 1)[0]),
                StatusIs(absl::StatusCode::kOutOfRange, ::testing::HasSubstr("row 17")));
  }
}

// Split weights: the row is table + table_lo summed in fp32. The lo table
// holds the residuals bf16(x - bf16(x)) of random fp32 values x, so the sum
// must reproduce x to ~16 bits (far closer than the hi table alone).
TEST(EmbeddingTest, AddsTheLoTable) {
  BANYAN_SKIP_WITHOUT_GPU();
  for (int dim : {256, 20}) {
    Rng rng(Seed(dim + 7));
    const int vocab = 300, rows = 40;
    std::vector<float> x = RandomF32(rng, size_t(vocab) * dim);
    std::vector<Bf16> hi(x.size()), lo(x.size());
    for (size_t i = 0; i < x.size(); ++i) {
      hi[i] = Bf16(x[i]);
      lo[i] = Bf16(x[i] - static_cast<float>(hi[i]));
    }
    std::vector<int32_t> ids(rows);
    for (auto& id : ids) id = static_cast<int32_t>(rng.UniformInt(vocab));
    std::vector<double> want(size_t(rows) * dim), want_hi(want.size());
    for (int r = 0; r < rows; ++r) {
      for (int i = 0; i < dim; ++i) {
        const size_t at = size_t(ids[r]) * dim + i;
        want[size_t(r) * dim + i] = double{F(hi[at])} + F(lo[at]);
        want_hi[size_t(r) * dim + i] = x[at];
      }
    }
    DeviceBuffer dhi = Upload(hi), dlo = Upload(lo), dids = Upload(ids), dout = Poisoned(want.size() * 4);
    DeviceBuffer bad = Upload(std::vector<int32_t>{INT32_MAX});
    BANYAN_ASSERT_OK(LaunchEmbedding({.rows = rows, .dim = dim, .vocab = vocab, .ids = dids.As<int32_t>(),
                                      .table = dhi.As<bf16_bits>(), .table_lo = dlo.As<bf16_bits>(),
                                      .out = dout.As<float>(), .bad_row = bad.As<int32_t>()},
                                     nullptr));
    const std::vector<float> got = Download<float>(dout, want.size());
    EXPECT_LT(RelError(got, want), 1e-7);
    EXPECT_LT(RelError(got, want_hi), 1e-4);  // x itself to ~16 bits (bf16 alone: ~2e-3)
    BANYAN_EXPECT_OK(EmbeddingBadRowStatus(Download<int32_t>(bad, 1)[0]));
  }
}

struct QkvShape {
  int rows, q_heads, kv_heads, head_dim;
};
class QkvEpilogueTest : public ::testing::TestWithParam<QkvShape> {};

// Bias, lo half, RoPE (llama3-scaled frequencies) and the KV write against a
// double reference: q_out and every written pool cell within bf16 rounding,
// every other pool cell (other layer, other slots) bit-identical.
TEST_P(QkvEpilogueTest, MatchesReference) {
  BANYAN_SKIP_WITHOUT_GPU();
  const auto [rows, nq, nkv, hd] = GetParam();
  for (int mode : {0, 1}) {  // 0: plain; 1: with bias and lo half
    Rng rng(Seed(rows * 31 + nq * 7 + hd + mode));
    attention::KvLayout l{.num_layers = 2, .num_kv_heads = nkv, .head_dim = hd, .page_size = 16,
                          .num_pages = (rows + 15) / 16 + 3, .dtype_bytes = 2};
    const int layer = 1;
    const int64_t q_dim = int64_t{nq} * hd, kv_dim = int64_t{nkv} * hd, stride = q_dim + 2 * kv_dim;
    std::vector<float> qkv = RandomF32(rng, size_t(rows) * stride), lo = RandomF32(rng, qkv.size());
    std::vector<float> bias = RandomF32(rng, stride);
    for (float& v : lo) v *= 1e-3f;
    std::vector<int32_t> pos(rows), page(rows), slot(rows);
    std::vector<int> cells(l.num_pages * l.page_size);
    for (size_t i = 0; i < cells.size(); ++i) cells[i] = static_cast<int>(i);
    for (int r = 0; r < rows; ++r) {
      pos[r] = static_cast<int32_t>(rng.UniformInt(9000));
      const size_t j = r + rng.UniformInt(cells.size() - r);
      std::swap(cells[r], cells[j]);
      page[r] = cells[r] / l.page_size;
      slot[r] = cells[r] % l.page_size;
    }
    ModelConfig c;
    c.head_dim = hd;
    c.rope_theta = 500000.0f;
    c.rope_scaling = {.type = RopeScaling::Type::kLlama3, .factor = 8.0f, .low_freq_factor = 1.0f,
                      .high_freq_factor = 4.0f, .original_max_position = 1024};
    BANYAN_ASSERT_OK_AND_ASSIGN(std::vector<float> inv_freq, RopeInvFreq(c));
    // Reference: x = qkv (+ lo + bias); rotate the q and k heads.
    std::vector<double> x(qkv.size());
    for (int r = 0; r < rows; ++r) {
      for (int64_t i = 0; i < stride; ++i) {
        const size_t j = size_t(r) * stride + i;
        x[j] = double(qkv[j]) + (mode ? double(lo[j]) + double(bias[i]) : 0.0);
      }
      for (int h = 0; h < nq + nkv; ++h) {
        double* v = x.data() + int64_t{r} * stride + int64_t{h} * hd;
        for (int i = 0; i < hd / 2; ++i) {
          const double a = pos[r] * double(inv_freq[i]);
          const double x1 = v[i], x2 = v[i + hd / 2];
          v[i] = x1 * std::cos(a) - x2 * std::sin(a);
          v[i + hd / 2] = x2 * std::cos(a) + x1 * std::sin(a);
        }
      }
    }
    std::vector<Bf16> pool = RandomBf16(rng, l.TotalBytes() / 2);
    std::vector<double> ref_q(size_t(rows) * q_dim), ref_kv(size_t(rows) * 2 * kv_dim);
    std::vector<bool> written(pool.size(), false);
    for (int r = 0; r < rows; ++r) {
      for (int64_t i = 0; i < q_dim; ++i) ref_q[r * q_dim + i] = x[r * stride + i];
      for (int kvi = 0; kvi < 2; ++kvi) {
        for (int h = 0; h < nkv; ++h) {
          const size_t at = l.Offset(layer, kvi, page[r], h, slot[r]);
          for (int i = 0; i < hd; ++i) written[at + i] = true;
        }
      }
    }
    DeviceBuffer dqkv = Upload(qkv), dlo = Upload(lo), dbias = Upload(bias), dpool = Upload(pool);
    DeviceBuffer dq = Poisoned(size_t(rows) * q_dim * 2);
    DeviceBuffer dpos = Upload(pos), dpage = Upload(page), dslot = Upload(slot), dfreq = Upload(inv_freq);
    const QkvEpilogueParams p{.rows = rows, .num_q_heads = nq, .num_kv_heads = nkv, .head_dim = hd,
                              .qkv = dqkv.As<float>(), .qkv_lo = mode ? dlo.As<float>() : nullptr,
                              .bias = mode ? dbias.As<float>() : nullptr, .positions = dpos.As<int32_t>(),
                              .inv_freq = dfreq.As<float>(), .q_out = dq.As<bf16_bits>(), .layer = layer,
                              .layout = l, .page = dpage.As<int32_t>(), .slot = dslot.As<int32_t>(),
                              .pool = dpool.As<bf16_bits>()};
    BANYAN_ASSERT_OK(LaunchQkvEpilogue(p, nullptr));
    EXPECT_LT(RelError(Download<Bf16>(dq, ref_q.size()), ref_q), 1e-2) << "mode " << mode;
    const std::vector<Bf16> got_pool = Download<Bf16>(dpool, pool.size());
    std::vector<Bf16> got_kv;
    for (int r = 0; r < rows; ++r) {
      for (int kvi = 0; kvi < 2; ++kvi) {
        for (int h = 0; h < nkv; ++h) {
          const size_t at = l.Offset(layer, kvi, page[r], h, slot[r]);
          for (int i = 0; i < hd; ++i) {
            got_kv.push_back(got_pool[at + i]);
            ref_kv[got_kv.size() - 1] = x[r * stride + q_dim + int64_t{kvi} * kv_dim + int64_t{h} * hd + i];
          }
        }
      }
    }
    EXPECT_LT(RelError(got_kv, ref_kv), 1e-2) << "mode " << mode;
    for (size_t i = 0; i < pool.size(); ++i) {
      if (!written[i]) {
        ASSERT_EQ(got_pool[i].bits, pool[i].bits) << "pool changed at " << i;
      }
    }
    QkvEpilogueParams bad = p;
    bad.layout.head_dim = hd + 2;
    EXPECT_THAT(LaunchQkvEpilogue(bad, nullptr), StatusIs(absl::StatusCode::kInvalidArgument));
    bad = p;
    bad.head_dim = bad.layout.head_dim = 3;
    EXPECT_THAT(LaunchQkvEpilogue(bad, nullptr), StatusIs(absl::StatusCode::kInvalidArgument));
    bad = p;
    bad.q_out = nullptr;
    EXPECT_THAT(LaunchQkvEpilogue(bad, nullptr), StatusIs(absl::StatusCode::kInvalidArgument));
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, QkvEpilogueTest,
                         ::testing::Values(QkvShape{1, 4, 1, 64}, QkvShape{37, 12, 4, 128},
                                           QkvShape{5, 3, 3, 10}, QkvShape{45, 9, 3, 64},
                                           QkvShape{64, 32, 8, 64}));

TEST(GatherRowsTest, PicksRows) {
  BANYAN_SKIP_WITHOUT_GPU();
  Rng rng(Seed(5));
  const int src_rows = 30, cols = 72, rows = 6;
  std::vector<Bf16> src = RandomBf16(rng, size_t(src_rows) * cols);
  std::vector<int32_t> index = {29, 0, 5, 5, 17, 3};
  DeviceBuffer ds = Upload(src), di = Upload(index), dd = Poisoned(size_t(rows) * cols * 2);
  BANYAN_ASSERT_OK(LaunchGatherRows({.rows = rows, .cols = cols, .src = ds.As<bf16_bits>(),
                                     .index = di.As<int32_t>(), .dst = dd.As<bf16_bits>()},
                                    nullptr));
  std::vector<Bf16> got = Download<Bf16>(dd, size_t(rows) * cols);
  for (int r = 0; r < rows; ++r) {
    for (int i = 0; i < cols; ++i) ASSERT_EQ(got[r * cols + i].bits, src[index[r] * cols + i].bits);
  }
}

}  // namespace
}  // namespace banyan::model::cuda

// GPU tests of the model/cuda kernels, each against a plain double-precision
// CPU reference written here, on fresh random inputs, outputs poisoned (NaN)
// before the kernel runs. bf16 outputs: relative error <= 1e-2; fp32: 1e-5.
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

TEST_P(RmsNormTest, FusedResidualMatchesReference) {
  BANYAN_SKIP_WITHOUT_GPU();
  const auto [rows, dim] = GetParam();
  for (bool with_add : {false, true}) {
    Rng rng(Seed(rows * 7919 + dim + with_add));
    const size_t n = size_t(rows) * dim;
    std::vector<float> h = RandomF32(rng, n);
    std::vector<Bf16> x = RandomBf16(rng, n), w = RandomBf16(rng, dim);
    const float eps = 1e-5f;
    std::vector<double> ref_h(n), ref_y(n);
    for (int r = 0; r < rows; ++r) {
      double ss = 0;
      for (int i = 0; i < dim; ++i) {
        const size_t j = size_t(r) * dim + i;
        ref_h[j] = double(h[j]) + (with_add ? F(x[j]) : 0.0);
        ss += ref_h[j] * ref_h[j];
      }
      const double scale = 1.0 / std::sqrt(ss / dim + eps);
      for (int i = 0; i < dim; ++i) {
        const size_t j = size_t(r) * dim + i;
        ref_y[j] = ref_h[j] * scale * F(w[i]);
      }
    }
    DeviceBuffer dh = Upload(h), dx = Upload(x), dw = Upload(w), dy = Poisoned(n * 2);
    BANYAN_ASSERT_OK(LaunchRmsNorm({.rows = rows, .dim = dim, .eps = eps, .residual = dh.As<float>(),
                                    .add = with_add ? dx.As<bf16_bits>() : nullptr,
                                    .weight = dw.As<bf16_bits>(), .out = dy.As<bf16_bits>()},
                                   nullptr));
    EXPECT_LT(RelError(Download<Bf16>(dy, n), ref_y), 1e-2) << "add=" << with_add;
    EXPECT_LT(RelError(Download<float>(dh, n), ref_h), 1e-5) << "add=" << with_add;
  }
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

struct RopeShape {
  int rows, q_heads, kv_heads, head_dim;
};
class RopeTest : public ::testing::TestWithParam<RopeShape> {};

// q, k and v live in one fused QKV row; v must stay untouched. With q_out,
// the rotated q goes to its own contiguous buffer and the QKV row's q stays.
TEST_P(RopeTest, RotatesQAndK) {
  BANYAN_SKIP_WITHOUT_GPU();
  const auto [rows, nq, nk, hd] = GetParam();
  for (bool separate_q : {false, true}) {
    Rng rng(Seed(rows * 31 + nq * 7 + hd + separate_q));
    const int64_t stride = int64_t{nq + 2 * nk} * hd;
    std::vector<Bf16> qkv = RandomBf16(rng, size_t(rows) * stride);
    std::vector<int32_t> pos(rows);
    for (auto& p : pos) p = static_cast<int32_t>(rng.UniformInt(4096));
    ModelConfig c;
    c.head_dim = hd;
    c.rope_theta = 10000.0f;
    BANYAN_ASSERT_OK_AND_ASSIGN(std::vector<float> inv_freq, RopeInvFreq(c));
    std::vector<double> ref(qkv.size());
    for (size_t i = 0; i < qkv.size(); ++i) ref[i] = F(qkv[i]);
    const int half = hd / 2;
    for (int r = 0; r < rows; ++r) {
      for (int h = 0; h < nq + nk; ++h) {
        double* x = ref.data() + int64_t{r} * stride + int64_t{h} * hd;
        for (int i = 0; i < half; ++i) {
          const double a = pos[r] * double(inv_freq[i]);
          const double x1 = x[i], x2 = x[i + half];
          x[i] = x1 * std::cos(a) - x2 * std::sin(a);
          x[i + half] = x2 * std::cos(a) + x1 * std::sin(a);
        }
      }
    }
    const int64_t q_dim = int64_t{nq} * hd;
    DeviceBuffer d = Upload(qkv), dpos = Upload(pos), dfreq = Upload(inv_freq);
    DeviceBuffer dq = Poisoned(size_t(rows) * q_dim * 2);
    bf16_bits* base = d.As<bf16_bits>();
    BANYAN_ASSERT_OK(LaunchRope({.rows = rows, .num_q_heads = nq, .num_kv_heads = nk, .head_dim = hd,
                                 .q = base, .q_row_stride = stride, .k = base + q_dim,
                                 .k_row_stride = stride, .positions = dpos.As<int32_t>(),
                                 .inv_freq = dfreq.As<float>(),
                                 .q_out = separate_q ? dq.As<bf16_bits>() : nullptr,
                                 .q_out_row_stride = separate_q ? q_dim : 0},
                                nullptr));
    std::vector<Bf16> got = Download<Bf16>(d, qkv.size());
    if (separate_q) {
      std::vector<Bf16> got_q = Download<Bf16>(dq, size_t(rows) * q_dim);
      std::vector<double> ref_q(got_q.size());
      for (int r = 0; r < rows; ++r) {
        for (int64_t i = 0; i < q_dim; ++i) {
          ref_q[r * q_dim + i] = ref[r * stride + i];
          ref[r * stride + i] = F(qkv[r * stride + i]);  // the row's q is only read
        }
      }
      EXPECT_LT(RelError(got_q, ref_q), 1e-2);
    }
    EXPECT_LT(RelError(got, ref), 1e-2) << "separate_q=" << separate_q;
    for (int r = 0; r < rows; ++r) {
      for (int64_t i = int64_t{nq + nk} * hd; i < stride; ++i) {
        ASSERT_EQ(got[r * stride + i].bits, qkv[r * stride + i].bits) << "v changed at row " << r;
      }
      if (separate_q) {
        for (int64_t i = 0; i < q_dim; ++i) {
          ASSERT_EQ(got[r * stride + i].bits, qkv[r * stride + i].bits) << "q changed at row " << r;
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, RopeTest,
                         ::testing::Values(RopeShape{1, 4, 1, 64}, RopeShape{37, 12, 4, 128},
                                           RopeShape{5, 3, 3, 10}, RopeShape{64, 32, 8, 64}));

TEST(RopeTest, RejectsOddHeadDim) {
  BANYAN_SKIP_WITHOUT_GPU();
  int dummy[4] = {};
  float f[4] = {};
  EXPECT_THAT(LaunchRope({.rows = 1, .num_q_heads = 1, .num_kv_heads = 1, .head_dim = 3,
                          .q = reinterpret_cast<bf16_bits*>(dummy), .q_row_stride = 3,
                          .k = reinterpret_cast<bf16_bits*>(dummy), .k_row_stride = 3,
                          .positions = dummy, .inv_freq = f},
                         nullptr),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

class SwiGluTest : public ::testing::TestWithParam<NormShape> {};

TEST_P(SwiGluTest, MatchesReference) {
  BANYAN_SKIP_WITHOUT_GPU();
  const auto [rows, inter] = GetParam();
  Rng rng(Seed(rows * 13 + inter));
  std::vector<Bf16> gu = RandomBf16(rng, size_t(rows) * 2 * inter, 3.0f);
  std::vector<double> ref(size_t(rows) * inter);
  for (int r = 0; r < rows; ++r) {
    for (int j = 0; j < inter; ++j) {
      const double g = F(gu[size_t(r) * 2 * inter + j]), u = F(gu[size_t(r) * 2 * inter + inter + j]);
      ref[size_t(r) * inter + j] = g / (1.0 + std::exp(-g)) * u;
    }
  }
  DeviceBuffer dgu = Upload(gu), dout = Poisoned(ref.size() * 2);
  BANYAN_ASSERT_OK(LaunchSwiGlu({.rows = rows, .intermediate = inter, .gate_up = dgu.As<bf16_bits>(),
                                 .out = dout.As<bf16_bits>()},
                                nullptr));
  EXPECT_LT(RelError(Download<Bf16>(dout, ref.size()), ref), 1e-2);
}

INSTANTIATE_TEST_SUITE_P(Shapes, SwiGluTest,
                         ::testing::Values(NormShape{1, 8192}, NormShape{9, 24}, NormShape{4, 13},
                                           NormShape{130, 512}));

TEST(BiasAddTest, MatchesReference) {
  BANYAN_SKIP_WITHOUT_GPU();
  for (int cols : {96, 45}) {
    Rng rng(Seed(cols));
    const int rows = 11;
    std::vector<Bf16> x = RandomBf16(rng, size_t(rows) * cols), b = RandomBf16(rng, cols);
    std::vector<double> ref(x.size());
    for (size_t i = 0; i < x.size(); ++i) ref[i] = F(x[i]) + F(b[i % cols]);
    DeviceBuffer dx = Upload(x), db = Upload(b);
    BANYAN_ASSERT_OK(LaunchBiasAdd({.rows = rows, .cols = cols, .x = dx.As<bf16_bits>(),
                                    .bias = db.As<bf16_bits>()},
                                   nullptr));
    EXPECT_LT(RelError(Download<Bf16>(dx, x.size()), ref), 1e-2);
  }
}

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

TEST(KvWriteTest, WritesEveryHeadAtItsPageAndSlot) {
  BANYAN_SKIP_WITHOUT_GPU();
  for (int hd : {64, 12}) {
    Rng rng(Seed(hd));
    attention::KvLayout l{.num_layers = 3, .num_kv_heads = 2, .head_dim = hd, .page_size = 16,
                          .num_pages = 9, .dtype_bytes = 2};
    const int rows = 40, nq = 4, layer = 1;
    const int64_t stride = int64_t{nq + 2 * l.num_kv_heads} * hd;
    std::vector<Bf16> qkv = RandomBf16(rng, size_t(rows) * stride);
    // Distinct (page, slot) for every row.
    std::vector<int32_t> page(rows), slot(rows);
    std::vector<int> cells(l.num_pages * l.page_size);
    for (size_t i = 0; i < cells.size(); ++i) cells[i] = static_cast<int>(i);
    for (int r = 0; r < rows; ++r) {
      const size_t j = r + rng.UniformInt(cells.size() - r);
      std::swap(cells[r], cells[j]);
      page[r] = cells[r] / l.page_size;
      slot[r] = cells[r] % l.page_size;
    }
    std::vector<Bf16> pool = RandomBf16(rng, l.TotalBytes() / 2);
    std::vector<Bf16> expect = pool;
    for (int r = 0; r < rows; ++r) {
      for (int kv = 0; kv < 2; ++kv) {
        for (int h = 0; h < l.num_kv_heads; ++h) {
          for (int i = 0; i < hd; ++i) {
            expect[l.Offset(layer, kv, page[r], h, slot[r]) + i] =
                qkv[r * stride + int64_t{nq + kv * l.num_kv_heads + h} * hd + i];
          }
        }
      }
    }
    DeviceBuffer d = Upload(qkv), dpool = Upload(pool), dpage = Upload(page), dslot = Upload(slot);
    const bf16_bits* base = d.As<bf16_bits>();
    BANYAN_ASSERT_OK(LaunchKvWrite({.rows = rows, .layer = layer, .layout = l,
                                    .k = base + int64_t{nq} * hd, .k_row_stride = stride,
                                    .v = base + int64_t{nq + l.num_kv_heads} * hd, .v_row_stride = stride,
                                    .page = dpage.As<int32_t>(), .slot = dslot.As<int32_t>(),
                                    .pool = dpool.As<bf16_bits>()},
                                   nullptr));
    std::vector<Bf16> got = Download<Bf16>(dpool, pool.size());
    for (size_t i = 0; i < got.size(); ++i) ASSERT_EQ(got[i].bits, expect[i].bits) << "at " << i;
    EXPECT_THAT(LaunchKvWrite({.rows = 1, .layer = 3, .layout = l}, nullptr),
                StatusIs(absl::StatusCode::kInvalidArgument));
  }
}

// The fused kernel equals RoPE followed by the KV write (each tested above
// against a double reference), bit for bit.
TEST(RopeKvWriteTest, EqualsRopeThenKvWrite) {
  BANYAN_SKIP_WITHOUT_GPU();
  for (int hd : {64, 128}) {
    Rng rng(Seed(hd + 77));
    attention::KvLayout l{.num_layers = 2, .num_kv_heads = 3, .head_dim = hd, .page_size = 16,
                          .num_pages = 12, .dtype_bytes = 2};
    const int rows = 45, nq = 9, layer = 1;
    const int64_t q_dim = int64_t{nq} * hd, stride = q_dim + 2 * l.num_kv_heads * hd;
    std::vector<Bf16> qkv = RandomBf16(rng, size_t(rows) * stride);
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
    std::vector<Bf16> pool = RandomBf16(rng, l.TotalBytes() / 2);
    DeviceBuffer d1 = Upload(qkv), d2 = Upload(qkv), p1 = Upload(pool), p2 = Upload(pool);
    DeviceBuffer q1 = Poisoned(size_t(rows) * q_dim * 2), q2 = Poisoned(size_t(rows) * q_dim * 2);
    DeviceBuffer dpos = Upload(pos), dpage = Upload(page), dslot = Upload(slot), dfreq = Upload(inv_freq);
    auto params = [&](DeviceBuffer& d, DeviceBuffer& q, DeviceBuffer& p) {
      bf16_bits* base = d.As<bf16_bits>();
      RopeParams rope{.rows = rows, .num_q_heads = nq, .num_kv_heads = l.num_kv_heads, .head_dim = hd,
                      .q = base, .q_row_stride = stride, .k = base + q_dim, .k_row_stride = stride,
                      .positions = dpos.As<int32_t>(), .inv_freq = dfreq.As<float>(),
                      .q_out = q.As<bf16_bits>(), .q_out_row_stride = q_dim};
      KvWriteParams kv{.rows = rows, .layer = layer, .layout = l, .k = base + q_dim, .k_row_stride = stride,
                       .v = base + q_dim + l.num_kv_heads * hd, .v_row_stride = stride,
                       .page = dpage.As<int32_t>(), .slot = dslot.As<int32_t>(), .pool = p.As<bf16_bits>()};
      return std::make_pair(rope, kv);
    };
    auto [rope1, kv1] = params(d1, q1, p1);
    BANYAN_ASSERT_OK(LaunchRope(rope1, nullptr));
    BANYAN_ASSERT_OK(LaunchKvWrite(kv1, nullptr));
    auto [rope2, kv2] = params(d2, q2, p2);
    BANYAN_ASSERT_OK(LaunchRopeKvWrite(rope2, kv2, nullptr));
    const std::vector<Bf16> want_q = Download<Bf16>(q1, size_t(rows) * q_dim);
    const std::vector<Bf16> got_q = Download<Bf16>(q2, size_t(rows) * q_dim);
    for (size_t i = 0; i < want_q.size(); ++i) ASSERT_EQ(got_q[i].bits, want_q[i].bits) << "q at " << i;
    const std::vector<Bf16> want_pool = Download<Bf16>(p1, pool.size());
    const std::vector<Bf16> got_pool = Download<Bf16>(p2, pool.size());
    for (size_t i = 0; i < pool.size(); ++i) ASSERT_EQ(got_pool[i].bits, want_pool[i].bits) << "pool at " << i;
    RopeParams no_out = rope2;
    no_out.q_out = nullptr;
    EXPECT_THAT(LaunchRopeKvWrite(no_out, kv2, nullptr), StatusIs(absl::StatusCode::kInvalidArgument));
  }
}

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

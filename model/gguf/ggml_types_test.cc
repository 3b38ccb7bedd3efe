// Dequantization references: blocks built in the test from integer codes
// with an encoder written from the block layouts (ggml_types.h), compared
// with the formula on those codes; hand-assembled bit patterns with values
// worked out by hand; and float quantize -> dequantize error bounds.
#include "model/gguf/ggml_types.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "sdk/base/half.h"
#include "sdk/base/rng.h"
#include "sdk/base/status_testing.h"

namespace banyan::model {
namespace {

using ::banyan::testing::StatusIs;
using ::testing::HasSubstr;

void PutHalf(std::vector<uint8_t>* b, float v) {
  const uint16_t h = FloatToFp16Bits(v);
  b->push_back(h & 0xff);
  b->push_back(h >> 8);
}

std::vector<float> Dequant(GgmlType type, const std::vector<uint8_t>& bytes, size_t n) {
  std::vector<float> out(n, std::nanf(""));  // poisoned
  const absl::Status s = DequantizeGgml(static_cast<uint32_t>(type), bytes, absl::MakeSpan(out));
  EXPECT_TRUE(s.ok()) << s;
  return out;
}

// A random fp16-representable scale in [lo, hi).
float RandomHalf(Rng& rng, float lo, float hi) {
  return Fp16BitsToFloat(FloatToFp16Bits(lo + (hi - lo) * static_cast<float>(rng.Uniform())));
}

int RandInt(Rng& rng, int lo, int hi) {  // inclusive
  return lo + static_cast<int>(rng.UniformInt(static_cast<uint64_t>(hi - lo + 1)));
}

TEST(GgmlTypesTest, Q8_0FromCodes) {
  Rng rng(1);
  const int blocks = 5;
  std::vector<uint8_t> bytes;
  std::vector<float> expect;
  for (int b = 0; b < blocks; ++b) {
    const float d = RandomHalf(rng, -0.1f, 0.1f);
    PutHalf(&bytes, d);
    for (int j = 0; j < 32; ++j) {
      const int q = RandInt(rng, -128, 127);
      bytes.push_back(static_cast<uint8_t>(static_cast<int8_t>(q)));
      expect.push_back(d * q);
    }
  }
  EXPECT_EQ(Dequant(GgmlType::kQ8_0, bytes, expect.size()), expect);
}

TEST(GgmlTypesTest, Q4_0AndQ4_1FromCodes) {
  Rng rng(2);
  for (bool with_min : {false, true}) {
    std::vector<uint8_t> bytes;
    std::vector<float> expect;
    for (int b = 0; b < 4; ++b) {
      const float d = RandomHalf(rng, -0.2f, 0.2f), m = RandomHalf(rng, -1.0f, 1.0f);
      PutHalf(&bytes, d);
      if (with_min) PutHalf(&bytes, m);
      int q[32];
      for (int& v : q) v = RandInt(rng, 0, 15);
      for (int j = 0; j < 16; ++j) bytes.push_back(static_cast<uint8_t>(q[j] | (q[j + 16] << 4)));
      for (int j = 0; j < 32; ++j) expect.push_back(with_min ? q[j] * d + m : (q[j] - 8) * d);
    }
    EXPECT_EQ(Dequant(with_min ? GgmlType::kQ4_1 : GgmlType::kQ4_0, bytes, expect.size()), expect);
  }
}

TEST(GgmlTypesTest, Q4_KFromCodes) {
  Rng rng(3);
  std::vector<uint8_t> bytes;
  std::vector<float> expect;
  for (int b = 0; b < 3; ++b) {
    const float d = RandomHalf(rng, 0.001f, 0.05f), dmin = RandomHalf(rng, 0.001f, 0.05f);
    int sc[8], mn[8], q[256];
    for (int s = 0; s < 8; ++s) {
      sc[s] = RandInt(rng, 0, 63);
      mn[s] = RandInt(rng, 0, 63);
    }
    for (int& v : q) v = RandInt(rng, 0, 15);
    PutHalf(&bytes, d);
    PutHalf(&bytes, dmin);
    uint8_t scales[12];
    for (int j = 0; j < 4; ++j) {
      scales[j] = static_cast<uint8_t>(sc[j] | ((sc[j + 4] >> 4) << 6));
      scales[j + 4] = static_cast<uint8_t>(mn[j] | ((mn[j + 4] >> 4) << 6));
      scales[j + 8] = static_cast<uint8_t>((sc[j + 4] & 0xf) | ((mn[j + 4] & 0xf) << 4));
    }
    bytes.insert(bytes.end(), scales, scales + 12);
    for (int c = 0; c < 4; ++c) {  // 64 values per 32 bytes: low nibbles then high
      for (int l = 0; l < 32; ++l) {
        bytes.push_back(static_cast<uint8_t>(q[c * 64 + l] | (q[c * 64 + 32 + l] << 4)));
      }
    }
    for (int i = 0; i < 256; ++i) {
      const int s = i / 32;
      expect.push_back(d * sc[s] * q[i] - dmin * mn[s]);
    }
  }
  const std::vector<float> got = Dequant(GgmlType::kQ4_K, bytes, expect.size());
  for (size_t i = 0; i < expect.size(); ++i) EXPECT_FLOAT_EQ(got[i], expect[i]) << i;
}

TEST(GgmlTypesTest, Q6_KFromCodes) {
  Rng rng(4);
  std::vector<uint8_t> bytes;
  std::vector<float> expect;
  for (int b = 0; b < 3; ++b) {
    const float d = RandomHalf(rng, 0.001f, 0.05f);
    int q[256], sc[16];
    for (int& v : q) v = RandInt(rng, 0, 63);
    for (int& v : sc) v = RandInt(rng, -128, 127);
    uint8_t ql[128], qh[64];
    for (int n = 0; n < 2; ++n) {
      for (int l = 0; l < 32; ++l) {
        const int* v = q + n * 128 + l;
        const int q1 = v[0], q2 = v[32], q3 = v[64], q4 = v[96];
        ql[n * 64 + l] = static_cast<uint8_t>((q1 & 0xf) | ((q3 & 0xf) << 4));
        ql[n * 64 + l + 32] = static_cast<uint8_t>((q2 & 0xf) | ((q4 & 0xf) << 4));
        qh[n * 32 + l] = static_cast<uint8_t>((q1 >> 4) | ((q2 >> 4) << 2) | ((q3 >> 4) << 4) |
                                              ((q4 >> 4) << 6));
      }
    }
    bytes.insert(bytes.end(), ql, ql + 128);
    bytes.insert(bytes.end(), qh, qh + 64);
    for (int s : sc) bytes.push_back(static_cast<uint8_t>(static_cast<int8_t>(s)));
    PutHalf(&bytes, d);
    for (int i = 0; i < 256; ++i) {
      // Value i = n*128 + k*32 + l uses scale n*8 + l/16 + 2k.
      const int n = i / 128, k = (i % 128) / 32, l = i % 32;
      expect.push_back(d * sc[n * 8 + l / 16 + 2 * k] * (q[i] - 32));
    }
  }
  const std::vector<float> got = Dequant(GgmlType::kQ6_K, bytes, expect.size());
  for (size_t i = 0; i < expect.size(); ++i) EXPECT_FLOAT_EQ(got[i], expect[i]) << i;
}

TEST(GgmlTypesTest, KnownBitPatterns) {
  {  // Q8_0: d = 1.0 (0x3c00), codes 1, -1, 127, -128.
    std::vector<uint8_t> b = {0x00, 0x3c, 0x01, 0xff, 0x7f, 0x80};
    b.resize(34, 0);
    auto y = Dequant(GgmlType::kQ8_0, b, 32);
    EXPECT_EQ(y[0], 1.0f);
    EXPECT_EQ(y[1], -1.0f);
    EXPECT_EQ(y[2], 127.0f);
    EXPECT_EQ(y[3], -128.0f);
    EXPECT_EQ(y[31], 0.0f);
  }
  {  // Q4_0: d = 2.0 (0x4000), byte 0 = 0x8f: value 0 = (15-8)*2, value 16 = (8-8)*2.
    std::vector<uint8_t> b = {0x00, 0x40, 0x8f};
    b.resize(18, 0x88);
    auto y = Dequant(GgmlType::kQ4_0, b, 32);
    EXPECT_EQ(y[0], 14.0f);
    EXPECT_EQ(y[16], 0.0f);
    EXPECT_EQ(y[1], 0.0f);
  }
  {  // Q4_1: d = 1.0, m = -1.0 (0xbc00), byte 0 = 0x21: values 1-1 and 2-1.
    std::vector<uint8_t> b = {0x00, 0x3c, 0x00, 0xbc, 0x21};
    b.resize(20, 0);
    auto y = Dequant(GgmlType::kQ4_1, b, 32);
    EXPECT_EQ(y[0], 0.0f);
    EXPECT_EQ(y[16], 1.0f);
    EXPECT_EQ(y[1], -1.0f);
  }
  {  // Q4_K: d = dmin = 1. scales[0] = 0x42 -> sc0 = 2 (and bits 4-5 of sc4 = 1);
     // scales[4] = 0x01 -> m0 = 1; scales[8] = 0x53 -> sc4 = 3 | 1<<4 = 19, m4 = 5.
     // qs[0] = 0x03 -> y[0] = 2*3 - 1 = 5; qs[64] = 0x02 -> y[128] = 19*2 - 5 = 33.
    std::vector<uint8_t> b(144, 0);
    b[1] = 0x3c;
    b[3] = 0x3c;
    b[4 + 0] = 0x42;
    b[4 + 4] = 0x01;
    b[4 + 8] = 0x53;
    b[16 + 0] = 0x03;
    b[16 + 64] = 0x02;
    auto y = Dequant(GgmlType::kQ4_K, b, 256);
    EXPECT_EQ(y[0], 5.0f);
    EXPECT_EQ(y[1], -1.0f);   // code 0, min 1
    EXPECT_EQ(y[32], 0.0f);   // sub-block 1: scale 0, min 0
    EXPECT_EQ(y[128], 33.0f);
    EXPECT_EQ(y[129], -5.0f);
  }
  {  // Q6_K: d = 1 at byte 208. scales[0] = 3, scales[2] = -2. ql[0] = 0x05, qh[0] = 0x02:
     // y[0] = 3 * ((5 | 2<<4) - 32) = 15. ql[32] = 0x0f: y[32] = -2 * (15 - 32) = 34.
    std::vector<uint8_t> b(210, 0);
    b[0] = 0x05;
    b[32] = 0x0f;
    b[128] = 0x02;
    b[192 + 0] = 3;
    b[192 + 2] = static_cast<uint8_t>(-2);
    b[209] = 0x3c;
    auto y = Dequant(GgmlType::kQ6_K, b, 256);
    EXPECT_EQ(y[0], 15.0f);
    EXPECT_EQ(y[32], 34.0f);
    EXPECT_EQ(y[1], -96.0f);  // code 0 - 32, scale 3
  }
}

TEST(GgmlTypesTest, FloatTypes) {
  Rng rng(5);
  std::vector<float> values(37);
  for (float& v : values) v = static_cast<float>(rng.Normal()) * 3.0f;
  std::vector<uint8_t> f32(values.size() * 4), f16, bf16;
  std::memcpy(f32.data(), values.data(), f32.size());
  for (float v : values) {
    const uint16_t h = FloatToFp16Bits(v), b = FloatToBf16Bits(v);
    f16.push_back(h & 0xff);
    f16.push_back(h >> 8);
    bf16.push_back(b & 0xff);
    bf16.push_back(b >> 8);
  }
  EXPECT_EQ(Dequant(GgmlType::kF32, f32, values.size()), values);
  auto h = Dequant(GgmlType::kF16, f16, values.size());
  auto b = Dequant(GgmlType::kBF16, bf16, values.size());
  for (size_t i = 0; i < values.size(); ++i) {
    EXPECT_EQ(h[i], Fp16BitsToFloat(FloatToFp16Bits(values[i])));
    EXPECT_EQ(b[i], Bf16BitsToFloat(FloatToBf16Bits(values[i])));
    EXPECT_NEAR(h[i], values[i], 2e-3 * std::fabs(values[i]) + 1e-4);
  }
}

// Quantizes real values the way llama.cpp's reference quantizers do
// (d = amax / 127 for Q8_0; d = max / -8 for Q4_0; (max-min)/15 for Q4_1)
// and checks the error bound of half a step.
TEST(GgmlTypesTest, QuantizeRoundTripErrorBounds) {
  Rng rng(6);
  std::vector<float> x(64);
  for (float& v : x) v = static_cast<float>(rng.Normal());
  std::vector<uint8_t> q8, q41;
  std::vector<float> steps8, steps41;
  for (int b = 0; b < 2; ++b) {
    const float* v = x.data() + 32 * b;
    float amax = 0, lo = v[0], hi = v[0];
    for (int j = 0; j < 32; ++j) {
      amax = std::max(amax, std::fabs(v[j]));
      lo = std::min(lo, v[j]);
      hi = std::max(hi, v[j]);
    }
    const float d8 = Fp16BitsToFloat(FloatToFp16Bits(amax / 127));
    PutHalf(&q8, d8);
    for (int j = 0; j < 32; ++j) {
      q8.push_back(static_cast<uint8_t>(static_cast<int8_t>(std::lround(v[j] / d8))));
    }
    steps8.push_back(d8);
    const float d41 = Fp16BitsToFloat(FloatToFp16Bits((hi - lo) / 15));
    const float m41 = Fp16BitsToFloat(FloatToFp16Bits(lo));
    PutHalf(&q41, d41);
    PutHalf(&q41, m41);
    uint8_t codes[32];
    for (int j = 0; j < 32; ++j) {
      codes[j] = static_cast<uint8_t>(std::clamp<long>(std::lround((v[j] - m41) / d41), 0, 15));
    }
    for (int j = 0; j < 16; ++j) q41.push_back(static_cast<uint8_t>(codes[j] | (codes[j + 16] << 4)));
    steps41.push_back(d41);
  }
  auto y8 = Dequant(GgmlType::kQ8_0, q8, 64);
  auto y41 = Dequant(GgmlType::kQ4_1, q41, 64);
  for (int i = 0; i < 64; ++i) {
    EXPECT_NEAR(y8[i], x[i], 0.5f * steps8[i / 32] + 1e-3f) << i;
    EXPECT_NEAR(y41[i], x[i], 0.5f * steps41[i / 32] + 2e-3f) << i;
  }
}

TEST(GgmlTypesTest, UnsupportedAndBadSizes) {
  std::vector<float> out(256);
  std::vector<uint8_t> bytes(176);
  EXPECT_THAT(DequantizeGgml(13, bytes, absl::MakeSpan(out)),
              StatusIs(absl::StatusCode::kUnimplemented, HasSubstr("Q5_K")));
  EXPECT_THAT(DequantizeGgml(16, bytes, absl::MakeSpan(out)),
              StatusIs(absl::StatusCode::kUnimplemented, HasSubstr("IQ2_XXS")));
  EXPECT_THAT(DequantizeGgml(4, bytes, absl::MakeSpan(out)),
              StatusIs(absl::StatusCode::kUnimplemented, HasSubstr("type 4")));
  EXPECT_THAT(DequantizeGgml(12, bytes, absl::MakeSpan(out)),
              StatusIs(absl::StatusCode::kInvalidArgument));  // 176 != 144
  std::vector<float> odd(33);
  EXPECT_THAT(DequantizeGgml(8, bytes, absl::MakeSpan(odd)),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("whole number")));
  EXPECT_THAT(GgmlByteSize(0, std::numeric_limits<int64_t>::max()),
              StatusIs(absl::StatusCode::kOutOfRange));
  EXPECT_EQ(GgmlTypeName(30), "BF16");
  EXPECT_EQ(GgmlTypeName(999), "type 999");
}

}  // namespace
}  // namespace banyan::model

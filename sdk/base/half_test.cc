#include "sdk/base/half.h"

#include <cmath>
#include <cstring>
#include <limits>

#include "gtest/gtest.h"
#include "sdk/base/rng.h"

namespace banyan {
namespace {

// Reference rounding: pick the nearer of the two neighbouring representable
// values by exhaustive search over the 65,536 bit patterns' decoded values.
template <float (*Decode)(uint16_t)>
uint16_t NearestByDecode(float x) {
  uint16_t best = 0;
  double best_err = std::numeric_limits<double>::infinity();
  for (uint32_t b = 0; b < 65536; ++b) {
    const float v = Decode(static_cast<uint16_t>(b));
    if (!std::isfinite(v)) continue;
    const double err = std::fabs(static_cast<double>(v) - x);
    if (err < best_err || (err == best_err && (b & 1u) == 0 && (best & 1u) == 1)) {
      best = static_cast<uint16_t>(b);
      best_err = err;
    }
  }
  return best;
}

TEST(HalfTest, Bf16RoundTripsEveryFiniteValue) {
  for (uint32_t b = 0; b < 65536; ++b) {
    const float v = Bf16BitsToFloat(static_cast<uint16_t>(b));
    if (std::isnan(v)) {
      EXPECT_TRUE(std::isnan(Bf16BitsToFloat(FloatToBf16Bits(v))));
      continue;
    }
    EXPECT_EQ(FloatToBf16Bits(v), b) << b;
  }
}

TEST(HalfTest, Fp16RoundTripsEveryValue) {
  for (uint32_t b = 0; b < 65536; ++b) {
    const float v = Fp16BitsToFloat(static_cast<uint16_t>(b));
    if (std::isnan(v)) {
      EXPECT_TRUE(std::isnan(Fp16BitsToFloat(FloatToFp16Bits(v))));
      continue;
    }
    EXPECT_EQ(FloatToFp16Bits(v), b) << b;
  }
}

TEST(HalfTest, RoundsToNearestOnRandomFloats) {
  Rng rng(7);
  for (int i = 0; i < 300; ++i) {
    // Spread over many binades, including the fp16 subnormal range.
    const float x = rng.Normal() * std::ldexp(1.0f, static_cast<int>(rng.UniformInt(40)) - 24);
    if (std::fabs(x) < 65504.0f) {
      EXPECT_EQ(Fp16BitsToFloat(FloatToFp16Bits(x)),
                Fp16BitsToFloat(NearestByDecode<Fp16BitsToFloat>(x))) << x;
    }
    const float y = rng.Normal() * 1000.0f;
    EXPECT_EQ(Bf16BitsToFloat(FloatToBf16Bits(y)),
              Bf16BitsToFloat(NearestByDecode<Bf16BitsToFloat>(y))) << y;
  }
}

TEST(HalfTest, OverflowAndSpecials) {
  EXPECT_TRUE(std::isinf(Fp16BitsToFloat(FloatToFp16Bits(1e6f))));
  EXPECT_TRUE(std::isinf(Bf16BitsToFloat(FloatToBf16Bits(std::numeric_limits<float>::infinity()))));
  EXPECT_EQ(FloatToFp16Bits(-0.0f), 0x8000);
  EXPECT_EQ(static_cast<float>(Bf16(1.5f)), 1.5f);
  EXPECT_EQ(static_cast<float>(Fp16(-2.25f)), -2.25f);
}

}  // namespace
}  // namespace banyan

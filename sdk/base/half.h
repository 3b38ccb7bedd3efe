// Host-side 16-bit floating-point storage types: bfloat16 and IEEE fp16.
//
// These are plain 2-byte values with exact, round-to-nearest-even conversions
// to and from float, bit-compatible with CUDA's __nv_bfloat16 and __half, so a
// host buffer of them can be copied to the device as is. They exist for CPU
// references, loaders and tests; device code uses cuda_bf16.h / cuda_fp16.h.
// Thread-compatible value types.
#ifndef BANYAN_SDK_BASE_HALF_H_
#define BANYAN_SDK_BASE_HALF_H_

#include <bit>
#include <cstdint>

namespace banyan {

// Converts float to bfloat16 bits, rounding to nearest even; NaN stays NaN.
constexpr uint16_t FloatToBf16Bits(float value) {
  const uint32_t bits = std::bit_cast<uint32_t>(value);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x40);
  const uint32_t rounding = 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>((bits + rounding) >> 16);
}

constexpr float Bf16BitsToFloat(uint16_t bits) {
  return std::bit_cast<float>(static_cast<uint32_t>(bits) << 16);
}

// Converts float to IEEE binary16 bits, rounding to nearest even, with
// subnormals, overflow to infinity and NaN preserved.
constexpr uint16_t FloatToFp16Bits(float value) {
  const uint32_t bits = std::bit_cast<uint32_t>(value);
  const uint32_t sign = (bits >> 16) & 0x8000u;
  const uint32_t abs = bits & 0x7fffffffu;
  if (abs > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u);  // NaN
  if (abs >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // overflow/inf
  if (abs < 0x38800000u) {  // result is subnormal or zero
    if (abs < 0x33000000u) return static_cast<uint16_t>(sign);  // below half the smallest subnormal
    const uint32_t mantissa = (abs & 0x007fffffu) | 0x00800000u;
    const int shift = 126 - static_cast<int>(abs >> 23);  // value / 2^-24, in [14, 24]
    const uint32_t half_ulp = 1u << (shift - 1);
    uint32_t result = mantissa >> shift;
    const uint32_t remainder = mantissa & ((1u << shift) - 1);
    if (remainder > half_ulp || (remainder == half_ulp && (result & 1u))) ++result;
    return static_cast<uint16_t>(sign | result);
  }
  uint32_t result = ((abs - 0x38000000u) >> 13);  // rebias exponent 127 -> 15
  const uint32_t remainder = abs & 0x1fffu;
  if (remainder > 0x1000u || (remainder == 0x1000u && (result & 1u))) ++result;
  return static_cast<uint16_t>(sign | result);
}

constexpr float Fp16BitsToFloat(uint16_t half) {
  const uint32_t sign = static_cast<uint32_t>(half & 0x8000u) << 16;
  const uint32_t exponent = (half >> 10) & 0x1fu;
  const uint32_t mantissa = half & 0x3ffu;
  if (exponent == 0) {
    if (mantissa == 0) return std::bit_cast<float>(sign);
    // Subnormal: value = mantissa * 2^-24.
    const float magnitude = static_cast<float>(mantissa) * (1.0f / 16777216.0f);
    return sign ? -magnitude : magnitude;
  }
  if (exponent == 31) return std::bit_cast<float>(sign | 0x7f800000u | (mantissa << 13));
  return std::bit_cast<float>(sign | ((exponent + 112) << 23) | (mantissa << 13));
}

// bfloat16 storage (1 sign, 8 exponent, 7 mantissa bits).
struct Bf16 {
  uint16_t bits = 0;
  constexpr Bf16() = default;
  constexpr explicit Bf16(float value) : bits(FloatToBf16Bits(value)) {}
  constexpr explicit operator float() const { return Bf16BitsToFloat(bits); }
  static constexpr Bf16 FromBits(uint16_t raw) { Bf16 v; v.bits = raw; return v; }
};

// IEEE binary16 storage (1 sign, 5 exponent, 10 mantissa bits).
struct Fp16 {
  uint16_t bits = 0;
  constexpr Fp16() = default;
  constexpr explicit Fp16(float value) : bits(FloatToFp16Bits(value)) {}
  constexpr explicit operator float() const { return Fp16BitsToFloat(bits); }
  static constexpr Fp16 FromBits(uint16_t raw) { Fp16 v; v.bits = raw; return v; }
};

static_assert(sizeof(Bf16) == 2 && sizeof(Fp16) == 2);

}  // namespace banyan

#endif  // BANYAN_SDK_BASE_HALF_H_

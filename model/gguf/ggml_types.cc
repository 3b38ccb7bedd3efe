#include "model/gguf/ggml_types.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "model/gguf/mapped_file.h"
#include "sdk/base/half.h"

namespace banyan::model {
namespace {

struct TypeRow {
  uint32_t id;
  GgmlTypeInfo info;
};

// Every type ggml defines (ggml.h, enum ggml_type); removed ids are absent.
constexpr TypeRow kTypes[] = {
    {0, {"F32", 1, 4, true}},          {1, {"F16", 1, 2, true}},
    {2, {"Q4_0", 32, 18, true}},       {3, {"Q4_1", 32, 20, true}},
    {6, {"Q5_0", 32, 22, false}},      {7, {"Q5_1", 32, 24, false}},
    {8, {"Q8_0", 32, 34, true}},       {9, {"Q8_1", 32, 36, false}},
    {10, {"Q2_K", 256, 84, false}},    {11, {"Q3_K", 256, 110, false}},
    {12, {"Q4_K", 256, 144, true}},    {13, {"Q5_K", 256, 176, false}},
    {14, {"Q6_K", 256, 210, true}},    {15, {"Q8_K", 256, 292, false}},
    {16, {"IQ2_XXS", 256, 66, false}}, {17, {"IQ2_XS", 256, 74, false}},
    {18, {"IQ3_XXS", 256, 98, false}}, {19, {"IQ1_S", 256, 50, false}},
    {20, {"IQ4_NL", 32, 18, false}},   {21, {"IQ3_S", 256, 110, false}},
    {22, {"IQ2_S", 256, 82, false}},   {23, {"IQ4_XS", 256, 136, false}},
    {24, {"I8", 1, 1, false}},         {25, {"I16", 1, 2, false}},
    {26, {"I32", 1, 4, false}},        {27, {"I64", 1, 8, false}},
    {28, {"F64", 1, 8, false}},        {29, {"IQ1_M", 256, 56, false}},
    {30, {"BF16", 1, 2, true}},        {34, {"TQ1_0", 256, 54, false}},
    {35, {"TQ2_0", 256, 66, false}},   {39, {"MXFP4", 32, 17, false}},
};

float Half(const uint8_t* p) {
  return Fp16BitsToFloat(static_cast<uint16_t>(p[0] | (p[1] << 8)));
}

void DequantQ4_0(const uint8_t* b, float* y) {
  const float d = Half(b);
  const uint8_t* qs = b + 2;
  for (int j = 0; j < 16; ++j) {
    y[j] = static_cast<float>((qs[j] & 0x0f) - 8) * d;
    y[j + 16] = static_cast<float>((qs[j] >> 4) - 8) * d;
  }
}

void DequantQ4_1(const uint8_t* b, float* y) {
  const float d = Half(b);
  const float m = Half(b + 2);
  const uint8_t* qs = b + 4;
  for (int j = 0; j < 16; ++j) {
    y[j] = static_cast<float>(qs[j] & 0x0f) * d + m;
    y[j + 16] = static_cast<float>(qs[j] >> 4) * d + m;
  }
}

void DequantQ8_0(const uint8_t* b, float* y) {
  const float d = Half(b);
  for (int j = 0; j < 32; ++j) y[j] = static_cast<float>(static_cast<int8_t>(b[2 + j])) * d;
}

// Six-bit scale and min of sub-block j (0..7) from the 12 packed bytes.
void ScaleMinK4(int j, const uint8_t* q, int* scale, int* min) {
  if (j < 4) {
    *scale = q[j] & 63;
    *min = q[j + 4] & 63;
  } else {
    *scale = (q[j + 4] & 0x0f) | ((q[j - 4] >> 6) << 4);
    *min = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
  }
}

void DequantQ4_K(const uint8_t* b, float* y) {
  const float d = Half(b);
  const float dmin = Half(b + 2);
  const uint8_t* scales = b + 4;
  const uint8_t* q = b + 16;
  for (int j = 0, is = 0; j < 256; j += 64, is += 2, q += 32) {
    int sc, m;
    ScaleMinK4(is, scales, &sc, &m);
    const float d1 = d * sc, m1 = dmin * m;
    ScaleMinK4(is + 1, scales, &sc, &m);
    const float d2 = d * sc, m2 = dmin * m;
    for (int l = 0; l < 32; ++l) *y++ = d1 * (q[l] & 0x0f) - m1;
    for (int l = 0; l < 32; ++l) *y++ = d2 * (q[l] >> 4) - m2;
  }
}

void DequantQ6_K(const uint8_t* b, float* y) {
  const uint8_t* ql = b;
  const uint8_t* qh = b + 128;
  const int8_t* sc = reinterpret_cast<const int8_t*>(b + 192);
  const float d = Half(b + 208);
  for (int n = 0; n < 256; n += 128) {
    for (int l = 0; l < 32; ++l) {
      const int is = l / 16;
      const int q1 = ((ql[l] & 0x0f) | (((qh[l] >> 0) & 3) << 4)) - 32;
      const int q2 = ((ql[l + 32] & 0x0f) | (((qh[l] >> 2) & 3) << 4)) - 32;
      const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
      const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
      y[l] = d * sc[is + 0] * q1;
      y[l + 32] = d * sc[is + 2] * q2;
      y[l + 64] = d * sc[is + 4] * q3;
      y[l + 96] = d * sc[is + 6] * q4;
    }
    y += 128;
    ql += 64;
    qh += 32;
    sc += 8;
  }
}

}  // namespace

absl::StatusOr<GgmlTypeInfo> GetGgmlTypeInfo(uint32_t type) {
  for (const TypeRow& row : kTypes) {
    if (row.id == type) return row.info;
  }
  return absl::UnimplementedError(absl::StrCat("unknown ggml tensor type ", type));
}

std::string GgmlTypeName(uint32_t type) {
  auto info = GetGgmlTypeInfo(type);
  return info.ok() ? std::string(info->name) : absl::StrCat("type ", type);
}

absl::StatusOr<uint64_t> GgmlByteSize(uint32_t type, int64_t num_elements) {
  auto info = GetGgmlTypeInfo(type);
  if (!info.ok()) return info.status();
  if (num_elements < 0 || num_elements % info->block_elems != 0) {
    return absl::InvalidArgumentError(absl::StrCat(num_elements, " values of type ", info->name,
                                                   " are not a whole number of ",
                                                   info->block_elems, "-value blocks"));
  }
  uint64_t bytes = 0;
  if (!CheckedMul(static_cast<uint64_t>(num_elements / info->block_elems),
                  static_cast<uint64_t>(info->block_bytes), &bytes)) {
    return absl::OutOfRangeError("tensor byte size overflows");
  }
  return bytes;
}

absl::Status DequantizeGgml(uint32_t type, absl::Span<const uint8_t> src, absl::Span<float> out) {
  auto info = GetGgmlTypeInfo(type);
  if (!info.ok()) return info.status();
  if (!info->dequantizable) {
    return absl::UnimplementedError(
        absl::StrCat("ggml type ", info->name,
                     " is not supported (supported: F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q4_K, Q6_K)"));
  }
  auto bytes = GgmlByteSize(type, static_cast<int64_t>(out.size()));
  if (!bytes.ok()) return bytes.status();
  if (*bytes != src.size()) {
    return absl::InvalidArgumentError(absl::StrCat("dequantize ", info->name, ": ", src.size(),
                                                   " bytes given, ", *bytes, " needed"));
  }
  const uint8_t* p = src.data();
  float* y = out.data();
  const size_t n = out.size();
  switch (static_cast<GgmlType>(type)) {
    case GgmlType::kF32:
      if (n > 0) std::memcpy(y, p, n * sizeof(float));
      return absl::OkStatus();
    case GgmlType::kF16:
      for (size_t i = 0; i < n; ++i) y[i] = Half(p + 2 * i);
      return absl::OkStatus();
    case GgmlType::kBF16:
      for (size_t i = 0; i < n; ++i) {
        y[i] = Bf16BitsToFloat(static_cast<uint16_t>(p[2 * i] | (p[2 * i + 1] << 8)));
      }
      return absl::OkStatus();
    default:
      break;
  }
  void (*block_fn)(const uint8_t*, float*) = nullptr;
  switch (static_cast<GgmlType>(type)) {
    case GgmlType::kQ4_0: block_fn = DequantQ4_0; break;
    case GgmlType::kQ4_1: block_fn = DequantQ4_1; break;
    case GgmlType::kQ8_0: block_fn = DequantQ8_0; break;
    case GgmlType::kQ4_K: block_fn = DequantQ4_K; break;
    case GgmlType::kQ6_K: block_fn = DequantQ6_K; break;
    default:
      return absl::InternalError(absl::StrCat("no dequantizer for ", info->name));
  }
  const size_t blocks = n / static_cast<size_t>(info->block_elems);
  for (size_t b = 0; b < blocks; ++b) {
    block_fn(p + b * info->block_bytes, y + b * info->block_elems);
  }
  return absl::OkStatus();
}

}  // namespace banyan::model

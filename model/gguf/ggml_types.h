// ggml tensor types as stored in GGUF files, their block layouts, and
// dequantization to fp32 of the types Banyan supports: F32, F16, BF16, Q8_0,
// Q4_0, Q4_1, Q4_K and Q6_K. Every other type is recognised by name and
// rejected with kUnimplemented.
//
// Block layouts (little-endian; d, dmin are fp16):
//   Q4_0  32 values, 18 bytes: d, qs[16]; x = (nibble - 8) * d, low nibbles
//         are values 0..15, high nibbles 16..31.
//   Q4_1  32 values, 20 bytes: d, m, qs[16]; x = nibble * d + m.
//   Q8_0  32 values, 34 bytes: d, int8 qs[32]; x = q * d.
//   Q4_K  256 values, 144 bytes: d, dmin, scales[12] (8 six-bit scales and
//         8 six-bit mins), qs[128]; sub-block s of 32: x = d*sc[s]*q - dmin*m[s].
//   Q6_K  256 values, 210 bytes: ql[128], qh[64], int8 scales[16], d;
//         q = 6-bit value - 32, sub-block of 16: x = d * scales[s] * q.
// Thread-safe (pure functions).
#ifndef BANYAN_MODEL_GGUF_GGML_TYPES_H_
#define BANYAN_MODEL_GGUF_GGML_TYPES_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace banyan::model {

enum class GgmlType : uint32_t {
  kF32 = 0,
  kF16 = 1,
  kQ4_0 = 2,
  kQ4_1 = 3,
  kQ8_0 = 8,
  kQ4_K = 12,
  kQ6_K = 14,
  kBF16 = 30,
};

struct GgmlTypeInfo {
  const char* name = "";    // "Q4_K"; "type 123" style names are not stored
  int64_t block_elems = 0;  // values per block
  int64_t block_bytes = 0;  // bytes per block
  bool dequantizable = false;
};

// Layout of ggml type `type`. kUnimplemented for a type number ggml does not
// define (or that was removed from ggml).
absl::StatusOr<GgmlTypeInfo> GetGgmlTypeInfo(uint32_t type);

// Name of `type`, or "type N" when unknown.
std::string GgmlTypeName(uint32_t type);

// Bytes that `num_elements` values of `type` occupy. kInvalidArgument when
// num_elements is negative or not a whole number of blocks, kOutOfRange on
// overflow, kUnimplemented for unknown types.
absl::StatusOr<uint64_t> GgmlByteSize(uint32_t type, int64_t num_elements);

// Dequantizes `src` (exactly GgmlByteSize(type, out.size()) bytes) into `out`.
// kUnimplemented naming the type when it is not one of the supported eight;
// kInvalidArgument when the sizes disagree.
absl::Status DequantizeGgml(uint32_t type, absl::Span<const uint8_t> src, absl::Span<float> out);

}  // namespace banyan::model

#endif  // BANYAN_MODEL_GGUF_GGML_TYPES_H_

// KvTensorMap: the TMA descriptor (CUtensorMap) through which the
// warp-specialized tree kernel (kernels/tree_tma.cuh) loads K and V tiles:
// the whole KV pool (every layer, K and V plane) seen as a 2-D tensor of
// rows of head_dim 16-bit elements, one box = box_rows rows x 64 columns
// (128 bytes) with the 128-byte swizzle the wgmma operands read. CUDA host
// code; needs no libcuda at link time (the driver entry point is looked up
// through the runtime). Thread-safe.
#ifndef BANYAN_ATTENTION_KV_TENSOR_MAP_H_
#define BANYAN_ATTENTION_KV_TENSOR_MAP_H_

#include <cstdint>

#include "absl/status/status.h"
#include "attention/kv_layout.h"
#include "sdk/base/tensor_view.h"

namespace banyan::attention {

// Bytes of a CUtensorMap, opaque here so that this header needs no cuda.h.
struct alignas(128) KvTensorMap {
  uint8_t bytes[128] = {};
};

// Whether the TMA kernel can read this pool: 16-bit KV, head_dim 64 or
// 128, a page size that is a power of two and at least 8, and fewer than
// 2^31 rows in the pool.
bool KvTensorMapSupported(const KvLayout& layout, DType kv_dtype);

// Rows per box: min(page_size, 64).
int32_t KvTensorMapBoxRows(const KvLayout& layout);

// Encodes the map for `pool` (device pointer, 16-byte aligned, laid out as
// `layout`). kInvalidArgument where KvTensorMapSupported is false or the
// pointer is misaligned; kInternal when the driver refuses the map;
// kUnavailable without a driver entry point.
[[nodiscard]] absl::Status EncodeKvTensorMap(const void* pool, const KvLayout& layout, DType kv_dtype,
                                             KvTensorMap* map);

}  // namespace banyan::attention

#endif  // BANYAN_ATTENTION_KV_TENSOR_MAP_H_

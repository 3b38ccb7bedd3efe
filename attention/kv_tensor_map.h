// KvTensorMap: the TMA descriptors (CUtensorMap) through which the
// warp-specialized tree kernel (kernels/tree_tma.cuh) loads K and V tiles.
// The whole KV pool (kv_layout.h: [layer][K|V][page][head][slot][head_dim])
// is seen as a 5-D tensor
//   (column in a 64-column block, slot, plane page, head, column block)
// where "plane page" = (layer * 2 + K|V) * num_pages + page, so that one
// box = box_pages pages x box_rows slots of one head x every column block
// lands in shared memory as the wgmma layout wants it: per 64-column block,
// box_pages * box_rows consecutive 128-byte rows, 128-byte swizzled. Two
// maps: `multi` (box_pages = 64 / box_rows, every column block: one box is a
// whole 64-token K or V tile, for tiles whose pages have consecutive ids)
// and `single` (one page, one column block per box). CUDA host code; needs no libcuda at link time (the driver entry
// point is looked up through the runtime). Thread-safe.
#ifndef BANYAN_ATTENTION_KV_TENSOR_MAP_H_
#define BANYAN_ATTENTION_KV_TENSOR_MAP_H_

#include <cstdint>

#include "absl/status/status.h"
#include "attention/kv_layout.h"
#include "sdk/base/tensor_view.h"

namespace banyan::attention {

// Bytes of one CUtensorMap, opaque here so that this header needs no cuda.h.
struct alignas(128) KvTensorMap {
  uint8_t bytes[128] = {};
};

struct KvTensorMaps {
  KvTensorMap multi;   // box: 64 / box_rows pages x every column block (a whole tile)
  KvTensorMap single;  // box: one page x one 64-column block
};

// Whether the TMA kernel can read this pool: 16-bit KV, head_dim 64 or 128,
// and a page size that is a power of two and at least 8.
bool KvTensorMapSupported(const KvLayout& layout, DType kv_dtype);

// Slots per box: min(page_size, 64).
int32_t KvTensorMapBoxRows(const KvLayout& layout);

// Encodes both maps for `pool` (device pointer, 16-byte aligned, laid out as
// `layout`). kInvalidArgument where KvTensorMapSupported is false or the
// pointer is misaligned; kInternal when the driver refuses a map;
// kUnavailable without a driver entry point.
[[nodiscard]] absl::Status EncodeKvTensorMaps(const void* pool, const KvLayout& layout, DType kv_dtype,
                                              KvTensorMaps* maps);

}  // namespace banyan::attention

#endif  // BANYAN_ATTENTION_KV_TENSOR_MAP_H_

#include "attention/kv_tensor_map.h"

#include <cuda.h>
#include <cuda_runtime_api.h>
#include <cudaTypedefs.h>

#include "absl/strings/str_cat.h"
#include "banyan/status_macros.h"

namespace banyan::attention {
namespace {

static_assert(sizeof(CUtensorMap) == sizeof(KvTensorMap) && alignof(KvTensorMap) >= alignof(CUtensorMap));

// cuTensorMapEncodeTiled through the runtime's driver entry point (looked up
// once; nullptr when the driver has none).
PFN_cuTensorMapEncodeTiled_v12000 EncodeFunction() {
  static const PFN_cuTensorMapEncodeTiled_v12000 fn = [] {
    void* ptr = nullptr;
    cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &ptr, 12000, cudaEnableDefault, &found) !=
            cudaSuccess ||
        found != cudaDriverEntryPointSuccess) {
      return static_cast<PFN_cuTensorMapEncodeTiled_v12000>(nullptr);
    }
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(ptr);
  }();
  return fn;
}

absl::Status Encode(PFN_cuTensorMapEncodeTiled_v12000 encode, const void* pool, const KvLayout& layout,
                    DType kv_dtype, uint32_t box_pages, uint32_t box_blocks, KvTensorMap* map) {
  const uint64_t elem = 2;
  const uint64_t row = uint64_t(layout.head_dim) * elem;  // bytes of one slot
  // (column in block, slot, plane page, head, column block); strides of dims 1..4 in bytes.
  const cuuint64_t dims[5] = {64, static_cast<cuuint64_t>(layout.page_size),
                              static_cast<cuuint64_t>(int64_t{layout.num_layers} * 2 * layout.num_pages),
                              static_cast<cuuint64_t>(layout.num_kv_heads),
                              static_cast<cuuint64_t>(layout.head_dim / 64)};
  const cuuint64_t strides[4] = {row, row * layout.page_size * layout.num_kv_heads, row * layout.page_size, 64 * elem};
  const cuuint32_t box[5] = {64, static_cast<cuuint32_t>(KvTensorMapBoxRows(layout)), box_pages, 1, box_blocks};
  const cuuint32_t element_strides[5] = {1, 1, 1, 1, 1};
  const CUresult result =
      encode(reinterpret_cast<CUtensorMap*>(map->bytes),
             kv_dtype == DType::kBf16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 5,
             const_cast<void*>(pool), dims, strides, box, element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE,
             CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (result != CUDA_SUCCESS) {
    return absl::InternalError(absl::StrCat("kv tensor map: cuTensorMapEncodeTiled failed with CUresult ",
                                            static_cast<int>(result), " (", box_pages, " pages per box)"));
  }
  return absl::OkStatus();
}

}  // namespace

bool KvTensorMapSupported(const KvLayout& layout, DType kv_dtype) {
  const int32_t ps = layout.page_size;
  return (kv_dtype == DType::kBf16 || kv_dtype == DType::kF16) && (layout.head_dim == 64 || layout.head_dim == 128) &&
         ps >= 8 && (ps & (ps - 1)) == 0 && layout.num_pages > 0 && layout.num_kv_heads > 0 &&
         int64_t{layout.num_layers} * 2 * layout.num_pages < (int64_t{1} << 31);
}

int32_t KvTensorMapBoxRows(const KvLayout& layout) { return layout.page_size < 64 ? layout.page_size : 64; }

absl::Status EncodeKvTensorMaps(const void* pool, const KvLayout& layout, DType kv_dtype, KvTensorMaps* maps) {
  if (!KvTensorMapSupported(layout, kv_dtype)) {
    return absl::InvalidArgumentError(absl::StrCat("kv tensor map: unsupported layout (page size ", layout.page_size,
                                                   ", head_dim ", layout.head_dim, ")"));
  }
  if (pool == nullptr || reinterpret_cast<uintptr_t>(pool) % 16 != 0) {
    return absl::InvalidArgumentError("kv tensor map: the pool must be a 16-byte aligned device pointer");
  }
  const PFN_cuTensorMapEncodeTiled_v12000 encode = EncodeFunction();
  if (encode == nullptr) return absl::UnavailableError("kv tensor map: no cuTensorMapEncodeTiled in this driver");
  const uint32_t tile_pages = static_cast<uint32_t>(64 / KvTensorMapBoxRows(layout));
  BANYAN_RETURN_IF_ERROR(
      Encode(encode, pool, layout, kv_dtype, tile_pages, static_cast<uint32_t>(layout.head_dim / 64), &maps->multi));
  return Encode(encode, pool, layout, kv_dtype, 1, 1, &maps->single);
}

}  // namespace banyan::attention

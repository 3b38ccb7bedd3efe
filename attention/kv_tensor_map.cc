#include "attention/kv_tensor_map.h"

#include <cuda.h>
#include <cuda_runtime_api.h>
#include <cudaTypedefs.h>

#include "absl/strings/str_cat.h"

namespace banyan::attention {
namespace {

static_assert(sizeof(CUtensorMap) == sizeof(KvTensorMap) && alignof(KvTensorMap) >= alignof(CUtensorMap));

int64_t PoolRows(const KvLayout& layout) {
  return int64_t{layout.num_layers} * 2 * layout.num_pages * layout.num_kv_heads * layout.page_size;
}

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

}  // namespace

bool KvTensorMapSupported(const KvLayout& layout, DType kv_dtype) {
  const int32_t ps = layout.page_size;
  return (kv_dtype == DType::kBf16 || kv_dtype == DType::kF16) && (layout.head_dim == 64 || layout.head_dim == 128) &&
         ps >= 8 && (ps & (ps - 1)) == 0 && PoolRows(layout) > 0 && PoolRows(layout) < (int64_t{1} << 31);
}

int32_t KvTensorMapBoxRows(const KvLayout& layout) { return layout.page_size < 64 ? layout.page_size : 64; }

absl::Status EncodeKvTensorMap(const void* pool, const KvLayout& layout, DType kv_dtype, KvTensorMap* map) {
  if (!KvTensorMapSupported(layout, kv_dtype)) {
    return absl::InvalidArgumentError(absl::StrCat("kv tensor map: unsupported layout (page size ", layout.page_size,
                                                   ", head_dim ", layout.head_dim, ")"));
  }
  if (pool == nullptr || reinterpret_cast<uintptr_t>(pool) % 16 != 0) {
    return absl::InvalidArgumentError("kv tensor map: the pool must be a 16-byte aligned device pointer");
  }
  const PFN_cuTensorMapEncodeTiled_v12000 encode = EncodeFunction();
  if (encode == nullptr) return absl::UnavailableError("kv tensor map: no cuTensorMapEncodeTiled in this driver");
  const cuuint64_t dims[2] = {static_cast<cuuint64_t>(layout.head_dim), static_cast<cuuint64_t>(PoolRows(layout))};
  const cuuint64_t strides[1] = {static_cast<cuuint64_t>(layout.head_dim) * 2};  // bytes between rows
  const cuuint32_t box[2] = {64, static_cast<cuuint32_t>(KvTensorMapBoxRows(layout))};
  const cuuint32_t element_strides[2] = {1, 1};
  const CUresult result =
      encode(reinterpret_cast<CUtensorMap*>(map->bytes),
             kv_dtype == DType::kBf16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 2,
             const_cast<void*>(pool), dims, strides, box, element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE,
             CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (result != CUDA_SUCCESS) {
    return absl::InternalError(absl::StrCat("kv tensor map: cuTensorMapEncodeTiled failed with CUresult ",
                                            static_cast<int>(result)));
  }
  return absl::OkStatus();
}

}  // namespace banyan::attention

#include "sdk/engine/device_kv_storage.h"

#include <cuda_runtime_api.h>

#include "absl/strings/str_cat.h"
#include "banyan/status_macros.h"
#include "sdk/gpu/cuda_status.h"

namespace banyan::engine {

absl::StatusOr<std::unique_ptr<DeviceKvStorage>> DeviceKvStorage::Create(
    kv_tree::KvPoolConfig config, int device) {
  BANYAN_CUDA_RETURN_IF_ERROR(cudaSetDevice(device));
  if (config.byte_budget == 0) {
    size_t free_bytes = 0, total_bytes = 0;
    BANYAN_CUDA_RETURN_IF_ERROR(cudaMemGetInfo(&free_bytes, &total_bytes));
    config.byte_budget = free_bytes / 4;
  }
  BANYAN_ASSIGN_OR_RETURN(attention::KvLayout layout, kv_tree::MakeKvLayout(config));
  BANYAN_ASSIGN_OR_RETURN(gpu::DeviceBuffer buffer, gpu::DeviceBuffer::Allocate(layout.TotalBytes()));
  // Defined contents (zeros) so that no read of an unwritten slot can see NaN.
  BANYAN_RETURN_IF_ERROR(buffer.Fill(0));
  BANYAN_ASSIGN_OR_RETURN(gpu::Stream stream, gpu::Stream::Create());
  BANYAN_CUDA_RETURN_IF_ERROR(cudaDeviceSynchronize());
  return std::unique_ptr<DeviceKvStorage>(
      new DeviceKvStorage(layout, config.dtype, std::move(buffer), std::move(stream)));
}

absl::Status DeviceKvStorage::CopyPage(int64_t src_page, int64_t dst_page, int32_t num_slots) {
  const attention::KvLayout& l = layout_;
  if (src_page < 0 || src_page >= l.num_pages || dst_page < 0 || dst_page >= l.num_pages ||
      src_page == dst_page || num_slots < 0 || num_slots > l.page_size) {
    return absl::InvalidArgumentError(absl::StrCat("CopyPage(", src_page, ", ", dst_page, ", ",
                                                   num_slots, ") outside the pool of ", l.num_pages,
                                                   " pages of ", l.page_size, " slots"));
  }
  if (num_slots == 0) return absl::OkStatus();
  char* base = static_cast<char*>(buffer_.data());
  const size_t bytes = static_cast<size_t>(l.dtype_bytes);
  const size_t pitch = static_cast<size_t>(l.TileElements()) * bytes;  // one (page, head) tile
  const size_t width = static_cast<size_t>(num_slots) * l.head_dim * bytes;
  for (int32_t layer = 0; layer < l.num_layers; ++layer) {
    for (int32_t kv = 0; kv < 2; ++kv) {
      char* src = base + static_cast<size_t>(l.Offset(layer, kv, src_page, 0, 0)) * bytes;
      char* dst = base + static_cast<size_t>(l.Offset(layer, kv, dst_page, 0, 0)) * bytes;
      BANYAN_CUDA_RETURN_IF_ERROR(cudaMemcpy2DAsync(dst, pitch, src, pitch, width,
                                                    static_cast<size_t>(l.num_kv_heads),
                                                    cudaMemcpyDeviceToDevice, stream_.get()));
    }
  }
  return BANYAN_CUDA_STATUS(cudaGetLastError());
}

absl::Status DeviceKvStorage::Synchronize() const { return stream_.Synchronize(); }

}  // namespace banyan::engine

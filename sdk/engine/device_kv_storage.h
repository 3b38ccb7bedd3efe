// DeviceKvStorage (internal; CUDA builds only): a KvStorage whose pool is one
// device allocation, for engines running the CUDA backend. Layout as
// kv_storage.h / attention/kv_layout.h describe.
//
// Copy on write: CopyPage enqueues cudaMemcpy2DAsync copies (one per layer and
// K|V plane) on the storage's own stream and returns at once; the engine calls
// Synchronize() before every forward pass, so the copies land before any
// kernel writes the new tokens' K/V into the copied page.
//
// Thread-compatible: the tree calls CopyPage under its lock, the engine's
// scheduler thread calls Synchronize; they never overlap a forward pass.
#ifndef BANYAN_SDK_ENGINE_DEVICE_KV_STORAGE_H_
#define BANYAN_SDK_ENGINE_DEVICE_KV_STORAGE_H_

#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "kv_tree/kv_storage.h"
#include "sdk/gpu/device_buffer.h"

namespace banyan::engine {

class DeviceKvStorage final : public kv_tree::KvStorage {
 public:
  // Allocates the pool on GPU `device`. byte_budget == 0 means a quarter of
  // the device's free memory. Errors: those of kv_tree::MakeKvLayout,
  // kResourceExhausted when the allocation fails, kUnavailable without a
  // device.
  static absl::StatusOr<std::unique_ptr<DeviceKvStorage>> Create(kv_tree::KvPoolConfig config,
                                                                 int device);

  const attention::KvLayout& layout() const override { return layout_; }
  DType dtype() const override { return dtype_; }
  MemorySpace space() const override { return MemorySpace::kDevice; }
  void* data() const override { return buffer_.data(); }
  absl::Status CopyPage(int64_t src_page, int64_t dst_page, int32_t num_slots) override;

  // Waits for every copy enqueued so far; returns the first error.
  absl::Status Synchronize() const;

 private:
  DeviceKvStorage(attention::KvLayout layout, DType dtype, gpu::DeviceBuffer buffer,
                  gpu::Stream stream)
      : layout_(layout), dtype_(dtype), buffer_(std::move(buffer)), stream_(std::move(stream)) {}

  attention::KvLayout layout_;
  DType dtype_;
  gpu::DeviceBuffer buffer_;
  gpu::Stream stream_;
};

}  // namespace banyan::engine

#endif  // BANYAN_SDK_ENGINE_DEVICE_KV_STORAGE_H_

// KvStorage: where the KV pages of a KvTree live. The tree decides which page
// and slot hold which token; the storage owns the bytes, laid out exactly as
// attention/kv_layout.h describes:
//
//   [num_layers][2 (K, V)][num_pages][num_kv_heads][page_size][head_dim]
//
// Two implementations share this interface:
//   * HostKvStorage (here): one 64-byte aligned host block. Used by the CPU
//     backend, tests and benchmarks.
//   * A device implementation (written with the CUDA backend, not here) must
//     hold the whole pool in ONE device allocation of layout().TotalBytes(),
//     return its base from data(), report MemorySpace::kDevice, and implement
//     CopyPage with cudaMemcpyAsync (or one cudaMemcpy2DAsync over the
//     num_layers * 2 * num_kv_heads tiles, pitch page_size * head_dim *
//     dtype_bytes) on the stream that also runs the forward pass, so that the
//     copy is ordered before the kernels that write the new tokens' K/V into
//     the copy. CopyPage must not synchronize the host; it returns the launch
//     status (cudaGetLastError) as an absl::Status.
//
//   BANYAN_ASSIGN_OR_RETURN(auto storage,
//       HostKvStorage::Create(KvPoolConfig{.dtype = DType::kBf16, .num_layers = 30,
//                                          .num_kv_heads = 3, .head_dim = 64,
//                                          .byte_budget = size_t{1} << 30}));
//
// Ownership: a KvTree owns its storage (std::unique_ptr). Thread-safety: the
// tree calls CopyPage only while holding its own lock; implementations need no
// locking of their own. Readers and writers of the page bytes (the model) are
// ordered by the caller, see kv_tree.h.
#ifndef BANYAN_KV_TREE_KV_STORAGE_H_
#define BANYAN_KV_TREE_KV_STORAGE_H_

#include <cstddef>
#include <cstdint>
#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "attention/kv_layout.h"
#include "sdk/base/host_buffer.h"
#include "sdk/base/tensor_view.h"

namespace banyan::kv_tree {

// The shape of a KV pool, in the terms a caller knows (model shape, dtype and a
// memory budget). The number of pages follows from the budget.
struct KvPoolConfig {
  DType dtype = DType::kBf16;
  int32_t num_layers = 0;
  int32_t num_kv_heads = 0;
  int32_t head_dim = 0;
  int32_t page_size = 16;  // tokens per page
  size_t byte_budget = 0;  // bytes of K and V in total; rounded down to whole pages
};

// Turns a config into a layout: num_pages = byte_budget / BytesPerPage().
// Returns kInvalidArgument for non-positive sizes, a page size above 4096 or a
// layout whose page count does not fit int32 (plan page ids are int32), and
// kResourceExhausted when the budget holds no page at all.
[[nodiscard]] absl::StatusOr<attention::KvLayout> MakeKvLayout(const KvPoolConfig& config);

class KvStorage {
 public:
  virtual ~KvStorage() = default;

  // The layout of data(); num_pages is the pool's capacity.
  virtual const attention::KvLayout& layout() const = 0;
  // The dtype of every element.
  virtual DType dtype() const = 0;
  // Where data() lives.
  virtual MemorySpace space() const = 0;
  // Base of the pool (layout().TotalBytes() bytes). Stable for the storage's life.
  virtual void* data() const = 0;

  // Copies token slots [0, num_slots) of page `src_page` into the same slots
  // of `dst_page`, for every layer, K and V, and KV head. Slots >= num_slots of
  // dst_page are left as they are. Used for copy-on-write of a partly filled
  // page. Returns kInvalidArgument for page ids outside [0, num_pages), equal
  // pages or num_slots outside [0, page_size]; a device implementation returns
  // the launch error's status.
  [[nodiscard]] virtual absl::Status CopyPage(int64_t src_page, int64_t dst_page,
                                              int32_t num_slots) = 0;
};

// Host memory storage: one HostBuffer. Move-free (owned through unique_ptr).
class HostKvStorage final : public KvStorage {
 public:
  // Allocates the pool (contents uninitialized). Errors: as MakeKvLayout, and
  // kResourceExhausted when the host allocation fails.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<HostKvStorage>> Create(
      const KvPoolConfig& config);

  HostKvStorage(const HostKvStorage&) = delete;
  HostKvStorage& operator=(const HostKvStorage&) = delete;

  const attention::KvLayout& layout() const override { return layout_; }
  DType dtype() const override { return dtype_; }
  MemorySpace space() const override { return MemorySpace::kHost; }
  void* data() const override { return buffer_.data(); }
  [[nodiscard]] absl::Status CopyPage(int64_t src_page, int64_t dst_page,
                                      int32_t num_slots) override;

 private:
  HostKvStorage(attention::KvLayout layout, DType dtype, HostBuffer buffer)
      : layout_(layout), dtype_(dtype), buffer_(std::move(buffer)) {}

  attention::KvLayout layout_;
  DType dtype_;
  HostBuffer buffer_;
};

}  // namespace banyan::kv_tree

#endif  // BANYAN_KV_TREE_KV_STORAGE_H_

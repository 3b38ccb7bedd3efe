// HostBuffer: an owning, 64-byte aligned block of host memory. The host-side
// twin of gpu::DeviceBuffer. Move-only; not thread-safe (one owner at a time).
//
//   BANYAN_ASSIGN_OR_RETURN(HostBuffer buf, HostBuffer::Allocate(n * sizeof(float)));
//   float* x = buf.As<float>();
#ifndef BANYAN_SDK_BASE_HOST_BUFFER_H_
#define BANYAN_SDK_BASE_HOST_BUFFER_H_

#include <cstddef>
#include <cstdlib>
#include <new>
#include <utility>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"

namespace banyan {

class HostBuffer {
 public:
  static constexpr size_t kAlignment = 64;

  HostBuffer() = default;
  // Allocates `bytes` (contents uninitialized). Returns kResourceExhausted when
  // the allocation fails; a zero-byte buffer is valid and holds no memory.
  static absl::StatusOr<HostBuffer> Allocate(size_t bytes) {
    HostBuffer buffer;
    if (bytes == 0) return buffer;
    const size_t rounded = (bytes + kAlignment - 1) / kAlignment * kAlignment;
    void* data = std::aligned_alloc(kAlignment, rounded);
    if (data == nullptr) {
      return absl::ResourceExhaustedError(absl::StrCat("host allocation of ", bytes, " bytes failed"));
    }
    buffer.data_ = data;
    buffer.size_ = bytes;
    return buffer;
  }

  HostBuffer(HostBuffer&& other) noexcept
      : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)) {}
  HostBuffer& operator=(HostBuffer&& other) noexcept {
    if (this != &other) {
      std::free(data_);
      data_ = std::exchange(other.data_, nullptr);
      size_ = std::exchange(other.size_, 0);
    }
    return *this;
  }
  HostBuffer(const HostBuffer&) = delete;
  HostBuffer& operator=(const HostBuffer&) = delete;
  ~HostBuffer() { std::free(data_); }

  void* data() const { return data_; }
  size_t size() const { return size_; }
  template <typename T>
  T* As() const { return static_cast<T*>(data_); }

 private:
  void* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace banyan

#endif  // BANYAN_SDK_BASE_HOST_BUFFER_H_

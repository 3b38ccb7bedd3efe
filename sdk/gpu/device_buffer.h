// Owning CUDA resources: DeviceBuffer (cudaMalloc), PinnedBuffer
// (cudaMallocHost), Stream and Event. Each is move-only, created through a
// factory that returns absl::StatusOr, and frees its resource in the
// destructor (errors there are logged, never thrown). Not thread-safe: one
// owner at a time; the CUDA runtime itself may be called from any thread.
//
//   BANYAN_ASSIGN_OR_RETURN(auto stream, gpu::Stream::Create());
//   BANYAN_ASSIGN_OR_RETURN(auto buf, gpu::DeviceBuffer::Allocate(bytes));
//   BANYAN_RETURN_IF_ERROR(buf.CopyFromHost(host_ptr, bytes, stream.get()));
#ifndef BANYAN_SDK_GPU_DEVICE_BUFFER_H_
#define BANYAN_SDK_GPU_DEVICE_BUFFER_H_

#include <cuda_runtime_api.h>

#include <cstddef>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace banyan::gpu {

class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  // Allocates `bytes` on the current device (uninitialized). Out of device
  // memory -> kResourceExhausted; no device -> kUnavailable.
  static absl::StatusOr<DeviceBuffer> Allocate(size_t bytes);
  DeviceBuffer(DeviceBuffer&& other) noexcept
      : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)) {}
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer();

  void* data() const { return data_; }
  size_t size() const { return size_; }
  template <typename T>
  T* As() const { return static_cast<T*>(data_); }

  // Asynchronous copies on `stream` (nullptr: the legacy default stream).
  // REQUIRES: bytes <= size(); otherwise kOutOfRange and nothing is copied.
  absl::Status CopyFromHost(const void* src, size_t bytes, cudaStream_t stream = nullptr);
  absl::Status CopyToHost(void* dst, size_t bytes, cudaStream_t stream = nullptr) const;
  // Sets every byte to `value` (asynchronous). Tests poison outputs with it.
  absl::Status Fill(int value, cudaStream_t stream = nullptr);

 private:
  void* data_ = nullptr;
  size_t size_ = 0;
};

// Page-locked host memory, for fast and truly asynchronous copies.
class PinnedBuffer {
 public:
  PinnedBuffer() = default;
  static absl::StatusOr<PinnedBuffer> Allocate(size_t bytes);
  PinnedBuffer(PinnedBuffer&& other) noexcept
      : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)) {}
  PinnedBuffer& operator=(PinnedBuffer&& other) noexcept;
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;
  ~PinnedBuffer();

  void* data() const { return data_; }
  size_t size() const { return size_; }
  template <typename T>
  T* As() const { return static_cast<T*>(data_); }

 private:
  void* data_ = nullptr;
  size_t size_ = 0;
};

// A non-blocking CUDA stream.
class Stream {
 public:
  static absl::StatusOr<Stream> Create();
  Stream(Stream&& other) noexcept : stream_(std::exchange(other.stream_, nullptr)) {}
  Stream& operator=(Stream&& other) noexcept;
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  ~Stream();

  cudaStream_t get() const { return stream_; }
  // Blocks until all work queued so far has finished; returns its first error.
  absl::Status Synchronize() const;

 private:
  explicit Stream(cudaStream_t stream) : stream_(stream) {}
  cudaStream_t stream_ = nullptr;
};

// A CUDA event with timing enabled (benchmarks), or a point in a stream to
// wait for.
class Event {
 public:
  static absl::StatusOr<Event> Create();
  Event(Event&& other) noexcept : event_(std::exchange(other.event_, nullptr)) {}
  Event& operator=(Event&& other) noexcept;
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  ~Event();

  cudaEvent_t get() const { return event_; }
  absl::Status Record(cudaStream_t stream) const;
  // Blocks until the work queued before the last Record has finished; returns
  // its first error.
  absl::Status Synchronize() const;
  // Milliseconds between `start` and this event. REQUIRES: both recorded and complete.
  absl::StatusOr<float> ElapsedMsSince(const Event& start) const;

 private:
  explicit Event(cudaEvent_t event) : event_(event) {}
  cudaEvent_t event_ = nullptr;
};

}  // namespace banyan::gpu

#endif  // BANYAN_SDK_GPU_DEVICE_BUFFER_H_

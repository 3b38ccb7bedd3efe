#include "sdk/gpu/device_buffer.h"

#include "absl/strings/str_cat.h"
#include "banyan/status_macros.h"
#include "sdk/base/logging.h"
#include "sdk/gpu/cuda_status.h"

namespace banyan::gpu {
namespace {

// Destructors cannot return a Status: log a failed free and go on.
void LogIfError(absl::Status status) {
  if (!status.ok()) BANYAN_LOG(ERROR) << status;
}

absl::Status CheckBytes(size_t bytes, size_t size) {
  if (bytes > size) {
    return absl::OutOfRangeError(absl::StrCat("copy of ", bytes, " bytes into a buffer of ", size));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<DeviceBuffer> DeviceBuffer::Allocate(size_t bytes) {
  DeviceBuffer buffer;
  if (bytes == 0) return buffer;
  BANYAN_CUDA_RETURN_IF_ERROR(cudaMalloc(&buffer.data_, bytes));
  buffer.size_ = bytes;
  return buffer;
}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  if (this != &other) {
    if (data_ != nullptr) LogIfError(BANYAN_CUDA_STATUS(cudaFree(data_)));
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

DeviceBuffer::~DeviceBuffer() {
  if (data_ != nullptr) LogIfError(BANYAN_CUDA_STATUS(cudaFree(data_)));
}

absl::Status DeviceBuffer::CopyFromHost(const void* src, size_t bytes, cudaStream_t stream) {
  BANYAN_RETURN_IF_ERROR(CheckBytes(bytes, size_));
  BANYAN_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(data_, src, bytes, cudaMemcpyHostToDevice, stream));
  return absl::OkStatus();
}

absl::Status DeviceBuffer::CopyToHost(void* dst, size_t bytes, cudaStream_t stream) const {
  BANYAN_RETURN_IF_ERROR(CheckBytes(bytes, size_));
  BANYAN_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(dst, data_, bytes, cudaMemcpyDeviceToHost, stream));
  return absl::OkStatus();
}

absl::Status DeviceBuffer::Fill(int value, cudaStream_t stream) {
  BANYAN_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(data_, value, size_, stream));
  return absl::OkStatus();
}

absl::StatusOr<PinnedBuffer> PinnedBuffer::Allocate(size_t bytes) {
  PinnedBuffer buffer;
  if (bytes == 0) return buffer;
  BANYAN_CUDA_RETURN_IF_ERROR(cudaMallocHost(&buffer.data_, bytes));
  buffer.size_ = bytes;
  return buffer;
}

PinnedBuffer& PinnedBuffer::operator=(PinnedBuffer&& other) noexcept {
  if (this != &other) {
    if (data_ != nullptr) LogIfError(BANYAN_CUDA_STATUS(cudaFreeHost(data_)));
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

PinnedBuffer::~PinnedBuffer() {
  if (data_ != nullptr) LogIfError(BANYAN_CUDA_STATUS(cudaFreeHost(data_)));
}

absl::StatusOr<Stream> Stream::Create() {
  cudaStream_t stream = nullptr;
  BANYAN_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  return Stream(stream);
}

Stream& Stream::operator=(Stream&& other) noexcept {
  if (this != &other) {
    if (stream_ != nullptr) LogIfError(BANYAN_CUDA_STATUS(cudaStreamDestroy(stream_)));
    stream_ = std::exchange(other.stream_, nullptr);
  }
  return *this;
}

Stream::~Stream() {
  if (stream_ != nullptr) LogIfError(BANYAN_CUDA_STATUS(cudaStreamDestroy(stream_)));
}

absl::Status Stream::Synchronize() const {
  BANYAN_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
  return absl::OkStatus();
}

absl::StatusOr<Event> Event::Create() {
  cudaEvent_t event = nullptr;
  BANYAN_CUDA_RETURN_IF_ERROR(cudaEventCreate(&event));
  return Event(event);
}

Event& Event::operator=(Event&& other) noexcept {
  if (this != &other) {
    if (event_ != nullptr) LogIfError(BANYAN_CUDA_STATUS(cudaEventDestroy(event_)));
    event_ = std::exchange(other.event_, nullptr);
  }
  return *this;
}

Event::~Event() {
  if (event_ != nullptr) LogIfError(BANYAN_CUDA_STATUS(cudaEventDestroy(event_)));
}

absl::Status Event::Record(cudaStream_t stream) const {
  BANYAN_CUDA_RETURN_IF_ERROR(cudaEventRecord(event_, stream));
  return absl::OkStatus();
}

absl::Status Event::Synchronize() const {
  BANYAN_CUDA_RETURN_IF_ERROR(cudaEventSynchronize(event_));
  return absl::OkStatus();
}

absl::StatusOr<float> Event::ElapsedMsSince(const Event& start) const {
  float ms = 0;
  BANYAN_CUDA_RETURN_IF_ERROR(cudaEventElapsedTime(&ms, start.event_, event_));
  return ms;
}

}  // namespace banyan::gpu

// DType and TensorView: a non-owning, typed view of a strided tensor in host or
// device memory. The one tensor description shared by kv_tree, attention and
// model; owning storage is HostBuffer / DeviceBuffer (sdk/gpu/buffer.h).
//
//   TensorView q(ptr, DType::kBf16, {batch, heads, 128});   // row-major strides
//   float x = q.At<float>(...)  // only for fp32 host views
//
// A view never owns or frees memory; the caller keeps the storage alive for the
// view's lifetime. Views are value types: thread-compatible.
#ifndef BANYAN_SDK_BASE_TENSOR_VIEW_H_
#define BANYAN_SDK_BASE_TENSOR_VIEW_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace banyan {

enum class DType : uint8_t { kF32 = 0, kBf16 = 1, kF16 = 2 };

constexpr size_t DTypeSize(DType dtype) { return dtype == DType::kF32 ? 4 : 2; }
std::string_view DTypeName(DType dtype);  // "f32", "bf16", "f16"
// Parses "f32"/"fp32"/"float32", "bf16"/"bfloat16", "f16"/"fp16"/"float16".
absl::StatusOr<DType> ParseDType(std::string_view name);

// Where the bytes of a view live.
enum class MemorySpace : uint8_t { kHost = 0, kDevice = 1 };

class TensorView {
 public:
  static constexpr int kMaxRank = 6;

  TensorView() = default;
  // A contiguous row-major view. REQUIRES: shape.size() <= kMaxRank, dims >= 0.
  TensorView(void* data, DType dtype, std::initializer_list<int64_t> shape,
             MemorySpace space = MemorySpace::kHost);

  // A view with explicit element strides. Returns kInvalidArgument for a rank
  // above kMaxRank, a negative dimension or mismatched shape/stride lengths.
  static absl::StatusOr<TensorView> Strided(void* data, DType dtype,
                                            const int64_t* shape,
                                            const int64_t* strides, int rank,
                                            MemorySpace space);

  void* data() const { return data_; }
  DType dtype() const { return dtype_; }
  MemorySpace space() const { return space_; }
  int rank() const { return rank_; }
  int64_t dim(int i) const { return shape_[i]; }
  int64_t stride(int i) const { return strides_[i]; }  // in elements
  int64_t NumElements() const;
  size_t SizeBytes() const { return static_cast<size_t>(NumElements()) * DTypeSize(dtype_); }
  bool IsContiguous() const;

  // A typed pointer to the first element. REQUIRES: sizeof(T) == DTypeSize(dtype()).
  template <typename T>
  T* As() const { return static_cast<T*>(data_); }

  // Element offset of a multi-index (in elements). REQUIRES: index.size() == rank().
  int64_t Offset(std::initializer_list<int64_t> index) const;

  // "bf16[4,8,128]" for messages and logs.
  std::string DebugString() const;

 private:
  void* data_ = nullptr;
  DType dtype_ = DType::kF32;
  MemorySpace space_ = MemorySpace::kHost;
  int rank_ = 0;
  std::array<int64_t, kMaxRank> shape_{};
  std::array<int64_t, kMaxRank> strides_{};
};

}  // namespace banyan

#endif  // BANYAN_SDK_BASE_TENSOR_VIEW_H_

#include "sdk/base/tensor_view.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/types/span.h"
#include "sdk/base/logging.h"

namespace banyan {

std::string_view DTypeName(DType dtype) {
  switch (dtype) {
    case DType::kF32: return "f32";
    case DType::kBf16: return "bf16";
    case DType::kF16: return "f16";
  }
  return "unknown";
}

absl::StatusOr<DType> ParseDType(std::string_view name) {
  if (name == "f32" || name == "fp32" || name == "float32") return DType::kF32;
  if (name == "bf16" || name == "bfloat16") return DType::kBf16;
  if (name == "f16" || name == "fp16" || name == "float16") return DType::kF16;
  return absl::InvalidArgumentError(absl::StrCat("unknown dtype '", std::string(name), "'"));
}

TensorView::TensorView(void* data, DType dtype, std::initializer_list<int64_t> shape,
                       MemorySpace space)
    : data_(data), dtype_(dtype), space_(space), rank_(static_cast<int>(shape.size())) {
  BANYAN_CHECK(rank_ <= kMaxRank) << "rank " << rank_;
  int i = 0;
  for (int64_t d : shape) {
    BANYAN_CHECK(d >= 0) << "negative dimension " << d;
    shape_[i++] = d;
  }
  int64_t stride = 1;
  for (int k = rank_ - 1; k >= 0; --k) {
    strides_[k] = stride;
    stride *= shape_[k];
  }
}

absl::StatusOr<TensorView> TensorView::Strided(void* data, DType dtype, const int64_t* shape,
                                               const int64_t* strides, int rank,
                                               MemorySpace space) {
  if (rank < 0 || rank > kMaxRank) {
    return absl::InvalidArgumentError(absl::StrCat("tensor rank ", rank, " not in [0, ", kMaxRank, "]"));
  }
  TensorView view;
  view.data_ = data;
  view.dtype_ = dtype;
  view.space_ = space;
  view.rank_ = rank;
  for (int i = 0; i < rank; ++i) {
    if (shape[i] < 0) {
      return absl::InvalidArgumentError(absl::StrCat("negative dimension ", shape[i], " at axis ", i));
    }
    view.shape_[i] = shape[i];
    view.strides_[i] = strides[i];
  }
  return view;
}

int64_t TensorView::NumElements() const {
  int64_t n = 1;
  for (int i = 0; i < rank_; ++i) n *= shape_[i];
  return n;
}

bool TensorView::IsContiguous() const {
  int64_t expected = 1;
  for (int k = rank_ - 1; k >= 0; --k) {
    if (shape_[k] != 1 && strides_[k] != expected) return false;
    expected *= shape_[k];
  }
  return true;
}

int64_t TensorView::Offset(std::initializer_list<int64_t> index) const {
  BANYAN_CHECK(static_cast<int>(index.size()) == rank_) << "index rank mismatch";
  int64_t offset = 0;
  int i = 0;
  for (int64_t v : index) offset += v * strides_[i++];
  return offset;
}

std::string TensorView::DebugString() const {
  return absl::StrCat(std::string(DTypeName(dtype_)), "[",
                      absl::StrJoin(absl::MakeConstSpan(shape_.data(), rank_), ","), "]");
}

}  // namespace banyan

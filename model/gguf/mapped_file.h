// MappedFile: a read-only memory mapping of a whole file, and checked
// arithmetic helpers every parser of untrusted model files uses.
//
//   BANYAN_ASSIGN_OR_RETURN(auto file, MappedFile::Open("/models/x.gguf"));
//   absl::Span<const uint8_t> bytes = file->bytes();
//
// Errors from Open: kNotFound (no such file), kPermissionDenied,
// kInvalidArgument (a directory or not a regular file), kInternal (mmap
// failed). An empty file maps to an empty span.
// Thread-safe after Open (the mapping is immutable); move-only via unique_ptr.
#ifndef BANYAN_MODEL_GGUF_MAPPED_FILE_H_
#define BANYAN_MODEL_GGUF_MAPPED_FILE_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace banyan::model {

class MappedFile {
 public:
  static absl::StatusOr<std::unique_ptr<MappedFile>> Open(const std::string& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  absl::Span<const uint8_t> bytes() const { return {data_, size_}; }
  const std::string& path() const { return path_; }

 private:
  MappedFile(std::string path, const uint8_t* data, size_t size)
      : path_(std::move(path)), data_(data), size_(size) {}
  std::string path_;
  const uint8_t* data_;
  size_t size_;
};

// Reads a whole (small) file: kNotFound when it does not exist.
absl::StatusOr<std::string> ReadWholeFile(const std::string& path);

// Overflow-checked helpers: return false when the result does not fit.
inline bool CheckedMul(uint64_t a, uint64_t b, uint64_t* out) {
  return !__builtin_mul_overflow(a, b, out);
}
inline bool CheckedAdd(uint64_t a, uint64_t b, uint64_t* out) {
  return !__builtin_add_overflow(a, b, out);
}
// True when [offset, offset + length) lies inside a buffer of `size` bytes.
inline bool RangeInside(uint64_t offset, uint64_t length, uint64_t size) {
  return offset <= size && length <= size - offset;
}

}  // namespace banyan::model

#endif  // BANYAN_MODEL_GGUF_MAPPED_FILE_H_

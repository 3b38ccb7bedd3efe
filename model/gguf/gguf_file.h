// GgufFile: a parsed GGUF (v2/v3) file: its metadata key/values and its
// tensor directory, over borrowed bytes (usually a MappedFile).
//
//   BANYAN_ASSIGN_OR_RETURN(auto mapped, MappedFile::Open(path));
//   BANYAN_ASSIGN_OR_RETURN(GgufFile gguf, GgufFile::Parse(mapped->bytes()));
//   BANYAN_ASSIGN_OR_RETURN(std::string arch, gguf.GetString("general.architecture"));
//
// Parse checks every length, count, offset and size against the buffer with
// overflow-safe arithmetic. Errors:
//   kInvalidArgument  not a GGUF file (bad magic), or structurally invalid
//                     content that is complete (duplicate keys or tensors,
//                     zero or too many dimensions, bad alignment value)
//   kDataLoss         the file ends early or an offset/size points outside it
//                     (truncated or corrupted)
//   kUnimplemented    GGUF version other than 2 or 3
// Tensor data views borrow the parsed buffer: it must outlive the GgufFile.
// Thread-compatible (immutable after Parse; concurrent reads are safe).
#ifndef BANYAN_MODEL_GGUF_GGUF_FILE_H_
#define BANYAN_MODEL_GGUF_GGUF_FILE_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace banyan::model {

enum class GgufValueType : uint32_t {
  kUint8 = 0, kInt8 = 1, kUint16 = 2, kInt16 = 3, kUint32 = 4, kInt32 = 5, kFloat32 = 6,
  kBool = 7, kString = 8, kArray = 9, kUint64 = 10, kInt64 = 11, kFloat64 = 12,
};

// One metadata value. Integers are widened (signed types into `i`, unsigned
// into `u`), floats into `f`; arrays hold their elements in `array`.
struct GgufValue {
  GgufValueType type = GgufValueType::kUint8;
  uint64_t u = 0;
  int64_t i = 0;
  double f = 0;
  bool b = false;
  std::string s;
  GgufValueType array_type = GgufValueType::kUint8;
  std::vector<GgufValue> array;

  bool IsInteger() const;
  bool IsFloat() const { return type == GgufValueType::kFloat32 || type == GgufValueType::kFloat64; }
};

struct GgufTensorInfo {
  std::string name;
  std::vector<int64_t> dims;  // ggml order: dims[0] is the contiguous (innermost) one
  uint32_t type = 0;          // ggml type number (see ggml_types.h)
  int64_t num_elements = 0;
  absl::Span<const uint8_t> data;  // exactly the tensor's bytes, inside the file
};

class GgufFile {
 public:
  static absl::StatusOr<GgufFile> Parse(absl::Span<const uint8_t> bytes);

  uint32_t version() const { return version_; }
  const std::map<std::string, GgufValue>& metadata() const { return metadata_; }
  const std::vector<GgufTensorInfo>& tensors() const { return tensors_; }

  // nullptr when absent.
  const GgufValue* Find(const std::string& key) const;
  const GgufTensorInfo* FindTensor(const std::string& name) const;

  // Typed accessors: kNotFound when absent, kInvalidArgument when the value
  // has another type (or an integer does not fit).
  absl::StatusOr<std::string> GetString(const std::string& key) const;
  absl::StatusOr<int64_t> GetInt(const std::string& key) const;
  absl::StatusOr<double> GetFloat(const std::string& key) const;  // accepts integers too
  absl::StatusOr<bool> GetBool(const std::string& key) const;
  absl::StatusOr<std::vector<std::string>> GetStringArray(const std::string& key) const;
  absl::StatusOr<std::vector<double>> GetFloatArray(const std::string& key) const;
  absl::StatusOr<std::vector<int64_t>> GetIntArray(const std::string& key) const;

 private:
  uint32_t version_ = 0;
  std::map<std::string, GgufValue> metadata_;
  std::vector<GgufTensorInfo> tensors_;
  std::map<std::string, size_t> tensor_index_;
};

}  // namespace banyan::model

#endif  // BANYAN_MODEL_GGUF_GGUF_FILE_H_

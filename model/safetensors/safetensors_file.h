// SafetensorsFile: the tensor table of one .safetensors file over borrowed
// bytes (usually a MappedFile), and conversion of its tensors to fp32.
//
// Layout: u64 little-endian header length N, N bytes of JSON
// {"name": {"dtype": "BF16", "shape": [..], "data_offsets": [begin, end]},
//  "__metadata__": {...}}, then the data; offsets are relative to byte 8 + N.
//
// Parse errors: kDataLoss when the file is truncated or its header is
// corrupt (bad JSON, offsets outside the data, sizes that disagree with
// dtype x shape, overlapping tensors); kInvalidArgument for an empty name.
// Unknown dtypes parse (they are kUnimplemented when converted).
// Thread-compatible (immutable after Parse). Views borrow the buffer.
#ifndef BANYAN_MODEL_SAFETENSORS_SAFETENSORS_FILE_H_
#define BANYAN_MODEL_SAFETENSORS_SAFETENSORS_FILE_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace banyan::model {

struct SafetensorsTensor {
  std::string dtype;            // "F32", "F16", "BF16", ...
  std::vector<int64_t> shape;   // outermost first
  int64_t num_elements = 0;
  absl::Span<const uint8_t> data;
};

class SafetensorsFile {
 public:
  static absl::StatusOr<SafetensorsFile> Parse(absl::Span<const uint8_t> bytes);
  const std::map<std::string, SafetensorsTensor>& tensors() const { return tensors_; }
  const SafetensorsTensor* Find(const std::string& name) const;

 private:
  std::map<std::string, SafetensorsTensor> tensors_;
};

// Bytes per element of a safetensors dtype, 0 when unknown.
int SafetensorsDtypeSize(const std::string& dtype);

// Converts F32, F16 or BF16 data to fp32 into `out` (num_elements values).
// kUnimplemented for other dtypes, kInvalidArgument when `out` has another size.
absl::Status SafetensorsToFloat(const SafetensorsTensor& tensor, absl::Span<float> out);

}  // namespace banyan::model

#endif  // BANYAN_MODEL_SAFETENSORS_SAFETENSORS_FILE_H_

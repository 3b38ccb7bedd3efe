#include "model/safetensors/safetensors_file.h"

#include <algorithm>
#include <cstring>
#include <limits>

#include "absl/strings/str_cat.h"
#include "model/gguf/mapped_file.h"
#include "nlohmann/json.hpp"
#include "sdk/base/half.h"

namespace banyan::model {
namespace {

constexpr uint64_t kMaxHeaderBytes = 100u << 20;

absl::Status Corrupt(const std::string& what) {
  return absl::DataLossError(absl::StrCat("safetensors: ", what));
}

}  // namespace

int SafetensorsDtypeSize(const std::string& dtype) {
  if (dtype == "F64" || dtype == "I64" || dtype == "U64") return 8;
  if (dtype == "F32" || dtype == "I32" || dtype == "U32") return 4;
  if (dtype == "F16" || dtype == "BF16" || dtype == "I16" || dtype == "U16") return 2;
  if (dtype == "I8" || dtype == "U8" || dtype == "BOOL" || dtype == "F8_E4M3" ||
      dtype == "F8_E5M2") {
    return 1;
  }
  return 0;
}

absl::StatusOr<SafetensorsFile> SafetensorsFile::Parse(absl::Span<const uint8_t> bytes) {
  if (bytes.size() < 8) return Corrupt("file shorter than its 8-byte header length");
  uint64_t header_len = 0;
  std::memcpy(&header_len, bytes.data(), 8);
  if (header_len > kMaxHeaderBytes) {
    return Corrupt(absl::StrCat("header length ", header_len, " is implausible"));
  }
  if (!RangeInside(8, header_len, bytes.size())) {
    return Corrupt(absl::StrCat("header of ", header_len, " bytes exceeds the file (truncated?)"));
  }
  const char* text = reinterpret_cast<const char*>(bytes.data() + 8);
  nlohmann::json header = nlohmann::json::parse(text, text + header_len, nullptr,
                                                /*allow_exceptions=*/false);
  if (header.is_discarded() || !header.is_object()) return Corrupt("header is not a JSON object");
  const absl::Span<const uint8_t> data = bytes.subspan(8 + header_len);
  SafetensorsFile file;
  std::vector<std::pair<uint64_t, uint64_t>> ranges;
  for (auto it = header.begin(); it != header.end(); ++it) {
    const std::string& name = it.key();
    if (name == "__metadata__") continue;
    if (name.empty()) return absl::InvalidArgumentError("safetensors: tensor with an empty name");
    const nlohmann::json& entry = it.value();
    if (!entry.is_object()) return Corrupt(absl::StrCat("entry '", name, "' is not an object"));
    auto dtype = entry.find("dtype");
    auto shape = entry.find("shape");
    auto offsets = entry.find("data_offsets");
    if (dtype == entry.end() || !dtype->is_string() || shape == entry.end() ||
        !shape->is_array() || offsets == entry.end() || !offsets->is_array() ||
        offsets->size() != 2 || !(*offsets)[0].is_number_unsigned() ||
        !(*offsets)[1].is_number_unsigned()) {
      return Corrupt(absl::StrCat("entry '", name, "' lacks dtype, shape or data_offsets"));
    }
    SafetensorsTensor t;
    t.dtype = dtype->get<std::string>();
    uint64_t elements = 1;
    for (const auto& d : *shape) {
      if (!d.is_number_unsigned()) return Corrupt(absl::StrCat("tensor '", name, "' has a bad shape"));
      const uint64_t dim = d.get<uint64_t>();
      if (!CheckedMul(elements, dim, &elements) ||
          elements > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
        return Corrupt(absl::StrCat("tensor '", name, "' size overflows"));
      }
      t.shape.push_back(static_cast<int64_t>(dim));
    }
    t.num_elements = static_cast<int64_t>(elements);
    const uint64_t begin = (*offsets)[0].get<uint64_t>();
    const uint64_t end = (*offsets)[1].get<uint64_t>();
    if (begin > end || !RangeInside(begin, end - begin, data.size())) {
      return Corrupt(absl::StrCat("tensor '", name, "' data [", begin, ", ", end,
                                  ") lies outside the file (truncated?)"));
    }
    const int elem_size = SafetensorsDtypeSize(t.dtype);
    uint64_t want = 0;
    if (elem_size > 0 && (!CheckedMul(elements, elem_size, &want) || want != end - begin)) {
      return Corrupt(absl::StrCat("tensor '", name, "' holds ", end - begin, " bytes, ", t.dtype,
                                  " of its shape needs ", want));
    }
    t.data = data.subspan(begin, end - begin);
    ranges.emplace_back(begin, end);
    file.tensors_.emplace(name, std::move(t));
  }
  std::sort(ranges.begin(), ranges.end());
  for (size_t i = 1; i < ranges.size(); ++i) {
    if (ranges[i].first < ranges[i - 1].second) return Corrupt("tensor data ranges overlap");
  }
  return file;
}

const SafetensorsTensor* SafetensorsFile::Find(const std::string& name) const {
  auto it = tensors_.find(name);
  return it == tensors_.end() ? nullptr : &it->second;
}

absl::Status SafetensorsToFloat(const SafetensorsTensor& t, absl::Span<float> out) {
  if (static_cast<int64_t>(out.size()) != t.num_elements) {
    return absl::InvalidArgumentError("safetensors: output size differs from the tensor's");
  }
  const uint8_t* p = t.data.data();
  const size_t n = out.size();
  if (t.dtype == "F32") {
    if (n > 0) std::memcpy(out.data(), p, n * 4);
  } else if (t.dtype == "F16") {
    for (size_t i = 0; i < n; ++i) out[i] = Fp16BitsToFloat(static_cast<uint16_t>(p[2 * i] | (p[2 * i + 1] << 8)));
  } else if (t.dtype == "BF16") {
    for (size_t i = 0; i < n; ++i) out[i] = Bf16BitsToFloat(static_cast<uint16_t>(p[2 * i] | (p[2 * i + 1] << 8)));
  } else {
    return absl::UnimplementedError(absl::StrCat("safetensors dtype ", t.dtype,
                                                 " is not supported (F32, F16, BF16 are)"));
  }
  return absl::OkStatus();
}

}  // namespace banyan::model

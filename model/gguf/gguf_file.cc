#include "model/gguf/gguf_file.h"

#include <cstring>
#include <limits>

#include "absl/strings/str_cat.h"
#include "banyan/status_macros.h"
#include "model/gguf/ggml_types.h"
#include "model/gguf/mapped_file.h"

namespace banyan::model {
namespace {

constexpr int kMaxArrayDepth = 4;
constexpr uint32_t kMaxDims = 4;  // GGML_MAX_DIMS

// A bounds-checked little-endian cursor. Reading past the end is kDataLoss.
class Reader {
 public:
  explicit Reader(absl::Span<const uint8_t> bytes) : bytes_(bytes) {}
  uint64_t pos() const { return pos_; }
  uint64_t remaining() const { return bytes_.size() - pos_; }

  absl::Status Read(void* out, uint64_t n, const char* what) {
    if (n > remaining()) {
      return absl::DataLossError(absl::StrCat("GGUF truncated: ", what, " at byte ", pos_,
                                              " needs ", n, " bytes, ", remaining(), " left"));
    }
    if (n > 0) std::memcpy(out, bytes_.data() + pos_, n);
    pos_ += n;
    return absl::OkStatus();
  }
  template <typename T>
  absl::StatusOr<T> Get(const char* what) {
    T value;
    BANYAN_RETURN_IF_ERROR(Read(&value, sizeof(T), what));
    return value;
  }
  absl::StatusOr<std::string> String(const char* what) {
    BANYAN_ASSIGN_OR_RETURN(uint64_t len, Get<uint64_t>(what));
    if (len > remaining()) {
      return absl::DataLossError(absl::StrCat("GGUF truncated or corrupt: ", what, " of length ",
                                              len, " at byte ", pos_, " exceeds the file"));
    }
    std::string s(reinterpret_cast<const char*>(bytes_.data() + pos_), len);
    pos_ += len;
    return s;
  }

 private:
  absl::Span<const uint8_t> bytes_;
  uint64_t pos_ = 0;
};

// Smallest encoded size of one value of `type` (arrays: their 12-byte header).
uint64_t MinEncodedSize(GgufValueType type) {
  switch (type) {
    case GgufValueType::kUint8: case GgufValueType::kInt8: case GgufValueType::kBool: return 1;
    case GgufValueType::kUint16: case GgufValueType::kInt16: return 2;
    case GgufValueType::kUint32: case GgufValueType::kInt32: case GgufValueType::kFloat32: return 4;
    case GgufValueType::kString: return 8;
    case GgufValueType::kArray: return 12;
    default: return 8;
  }
}

absl::Status ReadValue(Reader& r, GgufValueType type, int depth, GgufValue* out) {
  out->type = type;
  switch (type) {
    case GgufValueType::kUint8: { BANYAN_ASSIGN_OR_RETURN(out->u, r.Get<uint8_t>("u8")); break; }
    case GgufValueType::kInt8: { BANYAN_ASSIGN_OR_RETURN(out->i, r.Get<int8_t>("i8")); break; }
    case GgufValueType::kUint16: { BANYAN_ASSIGN_OR_RETURN(out->u, r.Get<uint16_t>("u16")); break; }
    case GgufValueType::kInt16: { BANYAN_ASSIGN_OR_RETURN(out->i, r.Get<int16_t>("i16")); break; }
    case GgufValueType::kUint32: { BANYAN_ASSIGN_OR_RETURN(out->u, r.Get<uint32_t>("u32")); break; }
    case GgufValueType::kInt32: { BANYAN_ASSIGN_OR_RETURN(out->i, r.Get<int32_t>("i32")); break; }
    case GgufValueType::kUint64: { BANYAN_ASSIGN_OR_RETURN(out->u, r.Get<uint64_t>("u64")); break; }
    case GgufValueType::kInt64: { BANYAN_ASSIGN_OR_RETURN(out->i, r.Get<int64_t>("i64")); break; }
    case GgufValueType::kFloat32: { BANYAN_ASSIGN_OR_RETURN(out->f, r.Get<float>("f32")); break; }
    case GgufValueType::kFloat64: { BANYAN_ASSIGN_OR_RETURN(out->f, r.Get<double>("f64")); break; }
    case GgufValueType::kBool: {
      BANYAN_ASSIGN_OR_RETURN(uint8_t b, r.Get<uint8_t>("bool"));
      if (b > 1) return absl::DataLossError(absl::StrCat("GGUF bool value ", b, " is not 0 or 1"));
      out->b = b != 0;
      break;
    }
    case GgufValueType::kString: { BANYAN_ASSIGN_OR_RETURN(out->s, r.String("string value")); break; }
    case GgufValueType::kArray: {
      if (depth >= kMaxArrayDepth) return absl::DataLossError("GGUF arrays nested too deeply");
      BANYAN_ASSIGN_OR_RETURN(uint32_t elem, r.Get<uint32_t>("array type"));
      if (elem > static_cast<uint32_t>(GgufValueType::kFloat64)) {
        return absl::DataLossError(absl::StrCat("GGUF array of unknown value type ", elem));
      }
      BANYAN_ASSIGN_OR_RETURN(uint64_t count, r.Get<uint64_t>("array length"));
      const auto elem_type = static_cast<GgufValueType>(elem);
      // Each element needs at least MinEncodedSize bytes: reject impossible
      // counts before reserving memory for them.
      if (count > r.remaining() / MinEncodedSize(elem_type)) {
        return absl::DataLossError(absl::StrCat("GGUF array of ", count,
                                                " elements exceeds the file"));
      }
      out->array_type = elem_type;
      out->array.resize(count);
      for (uint64_t k = 0; k < count; ++k) {
        BANYAN_RETURN_IF_ERROR(ReadValue(r, elem_type, depth + 1, &out->array[k]));
      }
      break;
    }
    default:
      return absl::DataLossError(absl::StrCat("GGUF metadata value of unknown type ",
                                              static_cast<uint32_t>(type)));
  }
  return absl::OkStatus();
}

}  // namespace

bool GgufValue::IsInteger() const {
  switch (type) {
    case GgufValueType::kUint8: case GgufValueType::kInt8: case GgufValueType::kUint16:
    case GgufValueType::kInt16: case GgufValueType::kUint32: case GgufValueType::kInt32:
    case GgufValueType::kUint64: case GgufValueType::kInt64: return true;
    default: return false;
  }
}

namespace {
bool IsUnsigned(GgufValueType t) {
  return t == GgufValueType::kUint8 || t == GgufValueType::kUint16 ||
         t == GgufValueType::kUint32 || t == GgufValueType::kUint64;
}
absl::StatusOr<int64_t> AsInt(const GgufValue& v, const std::string& key) {
  if (!v.IsInteger()) return absl::InvalidArgumentError(absl::StrCat("GGUF key ", key, " is not an integer"));
  if (IsUnsigned(v.type)) {
    if (v.u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return absl::InvalidArgumentError(absl::StrCat("GGUF key ", key, " value too large"));
    }
    return static_cast<int64_t>(v.u);
  }
  return v.i;
}
}  // namespace

absl::StatusOr<GgufFile> GgufFile::Parse(absl::Span<const uint8_t> bytes) {
  Reader r(bytes);
  GgufFile file;
  BANYAN_ASSIGN_OR_RETURN(uint32_t magic, r.Get<uint32_t>("magic"));
  if (magic != 0x46554747u) {  // "GGUF"
    return absl::InvalidArgumentError("not a GGUF file (bad magic)");
  }
  BANYAN_ASSIGN_OR_RETURN(file.version_, r.Get<uint32_t>("version"));
  if (file.version_ != 2 && file.version_ != 3) {
    return absl::UnimplementedError(absl::StrCat("GGUF version ", file.version_,
                                                 " is not supported (2 and 3 are)"));
  }
  BANYAN_ASSIGN_OR_RETURN(uint64_t tensor_count, r.Get<uint64_t>("tensor count"));
  BANYAN_ASSIGN_OR_RETURN(uint64_t kv_count, r.Get<uint64_t>("metadata count"));
  // A key/value pair takes at least 8 + 4 + 1 bytes, a tensor record 8 + 4 + 8 + 4 + 8.
  if (kv_count > r.remaining() / 13 || tensor_count > r.remaining() / 32) {
    return absl::DataLossError(absl::StrCat("GGUF header claims ", kv_count, " keys and ",
                                            tensor_count, " tensors: more than the file holds"));
  }
  for (uint64_t k = 0; k < kv_count; ++k) {
    BANYAN_ASSIGN_OR_RETURN(std::string key, r.String("metadata key"));
    BANYAN_ASSIGN_OR_RETURN(uint32_t type, r.Get<uint32_t>("metadata type"));
    GgufValue value;
    BANYAN_RETURN_IF_ERROR(ReadValue(r, static_cast<GgufValueType>(type), 0, &value));
    if (!file.metadata_.emplace(key, std::move(value)).second) {
      return absl::InvalidArgumentError(absl::StrCat("GGUF metadata key '", key, "' repeats"));
    }
  }
  uint64_t alignment = 32;
  if (const GgufValue* a = file.Find("general.alignment")) {
    auto v = AsInt(*a, "general.alignment");
    if (!v.ok() || *v <= 0 || *v > (1 << 20) || (*v & (*v - 1)) != 0) {
      return absl::InvalidArgumentError("GGUF general.alignment is not a power of two");
    }
    alignment = static_cast<uint64_t>(*v);
  }
  struct Pending {
    uint64_t offset;
    uint64_t size;
  };
  std::vector<Pending> pending;
  file.tensors_.reserve(tensor_count);
  for (uint64_t t = 0; t < tensor_count; ++t) {
    GgufTensorInfo info;
    BANYAN_ASSIGN_OR_RETURN(info.name, r.String("tensor name"));
    BANYAN_ASSIGN_OR_RETURN(uint32_t n_dims, r.Get<uint32_t>("tensor rank"));
    if (n_dims == 0 || n_dims > kMaxDims) {
      return absl::InvalidArgumentError(absl::StrCat("GGUF tensor '", info.name, "' has ", n_dims,
                                                     " dimensions (1 to 4 allowed)"));
    }
    uint64_t elements = 1;
    for (uint32_t d = 0; d < n_dims; ++d) {
      BANYAN_ASSIGN_OR_RETURN(uint64_t dim, r.Get<uint64_t>("tensor dimension"));
      if (dim > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) ||
          !CheckedMul(elements, dim, &elements) ||
          elements > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
        return absl::DataLossError(absl::StrCat("GGUF tensor '", info.name, "' size overflows"));
      }
      info.dims.push_back(static_cast<int64_t>(dim));
    }
    info.num_elements = static_cast<int64_t>(elements);
    BANYAN_ASSIGN_OR_RETURN(info.type, r.Get<uint32_t>("tensor type"));
    BANYAN_ASSIGN_OR_RETURN(uint64_t offset, r.Get<uint64_t>("tensor offset"));
    uint64_t size = 0;
    if (auto tinfo = GetGgmlTypeInfo(info.type); tinfo.ok()) {
      if (info.dims[0] % tinfo->block_elems != 0) {
        return absl::InvalidArgumentError(absl::StrCat(
            "GGUF tensor '", info.name, "' row of ", info.dims[0], " values is not a whole number of ",
            tinfo->name, " blocks"));
      }
      auto s = GgmlByteSize(info.type, info.num_elements);
      if (!s.ok()) return absl::DataLossError(std::string(s.status().message()));
      size = *s;
    }  // Unknown types keep size 0: they are rejected (kUnimplemented) when loaded.
    if (offset % alignment != 0) {
      return absl::DataLossError(absl::StrCat("GGUF tensor '", info.name, "' offset ", offset,
                                              " is not aligned to ", alignment));
    }
    if (!file.tensor_index_.emplace(info.name, file.tensors_.size()).second) {
      return absl::InvalidArgumentError(absl::StrCat("GGUF tensor '", info.name, "' repeats"));
    }
    file.tensors_.push_back(std::move(info));
    pending.push_back({offset, size});
  }
  uint64_t data_start = r.pos();
  if (data_start % alignment != 0) data_start += alignment - data_start % alignment;
  for (size_t t = 0; t < file.tensors_.size(); ++t) {
    uint64_t begin = 0;
    if (!CheckedAdd(data_start, pending[t].offset, &begin) ||
        !RangeInside(begin, pending[t].size, bytes.size())) {
      return absl::DataLossError(absl::StrCat("GGUF tensor '", file.tensors_[t].name,
                                              "' data [", pending[t].offset, ", +", pending[t].size,
                                              ") lies outside the file (truncated?)"));
    }
    file.tensors_[t].data = bytes.subspan(begin, pending[t].size);
  }
  return file;
}

const GgufValue* GgufFile::Find(const std::string& key) const {
  auto it = metadata_.find(key);
  return it == metadata_.end() ? nullptr : &it->second;
}

const GgufTensorInfo* GgufFile::FindTensor(const std::string& name) const {
  auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

namespace {
absl::Status Missing(const std::string& key) {
  return absl::NotFoundError(absl::StrCat("GGUF metadata has no key '", key, "'"));
}
}  // namespace

absl::StatusOr<std::string> GgufFile::GetString(const std::string& key) const {
  const GgufValue* v = Find(key);
  if (v == nullptr) return Missing(key);
  if (v->type != GgufValueType::kString) {
    return absl::InvalidArgumentError(absl::StrCat("GGUF key ", key, " is not a string"));
  }
  return v->s;
}

absl::StatusOr<int64_t> GgufFile::GetInt(const std::string& key) const {
  const GgufValue* v = Find(key);
  if (v == nullptr) return Missing(key);
  return AsInt(*v, key);
}

absl::StatusOr<double> GgufFile::GetFloat(const std::string& key) const {
  const GgufValue* v = Find(key);
  if (v == nullptr) return Missing(key);
  if (v->IsFloat()) return v->f;
  BANYAN_ASSIGN_OR_RETURN(int64_t i, AsInt(*v, key));
  return static_cast<double>(i);
}

absl::StatusOr<bool> GgufFile::GetBool(const std::string& key) const {
  const GgufValue* v = Find(key);
  if (v == nullptr) return Missing(key);
  if (v->type != GgufValueType::kBool) {
    return absl::InvalidArgumentError(absl::StrCat("GGUF key ", key, " is not a bool"));
  }
  return v->b;
}

absl::StatusOr<std::vector<std::string>> GgufFile::GetStringArray(const std::string& key) const {
  const GgufValue* v = Find(key);
  if (v == nullptr) return Missing(key);
  if (v->type != GgufValueType::kArray || v->array_type != GgufValueType::kString) {
    return absl::InvalidArgumentError(absl::StrCat("GGUF key ", key, " is not a string array"));
  }
  std::vector<std::string> out;
  out.reserve(v->array.size());
  for (const GgufValue& e : v->array) out.push_back(e.s);
  return out;
}

absl::StatusOr<std::vector<double>> GgufFile::GetFloatArray(const std::string& key) const {
  const GgufValue* v = Find(key);
  if (v == nullptr) return Missing(key);
  if (v->type != GgufValueType::kArray) {
    return absl::InvalidArgumentError(absl::StrCat("GGUF key ", key, " is not an array"));
  }
  std::vector<double> out;
  out.reserve(v->array.size());
  for (const GgufValue& e : v->array) {
    if (e.IsFloat()) {
      out.push_back(e.f);
    } else {
      BANYAN_ASSIGN_OR_RETURN(int64_t i, AsInt(e, key));
      out.push_back(static_cast<double>(i));
    }
  }
  return out;
}

absl::StatusOr<std::vector<int64_t>> GgufFile::GetIntArray(const std::string& key) const {
  const GgufValue* v = Find(key);
  if (v == nullptr) return Missing(key);
  if (v->type != GgufValueType::kArray) {
    return absl::InvalidArgumentError(absl::StrCat("GGUF key ", key, " is not an array"));
  }
  std::vector<int64_t> out;
  out.reserve(v->array.size());
  for (const GgufValue& e : v->array) {
    BANYAN_ASSIGN_OR_RETURN(int64_t i, AsInt(e, key));
    out.push_back(i);
  }
  return out;
}

}  // namespace banyan::model

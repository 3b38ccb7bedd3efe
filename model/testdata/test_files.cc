#include "model/testdata/test_files.h"

#include <zlib.h>

#include <fstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace banyan::model::testing {

absl::StatusOr<std::string> ReadTestFile(const std::string& path) {
  if (!absl::EndsWith(path, ".gz")) {
    std::ifstream in(path, std::ios::binary);
    if (!in) return absl::NotFoundError(absl::StrCat("test file missing: ", path));
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  }
  gzFile f = gzopen(path.c_str(), "rb");
  if (f == nullptr) return absl::NotFoundError(absl::StrCat("test file missing: ", path));
  std::string out;
  char buf[1 << 16];
  int n;
  while ((n = gzread(f, buf, sizeof(buf))) > 0) out.append(buf, n);
  const bool bad = n < 0;
  gzclose(f);
  if (bad) return absl::DataLossError(absl::StrCat("bad gzip file: ", path));
  return out;
}

namespace {
void PutString(std::string* out, const std::string& s) {
  AppendRaw<uint64_t>(out, s.size());
  out->append(s);
}
}  // namespace

void GgufWriter::AddString(const std::string& key, const std::string& value) {
  PutString(&kv_, key);
  AppendRaw<uint32_t>(&kv_, 8);
  PutString(&kv_, value);
  ++kv_count_;
}
void GgufWriter::AddU32(const std::string& key, uint32_t value) {
  PutString(&kv_, key);
  AppendRaw<uint32_t>(&kv_, 4);
  AppendRaw<uint32_t>(&kv_, value);
  ++kv_count_;
}
void GgufWriter::AddI32(const std::string& key, int32_t value) {
  PutString(&kv_, key);
  AppendRaw<uint32_t>(&kv_, 5);
  AppendRaw<int32_t>(&kv_, value);
  ++kv_count_;
}
void GgufWriter::AddF32(const std::string& key, float value) {
  PutString(&kv_, key);
  AppendRaw<uint32_t>(&kv_, 6);
  AppendRaw<float>(&kv_, value);
  ++kv_count_;
}
void GgufWriter::AddBool(const std::string& key, bool value) {
  PutString(&kv_, key);
  AppendRaw<uint32_t>(&kv_, 7);
  AppendRaw<uint8_t>(&kv_, value ? 1 : 0);
  ++kv_count_;
}
void GgufWriter::AddStringArray(const std::string& key, const std::vector<std::string>& values) {
  PutString(&kv_, key);
  AppendRaw<uint32_t>(&kv_, 9);
  AppendRaw<uint32_t>(&kv_, 8);
  AppendRaw<uint64_t>(&kv_, values.size());
  for (const auto& v : values) PutString(&kv_, v);
  ++kv_count_;
}
void GgufWriter::AddF32Array(const std::string& key, const std::vector<float>& values) {
  PutString(&kv_, key);
  AppendRaw<uint32_t>(&kv_, 9);
  AppendRaw<uint32_t>(&kv_, 6);
  AppendRaw<uint64_t>(&kv_, values.size());
  for (float v : values) AppendRaw<float>(&kv_, v);
  ++kv_count_;
}
void GgufWriter::AddI32Array(const std::string& key, const std::vector<int32_t>& values) {
  PutString(&kv_, key);
  AppendRaw<uint32_t>(&kv_, 9);
  AppendRaw<uint32_t>(&kv_, 5);
  AppendRaw<uint64_t>(&kv_, values.size());
  for (int32_t v : values) AppendRaw<int32_t>(&kv_, v);
  ++kv_count_;
}
void GgufWriter::AddTensor(const std::string& name, std::vector<uint64_t> dims, uint32_t type,
                           std::string data) {
  tensors_.push_back({name, std::move(dims), type, std::move(data)});
}

std::string GgufWriter::Finish(uint32_t alignment) const {
  std::string out;
  AppendRaw<uint32_t>(&out, 0x46554747u);
  AppendRaw<uint32_t>(&out, 3);
  AppendRaw<uint64_t>(&out, tensors_.size());
  AppendRaw<uint64_t>(&out, kv_count_);
  out += kv_;
  uint64_t offset = 0;
  std::vector<uint64_t> offsets;
  for (const Tensor& t : tensors_) {
    PutString(&out, t.name);
    AppendRaw<uint32_t>(&out, t.dims.size());
    for (uint64_t d : t.dims) AppendRaw<uint64_t>(&out, d);
    AppendRaw<uint32_t>(&out, t.type);
    AppendRaw<uint64_t>(&out, offset);
    offsets.push_back(offset);
    offset += t.data.size();
    offset = (offset + alignment - 1) / alignment * alignment;
  }
  while (out.size() % alignment != 0) out.push_back('\0');
  const size_t base = out.size();
  for (size_t i = 0; i < tensors_.size(); ++i) {
    out.resize(base + offsets[i], '\0');
    out += tensors_[i].data;
  }
  return out;
}

std::string WriteSafetensors(const std::vector<SafetensorsEntry>& entries) {
  std::string header = "{\"__metadata__\":{\"format\":\"pt\"}";
  std::string data;
  for (const auto& e : entries) {
    std::string shape;
    for (int64_t d : e.shape) absl::StrAppend(&shape, shape.empty() ? "" : ",", d);
    absl::StrAppend(&header, ",\"", e.name, "\":{\"dtype\":\"", e.dtype, "\",\"shape\":[", shape,
                    "],\"data_offsets\":[", data.size(), ",", data.size() + e.data.size(), "]}");
    data += e.data;
  }
  header += "}";
  while ((header.size() + 8) % 8 != 0) header += " ";
  std::string out;
  AppendRaw<uint64_t>(&out, header.size());
  return out + header + data;
}

std::string FloatsToBytes(const std::vector<float>& values) {
  std::string out(values.size() * 4, '\0');
  if (!values.empty()) std::memcpy(out.data(), values.data(), out.size());
  return out;
}

bool WriteFile(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(bytes.data(), bytes.size());
  return static_cast<bool>(out);
}

}  // namespace banyan::model::testing

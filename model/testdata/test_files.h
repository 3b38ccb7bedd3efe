// Test-only helpers for the loader and tokenizer tests: reading the shared
// assets (gzip files via zlib) and writing small GGUF / safetensors files
// from scratch (an encoder independent of the parsers under test).
#ifndef BANYAN_MODEL_TESTDATA_TEST_FILES_H_
#define BANYAN_MODEL_TESTDATA_TEST_FILES_H_

#include <cstdint>
#include <cstring>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace banyan::model::testing {

inline std::string AssetsDir() { return BANYAN_ASSETS_DIR; }
inline std::string SourceDir() { return BANYAN_SOURCE_DIR; }

// The contents of a file, gunzipped when it ends in ".gz".
absl::StatusOr<std::string> ReadTestFile(const std::string& path);

// Builds a GGUF v3 file in memory.
class GgufWriter {
 public:
  void AddString(const std::string& key, const std::string& value);
  void AddU32(const std::string& key, uint32_t value);
  void AddI32(const std::string& key, int32_t value);
  void AddF32(const std::string& key, float value);
  void AddBool(const std::string& key, bool value);
  void AddStringArray(const std::string& key, const std::vector<std::string>& values);
  void AddF32Array(const std::string& key, const std::vector<float>& values);
  void AddI32Array(const std::string& key, const std::vector<int32_t>& values);
  // dims in ggml order (innermost first); `data` already encoded for `type`.
  void AddTensor(const std::string& name, std::vector<uint64_t> dims, uint32_t type,
                 std::string data);
  std::string Finish(uint32_t alignment = 32) const;

 private:
  struct Tensor {
    std::string name;
    std::vector<uint64_t> dims;
    uint32_t type;
    std::string data;
  };
  std::string kv_;
  uint64_t kv_count_ = 0;
  std::vector<Tensor> tensors_;
};

// Builds a safetensors file in memory: tensors as (name, dtype, shape, bytes).
struct SafetensorsEntry {
  std::string name;
  std::string dtype;
  std::vector<int64_t> shape;
  std::string data;
};
std::string WriteSafetensors(const std::vector<SafetensorsEntry>& entries);

template <typename T>
void AppendRaw(std::string* out, T value) {
  char buf[sizeof(T)];
  std::memcpy(buf, &value, sizeof(T));
  out->append(buf, sizeof(T));
}

std::string FloatsToBytes(const std::vector<float>& values);

// Writes `bytes` to `path`; returns false on failure.
bool WriteFile(const std::string& path, const std::string& bytes);

}  // namespace banyan::model::testing

#endif  // BANYAN_MODEL_TESTDATA_TEST_FILES_H_

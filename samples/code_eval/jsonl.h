// Reading benchmark datasets written as JSON Lines (one JSON object per line,
// blank lines skipped): the file loop and typed field access, with every error
// naming the file and the 1-based line. Thread-safe (pure functions).
//
// Errors:
//   kNotFound          the file does not exist
//   kPermissionDenied  it cannot be read
//   kInvalidArgument   a line is not a JSON object, or a field is missing or
//                      of the wrong type ("<path>:<line>: ..." messages)
//   kDataLoss          a read error part-way
// An empty dataset is the caller's to judge.
#ifndef BANYAN_SAMPLES_CODE_EVAL_JSONL_H_
#define BANYAN_SAMPLES_CODE_EVAL_JSONL_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "google/protobuf/struct.pb.h"

namespace banyan::samples {

// kInvalidArgument "<where>: <what>".
absl::Status BadLine(std::string_view where, std::string_view what);

// Parses one line (without its newline) into a JSON object.
absl::StatusOr<google::protobuf::Struct> ParseJsonObject(std::string_view line, std::string_view where);

// Calls `visit(object, where)` for every non-blank line of `path` in order;
// stops at the first error (the loop's or the visitor's).
absl::Status ForEachJsonLine(
    const std::string& path,
    const std::function<absl::Status(const google::protobuf::Struct&, const std::string& where)>& visit);

// The first object of `path` (nullopt when it has none), without reading the
// rest of the file.
absl::StatusOr<std::optional<google::protobuf::Struct>> FirstJsonObject(const std::string& path);

// The string at `key`: "" when absent and not `required`.
absl::StatusOr<std::string> JsonString(const google::protobuf::Struct& object, const std::string& key,
                                       bool required, std::string_view where);

// The non-negative integer at `key` (required).
absl::StatusOr<int64_t> JsonId(const google::protobuf::Struct& object, const std::string& key,
                               std::string_view where);

}  // namespace banyan::samples

#endif  // BANYAN_SAMPLES_CODE_EVAL_JSONL_H_

#include "samples/code_eval/jsonl.h"

#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "banyan/status_macros.h"
#include "google/protobuf/util/json_util.h"

namespace banyan::samples {

using google::protobuf::Struct;
using google::protobuf::Value;

absl::Status BadLine(std::string_view where, std::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(std::string(where), ": ", std::string(what)));
}

absl::StatusOr<Struct> ParseJsonObject(std::string_view line, std::string_view where) {
  Struct object;
  const auto status = google::protobuf::util::JsonStringToMessage(
      google::protobuf::StringPiece(line.data(), line.size()), &object);
  if (!status.ok()) {
    return BadLine(where, absl::StrCat("not a JSON object (", std::string(status.message()), ")"));
  }
  return object;
}

namespace {

// ForEachJsonLine's loop; stops after the first object when `first_only`.
absl::Status VisitJsonLines(const std::string& path,
                            const std::function<absl::Status(const Struct&, const std::string&)>& visit,
                            bool first_only) {
  std::ifstream in(path);
  if (!in) {
    const int err = errno;
    if (err == ENOENT) return absl::NotFoundError(absl::StrCat(path, ": no such file"));
    return absl::PermissionDeniedError(absl::StrCat(path, ": cannot read (", std::strerror(err), ")"));
  }
  std::string line;
  int64_t number = 0;
  while (std::getline(in, line)) {
    ++number;
    std::string_view trimmed = line;
    while (!trimmed.empty() && (trimmed.back() == '\r' || trimmed.back() == ' ')) trimmed.remove_suffix(1);
    if (trimmed.empty()) continue;
    const std::string where = absl::StrCat(path, ":", number);
    absl::StatusOr<Struct> object = ParseJsonObject(trimmed, where);
    if (!object.ok()) return object.status();
    if (absl::Status s = visit(*object, where); !s.ok()) return s;
    if (first_only) return absl::OkStatus();
  }
  if (in.bad()) return absl::DataLossError(absl::StrCat(path, ": read error"));
  return absl::OkStatus();
}

}  // namespace

absl::Status ForEachJsonLine(const std::string& path,
                             const std::function<absl::Status(const Struct&, const std::string&)>& visit) {
  return VisitJsonLines(path, visit, false);
}

absl::StatusOr<std::optional<Struct>> FirstJsonObject(const std::string& path) {
  std::optional<Struct> first;
  BANYAN_RETURN_IF_ERROR(VisitJsonLines(
      path,
      [&](const Struct& object, const std::string&) {
        first = object;
        return absl::OkStatus();
      },
      true));
  return first;
}

absl::StatusOr<std::string> JsonString(const Struct& object, const std::string& key, bool required,
                                       std::string_view where) {
  auto it = object.fields().find(key);
  if (it == object.fields().end()) {
    if (required) return BadLine(where, absl::StrCat("missing key \"", key, "\""));
    return std::string();
  }
  if (it->second.kind_case() != Value::kStringValue) {
    return BadLine(where, absl::StrCat("\"", key, "\" must be a string"));
  }
  return it->second.string_value();
}

absl::StatusOr<int64_t> JsonId(const Struct& object, const std::string& key, std::string_view where) {
  auto it = object.fields().find(key);
  if (it == object.fields().end()) return BadLine(where, absl::StrCat("missing key \"", key, "\""));
  const double v = it->second.number_value();
  if (it->second.kind_case() != Value::kNumberValue || !(v >= 0) || v != std::floor(v) || v > 9.0e15) {
    return BadLine(where, absl::StrCat("\"", key, "\" must be a non-negative integer"));
  }
  return static_cast<int64_t>(v);
}

}  // namespace banyan::samples

#include "samples/mbpp_eval/mbpp_dataset.h"

#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"

namespace banyan::samples {
namespace {

using google::protobuf::Struct;
using google::protobuf::Value;

absl::Status Bad(std::string_view where, std::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(std::string(where), ": ", std::string(what)));
}

absl::StatusOr<std::string> GetString(const Struct& s, const std::string& key, bool required,
                                      std::string_view where) {
  auto it = s.fields().find(key);
  if (it == s.fields().end()) {
    if (required) return Bad(where, absl::StrCat("missing key \"", key, "\""));
    return std::string();
  }
  if (it->second.kind_case() != Value::kStringValue) {
    return Bad(where, absl::StrCat("\"", key, "\" must be a string"));
  }
  return it->second.string_value();
}

}  // namespace

absl::StatusOr<MbppProblem> ParseMbppLine(std::string_view line, std::string_view where) {
  Struct object;
  google::protobuf::util::JsonParseOptions options;
  const auto status = google::protobuf::util::JsonStringToMessage(
      google::protobuf::StringPiece(line.data(), line.size()), &object, options);
  if (!status.ok()) {
    return Bad(where, absl::StrCat("not a JSON object (", std::string(status.message()), ")"));
  }
  MbppProblem p;
  auto id = object.fields().find("task_id");
  if (id == object.fields().end()) return Bad(where, "missing key \"task_id\"");
  const double v = id->second.number_value();
  if (id->second.kind_case() != Value::kNumberValue || !(v >= 0) || v != std::floor(v) ||
      v > 9.0e15) {
    return Bad(where, "\"task_id\" must be a non-negative integer");
  }
  p.task_id = static_cast<int64_t>(v);
  absl::StatusOr<std::string> text = GetString(object, "text", true, where);
  if (!text.ok()) return text.status();
  if (text->empty()) return Bad(where, "\"text\" is empty");
  p.text = std::move(*text);
  absl::StatusOr<std::string> code = GetString(object, "code", false, where);
  if (!code.ok()) return code.status();
  p.code = std::move(*code);
  absl::StatusOr<std::string> setup = GetString(object, "test_setup_code", false, where);
  if (!setup.ok()) return setup.status();
  p.setup = std::move(*setup);
  auto tests = object.fields().find("test_list");
  if (tests == object.fields().end()) return Bad(where, "missing key \"test_list\"");
  if (tests->second.kind_case() != Value::kListValue ||
      tests->second.list_value().values_size() == 0) {
    return Bad(where, "\"test_list\" must be a non-empty list of strings");
  }
  for (const Value& t : tests->second.list_value().values()) {
    if (t.kind_case() != Value::kStringValue || t.string_value().empty()) {
      return Bad(where, "\"test_list\" must be a non-empty list of strings");
    }
    p.tests.push_back(t.string_value());
  }
  return p;
}

absl::StatusOr<std::vector<MbppProblem>> LoadMbpp(const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    const int err = errno;
    if (err == ENOENT) return absl::NotFoundError(absl::StrCat(path, ": no such file"));
    return absl::PermissionDeniedError(absl::StrCat(path, ": cannot read (", std::strerror(err), ")"));
  }
  std::vector<MbppProblem> problems;
  std::set<int64_t> ids;
  std::string line;
  int64_t number = 0;
  while (std::getline(in, line)) {
    ++number;
    const std::string where = absl::StrCat(path, ":", number);
    std::string_view trimmed = line;
    while (!trimmed.empty() && (trimmed.back() == '\r' || trimmed.back() == ' ')) {
      trimmed.remove_suffix(1);
    }
    if (trimmed.empty()) continue;
    absl::StatusOr<MbppProblem> p = ParseMbppLine(trimmed, where);
    if (!p.ok()) return p.status();
    if (!ids.insert(p->task_id).second) {
      return Bad(where, absl::StrCat("task_id ", p->task_id, " appears twice"));
    }
    problems.push_back(std::move(*p));
  }
  if (in.bad()) return absl::DataLossError(absl::StrCat(path, ": read error"));
  if (problems.empty()) return absl::FailedPreconditionError(absl::StrCat(path, ": no problems"));
  return problems;
}

std::string TestProgram(const MbppProblem& problem, std::string_view candidate) {
  std::string program = problem.setup;
  if (!program.empty()) program += "\n";
  absl::StrAppend(&program, std::string(candidate), "\n\n");
  for (const std::string& t : problem.tests) absl::StrAppend(&program, t, "\n");
  return program;
}

}  // namespace banyan::samples

#include "samples/code_eval/mbpp_dataset.h"

#include <set>

#include "absl/strings/str_cat.h"
#include "banyan/status_macros.h"
#include "samples/code_eval/jsonl.h"

namespace banyan::samples {
namespace {

using google::protobuf::Struct;
using google::protobuf::Value;

absl::StatusOr<MbppProblem> ParseMbppObject(const Struct& object, std::string_view where) {
  MbppProblem p;
  BANYAN_ASSIGN_OR_RETURN(p.task_id, JsonId(object, "task_id", where));
  BANYAN_ASSIGN_OR_RETURN(p.text, JsonString(object, "text", true, where));
  if (p.text.empty()) return BadLine(where, "\"text\" is empty");
  BANYAN_ASSIGN_OR_RETURN(p.code, JsonString(object, "code", false, where));
  BANYAN_ASSIGN_OR_RETURN(p.setup, JsonString(object, "test_setup_code", false, where));
  auto tests = object.fields().find("test_list");
  if (tests == object.fields().end()) return BadLine(where, "missing key \"test_list\"");
  if (tests->second.kind_case() != Value::kListValue || tests->second.list_value().values_size() == 0) {
    return BadLine(where, "\"test_list\" must be a non-empty list of strings");
  }
  for (const Value& t : tests->second.list_value().values()) {
    if (t.kind_case() != Value::kStringValue || t.string_value().empty()) {
      return BadLine(where, "\"test_list\" must be a non-empty list of strings");
    }
    p.tests.push_back(t.string_value());
  }
  return p;
}

}  // namespace

absl::StatusOr<MbppProblem> ParseMbppLine(std::string_view line, std::string_view where) {
  BANYAN_ASSIGN_OR_RETURN(const Struct object, ParseJsonObject(line, where));
  return ParseMbppObject(object, where);
}

absl::StatusOr<std::vector<MbppProblem>> LoadMbpp(const std::string& path) {
  std::vector<MbppProblem> problems;
  std::set<int64_t> ids;
  BANYAN_RETURN_IF_ERROR(ForEachJsonLine(path, [&](const Struct& object, const std::string& where) {
    BANYAN_ASSIGN_OR_RETURN(MbppProblem p, ParseMbppObject(object, where));
    if (!ids.insert(p.task_id).second) return BadLine(where, absl::StrCat("task_id ", p.task_id, " appears twice"));
    problems.push_back(std::move(p));
    return absl::OkStatus();
  }));
  if (problems.empty()) return absl::FailedPreconditionError(absl::StrCat(path, ": no problems"));
  return problems;
}

search::CodeTests MbppTests(const MbppProblem& problem) {
  search::CodeTests tests;
  tests.style = search::TestStyle::kAsserts;
  tests.setup = problem.setup;
  tests.asserts = problem.tests;
  return tests;
}

}  // namespace banyan::samples

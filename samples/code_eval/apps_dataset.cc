#include "samples/code_eval/apps_dataset.h"

#include <set>

#include "absl/strings/str_cat.h"
#include "google/protobuf/util/json_util.h"
#include "banyan/status_macros.h"
#include "samples/code_eval/jsonl.h"

namespace banyan::samples {
namespace {

using google::protobuf::Struct;
using google::protobuf::Value;

// The first program of `solutions` (a string holding a JSON list of strings).
absl::StatusOr<std::string> FirstSolution(const Struct& object, std::string_view where) {
  BANYAN_ASSIGN_OR_RETURN(const std::string text, JsonString(object, "solutions", false, where));
  if (text.empty()) return std::string();
  Value list;
  const auto parsed = google::protobuf::util::JsonStringToMessage(
      google::protobuf::StringPiece(text.data(), text.size()), &list);
  if (!parsed.ok() || list.kind_case() != Value::kListValue) {
    return BadLine(where, "\"solutions\" must be a string holding a JSON list of programs");
  }
  for (const Value& v : list.list_value().values()) {
    if (v.kind_case() != Value::kStringValue) {
      return BadLine(where, "\"solutions\" must be a string holding a JSON list of programs");
    }
  }
  return list.list_value().values_size() > 0 ? list.list_value().values(0).string_value() : std::string();
}

// Whether the tests' JSON names a function (call-based).
absl::StatusOr<bool> CallBased(const std::string& cases_json, std::string_view where) {
  BANYAN_ASSIGN_OR_RETURN(const Struct spec, ParseJsonObject(cases_json, absl::StrCat(std::string(where), ": input_output")));
  return spec.fields().contains("fn_name");
}

}  // namespace

absl::StatusOr<AppsDataset> LoadApps(const std::string& path) {
  AppsDataset dataset;
  std::set<int64_t> ids;
  BANYAN_RETURN_IF_ERROR(ForEachJsonLine(path, [&](const Struct& object, const std::string& where) {
    AppsProblem p;
    BANYAN_ASSIGN_OR_RETURN(p.problem_id, JsonId(object, "problem_id", where));
    if (!ids.insert(p.problem_id).second) {
      return BadLine(where, absl::StrCat("problem_id ", p.problem_id, " appears twice"));
    }
    BANYAN_ASSIGN_OR_RETURN(p.question, JsonString(object, "question", true, where));
    if (p.question.empty()) return BadLine(where, "\"question\" is empty");
    BANYAN_ASSIGN_OR_RETURN(p.starter_code, JsonString(object, "starter_code", false, where));
    BANYAN_ASSIGN_OR_RETURN(p.difficulty, JsonString(object, "difficulty", false, where));
    BANYAN_ASSIGN_OR_RETURN(p.reference, FirstSolution(object, where));
    auto io = object.fields().find("input_output");
    if (io != object.fields().end() && io->second.kind_case() != Value::kStringValue) {
      return BadLine(where, "\"input_output\" must be a string holding the tests' JSON (as APPS writes it)");
    }
    if (io == object.fields().end() || io->second.string_value().empty()) {
      ++dataset.skipped_without_tests;
      return absl::OkStatus();
    }
    p.tests.cases_json = io->second.string_value();
    BANYAN_ASSIGN_OR_RETURN(const bool call, CallBased(p.tests.cases_json, where));
    p.tests.style = call ? search::TestStyle::kCall : search::TestStyle::kStdio;
    if (absl::Status s = search::ValidateCodeTests(p.tests); !s.ok()) {
      return BadLine(where, absl::StrCat("input_output: ", s.message()));
    }
    dataset.problems.push_back(std::move(p));
    return absl::OkStatus();
  }));
  if (dataset.problems.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat(path, ": no problem with tests (", dataset.skipped_without_tests, " without)"));
  }
  return dataset;
}

}  // namespace banyan::samples

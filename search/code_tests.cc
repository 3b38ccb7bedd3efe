#include "search/code_tests.h"

#include <cmath>
#include <random>

#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "banyan/status_macros.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "sdk/base/absl_string_view.h"

namespace banyan::search {
namespace {

using google::protobuf::ListValue;
using google::protobuf::Struct;
using google::protobuf::Value;

// The checking program; @NAME@ marks what HarnessProgram fills in.
constexpr char kHarness[] =
#include "search/code_tests_harness.py.inc"
    ;

absl::Status Bad(std::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("code tests: ", AsAbsl(what)));
}

std::string_view StyleName(TestStyle style) {
  switch (style) {
    case TestStyle::kAsserts: return "asserts";
    case TestStyle::kStdio: return "stdio";
    case TestStyle::kCall: return "call";
  }
  return "asserts";
}

// A string, or (kStdio's lines) a list of strings.
bool IsTextOrLines(const Value& v) {
  if (v.kind_case() == Value::kStringValue) return true;
  if (v.kind_case() != Value::kListValue) return false;
  for (const Value& line : v.list_value().values()) {
    if (line.kind_case() != Value::kStringValue) return false;
  }
  return true;
}

absl::StatusOr<const ListValue*> CaseList(const Struct& spec, const std::string& key) {
  auto it = spec.fields().find(key);
  if (it == spec.fields().end() || it->second.kind_case() != Value::kListValue) {
    return Bad(absl::StrCat("cases_json needs a list \"", key, "\""));
  }
  return &it->second.list_value();
}

// The cases of a kStdio / kCall spec, checked; its case count.
absl::StatusOr<int32_t> ValidateCases(const CodeTests& tests) {
  Struct spec;
  const auto parsed = google::protobuf::util::JsonStringToMessage(
      google::protobuf::StringPiece(tests.cases_json.data(), tests.cases_json.size()), &spec);
  if (!parsed.ok()) {
    return Bad(absl::StrCat("cases_json is not a JSON object (", std::string(parsed.message()), ")"));
  }
  BANYAN_ASSIGN_OR_RETURN(const ListValue* inputs, CaseList(spec, "inputs"));
  BANYAN_ASSIGN_OR_RETURN(const ListValue* outputs, CaseList(spec, "outputs"));
  if (inputs->values_size() == 0 || inputs->values_size() != outputs->values_size()) {
    return Bad(absl::StrCat("cases_json has ", inputs->values_size(), " inputs and ",
                            outputs->values_size(), " outputs (need the same number, at least 1)"));
  }
  if (tests.style == TestStyle::kCall) {
    auto name = spec.fields().find("fn_name");
    if (name == spec.fields().end() || name->second.kind_case() != Value::kStringValue ||
        name->second.string_value().empty()) {
      return Bad("call-based cases need a non-empty string \"fn_name\"");
    }
  } else {
    for (int i = 0; i < inputs->values_size(); ++i) {
      if (!IsTextOrLines(inputs->values(i)) || !IsTextOrLines(outputs->values(i))) {
        return Bad(absl::StrCat("standard-input case ", i, ": input and output must be text (a string or a list of lines)"));
      }
    }
  }
  return inputs->values_size();
}

// ValidateCodeTests and CaseCount in one pass (cases_json parsed once).
absl::StatusOr<int32_t> ValidatedCaseCount(const CodeTests& tests) {
  if (!(tests.case_seconds > 0) || !std::isfinite(tests.case_seconds)) {
    return Bad("case_seconds must be positive");
  }
  if (tests.style != TestStyle::kAsserts) return ValidateCases(tests);
  if (tests.asserts.empty()) return Bad("no asserts");
  for (const std::string& a : tests.asserts) {
    if (a.empty()) return Bad("an assert is empty");
  }
  return static_cast<int32_t>(tests.asserts.size());
}

std::string Quoted(std::string_view text) { return absl::StrCat("\"", AsAbsl(text), "\""); }

std::string Encoded(std::string_view text) { return Quoted(absl::Base64Escape(AsAbsl(text))); }

std::string NewNonce() {
  thread_local std::mt19937_64 rng(std::random_device{}());
  return absl::StrFormat("%016x", rng());
}

// "banyan-harness <nonce> P/T" on the last line that carries the nonce.
bool ReadSummary(std::string_view output, std::string_view nonce, int32_t& passed, int32_t& total) {
  const std::string prefix = absl::StrCat("banyan-harness ", AsAbsl(nonce), " ");
  bool found = false;
  for (absl::string_view line : absl::StrSplit(AsAbsl(output), '\n')) {
    if (!absl::ConsumePrefix(&line, prefix)) continue;
    const std::vector<absl::string_view> parts = absl::StrSplit(line, '/');
    int32_t p = 0, t = 0;
    if (parts.size() == 2 && absl::SimpleAtoi(parts[0], &p) && absl::SimpleAtoi(parts[1], &t)) {
      passed = p;
      total = t;
      found = true;
    }
  }
  return found;
}

}  // namespace

absl::Status ValidateCodeTests(const CodeTests& tests) { return ValidatedCaseCount(tests).status(); }

int32_t CaseCount(const CodeTests& tests) { return ValidatedCaseCount(tests).value_or(0); }

std::string HarnessProgram(const CodeTests& tests, std::string_view candidate, std::string_view nonce) {
  std::string asserts = "[";
  for (const std::string& a : tests.asserts) absl::StrAppend(&asserts, Encoded(a), ", ");
  asserts += "]";
  const std::string spec = tests.style == TestStyle::kAsserts ? "{}" : tests.cases_json;
  return absl::StrReplaceAll(kHarness, {{"@STYLE@", Quoted(StyleName(tests.style))},
                                        {"@NONCE@", Quoted(nonce)},
                                        {"@CASE_SECONDS@", absl::StrFormat("%.17g", tests.case_seconds)},
                                        {"@SOURCE@", Encoded(candidate)},
                                        {"@SETUP@", Encoded(tests.setup)},
                                        {"@ASSERTS@", asserts},
                                        {"@SPEC@", Encoded(spec)}});
}

ExecutionLimits LimitsForTests(const CodeTests& tests, ExecutionLimits base) {
  const double cases = CaseCount(tests) * tests.case_seconds;
  base.wall_seconds += cases;
  base.cpu_seconds += static_cast<int32_t>(std::ceil(cases));
  return base;
}

absl::StatusOr<CheckResult> CheckCandidate(const CodeExecutor& executor, const CodeTests& tests,
                                           std::string_view candidate) {
  CheckResult result;
  BANYAN_ASSIGN_OR_RETURN(result.cases_total, ValidatedCaseCount(tests));
  const std::string nonce = NewNonce();
  BANYAN_ASSIGN_OR_RETURN(result.run, executor.Run(HarnessProgram(tests, candidate, nonce)));
  int32_t passed = 0, total = 0;
  const bool summary = ReadSummary(result.run.output, nonce, passed, total);
  if (summary && total == result.cases_total) result.cases_passed = passed;
  switch (result.run.outcome) {
    case ExecutionOutcome::kTimeout:
    case ExecutionOutcome::kCrashed:
      result.outcome = result.run.outcome;
      break;
    case ExecutionOutcome::kPassed:
    case ExecutionOutcome::kFailed:
      result.outcome = summary && total == result.cases_total && passed == total &&
                               result.run.outcome == ExecutionOutcome::kPassed
                           ? ExecutionOutcome::kPassed
                           : ExecutionOutcome::kFailed;
      break;
  }
  return result;
}

}  // namespace banyan::search

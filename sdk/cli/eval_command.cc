// `banyan eval`: MBPP / APPS style code sampling with two-level KV sharing,
// sandboxed checks and pass@k (samples/code_eval: code_eval.h has the
// pipeline, search/code_tests.h the checks). The same as the `code_eval`
// program.
//
//   banyan eval [--data FILE.jsonl] [--format auto|mbpp|apps] [--difficulty D]
//               [--n N] [--k 1,2] [--max-tokens M] [--temperature T] [--seed S]
//               [--limit P] [--parallel P] [--jobs J] [--model PATH] [--device D]
//               [--report OUT.jsonl] [--check-reference] [--verbose]
//
// --format auto reads the first record: "problem_id" means APPS, else MBPP.
// --check-reference runs each task's reference solution against its tests
// (no model): a dataset sanity check. --report writes one JSON line per
// sample (task, outcome, cases passed, tokens, code), atomically.
#include <cstdio>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "banyan/engine.h"
#include "banyan/status_macros.h"
#include "samples/code_eval/code_eval.h"
#include "samples/code_eval/jsonl.h"
#include "samples/code_eval/shipped_data.h"
#include "sdk/cli/args.h"
#include "sdk/cli/command.h"
#include "sdk/cli/json_text.h"

namespace banyan::cli {
namespace {

using banyan::samples::CodeEvalOptions;
using banyan::samples::CodeEvalReport;
using banyan::samples::CodeSuite;
using banyan::search::OutcomeName;

absl::StatusOr<std::string> Format(const std::string& data, const std::string& format) {
  if (format == "mbpp" || format == "apps") return format;
  if (format != "auto") return absl::InvalidArgumentError("--format: auto, mbpp or apps");
  BANYAN_ASSIGN_OR_RETURN(const auto first, banyan::samples::FirstJsonObject(data));
  return first.has_value() && first->fields().contains("problem_id") ? "apps" : "mbpp";
}

absl::StatusOr<CodeSuite> LoadSuite(const banyan::cli::Args& args) {
  const std::string data = args.GetString("data", banyan::samples::ShippedMbppTiny());
  BANYAN_ASSIGN_OR_RETURN(const std::string format, Format(data, args.GetString("format", "auto")));
  CodeSuite suite;
  if (format == "mbpp") {
    BANYAN_ASSIGN_OR_RETURN(auto problems, banyan::samples::LoadMbpp(data));
    suite = banyan::samples::MbppSuite(problems);
  } else {
    BANYAN_ASSIGN_OR_RETURN(banyan::samples::AppsDataset apps, banyan::samples::LoadApps(data));
    const std::string difficulty = args.GetString("difficulty");
    std::erase_if(apps.problems, [&](const auto& p) { return !difficulty.empty() && p.difficulty != difficulty; });
    if (apps.skipped_without_tests > 0) {
      std::cerr << "code_eval: " << apps.skipped_without_tests << " problems without tests skipped\n";
    }
    suite = banyan::samples::AppsSuite(apps.problems);
  }
  BANYAN_ASSIGN_OR_RETURN(const int64_t limit, args.GetInt("limit", 0));
  if (limit > 0 && static_cast<size_t>(limit) < suite.tasks.size()) suite.tasks.resize(limit);
  if (suite.tasks.empty()) return absl::FailedPreconditionError(absl::StrCat(data, ": no task selected"));
  return suite;
}

absl::Status CheckReferences(const CodeSuite& suite) {
  for (const auto& task : suite.tasks) {
    if (task.reference.empty()) {
      std::cout << "task " << task.id << ": no reference\n";
      continue;
    }
    const banyan::search::CodeExecutor executor(banyan::search::LimitsForTests(
        task.tests, banyan::search::ExecutionLimits{.wall_seconds = 10, .cpu_seconds = 10}));
    BANYAN_ASSIGN_OR_RETURN(auto r, banyan::search::CheckCandidate(executor, task.tests, task.reference));
    std::cout << absl::StrFormat("task %d: %s (%d/%d cases)\n", task.id, OutcomeName(r.outcome), r.cases_passed,
                                 r.cases_total);
  }
  return absl::OkStatus();
}

absl::StatusOr<CodeEvalOptions> Options(const banyan::cli::Args& args) {
  CodeEvalOptions o;
  BANYAN_ASSIGN_OR_RETURN(const int64_t n, args.GetInt("n", 4));
  o.n = static_cast<int32_t>(n);
  o.ks.clear();
  for (absl::string_view piece : absl::StrSplit(args.GetString("k", "1"), ',')) {
    int32_t k = 0;
    if (!absl::SimpleAtoi(piece, &k)) {
      return absl::InvalidArgumentError(absl::StrCat("--k: not a number: ", std::string(piece)));
    }
    o.ks.push_back(k);
  }
  BANYAN_ASSIGN_OR_RETURN(const int64_t max_tokens, args.GetInt("max-tokens", 96));
  o.max_tokens = static_cast<int32_t>(max_tokens);
  BANYAN_ASSIGN_OR_RETURN(const double temperature, args.GetDouble("temperature", 0.8));
  o.sampling.temperature = static_cast<float>(temperature);
  BANYAN_ASSIGN_OR_RETURN(const int64_t seed, args.GetInt("seed", 0));
  o.seed = static_cast<uint64_t>(seed);
  BANYAN_ASSIGN_OR_RETURN(const int64_t parallel, args.GetInt("parallel", o.parallel_problems));
  o.parallel_problems = static_cast<int32_t>(parallel);
  BANYAN_ASSIGN_OR_RETURN(const int64_t jobs, args.GetInt("jobs", 0));
  o.jobs = static_cast<int32_t>(jobs);
  return o;
}

// One JSON line per sample (keys in a fixed order), written to a temporary file and renamed over `path`.
absl::Status WriteReport(const std::string& path, const CodeEvalReport& report) {
  const std::string partial = path + ".partial";
  {
    std::ofstream out(partial, std::ios::trunc);
    if (!out) return absl::PermissionDeniedError(absl::StrCat(partial, ": cannot write"));
    for (const auto& p : report.problems) {
      for (size_t s = 0; s < p.samples.size(); ++s) {
        const auto& sample = p.samples[s];
        out << absl::StrFormat(
                   "{\"task_id\": %d, \"sample\": %d, \"outcome\": %s, \"cases_passed\": %d, "
                   "\"cases_total\": %d, \"tokens\": %d, \"code\": %s}",
                   p.task_id, s, JsonString(OutcomeName(sample.outcome)), sample.cases_passed, sample.cases_total,
                   sample.tokens, JsonString(sample.code))
            << "\n";
      }
    }
    if (!out.flush()) return absl::DataLossError(absl::StrCat(partial, ": write failed"));
  }
  if (std::rename(partial.c_str(), path.c_str()) != 0) {
    return absl::PermissionDeniedError(absl::StrCat(path, ": cannot rename the report into place"));
  }
  return absl::OkStatus();
}

void Print(const CodeEvalReport& report, const CodeEvalOptions& o, bool verbose) {
  for (const auto& p : report.problems) {
    std::cout << absl::StrFormat("task %d: %d/%d passed", p.task_id, p.passed, o.n);
    for (size_t j = 0; j < o.ks.size(); ++j) std::cout << absl::StrFormat("  pass@%d %.3f", o.ks[j], p.pass_at_k[j]);
    std::cout << absl::StrFormat("  cases %.3f\n", p.case_fraction);
    if (verbose) {
      for (const auto& s : p.samples) {
        std::cout << absl::StrFormat("  [%s %d/%d] %s\n", OutcomeName(s.outcome), s.cases_passed, s.cases_total, s.code);
      }
    }
  }
  std::cout << "mean:";
  for (size_t j = 0; j < o.ks.size(); ++j) {
    std::cout << absl::StrFormat("  pass@%d %.3f", o.ks[j], report.mean_pass_at_k[j]);
  }
  std::cout << absl::StrFormat(
      "  cases %.3f\n%d problems x %d samples: %d tokens generated in %.2f s; prompts prefilled %d tokens "
      "for %d prefix-token reads (sharing x%.1f); checks %.2f s (overlapped); wall %.2f s\n",
      report.mean_case_fraction, report.problems.size(), o.n, report.tokens_generated, report.generate_seconds,
      report.prompt_tokens, report.shared_tokens,
      report.prompt_tokens > 0 ? static_cast<double>(report.shared_tokens) / report.prompt_tokens : 0.0,
      report.execute_seconds, report.wall_seconds);
}

}  // namespace

absl::Status RunEval(const std::vector<std::string>& argv) {
  BANYAN_ASSIGN_OR_RETURN(banyan::cli::Args args, ParseFlags("eval", argv));
  BANYAN_ASSIGN_OR_RETURN(const CodeSuite suite, LoadSuite(args));
  if (args.GetBool("check-reference")) return CheckReferences(suite);
  BANYAN_ASSIGN_OR_RETURN(const CodeEvalOptions o, Options(args));
  banyan::EngineOptions eo;
  eo.model_path = args.GetString("model");
  eo.device = args.GetString("device", "auto");
  BANYAN_ASSIGN_OR_RETURN(auto engine, banyan::Engine::Create(eo));
  BANYAN_ASSIGN_OR_RETURN(const CodeEvalReport report, banyan::samples::EvaluateCode(*engine, suite, o));
  Print(report, o, args.GetBool("verbose"));
  if (const std::string path = args.GetString("report"); !path.empty()) {
    BANYAN_RETURN_IF_ERROR(WriteReport(path, report));
  }
  return absl::OkStatus();
}

}  // namespace banyan::cli

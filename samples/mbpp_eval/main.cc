// mbpp_eval: code sampling with two-level KV sharing and pass@k on the
// default model (CPU by default). See mbpp_eval.h.
//
//   mbpp_eval [--data FILE.jsonl] [--n N] [--k 1,2] [--max-tokens M]
//             [--temperature T] [--seed S] [--limit P] [--model PATH]
//             [--device D] [--check-reference] [--verbose]
//
// --check-reference runs each problem's reference solution against its tests
// (no model): a dataset sanity check.
#include <iostream>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "banyan/engine.h"
#include "banyan/status_macros.h"
#include "samples/mbpp_eval/mbpp_eval.h"
#include "sdk/cli/args.h"

namespace {

using banyan::samples::MbppProblem;

absl::Status Main(const std::vector<std::string>& argv) {
  BANYAN_ASSIGN_OR_RETURN(
      banyan::cli::Args args,
      banyan::cli::Args::Parse(argv,
                               {"data", "n", "k", "max-tokens", "temperature", "seed", "limit",
                                "model", "device"},
                               {"check-reference", "verbose"}));
  const std::string data =
      args.GetString("data", std::string(BANYAN_SOURCE_DIR) + "/samples/data/mbpp_tiny.jsonl");
  BANYAN_ASSIGN_OR_RETURN(std::vector<MbppProblem> problems, banyan::samples::LoadMbpp(data));
  BANYAN_ASSIGN_OR_RETURN(const int64_t limit, args.GetInt("limit", 0));
  if (limit > 0 && static_cast<size_t>(limit) < problems.size()) problems.resize(limit);

  if (args.GetBool("check-reference")) {
    const banyan::search::CodeExecutor executor;
    for (const MbppProblem& p : problems) {
      BANYAN_ASSIGN_OR_RETURN(banyan::search::ExecutionResult r,
                              executor.Run(banyan::samples::TestProgram(p, p.code)));
      std::cout << "task " << p.task_id << ": " << banyan::search::OutcomeName(r.outcome) << "\n";
    }
    return absl::OkStatus();
  }

  banyan::samples::MbppEvalOptions o;
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

  banyan::EngineOptions eo;
  eo.model_path = args.GetString("model");
  eo.device = args.GetString("device", "cpu");
  BANYAN_ASSIGN_OR_RETURN(auto engine, banyan::Engine::Create(eo));
  BANYAN_ASSIGN_OR_RETURN(banyan::samples::MbppReport report,
                          banyan::samples::EvaluateMbpp(*engine, problems, o));
  for (const auto& p : report.problems) {
    std::cout << absl::StrFormat("task %d: %d/%d passed", p.task_id, p.passed, o.n);
    for (size_t j = 0; j < o.ks.size(); ++j) {
      std::cout << absl::StrFormat("  pass@%d %.3f", o.ks[j], p.pass_at_k[j]);
    }
    std::cout << "\n";
    if (args.GetBool("verbose")) {
      for (const auto& s : p.samples) {
        std::cout << "  [" << banyan::search::OutcomeName(s.outcome) << "] " << s.code << "\n";
      }
    }
  }
  std::cout << "mean:";
  for (size_t j = 0; j < o.ks.size(); ++j) {
    std::cout << absl::StrFormat("  pass@%d %.3f", o.ks[j], report.mean_pass_at_k[j]);
  }
  std::cout << absl::StrFormat(
      "\n%d problems x %d samples: %d tokens generated in %.2f s; prompts prefilled %d tokens "
      "for %d prefix-token reads (sharing x%.1f); execution %.2f s\n",
      report.problems.size(), o.n, report.tokens_generated, report.generate_seconds,
      report.prompt_tokens, report.shared_tokens,
      report.prompt_tokens > 0 ? static_cast<double>(report.shared_tokens) / report.prompt_tokens
                               : 0.0,
      report.execute_seconds);
  return absl::OkStatus();
}

}  // namespace

int main(int argc, char** argv) {
  const absl::Status status = Main(std::vector<std::string>(argv + 1, argv + argc));
  if (!status.ok()) {
    std::cerr << "mbpp_eval: " << status << "\n";
    return 1;
  }
  return 0;
}

// MBPP-style code evaluation on the engine with two-level KV sharing:
//
//   few-shot prompt (one branch, prefilled once)
//     -> one branch per problem (a Fork of it + the problem's text)
//          -> N samples (a Fork of the problem's branch, decoded together)
//
// Every problem runs on its own thread, so the samples of all problems decode
// in the same engine steps. Each sample's code (up to "[DONE]", code fences
// removed) runs with its problem's tests in search::CodeExecutor (a python3
// subprocess with rlimits and a timeout); pass@k is the unbiased estimator
// (search/pass_at_k.h) per problem, averaged over problems.
//
//   BANYAN_ASSIGN_OR_RETURN(auto problems, LoadMbpp("samples/data/mbpp_tiny.jsonl"));
//   MbppEvalOptions options;
//   options.n = 8;
//   options.ks = {1, 4};
//   BANYAN_ASSIGN_OR_RETURN(MbppReport report, EvaluateMbpp(*engine, problems, options));
//
// Errors: kInvalidArgument for bad options (n < 1, a k outside [1, n]); the
// engine's and the executor's statuses otherwise (every branch created is
// released first). Thread-safe: may run concurrently with other engine users.
#ifndef BANYAN_SAMPLES_MBPP_EVAL_MBPP_EVAL_H_
#define BANYAN_SAMPLES_MBPP_EVAL_MBPP_EVAL_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "banyan/engine.h"
#include "samples/mbpp_eval/mbpp_dataset.h"
#include "search/code_executor.h"

namespace banyan::samples {

struct MbppEvalOptions {
  int32_t n = 4;                 // samples per problem
  std::vector<int32_t> ks = {1};  // pass@k for each k (1 <= k <= n)
  int32_t max_tokens = 128;      // per sample
  SamplingOptions sampling = {.temperature = 0.8f};
  uint64_t seed = 0;
  search::ExecutionLimits limits = {.wall_seconds = 5.0, .cpu_seconds = 5};
};

struct SampleReport {
  std::string code;
  search::ExecutionOutcome outcome = search::ExecutionOutcome::kFailed;
  int32_t tokens = 0;
};

struct ProblemReport {
  int64_t task_id = 0;
  int32_t passed = 0;
  std::vector<double> pass_at_k;  // one per options.ks
  std::vector<SampleReport> samples;
};

struct MbppReport {
  std::vector<ProblemReport> problems;
  std::vector<double> mean_pass_at_k;  // one per options.ks
  int64_t tokens_generated = 0;
  int64_t prompt_tokens = 0;    // few-shot + every problem's own tokens (what was prefilled)
  // Prefix tokens summed over every sample: what prefilling each sample on its
  // own would have cost, against prompt_tokens with sharing.
  int64_t shared_tokens = 0;
  double generate_seconds = 0;
  double execute_seconds = 0;
};

std::string FewShotPrompt();
std::string ProblemPrompt(const MbppProblem& problem);
// The code in a completion: up to "[DONE]", inside ``` fences when there are
// some, trailing whitespace removed.
std::string ExtractCode(std::string_view completion);

absl::StatusOr<MbppReport> EvaluateMbpp(Engine& engine, const std::vector<MbppProblem>& problems,
                                        const MbppEvalOptions& options);

}  // namespace banyan::samples

#endif  // BANYAN_SAMPLES_MBPP_EVAL_MBPP_EVAL_H_

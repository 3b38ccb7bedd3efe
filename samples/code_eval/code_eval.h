// Code evaluation on the engine (MBPP / APPS style, pass@k) with two-level KV
// sharing:
//
//   few-shot prompt (one branch, prefilled once)
//     -> one branch per task (a Fork of it + the task's prompt)
//          -> N samples (a Fork of the task's branch, decoded together)
//
// Up to `parallel_problems` tasks generate at once, each on its own thread, so
// their samples decode in the same engine steps. As soon as a task's samples
// are generated their code (code_suite.h ExtractCode) is checked against the
// task's tests (search::CheckCandidate: a python3 subprocess with rlimits and
// timeouts) on a pool of `jobs` threads, while other tasks still decode.
// pass@k is the unbiased estimator (search/pass_at_k.h) per task, averaged
// over tasks; the case fraction (APPS's "test case average") is the share of
// a task's test cases its samples pass, averaged over samples, then tasks.
//
//   BANYAN_ASSIGN_OR_RETURN(auto problems, LoadMbpp("samples/data/mbpp_tiny.jsonl"));
//   CodeEvalOptions options;
//   options.n = 8;
//   options.ks = {1, 4};
//   BANYAN_ASSIGN_OR_RETURN(CodeEvalReport report, EvaluateCode(*engine, MbppSuite(problems), options));
//
// Errors: kInvalidArgument for bad options (n < 1, a k outside [1, n],
// parallel_problems < 1, jobs < 0) or tests search::ValidateCodeTests rejects;
// the engine's and the executor's statuses otherwise (every branch created is
// released first). Thread-safe: may run concurrently with other engine users.
#ifndef BANYAN_SAMPLES_CODE_EVAL_CODE_EVAL_H_
#define BANYAN_SAMPLES_CODE_EVAL_CODE_EVAL_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "banyan/engine.h"
#include "samples/code_eval/code_suite.h"
#include "search/code_executor.h"

namespace banyan::samples {

struct CodeEvalOptions {
  int32_t n = 4;                  // samples per task
  std::vector<int32_t> ks = {1};  // pass@k for each k (1 <= k <= n)
  int32_t max_tokens = 128;       // per sample
  SamplingOptions sampling = {.temperature = 0.8f};
  uint64_t seed = 0;
  // Each check's limits; its wall and CPU seconds grow by the task's case
  // count x CodeTests::case_seconds.
  search::ExecutionLimits limits = {.wall_seconds = 5.0, .cpu_seconds = 5};
  int32_t parallel_problems = 16;  // tasks generating at once
  int32_t jobs = 0;                // concurrent checks; 0: the machine's hardware threads
};

struct SampleReport {
  std::string code;
  search::ExecutionOutcome outcome = search::ExecutionOutcome::kFailed;
  int32_t tokens = 0;
  int32_t cases_passed = 0;
  int32_t cases_total = 0;
  double seconds = 0;  // the check's wall time
};

struct ProblemReport {
  int64_t task_id = 0;
  int32_t passed = 0;             // samples that passed every case
  std::vector<double> pass_at_k;  // one per options.ks
  double case_fraction = 0;       // mean over samples of cases passed / cases
  std::vector<SampleReport> samples;
};

struct CodeEvalReport {
  std::vector<ProblemReport> problems;  // the suite's task order
  std::vector<double> mean_pass_at_k;   // one per options.ks
  double mean_case_fraction = 0;
  int64_t tokens_generated = 0;
  int64_t prompt_tokens = 0;  // few-shot + every task's own tokens (what was prefilled)
  // Prefix tokens summed over every sample: what prefilling each sample on its
  // own would have cost, against prompt_tokens with sharing.
  int64_t shared_tokens = 0;
  double generate_seconds = 0;  // from the first fork to the last task generated
  double execute_seconds = 0;   // the checks' wall times summed (they overlap generation and each other)
  double wall_seconds = 0;      // the whole evaluation
};

absl::StatusOr<CodeEvalReport> EvaluateCode(Engine& engine, const CodeSuite& suite,
                                            const CodeEvalOptions& options);

}  // namespace banyan::samples

#endif  // BANYAN_SAMPLES_CODE_EVAL_CODE_EVAL_H_

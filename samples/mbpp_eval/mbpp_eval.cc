#include "samples/mbpp_eval/mbpp_eval.h"

#include <chrono>
#include <thread>

#include "absl/strings/str_cat.h"
#include "banyan/status_macros.h"
#include "sdk/base/rng.h"
#include "search/pass_at_k.h"

namespace banyan::samples {
namespace {

constexpr std::string_view kDone = "[DONE]";

std::string Task(std::string_view text, const std::vector<std::string>& tests) {
  std::string s = absl::StrCat("You are an expert Python programmer, and here is your task: ",
                               std::string(text), " Your code should pass these tests:\n\n");
  for (const std::string& t : tests) absl::StrAppend(&s, t, "\n");
  return s + "[BEGIN]\n";
}

double Seconds(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - since).count();
}

struct Generated {
  absl::Status status;
  std::vector<GenerateResult> samples;
  int64_t problem_tokens = 0;
};

// One problem: fork the few-shot branch, append the problem, fork N samples.
Generated GenerateProblem(Engine& engine, BranchId shots, const MbppProblem& p,
                          const MbppEvalOptions& o) {
  Generated g;
  absl::StatusOr<std::vector<BranchId>> forked = engine.Fork(shots, 1);
  if (!forked.ok()) {
    g.status = forked.status();
    return g;
  }
  const BranchId problem = (*forked)[0];
  const std::string text = ProblemPrompt(p);
  g.status = engine.Append(problem, Prompt::Text(text));
  if (g.status.ok()) {
    absl::StatusOr<std::vector<int32_t>> toks = engine.Tokenize(text);
    g.problem_tokens = toks.ok() ? static_cast<int64_t>(toks->size()) : 0;
    absl::StatusOr<std::vector<BranchId>> samples = engine.Fork(problem, o.n);
    if (!samples.ok()) {
      g.status = samples.status();
    } else {
      GenerateOptions gen;
      gen.sampling = o.sampling;
      gen.sampling.seed = Rng(o.seed).Derive(static_cast<uint64_t>(p.task_id)).Next();
      gen.max_tokens = o.max_tokens;
      gen.stop_strings = {std::string(kDone)};
      std::vector<absl::StatusOr<GenerateResult>> results = engine.GenerateMany(*samples, gen);
      for (auto& r : results) {
        if (!r.ok()) {
          if (g.status.ok()) g.status = r.status();
          continue;
        }
        g.samples.push_back(std::move(*r));
      }
      for (BranchId b : *samples) engine.Release(b).IgnoreError();
    }
  }
  engine.Release(problem).IgnoreError();
  return g;
}

}  // namespace

std::string FewShotPrompt() {
  // One worked example (not one of the dataset's problems).
  return Task("Write a function min_of_two(a, b) that returns the smaller of two numbers.",
              {"assert min_of_two(3, 7) == 3", "assert min_of_two(-2, -5) == -5"}) +
         "def min_of_two(a, b):\n    return a if a < b else b\n[DONE]\n\n";
}

std::string ProblemPrompt(const MbppProblem& problem) { return Task(problem.text, problem.tests); }

std::string ExtractCode(std::string_view completion) {
  std::string_view code = completion;
  if (size_t done = code.find(kDone); done != std::string_view::npos) code = code.substr(0, done);
  if (size_t open = code.find("```"); open != std::string_view::npos) {
    size_t start = code.find('\n', open);
    start = start == std::string_view::npos ? code.size() : start + 1;
    const size_t close = code.find("```", start);
    code = code.substr(start, close == std::string_view::npos ? std::string_view::npos
                                                               : close - start);
  }
  while (!code.empty() && (code.back() == ' ' || code.back() == '\n' || code.back() == '\r' ||
                           code.back() == '\t')) {
    code.remove_suffix(1);
  }
  return std::string(code);
}

absl::StatusOr<MbppReport> EvaluateMbpp(Engine& engine, const std::vector<MbppProblem>& problems,
                                        const MbppEvalOptions& o) {
  if (o.n < 1) return absl::InvalidArgumentError("mbpp: n must be >= 1");
  for (int32_t k : o.ks) {
    if (k < 1 || k > o.n) {
      return absl::InvalidArgumentError(absl::StrCat("mbpp: k = ", k, " is outside [1, n = ", o.n, "]"));
    }
  }
  MbppReport report;
  const std::string shots_text = FewShotPrompt();
  BANYAN_ASSIGN_OR_RETURN(const BranchId shots, engine.NewBranch(Prompt::Text(shots_text)));
  BANYAN_ASSIGN_OR_RETURN(const std::vector<int32_t> shot_tokens, engine.Tokenize(shots_text));

  // Generation: one thread per problem, so every sample decodes in the same steps.
  const auto gen_start = std::chrono::steady_clock::now();
  std::vector<Generated> generated(problems.size());
  {
    std::vector<std::thread> threads;
    for (size_t i = 0; i < problems.size(); ++i) {
      threads.emplace_back([&, i] { generated[i] = GenerateProblem(engine, shots, problems[i], o); });
    }
    for (std::thread& t : threads) t.join();
  }
  report.generate_seconds = Seconds(gen_start);
  engine.Release(shots).IgnoreError();
  for (const Generated& g : generated) BANYAN_RETURN_IF_ERROR(g.status);

  report.prompt_tokens = static_cast<int64_t>(shot_tokens.size());
  const search::CodeExecutor executor(o.limits);
  const auto exec_start = std::chrono::steady_clock::now();
  report.mean_pass_at_k.assign(o.ks.size(), 0.0);
  for (size_t i = 0; i < problems.size(); ++i) {
    const MbppProblem& p = problems[i];
    const Generated& g = generated[i];
    report.prompt_tokens += g.problem_tokens;
    report.shared_tokens += (static_cast<int64_t>(shot_tokens.size()) + g.problem_tokens) * o.n;
    ProblemReport pr;
    pr.task_id = p.task_id;
    for (const GenerateResult& r : g.samples) {
      SampleReport s;
      s.code = ExtractCode(r.text);
      s.tokens = static_cast<int32_t>(r.tokens.size());
      report.tokens_generated += s.tokens;
      BANYAN_ASSIGN_OR_RETURN(search::ExecutionResult run, executor.Run(TestProgram(p, s.code)));
      s.outcome = run.outcome;
      if (run.outcome == search::ExecutionOutcome::kPassed) ++pr.passed;
      pr.samples.push_back(std::move(s));
    }
    for (size_t j = 0; j < o.ks.size(); ++j) {
      BANYAN_ASSIGN_OR_RETURN(double v, search::PassAtK(o.n, pr.passed, o.ks[j]));
      pr.pass_at_k.push_back(v);
      report.mean_pass_at_k[j] += v / static_cast<double>(problems.size());
    }
    report.problems.push_back(std::move(pr));
  }
  report.execute_seconds = Seconds(exec_start);
  return report;
}

}  // namespace banyan::samples

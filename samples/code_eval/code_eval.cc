#include "samples/code_eval/code_eval.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "banyan/status_macros.h"
#include "sdk/base/rng.h"
#include "search/code_tests.h"
#include "search/pass_at_k.h"

namespace banyan::samples {
namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point since) { return std::chrono::duration<double>(Clock::now() - since).count(); }

struct Generated {
  absl::Status status;
  std::vector<GenerateResult> samples;
  int64_t task_tokens = 0;
};

// One task: fork the few-shot branch, append the task, fork N samples.
Generated GenerateTask(Engine& engine, BranchId shots, const CodeSuite& suite, const CodeTask& task,
                       const CodeEvalOptions& o) {
  Generated g;
  absl::StatusOr<std::vector<BranchId>> forked = engine.Fork(shots, 1);
  if (!forked.ok()) {
    g.status = forked.status();
    return g;
  }
  const BranchId branch = (*forked)[0];
  g.status = engine.Append(branch, Prompt::Text(task.prompt));
  if (g.status.ok()) {
    absl::StatusOr<std::vector<int32_t>> toks = engine.Tokenize(task.prompt);
    g.task_tokens = toks.ok() ? static_cast<int64_t>(toks->size()) : 0;
    absl::StatusOr<std::vector<BranchId>> samples = engine.Fork(branch, o.n);
    if (!samples.ok()) {
      g.status = samples.status();
    } else {
      GenerateOptions gen;
      gen.sampling = o.sampling;
      gen.sampling.seed = Rng(o.seed).Derive(static_cast<uint64_t>(task.id)).Next();
      gen.max_tokens = o.max_tokens;
      gen.stop_strings = suite.stop_strings;
      for (absl::StatusOr<GenerateResult>& r : engine.GenerateMany(*samples, gen)) {
        if (!r.ok()) {
          if (g.status.ok()) g.status = r.status();
          continue;
        }
        g.samples.push_back(std::move(*r));
      }
      for (BranchId b : *samples) engine.Release(b).IgnoreError();
    }
  }
  engine.Release(branch).IgnoreError();
  return g;
}

// Samples whose generation is done and whose checks have not started. (A
// std::mutex, not absl::Mutex: ThreadSanitizer sees Debian's Abseil as
// uninstrumented, as sdk/engine/engine_mutex.h explains.)
class CheckQueue {
 public:
  explicit CheckQueue(int64_t tasks) : tasks_left_(tasks) {}

  void TaskGenerated(size_t task, size_t samples) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (size_t s = 0; s < samples; ++s) ready_.emplace_back(task, s);
      --tasks_left_;
      last_generated_ = Clock::now();
    }
    changed_.notify_all();
  }

  // The next (task, sample), or false once every task is generated and checked out.
  bool Next(std::pair<size_t, size_t>& item) {
    std::unique_lock<std::mutex> lock(mu_);
    changed_.wait(lock, [&] { return !ready_.empty() || tasks_left_ == 0; });
    if (ready_.empty()) return false;
    item = ready_.front();
    ready_.pop_front();
    return true;
  }

  // When the last task finished generating (`start` before any did).
  Clock::time_point LastGenerated(Clock::time_point start) {
    std::lock_guard<std::mutex> lock(mu_);
    return std::max(start, last_generated_);
  }

 private:
  std::mutex mu_;
  std::condition_variable changed_;
  std::deque<std::pair<size_t, size_t>> ready_;  // guarded by mu_
  int64_t tasks_left_;                            // guarded by mu_
  Clock::time_point last_generated_{};            // guarded by mu_
};

absl::Status Validate(const CodeSuite& suite, const CodeEvalOptions& o) {
  if (o.n < 1) return absl::InvalidArgumentError("code eval: n must be >= 1");
  for (int32_t k : o.ks) {
    if (k < 1 || k > o.n) {
      return absl::InvalidArgumentError(absl::StrCat("code eval: k = ", k, " is outside [1, n = ", o.n, "]"));
    }
  }
  if (o.parallel_problems < 1) return absl::InvalidArgumentError("code eval: parallel_problems must be >= 1");
  if (o.jobs < 0) return absl::InvalidArgumentError("code eval: jobs must be >= 0");
  for (const CodeTask& task : suite.tasks) {
    if (absl::Status s = search::ValidateCodeTests(task.tests); !s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("code eval: task ", task.id, ": ", s.message()));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<CodeEvalReport> EvaluateCode(Engine& engine, const CodeSuite& suite, const CodeEvalOptions& o) {
  BANYAN_RETURN_IF_ERROR(Validate(suite, o));
  const auto start = Clock::now();
  CodeEvalReport report;
  const size_t tasks = suite.tasks.size();
  BANYAN_ASSIGN_OR_RETURN(const BranchId shots, engine.NewBranch(Prompt::Text(suite.few_shot)));
  absl::StatusOr<std::vector<int32_t>> shot_tokens = engine.Tokenize(suite.few_shot);
  if (!shot_tokens.ok()) {
    engine.Release(shots).IgnoreError();
    return shot_tokens.status();
  }

  // Each task's check limits, once (not per sample).
  std::vector<search::ExecutionLimits> limits;
  for (const CodeTask& task : suite.tasks) limits.push_back(search::LimitsForTests(task.tests, o.limits));

  // Generation on up to parallel_problems threads; checks on `jobs` threads as
  // tasks finish generating.
  std::vector<Generated> generated(tasks);
  std::vector<std::vector<SampleReport>> checked(tasks);
  std::vector<std::vector<absl::Status>> check_status(tasks);
  CheckQueue queue(static_cast<int64_t>(tasks));
  std::atomic<size_t> next_task{0};
  const size_t generators = std::min<size_t>(tasks, static_cast<size_t>(o.parallel_problems));
  const size_t checkers = o.jobs > 0 ? static_cast<size_t>(o.jobs)
                                     : std::max<size_t>(1, std::thread::hardware_concurrency());
  {
    std::vector<std::thread> threads;
    for (size_t t = 0; t < generators; ++t) {
      threads.emplace_back([&] {
        for (size_t i = next_task.fetch_add(1); i < tasks; i = next_task.fetch_add(1)) {
          generated[i] = GenerateTask(engine, shots, suite, suite.tasks[i], o);
          checked[i].resize(generated[i].samples.size());
          check_status[i].resize(generated[i].samples.size());
          queue.TaskGenerated(i, generated[i].samples.size());
        }
      });
    }
    for (size_t t = 0; t < checkers; ++t) {
      threads.emplace_back([&] {
        std::pair<size_t, size_t> item;
        while (queue.Next(item)) {
          const auto [i, s] = item;
          const CodeTask& task = suite.tasks[i];
          const GenerateResult& sample = generated[i].samples[s];
          SampleReport& r = checked[i][s];
          r.code = ExtractCode(sample.text);
          r.tokens = static_cast<int32_t>(sample.tokens.size());
          const search::CodeExecutor executor(limits[i]);
          absl::StatusOr<search::CheckResult> check = search::CheckCandidate(executor, task.tests, r.code);
          if (!check.ok()) {
            check_status[i][s] = check.status();
            continue;
          }
          r.outcome = check->outcome;
          r.cases_passed = check->cases_passed;
          r.cases_total = check->cases_total;
          r.seconds = check->run.seconds;
        }
      });
    }
    for (std::thread& t : threads) t.join();
  }
  engine.Release(shots).IgnoreError();
  report.generate_seconds = std::chrono::duration<double>(queue.LastGenerated(start) - start).count();
  for (const Generated& g : generated) BANYAN_RETURN_IF_ERROR(g.status);
  for (const auto& statuses : check_status) {
    for (const absl::Status& s : statuses) BANYAN_RETURN_IF_ERROR(s);
  }

  const int64_t shot_count = static_cast<int64_t>(shot_tokens->size());
  report.prompt_tokens = shot_count;
  report.mean_pass_at_k.assign(o.ks.size(), 0.0);
  for (size_t i = 0; i < tasks; ++i) {
    report.prompt_tokens += generated[i].task_tokens;
    report.shared_tokens += (shot_count + generated[i].task_tokens) * o.n;
    ProblemReport pr;
    pr.task_id = suite.tasks[i].id;
    for (SampleReport& s : checked[i]) {
      report.tokens_generated += s.tokens;
      report.execute_seconds += s.seconds;
      if (s.outcome == search::ExecutionOutcome::kPassed) ++pr.passed;
      if (s.cases_total > 0) pr.case_fraction += static_cast<double>(s.cases_passed) / s.cases_total;
      pr.samples.push_back(std::move(s));
    }
    if (!pr.samples.empty()) pr.case_fraction /= static_cast<double>(pr.samples.size());
    report.mean_case_fraction += pr.case_fraction / static_cast<double>(tasks);
    for (size_t j = 0; j < o.ks.size(); ++j) {
      BANYAN_ASSIGN_OR_RETURN(double v, search::PassAtK(o.n, pr.passed, o.ks[j]));
      pr.pass_at_k.push_back(v);
      report.mean_pass_at_k[j] += v / static_cast<double>(tasks);
    }
    report.problems.push_back(std::move(pr));
  }
  report.wall_seconds = Seconds(start);
  return report;
}

}  // namespace banyan::samples

// CodeExecutor: runs an untrusted Python program (a sampled candidate plus its
// tests) in a subprocess and reports pass / fail / timeout, for APPS / MBPP
// style evaluation with pass@k.
//
//   CodeExecutor executor(ExecutionLimits{.wall_seconds = 5});
//   BANYAN_ASSIGN_OR_RETURN(ExecutionResult r, executor.Run(candidate + "\n" + tests));
//   if (r.outcome == ExecutionOutcome::kPassed) ...
//
// Isolation: the child runs `python3 -I -S` (isolated mode, no site) in a new
// session and process group, in a private temporary directory (removed after
// the run) with a clean environment; setrlimit caps CPU seconds, address space,
// file size, open files and processes (RLIMIT_NPROC, so fork bombs fail); the
// network is cut with unshare(CLONE_NEWNET) where the kernel allows it (the
// result says whether it did). A wall-clock timeout kills the whole process
// group with SIGKILL, so programs that hang or fork children are reaped.
// Output is captured up to a cap and the rest discarded.
//
// Status vs outcome: Run returns a non-OK Status only when the executor itself
// could not run (kUnavailable: no python3 or fork failed; kInternal: pipe or
// temp-dir errors). Anything the PROGRAM does — failing tests, exceptions,
// hanging, forking, filling the disk — is an outcome in an OK result.
// Thread-safe: Run may be called from many threads at once (each run has its
// own directory and process group).
#ifndef BANYAN_SEARCH_CODE_EXECUTOR_H_
#define BANYAN_SEARCH_CODE_EXECUTOR_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace banyan::search {

struct ExecutionLimits {
  double wall_seconds = 10.0;
  int32_t cpu_seconds = 10;
  int64_t memory_bytes = int64_t{1} << 30;  // address space
  int64_t file_bytes = int64_t{16} << 20;   // largest file the program may write
  int32_t max_processes = 1;  // extra processes the program may start (RLIMIT_NPROC headroom)
  int64_t output_bytes = 64 << 10;  // stdout + stderr kept
  std::string python = "python3";
};

enum class ExecutionOutcome {
  kPassed,        // exit status 0
  kFailed,        // non-zero exit (assertion, exception, sys.exit(1))
  kTimeout,       // killed after wall_seconds
  kCrashed,       // killed by a signal (CPU limit, memory, segfault)
};

struct ExecutionResult {
  ExecutionOutcome outcome = ExecutionOutcome::kFailed;
  int exit_code = 0;   // valid for kPassed / kFailed
  int signal = 0;      // valid for kCrashed / kTimeout
  double seconds = 0;  // wall time
  std::string output;  // stdout and stderr interleaved, capped
  bool output_truncated = false;
  bool network_isolated = false;
};

std::string_view OutcomeName(ExecutionOutcome outcome);

class CodeExecutor {
 public:
  explicit CodeExecutor(ExecutionLimits limits = {}) : limits_(std::move(limits)) {}

  // Runs `program` (Python source) to completion or timeout.
  absl::StatusOr<ExecutionResult> Run(std::string_view program) const;

 private:
  ExecutionLimits limits_;
};

}  // namespace banyan::search

#endif  // BANYAN_SEARCH_CODE_EXECUTOR_H_

#include "search/code_executor.h"

#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"

namespace banyan::search {
namespace {

using Clock = std::chrono::steady_clock;

// Each run as root gets its own unprivileged uid, so RLIMIT_NPROC counts only
// that run's processes and a final kill(-1) as that uid reaps every
// descendant, including ones that left the process group.
uid_t RunUid() {
  static std::atomic<uint32_t> counter{0};
  return static_cast<uid_t>(200000 + (static_cast<uint32_t>(getpid()) % 1000) * 1000 +
                            counter.fetch_add(1) % 1000);
}

void KillAllOfUid(uid_t uid) {
  const pid_t killer = fork();
  if (killer == 0) {
    if (setgid(uid) == 0 && setuid(uid) == 0) kill(-1, SIGKILL);
    _exit(0);
  }
  if (killer > 0) waitpid(killer, nullptr, 0);
}

// Keeps at most `cap` bytes of output; marks the result truncated past that.
void AppendCapped(const char* data, size_t n, int64_t cap, ExecutionResult& result) {
  const size_t limit = static_cast<size_t>(cap);
  const size_t room = limit - std::min(result.output.size(), limit);
  result.output.append(data, std::min(n, room));
  if (n > room) result.output_truncated = true;
}

void SetLimit(int resource, rlim_t value) {
  rlimit limit{value, value};
  setrlimit(resource, &limit);
}

// Runs in the child between fork and exec: only async-signal-safe calls.
[[noreturn]] void ExecChild(const ExecutionLimits& limits, const char* dir, const char* script,
                            int out_fd, int status_fd, bool as_root, uid_t uid) {
  setsid();
  dup2(out_fd, STDOUT_FILENO);
  dup2(out_fd, STDERR_FILENO);
  const int null_fd = open("/dev/null", O_RDONLY);
  if (null_fd >= 0) dup2(null_fd, STDIN_FILENO);
  char isolated = 'n';
  if (unshare(CLONE_NEWNET) == 0) isolated = 'y';
  if (chdir(dir) != 0) _exit(127);
  SetLimit(RLIMIT_CPU, static_cast<rlim_t>(limits.cpu_seconds));
  SetLimit(RLIMIT_AS, static_cast<rlim_t>(limits.memory_bytes));
  SetLimit(RLIMIT_FSIZE, static_cast<rlim_t>(limits.file_bytes));
  SetLimit(RLIMIT_NOFILE, 64);
  SetLimit(RLIMIT_CORE, 0);
  if (as_root) {
    SetLimit(RLIMIT_NPROC, static_cast<rlim_t>(1 + limits.max_processes));
    if (setgroups(0, nullptr) != 0 || setgid(uid) != 0 || setuid(uid) != 0) _exit(126);
  }
  if (write(status_fd, &isolated, 1) != 1) _exit(125);
  const char* argv[] = {limits.python.c_str(), "-I", "-S", script, nullptr};
  const char* envp[] = {"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/nonexistent", "LANG=C.UTF-8",
                        "PYTHONDONTWRITEBYTECODE=1", nullptr};
  execvpe(argv[0], const_cast<char* const*>(argv), const_cast<char* const*>(envp));
  const char failed = 'x';
  (void)!write(status_fd, &failed, 1);
  _exit(127);
}

}  // namespace

std::string_view OutcomeName(ExecutionOutcome outcome) {
  switch (outcome) {
    case ExecutionOutcome::kPassed: return "passed";
    case ExecutionOutcome::kFailed: return "failed";
    case ExecutionOutcome::kTimeout: return "timeout";
    case ExecutionOutcome::kCrashed: return "crashed";
  }
  return "unknown";
}

absl::StatusOr<ExecutionResult> CodeExecutor::Run(std::string_view program) const {
  char dir_template[] = "/tmp/banyan-exec-XXXXXX";
  if (mkdtemp(dir_template) == nullptr) {
    return absl::InternalError(absl::StrCat("mkdtemp: ", std::strerror(errno)));
  }
  const std::string dir = dir_template;
  struct DirCleanup {
    std::string path;
    ~DirCleanup() {
      std::error_code ignored;
      std::filesystem::remove_all(path, ignored);
    }
  } cleanup{dir};
  const std::string script = dir + "/main.py";
  {
    std::ofstream out(script, std::ios::binary);
    out.write(program.data(), static_cast<std::streamsize>(program.size()));
    if (!out) return absl::InternalError("cannot write the program file in " + dir);
  }
  const bool as_root = geteuid() == 0;
  const uid_t uid = as_root ? RunUid() : geteuid();
  if (as_root && (chown(dir.c_str(), uid, uid) != 0 || chown(script.c_str(), uid, uid) != 0)) {
    return absl::InternalError(absl::StrCat("chown of the run directory: ", std::strerror(errno)));
  }

  int out_pipe[2], status_pipe[2];
  if (pipe2(out_pipe, O_CLOEXEC) != 0 || pipe2(status_pipe, O_CLOEXEC) != 0) {
    return absl::InternalError(absl::StrCat("pipe: ", std::strerror(errno)));
  }
  const auto start = Clock::now();
  const pid_t child = fork();
  if (child < 0) {
    for (int fd : {out_pipe[0], out_pipe[1], status_pipe[0], status_pipe[1]}) close(fd);
    return absl::UnavailableError(absl::StrCat("fork: ", std::strerror(errno)));
  }
  if (child == 0) {
    ExecChild(limits_, dir.c_str(), script.c_str(), out_pipe[1], status_pipe[1], as_root, uid);
  }
  close(out_pipe[1]);
  close(status_pipe[1]);

  ExecutionResult result;
  // The status pipe closes on a successful exec (O_CLOEXEC) or when the child
  // exits after a failed one: read to EOF so a late 'x' is never missed.
  char status_bytes[2] = {0, 0};
  ssize_t status_read = 0;
  while (status_read < 2) {
    const ssize_t n = read(status_pipe[0], status_bytes + status_read, 2 - status_read);
    if (n > 0) {
      status_read += n;
    } else if (n == 0 || errno != EINTR) {
      break;
    }
  }
  close(status_pipe[0]);
  result.network_isolated = status_read >= 1 && status_bytes[0] == 'y';
  const bool exec_failed = status_read == 2 && status_bytes[1] == 'x';

  fcntl(out_pipe[0], F_SETFL, O_NONBLOCK);
  const auto deadline = start + std::chrono::duration<double>(limits_.wall_seconds);
  int wait_status = 0;
  bool exited = false, timed_out = false, pipe_open = true;
  char buffer[4096];
  while (!exited) {
    const auto now = Clock::now();
    if (now >= deadline) {
      timed_out = true;
      kill(-child, SIGKILL);
      waitpid(child, &wait_status, 0);
      break;
    }
    if (pipe_open) {
      pollfd fd{out_pipe[0], POLLIN, 0};
      const int wait_ms = static_cast<int>(
          std::min<int64_t>(50, std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now).count() + 1));
      poll(&fd, 1, wait_ms);
      while (true) {
        const ssize_t n = read(out_pipe[0], buffer, sizeof(buffer));
        if (n > 0) {
          AppendCapped(buffer, static_cast<size_t>(n), limits_.output_bytes, result);
          continue;
        }
        if (n == 0) pipe_open = false;
        break;
      }
    } else {
      usleep(2000);
    }
    const pid_t done = waitpid(child, &wait_status, WNOHANG);
    if (done == child) exited = true;
  }
  // Reap everything the program left behind: its process group, and as root
  // every process of its private uid (descendants that called setsid).
  kill(-child, SIGKILL);
  if (as_root) KillAllOfUid(uid);
  // Drain what is still buffered (without waiting on stragglers).
  while (true) {
    const ssize_t n = read(out_pipe[0], buffer, sizeof(buffer));
    if (n <= 0) break;
    AppendCapped(buffer, static_cast<size_t>(n), limits_.output_bytes, result);
  }
  close(out_pipe[0]);
  result.seconds = std::chrono::duration<double>(Clock::now() - start).count();

  if (exec_failed) {
    return absl::UnavailableError(absl::StrCat("cannot execute '", limits_.python, "'"));
  }
  if (timed_out) {
    result.outcome = ExecutionOutcome::kTimeout;
    result.signal = SIGKILL;
  } else if (WIFSIGNALED(wait_status)) {
    result.outcome = ExecutionOutcome::kCrashed;
    result.signal = WTERMSIG(wait_status);
  } else {
    result.exit_code = WEXITSTATUS(wait_status);
    result.outcome = result.exit_code == 0 ? ExecutionOutcome::kPassed : ExecutionOutcome::kFailed;
  }
  return result;
}

}  // namespace banyan::search

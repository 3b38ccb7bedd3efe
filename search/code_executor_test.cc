// Real subprocesses: python3 runs each program. Programs that hang, fork,
// allocate without bound or fill the disk come back as outcomes, and the
// executor itself stays healthy.
#include "search/code_executor.h"

#include <unistd.h>

#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "sdk/base/status_testing.h"

namespace banyan::search {
namespace {

using ::testing::HasSubstr;

ExecutionResult RunOk(const CodeExecutor& executor, std::string_view program) {
  auto result = executor.Run(program);
  EXPECT_TRUE(result.ok()) << result.status();
  return result.ok() ? *result : ExecutionResult{};
}

TEST(CodeExecutorTest, PassingAndFailingPrograms) {
  CodeExecutor executor;
  const ExecutionResult pass = RunOk(executor, "def add(a, b):\n    return a + b\nassert add(2, 3) == 5\nprint('ok')\n");
  EXPECT_EQ(pass.outcome, ExecutionOutcome::kPassed);
  EXPECT_THAT(pass.output, HasSubstr("ok"));
  const ExecutionResult fail = RunOk(executor, "def add(a, b):\n    return a - b\nassert add(2, 3) == 5\n");
  EXPECT_EQ(fail.outcome, ExecutionOutcome::kFailed);
  EXPECT_NE(fail.exit_code, 0);
  EXPECT_THAT(fail.output, HasSubstr("AssertionError"));
}

TEST(CodeExecutorTest, HangingProgramTimesOut) {
  CodeExecutor executor(ExecutionLimits{.wall_seconds = 1.0});
  const ExecutionResult r = RunOk(executor, "import time\nwhile True:\n    time.sleep(0.1)\n");
  EXPECT_EQ(r.outcome, ExecutionOutcome::kTimeout);
  EXPECT_LT(r.seconds, 3.0);
}

TEST(CodeExecutorTest, CpuBoundProgramIsStopped) {
  CodeExecutor executor(ExecutionLimits{.wall_seconds = 5.0, .cpu_seconds = 1});
  const ExecutionResult r = RunOk(executor, "while True:\n    pass\n");
  EXPECT_TRUE(r.outcome == ExecutionOutcome::kCrashed || r.outcome == ExecutionOutcome::kTimeout);
  EXPECT_LT(r.seconds, 5.5);
}

TEST(CodeExecutorTest, MemoryBombFails) {
  CodeExecutor executor(ExecutionLimits{.wall_seconds = 10.0, .memory_bytes = int64_t{256} << 20});
  const ExecutionResult r = RunOk(executor, "x = bytearray(2 * 1024 * 1024 * 1024)\n");
  EXPECT_NE(r.outcome, ExecutionOutcome::kPassed);
  EXPECT_THAT(r.output, HasSubstr("MemoryError"));
}

TEST(CodeExecutorTest, DiskFillerIsCapped) {
  CodeExecutor executor(ExecutionLimits{.file_bytes = 1 << 20});
  const ExecutionResult r =
      RunOk(executor, "with open('big', 'wb') as f:\n    for _ in range(100):\n        f.write(b'x' * 1000000)\n");
  EXPECT_NE(r.outcome, ExecutionOutcome::kPassed);
}

TEST(CodeExecutorTest, ForkBombAndOrphansAreReaped) {
  if (geteuid() != 0) GTEST_SKIP() << "process caps need root (a private uid per run)";
  CodeExecutor executor(ExecutionLimits{.wall_seconds = 3.0, .max_processes = 4});
  // Forks until refused, and leaves a detached sleeper behind.
  const ExecutionResult r = RunOk(executor,
                                  "import os, time\n"
                                  "n = 0\n"
                                  "try:\n"
                                  "    while True:\n"
                                  "        if os.fork() == 0:\n"
                                  "            os.setsid(); time.sleep(60); os._exit(0)\n"
                                  "        n += 1\n"
                                  "except OSError as e:\n"
                                  "    print('refused after', n)\n");
  EXPECT_THAT(r.output, HasSubstr("refused after"));
  EXPECT_LT(r.seconds, 4.0);
  // The executor keeps working afterwards.
  EXPECT_EQ(RunOk(executor, "print(1)\n").outcome, ExecutionOutcome::kPassed);
}

TEST(CodeExecutorTest, NetworkIsCutWhereTheKernelAllows) {
  CodeExecutor executor(ExecutionLimits{.wall_seconds = 5.0});
  const ExecutionResult r = RunOk(executor,
                                  "import socket\n"
                                  "s = socket.socket()\n"
                                  "s.settimeout(1)\n"
                                  "s.connect(('127.0.0.1', 9))\n");
  EXPECT_NE(r.outcome, ExecutionOutcome::kPassed);
  if (r.network_isolated) {
    EXPECT_THAT(r.output, HasSubstr("Error"));
  }
}

TEST(CodeExecutorTest, OutputIsCapped) {
  CodeExecutor executor(ExecutionLimits{.output_bytes = 1000});
  const ExecutionResult r = RunOk(executor, "print('y' * 100000)\n");
  EXPECT_EQ(r.outcome, ExecutionOutcome::kPassed);
  EXPECT_EQ(r.output.size(), 1000u);
  EXPECT_TRUE(r.output_truncated);
}

TEST(CodeExecutorTest, MissingInterpreterIsUnavailable) {
  CodeExecutor executor(ExecutionLimits{.python = "/nonexistent/python"});
  EXPECT_THAT(executor.Run("print(1)"), testing::StatusIs(absl::StatusCode::kUnavailable));
}

TEST(CodeExecutorTest, ConcurrentRunsAreIndependent) {
  CodeExecutor executor;
  std::vector<std::thread> threads;
  std::vector<ExecutionOutcome> outcomes(6);
  for (int i = 0; i < 6; ++i) {
    threads.emplace_back([&, i] {
      auto r = executor.Run(i % 2 ? "assert False\n" : "print('fine')\n");
      outcomes[i] = r.ok() ? r->outcome : ExecutionOutcome::kCrashed;
    });
  }
  for (auto& t : threads) t.join();
  for (int i = 0; i < 6; ++i) {
    EXPECT_EQ(outcomes[i], i % 2 ? ExecutionOutcome::kFailed : ExecutionOutcome::kPassed) << i;
  }
}

}  // namespace
}  // namespace banyan::search

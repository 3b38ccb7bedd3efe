// BENCH_OK: inside a Google Benchmark function, skip the benchmark with the
// Status message when a setup or timed call fails (benchmarks never abort and
// never report a time for work that did not happen). Expects a
// `benchmark::State& state` in scope.
#ifndef BANYAN_BENCH_BENCH_STATUS_H_
#define BANYAN_BENCH_BENCH_STATUS_H_

#include <string>

#include "absl/status/status.h"
#include "benchmark/benchmark.h"

#define BENCH_OK(expr)                                        \
  do {                                                        \
    const ::absl::Status bench_status_ = (expr);              \
    if (!bench_status_.ok()) {                                \
      state.SkipWithError(std::string(bench_status_.message()).c_str()); \
      return;                                                 \
    }                                                         \
  } while (false)

#endif  // BANYAN_BENCH_BENCH_STATUS_H_

// EventTimer: the GPU time of work queued on one stream, between two CUDA
// events, for the benchmarks' manual timing. Not thread-safe (one per
// benchmark function).
//
//   BANYAN_ASSIGN_OR_RETURN(EventTimer timer, EventTimer::Create());
//   absl::StatusOr<double> us = timer.TimeUs(stream, [&] { return runner->Run(args, stream); });
#ifndef BANYAN_BENCH_EVENT_TIMER_H_
#define BANYAN_BENCH_EVENT_TIMER_H_

#include <cuda_runtime_api.h>

#include <utility>

#include "absl/status/statusor.h"
#include "banyan/status_macros.h"
#include "sdk/gpu/device_buffer.h"

namespace banyan::bench {

class EventTimer {
 public:
  static absl::StatusOr<EventTimer> Create() {
    BANYAN_ASSIGN_OR_RETURN(gpu::Event start, gpu::Event::Create());
    BANYAN_ASSIGN_OR_RETURN(gpu::Event stop, gpu::Event::Create());
    return EventTimer(std::move(start), std::move(stop));
  }
  // Records the start, queues `work` (returns absl::Status), records the
  // stop, waits for the stream: microseconds between the two events, or the
  // first error.
  template <typename Work>
  absl::StatusOr<double> TimeUs(cudaStream_t stream, Work&& work) {
    BANYAN_RETURN_IF_ERROR(start_.Record(stream));
    BANYAN_RETURN_IF_ERROR(work());
    BANYAN_RETURN_IF_ERROR(stop_.Record(stream));
    BANYAN_RETURN_IF_ERROR(stop_.Synchronize());
    BANYAN_ASSIGN_OR_RETURN(const float ms, stop_.ElapsedMsSince(start_));
    return ms * 1e3;
  }

 private:
  EventTimer(gpu::Event start, gpu::Event stop) : start_(std::move(start)), stop_(std::move(stop)) {}
  gpu::Event start_, stop_;
};

}  // namespace banyan::bench

#endif  // BANYAN_BENCH_EVENT_TIMER_H_

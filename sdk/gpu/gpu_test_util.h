// Shared helper for GPU tests: skip cleanly on machines without a GPU (CI).
#ifndef BANYAN_SDK_GPU_GPU_TEST_UTIL_H_
#define BANYAN_SDK_GPU_GPU_TEST_UTIL_H_

#include "gtest/gtest.h"
#include "sdk/gpu/device_info.h"

// Skips the current test when no GPU is usable (no driver, no device).
#define BANYAN_SKIP_WITHOUT_GPU()                           \
  do {                                                      \
    if (!::banyan::gpu::HasGpu()) GTEST_SKIP() << "no GPU"; \
  } while (false)

#endif  // BANYAN_SDK_GPU_GPU_TEST_UTIL_H_

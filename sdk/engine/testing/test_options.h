// The options the engine's tests (sdk/engine/*_test.cc) run the counting
// model (counting_backend.h) with. Header only; pure functions.
#ifndef BANYAN_SDK_ENGINE_TESTING_TEST_OPTIONS_H_
#define BANYAN_SDK_ENGINE_TESTING_TEST_OPTIONS_H_

#include <cstdint>

#include "banyan/engine.h"

namespace banyan::engine::testing {

// A small engine: the given KV budget, batch rows and prefill chunk, pages of
// 4 tokens (so that prompts span many pages and forks share partial ones),
// two worker threads.
inline EngineOptions SmallEngineOptions(uint64_t kv_budget_bytes, int32_t max_batch, int32_t prefill_chunk) {
  EngineOptions o;
  o.kv_budget_bytes = kv_budget_bytes;
  o.page_size = 4;
  o.max_batch = max_batch;
  o.prefill_chunk = prefill_chunk;
  o.threads = 2;
  return o;
}

// Greedy decoding (temperature 0) of at most max_tokens tokens; with
// ignore_eos also past the end-of-sequence token (a counting branch reaches
// it after byte 255).
inline GenerateOptions GreedyOptions(int32_t max_tokens, bool ignore_eos = false) {
  GenerateOptions g;
  g.sampling.temperature = 0.0f;
  g.max_tokens = max_tokens;
  g.ignore_eos = ignore_eos;
  return g;
}

}  // namespace banyan::engine::testing

#endif  // BANYAN_SDK_ENGINE_TESTING_TEST_OPTIONS_H_

// What the tests of the engine's device paths (Backend::ForwardGreedy,
// Backend::ForwardSample) share: an engine over the counting backend,
// optionally wrapped in a test backend that adds a path, and branches forked
// off one prompt with distinct first tokens.
//
//   PathFixture<MyPathBackend> f = MakePathEngine<MyPathBackend>(/*wrap=*/true);
//   auto results = f.engine->GenerateMany(ForkedBranches(*f.engine, 8), options);
//
// Header-only test support; thread-compatible like the engine it builds.
#ifndef BANYAN_SDK_ENGINE_TESTING_DEVICE_PATH_FIXTURE_H_
#define BANYAN_SDK_ENGINE_TESTING_DEVICE_PATH_FIXTURE_H_

#include <memory>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "banyan/engine.h"
#include "sdk/engine/engine_testing.h"
#include "sdk/engine/testing/counting_backend.h"

namespace banyan::engine::testing {

// The counting model with its first two choices close, so that sampled
// branches differ: P(first) = 1 / (1 + e^-0.5) = 0.622 under top-k 2.
inline CountingBackendOptions PathModel() {
  CountingBackendOptions o;
  o.first_logit = 3.0f;
  o.second_logit = 2.5f;
  return o;
}

template <typename PathBackend>
struct PathFixture {
  std::unique_ptr<Engine> engine;
  PathBackend* backend = nullptr;  // null when not wrapped
};

// PathBackend is constructed from the counting backend it wraps.
template <typename PathBackend>
PathFixture<PathBackend> MakePathEngine(bool wrap) {
  PathFixture<PathBackend> f;
  std::unique_ptr<model::Backend> backend = CreateCountingBackend(PathModel()).value();
  if (wrap) {
    auto wrapped = std::make_unique<PathBackend>(std::move(backend));
    f.backend = wrapped.get();
    backend = std::move(wrapped);
  }
  EngineOptions options;
  options.kv_budget_bytes = size_t{64} << 20;
  options.max_batch = 128;
  f.engine = CreateEngineForTesting(std::move(backend), std::make_unique<ByteTokenizer>(), options).value();
  return f;
}

// The first token ForkedBranches gives branch i (a byte; distinct for i < 250).
inline int32_t ForkedFirstToken(int i) { return (20 + 7 * i) % 250; }

// Forks `n` branches off one prompt, branch i starting with ForkedFirstToken(i).
inline std::vector<BranchId> ForkedBranches(Engine& engine, int n) {
  const BranchId root = engine.NewBranch(Prompt::Tokens({5, 6, 7, 8, 9})).value();
  std::vector<BranchId> kids = engine.Fork(root, n).value();
  for (int i = 0; i < n; ++i) {
    if (!engine.Append(kids[i], Prompt::Tokens({ForkedFirstToken(i)})).ok()) return {};  // the test then fails
  }
  return kids;
}

// How a GenerateMany went: results failed with `code`, failed otherwise, and
// succeeded with other than `tokens` tokens.
struct PathOutcome {
  int failed = 0;
  int other_errors = 0;
  int wrong_lengths = 0;
};
inline PathOutcome Tally(const std::vector<absl::StatusOr<GenerateResult>>& results, absl::StatusCode code,
                         size_t tokens) {
  PathOutcome o;
  for (const auto& r : results) {
    if (!r.ok()) {
      ++(r.status().code() == code ? o.failed : o.other_errors);
    } else if (r->tokens.size() != tokens) {
      ++o.wrong_lengths;
    }
  }
  return o;
}

}  // namespace banyan::engine::testing

#endif  // BANYAN_SDK_ENGINE_TESTING_DEVICE_PATH_FIXTURE_H_

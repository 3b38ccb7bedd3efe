// The KvTree operation-stream driver shared by the libFuzzer target
// (kv_tree_fuzz.cc) and the randomized property tests (kv_tree_property_test.cc).
//
// It decodes a stream of choices into tree operations (insert, fork, append,
// truncate, release, pin, unpin, stale-handle misuse, decode and prefill plans
// with random flattening, eviction policy changes, snapshot + restore) on a
// small tree whose pages hold, for every token, (token id, position) as its K.
// An independent model keeps each live branch's expected tokens. After every
// operation it checks:
//   * KvTree::CheckInvariants() (reference counts, page holders, free list, no
//     leaked page, disjoint slots, fill marks, radix property, eviction order);
//   * every live branch's Tokens() equals the model, and the K read at each of
//     its Slots() is (token, position): no shared page was overwritten;
//   * pinned nodes are still there and unchanged;
//   * each plan passes AttentionPlan::Validate(), and each row's entries, read
//     in order, visit exactly the slots of a brute-force walk of its path
//     (Slots()) and therefore exactly the model's tokens;
//   * the specific error codes of stale and malformed handles.
// Test support only (not part of banyan_kv_tree). Thread-compatible.
#ifndef BANYAN_KV_TREE_KV_TREE_OP_DRIVER_H_
#define BANYAN_KV_TREE_KV_TREE_OP_DRIVER_H_

#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"

namespace banyan::kv_tree::testing {

struct DriverStats {
  int64_t ops = 0;
  int64_t resource_exhausted = 0;
  int64_t plans = 0;
  int64_t restores = 0;
  int64_t evicted_nodes = 0;
  int64_t copied_pages = 0;
  int64_t reused_tokens = 0;
};

// Runs the operations encoded in `data` (any bytes are valid input) and
// returns kInternal describing the first broken invariant, else OK.
[[nodiscard]] absl::Status RunOpStream(const uint8_t* data, size_t size,
                                       DriverStats* stats = nullptr);

// Runs `num_ops` operations chosen by a seeded Rng (the same decoder as
// RunOpStream). `check_every` > 1 checks the full invariants every that many
// operations (plans are always checked).
[[nodiscard]] absl::Status RunRandomOps(uint64_t seed, int64_t num_ops, int32_t check_every = 1,
                                        DriverStats* stats = nullptr);

}  // namespace banyan::kv_tree::testing

#endif  // BANYAN_KV_TREE_KV_TREE_OP_DRIVER_H_

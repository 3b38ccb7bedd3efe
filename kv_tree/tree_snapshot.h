// TreeSnapshot: the structure of a KvTree without its K/V: namespaces, token
// spans, parent links and reference metadata. KvTree::Snapshot() produces it,
// KvTree::Restore() rebuilds it, and kv_tree_proto.h converts it to and from
// the banyan.proto.KvTreeSnapshot message. Thread-compatible value type.
#ifndef BANYAN_KV_TREE_TREE_SNAPSHOT_H_
#define BANYAN_KV_TREE_TREE_SNAPSHOT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace banyan::kv_tree {

struct SnapshotNode {
  int32_t parent = -1;          // index of the parent in nodes; -1 for a namespace root
  int32_t namespace_index = 0;  // roots: index into namespaces; others: ignored (inherited)
  std::vector<int32_t> tokens;  // empty exactly for roots
  uint64_t last_access = 0;     // tree clock of the last use
  int32_t branch_refs = 0;      // live branches ending here when the snapshot was taken
  int32_t pins = 0;
};

struct SnapshotNamespace {
  std::string model;
  std::string adapter;
};

struct TreeSnapshot {
  static constexpr uint32_t kFormatVersion = 1;
  uint32_t format_version = kFormatVersion;
  int32_t page_size = 16;  // of the tree it came from (information only)
  std::vector<SnapshotNamespace> namespaces;
  std::vector<SnapshotNode> nodes;  // parents before children
};

// Upper bounds on what a snapshot may describe (so hostile input cannot make
// Restore allocate without end).
inline constexpr int64_t kMaxSnapshotNodes = int64_t{1} << 24;
inline constexpr int64_t kMaxSnapshotTokens = int64_t{1} << 30;

// Checks that `snapshot` describes a valid prefix tree: known format version,
// page_size > 0, unique namespaces each with at most one root, parents before
// children, roots empty and other nodes non-empty, token ids >= 0, siblings
// starting with distinct tokens, non-negative counts, path lengths below 2^31
// and the size bounds above. Returns kInvalidArgument naming the first
// violation.
[[nodiscard]] absl::Status ValidateSnapshot(const TreeSnapshot& snapshot);

}  // namespace banyan::kv_tree

#endif  // BANYAN_KV_TREE_TREE_SNAPSHOT_H_

#include "kv_tree/tree_snapshot.h"

#include <limits>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"

namespace banyan::kv_tree {

absl::Status ValidateSnapshot(const TreeSnapshot& snapshot) {
  auto bad = [](auto&&... parts) {
    return absl::InvalidArgumentError(absl::StrCat("kv tree snapshot: ", parts...));
  };
  if (snapshot.format_version != TreeSnapshot::kFormatVersion) {
    return bad("unsupported format version ", snapshot.format_version);
  }
  if (snapshot.page_size <= 0) return bad("page size ", snapshot.page_size);
  if (static_cast<int64_t>(snapshot.nodes.size()) > kMaxSnapshotNodes) {
    return bad(snapshot.nodes.size(), " nodes exceed the limit ", kMaxSnapshotNodes);
  }
  absl::flat_hash_set<std::pair<std::string, std::string>> names;
  for (const SnapshotNamespace& ns : snapshot.namespaces) {
    if (!names.insert({ns.model, ns.adapter}).second) {
      return bad("namespace (", ns.model, ", ", ns.adapter, ") listed twice");
    }
  }
  std::vector<char> has_root(snapshot.namespaces.size(), 0);
  std::vector<int64_t> end(snapshot.nodes.size(), 0);
  absl::flat_hash_set<std::pair<int32_t, int32_t>> first_tokens;  // (parent, first token)
  int64_t total_tokens = 0;
  for (size_t i = 0; i < snapshot.nodes.size(); ++i) {
    const SnapshotNode& node = snapshot.nodes[i];
    if (node.branch_refs < 0 || node.pins < 0) return bad("node ", i, ": negative reference count");
    if (node.parent == -1) {
      if (node.namespace_index < 0 ||
          node.namespace_index >= static_cast<int64_t>(snapshot.namespaces.size())) {
        return bad("root ", i, ": namespace index ", node.namespace_index, " out of range");
      }
      if (has_root[node.namespace_index]++) {
        return bad("root ", i, ": namespace ", node.namespace_index, " has two roots");
      }
      if (!node.tokens.empty()) return bad("root ", i, " holds tokens");
      continue;
    }
    if (node.parent < 0 || node.parent >= static_cast<int64_t>(i)) {
      return bad("node ", i, ": parent ", node.parent, " does not precede it");
    }
    if (node.tokens.empty()) return bad("node ", i, " has no tokens");
    total_tokens += static_cast<int64_t>(node.tokens.size());
    if (total_tokens > kMaxSnapshotTokens) return bad("more than ", kMaxSnapshotTokens, " tokens");
    for (int32_t token : node.tokens) {
      if (token < 0) return bad("node ", i, ": negative token ", token);
    }
    end[i] = end[node.parent] + static_cast<int64_t>(node.tokens.size());
    if (end[i] > std::numeric_limits<int32_t>::max()) return bad("node ", i, ": path too long");
    if (!first_tokens.insert({node.parent, node.tokens.front()}).second) {
      return bad("node ", i, ": a sibling starts with the same token ", node.tokens.front());
    }
  }
  return absl::OkStatus();
}

}  // namespace banyan::kv_tree

#include "kv_tree/kv_tree_proto.h"

#include <limits>

#include "absl/strings/str_cat.h"
#include "banyan/status_macros.h"

namespace banyan::kv_tree {

void ToProto(const TreeSnapshot& snapshot, proto::KvTreeSnapshot* out) {
  out->Clear();
  out->set_format_version(snapshot.format_version);
  out->set_page_size(snapshot.page_size);
  for (const SnapshotNamespace& ns : snapshot.namespaces) {
    proto::KvTreeNamespace* m = out->add_namespaces();
    m->set_model(ns.model);
    m->set_adapter(ns.adapter);
  }
  out->mutable_nodes()->Reserve(static_cast<int>(snapshot.nodes.size()));
  for (const SnapshotNode& node : snapshot.nodes) {
    proto::KvTreeNode* m = out->add_nodes();
    m->set_parent(node.parent);
    m->set_namespace_index(node.namespace_index);
    m->mutable_tokens()->Add(node.tokens.begin(), node.tokens.end());
    m->set_last_access(node.last_access);
    m->set_branch_refs(node.branch_refs);
    m->set_pins(node.pins);
  }
}

absl::StatusOr<TreeSnapshot> FromProto(const proto::KvTreeSnapshot& message) {
  if (message.nodes_size() > kMaxSnapshotNodes) {
    return absl::InvalidArgumentError(
        absl::StrCat("kv tree snapshot: ", message.nodes_size(), " nodes exceed the limit"));
  }
  TreeSnapshot out;
  out.format_version = message.format_version();
  out.page_size = message.page_size();
  out.namespaces.reserve(message.namespaces_size());
  for (const proto::KvTreeNamespace& ns : message.namespaces()) {
    out.namespaces.push_back(SnapshotNamespace{ns.model(), ns.adapter()});
  }
  out.nodes.reserve(message.nodes_size());
  for (const proto::KvTreeNode& m : message.nodes()) {
    SnapshotNode node;
    node.parent = m.parent();
    node.namespace_index = m.namespace_index();
    node.tokens.assign(m.tokens().begin(), m.tokens().end());
    node.last_access = m.last_access();
    node.branch_refs = m.branch_refs();
    node.pins = m.pins();
    out.nodes.push_back(std::move(node));
  }
  BANYAN_RETURN_IF_ERROR(ValidateSnapshot(out));
  return out;
}

std::string SerializeSnapshot(const TreeSnapshot& snapshot) {
  proto::KvTreeSnapshot message;
  ToProto(snapshot, &message);
  return message.SerializeAsString();
}

absl::StatusOr<TreeSnapshot> ParseSnapshot(absl::string_view bytes) {
  if (bytes.size() > static_cast<size_t>(std::numeric_limits<int>::max())) {
    return absl::DataLossError("kv tree snapshot: input larger than 2 GiB");
  }
  proto::KvTreeSnapshot message;
  if (!message.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
    return absl::DataLossError(
        absl::StrCat("kv tree snapshot: ", bytes.size(), " bytes are not a KvTreeSnapshot message"));
  }
  return FromProto(message);
}

}  // namespace banyan::kv_tree

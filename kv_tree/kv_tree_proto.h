// Conversion of a kv_tree::TreeSnapshot to and from banyan.proto.KvTreeSnapshot
// (sdk/proto/kv_tree.proto). Lives in its own target, banyan_kv_tree_proto, so
// that banyan_kv_tree stays free of protobuf.
//
//   std::string bytes = SerializeSnapshot(tree->Snapshot());
//   BANYAN_ASSIGN_OR_RETURN(TreeSnapshot snap, ParseSnapshot(bytes));
//   BANYAN_ASSIGN_OR_RETURN(auto restored, other_tree->Restore(snap));
//
// Input from a file or the network is hostile: ParseSnapshot and FromProto
// never crash; they return kDataLoss for bytes that are not a message and
// kInvalidArgument (from ValidateSnapshot) for a message that does not describe
// a valid tree. Stateless functions: thread-safe.
#ifndef BANYAN_KV_TREE_KV_TREE_PROTO_H_
#define BANYAN_KV_TREE_KV_TREE_PROTO_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "kv_tree/tree_snapshot.h"
#include "sdk/proto/kv_tree.pb.h"

namespace banyan::kv_tree {

void ToProto(const TreeSnapshot& snapshot, proto::KvTreeSnapshot* out);
// Converts and validates. Errors: kInvalidArgument.
[[nodiscard]] absl::StatusOr<TreeSnapshot> FromProto(const proto::KvTreeSnapshot& message);

// The binary wire form.
std::string SerializeSnapshot(const TreeSnapshot& snapshot);
// Errors: kDataLoss (not a KvTreeSnapshot message), kInvalidArgument.
[[nodiscard]] absl::StatusOr<TreeSnapshot> ParseSnapshot(absl::string_view bytes);

}  // namespace banyan::kv_tree

#endif  // BANYAN_KV_TREE_KV_TREE_PROTO_H_

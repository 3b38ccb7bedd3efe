// libFuzzer target: ParseSnapshot on hostile bytes, and Restore of whatever
// parses. Must never crash; any status is fine.
#include <cstdint>
#include <cstdlib>

#include "google/protobuf/stubs/logging.h"
#include "kv_tree/kv_tree.h"
#include "kv_tree/kv_tree_proto.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace banyan::kv_tree;
  static google::protobuf::LogSilencer* quiet = new google::protobuf::LogSilencer;  // bad UTF-8 logs
  (void)quiet;
  absl::StatusOr<TreeSnapshot> snap =
      ParseSnapshot(absl::string_view(reinterpret_cast<const char*>(data), size));
  if (!snap.ok()) {
    const absl::StatusCode code = snap.status().code();
    if (code != absl::StatusCode::kDataLoss && code != absl::StatusCode::kInvalidArgument) std::abort();
    return 0;
  }
  KvPoolConfig config{banyan::DType::kF32, 1, 1, 1, 4, size_t{1} << 16};
  auto tree = KvTree::Create(HostKvStorage::Create(config).value()).value();
  absl::StatusOr<std::vector<KvTree::RestoredNode>> restored = tree->Restore(*snap);
  if (!tree->CheckInvariants().ok()) std::abort();
  return 0;
}

// EngineImpl::Save / Load: every live branch's tokens and metadata as a
// banyan.proto.EngineSnapshot (sdk/proto/engine_snapshot.proto), framed and
// written atomically (snapshot_file.h). Branches that share a prefix in the
// tree are stored as (earlier branch, shared length, suffix), so a tree of
// many forks costs little more than its distinct tokens. Load recomputes the
// KV through ordinary prefills (batched, sharing prefixes again).
#include <algorithm>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "banyan/status_macros.h"
#include "sdk/engine/engine_impl.h"
#include "sdk/engine/snapshot_file.h"
#include "sdk/proto/engine_snapshot.pb.h"

namespace banyan::engine {
namespace {

constexpr uint32_t kSnapshotVersion = 1;
constexpr int64_t kMaxLoadTokens = int64_t{1} << 31;

uint64_t NodeKey(kv_tree::NodeId id) { return (uint64_t{id.index} << 32) | id.generation; }

}  // namespace

std::string EngineImpl::ModelFingerprint() const {
  const model::ModelConfig& c = config_;
  return absl::StrCat("arch=", static_cast<int>(c.architecture), ";vocab=", c.vocab_size,
                      ";hidden=", c.hidden_size, ";layers=", c.num_layers, ";heads=", c.num_q_heads,
                      "/", c.num_kv_heads, ";head_dim=", c.head_dim, ";ffn=", c.intermediate_size,
                      ";tokenizer_vocab=", tokenizer_->vocab_size());
}

absl::Status EngineImpl::Save(const std::string& path) const {
  proto::EngineSnapshot snapshot;
  snapshot.set_format_version(kSnapshotVersion);
  snapshot.set_model_name(model_name_);
  snapshot.set_model_fingerprint(ModelFingerprint());
  snapshot.set_created_unix_micros(absl::ToUnixMicros(absl::Now()));
  {
    EngineLock lock(&mu_);
    std::vector<uint64_t> ids;
    ids.reserve(records_.size());
    for (const auto& [id, record] : records_) ids.push_back(id);
    std::sort(ids.begin(), ids.end());
    // Tree node -> (saved branch whose path holds it, the node's end).
    absl::flat_hash_map<uint64_t, std::pair<int32_t, int64_t>> seen;
    std::vector<std::vector<int32_t>> saved_tokens;
    for (uint64_t id : ids) {
      const BranchRecord& record = records_.at(id);
      BANYAN_ASSIGN_OR_RETURN(std::vector<int32_t> tokens, tree_->Tokens(record.branch));
      // The branch's path, leaf first, with each node's end.
      std::vector<std::pair<uint64_t, int64_t>> path;
      BANYAN_ASSIGN_OR_RETURN(kv_tree::NodeId node, tree_->NodeOf(record.branch));
      while (node.valid()) {
        BANYAN_ASSIGN_OR_RETURN(kv_tree::NodeInfo info, tree_->GetNode(node));
        if (!info.parent.valid()) break;
        path.push_back({NodeKey(node), info.prefix_length + info.length});
        node = info.parent;
      }
      int32_t base = -1;
      int64_t base_length = 0;
      for (const auto& [key, end] : path) {  // deepest shared node first
        if (auto it = seen.find(key); it != seen.end()) {
          base = it->second.first;
          base_length = end;
          break;
        }
      }
      const int32_t index = snapshot.branches_size();
      for (const auto& [key, end] : path) seen.try_emplace(key, index, end);
      proto::SavedBranch* b = snapshot.add_branches();
      b->set_base(base);
      b->set_base_length(base_length);
      for (size_t t = static_cast<size_t>(base_length); t < tokens.size(); ++t) b->add_suffix(tokens[t]);
      b->set_kv_namespace(record.kv_namespace);
      b->set_priority(record.priority);
      for (const auto& [k, v] : record.metadata) {
        proto::MetadataEntry* e = b->add_metadata();
        e->set_key(k);
        e->set_value(v);
      }
      absl::StatusOr<std::string> text = tokenizer_->Decode(tokens);
      if (text.ok()) b->set_text(*text);
    }
  }
  std::string payload;
  if (!snapshot.SerializeToString(&payload)) {
    return absl::InternalError("cannot serialize the engine snapshot");
  }
  return WriteFileAtomically(path, FrameSnapshot(payload));
}

absl::StatusOr<std::vector<BranchId>> EngineImpl::Load(const std::string& path) {
  BANYAN_ASSIGN_OR_RETURN(std::string framed, ReadWholeFile(path));
  BANYAN_ASSIGN_OR_RETURN(std::string payload, UnframeSnapshot(framed));
  proto::EngineSnapshot snapshot;
  if (!snapshot.ParseFromString(payload)) {
    return absl::DataLossError(absl::StrCat(path, ": the snapshot message does not parse"));
  }
  if (snapshot.format_version() != kSnapshotVersion) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": snapshot format version ",
                                                   snapshot.format_version(), " (this engine reads ",
                                                   kSnapshotVersion, ")"));
  }
  if (snapshot.model_fingerprint() != ModelFingerprint()) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": the snapshot is of another model (", snapshot.model_name(), ": ",
        snapshot.model_fingerprint(), "; this engine runs ", model_name_, ": ", ModelFingerprint(), ")"));
  }
  // Rebuild every branch's tokens, checking what a hostile file could get wrong.
  std::vector<std::vector<int32_t>> prompts;
  std::vector<BranchOptions> options;
  std::vector<std::map<std::string, std::string>> metadata;
  int64_t total = 0;
  for (int i = 0; i < snapshot.branches_size(); ++i) {
    const proto::SavedBranch& b = snapshot.branches(i);
    std::vector<int32_t> tokens;
    if (b.base() >= 0) {
      if (b.base() >= i || b.base_length() < 0 ||
          b.base_length() > static_cast<int64_t>(prompts[b.base()].size())) {
        return absl::DataLossError(absl::StrCat(path, ": branch ", i, " refers to base ", b.base(),
                                                " with length ", b.base_length(), ", which it cannot"));
      }
      tokens.assign(prompts[b.base()].begin(), prompts[b.base()].begin() + b.base_length());
    } else if (b.base() != -1 || b.base_length() != 0) {
      return absl::DataLossError(absl::StrCat(path, ": branch ", i, " has a malformed base"));
    }
    total += static_cast<int64_t>(tokens.size()) + b.suffix_size();
    if (total > kMaxLoadTokens) {
      return absl::DataLossError(absl::StrCat(path, ": the snapshot holds more than ",
                                              kMaxLoadTokens, " tokens"));
    }
    tokens.insert(tokens.end(), b.suffix().begin(), b.suffix().end());
    BANYAN_RETURN_IF_ERROR(CheckTokens(tokens));
    prompts.push_back(std::move(tokens));
    BranchOptions o;
    o.kv_namespace = b.kv_namespace();
    o.priority = b.priority();
    options.push_back(std::move(o));
    std::map<std::string, std::string>& m = metadata.emplace_back();
    for (const proto::MetadataEntry& e : b.metadata()) {
      if (e.key().empty()) return absl::DataLossError(absl::StrCat(path, ": branch ", i, " has an empty metadata key"));
      m[e.key()] = e.value();
    }
  }
  std::vector<absl::StatusOr<BranchId>> created =
      NewBranches(std::move(prompts), options, metadata);
  std::vector<BranchId> ids;
  absl::Status first_error;
  for (auto& c : created) {
    if (c.ok()) {
      ids.push_back(*c);
    } else if (first_error.ok()) {
      first_error = c.status();
    }
  }
  if (!first_error.ok()) {
    // All or nothing: drop what was created.
    for (BranchId id : ids) (void)Release(id);
    return first_error;
  }
  return ids;
}

}  // namespace banyan::engine

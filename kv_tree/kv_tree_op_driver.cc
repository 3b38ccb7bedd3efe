#include "kv_tree/kv_tree_op_driver.h"

#include <algorithm>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "banyan/status_macros.h"
#include "kv_tree/kv_tree.h"
#include "sdk/base/rng.h"

namespace banyan::kv_tree::testing {
namespace {

// A stream of bounded choices: from bytes (fuzzing) or from an Rng.
class Choices {
 public:
  virtual ~Choices() = default;
  // A value in [0, bound). REQUIRES: bound >= 1.
  virtual uint32_t Take(uint32_t bound) = 0;
  virtual bool Done() const = 0;
};

class ByteChoices final : public Choices {
 public:
  ByteChoices(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  uint32_t Take(uint32_t bound) override {
    uint32_t v = 0;
    for (uint32_t span = 1; span < bound && pos_ < size_; span <<= 8) v = (v << 8) | data_[pos_++];
    return v % bound;
  }
  bool Done() const override { return pos_ >= size_; }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
};

class RngChoices final : public Choices {
 public:
  RngChoices(uint64_t seed, int64_t ops) : rng_(seed), left_(ops) {}
  uint32_t Take(uint32_t bound) override { return static_cast<uint32_t>(rng_.UniformInt(bound)); }
  bool Done() const override { return left_ <= 0; }
  void CountOp() { --left_; }

 private:
  Rng rng_;
  int64_t left_;
};

#define DRIVER_CHECK(cond, ...)                                                       \
  do {                                                                               \
    if (!(cond)) return absl::InternalError(absl::StrCat("op ", stats_.ops, ": ", __VA_ARGS__)); \
  } while (false)

class Driver {
 public:
  Driver(Choices* in, int32_t check_every) : in_(in), check_every_(check_every) {}

  absl::Status Init() {
    static constexpr int32_t kPageSizes[] = {1, 2, 3, 4, 5, 8, 16};
    KvPoolConfig config;
    config.dtype = DType::kF32;
    config.num_layers = 1 + static_cast<int32_t>(in_->Take(2));
    config.num_kv_heads = 1;
    config.head_dim = 2;
    config.page_size = kPageSizes[in_->Take(7)];
    const int32_t pages = 3 + static_cast<int32_t>(in_->Take(60));
    alphabet_ = 2 + in_->Take(6);
    config.byte_budget = static_cast<size_t>(pages) * config.num_layers * 2 * config.head_dim *
                         config.page_size * 4;
    BANYAN_ASSIGN_OR_RETURN(auto storage, HostKvStorage::Create(config));
    kv_ = static_cast<float*>(storage->data());
    layout_ = storage->layout();
    BANYAN_ASSIGN_OR_RETURN(tree_, KvTree::Create(std::move(storage)));
    return absl::OkStatus();
  }

  absl::Status Run(RngChoices* counter) {
    BANYAN_RETURN_IF_ERROR(Init());
    while (!in_->Done()) {
      if (counter != nullptr) counter->CountOp();
      BANYAN_RETURN_IF_ERROR(Step());
      ++stats_.ops;
      if (stats_.ops % check_every_ == 0) BANYAN_RETURN_IF_ERROR(CheckAll());
    }
    BANYAN_RETURN_IF_ERROR(CheckAll());
    // Releasing everything leaves only cached nodes; evicting them all must
    // return every page.
    for (Live& b : live_) BANYAN_RETURN_IF_ERROR(tree_->Release(b.branch));
    live_.clear();
    pins_.clear();
    BANYAN_RETURN_IF_ERROR(CheckAll());
    const KvTreeStats s = tree_->Stats();
    stats_.evicted_nodes = s.evicted_nodes;
    stats_.copied_pages = s.copied_pages;
    DRIVER_CHECK(s.branches == 0 && s.pins == 0, "handles left after releasing all");
    // Every page is reclaimable: a sequence needing the whole pool fits.
    const std::vector<int32_t> all(static_cast<size_t>(s.pages_total) * layout_.page_size, 7);
    BANYAN_ASSIGN_OR_RETURN(Extension drain, tree_->Insert(KvNamespace{"drain", ""}, all));
    DRIVER_CHECK(drain.write_slots.size() == all.size(), "drain reused cached tokens");
    DRIVER_CHECK(tree_->Stats().pages_free == 0, "drain left pages free");
    BANYAN_RETURN_IF_ERROR(tree_->Release(drain.branch));
    return tree_->CheckInvariants();
  }

  const DriverStats& stats() const { return stats_; }

 private:
  struct Live {
    Branch branch;
    std::vector<int32_t> tokens;
  };
  struct Pinned {
    KvPin pin;
    int64_t end;  // prefix_length + length of the node when pinned
  };

  std::vector<int32_t> RandomTokens(uint32_t max_len, uint32_t min_len) {
    std::vector<int32_t> t(min_len + in_->Take(max_len - min_len + 1));
    // Mostly a small alphabet (lots of sharing), sometimes any token.
    for (int32_t& x : t) x = in_->Take(8) == 0 ? static_cast<int32_t>(in_->Take(1u << 20)) : static_cast<int32_t>(in_->Take(alphabet_));
    return t;
  }

  void WriteKv(absl::Span<const KvSlot> slots, const std::vector<int32_t>& tokens, size_t first) {
    for (size_t i = 0; i < slots.size(); ++i) {
      for (int32_t layer = 0; layer < layout_.num_layers; ++layer) {
        float* k = kv_ + layout_.Offset(layer, 0, slots[i].page, 0, slots[i].slot);
        k[0] = static_cast<float>(tokens[first + i]);
        k[1] = static_cast<float>(first + i) + 0.5f * layer;
        float* v = kv_ + layout_.Offset(layer, 1, slots[i].page, 0, slots[i].slot);
        v[0] = -k[0];
        v[1] = -k[1];
      }
    }
  }

  absl::Status CheckKv(KvSlot s, int32_t token, int64_t position) {
    for (int32_t layer = 0; layer < layout_.num_layers; ++layer) {
      const float* k = kv_ + layout_.Offset(layer, 0, s.page, 0, s.slot);
      const float* v = kv_ + layout_.Offset(layer, 1, s.page, 0, s.slot);
      DRIVER_CHECK(k[0] == static_cast<float>(token) &&
                       k[1] == static_cast<float>(position) + 0.5f * layer && v[0] == -k[0] &&
                       v[1] == -k[1],
                   "page ", s.page, " slot ", s.slot, " holds (", k[0], ", ", k[1],
                   "), expected token ", token, " at ", position);
    }
    return absl::OkStatus();
  }

  absl::Status ExpectCode(const absl::Status& status, absl::StatusCode code, const char* what) {
    DRIVER_CHECK(status.code() == code, what, ": expected code ", static_cast<int>(code), ", got ",
                 status.ToString());
    return absl::OkStatus();
  }

  absl::Status HandleExtension(const absl::StatusOr<Extension>& ext, Live* live, size_t old_len,
                               const std::vector<int32_t>& tokens) {
    if (!ext.ok()) {
      BANYAN_RETURN_IF_ERROR(
          ExpectCode(ext.status(), absl::StatusCode::kResourceExhausted, "extension"));
      ++stats_.resource_exhausted;
      return absl::OkStatus();
    }
    DRIVER_CHECK(ext->reused_tokens >= 0 && ext->reused_tokens <= static_cast<int32_t>(tokens.size()) &&
                     ext->write_slots.size() == tokens.size() - ext->reused_tokens,
                 "extension slot count wrong");
    absl::StatusOr<NodeId> node = tree_->NodeOf(ext->branch);
    DRIVER_CHECK(node.ok() && *node == ext->node, "extension node is not the branch's node");
    live->tokens.insert(live->tokens.end(), tokens.begin(), tokens.end());
    live->branch = ext->branch;
    WriteKv(ext->write_slots, live->tokens, old_len + ext->reused_tokens);
    stats_.reused_tokens += ext->reused_tokens;
    return absl::OkStatus();
  }

  Live* PickLive() { return live_.empty() ? nullptr : &live_[in_->Take(static_cast<uint32_t>(live_.size()))]; }

  absl::Status Step() {
    const uint32_t op = in_->Take(24);
    if (op < 3 || live_.empty()) {  // insert
      if (live_.size() >= kMaxBranches) return absl::OkStatus();
      const std::vector<int32_t> tokens = RandomTokens(3 * layout_.page_size + 4, 0);
      const KvNamespace ns{in_->Take(4) == 0 ? "other" : "m", ""};
      Live live;
      BANYAN_RETURN_IF_ERROR(HandleExtension(tree_->Insert(ns, tokens), &live, 0, tokens));
      if (live.branch.valid()) live_.push_back(std::move(live));
      return absl::OkStatus();
    }
    if (op < 6) {  // fork
      Live* b = PickLive();
      const int32_t n = 1 + static_cast<int32_t>(in_->Take(3));
      if (live_.size() + n > kMaxBranches) return absl::OkStatus();
      BANYAN_ASSIGN_OR_RETURN(std::vector<Branch> forks, tree_->Fork(b->branch, n));
      const std::vector<int32_t> tokens = b->tokens;
      for (Branch f : forks) live_.push_back(Live{f, tokens});
      return absl::OkStatus();
    }
    if (op < 11) {  // append
      Live* b = PickLive();
      const std::vector<int32_t> tokens = RandomTokens(2 * layout_.page_size + 2, 1);
      const size_t old_len = b->tokens.size();
      return HandleExtension(tree_->Append(b->branch, tokens), b, old_len, tokens);
    }
    if (op < 13) {  // truncate
      Live* b = PickLive();
      const size_t n = in_->Take(static_cast<uint32_t>(b->tokens.size()) + 1);
      BANYAN_RETURN_IF_ERROR(tree_->Truncate(b->branch, static_cast<int64_t>(n)));
      b->tokens.resize(n);
      return absl::OkStatus();
    }
    if (op < 16) {  // release (and maybe release again)
      const size_t i = in_->Take(static_cast<uint32_t>(live_.size()));
      const Branch branch = live_[i].branch;
      BANYAN_RETURN_IF_ERROR(tree_->Release(branch));
      live_.erase(live_.begin() + i);
      stale_.push_back(branch);
      if (in_->Take(4) == 0) {
        BANYAN_RETURN_IF_ERROR(ExpectCode(tree_->Release(branch), absl::StatusCode::kNotFound, "double release"));
      }
      return absl::OkStatus();
    }
    if (op == 16) {  // pin
      Live* b = PickLive();
      BANYAN_ASSIGN_OR_RETURN(NodeId node, tree_->NodeOf(b->branch));
      BANYAN_ASSIGN_OR_RETURN(KvPin pin, tree_->Pin(node));
      BANYAN_ASSIGN_OR_RETURN(NodeInfo info, tree_->GetNode(node));
      pins_.push_back(Pinned{std::move(pin), info.prefix_length + info.length});
      return absl::OkStatus();
    }
    if (op == 17) {  // unpin (explicitly or by destruction), then misuse the receipt
      if (pins_.empty()) return absl::OkStatus();
      const size_t i = in_->Take(static_cast<uint32_t>(pins_.size()));
      KvPin pin = std::move(pins_[i].pin);
      pins_.erase(pins_.begin() + i);
      if (in_->Take(2) == 0) {
        BANYAN_RETURN_IF_ERROR(pin.Release());
        BANYAN_RETURN_IF_ERROR(
            ExpectCode(pin.Release(), absl::StatusCode::kInvalidArgument, "double unpin"));
      }
      return absl::OkStatus();
    }
    if (op == 18) return StaleHandles();
    if (op < 21) return CheckPlan(/*prefill=*/op == 20);
    if (op == 21) {
      const uint32_t kind = in_->Take(3);
      if (kind == 0) tree_->SetEvictionPolicy(nullptr);
      if (kind == 1) tree_->SetEvictionPolicy([](const EvictionCandidate& c) { return -double(c.length); });
      if (kind == 2) {
        tree_->SetEvictionPolicy([](const EvictionCandidate& c) { return double(c.prefix_length); });
      }
      return absl::OkStatus();
    }
    if (op == 22 && in_->Take(8) == 0) return SnapshotRoundTrip();
    return absl::OkStatus();
  }

  absl::Status StaleHandles() {
    if (!stale_.empty()) {
      const Branch b = stale_[in_->Take(static_cast<uint32_t>(stale_.size()))];
      BANYAN_RETURN_IF_ERROR(ExpectCode(tree_->Append(b, {1}).status(), absl::StatusCode::kNotFound, "stale append"));
      BANYAN_RETURN_IF_ERROR(ExpectCode(tree_->Fork(b).status(), absl::StatusCode::kNotFound, "stale fork"));
      BANYAN_RETURN_IF_ERROR(ExpectCode(tree_->Truncate(b, 0), absl::StatusCode::kNotFound, "stale truncate"));
    }
    BANYAN_RETURN_IF_ERROR(ExpectCode(tree_->Release(Branch{}), absl::StatusCode::kInvalidArgument, "null branch"));
    BANYAN_RETURN_IF_ERROR(ExpectCode(tree_->Release(Branch{1u << 30, 1}),
                                      absl::StatusCode::kInvalidArgument, "wild branch"));
    BANYAN_RETURN_IF_ERROR(ExpectCode(tree_->Pin(NodeId{}).status(), absl::StatusCode::kInvalidArgument, "null node"));
    if (Live* b = PickLive()) {
      BANYAN_RETURN_IF_ERROR(ExpectCode(tree_->Truncate(b->branch, static_cast<int64_t>(b->tokens.size()) + 1),
                                        absl::StatusCode::kInvalidArgument, "truncate too long"));
      BANYAN_RETURN_IF_ERROR(ExpectCode(tree_->Append(b->branch, {-1}).status(),
                                        absl::StatusCode::kInvalidArgument, "negative token"));
      BANYAN_RETURN_IF_ERROR(ExpectCode(tree_->Fork(b->branch, 0).status(),
                                        absl::StatusCode::kInvalidArgument, "fork 0"));
    }
    return absl::OkStatus();
  }

  // Builds a decode or prefill plan over a random subset of branches and
  // checks it against a brute-force walk of each row's path.
  absl::Status CheckPlan(bool prefill) {
    std::vector<const Live*> rows;
    for (const Live& b : live_) {
      if (!b.tokens.empty() && in_->Take(3) != 0) rows.push_back(&b);
    }
    const uint64_t salt = in_->Take(1u << 16);
    const uint32_t flatten_mode = in_->Take(3);  // 0 never, 1 some, 2 always
    PlanOptions options;
    if (flatten_mode == 1) {
      options.flatten = [salt](const NodeShareInfo& info) { return ((info.node.index * 2654435761u) ^ salt) % 3 == 0; };
    } else if (flatten_mode == 2) {
      options.flatten = [](const NodeShareInfo&) { return true; };
    }
    std::vector<std::pair<const Live*, int64_t>> expect;  // row -> (branch, position)
    std::vector<NodeId> segment_nodes;
    if (prefill) {
      std::vector<PrefillRows> req;
      for (const Live* b : rows) {
        const int32_t n = 1 + static_cast<int32_t>(in_->Take(static_cast<uint32_t>(b->tokens.size())));
        req.push_back(PrefillRows{b->branch, n});
        for (int64_t a = static_cast<int64_t>(b->tokens.size()) - n; a < static_cast<int64_t>(b->tokens.size()); ++a) {
          expect.push_back({b, a});
        }
      }
      BANYAN_RETURN_IF_ERROR(tree_->BuildPrefillPlan(req, options, &plan_, &segment_nodes));
    } else {
      std::vector<Branch> req;
      for (const Live* b : rows) {
        req.push_back(b->branch);
        expect.push_back({b, static_cast<int64_t>(b->tokens.size()) - 1});
      }
      BANYAN_RETURN_IF_ERROR(tree_->BuildDecodePlan(req, options, &plan_, &segment_nodes));
    }
    ++stats_.plans;
    const std::string invalid = plan_.Validate();
    DRIVER_CHECK(invalid.empty(), "invalid plan: ", invalid);
    DRIVER_CHECK(plan_.num_queries == static_cast<int32_t>(expect.size()), "row count");
    DRIVER_CHECK(segment_nodes.size() == static_cast<size_t>(plan_.num_segments()), "segment nodes");
    std::vector<int32_t> segment_of(plan_.num_entries());
    for (int32_t s = 0; s < plan_.num_segments(); ++s) {
      for (int32_t e = plan_.segment_entry_indptr[s]; e < plan_.segment_entry_indptr[s + 1]; ++e) segment_of[e] = s;
    }
    for (int32_t q = 0; q < plan_.num_queries; ++q) {
      const auto& [live, position] = expect[q];
      BANYAN_ASSIGN_OR_RETURN(std::vector<KvSlot> path, tree_->Slots(live->branch));
      int64_t seen = 0;
      for (int32_t i = plan_.query_entry_indptr[q]; i < plan_.query_entry_indptr[q + 1]; ++i) {
        const int32_t e = plan_.query_entries[i];
        const int32_t s = segment_of[e];
        for (int32_t t = 0; t < plan_.entry_kv_limit[e]; ++t, ++seen) {
          const int32_t pos = plan_.segment_first_slot[s] + t;
          const KvSlot slot{plan_.page_indices[plan_.segment_page_indptr[s] + pos / plan_.page_size],
                            pos % plan_.page_size};
          DRIVER_CHECK(seen <= position && path[seen] == slot, "row ", q, " entry ", e,
                       " visits the wrong slot at position ", seen);
          BANYAN_RETURN_IF_ERROR(CheckKv(slot, live->tokens[seen], seen));
        }
      }
      DRIVER_CHECK(seen == position + 1, "row ", q, " sees ", seen, " tokens, expected ", position + 1);
    }
    return absl::OkStatus();
  }

  // Snapshot -> validate -> restore into a fresh, large tree -> snapshot again:
  // the two describe the same set of node prefixes.
  absl::Status SnapshotRoundTrip() {
    ++stats_.restores;
    const TreeSnapshot snap = tree_->Snapshot();
    BANYAN_RETURN_IF_ERROR(ValidateSnapshot(snap));
    KvPoolConfig config{DType::kF32, 1, 1, 1, tree_->page_size(), size_t{1} << 20};
    BANYAN_ASSIGN_OR_RETURN(auto storage, HostKvStorage::Create(config));
    BANYAN_ASSIGN_OR_RETURN(auto copy, KvTree::Create(std::move(storage)));
    BANYAN_ASSIGN_OR_RETURN(auto restored, copy->Restore(snap));
    DRIVER_CHECK(restored.size() == snap.nodes.size(), "restore node count");
    BANYAN_RETURN_IF_ERROR(copy->CheckInvariants());
    const TreeSnapshot again = copy->Snapshot();
    DRIVER_CHECK(again.nodes.size() == snap.nodes.size(), "restored structure has ",
                 again.nodes.size(), " nodes, original ", snap.nodes.size());
    for (size_t i = 0; i < snap.nodes.size(); ++i) {
      DRIVER_CHECK(again.nodes[i].parent == snap.nodes[i].parent &&
                       again.nodes[i].tokens == snap.nodes[i].tokens,
                   "restored node ", i, " differs");
    }
    for (const auto& r : restored) BANYAN_RETURN_IF_ERROR(copy->Release(r.branch));
    return copy->CheckInvariants();
  }

  absl::Status CheckAll() {
    BANYAN_RETURN_IF_ERROR(tree_->CheckInvariants());
    const KvTreeStats s = tree_->Stats();
    DRIVER_CHECK(s.branches == static_cast<int64_t>(live_.size()), "branch count ", s.branches);
    DRIVER_CHECK(s.pins == static_cast<int64_t>(pins_.size()), "pin count ", s.pins);
    for (const Live& b : live_) {
      BANYAN_ASSIGN_OR_RETURN(std::vector<int32_t> tokens, tree_->Tokens(b.branch));
      DRIVER_CHECK(tokens == b.tokens, "branch ", b.branch.index, " tokens differ from the model");
      absl::StatusOr<int32_t> last = tree_->LastToken(b.branch);
      DRIVER_CHECK(tokens.empty() ? absl::IsFailedPrecondition(last.status()) : last.ok() && *last == tokens.back(),
                   "branch ", b.branch.index, " last token ", last.ok() ? *last : -1);
      BANYAN_ASSIGN_OR_RETURN(std::vector<KvSlot> slots, tree_->Slots(b.branch));
      for (size_t i = 0; i < slots.size(); ++i) BANYAN_RETURN_IF_ERROR(CheckKv(slots[i], b.tokens[i], i));
    }
    for (const Pinned& p : pins_) {
      BANYAN_ASSIGN_OR_RETURN(NodeInfo info, tree_->GetNode(p.pin.node()));
      DRIVER_CHECK(info.prefix_length + info.length == p.end, "pinned node changed");
    }
    return absl::OkStatus();
  }

  static constexpr size_t kMaxBranches = 24;
  Choices* in_;
  int32_t check_every_;
  uint32_t alphabet_ = 2;
  std::unique_ptr<KvTree> tree_;
  float* kv_ = nullptr;
  attention::KvLayout layout_;
  std::vector<Live> live_;
  std::vector<Pinned> pins_;
  std::vector<Branch> stale_;
  attention::AttentionPlan plan_;
  DriverStats stats_;
};

#undef DRIVER_CHECK

}  // namespace

absl::Status RunOpStream(const uint8_t* data, size_t size, DriverStats* stats) {
  ByteChoices in(data, size);
  Driver driver(&in, 1);
  absl::Status status = driver.Run(nullptr);
  if (stats != nullptr) *stats = driver.stats();
  return status;
}

absl::Status RunRandomOps(uint64_t seed, int64_t num_ops, int32_t check_every, DriverStats* stats) {
  RngChoices in(seed, num_ops);
  Driver driver(&in, std::max(1, check_every));
  absl::Status status = driver.Run(&in);
  if (stats != nullptr) *stats = driver.stats();
  return status;
}

}  // namespace banyan::kv_tree::testing

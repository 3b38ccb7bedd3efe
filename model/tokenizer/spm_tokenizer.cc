#include "model/tokenizer/spm_tokenizer.h"

#include <cmath>
#include <cstdio>
#include <limits>
#include <queue>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "model/tokenizer/unicode.h"
#include "sdk/base/absl_string_view.h"

namespace banyan::model {
namespace {
constexpr char kSpace[] = "\xe2\x96\x81";  // U+2581
}  // namespace

absl::StatusOr<std::unique_ptr<SpmTokenizer>> SpmTokenizer::Create(SpmSpec spec) {
  const size_t n = spec.vocab.size();
  if (spec.scores.size() != n || (!spec.types.empty() && spec.types.size() != n)) {
    return absl::InvalidArgumentError(absl::StrCat("SentencePiece vocabulary of ", n,
                                                   " tokens has ", spec.scores.size(), " scores and ",
                                                   spec.types.size(), " types"));
  }
  for (int32_t id : {spec.bos_id, spec.eos_id, spec.unk_id}) {
    if (id >= static_cast<int64_t>(n)) return absl::InvalidArgumentError("special token id out of range");
  }
  if (spec.add_bos && spec.bos_id < 0) spec.add_bos = false;
  std::unique_ptr<SpmTokenizer> t(new SpmTokenizer());
  t->byte_ids_.fill(-1);
  t->pieces_.resize(n);
  t->special_.assign(n, false);
  std::vector<AddedToken> added;
  for (size_t id = 0; id < n; ++id) {
    const std::string& text = spec.vocab[id];
    const auto type = static_cast<SpmTokenType>(spec.types.empty() ? 1 : spec.types[id]);
    t->token_to_id_.emplace(text, static_cast<int32_t>(id));
    unsigned byte = 0;
    if (type == SpmTokenType::kByte && text.size() == 6 &&
        std::sscanf(text.c_str(), "<0x%02X>", &byte) == 1 && byte < 256) {
      t->byte_ids_[byte] = static_cast<int32_t>(id);
      t->pieces_[id] = std::string(1, static_cast<char>(byte));
      continue;
    }
    if (type == SpmTokenType::kControl || type == SpmTokenType::kUserDefined ||
        type == SpmTokenType::kUnknown) {
      // Matched as text in the input (llama.cpp's special-token cache).
      t->special_[id] = type != SpmTokenType::kUserDefined;
      if (!text.empty()) added.push_back({text, static_cast<int32_t>(id), t->special_[id], false, false});
      t->pieces_[id] = text;
      if (type == SpmTokenType::kUserDefined) t->piece_to_id_.emplace(text, static_cast<int32_t>(id));
      continue;
    }
    // Ordinary piece: "▁" stands for a space.
    std::string decoded;
    for (size_t k = 0; k < text.size();) {
      if (text.compare(k, 3, kSpace) == 0) {
        decoded.push_back(' ');
        k += 3;
      } else {
        decoded.push_back(text[k++]);
      }
    }
    t->pieces_[id] = std::move(decoded);
    if (type != SpmTokenType::kUnused) t->piece_to_id_.emplace(text, static_cast<int32_t>(id));
  }
  t->scores_ = std::move(spec.scores);
  for (float& s : t->scores_) {
    if (std::isnan(s)) s = -std::numeric_limits<float>::infinity();  // keeps the heap ordered
  }
  t->added_ = AddedTokenMatcher(std::move(added));
  for (size_t rank = 0; rank < spec.merges.size(); ++rank) {
    const auto& [left, right] = spec.merges[rank];
    auto l = t->token_to_id_.find(left), r = t->token_to_id_.find(right);
    auto m = t->token_to_id_.find(left + right);
    if (l == t->token_to_id_.end() || r == t->token_to_id_.end() || m == t->token_to_id_.end()) {
      return absl::InvalidArgumentError(absl::StrCat("merge '", left, " ", right, "' (rank ", rank,
                                                     ") names a token outside the vocabulary"));
    }
    const uint64_t key = (static_cast<uint64_t>(l->second) << 32) | static_cast<uint32_t>(r->second);
    t->merges_.try_emplace(key, Merge{static_cast<int32_t>(rank), m->second});  // the first rank wins
  }
  t->add_space_prefix_ = spec.add_space_prefix;
  t->space_prefix_ = spec.space_prefix;
  t->fuse_unk_ = spec.fuse_unk;
  t->strip_leading_space_ = spec.add_space_prefix;
  t->add_bos_ = spec.add_bos;
  t->bos_id_ = spec.bos_id;
  t->eos_id_ = spec.eos_id;
  t->unk_id_ = spec.unk_id;
  return t;
}

void SpmTokenizer::Resegment(std::string_view piece, std::vector<int32_t>* out) const {
  auto it = piece_to_id_.find(AsAbsl(piece));
  if (it != piece_to_id_.end()) {
    out->push_back(it->second);
    return;
  }
  // Every merged symbol is a vocabulary piece, so only single characters
  // reach here: fall back to their bytes.
  for (char ch : piece) {
    const int32_t id = byte_ids_[static_cast<uint8_t>(ch)];
    if (id >= 0) {
      out->push_back(id);
    } else if (unk_id_ >= 0) {
      out->push_back(unk_id_);
    }
  }
}

void SpmTokenizer::EncodeRun(const std::string& text, std::vector<int32_t>* out) const {
  struct Symbol {
    int32_t prev, next;
    uint32_t begin, len;
  };
  std::vector<Symbol> sym;
  for (const CodePoint& cp : SplitUtf8(text)) {
    const int32_t k = static_cast<int32_t>(sym.size());
    sym.push_back({k - 1, k + 1, cp.begin, cp.end - cp.begin});
  }
  if (sym.empty()) return;
  sym.back().next = -1;
  struct Bigram {
    float score;
    int32_t left, right;
    uint32_t size;
    bool operator<(const Bigram& o) const {  // max-heap: higher score, then leftmost
      return score != o.score ? score < o.score : left > o.left;
    }
  };
  std::priority_queue<Bigram> queue;
  auto consider = [&](int32_t left) {
    if (left < 0 || sym[left].next < 0) return;
    const int32_t right = sym[left].next;
    const uint32_t size = sym[left].len + sym[right].len;
    auto it = piece_to_id_.find(AsAbsl(std::string_view(text).substr(sym[left].begin, size)));
    if (it == piece_to_id_.end()) return;
    queue.push({scores_[it->second], left, right, size});
  };
  for (int32_t i = 0; i + 1 < static_cast<int32_t>(sym.size()); ++i) consider(i);
  while (!queue.empty()) {
    const Bigram b = queue.top();
    queue.pop();
    Symbol& left = sym[b.left];
    Symbol& right = sym[b.right];
    if (left.len == 0 || right.len == 0 || left.len + right.len != b.size || left.next != b.right) {
      continue;  // stale
    }
    left.len += right.len;
    right.len = 0;
    left.next = right.next;
    if (right.next >= 0) sym[right.next].prev = b.left;
    consider(left.prev);
    consider(b.left);
  }
  for (int32_t i = 0; i >= 0; i = sym[i].next) {
    Resegment(std::string_view(text).substr(sym[i].begin, sym[i].len), out);
  }
}

void SpmTokenizer::EncodeRunByRank(const std::string& text, std::vector<int32_t>* out) const {
  struct Symbol {
    int32_t prev, next, id;
  };
  std::vector<Symbol> sym;
  auto add = [&](int32_t id) {
    const int32_t k = static_cast<int32_t>(sym.size());
    sym.push_back({k - 1, k + 1, id});
  };
  bool last_unk = false;
  for (const CodePoint& cp : SplitUtf8(text)) {
    const std::string_view ch = std::string_view(text).substr(cp.begin, cp.end - cp.begin);
    if (auto it = piece_to_id_.find(AsAbsl(ch)); it != piece_to_id_.end()) {
      add(it->second);
      last_unk = false;
      continue;
    }
    bool bytes_known = true;
    for (char b : ch) bytes_known &= byte_ids_[static_cast<uint8_t>(b)] >= 0;
    if (bytes_known) {  // byte fallback: one symbol per UTF-8 byte
      for (char b : ch) add(byte_ids_[static_cast<uint8_t>(b)]);
      last_unk = false;
    } else if (unk_id_ >= 0 && !(last_unk && fuse_unk_)) {  // fuse_unk: one <unk> per run
      add(unk_id_);
      last_unk = true;
    }
  }
  if (sym.empty()) return;
  sym.back().next = -1;
  struct Candidate {
    int32_t rank, left, right, left_id, right_id, result;
    bool operator<(const Candidate& o) const {  // max-heap: lowest rank, then leftmost
      return rank != o.rank ? rank > o.rank : left > o.left;
    }
  };
  std::priority_queue<Candidate> queue;
  auto consider = [&](int32_t left) {
    if (left < 0 || sym[left].next < 0) return;
    const int32_t right = sym[left].next;
    const uint64_t key = (static_cast<uint64_t>(sym[left].id) << 32) | static_cast<uint32_t>(sym[right].id);
    auto it = merges_.find(key);
    if (it == merges_.end()) return;
    queue.push({it->second.rank, left, right, sym[left].id, sym[right].id, it->second.result});
  };
  for (int32_t i = 0; i + 1 < static_cast<int32_t>(sym.size()); ++i) consider(i);
  while (!queue.empty()) {
    const Candidate c = queue.top();
    queue.pop();
    Symbol& left = sym[c.left];
    Symbol& right = sym[c.right];
    if (left.id != c.left_id || right.id != c.right_id || left.next != c.right) continue;  // stale
    left.id = c.result;
    right.id = -1;
    left.next = right.next;
    if (right.next >= 0) sym[right.next].prev = c.left;
    consider(left.prev);
    consider(c.left);
  }
  for (int32_t i = 0; i >= 0; i = sym[i].next) out->push_back(sym[i].id);
}

absl::StatusOr<std::vector<int32_t>> SpmTokenizer::Encode(std::string_view text,
                                                          bool add_special_tokens) const {
  if (text.size() >= (size_t{1} << 30)) {
    return absl::InvalidArgumentError("text to tokenize must be under 1 GiB");
  }
  std::vector<int32_t> ids;
  if (add_special_tokens && add_bos_) ids.push_back(bos_id_);
  bool after_special = true;
  for (const TextSegment& seg : added_.Split(text)) {
    if (seg.token >= 0) {
      ids.push_back(seg.token);
      after_special = true;
      continue;
    }
    if (!merges_.empty() && seg.end == seg.begin) continue;  // tokenizer.json: empty runs stay empty
    std::string run;
    bool prefix = add_space_prefix_ && after_special;
    if (space_prefix_ != SpacePrefix::kEveryRun && seg.end > seg.begin && text[seg.begin] == ' ') {
      prefix = false;  // Metaspace: the run already starts with "▁"
    }
    if (space_prefix_ == SpacePrefix::kFirstRunUnlessSpace && seg.begin != 0) prefix = false;
    if (prefix) run = kSpace;
    for (size_t k = seg.begin; k < seg.end; ++k) {
      if (text[k] == ' ') {
        run += kSpace;
      } else {
        run.push_back(text[k]);
      }
    }
    if (merges_.empty()) {
      EncodeRun(run, &ids);
    } else {
      EncodeRunByRank(run, &ids);
    }
    after_special = false;
  }
  return ids;
}

}  // namespace banyan::model

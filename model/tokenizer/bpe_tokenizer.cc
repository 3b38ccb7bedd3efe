#include "model/tokenizer/bpe_tokenizer.h"

#include <queue>

#include "absl/strings/str_cat.h"
#include "model/tokenizer/unicode.h"
#include "sdk/base/absl_string_view.h"

namespace banyan::model {
namespace {
uint64_t PairKey(int32_t a, int32_t b) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
}
}  // namespace

absl::StatusOr<std::unique_ptr<BpeTokenizer>> BpeTokenizer::Create(BpeSpec spec) {
  std::unique_ptr<BpeTokenizer> t(new BpeTokenizer());
  const int32_t n = static_cast<int32_t>(spec.vocab.size());
  t->pieces_.resize(n);
  t->special_.assign(n, false);
  std::vector<bool> is_added(n, false);
  for (const AddedToken& a : spec.added_tokens) {
    if (a.id < 0 || a.id >= n) {
      return absl::InvalidArgumentError(absl::StrCat("added token '", a.content, "' has id ", a.id,
                                                     " outside the vocabulary of ", n));
    }
    is_added[a.id] = true;
    t->special_[a.id] = a.special;
    t->pieces_[a.id] = a.content;
    t->token_to_id_[a.content] = a.id;
  }
  for (int32_t id = 0; id < n; ++id) {
    const std::string& text = spec.vocab[id];
    if (is_added[id] || text.empty()) continue;
    t->word_to_id_.emplace(text, id);  // a repeated token keeps its first id
    t->token_to_id_.emplace(text, id);
    // Decoded bytes: map each alphabet character back to its byte; other
    // characters stay as their own UTF-8.
    std::string bytes;
    for (const CodePoint& cp : SplitUtf8(text)) {
      const int b = cp.valid ? UnicodeToByte(cp.value) : -1;
      if (b >= 0) {
        bytes.push_back(static_cast<char>(b));
      } else {
        bytes.append(text, cp.begin, cp.end - cp.begin);
      }
    }
    t->pieces_[id] = std::move(bytes);
  }
  t->merges_.reserve(spec.merges.size());
  for (size_t r = 0; r < spec.merges.size(); ++r) {
    const auto& [a, b] = spec.merges[r];
    auto ia = t->word_to_id_.find(a), ib = t->word_to_id_.find(b);
    auto ic = t->word_to_id_.find(a + b);
    if (ia == t->word_to_id_.end() || ib == t->word_to_id_.end() || ic == t->word_to_id_.end()) {
      return absl::InvalidArgumentError(absl::StrCat("merge ", r, " ('", a, "' '", b,
                                                     "') names a token outside the vocabulary"));
    }
    // The first (lowest-rank) occurrence of a pair wins.
    t->merges_.emplace(PairKey(ia->second, ib->second),
                       Merge{static_cast<int32_t>(r), ic->second});
  }
  t->added_ = AddedTokenMatcher(std::move(spec.added_tokens));
  t->pre_ = spec.pre_tokenizer;
  t->nfc_ = spec.nfc;
  t->ignore_merges_ = spec.ignore_merges;
  t->unk_id_ = spec.unk_id;
  t->prefix_ids_ = std::move(spec.prefix_ids);
  t->bos_id_ = spec.bos_id;
  t->eos_id_ = spec.eos_id;
  for (int32_t id : t->prefix_ids_) {
    if (id < 0 || id >= n) return absl::InvalidArgumentError("BOS/prefix token id out of range");
  }
  return t;
}

void BpeTokenizer::EncodeWord(std::string_view mapped, std::vector<int32_t>* out) const {
  if (ignore_merges_) {
    auto it = word_to_id_.find(AsAbsl(mapped));
    if (it != word_to_id_.end()) {
      out->push_back(it->second);
      return;
    }
  }
  struct Symbol {
    int32_t id;
    int32_t prev;
    int32_t next;
  };
  std::vector<Symbol> sym;
  for (const CodePoint& cp : SplitUtf8(mapped)) {
    auto it = word_to_id_.find(AsAbsl(mapped.substr(cp.begin, cp.end - cp.begin)));
    const int32_t id = it != word_to_id_.end() ? it->second : unk_id_;
    if (id < 0) continue;  // no such character and no unknown token: dropped, as HF does
    const int32_t k = static_cast<int32_t>(sym.size());
    sym.push_back({id, k - 1, k + 1});
  }
  if (sym.empty()) return;
  sym.back().next = -1;
  struct Candidate {
    int32_t rank;
    int32_t pos;
    int32_t left;
    int32_t right;
    bool operator>(const Candidate& o) const {
      return rank != o.rank ? rank > o.rank : pos > o.pos;
    }
  };
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<Candidate>> queue;
  auto consider = [&](int32_t pos) {
    if (pos < 0 || sym[pos].next < 0) return;
    auto it = merges_.find(PairKey(sym[pos].id, sym[sym[pos].next].id));
    if (it != merges_.end()) queue.push({it->second.rank, pos, sym[pos].id, sym[sym[pos].next].id});
  };
  for (int32_t i = 0; i + 1 < static_cast<int32_t>(sym.size()); ++i) consider(i);
  while (!queue.empty()) {
    const Candidate c = queue.top();
    queue.pop();
    Symbol& left = sym[c.pos];
    if (left.id != c.left || left.next < 0 || sym[left.next].id != c.right) continue;  // stale
    const int32_t right = left.next;
    left.id = merges_.find(PairKey(c.left, c.right))->second.result;
    left.next = sym[right].next;
    if (left.next >= 0) sym[left.next].prev = c.pos;
    sym[right].id = -1;  // dead
    consider(left.prev);
    consider(c.pos);
  }
  for (int32_t i = 0; i >= 0; i = sym[i].next) out->push_back(sym[i].id);
}

absl::StatusOr<std::vector<int32_t>> BpeTokenizer::Encode(std::string_view text,
                                                          bool add_special_tokens) const {
  if (text.size() >= (size_t{1} << 31)) {
    return absl::InvalidArgumentError("text to tokenize must be under 2 GiB");
  }
  std::vector<int32_t> ids;
  if (add_special_tokens) ids = prefix_ids_;
  std::string normalized;
  for (const TextSegment& seg : added_.Split(text)) {
    if (seg.token >= 0) {
      ids.push_back(seg.token);
      continue;
    }
    std::string_view part = text.substr(seg.begin, seg.end - seg.begin);
    if (nfc_) {
      normalized = NormalizeNfc(part);
      part = normalized;
    }
    for (auto [a, b] : PreTokenize(pre_, part)) {
      EncodeWord(BytesToByteLevel(part.substr(a, b - a)), &ids);
    }
  }
  return ids;
}

}  // namespace banyan::model

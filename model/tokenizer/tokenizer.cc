#include "model/tokenizer/tokenizer.h"

#include "absl/strings/str_cat.h"
#include "model/tokenizer/unicode.h"

namespace banyan::model {

absl::StatusOr<std::string> Tokenizer::TokenBytes(int32_t id, size_t previous_count) const {
  if (id < 0 || id >= vocab_size()) {
    return absl::OutOfRangeError(absl::StrCat("token id ", id, " is outside the vocabulary [0, ",
                                              vocab_size(), ")"));
  }
  const std::string& piece = pieces_[id];
  if (strip_leading_space_ && previous_count == 0 && !piece.empty() && piece[0] == ' ') {
    return piece.substr(1);
  }
  return piece;
}

absl::StatusOr<std::string> Tokenizer::Decode(absl::Span<const int32_t> ids) const {
  std::string out;
  for (size_t i = 0; i < ids.size(); ++i) {
    auto bytes = TokenBytes(ids[i], i);
    if (!bytes.ok()) return bytes.status();
    out += *bytes;
  }
  return out;
}

std::optional<int32_t> Tokenizer::FindToken(std::string_view token) const {
  auto it = token_to_id_.find(absl::string_view(token.data(), token.size()));
  if (it == token_to_id_.end()) return std::nullopt;
  return it->second;
}

bool Tokenizer::IsSpecial(int32_t id) const {
  return id >= 0 && id < static_cast<int32_t>(special_.size()) && special_[id];
}

size_t CompleteUtf8Prefix(std::string_view bytes) {
  // Look back at most 3 bytes for a lead byte whose sequence is unfinished.
  const size_t n = bytes.size();
  for (size_t back = 1; back <= 3 && back <= n; ++back) {
    const uint8_t b = static_cast<uint8_t>(bytes[n - back]);
    if ((b & 0xc0) == 0x80) continue;  // continuation byte: keep looking
    const int len = Utf8SequenceLength(b);
    if (len > 1 && static_cast<size_t>(len) > back) {
      // All bytes after the lead are continuations (checked above): unfinished.
      return n - back;
    }
    return n;
  }
  return n;
}

absl::StatusOr<std::string> StreamDecoder::Add(int32_t id) {
  auto bytes = tokenizer_.TokenBytes(id, count_);
  if (!bytes.ok()) return bytes.status();
  ++count_;
  pending_ += *bytes;
  const size_t complete = CompleteUtf8Prefix(pending_);
  std::string out = pending_.substr(0, complete);
  pending_.erase(0, complete);
  return out;
}

std::string StreamDecoder::Flush() {
  std::string out;
  out.swap(pending_);
  return out;
}

}  // namespace banyan::model

#include "model/tokenizer/added_tokens.h"

#include <algorithm>

#include "model/tokenizer/unicode.h"

namespace banyan::model {
namespace {
bool IsAsciiSpace(char c) { return c == ' ' || (c >= '\t' && c <= '\r'); }
}  // namespace

AddedTokenMatcher::AddedTokenMatcher(std::vector<AddedToken> tokens)
    : tokens_(std::move(tokens)), by_first_byte_(256) {
  for (size_t i = 0; i < tokens_.size(); ++i) {
    if (tokens_[i].content.empty()) continue;
    by_first_byte_[static_cast<uint8_t>(tokens_[i].content[0])].push_back(static_cast<int>(i));
  }
  for (auto& list : by_first_byte_) {
    std::stable_sort(list.begin(), list.end(), [&](int a, int b) {
      return tokens_[a].content.size() > tokens_[b].content.size();
    });
  }
}

std::vector<TextSegment> AddedTokenMatcher::Split(std::string_view text) const {
  std::vector<TextSegment> out;
  size_t plain_start = 0;
  size_t i = 0;
  while (i < text.size() && !tokens_.empty()) {
    const auto& candidates = by_first_byte_[static_cast<uint8_t>(text[i])];
    const AddedToken* match = nullptr;
    for (int idx : candidates) {
      const std::string& c = tokens_[idx].content;
      if (text.compare(i, c.size(), c) == 0) {
        match = &tokens_[idx];
        break;
      }
    }
    if (match == nullptr) {
      ++i;
      continue;
    }
    size_t left = i;
    if (match->lstrip) {
      while (left > plain_start && IsAsciiSpace(text[left - 1])) --left;
    }
    size_t right = i + match->content.size();
    if (match->rstrip) {
      while (right < text.size() && IsAsciiSpace(text[right])) ++right;
    }
    if (left > plain_start) out.push_back({plain_start, left, -1});
    out.push_back({left, right, match->id});
    plain_start = i = right;
  }
  if (plain_start < text.size()) out.push_back({plain_start, text.size(), -1});
  return out;
}

}  // namespace banyan::model

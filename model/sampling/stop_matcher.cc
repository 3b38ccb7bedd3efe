#include "model/sampling/stop_matcher.h"

#include <algorithm>
#include <utility>

namespace banyan::model {

StopMatcher::StopMatcher(std::vector<std::string> stops) : stops_(std::move(stops)) {
  for (const std::string& s : stops_) longest_ = std::max(longest_, s.size());
}

absl::StatusOr<StopMatcher> StopMatcher::Create(std::vector<std::string> stop_strings) {
  for (const std::string& s : stop_strings) {
    if (s.empty()) return absl::InvalidArgumentError("empty stop string");
  }
  return StopMatcher(std::move(stop_strings));
}

bool StopMatcher::Append(std::string_view piece) {
  if (stopped_) return true;
  const size_t old = text_.size();
  text_.append(piece.data(), piece.size());
  if (longest_ == 0) return false;
  // A new match must end inside the new piece, so it starts at most
  // longest_ - 1 bytes before it.
  const size_t from = old >= longest_ - 1 ? old - (longest_ - 1) : 0;
  size_t best = std::string::npos;
  for (size_t i = 0; i < stops_.size(); ++i) {
    const size_t at = text_.find(stops_[i], from);
    if (at < best) {
      best = at;
      matched_ = static_cast<int>(i);
    }
  }
  if (best == std::string::npos) return false;
  text_.resize(best);
  stopped_ = true;
  return true;
}

size_t StopMatcher::SafeLength() const {
  if (stopped_ || longest_ == 0) return text_.size();
  const size_t n = text_.size();
  const size_t start = n >= longest_ - 1 ? n - (longest_ - 1) : 0;
  for (size_t i = start; i < n; ++i) {
    const std::string_view tail(text_.data() + i, n - i);
    for (const std::string& s : stops_) {
      if (s.size() > tail.size() && std::string_view(s).substr(0, tail.size()) == tail) return i;
    }
  }
  return n;
}

}  // namespace banyan::model

#include "search/vote.h"

#include <algorithm>
#include <numeric>

namespace banyan::search {

void VoteTally::Add(const std::string& answer, double weight) {
  auto [it, inserted] = index_.try_emplace(answer, entries_.size());
  if (inserted) {
    entries_.push_back(VoteEntry{answer, 0, 0});
    last_change_.push_back(0);
  }
  VoteEntry& e = entries_[it->second];
  e.weight += weight;
  ++e.count;
  last_change_[it->second] = ++clock_;
  ++votes_;
}

std::vector<VoteEntry> VoteTally::Ranking() const {
  std::vector<size_t> order(entries_.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if (entries_[a].weight != entries_[b].weight) return entries_[a].weight > entries_[b].weight;
    if (entries_[a].count != entries_[b].count) return entries_[a].count > entries_[b].count;
    return last_change_[a] < last_change_[b];
  });
  std::vector<VoteEntry> ranking;
  ranking.reserve(order.size());
  for (size_t i : order) ranking.push_back(entries_[i]);
  return ranking;
}

VoteEntry VoteTally::Leader() const {
  if (entries_.empty()) return VoteEntry{};
  return Ranking().front();
}

bool VoteTally::Decided(int64_t remaining_samples, double max_weight_each) const {
  if (entries_.empty()) return false;
  double first = 0, second = 0;
  for (const VoteEntry& e : entries_) {
    if (e.weight > first) {
      second = first;
      first = e.weight;
    } else if (e.weight > second) {
      second = e.weight;
    }
  }
  return first - second > static_cast<double>(remaining_samples) * max_weight_each;
}

}  // namespace banyan::search

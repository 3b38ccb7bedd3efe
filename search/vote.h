// VoteTally: majority and weighted voting over extracted answers, with the
// early-stop test of self-consistency: stop sampling once the leader cannot be
// overtaken by the samples that are left.
//
//   VoteTally tally;
//   tally.Add("391", 1.0);  tally.Add("381", 1.0);  tally.Add("391", 1.0);
//   tally.Leader();                          // {"391", 2.0}
//   tally.Decided(/*remaining=*/0, /*max_weight_each=*/1.0);  // true: 2 - 1 > 0
//   tally.Decided(/*remaining=*/1, /*max_weight_each=*/1.0);  // false: one more "381" ties
//
// Decided(remaining, w) is true when no assignment of the remaining samples
// (each adding at most w to one answer, possibly a new one) can make another
// answer reach the leader's weight: leader - runner_up > remaining * w. Ties
// therefore keep sampling. Answers are compared after normalization by the
// caller (AnswerExtractor). Samples with no answer count toward the cost but
// not toward any answer. Thread-compatible.
#ifndef BANYAN_SEARCH_VOTE_H_
#define BANYAN_SEARCH_VOTE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"

namespace banyan::search {

struct VoteEntry {
  std::string answer;
  double weight = 0;
  int32_t count = 0;
};

class VoteTally {
 public:
  // Adds one vote of `weight` (>= 0) for `answer`.
  void Add(const std::string& answer, double weight = 1.0);
  // A sample that produced no answer.
  void AddAbstention() { ++abstentions_; }

  // All answers by decreasing weight (ties: more votes, then the answer that
  // reached that weight first).
  std::vector<VoteEntry> Ranking() const;
  // The leading answer; an empty entry when there are no votes.
  VoteEntry Leader() const;
  bool Decided(int64_t remaining_samples, double max_weight_each) const;

  int32_t votes() const { return votes_; }
  int32_t abstentions() const { return abstentions_; }

 private:
  absl::flat_hash_map<std::string, size_t> index_;
  std::vector<VoteEntry> entries_;  // in first-seen order
  std::vector<int64_t> last_change_;
  int64_t clock_ = 0;
  int32_t votes_ = 0;
  int32_t abstentions_ = 0;
};

}  // namespace banyan::search

#endif  // BANYAN_SEARCH_VOTE_H_

// Internal to search/: the concrete strategies behind CreateStrategy, and the
// pure pieces they are built from (exposed for unit tests).
#ifndef BANYAN_SEARCH_STRATEGIES_H_
#define BANYAN_SEARCH_STRATEGIES_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "search/strategy.h"

namespace banyan::search {

std::unique_ptr<Strategy> NewSelfConsistency();
std::unique_ptr<Strategy> NewTreeOfThought(StrategyKind kind);  // kTotBfs, kTotDfs, kBeam
std::unique_ptr<Strategy> NewMcts();
std::unique_ptr<Strategy> NewBestOfN();

// UCT (Kocsis & Szepesvari): mean value + c * sqrt(ln(parent_visits) / visits);
// +infinity for an unvisited child so every child is tried once.
double Uct(double value_sum, int64_t visits, int64_t parent_visits, double exploration);

// Indices of the `k` largest values, largest first; ties go to the smaller
// index (deterministic).
std::vector<size_t> TopK(const std::vector<double>& values, size_t k);

// Self-consistency waves: the size of each wave for n samples.
int32_t WaveSize(int32_t n, int32_t wave_size);

}  // namespace banyan::search

#endif  // BANYAN_SEARCH_STRATEGIES_H_

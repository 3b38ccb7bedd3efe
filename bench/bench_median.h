// Median of a sample (the upper middle for an even count; 0 for none), for
// benchmarks that report medians of repeated runs. Header-only.
#ifndef BANYAN_BENCH_BENCH_MEDIAN_H_
#define BANYAN_BENCH_BENCH_MEDIAN_H_

#include <algorithm>
#include <vector>

namespace banyan::bench {

inline double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace banyan::bench

#endif  // BANYAN_BENCH_BENCH_MEDIAN_H_

#include "attention/work_plan_stream_k.h"

#include <algorithm>
#include <cmath>

namespace banyan::attention {

void CutStreamK(const std::vector<StreamKRun>& runs, int32_t ctas, std::vector<StreamKPiece>* pieces,
                std::vector<int32_t>* run_pieces) {
  pieces->clear();
  run_pieces->assign(runs.size(), 0);
  double total = 0.0;
  for (const StreamKRun& r : runs) total += r.tiles * r.tile_cost;
  const double quota = total / ctas;
  const int32_t last_cta = ctas - 1;
  // The CTA that owns a point of the cumulative cost line.
  auto owner = [&](double x) {
    if (quota <= 0.0) return 0;
    return static_cast<int32_t>(std::min<double>(last_cta, std::floor(x / quota)));
  };
  double start = 0.0;  // cumulative cost where the current run's tiles begin
  for (size_t r = 0; r < runs.size(); ++r) {
    const StreamKRun& run = runs[r];
    int32_t& count = (*run_pieces)[r];
    if (run.tiles == 0) {
      pieces->push_back({static_cast<int32_t>(r), owner(start), 0, 0, count++});
      continue;
    }
    const double c = run.tile_cost;
    int32_t t = 0;
    while (t < run.tiles) {
      const int32_t cta = owner(start + (t + 0.5) * c);
      // First tile past t owned by a later CTA: the least i with
      // start + (i + 1/2) c >= (cta + 1) quota (none for the last CTA).
      int32_t end = run.tiles;
      if (cta < last_cta) {
        const double bound = ((cta + 1) * quota - start) / c - 0.5;
        end = std::clamp(static_cast<int32_t>(std::ceil(bound)), t + 1, run.tiles);
        // Floating point: step to the exact owner change.
        while (end > t + 1 && owner(start + (end - 0.5) * c) > cta) --end;
        while (end < run.tiles && owner(start + (end + 0.5) * c) == cta) ++end;
      }
      pieces->push_back({static_cast<int32_t>(r), cta, t, end, count++});
      t = end;
    }
    start += run.tiles * c;
  }
}

void CutOneWave(const std::vector<StreamKRun>& runs, int32_t per_run, std::vector<StreamKPiece>* pieces,
                std::vector<int32_t>* run_pieces) {
  pieces->clear();
  run_pieces->assign(runs.size(), 0);
  for (size_t r = 0; r < runs.size(); ++r) {
    const int32_t tiles = runs[r].tiles;
    const int32_t n = std::max(1, std::min(per_run, tiles));
    const int32_t cta0 = static_cast<int32_t>(r) * per_run;
    for (int32_t c = 0; c < n; ++c) {
      // Piece c: tiles [c * tiles / n, (c + 1) * tiles / n).
      const int32_t begin = static_cast<int32_t>(int64_t{c} * tiles / n);
      const int32_t end = static_cast<int32_t>(int64_t{c + 1} * tiles / n);
      pieces->push_back({static_cast<int32_t>(r), cta0 + c, begin, end, c});
    }
    (*run_pieces)[r] = n;
  }
}

double StreamKMakespan(const std::vector<StreamKRun>& runs, const std::vector<StreamKPiece>& pieces, int32_t ctas,
                       double item_overhead_us) {
  std::vector<double> load(ctas, 0.0);
  for (const StreamKPiece& p : pieces) {
    load[p.cta] += (p.tile_end - p.tile_begin) * runs[p.run].tile_cost + item_overhead_us;
  }
  return load.empty() ? 0.0 : *std::max_element(load.begin(), load.end());
}

}  // namespace banyan::attention

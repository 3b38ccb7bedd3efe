// Fits the rates of the light-CTA split (attention/work_plan.h DeviceModel:
// at head dim 64 tma_tile_us, tma_item_gap_us, light_item_us, light_tile_us,
// light_warp_bytes_per_us, max_dominant_chunk; at head dim 128 their _d128
// forms) to measured kernel times at forced light-CTA and chunk counts,
// through the planner itself (BuildWorkPlan), so the fit judges the plans the
// engine would really get. The two head dims' rates are fitted apart (each
// shape's plan depends on its own head dim's rates; light_tile_us, shared,
// stays in the head dim 64 grid).
//
//   light_split_fit MEASUREMENTS [TOP]
//
// MEASUREMENTS: lines "q_heads kv_heads head_dim leaves prefix suffix
// light_ctas chunks us" (two-level trees: `leaves` branches under one
// `prefix`-token node, each with its own `suffix` tokens; `chunks`: the
// split-K chunk count the prefix got; "leaves prefix suffix light_ctas chunks
// us" means h32/8 at head dim 64),
// e.g. attention_bench's engine rows with BANYAN_BENCH_LIGHT_CTAS and
// BANYAN_BENCH_LIGHT_CHUNKS forced (scripts/light_sweep.sh writes them); '#'
// starts a comment. Lines of five fields (no chunks column, session 35's
// file) match whatever chunk count a rate set gives. Several counts per shape
// are what the fit needs; the best measured plan of a shape is its reference.
//
// A rate set's score: per shape the plan the planner builds with those rates
// (its light count and the prefix's chunk count: the chunk count moves with
// the rates too, so a time measured under other rates at the same light
// count may be another plan), that plan's time (at a light count that was not
// measured: the slower of the two measured counts around it with the same
// chunks; at a chunk count never measured: the shape's slowest time, so the
// fit does not reward guesses), the log of that over the shape's best,
// summed. Per head dim: the current DeviceModel's picks and score, then the
// TOP (default 5) rate sets of a grid with their picks; last, the best rates
// as a BANYAN_BENCH_RATES line for attention_bench. A CPU tool: no device
// needed once the measurements are taken.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <istream>
#include <map>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "attention/testing/random_plan.h"
#include "attention/work_plan.h"
#include "bench/cost_rates.h"
#include "sdk/base/rng.h"

namespace banyan::attention {
namespace {

// A measured plan: light CTAs and the prefix's split-K chunks (0: not recorded).
using PlanKey = std::pair<int32_t, int32_t>;

struct Shape {
  int32_t q_heads = 32, kv_heads = 8, head_dim = 64;
  int32_t leaves = 0, prefix = 0, suffix = 0;
  std::map<PlanKey, double> us;  // measured time per plan
  AttentionPlan plan;
};

// Parses the measurement lines; false (with a message) on a malformed one.
bool ReadShapes(std::istream& in, std::vector<Shape>* shapes) {
  std::map<std::vector<int32_t>, size_t> index;  // q_heads, kv_heads, head_dim, leaves, prefix, suffix
  std::string line;
  for (int line_no = 1; std::getline(in, line); ++line_no) {
    if (const size_t hash = line.find('#'); hash != std::string::npos) line.resize(hash);
    std::istringstream fields(line);
    std::vector<double> v;
    for (double x; fields >> x;) v.push_back(x);
    if (v.empty() && fields.eof()) continue;  // blank or comment
    const bool ok = fields.eof() && (v.size() == 5 || v.size() == 6 || v.size() == 9) &&
                    std::all_of(v.begin(), v.end() - 1, [](double x) { return x >= 0 && x == std::floor(x); });
    std::vector<int32_t> f;  // q_heads kv_heads head_dim leaves prefix suffix light chunks
    if (ok && v.size() != 9) f = {32, 8, kLightHeadDim};
    if (ok) {
      for (size_t i = 0; i + 1 < v.size(); ++i) f.push_back(static_cast<int32_t>(v[i]));
    }
    if (ok && v.size() == 5) f.push_back(0);  // no chunks column
    const double us = ok ? v.back() : 0.0;
    const bool valid = ok && f[0] >= 1 && f[1] >= 1 && f[0] % f[1] == 0 && (f[2] == kLightHeadDim || f[2] == 128) &&
                       f[3] >= 1 && f[4] >= 1 && f[5] >= 1 && us > 0;
    if (!valid) {
      std::fprintf(stderr,
                   "line %d: want \"[q_heads kv_heads head_dim] leaves prefix suffix light_ctas [chunks] us\" "
                   "(head dim 64 or 128)\n",
                   line_no);
      return false;
    }
    const std::vector<int32_t> key(f.begin(), f.begin() + 6);
    auto [it, added] = index.emplace(key, shapes->size());
    if (added) shapes->push_back({f[0], f[1], f[2], f[3], f[4], f[5], {}, {}});
    (*shapes)[it->second].us[{f[6], f[7]}] = us;
  }
  return true;
}

double Best(const Shape& s) {
  double best = INFINITY;
  for (const auto& [plan, us] : s.us) best = std::min(best, us);
  return best;
}

double Worst(const Shape& s) {
  double worst = 0.0;
  for (const auto& [plan, us] : s.us) worst = std::max(worst, us);
  return worst;
}

// The time of plan `key`: measured, or the slower of the measured light
// counts around it with its chunk count (lines without one match any), or
// the shape's slowest where its chunk count was never measured.
double TimeAt(const Shape& s, PlanKey key) {
  double below = 0.0, above = 0.0;
  int32_t below_light = -1, above_light = INT32_MAX;
  for (const auto& [plan, us] : s.us) {
    if (plan.second != 0 && plan.second != key.second) continue;
    if (plan.first == key.first) return us;
    if (plan.first < key.first && plan.first > below_light) {
      below_light = plan.first;
      below = us;
    } else if (plan.first > key.first && plan.first < above_light) {
      above_light = plan.first;
      above = us;
    }
  }
  const double t = std::max(below, above);
  return t > 0.0 ? t : Worst(s);
}

PlanKey Pick(const Shape& s, const DeviceModel& device) {
  WorkShape shape{s.q_heads, s.kv_heads, s.head_dim, 2};
  shape.light_ctas = -1;
  const WorkPlan work = BuildWorkPlan(s.plan, shape, device, PathChoice::kAuto);
  return {work.light_ctas(device.num_ctas()), work.most_chunks()};
}

struct Score {
  double log_regret = 0.0, worst = 1.0;
  std::vector<PlanKey> picks;
};
Score ScoreOf(const std::vector<Shape>& shapes, const DeviceModel& device) {
  Score score;
  for (const Shape& s : shapes) {
    const PlanKey pick = Pick(s, device);
    const double ratio = TimeAt(s, pick) / Best(s);
    score.log_regret += std::log(ratio);
    score.worst = std::max(score.worst, ratio);
    score.picks.push_back(pick);
  }
  return score;
}

void PrintPicks(const std::vector<Shape>& shapes, const Score& score) {
  for (size_t i = 0; i < shapes.size(); ++i) {
    const Shape& s = shapes[i];
    const double best_us = Best(s);
    PlanKey best{};
    for (const auto& [plan, us] : s.us) {
      if (us == best_us) best = plan;
    }
    const PlanKey pick = score.picks[i];
    const double pick_us = TimeAt(s, pick);
    std::printf("  h%d/%d D%d L%d P%d S%d: picks %d light CTAs, %d chunks (%.1f us, %.3fx the best: %d, %d, %.1f us)\n",
                s.q_heads, s.kv_heads, s.head_dim, s.leaves, s.prefix, s.suffix, pick.first, pick.second, pick_us,
                pick_us / best_us, best.first, best.second, best_us);
  }
}

// The DeviceModel fields a head dim's grid varies (light_tile_us, shared by
// both head dims, only in head dim 64's), with their grid values.
struct DimRates {
  double DeviceModel::*tile;
  double DeviceModel::*gap;
  double DeviceModel::*item;
  double DeviceModel::*bytes;
  int32_t DeviceModel::*cap;
  double tile_from, gap_from;
  int tile_steps, gap_steps;
  std::vector<double> bytes_grid;
};
DimRates RatesOf(int32_t head_dim) {
  if (head_dim == kLightHeadDim) {
    return {&DeviceModel::tma_tile_us,
            &DeviceModel::tma_item_gap_us,
            &DeviceModel::light_item_us,
            &DeviceModel::light_warp_bytes_per_us,
            &DeviceModel::max_dominant_chunk,
            0.45,
            1.5,
            8,
            10,
            {3.55e3, 5e3}};
  }
  return {&DeviceModel::tma_tile_d128_us,
          &DeviceModel::tma_item_gap_d128_us,
          &DeviceModel::light_item_d128_us,
          &DeviceModel::light_warp_d128_bytes_per_us,
          &DeviceModel::max_dominant_chunk_d128,
          0.75,
          2.0,
          7,
          9,
          {5e3, 7.2e3, 1e4}};
}

// "name value ..." of a head dim's rates (names: bench/cost_rates.h); with
// `sep` "=" and `between` ",": BANYAN_BENCH_RATES's form.
std::string RatesText(const DeviceModel& d, int32_t head_dim, absl::string_view sep, absl::string_view between) {
  const DimRates r = RatesOf(head_dim);
  std::vector<const bench::CostRate*> rates = {bench::CostRateOf(r.tile), bench::CostRateOf(r.gap),
                                               bench::CostRateOf(r.item), bench::CostRateOf(r.bytes),
                                               bench::CostRateOf(r.cap)};
  if (head_dim == kLightHeadDim) rates.push_back(bench::CostRateOf(&DeviceModel::light_tile_us));
  std::vector<std::string> parts;
  for (const bench::CostRate* rate : rates) parts.push_back(bench::CostRateText(d, *rate, sep));
  return absl::StrJoin(parts, between);
}

void PrintRates(const DeviceModel& d, int32_t head_dim, const Score& score) {
  std::printf("%s: log regret %.3f, worst %.3fx\n", RatesText(d, head_dim, " ", " ").c_str(), score.log_regret,
              score.worst);
}

// The rate sets a head dim's grid tries, each a copy of `base` with that head
// dim's rates changed (tile rate in 0.1 us steps, item gap in 0.5 us steps).
std::vector<DeviceModel> Grid(const DeviceModel& base, int32_t head_dim) {
  const DimRates r = RatesOf(head_dim);
  const std::vector<double> light_tiles =
      head_dim == kLightHeadDim ? std::vector<double>{1.5, 2.3, 3.0} : std::vector<double>{base.light_tile_us};
  std::vector<DeviceModel> out;
  for (const int32_t cap : {1024, 2048, 4096}) {
    for (int tile_step = 0; tile_step < r.tile_steps; ++tile_step) {
      for (int gap_step = 0; gap_step < r.gap_steps; ++gap_step) {
        for (const double item : {1.0, 2.3}) {
          for (const double light_tile : light_tiles) {
            for (const double bytes : r.bytes_grid) {
              DeviceModel d = base;
              d.*r.tile = r.tile_from + 0.1 * tile_step;
              d.*r.gap = r.gap_from + 0.5 * gap_step;
              d.*r.item = item;
              d.*r.bytes = bytes;
              d.*r.cap = cap;
              d.light_tile_us = light_tile;
              out.push_back(d);
            }
          }
        }
      }
    }
  }
  return out;
}

// `to` with head dim `head_dim`'s rates from `from`.
void CopyRates(const DeviceModel& from, int32_t head_dim, DeviceModel* to) {
  const DimRates r = RatesOf(head_dim);
  to->*r.tile = from.*r.tile;
  to->*r.gap = from.*r.gap;
  to->*r.item = from.*r.item;
  to->*r.bytes = from.*r.bytes;
  to->*r.cap = from.*r.cap;
  if (head_dim == kLightHeadDim) to->light_tile_us = from.light_tile_us;
}

int Main(int argc, char** argv) {
  if (argc < 2 || argc > 3) {
    std::fprintf(stderr, "usage: %s MEASUREMENTS [TOP]\n", argv[0]);
    return 2;
  }
  std::ifstream in(argv[1]);
  if (!in) {
    std::fprintf(stderr, "cannot read %s\n", argv[1]);
    return 2;
  }
  std::vector<Shape> all;
  if (!ReadShapes(in, &all)) return 2;
  if (all.empty()) {
    std::fprintf(stderr, "no measurements in %s\n", argv[1]);
    return 2;
  }
  const int top = argc == 3 ? std::max(1, std::atoi(argv[2])) : 5;
  Rng rng(1);
  for (Shape& s : all) {
    s.plan = testing::BuildTreePlan(testing::UniformTree({1, s.leaves}, {s.prefix, s.suffix}), {}, rng).plan;
  }
  const DeviceModel current;
  DeviceModel best = current;  // each head dim's best rates
  for (const int32_t head_dim : {kLightHeadDim, 128}) {
    std::vector<Shape> shapes;
    for (const Shape& s : all) {
      if (s.head_dim == head_dim) shapes.push_back(s);
    }
    if (shapes.empty()) continue;
    const Score now = ScoreOf(shapes, current);
    std::printf("head dim %d, %zu shapes, current DeviceModel: ", head_dim, shapes.size());
    PrintRates(current, head_dim, now);
    PrintPicks(shapes, now);
    std::vector<std::pair<Score, DeviceModel>> results;
    for (const DeviceModel& d : Grid(current, head_dim)) results.emplace_back(ScoreOf(shapes, d), d);
    std::stable_sort(results.begin(), results.end(),
                     [](const auto& a, const auto& b) { return a.first.log_regret < b.first.log_regret; });
    std::printf("\nhead dim %d, best of %zu rate sets:\n", head_dim, results.size());
    for (int i = 0; i < top && i < static_cast<int>(results.size()); ++i) {
      PrintRates(results[i].second, head_dim, results[i].first);
      if (i == 0) PrintPicks(shapes, results[i].first);
    }
    std::printf("\n");
    CopyRates(results.front().second, head_dim, &best);
  }
  // For attention_bench, to time the fit before compiling it in.
  std::printf("BANYAN_BENCH_RATES=%s,%s\n", RatesText(best, kLightHeadDim, "=", ",").c_str(),
              RatesText(best, 128, "=", ",").c_str());
  return 0;
}

}  // namespace
}  // namespace banyan::attention

int main(int argc, char** argv) { return banyan::attention::Main(argc, argv); }

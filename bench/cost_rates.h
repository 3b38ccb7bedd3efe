// The light split's cost-model rates (attention/work_plan.h DeviceModel) by
// name, the one table of them for the tools: bench/light_split_fit writes its
// best fit as a "name=value,..." line (CostRateText), attention_bench reads
// such a line from BANYAN_BENCH_RATES (ParseCostRates) to time a rate set
// before it is compiled in. Header-only; no state.
#ifndef BANYAN_BENCH_COST_RATES_H_
#define BANYAN_BENCH_COST_RATES_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "attention/work_plan.h"

namespace banyan::bench {

// One named rate: a real-valued DeviceModel field, or (max_dominant_chunk*)
// a whole one; the other pointer is null.
struct CostRate {
  const char* name;
  double attention::DeviceModel::*real;
  int32_t attention::DeviceModel::*whole;
};

using attention::DeviceModel;
inline constexpr CostRate kCostRates[] = {
    {"tma_tile_us", &DeviceModel::tma_tile_us, nullptr},
    {"tma_item_gap_us", &DeviceModel::tma_item_gap_us, nullptr},
    {"light_item_us", &DeviceModel::light_item_us, nullptr},
    {"light_tile_us", &DeviceModel::light_tile_us, nullptr},
    {"light_warp_bytes_per_us", &DeviceModel::light_warp_bytes_per_us, nullptr},
    {"max_dominant_chunk", nullptr, &DeviceModel::max_dominant_chunk},
    {"tma_tile_d128_us", &DeviceModel::tma_tile_d128_us, nullptr},
    {"tma_item_gap_d128_us", &DeviceModel::tma_item_gap_d128_us, nullptr},
    {"tma_light_item_d128_us", &DeviceModel::tma_light_item_d128_us, nullptr},
    {"light_item_d128_us", &DeviceModel::light_item_d128_us, nullptr},
    {"light_warp_d128_bytes_per_us", &DeviceModel::light_warp_d128_bytes_per_us, nullptr},
    {"max_dominant_chunk_d128", nullptr, &DeviceModel::max_dominant_chunk_d128},
};

// The table's entry of a real or a whole field (nullptr if it has none).
inline const CostRate* CostRateOf(double DeviceModel::*real) {
  for (const CostRate& r : kCostRates) {
    if (r.real == real) return &r;
  }
  return nullptr;
}
inline const CostRate* CostRateOf(int32_t DeviceModel::*whole) {
  for (const CostRate& r : kCostRates) {
    if (r.whole == whole) return &r;
  }
  return nullptr;
}

// "name<sep>value" of `rate` in `d` (reals with two decimals, or none from
// 100 up; wholes as integers).
inline std::string CostRateText(const DeviceModel& d, const CostRate& rate, absl::string_view sep) {
  if (rate.whole != nullptr) return absl::StrCat(rate.name, sep, d.*rate.whole);
  const double v = d.*rate.real;
  return absl::StrCat(rate.name, sep, absl::StrFormat(v >= 100.0 ? "%.0f" : "%.2f", v));
}

// DeviceModel's defaults with the rates of `spec` ("name=value,...", every
// value positive) over them; kInvalidArgument names the first bad entry.
inline absl::StatusOr<DeviceModel> ParseCostRates(absl::string_view spec) {
  DeviceModel rates;
  for (absl::string_view item : absl::StrSplit(spec, ',', absl::SkipEmpty())) {
    const std::vector<absl::string_view> kv = absl::StrSplit(item, absl::MaxSplits('=', 1));
    const CostRate* rate = nullptr;
    for (const CostRate& r : kCostRates) {
      if (kv[0] == r.name) rate = &r;
    }
    double real = 0.0;
    int32_t whole = 0;
    if (kv.size() == 2 && rate != nullptr && rate->real != nullptr && absl::SimpleAtod(kv[1], &real) && real > 0.0) {
      rates.*rate->real = real;
    } else if (kv.size() == 2 && rate != nullptr && rate->whole != nullptr && absl::SimpleAtoi(kv[1], &whole) &&
               whole > 0) {
      rates.*rate->whole = whole;
    } else {
      return absl::InvalidArgumentError(absl::StrCat("BANYAN_BENCH_RATES: bad entry \"", item, "\""));
    }
  }
  return rates;
}

}  // namespace banyan::bench

#endif  // BANYAN_BENCH_COST_RATES_H_

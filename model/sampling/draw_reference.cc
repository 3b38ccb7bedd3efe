#include "model/sampling/draw_reference.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

namespace banyan::model::sampling {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// The row's first maximum, or n for a bad row.
size_t FirstMax(absl::Span<const float> logits) {
  double best = -kInf;
  size_t argmax = logits.size();
  for (size_t i = 0; i < logits.size(); ++i) {
    const float l = logits[i];
    if (std::isnan(l) || l == std::numeric_limits<float>::infinity()) return logits.size();
    if (l > best) {
      best = l;
      argmax = i;
    }
  }
  return argmax;
}

// The processed values and their exp(v - max) for temperature > 0.
struct Scaled {
  std::vector<float> v;
  std::vector<double> e;
  double vmax = 0;
};

Scaled Scale(absl::Span<const float> logits, float temperature) {
  Scaled s;
  s.v.resize(logits.size());
  const float inverse = 1.0f / temperature;
  for (size_t i = 0; i < logits.size(); ++i) s.v[i] = logits[i] * inverse;
  s.vmax = *std::max_element(s.v.begin(), s.v.end());
  s.e.resize(logits.size());
  for (size_t i = 0; i < logits.size(); ++i)
    s.e[i] = std::exp(static_cast<double>(s.v[i]) - s.vmax);
  return s;
}

std::vector<uint8_t> KeptOf(const Scaled& s, const DeviceDraw& d, DrawMargins& m) {
  const size_t n = s.v.size();
  std::vector<int32_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int32_t a, int32_t b) { return s.v[a] > s.v[b]; });
  size_t keep = n;
  if (d.top_k > 0 && static_cast<size_t>(d.top_k) < n) keep = static_cast<size_t>(d.top_k);
  if (d.top_p < 1.0f) {
    double z = 0;
    for (size_t r = 0; r < keep; ++r) z += s.e[order[r]];
    const double need = static_cast<double>(d.top_p) * z;
    double before = 0;
    size_t r = 0;
    while (r < keep && before < need) before += s.e[order[r++]];
    const double last_before = before - s.e[order[r - 1]];
    m.top_p = std::min(m.top_p, (need - last_before) / z);
    if (r < keep) m.top_p = std::min(m.top_p, (before - need) / z);
    keep = r;
  }
  std::vector<uint8_t> kept(n, 0);
  for (size_t r = 0; r < keep; ++r) {
    const int32_t id = order[r];
    if (d.min_p > 0.0f) {
      m.min_p = std::min(m.min_p, std::abs(s.e[id] - d.min_p));
      if (s.e[id] < d.min_p) continue;
    }
    kept[id] = 1;
  }
  return kept;
}

}  // namespace

double DrawMargins::smallest() const { return std::min({top_p, min_p, draw}); }

std::vector<uint8_t> ReferenceKept(absl::Span<const float> logits, const DeviceDraw& d,
                                   DrawMargins* margins) {
  DrawMargins local;
  DrawMargins& m = margins != nullptr ? *margins : local;
  m = DrawMargins();
  const size_t argmax = FirstMax(logits);
  if (argmax == logits.size()) return {};
  return KeptOf(Scale(logits, d.temperature), d, m);
}

DrawResult ReferenceDraw(absl::Span<const float> logits, const DeviceDraw& d,
                         DrawMargins* margins) {
  DrawMargins local;
  DrawMargins& m = margins != nullptr ? *margins : local;
  m = DrawMargins();
  DrawResult out;
  const size_t n = logits.size();
  const size_t argmax = FirstMax(logits);
  if (argmax == n) return out;
  const double raw_max = logits[argmax];
  double raw_sum = 0;
  for (float l : logits) raw_sum += std::exp(static_cast<double>(l) - raw_max);
  const double raw_lse = raw_max + std::log(raw_sum);
  if (d.temperature == 0.0f) {
    out.token = static_cast<int32_t>(argmax);
    out.logprob = out.raw_logprob = static_cast<float>(logits[argmax] - raw_lse);
    return out;
  }
  const Scaled s = Scale(logits, d.temperature);
  const std::vector<uint8_t> kept = KeptOf(s, d, m);
  double z = 0;
  for (size_t i = 0; i < n; ++i) z += kept[i] ? s.e[i] : 0.0;
  const double target = d.uniform * z;
  double cumulative = 0;
  size_t token = n, last = n;
  for (size_t i = 0; i < n; ++i) {
    if (!kept[i] || s.e[i] == 0) continue;
    last = i;
    const double next = cumulative + s.e[i];
    if (next > target) {
      m.draw = std::min(target - cumulative, next - target) / z;
      token = i;
      break;
    }
    cumulative = next;
  }
  if (token == n) token = last;  // rounding at the top end
  out.token = static_cast<int32_t>(token);
  out.logprob = static_cast<float>(static_cast<double>(s.v[token]) - s.vmax - std::log(z));
  out.raw_logprob = static_cast<float>(logits[token] - raw_lse);
  return out;
}

}  // namespace banyan::model::sampling

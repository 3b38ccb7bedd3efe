// RopeInvFreq: the per-pair RoPE frequencies with the config's scaling, in the
// form Hugging Face's _compute_default / _compute_linear / _compute_llama3
// rope parameters produce them.
#include <cmath>
#include <vector>

#include "absl/strings/str_cat.h"
#include "model/cuda/ops.h"

namespace banyan::model::cuda {

absl::StatusOr<std::vector<float>> RopeInvFreq(const ModelConfig& config) {
  const int dim = config.head_dim;
  if (dim <= 0 || dim % 2 != 0) {
    return absl::InvalidArgumentError(absl::StrCat("RoPE needs an even head_dim, got ", dim));
  }
  if (!(config.rope_theta > 0.0f)) {
    return absl::InvalidArgumentError(absl::StrCat("RoPE theta must be positive, got ", config.rope_theta));
  }
  const RopeScaling& s = config.rope_scaling;
  if (s.type != RopeScaling::Type::kNone && !(s.factor > 0.0f)) {
    return absl::InvalidArgumentError(absl::StrCat("RoPE scaling factor must be positive, got ", s.factor));
  }
  if (s.type == RopeScaling::Type::kLlama3 &&
      (!(s.high_freq_factor > s.low_freq_factor) || !(s.low_freq_factor > 0.0f) ||
       s.original_max_position <= 0)) {
    return absl::InvalidArgumentError("llama3 RoPE scaling needs high_freq_factor > low_freq_factor > 0 "
                                      "and a positive original_max_position");
  }
  const double kPi = 3.14159265358979323846;
  std::vector<float> inv_freq(static_cast<size_t>(dim / 2));
  for (int i = 0; i < dim / 2; ++i) {
    double f = std::pow(static_cast<double>(config.rope_theta), -2.0 * i / dim);
    if (s.type == RopeScaling::Type::kLinear) {
      f /= s.factor;
    } else if (s.type == RopeScaling::Type::kLlama3) {
      const double wavelen = 2.0 * kPi / f;
      const double low_freq_wavelen = s.original_max_position / static_cast<double>(s.low_freq_factor);
      const double high_freq_wavelen = s.original_max_position / static_cast<double>(s.high_freq_factor);
      if (wavelen > low_freq_wavelen) {
        f /= s.factor;  // long wavelengths: fully interpolated
      } else if (!(wavelen < high_freq_wavelen)) {
        const double smooth = (s.original_max_position / wavelen - s.low_freq_factor) /
                              (static_cast<double>(s.high_freq_factor) - s.low_freq_factor);
        f = (1.0 - smooth) * f / s.factor + smooth * f;
      }
    }
    inv_freq[static_cast<size_t>(i)] = static_cast<float>(f);
  }
  return inv_freq;
}

}  // namespace banyan::model::cuda

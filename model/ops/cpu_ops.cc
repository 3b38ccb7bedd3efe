#include "model/ops/cpu_ops.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "model/ops/matmul_kernels.h"

namespace banyan::model::ops {

void RmsNorm(const float* x, const float* weight, int64_t rows, int64_t dim, float eps, float* out) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * dim;
    float* yr = out + r * dim;
    float sum = 0.0f;
    for (int64_t i = 0; i < dim; ++i) sum += xr[i] * xr[i];
    const float inv = 1.0f / std::sqrt(sum / static_cast<float>(dim) + eps);
    for (int64_t i = 0; i < dim; ++i) yr[i] = weight[i] * (xr[i] * inv);
  }
}

std::vector<float> RopeInverseFrequencies(int32_t head_dim, float theta, const RopeScaling& scaling) {
  const int32_t half = head_dim / 2;
  std::vector<float> inv(half);
  for (int32_t i = 0; i < half; ++i) {
    const float exponent = static_cast<float>(2 * i) / static_cast<float>(head_dim);
    inv[i] = 1.0f / std::pow(theta, exponent);
  }
  if (scaling.type == RopeScaling::Type::kLinear) {
    for (float& f : inv) f /= scaling.factor;
  } else if (scaling.type == RopeScaling::Type::kLlama3) {
    const double old_len = scaling.original_max_position;
    const double low_wavelen = old_len / scaling.low_freq_factor;
    const double high_wavelen = old_len / scaling.high_freq_factor;
    for (float& f : inv) {
      const double wavelen = 2.0 * M_PI / f;
      if (wavelen < high_wavelen) continue;  // high frequencies: unchanged
      if (wavelen > low_wavelen) {          // low frequencies: divided by factor
        f = f / scaling.factor;
        continue;
      }
      // Medium band: interpolate between scaled and unscaled.
      const float smooth = static_cast<float>((old_len / wavelen - scaling.low_freq_factor) /
                                              (scaling.high_freq_factor - scaling.low_freq_factor));
      f = (1.0f - smooth) * f / scaling.factor + smooth * f;
    }
  }
  return inv;
}

void ApplyRope(float* x, int64_t rows, int32_t num_heads, int32_t head_dim, const int32_t* positions,
               const std::vector<float>& inv_freq) {
  const int32_t half = head_dim / 2;
  std::vector<float> cos_v(half), sin_v(half);
  for (int64_t r = 0; r < rows; ++r) {
    const float pos = static_cast<float>(positions[r]);
    for (int32_t i = 0; i < half; ++i) {
      const float angle = pos * inv_freq[i];  // fp32 product, as HF computes it
      cos_v[i] = static_cast<float>(std::cos(static_cast<double>(angle)));
      sin_v[i] = static_cast<float>(std::sin(static_cast<double>(angle)));
    }
    for (int32_t h = 0; h < num_heads; ++h) {
      float* v = x + (r * num_heads + h) * head_dim;
      for (int32_t i = 0; i < half; ++i) {
        const float a = v[i], b = v[i + half];
        v[i] = a * cos_v[i] - b * sin_v[i];
        v[i + half] = b * cos_v[i] + a * sin_v[i];
      }
    }
  }
}

void SwiGlu(const float* gate, const float* up, int64_t n, float* out) {
  for (int64_t i = 0; i < n; ++i) {
    const float g = gate[i];
    out[i] = g / (1.0f + std::exp(-g)) * up[i];
  }
}

void AddInPlace(float* x, const float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] += y[i];
}

void EmbeddingLookup(const float* table, const int32_t* ids, int64_t rows, int64_t dim, float* out) {
  for (int64_t r = 0; r < rows; ++r) {
    std::memcpy(out + r * dim, table + int64_t{ids[r]} * dim, sizeof(float) * dim);
  }
}

void MatMul(const float* x, const float* w, const float* bias, int64_t rows, int64_t in_features,
            int64_t out_features, float* y, ThreadPool* pool) {
  const MatMulKernel kernel = SelectMatMulKernel();
  // Split over output features in blocks of kMatMulOutBlock, so each thread
  // streams its own slice of W once for all rows of x.
  const int64_t blocks = (out_features + kMatMulOutBlock - 1) / kMatMulOutBlock;
  auto run = [&](int64_t block_begin, int64_t block_end) {
    const int64_t o_begin = block_begin * kMatMulOutBlock;
    const int64_t o_end = std::min(out_features, block_end * kMatMulOutBlock);
    kernel(x, w, bias, rows, in_features, out_features, o_begin, o_end, y);
  };
  // Roughly 64K multiply-adds per chunk at least, so tiny matmuls stay serial.
  const int64_t work_per_block = std::max<int64_t>(1, rows * in_features * kMatMulOutBlock);
  const int64_t grain = std::max<int64_t>(1, 65536 / work_per_block);
  if (pool == nullptr) {
    run(0, blocks);
  } else {
    pool->ParallelFor(blocks, grain, run);
  }
}

}  // namespace banyan::model::ops

// Rng: the one seeded pseudo-random generator of Banyan (xoshiro256**, seeded
// through SplitMix64). Used for sampling (one Rng per branch, so a seed gives
// the same text again), random test inputs and random trees.
//
//   Rng rng(/*seed=*/42);
//   float u = rng.Uniform();           // [0, 1)
//   Rng child = rng.Derive(branch_id); // independent stream, reproducible
//
// Sequences depend only on the seed (and Derive keys), never on the platform:
// the same seed gives the same numbers on every machine and compiler.
// Thread-compatible: one Rng per thread or per branch; no internal locking.
#ifndef BANYAN_SDK_BASE_RNG_H_
#define BANYAN_SDK_BASE_RNG_H_

#include <cmath>
#include <cstdint>
#include <limits>

namespace banyan {

// One step of SplitMix64: a good 64-bit mixer, used for seeding and key derivation.
constexpr uint64_t SplitMix64(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

class Rng {
 public:
  using result_type = uint64_t;

  explicit Rng(uint64_t seed) : seed_(seed) {
    uint64_t s = seed;
    for (uint64_t& word : state_) word = SplitMix64(s);
  }

  // The seed this generator was created with.
  uint64_t seed() const { return seed_; }

  // A new generator whose stream depends only on (seed(), key): use it to give
  // each branch, thread or test case its own reproducible stream.
  Rng Derive(uint64_t key) const {
    uint64_t s = seed_ ^ (key * 0xd1342543de82ef95ull + 0x2545f4914f6cdd1dull);
    return Rng(SplitMix64(s));
  }

  // 64 uniformly distributed bits.
  uint64_t Next() {
    const uint64_t result = Rotl(state_[1] * 5, 7) * 9;
    const uint64_t t = state_[1] << 17;
    state_[2] ^= state_[0];
    state_[3] ^= state_[1];
    state_[1] ^= state_[2];
    state_[0] ^= state_[3];
    state_[2] ^= t;
    state_[3] = Rotl(state_[3], 45);
    return result;
  }
  uint64_t operator()() { return Next(); }
  static constexpr uint64_t min() { return 0; }
  static constexpr uint64_t max() { return std::numeric_limits<uint64_t>::max(); }

  // Uniform in [0, 1) with 24 random bits (every value exactly representable).
  float Uniform() { return static_cast<float>(Next() >> 40) * 0x1.0p-24f; }
  // Uniform in [0, 1) with 53 random bits.
  double UniformDouble() { return static_cast<double>(Next() >> 11) * 0x1.0p-53; }
  // Uniform in [lo, hi).
  float Uniform(float lo, float hi) { return lo + (hi - lo) * Uniform(); }
  // Uniform integer in [0, n). REQUIRES: n > 0. Unbiased (Lemire's method).
  uint64_t UniformInt(uint64_t n) {
    unsigned __int128 m = static_cast<unsigned __int128>(Next()) * n;
    uint64_t low = static_cast<uint64_t>(m);
    if (low < n) {
      const uint64_t threshold = (0 - n) % n;
      while (low < threshold) {
        m = static_cast<unsigned __int128>(Next()) * n;
        low = static_cast<uint64_t>(m);
      }
    }
    return static_cast<uint64_t>(m >> 64);
  }
  // Standard normal (Box-Muller; one value per call).
  float Normal() {
    double u1 = UniformDouble();
    while (u1 <= 0.0) u1 = UniformDouble();
    const double u2 = UniformDouble();
    return static_cast<float>(std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2));
  }

 private:
  static constexpr uint64_t Rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

  uint64_t seed_;
  uint64_t state_[4];
};

}  // namespace banyan

#endif  // BANYAN_SDK_BASE_RNG_H_

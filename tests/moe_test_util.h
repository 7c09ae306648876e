// Test helpers shared by the CPU and GPU MoE tests.
#pragma once
#include <climits>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

namespace moekit::test {

/// Random top-k ids for t tokens: uniform experts, with ~5% -1 slots, ~3% invalid ids (negative,
/// >= e_total, INT32_MIN/MAX) and ~12% repeats of the previous slot's expert inside a token.
inline std::vector<int32_t> random_topk_ids(std::mt19937_64& rng, int64_t t, int k, int e_total) {
  std::vector<int32_t> ids(size_t(t * k));
  std::uniform_int_distribution<int32_t> expert(0, e_total - 1);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  const int32_t invalid[] = {-2, e_total, e_total + 7, INT32_MAX, INT32_MIN, -1000};
  for (int64_t i = 0; i < t * k; ++i) {
    const double p = u(rng);
    int32_t id = expert(rng);
    if (p < 0.05) id = -1;
    else if (p < 0.08) id = invalid[rng() % 6];
    else if (p < 0.2 && i % k != 0) id = ids[size_t(i - 1)];  // duplicate within the token
    ids[size_t(i)] = id;
  }
  return ids;
}

/// ‖a − ref‖ / ‖ref‖ of two float64 results of the same shape (ref must not be all zeros).
inline double rel_l2(const std::vector<double>& a, const std::vector<double>& ref) {
  double num = 0.0, den = 0.0;
  for (size_t i = 0; i < ref.size(); ++i) {
    num += (a[i] - ref[i]) * (a[i] - ref[i]);
    den += ref[i] * ref[i];
  }
  return den > 0.0 ? std::sqrt(num / den) : INFINITY;
}

}  // namespace moekit::test

// Checkpoint-like MoE data and the accuracy metrics of the layer (docs/accuracy.md), shared by the
// CPU and GPU tests.
//
// Checkpoint-like data is made the way a user's checkpoint and activations are: weights
// W = bf16(N(0, σ²)) quantized by SPEC §1's 128x128 quantizer (σ = 0.02 by default), activations
// x = bf16(N(0, 1)), distinct top-k experts per token, router weights U[0.1, 1.1).
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "moekit/numerics.h"

namespace moekit::test {

/// bf16 bits of n values N(0, sigma²).
inline std::vector<uint16_t> normal_bf16(int64_t n, double sigma, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> z(0.0f, float(sigma));
  std::vector<uint16_t> v(static_cast<size_t>(n));
  for (auto& b : v) b = bf16_from_float(z(rng));
  return v;
}

/// `experts` weight matrices [n, k] of bf16(N(0, sigma²)), quantized 128x128: codes [experts, n, k]
/// and logical scales [experts, ceil(n/128), ceil(k/128)]; `bf16` keeps the weights before
/// quantization (for the distance to the unquantized layer).
struct QuantizedWeights {
  std::vector<uint8_t> q;
  std::vector<float> s;
  std::vector<uint16_t> bf16;
};
inline QuantizedWeights checkpoint_weights(int64_t experts, int64_t n, int64_t k, double sigma, uint64_t seed) {
  QuantizedWeights w;
  const int64_t per_s = ceil_div(n, kQuantBlock) * ceil_div(k, kQuantBlock);
  w.q.resize(static_cast<size_t>(experts * n * k));
  w.s.resize(static_cast<size_t>(experts * per_s));
  w.bf16.resize(w.q.size());
  std::vector<float> f(static_cast<size_t>(n * k));
  for (int64_t e = 0; e < experts; ++e) {
    const std::vector<uint16_t> b = normal_bf16(n * k, sigma, seed + uint64_t(e) * 7919u);
    std::copy(b.begin(), b.end(), w.bf16.begin() + e * n * k);
    for (size_t i = 0; i < f.size(); ++i) f[i] = bf16_to_float(b[i]);
    quantize_128x128(f.data(), n, k, k, w.q.data() + e * n * k, k, w.s.data() + e * per_s, false);
  }
  return w;
}

/// Distinct experts per token (uniform over [0, e)), weights U[0.1, 1.1).
inline void distinct_topk(int64_t t, int k, int e, uint64_t seed, std::vector<int32_t>* ids, std::vector<float>* w) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(0.1f, 1.1f);
  std::vector<int32_t> all(static_cast<size_t>(e));
  ids->resize(static_cast<size_t>(t * k));
  w->resize(ids->size());
  for (int64_t i = 0; i < t; ++i) {
    for (int j = 0; j < e; ++j) all[size_t(j)] = j;
    for (int j = 0; j < k; ++j) {  // partial Fisher-Yates: k distinct picks
      const int pick = j + int(rng() % uint64_t(e - j));
      std::swap(all[size_t(j)], all[size_t(pick)]);
      (*ids)[size_t(i * k + j)] = all[size_t(j)];
      (*w)[size_t(i * k + j)] = u(rng);
    }
  }
}

/// Relative L2 error of y overall and per row against a float64 reference [t, h].
struct RowErrors {
  double overall = 0.0;
  double row_median = 0.0;
  double row_max = 0.0;
  int64_t worst_row = -1;
  std::vector<double> rows;
};
inline RowErrors row_errors(const std::vector<float>& y, const std::vector<double>& ref, int64_t t, int64_t h) {
  RowErrors r;
  r.rows.resize(static_cast<size_t>(t));
  double num = 0.0, den = 0.0;
  for (int64_t i = 0; i < t; ++i) {
    double n = 0.0, d = 0.0;
    for (int64_t c = 0; c < h; ++c) {
      const double diff = double(y[size_t(i * h + c)]) - ref[size_t(i * h + c)];
      n += diff * diff;
      d += ref[size_t(i * h + c)] * ref[size_t(i * h + c)];
    }
    num += n;
    den += d;
    // A NaN anywhere must fail every bound: NaN compares false, so map it to +inf.
    const double e = d > 0 ? std::sqrt(n / d) : std::sqrt(n);
    r.rows[size_t(i)] = std::isnan(e) ? INFINITY : e;
  }
  r.overall = den > 0 ? std::sqrt(num / den) : std::sqrt(num);
  if (std::isnan(r.overall)) r.overall = INFINITY;
  if (t > 0) {
    std::vector<double> sorted = r.rows;
    std::sort(sorted.begin(), sorted.end());
    r.row_median = sorted[sorted.size() / 2];
    r.worst_row = std::max_element(r.rows.begin(), r.rows.end()) - r.rows.begin();
    r.row_max = r.rows[size_t(r.worst_row)];
  }
  return r;
}

}  // namespace moekit::test

namespace moekit::test {

/// The layer without quantization, in float64: (g, u) = W1[e] x with the bf16 weights before
/// quantization and x as given, h = silu(g) u, y[t] = Σ_j w[t, j] W2[e] h. ids outside [0, E) skip.
inline std::vector<double> unquantized_layer(const std::vector<uint16_t>& x, int64_t t, int64_t h, int64_t inter,
                                             int k, int e_total, const std::vector<int32_t>& ids,
                                             const std::vector<float>& w, const std::vector<uint16_t>& w1,
                                             const std::vector<uint16_t>& w2) {
  std::vector<double> y(static_cast<size_t>(t * h), 0.0), xd(static_cast<size_t>(h)), hv(static_cast<size_t>(inter));
  std::vector<double> w1e(static_cast<size_t>(2 * inter * h)), w2e(static_cast<size_t>(h * inter));
  for (int e = 0; e < e_total; ++e) {
    bool used = false;
    for (int32_t id : ids) used = used || id == e;
    if (!used) continue;
    for (size_t i = 0; i < w1e.size(); ++i) w1e[i] = bf16_to_float(w1[size_t(e) * w1e.size() + i]);
    for (size_t i = 0; i < w2e.size(); ++i) w2e[i] = bf16_to_float(w2[size_t(e) * w2e.size() + i]);
    for (int64_t s = 0; s < t * k; ++s) {
      if (ids[size_t(s)] != e) continue;
      const int64_t tok = s / k;
      for (int64_t c = 0; c < h; ++c) xd[size_t(c)] = bf16_to_float(x[size_t(tok * h + c)]);
      for (int64_t j = 0; j < inter; ++j) {
        double g = 0.0, u = 0.0;
        const double* rg = &w1e[size_t(j * h)];
        const double* ru = &w1e[size_t((inter + j) * h)];
        for (int64_t c = 0; c < h; ++c) {
          g += rg[c] * xd[size_t(c)];
          u += ru[c] * xd[size_t(c)];
        }
        hv[size_t(j)] = g / (1.0 + std::exp(-g)) * u;
      }
      for (int64_t c = 0; c < h; ++c) {
        double acc = 0.0;
        const double* r = &w2e[size_t(c * inter)];
        for (int64_t j = 0; j < inter; ++j) acc += r[j] * hv[size_t(j)];
        y[size_t(tok * h + c)] += double(w[size_t(s)]) * acc;
      }
    }
  }
  return y;
}

/// Whether two E4M3 codes of one quantization block are at most one rounding step apart: their
/// values (in units of the block's scale, ±448 at the block's amax) differ by no more than the larger
/// of their spacings plus 0.25. The FP8 tensor core's accumulation moves h by ~1e-4 of |g|, |u|:
/// ~0.02 units here, which near zero spans several subnormal steps (2^-9); a wrong scale moves
/// the large codes by whole units.
inline bool one_rounding_step(uint8_t a, uint8_t b) {
  auto spacing = [](float v) {
    const float m = std::fabs(v);
    return m < 0.015625f ? 0.001953125f : std::ldexp(1.0f, std::ilogb(m) - 3);  // subnormal step 2^-9
  };
  const float va = e4m3_to_float(a), vb = e4m3_to_float(b);
  return std::fabs(va - vb) <= std::max(spacing(va), spacing(vb)) + 0.25f;
}

}  // namespace moekit::test

#include "attention/attention_reference.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "common/check.h"
#include "moekit/numerics.h"

namespace moekit::detail {

float mixed_kv_group_scale(float amax) {
  if (std::isnan(amax)) return std::numeric_limits<float>::quiet_NaN();
  if (!(amax > 0.0f) || std::isinf(amax)) return 1.0f;  // frexp(inf)'s exponent is unspecified
  int e = 0;
  const float m = std::frexp(amax / 448.0f, &e);  // amax / 448 = m · 2^e, m in [0.5, 1)
  // The smallest 2^k >= amax / 448: 2^e, or 2^(e−1) when amax / 448 is that power itself.
  return m == 0.5f ? std::ldexp(1.0f, e - 1) : std::ldexp(1.0f, e);
}

void quantize_mixed_kv(const float* k, int64_t n, uint8_t* nope, float* scales, uint16_t* rope) {
  using F = MixedKvFormat;
  for (int64_t r = 0; r < n; ++r) {
    const float* row = k + r * F::kDim;
    for (int g = 0; g < F::kScales; ++g) {
      float amax = 0.0f;
      for (int d = 0; d < F::kGroup; ++d) {
        const float v = row[g * F::kGroup + d];
        amax = std::isnan(v) ? v : std::max(amax, std::fabs(v));
        if (std::isnan(amax)) break;
      }
      const float s = mixed_kv_group_scale(amax);
      scales[r * F::kScales + g] = s;
      for (int d = 0; d < F::kGroup; ++d)
        nope[r * F::kNope + g * F::kGroup + d] = e4m3_from_float(row[g * F::kGroup + d] / s);  // exact: s is 2^k
    }
    for (int d = 0; d < F::kRope; ++d) rope[r * F::kRope + d] = bf16_from_float(row[F::kNope + d]);
  }
}

void dequantize_mixed_kv(const uint8_t* nope, const float* scales, const uint16_t* rope, int64_t n, float* k) {
  using F = MixedKvFormat;
  for (int64_t r = 0; r < n; ++r) {
    float* row = k + r * F::kDim;
    for (int d = 0; d < F::kNope; ++d)
      row[d] = e4m3_to_float(nope[r * F::kNope + d]) * scales[r * F::kScales + d / F::kGroup];
    for (int d = 0; d < F::kRope; ++d) row[F::kNope + d] = bf16_to_float(rope[r * F::kRope + d]);
  }
}

void rope_reference(double* x, int64_t rows, int64_t dim, int64_t rope_dims, const int32_t* pos, const float* cos,
                    const float* sin, int64_t max_positions, bool inverse) {
  MOEKIT_REQUIRE(rope_dims > 0 && rope_dims % 2 == 0 && rope_dims <= dim, ErrorCode::kInvalidArgument,
                 "rope_reference: rope_dims = ", rope_dims, " must be even, positive and at most dim = ", dim);
  const int64_t half = rope_dims / 2, first = dim - rope_dims;
  for (int64_t r = 0; r < rows; ++r) {
    if (pos[r] < 0 || pos[r] >= max_positions) continue;
    double* v = x + r * dim + first;
    for (int64_t i = 0; i < half; ++i) {
      const double c = cos[int64_t(pos[r]) * half + i];
      const double s = inverse ? -double(sin[int64_t(pos[r]) * half + i]) : double(sin[int64_t(pos[r]) * half + i]);
      const double a = v[2 * i], b = v[2 * i + 1];
      v[2 * i] = a * c - b * s;
      v[2 * i + 1] = a * s + b * c;
    }
  }
}

AttentionRefOut attention_reference(const double* q, int heads, int dim, const double* kv, int64_t num_entries,
                                    const std::vector<AttentionSource>& sources, int32_t query_pos,
                                    double softmax_scale, const double* sink) {
  // The attended entries: valid indices, causal ones at or before the query's position.
  std::vector<int64_t> keys;
  for (const AttentionSource& src : sources) {
    MOEKIT_REQUIRE(src.positions.empty() || src.positions.size() == src.entries.size(), ErrorCode::kInvalidArgument,
                   "attention_reference: a causal source needs one position per entry");
    for (size_t j = 0; j < src.entries.size(); ++j) {
      const int32_t e = src.entries[j];
      if (e < 0) continue;
      MOEKIT_REQUIRE(e < num_entries, ErrorCode::kInvalidArgument, "attention_reference: entry ", e, " of ",
                     num_entries);
      if (!src.positions.empty() && src.positions[j] > query_pos) continue;
      keys.push_back(e);
    }
  }
  AttentionRefOut out;
  out.o.assign(size_t(heads) * size_t(dim), 0.0);
  out.lse.assign(size_t(heads), -std::numeric_limits<double>::infinity());
  if (keys.empty()) return out;
  std::vector<double> s(keys.size());
  for (int h = 0; h < heads; ++h) {
    const double* qh = q + size_t(h) * size_t(dim);
    double m = -std::numeric_limits<double>::infinity();
    for (size_t j = 0; j < keys.size(); ++j) {
      const double* k = kv + keys[j] * dim;
      double dot = 0.0;
      for (int d = 0; d < dim; ++d) dot += qh[d] * k[d];
      s[j] = softmax_scale * dot;
      m = std::max(m, s[j]);
    }
    double sum = 0.0;
    double* o = out.o.data() + size_t(h) * size_t(dim);
    for (size_t j = 0; j < keys.size(); ++j) {
      const double p = std::exp(s[j] - m);
      sum += p;
      const double* v = kv + keys[j] * dim;
      for (int d = 0; d < dim; ++d) o[d] += p * v[d];
    }
    const double denom = sum + (sink != nullptr ? std::exp(sink[h] - m) : 0.0);
    for (int d = 0; d < dim; ++d) o[d] /= denom;
    out.lse[size_t(h)] = m + std::log(sum);
  }
  return out;
}

AttentionRefOut merge_partials_reference(const std::vector<AttentionRefOut>& partials,
                                         const std::vector<const double*>& weight_logits, int heads, int dim,
                                         const double* sink) {
  MOEKIT_REQUIRE(weight_logits.empty() || weight_logits.size() == partials.size(), ErrorCode::kInvalidArgument,
                 "merge_partials_reference: one weight-logit row per partial, or none");
  AttentionRefOut out;
  out.o.assign(size_t(heads) * size_t(dim), 0.0);
  out.lse.assign(size_t(heads), -std::numeric_limits<double>::infinity());
  for (int h = 0; h < heads; ++h) {
    // Weighted log-sums; an empty source (lse −inf) weighs nothing.
    double m = -std::numeric_limits<double>::infinity();
    std::vector<double> l(partials.size());
    for (size_t i = 0; i < partials.size(); ++i) {
      const double w = weight_logits.empty() || weight_logits[i] == nullptr ? 0.0 : weight_logits[i][h];
      const double lse = partials[i].lse[size_t(h)];
      l[i] = std::isinf(lse) && lse < 0 ? lse : lse + w;  // an empty source stays empty, whatever its weight
      m = std::max(m, l[i]);
    }
    if (m == -std::numeric_limits<double>::infinity()) continue;
    double sum = 0.0;
    double* o = out.o.data() + size_t(h) * size_t(dim);
    for (size_t i = 0; i < partials.size(); ++i) {
      const double a = std::exp(l[i] - m);
      sum += a;
      const double* oi = partials[i].o.data() + size_t(h) * size_t(dim);
      for (int d = 0; d < dim; ++d) o[d] += a * oi[d];
    }
    const double denom = sum + (sink != nullptr ? std::exp(sink[h] - m) : 0.0);
    for (int d = 0; d < dim; ++d) o[d] /= denom;
    out.lse[size_t(h)] = m + std::log(sum);
  }
  return out;
}

}  // namespace moekit::detail

// Shared helpers of the routing GPU tests (test_routing.cpp, test_route_sort_fused.cpp): the
// cases, logits drawn so that float64 and fp32 rankings agree, the GPU and reference runs and
// their comparison.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <numeric>
#include <ostream>
#include <random>
#include <string>
#include <unordered_set>
#include <vector>

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include "gpu_test_util.h"
#include "moe/moe_permute.h"
#include "moe/moe_sort_internal.h"
#include "moe/route_sort.h"
#include "moe/routing_plan.h"
#include "moekit/error.h"
#include "moekit/moe_sort.h"
#include "moekit/numerics.h"
#include "moekit/routing.h"
#include "runtime/device_buffer.h"

namespace moekit::routing_test {


using moekit::LogitsType;
using moekit::RoutingConfig;
using moekit::RoutingMethod;
using moekit::detail::DeviceBuffer;

inline constexpr double kMargin = 4e-6;      // fp32 b and group scores are within ~1e-6 of float64
inline constexpr double kWeightRtol = 1e-5;
inline constexpr int kPoisonTail = 67;       // output elements past T * k that must stay untouched
inline constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
inline constexpr float kInf = std::numeric_limits<float>::infinity();

struct Case {
  std::string name;
  int E, k;
  RoutingMethod method;
  bool renorm;
  int groups = 1, keep = 1;
  float scale = 1.0f;
  bool bias = false;
};

inline RoutingConfig make_config(const Case& c) {
  RoutingConfig r;
  r.method = c.method;
  r.num_experts = c.E;
  r.top_k = c.k;
  r.renormalize = c.renorm;
  r.num_groups = c.groups;
  r.topk_groups = c.keep;
  r.routed_scaling_factor = c.scale;
  return r;
}

// SPEC §5 routing presets.
inline std::vector<Case> preset_cases() {
  const auto kSig = RoutingMethod::kSigmoidGrouped, kSm = RoutingMethod::kSoftmaxTopk,
             kTs = RoutingMethod::kTopkSoftmax;
  return {
      {"deepseek_v3", 256, 8, kSig, true, 8, 4, 2.5f, true},
      {"kimi_k2", 384, 8, kSig, true, 1, 1, 2.827f, true},
      {"qwen3", 128, 8, kSm, true},
      {"mixtral", 8, 2, kSm, true},
      {"gpt_oss", 128, 4, kTs, false},
      {"deepseek_v2_lite", 64, 6, kSm, false},
  };
}

// Shapes for the other kernel paths (see routing.cu): experts per lane 1..32, scalar and vector
// loads, partial last lanes, and the three group-score modes (segment / local / generic), more
// than 32 groups, k = E, k = 32, E = 1 and E = 1024.
inline std::vector<Case> shape_cases() {
  const auto kSig = RoutingMethod::kSigmoidGrouped, kSm = RoutingMethod::kSoftmaxTopk,
             kTs = RoutingMethod::kTopkSoftmax;
  return {
      {"sig_E256_g64_local", 256, 8, kSig, true, 64, 16, 1.0f, true},
      {"sig_E64_g64_singleton", 64, 6, kSig, false, 64, 10, 1.5f, true},
      {"sig_E160_g8_generic", 160, 6, kSig, true, 8, 3, 1.0f, true},
      {"sig_E72_g3_generic", 72, 4, kSig, true, 3, 1, 1.0f, true},
      {"sig_E512_g64_local", 512, 8, kSig, true, 64, 20, 1.0f, true},
      {"sig_E1024_g8_k32", 1024, 32, kSig, true, 8, 3, 1.0f, true},
      {"sig_E96_g3_seg8", 96, 8, kSig, false, 3, 2, 1.0f, true},
      {"sig_E20_nobias", 20, 3, kSig, false, 1, 1, 1.0f, false},
      {"sig_E16_g4_nobias", 16, 4, kSig, true, 4, 2, 1.0f, false},
      {"softmax_E1000_k32", 1000, 32, kSm, false},
      {"softmax_E7_k7", 7, 7, kSm, true},
      {"softmax_E1_k1", 1, 1, kSm, false},
      {"softmax_E640_k16", 640, 16, kSm, true},
      {"topk_E33_k5", 33, 5, kTs, false},
      {"topk_E100_k32", 100, 32, kTs, true},
      {"topk_E200_k1", 200, 1, kTs, false},
  };
}

// ---------------------------------------------------------------------------------------------
// Data
// ---------------------------------------------------------------------------------------------

// fp32: uniform in [-4, 4). bf16: random sign, exponent and mantissa with |x| in [2^-5, 8): 2048
// distinct values, enough for distinct rows up to E = 1024.
inline float random_logit(std::mt19937_64& rng, bool bf16) {
  if (bf16) {
    const uint64_t r = rng();
    const uint16_t sign = static_cast<uint16_t>((r & 1) << 15);
    const uint16_t exp = static_cast<uint16_t>(122 + ((r >> 1) % 8));
    const uint16_t mant = static_cast<uint16_t>((r >> 8) & 0x7F);
    return moekit::bf16_to_float(static_cast<uint16_t>(sign | (exp << 7) | mant));
  }
  return std::uniform_real_distribution<float>(-4.0f, 4.0f)(rng);
}

inline std::vector<float> random_bias(int E, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<float> b(static_cast<size_t>(E));
  for (auto& v : b) v = std::uniform_real_distribution<float>(-0.5f, 0.5f)(rng);
  return b;
}

// For sigmoid_grouped: true when the float64 scores that decide the routing are kMargin apart:
// the group scores on both sides of the kept/dropped boundary, and the k + 1 best b of the kept
// experts (slot order and the last pick). fp32 rounding then cannot change the result.
inline bool well_separated(const RoutingConfig& c, const float* row, const float* bias) {
  const int E = c.num_experts, ng = c.num_groups, G = E / ng;
  std::vector<double> b(static_cast<size_t>(E));
  for (int e = 0; e < E; ++e) b[e] = 1.0 / (1.0 + std::exp(-static_cast<double>(row[e]))) + (bias ? bias[e] : 0.0);
  std::vector<int> kept_groups(static_cast<size_t>(ng));
  std::iota(kept_groups.begin(), kept_groups.end(), 0);
  if (c.topk_groups < ng) {
    std::vector<double> gs(static_cast<size_t>(ng));
    for (int g = 0; g < ng; ++g) {
      std::vector<double> m(b.begin() + g * G, b.begin() + (g + 1) * G);
      std::sort(m.rbegin(), m.rend());
      gs[g] = G == 1 ? m[0] : m[0] + m[1];
    }
    std::sort(kept_groups.begin(), kept_groups.end(), [&](int x, int y) { return gs[x] > gs[y]; });
    if (gs[kept_groups[c.topk_groups - 1]] - gs[kept_groups[c.topk_groups]] < kMargin) return false;
    kept_groups.resize(static_cast<size_t>(c.topk_groups));
  }
  std::vector<double> cand;
  for (int g : kept_groups) cand.insert(cand.end(), b.begin() + g * G, b.begin() + (g + 1) * G);
  std::sort(cand.rbegin(), cand.rend());
  for (int j = 0; j < c.top_k && j + 1 < static_cast<int>(cand.size()); ++j)
    if (cand[j] - cand[j + 1] < kMargin) return false;
  return true;
}

// T rows of distinct logits (bf16-exact when bf16), redrawn for sigmoid_grouped until separated.
inline std::vector<float> make_logits(const RoutingConfig& c, int64_t T, bool bf16, const float* bias, uint64_t seed) {
  const int E = c.num_experts;
  std::mt19937_64 rng(seed);
  std::vector<float> l(static_cast<size_t>(T * E));
  std::unordered_set<float> used;
  for (int64_t t = 0; t < T; ++t) {
    float* row = l.data() + t * E;
    for (int attempt = 0;; ++attempt) {
      if (attempt == 10000) {
        ADD_FAILURE() << "could not draw a separated row";
        break;
      }
      used.clear();
      for (int e = 0; e < E; ++e) {
        float v;
        do {
          v = random_logit(rng, bf16);
        } while (!used.insert(v).second);
        row[e] = v;
      }
      if (c.method != RoutingMethod::kSigmoidGrouped || well_separated(c, row, bias)) break;
    }
  }
  return l;
}

// ---------------------------------------------------------------------------------------------
// Running and comparing
// ---------------------------------------------------------------------------------------------

struct Routed {
  std::vector<int32_t> ids;
  std::vector<float> w;
};

inline Routed run_reference(const RoutingConfig& c, const std::vector<float>& logits, int64_t T,
                     const std::vector<float>& bias) {
  Routed r{std::vector<int32_t>(static_cast<size_t>(T * c.top_k)),
           std::vector<float>(static_cast<size_t>(T * c.top_k))};
  route_reference(c, logits.data(), T, bias.empty() ? nullptr : bias.data(), r.ids.data(), r.w.data());
  return r;
}

// Runs route() on `logits` (converted to bf16 when asked; they must be bf16-exact then) placed
// `offset` bytes into the device buffer, into outputs poisoned with 0xFF, and checks the poison
// past T * k survives.
inline Routed run_gpu(RoutingConfig c, const std::vector<float>& logits, bool bf16, int64_t T,
                      const std::vector<float>& bias, cudaStream_t stream = nullptr, size_t offset = 0) {
  const int k = c.top_k;
  const size_t n = logits.size(), esz = bf16 ? 2 : 4;
  std::vector<uint8_t> bytes(offset + n * esz, 0);
  for (size_t i = 0; i < n; ++i) {
    if (bf16) {
      const uint16_t b = moekit::bf16_from_float(logits[i]);
      if (!std::isnan(logits[i])) EXPECT_EQ(moekit::bf16_to_float(b), logits[i]) << "test logits must be bf16-exact";
      std::memcpy(bytes.data() + offset + 2 * i, &b, 2);
    } else {
      std::memcpy(bytes.data() + offset + 4 * i, &logits[i], 4);
    }
  }
  DeviceBuffer dl(bytes.size()), db(bias.size() * 4);
  dl.upload(bytes);
  if (!bias.empty()) {
    db.upload(bias);
    c.correction_bias = db.as<float>();
  }
  const size_t nout = static_cast<size_t>(T * k) + kPoisonTail;
  DeviceBuffer di(nout * 4), dw(nout * 4);
  di.fill_bytes(0xFF);
  dw.fill_bytes(0xFF);
  // Uploads and memsets run on the legacy stream, which a non-blocking `stream` does not wait for.
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  moekit::route(c, static_cast<const char*>(dl.get()) + offset, bf16 ? LogitsType::kBFloat16 : LogitsType::kFloat32,
                T, di.as<int32_t>(), dw.as<float>(), stream);
  EXPECT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  Routed r{di.download<int32_t>(nout), dw.download<float>(nout)};
  int bad = 0;
  for (size_t i = static_cast<size_t>(T * k); i < nout; ++i) {
    uint32_t wb;
    std::memcpy(&wb, &r.w[i], 4);
    if ((r.ids[i] != -1 || wb != 0xFFFFFFFFu) && bad++ < 3) ADD_FAILURE() << "output written past T * k at " << i;
  }
  r.ids.resize(static_cast<size_t>(T * k));
  r.w.resize(static_cast<size_t>(T * k));
  return r;
}

inline void expect_match(const RoutingConfig& c, int64_t T, const Routed& ref, const Routed& gpu,
                         const std::string& what) {
  const int E = c.num_experts, k = c.top_k;
  int bad_rows = 0, bad_w = 0, bad_range = 0;
  for (int64_t t = 0; t < T; ++t) {
    const int32_t* gi = gpu.ids.data() + t * k;
    const int32_t* ri = ref.ids.data() + t * k;
    for (int j = 0; j < k; ++j) {
      const bool dup = std::find(gi, gi + j, gi[j]) != gi + j;
      if ((gi[j] < 0 || gi[j] >= E || dup) && bad_range++ < 5)
        ADD_FAILURE() << what << ": token " << t << " slot " << j << ": id " << gi[j] << " out of range or repeated";
    }
    if (!std::equal(gi, gi + k, ri)) {
      if (bad_rows++ < 5) {
        std::string g, r;
        for (int j = 0; j < k; ++j) {
          g += " " + std::to_string(gi[j]);
          r += " " + std::to_string(ri[j]);
        }
        ADD_FAILURE() << what << ": token " << t << " ids differ: gpu" << g << " | ref" << r;
      }
      continue;
    }
    for (int j = 0; j < k; ++j) {
      const float gw = gpu.w[t * k + j], rw = ref.w[t * k + j];
      const bool ok = std::isnan(rw) ? std::isnan(gw)
                                     : std::abs(static_cast<double>(gw) - rw) <= kWeightRtol * std::abs(rw) + 1e-35;
      if (!ok && bad_w++ < 5)
        ADD_FAILURE() << what << ": token " << t << " slot " << j << " (expert " << gi[j] << "): weight gpu " << gw
                      << " ref " << rw;
    }
  }
  EXPECT_EQ(bad_rows, 0) << what << ": tokens with different ids";
  EXPECT_EQ(bad_w, 0) << what << ": weights out of tolerance";
  EXPECT_EQ(bad_range, 0) << what << ": invalid ids";
}

// Draws data for a case, runs both sides and compares.
inline void check_case(const Case& cs, int64_t T, bool bf16, uint64_t seed, cudaStream_t stream = nullptr,
                       size_t offset = 0) {
  const RoutingConfig c = make_config(cs);
  const std::vector<float> bias = cs.bias ? random_bias(cs.E, seed ^ 0xB1A5) : std::vector<float>{};
  const auto logits = make_logits(c, T, bf16, bias.empty() ? nullptr : bias.data(), seed);
  const std::string what = cs.name + "_T" + std::to_string(T) + (bf16 ? "_bf16" : "_fp32") +
                           (offset ? "_off" + std::to_string(offset) : "");
  const Routed ref = run_reference(c, logits, T, bias);
  const Routed gpu = run_gpu(c, logits, bf16, T, bias, stream, offset);
  expect_match(c, T, ref, gpu, what);
}

// Rows with NaN / ±Inf. Non-special values are far apart (a permutation of a grid), no bias, so
// only the special values decide the behaviour.
inline std::vector<float> special_rows(int E, int k, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<int> perm(static_cast<size_t>(E));
  std::iota(perm.begin(), perm.end(), 0);
  std::vector<float> l;
  auto base = [&]() {
    std::shuffle(perm.begin(), perm.end(), rng);
    std::vector<float> r(static_cast<size_t>(E));
    for (int e = 0; e < E; ++e) r[e] = -3.0f + 6.0f * static_cast<float>(perm[e]) / static_cast<float>(E);
    return r;
  };
  std::vector<float> r = base();  // the best expert is NaN
  r[std::max_element(r.begin(), r.end()) - r.begin()] = kNaN;
  l.insert(l.end(), r.begin(), r.end());
  r = base();  // NaN at 0, at E-1 and every 5th
  for (int e = 0; e < E; e += 5) r[e] = kNaN;
  r[E - 1] = kNaN;
  l.insert(l.end(), r.begin(), r.end());
  l.insert(l.end(), static_cast<size_t>(E), kNaN);  // all NaN
  r = base();  // only k - 1 numbers: one NaN expert must be picked (the lowest-index NaN)
  for (int e = 0; e < E; ++e)
    if (e >= k - 1) r[e] = (e % 2) ? kNaN : -kNaN;
  l.insert(l.end(), r.begin(), r.end());
  r = base();  // +Inf and -Inf
  r[E / 2] = kInf;
  r[0] = -kInf;
  l.insert(l.end(), r.begin(), r.end());
  l.insert(l.end(), static_cast<size_t>(E), -kInf);  // all -Inf
  r = base();  // NaN, -Inf, +Inf together
  r[E - 1] = kInf;
  r[E / 3] = kNaN;
  r[E / 4] = -kInf;
  l.insert(l.end(), r.begin(), r.end());
  return l;
}

}  // namespace moekit::routing_test

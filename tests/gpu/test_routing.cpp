// GPU routing (moekit::route) against the host reference (route_reference): every SPEC §5 preset,
// shapes that reach each kernel path (experts per lane, load width, group-score mode), deliberate
// ties, NaN/Inf rows, poisoned outputs, misaligned logits, a large batch and CUDA-graph capture.
//
// Random data is drawn so that the reference's float64 ranking cannot differ from the kernel's
// fp32 one: logits are distinct within a row (selection on logits is then exact for the softmax
// methods), and for sigmoid_grouped a row is redrawn until the scores that decide the result (the
// kept-group boundary, and the k + 1 best b among the kept experts) are at least kMargin apart.
// Ids must then match exactly and weights within 1e-5 relative.
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

namespace {

using moekit::LogitsType;
using moekit::RoutingConfig;
using moekit::RoutingMethod;
using moekit::detail::DeviceBuffer;

constexpr double kMargin = 4e-6;      // fp32 b and group scores are within ~1e-6 of float64
constexpr double kWeightRtol = 1e-5;
constexpr int kPoisonTail = 67;       // output elements past T * k that must stay untouched
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

struct Case {
  std::string name;
  int E, k;
  RoutingMethod method;
  bool renorm;
  int groups = 1, keep = 1;
  float scale = 1.0f;
  bool bias = false;
};

RoutingConfig make_config(const Case& c) {
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
std::vector<Case> preset_cases() {
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
std::vector<Case> shape_cases() {
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
float random_logit(std::mt19937_64& rng, bool bf16) {
  if (bf16) {
    const uint64_t r = rng();
    const uint16_t sign = static_cast<uint16_t>((r & 1) << 15);
    const uint16_t exp = static_cast<uint16_t>(122 + ((r >> 1) % 8));
    const uint16_t mant = static_cast<uint16_t>((r >> 8) & 0x7F);
    return moekit::bf16_to_float(static_cast<uint16_t>(sign | (exp << 7) | mant));
  }
  return std::uniform_real_distribution<float>(-4.0f, 4.0f)(rng);
}

std::vector<float> random_bias(int E, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<float> b(static_cast<size_t>(E));
  for (auto& v : b) v = std::uniform_real_distribution<float>(-0.5f, 0.5f)(rng);
  return b;
}

// For sigmoid_grouped: true when the float64 scores that decide the routing are kMargin apart:
// the group scores on both sides of the kept/dropped boundary, and the k + 1 best b of the kept
// experts (slot order and the last pick). fp32 rounding then cannot change the result.
bool well_separated(const RoutingConfig& c, const float* row, const float* bias) {
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
std::vector<float> make_logits(const RoutingConfig& c, int64_t T, bool bf16, const float* bias, uint64_t seed) {
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

Routed run_reference(const RoutingConfig& c, const std::vector<float>& logits, int64_t T,
                     const std::vector<float>& bias) {
  Routed r{std::vector<int32_t>(static_cast<size_t>(T * c.top_k)), std::vector<float>(static_cast<size_t>(T * c.top_k))};
  route_reference(c, logits.data(), T, bias.empty() ? nullptr : bias.data(), r.ids.data(), r.w.data());
  return r;
}

// Runs route() on `logits` (converted to bf16 when asked; they must be bf16-exact then) placed
// `offset` bytes into the device buffer, into outputs poisoned with 0xFF, and checks the poison
// past T * k survives.
Routed run_gpu(RoutingConfig c, const std::vector<float>& logits, bool bf16, int64_t T, const std::vector<float>& bias,
               cudaStream_t stream = nullptr, size_t offset = 0) {
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

void expect_match(const RoutingConfig& c, int64_t T, const Routed& ref, const Routed& gpu, const std::string& what) {
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
void check_case(const Case& cs, int64_t T, bool bf16, uint64_t seed, cudaStream_t stream = nullptr, size_t offset = 0) {
  const RoutingConfig c = make_config(cs);
  const std::vector<float> bias = cs.bias ? random_bias(cs.E, seed ^ 0xB1A5) : std::vector<float>{};
  const auto logits = make_logits(c, T, bf16, bias.empty() ? nullptr : bias.data(), seed);
  const std::string what = cs.name + "_T" + std::to_string(T) + (bf16 ? "_bf16" : "_fp32") +
                           (offset ? "_off" + std::to_string(offset) : "");
  const Routed ref = run_reference(c, logits, T, bias);
  const Routed gpu = run_gpu(c, logits, bf16, T, bias, stream, offset);
  expect_match(c, T, ref, gpu, what);
}

// ---------------------------------------------------------------------------------------------
// Tests
// ---------------------------------------------------------------------------------------------

struct Param {
  Case c;
  int64_t T;
  bool bf16;
};

std::string param_name(const Param& p) {
  return p.c.name + "_T" + std::to_string(p.T) + (p.bf16 ? "_bf16" : "_fp32");
}

void PrintTo(const Param& p, std::ostream* os) { *os << param_name(p); }

class RoutingGpuTest : public ::testing::TestWithParam<Param> {};

TEST_P(RoutingGpuTest, MatchesReference) {
  const Param& p = GetParam();
  check_case(p.c, p.T, p.bf16, 1000 + static_cast<uint64_t>(p.c.E * 7 + p.c.k * 131 + p.T * 3 + p.bf16));
}

std::vector<Param> params(const std::vector<Case>& cases) {
  std::vector<Param> v;
  for (const auto& c : cases)
    for (int64_t T : {1, 7, 1000})
      for (bool bf16 : {false, true}) v.push_back({c, T, bf16});
  return v;
}

INSTANTIATE_TEST_SUITE_P(Presets, RoutingGpuTest, ::testing::ValuesIn(params(preset_cases())),
                         [](const ::testing::TestParamInfo<Param>& i) { return param_name(i.param); });
INSTANTIATE_TEST_SUITE_P(Shapes, RoutingGpuTest, ::testing::ValuesIn(params(shape_cases())),
                         [](const ::testing::TestParamInfo<Param>& i) { return param_name(i.param); });

TEST(RoutingGpu, LargeBatch) {
  // Prefill-sized batches (many CTAs, every warp loops once).
  for (const auto& cs : preset_cases()) {
    if (cs.name != "deepseek_v3" && cs.name != "kimi_k2" && cs.name != "qwen3") continue;
    check_case(cs, 16384, false, 77);
    if (cs.name == "deepseek_v3") check_case(cs, 16384, true, 78);
  }
}

TEST(RoutingGpu, NonDefaultStream) {
  cudaStream_t st;
  ASSERT_EQ(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking), cudaSuccess);
  for (const auto& cs : preset_cases()) check_case(cs, 300, false, 5, st);
  cudaStreamDestroy(st);
}

TEST(RoutingGpu, MisalignedLogits) {
  // Offsets that force narrower loads: fp32 +4 (element loads), fp32 +8 (8-byte loads where the
  // experts per lane allow), bf16 +2 (element loads), bf16 +4 (4-byte loads).
  for (const auto& cs : preset_cases()) {
    check_case(cs, 33, false, 11, nullptr, 4);
    check_case(cs, 33, false, 12, nullptr, 8);
    check_case(cs, 33, true, 13, nullptr, 2);
    check_case(cs, 33, true, 14, nullptr, 4);
  }
}

// Rows built from a few values, so that many scores are exactly equal. Equal inputs give equal
// fp32 and float64 scores, so ties resolve the same way on both sides (lower index / lower group).
// Values are all positive so that no two sigmoid sums coincide in the reals without being equal.
std::vector<float> tie_rows(int E, int G) {
  std::vector<float> l;
  auto push = [&](auto f) {
    for (int e = 0; e < E; ++e) l.push_back(f(e));
  };
  push([](int) { return 0.5f; });                                                  // all equal
  push([](int e) { return (e % 2) ? -0.0f : 0.0f; });                              // ±0
  push([](int e) { return 0.3f + 0.37f * static_cast<float>(e % 8); });           // period 8
  push([](int e) { return 0.3f + 0.37f * static_cast<float>((e / 8) % 8); });     // blocks of 8
  push([&](int e) { return 0.3f + 0.37f * static_cast<float>(((E - 1 - e) / 8) % 8); });  // mirrored
  push([&](int e) { return 0.2f + 0.5f * static_cast<float>((e % G) % 3); });     // same in every group
  push([&](int e) { return e < E / 2 ? 1.25f : 2.5f; });                           // two halves
  return l;
}

TEST(RoutingGpu, DeliberateTies) {
  for (const auto& cs : preset_cases()) {
    for (bool with_bias : {false, true}) {
      if (with_bias && !cs.bias) continue;
      RoutingConfig c = make_config(cs);
      const int E = cs.E, G = E / cs.groups;
      // A bias that repeats in every group keeps groups exactly tied.
      std::vector<float> bias;
      if (with_bias)
        for (int e = 0; e < E; ++e) bias.push_back(0.125f * static_cast<float>((e % G) % 5));
      const auto logits = tie_rows(E, G);
      const int64_t T = static_cast<int64_t>(logits.size()) / E;
      for (bool bf16 : {false, true}) {
        // The tie values are not all bf16-exact: round them (the reference sees the same values).
        std::vector<float> l = logits;
        if (bf16)
          for (auto& v : l) v = moekit::bf16_to_float(moekit::bf16_from_float(v));
        const std::string what = cs.name + "_ties" + (with_bias ? "_bias" : "") + (bf16 ? "_bf16" : "_fp32");
        const Routed ref = run_reference(c, l, T, bias);
        expect_match(c, T, ref, run_gpu(c, l, bf16, T, bias), what);
        // Rows 0 and 1 are all equal (±0 included): ids 0..k-1 for every method, the groups tying
        // too (the first groups are kept). Not with a bias, which separates the experts.
        if (!with_bias)
          for (int j = 0; j < 2 * cs.k; ++j) EXPECT_EQ(ref.ids[j], j % cs.k) << what;
      }
    }
  }
}

// Rows with NaN / ±Inf. Non-special values are far apart (a permutation of a grid), no bias, so
// only the special values decide the behaviour.
std::vector<float> special_rows(int E, int k, uint64_t seed) {
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

TEST(RoutingGpu, NaNAndInfRows) {
  for (const auto& cs : preset_cases()) {
    Case c0 = cs;
    c0.bias = false;
    const RoutingConfig c = make_config(c0);
    const auto logits = special_rows(cs.E, cs.k, 99);
    const int64_t T = static_cast<int64_t>(logits.size()) / cs.E;
    for (bool bf16 : {false, true}) {
      std::vector<float> l = logits;
      if (bf16)  // the grid values are not all bf16-exact; NaN/Inf are
        for (auto& v : l) v = moekit::bf16_to_float(moekit::bf16_from_float(v));
      const std::string what = cs.name + "_special" + (bf16 ? "_bf16" : "_fp32");
      expect_match(c, T, run_reference(c, l, T, {}), run_gpu(c, l, bf16, T, {}), what);
    }
  }
}

TEST(RoutingGpu, GraphCaptureMatchesDirect) {
  for (const auto& cs : preset_cases()) {
    const RoutingConfig c0 = make_config(cs);
    const int64_t T = 500;
    const std::vector<float> bias = cs.bias ? random_bias(cs.E, 3) : std::vector<float>{};
    const auto logits = make_logits(c0, T, false, bias.empty() ? nullptr : bias.data(), 21);
    DeviceBuffer dl(logits.size() * 4), db(bias.size() * 4);
    dl.upload(logits);
    RoutingConfig c = c0;
    if (!bias.empty()) {
      db.upload(bias);
      c.correction_bias = db.as<float>();
    }
    const size_t n = static_cast<size_t>(T * cs.k);
    DeviceBuffer i1(n * 4), w1(n * 4), i2(n * 4), w2(n * 4);
    i2.fill_bytes(0xFF);
    w2.fill_bytes(0xFF);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    cudaStream_t st;
    ASSERT_EQ(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking), cudaSuccess);
    moekit::route(c, dl.get(), LogitsType::kFloat32, T, i1.as<int32_t>(), w1.as<float>(), st);

    cudaGraph_t graph = nullptr;
    ASSERT_EQ(cudaStreamBeginCapture(st, cudaStreamCaptureModeGlobal), cudaSuccess);
    moekit::route(c, dl.get(), LogitsType::kFloat32, T, i2.as<int32_t>(), w2.as<float>(), st);
    ASSERT_EQ(cudaStreamEndCapture(st, &graph), cudaSuccess);
    cudaGraphExec_t exec = nullptr;
    ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
    for (int rep = 0; rep < 3; ++rep) ASSERT_EQ(cudaGraphLaunch(exec, st), cudaSuccess);
    ASSERT_EQ(cudaStreamSynchronize(st), cudaSuccess);
    EXPECT_EQ(i1.download<int32_t>(n), i2.download<int32_t>(n)) << cs.name;
    EXPECT_EQ(w1.download<uint32_t>(n), w2.download<uint32_t>(n)) << cs.name << " (bitwise)";
    const Routed ref = run_reference(c0, logits, T, bias);
    expect_match(c0, T, ref, Routed{i2.download<int32_t>(n), w2.download<float>(n)}, cs.name + "_graph");
    cudaGraphExecDestroy(exec);
    cudaGraphDestroy(graph);
    cudaStreamDestroy(st);
  }
}

TEST(RoutingGpu, EmptyIsNoOp) {
  DeviceBuffer di(256), dw(256);
  di.fill_bytes(0xFF);
  dw.fill_bytes(0xFF);
  for (const auto& cs : preset_cases()) {
    const RoutingConfig c = make_config(cs);
    EXPECT_NO_THROW(moekit::route(c, nullptr, LogitsType::kFloat32, 0, nullptr, nullptr, nullptr));
    EXPECT_NO_THROW(moekit::route(c, di.get(), LogitsType::kBFloat16, 0, di.as<int32_t>(), dw.as<float>(), nullptr));
  }
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  for (uint8_t b : di.download<uint8_t>(256)) EXPECT_EQ(b, 0xFF);
  for (uint8_t b : dw.download<uint8_t>(256)) EXPECT_EQ(b, 0xFF);
}


// ---------------------------------------------------------------------------------------------
// The MoE forward's fused route + single-CTA sort (src/moe/route_sort.h): every output bit-identical
// to route() followed by moe_sort(), on poisoned buffers.
// ---------------------------------------------------------------------------------------------

struct SortOut {
  DeviceBuffer ids, w, counts, offsets, p2e, e2p, invalid;
  SortOut(int64_t T, int k, int L)
      : ids(size_t(T * k) * 4), w(size_t(T * k) * 4), counts(size_t(L) * 4), offsets(size_t(L + 1) * 4),
        p2e(size_t(moekit::moe_sort_rows_bound(T, k, L)) * 4), e2p(size_t(T * k) * 4), invalid(4) {
    for (DeviceBuffer* b : {&ids, &w, &counts, &offsets, &p2e, &e2p, &invalid}) b->fill_bytes(0xA5);
  }
  moekit::MoeSortBuffers buffers() {
    moekit::MoeSortBuffers b;
    b.expert_counts = counts.as<int32_t>();
    b.expert_offsets = offsets.as<int32_t>();
    b.permuted_to_expanded = p2e.as<int32_t>();
    b.expanded_to_permuted = e2p.as<int32_t>();
    b.invalid_count = invalid.as<int32_t>();
    return b;
  }
};

void expect_same_bytes(DeviceBuffer& a, DeviceBuffer& b, const std::string& what) {
  const auto x = a.download<uint8_t>(a.bytes()), y = b.download<uint8_t>(b.bytes());
  EXPECT_TRUE(x == y) << what;
}

// The token quantization fused into moe_route_sort (RouteSortQuantize) against
// quantize_tokens_zeroing: random bf16 tokens (never zeros), poisoned outputs, accumulator and
// counters; every byte must match, and the accumulator and counters must come back zeroed.
struct QuantSide {
  DeviceBuffer xq, sx, acc, counters;
  QuantSide(int64_t T, int64_t H)
      : xq(size_t(T * H)), sx(size_t(moekit::sfa_physical_size(T, H)) * 4), acc(size_t(T * H) * 4), counters(3 * 4) {
    for (DeviceBuffer* b : {&xq, &sx, &acc, &counters}) EXPECT_EQ(cudaMemset(b->get(), 0x7B, b->bytes()), cudaSuccess);
  }
  moekit::detail::RouteSortQuantize args(const void* x, int64_t H) {
    return {x, H, xq.get(), sx.as<float>(), acc.as<float>(), counters.as<unsigned>(), 3};
  }
};

// Runs both sides on the same logits (fp32 or bf16-exact values) and compares every buffer. With
// hidden > 0 the fused side also quantizes T random tokens of that width (QuantSide).
void check_route_sort(const Case& cs, const std::vector<float>& logits, int64_t T, bool bf16, int off, int L,
                      const std::vector<float>& bias, const std::string& what, int64_t hidden = 0) {
  RoutingConfig c = make_config(cs);
  const int k = c.top_k;
  ASSERT_TRUE(moekit::detail::moe_route_sort_applies(c, T, L)) << what;
  std::vector<uint8_t> bytes(logits.size() * (bf16 ? 2 : 4));
  for (size_t i = 0; i < logits.size(); ++i) {
    if (bf16) {
      const uint16_t b = moekit::bf16_from_float(logits[i]);
      std::memcpy(bytes.data() + 2 * i, &b, 2);
    } else {
      std::memcpy(bytes.data() + 4 * i, &logits[i], 4);
    }
  }
  DeviceBuffer dl(bytes.size()), db(bias.size() * 4);
  dl.upload(bytes);
  if (!bias.empty()) {
    db.upload(bias);
    c.correction_bias = db.as<float>();
  }
  const LogitsType type = bf16 ? LogitsType::kBFloat16 : LogitsType::kFloat32;
  const size_t ws_bytes = moekit::moe_sort_workspace_size(T, k, L);
  DeviceBuffer ws(ws_bytes);
  SortOut a(T, k, L), b(T, k, L);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  moekit::route(c, dl.get(), type, T, a.ids.as<int32_t>(), a.w.as<float>(), nullptr);
  moekit::moe_sort(a.ids.as<int32_t>(), T, k, c.num_experts, off, L, a.buffers(), ws.get(), ws_bytes, nullptr);
  DeviceBuffer x(size_t(std::max<int64_t>(T * hidden, 1)) * 2);
  QuantSide qa(T, std::max<int64_t>(hidden, 16)), qb(T, std::max<int64_t>(hidden, 16));
  moekit::detail::RouteSortQuantize q;
  if (hidden > 0) {
    std::mt19937_64 rng(uint64_t(T * 1000 + hidden));
    std::uniform_real_distribution<float> val(-3.0f, 3.0f);
    std::vector<uint16_t> xs(size_t(T * hidden));
    for (auto& v : xs) v = moekit::bf16_from_float(val(rng) + 1e-3f);
    x.upload(xs);
    moekit::detail::quantize_tokens_zeroing(x.get(), T, hidden, qa.xq.get(), qa.sx.as<float>(), qa.acc.as<float>(),
                                            nullptr, qa.counters.as<unsigned>(), 3);
    q = qb.args(x.get(), hidden);
  }
  moekit::detail::moe_route_sort(c, dl.get(), type, T, b.ids.as<int32_t>(), b.w.as<float>(), c.num_experts, off, L,
                                 b.buffers(), ws.get(), ws_bytes, nullptr, hidden > 0 ? &q : nullptr);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  if (hidden > 0) {
    expect_same_bytes(qa.xq, qb.xq, what + ": xq");
    expect_same_bytes(qa.sx, qb.sx, what + ": sx");
    const auto acc = qb.acc.download<float>(size_t(T * hidden));
    EXPECT_TRUE(std::all_of(acc.begin(), acc.end(), [](float v) { return v == 0.0f; })) << what << ": y_acc zeroed";
    const auto ctr = qb.counters.download<unsigned>(3);
    EXPECT_TRUE(std::all_of(ctr.begin(), ctr.end(), [](unsigned v) { return v == 0u; })) << what << ": counters";
    const auto codes = qb.xq.download<uint8_t>(size_t(T * hidden));
    EXPECT_GT(std::count_if(codes.begin(), codes.end(), [](uint8_t v) { return (v & 0x7F) != 0; }), T * hidden / 2)
        << what << ": the codes are not mostly zero";
  }
  expect_same_bytes(a.ids, b.ids, what + ": topk_ids");
  expect_same_bytes(a.w, b.w, what + ": topk_weights");
  expect_same_bytes(a.counts, b.counts, what + ": expert_counts");
  expect_same_bytes(a.offsets, b.offsets, what + ": expert_offsets");
  expect_same_bytes(a.p2e, b.p2e, what + ": permuted_to_expanded");
  expect_same_bytes(a.e2p, b.e2p, what + ": expanded_to_permuted");
  expect_same_bytes(a.invalid, b.invalid, what + ": invalid_count");
  // And the routing itself is right (the reference, not only route()).
  expect_match(make_config(cs), T, run_reference(make_config(cs), logits, T, bias),
               Routed{b.ids.download<int32_t>(size_t(T * k)), b.w.download<float>(size_t(T * k))}, what);
}

TEST(RouteSortFusedGpu, MatchesRouteThenSort) {
  std::vector<Case> cases = preset_cases();
  for (const auto& cs : shape_cases())
    if (moekit::detail::route_npl(cs.E) <= 12) cases.push_back(cs);
  int ran = 0;
  uint64_t seed = 11;
  for (const auto& cs : cases) {
    const RoutingConfig c = make_config(cs);
    for (int64_t T : {1, 3, 8}) {
      // Full slice, the upper half, and an odd slice in the middle.
      const int E = cs.E;
      const std::pair<int, int> slices[] = {{0, E}, {E / 2, E - E / 2}, {E / 3, std::max(1, E / 3)}};
      for (const auto& [off, L] : slices) {
        if (!moekit::detail::moe_route_sort_applies(c, T, L)) continue;
        const bool bf16 = (seed % 2) == 0;
        const std::vector<float> bias = cs.bias ? random_bias(E, seed ^ 0xB1A5) : std::vector<float>{};
        const auto logits = make_logits(c, T, bf16, bias.empty() ? nullptr : bias.data(), seed);
        // Every other case also quantizes tokens, of widths with and without a partial 128-block.
        const int64_t hidden_cases[] = {0, 7168, 0, 2880, 0, 528};
        check_route_sort(cs, logits, T, bf16, off, L, bias,
                         cs.name + "_T" + std::to_string(T) + "_slice" + std::to_string(off) + "+" + std::to_string(L) +
                             (bf16 ? "_bf16" : "_fp32"),
                         hidden_cases[seed % 6]);
        ++seed;
        ++ran;
      }
    }
  }
  EXPECT_GE(ran, 80) << "too few fused cases ran";
}

// The launch with its quantization CTAs, captured in a CUDA graph and replayed, writes the same
// bytes as when launched eagerly (sizes with and without the sort's helper CTAs).
TEST(RouteSortFusedGpu, QuantizeInGraphMatchesEager) {
  moekit::test::Stream s;
  const Case cs{"sig32", 32, 8, RoutingMethod::kSigmoidGrouped, true, 4, 2, 2.5f, false};
  const RoutingConfig c = make_config(cs);
  const int64_t H = 1024;
  for (int64_t T : {1, 7, 8}) {
    SCOPED_TRACE(::testing::Message() << "T=" << T);
    const auto logits = make_logits(c, T, false, nullptr, 77 + uint64_t(T));
    DeviceBuffer dl(logits.size() * 4), x(size_t(T * H) * 2);
    dl.upload(logits);
    std::mt19937_64 rng{uint64_t(T)};
    std::uniform_real_distribution<float> val(-3.0f, 3.0f);
    std::vector<uint16_t> xs(size_t(T * H));
    for (auto& v : xs) v = moekit::bf16_from_float(val(rng) + 1e-3f);
    x.upload(xs);
    const size_t ws_bytes = moekit::moe_sort_workspace_size(T, c.top_k, c.num_experts);
    DeviceBuffer ws(ws_bytes);
    SortOut se(T, c.top_k, c.num_experts), sg(T, c.top_k, c.num_experts);
    QuantSide qe(T, H), qg(T, H);
    auto run = [&](SortOut& o, QuantSide& q) {
      const moekit::detail::RouteSortQuantize args = q.args(x.get(), H);
      moekit::detail::moe_route_sort(c, dl.get(), LogitsType::kFloat32, T, o.ids.as<int32_t>(), o.w.as<float>(),
                                     c.num_experts, 0, c.num_experts, o.buffers(), ws.get(), ws_bytes, s, &args);
    };
    run(se, qe);
    ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
    moekit::test::run_in_graph(s, [&] { run(sg, qg); });
    expect_same_bytes(se.ids, sg.ids, "topk_ids");
    expect_same_bytes(se.offsets, sg.offsets, "expert_offsets");
    expect_same_bytes(se.p2e, sg.p2e, "permuted_to_expanded");
    expect_same_bytes(qe.xq, qg.xq, "xq");
    expect_same_bytes(qe.sx, qg.sx, "sx");
    expect_same_bytes(qe.acc, qg.acc, "zeroed accumulator");
    expect_same_bytes(qe.counters, qg.counters, "zeroed counters");
  }
}

TEST(RouteSortFusedGpu, NaNAndInfRows) {
  for (const auto& cs : preset_cases()) {
    Case c0 = cs;
    c0.bias = false;
    const auto logits = special_rows(cs.E, cs.k, 7);
    const int64_t T = static_cast<int64_t>(logits.size()) / cs.E;
    check_route_sort(c0, logits, T, false, 0, cs.E, {}, cs.name + "_special");
  }
}

// moe_sort_quantize (callers' top-k ids: the single-CTA sort with the token quantization in the same
// launch) against moe_sort followed by quantize_tokens_zeroing: random ids with duplicates, -1 and
// invalid ids, EP slices, hidden sizes with and without a partial 128-block, poisoned outputs; every
// byte must match. Also once captured in a CUDA graph and replayed with other ids.
TEST(SortQuantizeFusedGpu, MatchesSortThenQuantize) {
  using moekit::detail::moe_sort_quantize;
  struct Shape {
    int64_t T;
    int k, E, off, L;
    int64_t H;
  };
  const Shape shapes[] = {{1, 8, 256, 0, 256, 7168},  {2, 8, 256, 0, 256, 7168},  {7, 8, 256, 128, 128, 2880},
                          {64, 8, 256, 0, 256, 7168}, {256, 8, 256, 0, 256, 528}, {33, 1, 16, 3, 9, 2880},
                          {5, 4, 384, 0, 384, 1024},  {128, 6, 64, 16, 32, 7168}};
  moekit::test::Stream s;
  uint64_t seed = 5;
  for (const Shape& sh : shapes) {
    const std::string what = "T" + std::to_string(sh.T) + "_k" + std::to_string(sh.k) + "_E" + std::to_string(sh.E) +
                             "_slice" + std::to_string(sh.off) + "+" + std::to_string(sh.L) + "_H" +
                             std::to_string(sh.H);
    SCOPED_TRACE(what);
    ASSERT_TRUE(moekit::detail::moe_sort_quantize_applies(sh.T, sh.k, sh.L));
    std::mt19937_64 rng(seed++);
    auto random_ids = [&] {
      std::uniform_int_distribution<int> id(0, sh.E - 1), odd(0, 31);
      std::vector<int32_t> ids(size_t(sh.T * sh.k));
      for (auto& v : ids) {
        const int o = odd(rng);
        v = o == 0 ? -1 : o == 1 ? sh.E + o : o == 2 ? ids[0] : id(rng);  // -1, invalid, duplicates
      }
      ids.back() = sh.E + 7;  // at least one invalid id
      return ids;
    };
    std::uniform_real_distribution<float> val(-3.0f, 3.0f);
    std::vector<uint16_t> xs(size_t(sh.T * sh.H));
    for (auto& v : xs) v = moekit::bf16_from_float(val(rng) + 1e-3f);
    DeviceBuffer ids(size_t(sh.T * sh.k) * 4), x(xs.size() * 2);
    x.upload(xs);
    const size_t ws_bytes = moekit::moe_sort_workspace_size(sh.T, sh.k, sh.L);
    DeviceBuffer ws(ws_bytes);
    auto compare = [&](const std::vector<int32_t>& id_values, bool in_graph) {
      ids.upload(id_values);
      SortOut a(sh.T, sh.k, sh.L), b(sh.T, sh.k, sh.L);
      QuantSide qa(sh.T, sh.H), qb(sh.T, sh.H);
      moekit::moe_sort(ids.as<int32_t>(), sh.T, sh.k, sh.E, sh.off, sh.L, a.buffers(), ws.get(), ws_bytes, s);
      moekit::detail::quantize_tokens_zeroing(x.get(), sh.T, sh.H, qa.xq.get(), qa.sx.as<float>(), qa.acc.as<float>(),
                                              s, qa.counters.as<unsigned>(), 3);
      ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
      const moekit::detail::RouteSortQuantize q = qb.args(x.get(), sh.H);
      auto run = [&] {
        moe_sort_quantize(ids.as<int32_t>(), sh.T, sh.k, sh.E, sh.off, sh.L, b.buffers(), ws.get(), ws_bytes, q, s);
      };
      if (in_graph) moekit::test::run_in_graph(s, run);
      else run();
      ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
      expect_same_bytes(qa.xq, qb.xq, "xq");
      expect_same_bytes(qa.sx, qb.sx, "sx");
      expect_same_bytes(qa.acc, qb.acc, "zeroed accumulator");
      expect_same_bytes(qa.counters, qb.counters, "zeroed counters");
      const auto acc = qb.acc.download<float>(size_t(sh.T * sh.H));
      EXPECT_TRUE(std::all_of(acc.begin(), acc.end(), [](float v) { return v == 0.0f; })) << "y_acc zeroed";
      const auto codes = qb.xq.download<uint8_t>(size_t(sh.T * sh.H));
      EXPECT_GT(std::count_if(codes.begin(), codes.end(), [](uint8_t v) { return (v & 0x7F) != 0; }), sh.T * sh.H / 2)
          << "the codes are not mostly zero";
      expect_same_bytes(a.counts, b.counts, "expert_counts");
      expect_same_bytes(a.offsets, b.offsets, "expert_offsets");
      expect_same_bytes(a.p2e, b.p2e, "permuted_to_expanded");
      expect_same_bytes(a.e2p, b.e2p, "expanded_to_permuted");
      expect_same_bytes(a.invalid, b.invalid, "invalid_count");
      EXPECT_GT(a.invalid.download<int32_t>(1)[0], 0) << "the ids include invalid ones";
    };
    compare(random_ids(), false);
    compare(random_ids(), true);
  }
  EXPECT_FALSE(moekit::detail::moe_sort_quantize_applies(0, 8, 256));
  EXPECT_FALSE(moekit::detail::moe_sort_quantize_applies(4096, 8, 256)) << "the radix path's sizes";
}

TEST(RouteSortFusedGpu, Applicability) {
  using moekit::detail::moe_route_sort_applies;
  const auto cases = preset_cases();
  const RoutingConfig ds = make_config(cases[0]);  // deepseek-v3: E = 256, 8 groups
  EXPECT_TRUE(moe_route_sort_applies(ds, 1, 256));
  EXPECT_TRUE(moe_route_sort_applies(ds, 8, 256));
  EXPECT_FALSE(moe_route_sort_applies(ds, 9, 256)) << "larger batches route faster in their own kernel";
  EXPECT_FALSE(moe_route_sort_applies(ds, 0, 256));
  EXPECT_TRUE(moe_route_sort_applies(make_config(cases[1]), 8, 384)) << "kimi-k2: NPL 12";
  RoutingConfig big = make_config(Case{"softmax_E640", 640, 16, RoutingMethod::kSoftmaxTopk, true});
  EXPECT_FALSE(moe_route_sort_applies(big, 1, 640)) << "NPL 24 does not fit the sort's registers";
  // 256 groups of one: 320 words of group scratch per routing warp; 3 KB hold 2 warps.
  RoutingConfig g256 = make_config(Case{"g256", 256, 8, RoutingMethod::kSigmoidGrouped, true, 256, 64, 1.0f, true});
  EXPECT_TRUE(moe_route_sort_applies(g256, 2, 256));
  EXPECT_FALSE(moe_route_sort_applies(g256, 3, 256));
  EXPECT_FALSE(moe_route_sort_applies(ds, 8, 1025)) << "L above the single-CTA sort's limit";
}

}  // namespace

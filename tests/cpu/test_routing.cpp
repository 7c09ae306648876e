// CPU tests of the routing reference (route_reference, routing.h, SPEC §3) on hand-computed cases,
// and of the argument checks that route() makes before touching the GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <string>
#include <vector>

#include "moekit/error.h"
#include "moekit/routing.h"

namespace moekit {
namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

struct Routed {
  std::vector<int32_t> ids;
  std::vector<float> w;
};

Routed ref(const RoutingConfig& c, const std::vector<float>& logits, const std::vector<float>* bias = nullptr) {
  const int64_t T = static_cast<int64_t>(logits.size()) / c.num_experts;
  Routed r{std::vector<int32_t>(static_cast<size_t>(T * c.top_k), -7),
           std::vector<float>(static_cast<size_t>(T * c.top_k), -7.0f)};
  route_reference(c, logits.data(), T, bias ? bias->data() : nullptr, r.ids.data(), r.w.data());
  return r;
}

RoutingConfig softmax_cfg(int E, int k, bool renorm) {
  RoutingConfig c;
  c.method = RoutingMethod::kSoftmaxTopk;
  c.num_experts = E;
  c.top_k = k;
  c.renormalize = renorm;
  return c;
}

RoutingConfig topk_softmax_cfg(int E, int k) {
  RoutingConfig c;
  c.method = RoutingMethod::kTopkSoftmax;
  c.num_experts = E;
  c.top_k = k;
  return c;
}

RoutingConfig sigmoid_cfg(int E, int k, int groups, int keep, bool renorm, float scale) {
  RoutingConfig c;
  c.method = RoutingMethod::kSigmoidGrouped;
  c.num_experts = E;
  c.top_k = k;
  c.num_groups = groups;
  c.topk_groups = keep;
  c.renormalize = renorm;
  c.routed_scaling_factor = scale;
  return c;
}

double sig(double x) { return 1.0 / (1.0 + std::exp(-x)); }

void expect_weights(const std::vector<float>& got, const std::vector<double>& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < want.size(); ++i)
    EXPECT_NEAR(got[i], want[i], 1e-6 * std::abs(want[i]) + 1e-12) << what << " slot " << i;
}

TEST(RoutingReference, SoftmaxTopkNoRenormalize) {
  const auto r = ref(softmax_cfg(4, 2, false), {1.0f, 3.0f, 2.0f, 0.0f});
  EXPECT_EQ(r.ids, (std::vector<int32_t>{1, 2}));
  const double S = std::exp(-2.0) + 1.0 + std::exp(-1.0) + std::exp(-3.0);
  expect_weights(r.w, {1.0 / S, std::exp(-1.0) / S}, "softmax no renorm");
}

TEST(RoutingReference, SoftmaxTopkRenormalize) {
  const auto r = ref(softmax_cfg(4, 2, true), {1.0f, 3.0f, 2.0f, 0.0f});
  EXPECT_EQ(r.ids, (std::vector<int32_t>{1, 2}));
  const double d = 1.0 + std::exp(-1.0);
  expect_weights(r.w, {1.0 / d, std::exp(-1.0) / d}, "softmax renorm");
}

TEST(RoutingReference, TiesGoToLowerIndex) {
  // Three equal logits: the lower indices win and come first; the slot order is decreasing.
  const std::vector<float> l = {1.0f, 2.0f, 2.0f, 2.0f, 0.0f};
  EXPECT_EQ(ref(softmax_cfg(5, 2, false), l).ids, (std::vector<int32_t>{1, 2}));
  EXPECT_EQ(ref(softmax_cfg(5, 4, true), l).ids, (std::vector<int32_t>{1, 2, 3, 0}));
  EXPECT_EQ(ref(topk_softmax_cfg(5, 3), l).ids, (std::vector<int32_t>{1, 2, 3}));
  // All equal: ids 0..k-1, equal weights.
  const auto r = ref(topk_softmax_cfg(6, 4), std::vector<float>(6, -0.5f));
  EXPECT_EQ(r.ids, (std::vector<int32_t>{0, 1, 2, 3}));
  expect_weights(r.w, {0.25, 0.25, 0.25, 0.25}, "all equal");
  // -0 and +0 are equal: the lower index wins whatever the sign.
  EXPECT_EQ(ref(topk_softmax_cfg(2, 1), {0.0f, -0.0f}).ids, (std::vector<int32_t>{0}));
  EXPECT_EQ(ref(topk_softmax_cfg(2, 1), {-0.0f, 0.0f}).ids, (std::vector<int32_t>{0}));
  // Sigmoid: equal logits and no bias → equal b → lower index.
  EXPECT_EQ(ref(sigmoid_cfg(4, 2, 1, 1, true, 1.0f), {0.3f, 0.7f, 0.7f, 0.7f}).ids, (std::vector<int32_t>{1, 2}));
}

TEST(RoutingReference, TopkSoftmax) {
  const auto r = ref(topk_softmax_cfg(4, 3), {0.5f, -1.0f, 2.0f, 2.25f});
  EXPECT_EQ(r.ids, (std::vector<int32_t>{3, 2, 0}));
  const double a = 1.0, b = std::exp(-0.25), c = std::exp(-1.75), s = a + b + c;
  expect_weights(r.w, {a / s, b / s, c / s}, "topk_softmax");
  // renormalize changes nothing: the weights already sum to 1.
  auto cfg = topk_softmax_cfg(4, 3);
  cfg.renormalize = true;
  const auto r2 = ref(cfg, {0.5f, -1.0f, 2.0f, 2.25f});
  EXPECT_EQ(r2.ids, r.ids);
  EXPECT_EQ(r2.w, r.w);
}

TEST(RoutingReference, KEqualsOne) {
  const std::vector<float> l = {0.1f, -3.0f, 0.4f, 0.2f};
  auto r = ref(topk_softmax_cfg(4, 1), l);
  EXPECT_EQ(r.ids, (std::vector<int32_t>{2}));
  EXPECT_EQ(r.w, (std::vector<float>{1.0f}));
  r = ref(softmax_cfg(4, 1, true), l);
  EXPECT_EQ(r.ids, (std::vector<int32_t>{2}));
  EXPECT_EQ(r.w, (std::vector<float>{1.0f}));
  r = ref(softmax_cfg(4, 1, false), l);
  const double S = std::exp(0.1 - 0.4) + std::exp(-3.4) + 1.0 + std::exp(0.2 - 0.4);
  expect_weights(r.w, {1.0 / S}, "k=1 softmax");
  r = ref(sigmoid_cfg(4, 1, 2, 1, false, 2.0f), l);
  EXPECT_EQ(r.ids, (std::vector<int32_t>{2}));
  expect_weights(r.w, {2.0 * sig(0.4f)}, "k=1 sigmoid");
  r = ref(sigmoid_cfg(4, 1, 2, 1, true, 2.0f), l);
  expect_weights(r.w, {2.0}, "k=1 sigmoid renorm");
  // E = 1.
  r = ref(softmax_cfg(1, 1, false), {5.0f});
  EXPECT_EQ(r.ids, (std::vector<int32_t>{0}));
  EXPECT_EQ(r.w, (std::vector<float>{1.0f}));
}

TEST(RoutingReference, KEqualsE) {
  const std::vector<float> l = {0.5f, 1.5f, -1.0f, 1.0f, 0.0f};
  for (bool renorm : {false, true}) {
    const auto r = ref(softmax_cfg(5, 5, renorm), l);
    EXPECT_EQ(r.ids, (std::vector<int32_t>{1, 3, 0, 4, 2}));
    double sum = 0;
    for (float w : r.w) sum += w;
    EXPECT_NEAR(sum, 1.0, 1e-6);
    for (int j = 1; j < 5; ++j) EXPECT_LT(r.w[j], r.w[j - 1]);
  }
  const auto r = ref(sigmoid_cfg(5, 5, 5, 5, false, 1.0f), l);
  EXPECT_EQ(r.ids, (std::vector<int32_t>{1, 3, 0, 4, 2}));
  for (int j = 0; j < 5; ++j) EXPECT_NEAR(r.w[j], sig(l[r.ids[j]]), 1e-7);
}

TEST(RoutingReference, MultipleTokens) {
  const auto r = ref(topk_softmax_cfg(3, 2), {0.0f, 1.0f, 2.0f, 2.0f, 1.0f, 0.0f, 1.0f, 1.0f, 1.0f});
  EXPECT_EQ(r.ids, (std::vector<int32_t>{2, 1, 0, 1, 0, 1}));
}

// 8 experts in 4 groups of 2. Expert 6 has the highest score, but its group's second expert is
// poor, so group 3 scores below groups 0 and 1 and is dropped with topk_groups = 2.
const std::vector<float> kGroupLogits = {2.0f, 1.5f, 1.0f, 0.9f, -3.0f, -3.5f, 3.0f, -5.0f};

TEST(RoutingReference, SigmoidGroupLimitingExcludesHighExpert) {
  const auto& l = kGroupLogits;
  auto r = ref(sigmoid_cfg(8, 2, 4, 2, true, 1.0f), l);
  EXPECT_EQ(r.ids, (std::vector<int32_t>{0, 1}));
  const double s0 = sig(2.0), s1 = sig(1.5);
  expect_weights(r.w, {s0 / (s0 + s1), s1 / (s0 + s1)}, "grouped renorm");
  // k = 4 fills from the kept groups only: 0, 1, 2, 3.
  r = ref(sigmoid_cfg(8, 4, 4, 2, false, 1.0f), l);
  EXPECT_EQ(r.ids, (std::vector<int32_t>{0, 1, 2, 3}));
  // Keeping 3 groups brings group 3 back: expert 6 first.
  r = ref(sigmoid_cfg(8, 2, 4, 3, false, 1.0f), l);
  EXPECT_EQ(r.ids, (std::vector<int32_t>{6, 0}));
  // A single group (no limiting) as well.
  r = ref(sigmoid_cfg(8, 2, 1, 1, false, 1.0f), l);
  EXPECT_EQ(r.ids, (std::vector<int32_t>{6, 0}));
  expect_weights(r.w, {sig(3.0), sig(2.0)}, "one group");
}

TEST(RoutingReference, SigmoidBiasSelectsButDoesNotWeigh) {
  std::vector<float> bias(8, 0.0f);
  bias[3] = 1.0f;  // b3 = s(0.9) + 1 = 1.71: group 1 now leads and expert 3 is picked first
  auto r = ref(sigmoid_cfg(8, 2, 4, 2, false, 1.0f), kGroupLogits, &bias);
  EXPECT_EQ(r.ids, (std::vector<int32_t>{3, 0}));
  expect_weights(r.w, {sig(0.9f), sig(2.0)}, "bias: unbiased weights");
  // A negative bias pushes expert 0 below expert 1 and 2.
  bias.assign(8, 0.0f);
  bias[0] = -0.2f;  // b0 = 0.681 < b1 = 0.818, b2 = 0.731
  r = ref(sigmoid_cfg(8, 3, 4, 2, true, 1.0f), kGroupLogits, &bias);
  EXPECT_EQ(r.ids, (std::vector<int32_t>{1, 2, 3}));
  const double s1 = sig(1.5), s2 = sig(1.0), s3 = sig(0.9f), s = s1 + s2 + s3;
  expect_weights(r.w, {s1 / s, s2 / s, s3 / s}, "bias renorm");
}

TEST(RoutingReference, SigmoidRoutedScalingFactor) {
  const auto& l = kGroupLogits;
  auto r = ref(sigmoid_cfg(8, 2, 4, 2, true, 2.5f), l);
  const double s0 = sig(2.0), s1 = sig(1.5);
  expect_weights(r.w, {2.5 * s0 / (s0 + s1), 2.5 * s1 / (s0 + s1)}, "scale renorm");
  EXPECT_NEAR(r.w[0] + r.w[1], 2.5, 1e-6);
  r = ref(sigmoid_cfg(8, 2, 4, 2, false, 2.5f), l);
  expect_weights(r.w, {2.5 * s0, 2.5 * s1}, "scale no renorm");
}

TEST(RoutingReference, SigmoidGroupTiesAndSingletonGroups) {
  // All equal: every group ties; the lowest groups are kept and the lowest experts picked.
  auto r = ref(sigmoid_cfg(8, 3, 4, 2, true, 1.0f), std::vector<float>(8, 0.25f));
  EXPECT_EQ(r.ids, (std::vector<int32_t>{0, 1, 2}));
  expect_weights(r.w, {1.0 / 3, 1.0 / 3, 1.0 / 3}, "all equal");
  // Groups 1 and 2 hold the same scores in a different order; group 0 is best, one more is kept:
  // group 1 (the lower), so the tie among expert 2/3/4/5 values resolves inside group 1.
  r = ref(sigmoid_cfg(6, 3, 3, 2, false, 1.0f), {3.0f, 3.0f, 1.0f, 2.0f, 2.0f, 1.0f});
  EXPECT_EQ(r.ids, (std::vector<int32_t>{0, 1, 3}));
  // Group score = sum of the top-2, not the max: group 1 {2.0, -4} loses to group 0 {1.0, 1.0}.
  r = ref(sigmoid_cfg(6, 1, 3, 1, false, 1.0f), {1.0f, 1.0f, 2.0f, -4.0f, 0.0f, 0.0f});
  EXPECT_EQ(r.ids, (std::vector<int32_t>{0}));
  // Groups of one expert: group score = b, so group limiting is plain top-k.
  r = ref(sigmoid_cfg(4, 2, 4, 2, false, 1.0f), {0.0f, 1.0f, 2.0f, 3.0f});
  EXPECT_EQ(r.ids, (std::vector<int32_t>{3, 2}));
}

TEST(RoutingReference, NaNAndInf) {
  // NaN ranks below everything, −Inf included; ids stay distinct and in range.
  auto r = ref(softmax_cfg(4, 2, false), {kNaN, 1.0f, 0.0f, -kInf});
  EXPECT_EQ(r.ids, (std::vector<int32_t>{1, 2}));
  EXPECT_TRUE(std::isnan(r.w[0]) && std::isnan(r.w[1])) << "softmax over a row with NaN";
  r = ref(softmax_cfg(4, 2, true), {kNaN, 1.0f, 0.0f, -kInf});
  EXPECT_EQ(r.ids, (std::vector<int32_t>{1, 2}));
  const double d = 1.0 + std::exp(-1.0);
  expect_weights(r.w, {1.0 / d, std::exp(-1.0) / d}, "renormalized: picked only");
  r = ref(topk_softmax_cfg(4, 3), {kNaN, -kInf, kNaN, 0.5f});
  EXPECT_EQ(r.ids, (std::vector<int32_t>{3, 1, 0}));
  EXPECT_TRUE(std::isnan(r.w[0]) && std::isnan(r.w[2])) << "a NaN picked poisons the softmax";
  // All NaN: ids 0..k-1, NaN weights.
  r = ref(topk_softmax_cfg(4, 2), std::vector<float>(4, kNaN));
  EXPECT_EQ(r.ids, (std::vector<int32_t>{0, 1}));
  EXPECT_TRUE(std::isnan(r.w[0]) && std::isnan(r.w[1]));
  // +Inf picked first; Inf − Inf makes the weights NaN.
  r = ref(softmax_cfg(3, 2, true), {0.0f, kInf, 1.0f});
  EXPECT_EQ(r.ids, (std::vector<int32_t>{1, 2}));
  EXPECT_TRUE(std::isnan(r.w[0]));
  // Sigmoid: the NaN expert is skipped; its group scores the sum of its 2 best non-NaN b, or NaN.
  r = ref(sigmoid_cfg(6, 2, 2, 1, true, 1.0f), {kNaN, 0.5f, 0.4f, 0.6f, 0.0f, kNaN});
  EXPECT_EQ(r.ids, (std::vector<int32_t>{1, 2})) << "group 0 = s(.5)+s(.4) > group 1 = s(.6)+s(0)";
  EXPECT_FALSE(std::isnan(r.w[0]));
  r = ref(sigmoid_cfg(4, 1, 2, 1, false, 1.0f), {kNaN, 3.0f, -1.0f, -2.0f});
  EXPECT_EQ(r.ids, (std::vector<int32_t>{2})) << "group 0's score is NaN (a NaN among its top-2): ranked last";
  // −Inf logits: s = 0; all picked s = 0 → 0/0 with renormalize.
  r = ref(sigmoid_cfg(2, 2, 1, 1, true, 1.0f), {-kInf, -kInf});
  EXPECT_EQ(r.ids, (std::vector<int32_t>{0, 1}));
  EXPECT_TRUE(std::isnan(r.w[0]));
  r = ref(sigmoid_cfg(2, 2, 1, 1, false, 1.0f), {-kInf, -kInf});
  EXPECT_EQ(r.w, (std::vector<float>{0.0f, 0.0f}));
}

TEST(RoutingReference, LargestConfiguration) {
  const int E = 1024, k = 32;
  std::vector<float> l(E);
  for (int e = 0; e < E; ++e) l[e] = static_cast<float>((e * 37) % E);
  const auto r = ref(sigmoid_cfg(E, k, 8, 3, true, 1.0f), l);
  for (int j = 0; j < k; ++j) {
    EXPECT_GE(r.ids[j], 0);
    EXPECT_LT(r.ids[j], E);
  }
  const auto r2 = ref(topk_softmax_cfg(E, k), l);
  for (int j = 0; j < k; ++j) EXPECT_EQ(l[r2.ids[j]], static_cast<float>(E - 1 - j));
}

// ---------------------------------------------------------------------------------------------
// Validation (route() checks before any CUDA call, so these run without a GPU)
// ---------------------------------------------------------------------------------------------

template <typename F>
void expect_code(F&& f, ErrorCode code, const std::string& what, const char* fn) {
  try {
    f();
    ADD_FAILURE() << what << ": no exception";
  } catch (const Error& e) {
    EXPECT_EQ(static_cast<int>(e.code()), static_cast<int>(code)) << what << ": " << e.what();
    EXPECT_NE(std::string(e.what()).find(fn), std::string::npos) << what << ": " << e.what();
  }
}

TEST(RoutingValidation, BadConfigurations) {
  const auto kInv = ErrorCode::kInvalidArgument;
  std::vector<float> l(2048, 0.0f);
  std::vector<int32_t> ids(64);
  std::vector<float> w(64);
  // Host buffers stand in for device pointers: every call here must throw before a launch.
  const float bias_storage[4] = {};
  struct Bad {
    RoutingConfig c;
    const char* what;
  };
  std::vector<Bad> bad;
  auto add = [&](RoutingConfig c, const char* what) { bad.push_back({c, what}); };
  add(softmax_cfg(0, 1, false), "E = 0");
  add(softmax_cfg(-4, 1, false), "E < 0");
  add(softmax_cfg(1025, 1, false), "E = 1025");
  add(softmax_cfg(8, 0, false), "k = 0");
  add(softmax_cfg(8, 9, false), "k > E");
  add(softmax_cfg(64, 33, false), "k = 33");
  add(topk_softmax_cfg(8, -1), "k < 0");
  add(sigmoid_cfg(8, 2, 0, 1, true, 1.0f), "num_groups = 0");
  add(sigmoid_cfg(8, 2, 3, 1, true, 1.0f), "num_groups does not divide E");
  add(sigmoid_cfg(8, 2, 16, 1, true, 1.0f), "num_groups > E");
  add(sigmoid_cfg(8, 2, 4, 0, true, 1.0f), "topk_groups = 0");
  add(sigmoid_cfg(8, 2, 4, 5, true, 1.0f), "topk_groups > num_groups");
  add(sigmoid_cfg(8, 5, 4, 2, true, 1.0f), "k > topk_groups * group size");
  add(sigmoid_cfg(8, 2, 4, 2, true, kNaN), "scale NaN");
  add(sigmoid_cfg(8, 2, 4, 2, true, kInf), "scale Inf");
  {
    auto c = softmax_cfg(8, 2, false);
    c.num_groups = 2;
    add(c, "softmax with groups");
    c = topk_softmax_cfg(8, 2);
    c.topk_groups = 2;
    add(c, "topk_softmax with topk_groups");
    c = softmax_cfg(8, 2, true);
    c.routed_scaling_factor = 2.0f;
    add(c, "softmax with a scaling factor");
    c = topk_softmax_cfg(8, 2);
    c.correction_bias = bias_storage;
    add(c, "topk_softmax with a bias");
    c = softmax_cfg(8, 2, true);
    c.method = static_cast<RoutingMethod>(7);
    add(c, "unknown method");
  }
  for (const auto& b : bad) {
    for (int64_t T : {int64_t{0}, int64_t{1}}) {
      const std::string what = std::string(b.what) + " T=" + std::to_string(T);
      expect_code([&] { route(b.c, l.data(), LogitsType::kFloat32, T, ids.data(), w.data(), nullptr); }, kInv,
                  what, "moekit::route");
      expect_code([&] { route_reference(b.c, l.data(), T, nullptr, ids.data(), w.data()); }, kInv, what,
                  "moekit::route_reference");
    }
  }
}

TEST(RoutingValidation, BadArguments) {
  const auto kInv = ErrorCode::kInvalidArgument;
  std::vector<float> l(64, 0.0f), w(64);
  std::vector<int32_t> ids(64);
  const auto c = softmax_cfg(8, 2, true);
  auto rt = [&](const void* lp, LogitsType type, int64_t T, int32_t* ip, float* wp) {
    return [=] { route(c, lp, type, T, ip, wp, nullptr); };
  };
  const char* fn = "moekit::route";
  expect_code(rt(l.data(), LogitsType::kFloat32, -1, ids.data(), w.data()), kInv, "T < 0", fn);
  expect_code(rt(nullptr, LogitsType::kFloat32, 2, ids.data(), w.data()), kInv, "logits null", fn);
  expect_code(rt(l.data(), LogitsType::kFloat32, 2, nullptr, w.data()), kInv, "ids null", fn);
  expect_code(rt(l.data(), LogitsType::kFloat32, 2, ids.data(), nullptr), kInv, "weights null", fn);
  expect_code(rt(l.data(), static_cast<LogitsType>(5), 2, ids.data(), w.data()), kInv, "bad logits type", fn);
  const char* lc = reinterpret_cast<const char*>(l.data());
  expect_code(rt(lc + 2, LogitsType::kFloat32, 2, ids.data(), w.data()), ErrorCode::kMisaligned,
              "fp32 logits + 2 bytes", fn);
  expect_code(rt(lc + 1, LogitsType::kBFloat16, 2, ids.data(), w.data()), ErrorCode::kMisaligned,
              "bf16 logits + 1 byte", fn);
  char* idc = reinterpret_cast<char*>(ids.data());
  expect_code(rt(l.data(), LogitsType::kFloat32, 2, reinterpret_cast<int32_t*>(idc + 2), w.data()),
              ErrorCode::kMisaligned, "ids + 2 bytes", fn);

  const char* rfn = "moekit::route_reference";
  expect_code([&] { route_reference(c, l.data(), -3, nullptr, ids.data(), w.data()); }, kInv, "ref T < 0", rfn);
  expect_code([&] { route_reference(c, nullptr, 1, nullptr, ids.data(), w.data()); }, kInv, "ref logits null", rfn);
  expect_code([&] { route_reference(c, l.data(), 1, nullptr, nullptr, w.data()); }, kInv, "ref ids null", rfn);
  expect_code([&] { route_reference(c, l.data(), 1, nullptr, ids.data(), nullptr); }, kInv, "ref weights null", rfn);
  expect_code([&] { route_reference(c, l.data(), 1, l.data(), ids.data(), w.data()); }, kInv,
              "ref bias with softmax", rfn);
}

TEST(RoutingValidation, ZeroTokensIsANoOp) {
  // No GPU needed: nothing is launched, and null buffers are fine.
  for (const auto& c : {softmax_cfg(8, 2, false), topk_softmax_cfg(128, 4), sigmoid_cfg(256, 8, 8, 4, true, 2.5f)}) {
    EXPECT_NO_THROW(route(c, nullptr, LogitsType::kFloat32, 0, nullptr, nullptr, nullptr));
    EXPECT_NO_THROW(route(c, nullptr, LogitsType::kBFloat16, 0, nullptr, nullptr, nullptr));
    EXPECT_NO_THROW(route_reference(c, nullptr, 0, nullptr, nullptr, nullptr));
  }
}

}  // namespace
}  // namespace moekit

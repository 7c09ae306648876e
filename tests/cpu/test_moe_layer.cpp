// CPU tests of the public MoE layer (include/moekit/moe_layer.h): configuration validation and the
// argument checks forward / prepare_weights make before touching a GPU; and of the shared float64
// reference of the layer (src/moe/moe_reference.h) on properties SPEC §3 fixes (duplicates count
// twice, -1 and invalid ids contribute nothing, EP slices add up to the whole layer, k = 1 by hand).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "moe/moe_reference.h"
#include "moe_test_util.h"
#include "moekit/moekit.h"
#include "runtime/device.h"

namespace {

using moekit::ErrorCode;
using moekit::MoeConfig;
using moekit::MoeLayer;

MoeConfig base_config() {
  MoeConfig c;
  c.num_experts = 16;
  c.top_k = 4;
  c.hidden = 512;
  c.inter = 256;
  return c;
}

moekit::RoutingConfig softmax_routing() {
  moekit::RoutingConfig r;
  r.method = moekit::RoutingMethod::kSoftmaxTopk;
  r.renormalize = true;
  return r;
}

// Expects validate() and the constructor to throw `code` with a message containing `needle`.
void expect_rejected(const MoeConfig& c, const std::string& needle, ErrorCode code = ErrorCode::kInvalidArgument) {
  for (int pass = 0; pass < 2; ++pass) {
    try {
      if (pass == 0) MoeLayer::validate(c);
      else MoeLayer layer(c);
      ADD_FAILURE() << "accepted; expected an error mentioning '" << needle << "'";
    } catch (const moekit::Error& e) {
      EXPECT_EQ(e.code(), code) << e.what();
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("MoeLayer"), std::string::npos) << e.what();
    }
  }
}

TEST(MoeLayerConfig, AcceptsPresetsAndResolvesDefaults) {
  struct P {
    int e, k;
    int64_t h, i;
  };
  for (P p : {P{256, 8, 7168, 2048}, P{384, 8, 7168, 2048}, P{128, 8, 4096, 1536}, P{128, 8, 2048, 768},
              P{8, 2, 4096, 14336}, P{128, 4, 2880, 2880}, P{64, 6, 2048, 1408}}) {
    MoeConfig c;
    c.num_experts = p.e;
    c.top_k = p.k;
    c.hidden = p.h;
    c.inter = p.i;
    c.routing = softmax_routing();
    const MoeLayer layer(c);
    EXPECT_EQ(layer.config().local_offset, 0);
    EXPECT_EQ(layer.config().local_count, p.e);
    ASSERT_TRUE(layer.config().routing.has_value());
    EXPECT_EQ(layer.config().routing->num_experts, p.e);
    EXPECT_EQ(layer.config().routing->top_k, p.k);
    EXPECT_FALSE(layer.weights_prepared());
  }
  MoeConfig c = base_config();
  c.local_offset = 8;
  c.local_count = 8;
  EXPECT_EQ(MoeLayer(c).config().local_count, 8);
  c.top_k = 16;  // k == E is fine
  EXPECT_NO_THROW(MoeLayer::validate(c));
  c.limit = -1.0f;  // ≤ 0: no clamp
  EXPECT_NO_THROW(MoeLayer::validate(c));
}

TEST(MoeLayerConfig, Gemm1PromoteK) {
  MoeConfig c = base_config();
  EXPECT_EQ(c.gemm1_promote_k, 0);  // automatic by default
  for (int k : {0, 32, 64, 128}) {
    c.gemm1_promote_k = k;
    EXPECT_NO_THROW(MoeLayer::validate(c)) << k;
  }
  for (int k : {-1, 16, 48, 96, 256}) {
    c.gemm1_promote_k = k;
    expect_rejected(c, "gemm1_promote_k");
  }
}

TEST(MoeLayerConfig, Gemm1Input) {
  MoeConfig c = base_config();
  EXPECT_EQ(c.gemm1_input, moekit::MoeGemm1Input::kAuto);  // automatic by default
  for (auto v : {moekit::MoeGemm1Input::kAuto, moekit::MoeGemm1Input::kPermuted, moekit::MoeGemm1Input::kGathered}) {
    c.gemm1_input = v;
    EXPECT_NO_THROW(MoeLayer::validate(c)) << static_cast<int>(v);
  }
  for (int v : {-1, 3}) {
    c.gemm1_input = static_cast<moekit::MoeGemm1Input>(v);
    expect_rejected(c, "gemm1_input");
  }
}

TEST(MoeLayerConfig, RejectsBadShapes) {
  MoeConfig c = base_config();
  c.num_experts = 0;
  expect_rejected(c, "num_experts");
  c.num_experts = -3;
  expect_rejected(c, "num_experts");
  c.num_experts = 65537;
  expect_rejected(c, "num_experts");
  c = base_config();
  c.top_k = 0;
  expect_rejected(c, "top_k");
  c.top_k = 17;  // k > E
  expect_rejected(c, "top_k");
  c = base_config();
  for (int64_t h : {int64_t(0), int64_t(8), int64_t(2888), int64_t(-16), int64_t(1) << 21}) {
    c.hidden = h;
    expect_rejected(c, "hidden");
  }
  c = base_config();
  for (int64_t i : {int64_t(0), int64_t(100), int64_t(-32)}) {
    c.inter = i;
    expect_rejected(c, "inter");
  }
  c = base_config();
  c.limit = std::numeric_limits<float>::quiet_NaN();
  expect_rejected(c, "limit");
  c.limit = std::numeric_limits<float>::infinity();
  expect_rejected(c, "limit");
}

TEST(MoeLayerConfig, RejectsBadExpertParallelSlice) {
  MoeConfig c = base_config();
  c.local_offset = 4;  // local_count = 0 means all: offset must be 0
  expect_rejected(c, "local_offset");
  c.local_count = 13;  // [4, 17) leaves [0, 16)
  expect_rejected(c, "slice");
  c.local_offset = -1;
  c.local_count = 4;
  expect_rejected(c, "slice");
  c.local_offset = 0;
  c.local_count = -2;
  expect_rejected(c, "slice");
  c.local_offset = 16;
  c.local_count = 1;
  expect_rejected(c, "slice");
}

TEST(MoeLayerConfig, RejectsRoutingMismatch) {
  MoeConfig c = base_config();
  c.routing = softmax_routing();
  c.routing->num_experts = 32;
  expect_rejected(c, "routing.num_experts");
  c.routing->num_experts = 16;
  c.routing->top_k = 2;
  expect_rejected(c, "routing.top_k");
  c.routing->top_k = 0;
  c.routing->num_groups = 4;  // softmax methods reject group options
  expect_rejected(c, "routing");
  c.routing = moekit::RoutingConfig{};
  c.routing->method = moekit::RoutingMethod::kSigmoidGrouped;
  c.routing->num_groups = 3;  // does not divide 16
  expect_rejected(c, "num_groups");
  c.routing->num_groups = 4;
  c.routing->topk_groups = 1;  // 1 group of 4 experts cannot hold top_k = 4? it can: 4 <= 4
  EXPECT_NO_THROW(MoeLayer::validate(c));
  c.top_k = 5;  // 5 > 1 group x 4 experts
  expect_rejected(c, "top_k");
  c.top_k = 4;
  c.routing->correction_bias = reinterpret_cast<const float*>(uintptr_t(0x1002));
  expect_rejected(c, "correction_bias", ErrorCode::kMisaligned);
  // The routing kernel's own limits apply to a layer that routes (E ≤ 1024, k ≤ 32) ...
  c = base_config();
  c.num_experts = 2048;
  c.routing = softmax_routing();
  expect_rejected(c, "num_experts");
  // ... but not to one that takes caller ids.
  c.routing.reset();
  EXPECT_NO_THROW(MoeLayer::validate(c));
}

TEST(MoeLayerSizes, PreparedBytesAndZeroTokens) {
  const MoeLayer layer(base_config());
  // At least W1 (16 x 512 x 512 bytes) and sW1 (16 x 4 x 4 floats); the prepared layout may pad.
  const size_t full = layer.prepared_weight_bytes();
  EXPECT_GE(full, size_t(16 * 512 * 512) + size_t(16 * 4 * 4 * 4));
  EXPECT_LE(full, 2 * (size_t(16 * 512 * 512) + size_t(16 * 4 * 4 * 4)));
  EXPECT_EQ(layer.workspace_size(0), 0u);
  try {
    (void)layer.workspace_size(-1);
    ADD_FAILURE() << "T = -1 accepted";
  } catch (const moekit::Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("num_tokens"), std::string::npos) << e.what();
  }
  EXPECT_THROW((void)layer.workspace_size(int64_t(1) << 30), moekit::Error);  // T * k ≥ 2^31
  MoeConfig ep = base_config();
  ep.local_offset = 4;
  ep.local_count = 3;
  const size_t part = MoeLayer(ep).prepared_weight_bytes();  // only the 3 local experts
  EXPECT_GE(part, size_t(3 * 512 * 512) + size_t(3 * 4 * 4 * 4));
  EXPECT_LT(part, full / 4);
}

TEST(MoeLayerSizes, WorkspaceMonotonicInTokens) {
  // The sort's scratch size comes from cub's tuning for the current device.
  if (!moekit::detail::gpu_available()) GTEST_SKIP() << "workspace_size(T > 0) queries the CUDA device";
  MoeConfig c = base_config();
  const MoeLayer ids_layer(c);
  c.routing = softmax_routing();
  const MoeLayer routed_layer(c);
  size_t prev_ids = 0, prev_routed = 0;
  for (int64_t t : {1, 2, 7, 64, 65, 1000, 4096, 16384}) {
    const size_t a = ids_layer.workspace_size(t), b = routed_layer.workspace_size(t);
    EXPECT_GE(a, prev_ids) << t;
    EXPECT_GE(b, prev_routed) << t;
    EXPECT_GE(b, a + size_t(t) * 4 * 8) << "room for the routed ids and weights, T = " << t;
    prev_ids = a;
    prev_routed = b;
  }
}

// forward / prepare_weights argument checks that fire before any GPU work.
void expect_error(const std::function<void()>& f, ErrorCode code, const std::string& needle) {
  try {
    f();
    ADD_FAILURE() << "accepted; expected '" << needle << "'";
  } catch (const moekit::Error& e) {
    EXPECT_EQ(e.code(), code) << e.what();
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(MoeLayerArgs, ForwardChecksBeforeTheGpu) {
  const MoeLayer layer(base_config());
  alignas(256) static char dummy[1024];
  moekit::MoeForwardArgs a;
  a.num_tokens = 0;
  EXPECT_NO_THROW(layer.forward(a, nullptr));  // T = 0 without invalid_count: nothing at all
  a.num_tokens = 4;
  a.x = dummy;
  a.y = dummy + 512;
  a.topk_ids = reinterpret_cast<const int32_t*>(dummy);
  a.topk_weights = reinterpret_cast<const float*>(dummy);
  expect_error([&] { layer.forward(a, nullptr); }, ErrorCode::kInvalidArgument, "not prepared");
  a.logits = dummy;
  expect_error([&] { layer.forward(a, nullptr); }, ErrorCode::kInvalidArgument, "not both");
  a.topk_ids = nullptr;
  a.topk_weights = nullptr;
  expect_error([&] { layer.forward(a, nullptr); }, ErrorCode::kInvalidArgument, "no routing configuration");
  a.logits = nullptr;
  a.num_tokens = -1;
  expect_error([&] { layer.forward(a, nullptr); }, ErrorCode::kInvalidArgument, "num_tokens");
  a.num_tokens = 4;
  a.invalid_count = reinterpret_cast<int32_t*>(dummy + 2);
  expect_error([&] { layer.forward(a, nullptr); }, ErrorCode::kMisaligned, "invalid_count");
  a.invalid_count = nullptr;
  a.routed_ids = reinterpret_cast<int32_t*>(dummy);
  a.topk_ids = reinterpret_cast<const int32_t*>(dummy);
  a.topk_weights = reinterpret_cast<const float*>(dummy);
  expect_error([&] { layer.forward(a, nullptr); }, ErrorCode::kInvalidArgument, "routed_ids");
}

TEST(MoeLayerArgs, PrepareWeightsChecksBeforeTheGpu) {
  MoeLayer layer(base_config());
  alignas(256) static char dummy[1024];
  moekit::MoeWeights w{dummy, reinterpret_cast<const float*>(dummy), dummy, reinterpret_cast<const float*>(dummy)};
  const size_t need = layer.prepared_weight_bytes();
  expect_error([&] { layer.prepare_weights(moekit::MoeWeights{}, dummy, need, nullptr); },
               ErrorCode::kInvalidArgument, "required");
  moekit::MoeWeights bad = w;
  bad.w2 = dummy + 8;
  expect_error([&] { layer.prepare_weights(bad, dummy, need, nullptr); }, ErrorCode::kMisaligned, "16-byte");
  expect_error([&] { layer.prepare_weights(w, nullptr, need, nullptr); }, ErrorCode::kInvalidArgument, "null");
  expect_error([&] { layer.prepare_weights(w, dummy + 16, need, nullptr); }, ErrorCode::kMisaligned, "256-byte");
  expect_error([&] { layer.prepare_weights(w, dummy, need - 1, nullptr); }, ErrorCode::kInvalidArgument,
               "too small");
  EXPECT_FALSE(layer.weights_prepared());
}

// ---------------------------------------------------------------------------------------------
// The shared float64 reference
// ---------------------------------------------------------------------------------------------

struct RefFixture {
  moekit::detail::MoeReferenceConfig c;
  std::vector<uint8_t> w1, w2;
  std::vector<float> sw1, sw2;
  std::vector<uint16_t> x;
  RefFixture(int e, int k, int64_t h, int64_t i, int64_t t, uint64_t seed) {
    c.num_experts = e;
    c.top_k = k;
    c.hidden = h;
    c.inter = i;
    c.local_count = e;
    std::mt19937_64 rng(seed);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f), s(0.5e-4f, 1e-4f);
    auto e4m3 = [&] {
      uint8_t b;
      do b = uint8_t(rng()); while ((b & 0x7F) == 0x7F);
      return b;
    };
    w1.resize(size_t(e * 2 * i * h));
    w2.resize(size_t(e * h * i));
    for (auto& b : w1) b = e4m3();
    for (auto& b : w2) b = e4m3();
    sw1.resize(size_t(e * moekit::ceil_div(2 * i, 128) * moekit::ceil_div(h, 128)));
    sw2.resize(size_t(e * moekit::ceil_div(h, 128) * moekit::ceil_div(i, 128)));
    for (auto& v : sw1) v = s(rng);
    for (auto& v : sw2) v = s(rng);
    x.resize(size_t(t * h));
    for (auto& v : x) v = moekit::bf16_from_float(u(rng));
  }
  std::vector<double> run(const std::vector<int32_t>& ids, const std::vector<float>& w, int64_t t) const {
    return moekit::detail::moe_reference(c, x.data(), ids.data(), w.data(), t,
                                         moekit::detail::moe_reference_fetch_all(c, w1.data(), sw1.data(),
                                                                                 w2.data(), sw2.data()));
  }
};

TEST(MoeReference, SlotSemantics) {
  RefFixture f(8, 2, 256, 128, 3, 5);
  // Token 0: expert 3 twice (weights 0.25, 0.5); token 1: -1 and an invalid id; token 2: expert 3 once (0.75).
  // Tokens 0 and 2 have different x, so compare token 0 against a k = 1 run on the same x row.
  const std::vector<int32_t> ids = {3, 3, -1, 9, 3, -1};
  const std::vector<float> w = {0.25f, 0.5f, 1.0f, 1.0f, 0.75f, 1.0f};
  const auto y = f.run(ids, w, 3);
  RefFixture g = f;
  g.c.top_k = 1;
  const auto y1 = g.run({3, 3, 3}, {0.75f, 0.0f, 0.0f}, 3);
  const int64_t h = f.c.hidden;
  double norm = 0.0;
  for (int64_t col = 0; col < h; ++col) {
    EXPECT_NEAR(y[size_t(col)], y1[size_t(col)], 1e-12 * (1.0 + std::abs(y1[size_t(col)]))) << col;
    EXPECT_EQ(y[size_t(h + col)], 0.0) << "token with only -1 / invalid slots";
    norm += y[size_t(col)] * y[size_t(col)];
  }
  EXPECT_GT(norm, 0.0);
}

TEST(MoeReference, ExpertParallelHalvesSumToTheWhole) {
  const int64_t t = 5;
  RefFixture f(8, 3, 256, 128, t, 9);
  std::mt19937_64 rng(3);
  std::vector<int32_t> ids(size_t(t * 3));
  std::vector<float> w(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) {
    ids[i] = int32_t(rng() % 8);
    w[i] = float(rng() % 100) / 100.0f;
  }
  const auto full = f.run(ids, w, t);
  double num = 0.0, den = 0.0;
  std::vector<double> sum(full.size(), 0.0);
  for (int half = 0; half < 2; ++half) {
    moekit::detail::MoeReferenceConfig c = f.c;
    c.local_offset = 4 * half;
    c.local_count = 4;
    const auto fetch = moekit::detail::moe_reference_fetch_all(
        c, f.w1.data() + size_t(c.local_offset) * 2 * 128 * 256,
        f.sw1.data() + size_t(c.local_offset) * 2 * 2, f.w2.data() + size_t(c.local_offset) * 256 * 128,
        f.sw2.data() + size_t(c.local_offset) * 2 * 1);
    const auto y = moekit::detail::moe_reference(c, f.x.data(), ids.data(), w.data(), t, fetch);
    for (size_t i = 0; i < y.size(); ++i) sum[i] += y[i];
  }
  EXPECT_LT(moekit::test::rel_l2(sum, full), 1e-12);
}

TEST(MoeReference, LimitClampsAndBf16RoundingOption) {
  RefFixture f(4, 1, 128, 128, 2, 17);
  // Big scales so g and u exceed the limit.
  for (auto& v : f.sw1) v = 1e-1f;
  const std::vector<int32_t> ids = {1, 2};
  const std::vector<float> w = {1.0f, 1.0f};
  const auto plain = f.run(ids, w, 2);
  f.c.limit = 0.5f;
  const auto clamped = f.run(ids, w, 2);
  f.c.round_gu_bf16 = true;
  const auto rounded = f.run(ids, w, 2);
  double d_clamp = 0.0, d_round = 0.0, n = 0.0;
  for (size_t i = 0; i < plain.size(); ++i) {
    d_clamp += std::abs(plain[i] - clamped[i]);
    d_round += std::abs(rounded[i] - clamped[i]);
    n += std::abs(clamped[i]);
  }
  EXPECT_GT(d_clamp, 0.1 * n) << "the clamp must change the result";
  EXPECT_GT(n, 0.0);
  EXPECT_LT(d_round, 0.2 * n) << "bf16 rounding of g/u is a small perturbation";
}

}  // namespace

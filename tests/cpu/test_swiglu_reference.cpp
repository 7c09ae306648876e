// CPU tests of swiglu_quantize_reference (include/moekit/moe_ops.h, SPEC §3) on hand-picked values:
// silu(0) = 0, silu(large g) = g, the clamp (g: upper only; u: both sides), limit <= 0 = no clamp,
// partial last groups, NaN locality, the gate/up split; plus the host-side argument checks of the
// GPU entry point swiglu_quantize (which throw before any CUDA call).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "moekit/error.h"
#include "moekit/moe_ops.h"
#include "moekit/numerics.h"

namespace moekit {
namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

struct Gu {
  int64_t rows, inter;
  std::vector<float> v;  // [rows, 2I]: gate in [0, I), up in [I, 2I)
  Gu(int64_t r, int64_t i) : rows(r), inter(i), v(static_cast<size_t>(r * 2 * i), 0.0f) {}
  float& g(int64_t r, int64_t c) { return v[static_cast<size_t>(r * 2 * inter + c)]; }
  float& u(int64_t r, int64_t c) { return v[static_cast<size_t>(r * 2 * inter + inter + c)]; }
};

struct Out {
  int64_t inter, groups;
  std::vector<uint8_t> q;
  std::vector<float> s;
  uint8_t code(int64_t r, int64_t c) const { return q[static_cast<size_t>(r * inter + c)]; }
  float scale(int64_t r, int64_t kb) const { return s[static_cast<size_t>(r * groups + kb)]; }
  float value(int64_t r, int64_t c) const { return e4m3_to_float(code(r, c)); }
};

Out run(const Gu& gu, float limit, bool ue8m0 = false) {
  Out o;
  o.inter = gu.inter;
  o.groups = ceil_div(gu.inter, kQuantBlock);
  o.q.assign(static_cast<size_t>(gu.rows * gu.inter), 0xA5);
  o.s.assign(static_cast<size_t>(gu.rows * o.groups), -1.0f);
  swiglu_quantize_reference(gu.v.data(), gu.rows, gu.inter, limit, o.q.data(), o.s.data(), ue8m0);
  return o;
}

double silu(double g) { return g / (1.0 + std::exp(-g)); }

bool is_zero_code(uint8_t c) { return (c & 0x7F) == 0; }

TEST(SwigluReference, SiluOfZeroIsZero) {
  for (float limit : {0.0f, 7.0f}) {
    Gu gu(2, 128);
    for (int64_t c = 0; c < 128; ++c) {
      gu.u(0, c) = static_cast<float>(c % 7) - 3.0f;  // any u: silu(0) * u = 0
      gu.u(1, c) = 5.0f;
    }
    const Out o = run(gu, limit);
    for (int64_t r = 0; r < 2; ++r) {
      EXPECT_EQ(o.scale(r, 0), quant_scale(0.0f, false)) << "all-zero h gets the floor scale";
      for (int64_t c = 0; c < 128; ++c) EXPECT_TRUE(is_zero_code(o.code(r, c))) << r << "," << c;
    }
  }
}

TEST(SwigluReference, SiluOfLargeGateIsGate) {
  Gu gu(3, 128);
  // exp(-30) ~ 9e-14 vanishes next to 1 in float: silu(30) == 30 exactly, h = 30 * u.
  gu.g(0, 0) = 30.0f, gu.u(0, 0) = 1.0f;
  gu.g(0, 1) = 30.0f, gu.u(0, 1) = 0.5f;
  gu.g(0, 2) = 30.0f, gu.u(0, 2) = -1.0f;
  // silu(8) = 8 / (1 + e^-8): close to, but below, 8.
  gu.g(1, 0) = 8.0f, gu.u(1, 0) = 1.0f;
  // Large negative g: silu(-30) ~ -2.8e-12, far below the scale floor → ±0 codes.
  gu.g(2, 0) = -30.0f, gu.u(2, 0) = 1.0f;
  const Out o = run(gu, 0.0f);

  EXPECT_EQ(o.scale(0, 0), quant_scale(30.0f, false));
  EXPECT_EQ(o.value(0, 0), 448.0f);
  EXPECT_EQ(o.value(0, 1), 224.0f);
  EXPECT_EQ(o.value(0, 2), -448.0f);
  for (int64_t c = 3; c < 128; ++c) EXPECT_TRUE(is_zero_code(o.code(0, c)));

  EXPECT_NEAR(o.scale(1, 0) * 448.0, silu(8.0), 1e-5);
  EXPECT_LT(o.scale(1, 0) * 448.0f, 8.0f);
  EXPECT_EQ(o.value(1, 0), 448.0f);

  EXPECT_EQ(o.scale(2, 0), quant_scale(0.0f, false));
  EXPECT_EQ(o.code(2, 0), 0x80) << "-2.8e-12 / s rounds to -0";
}

TEST(SwigluReference, ClampOnGateIsUpperOnly) {
  Gu gu(1, 256);
  gu.g(0, 0) = 10.0f, gu.u(0, 0) = 1.0f;      // group 0: g → 7: h = silu(7)
  gu.g(0, 130) = -10.0f, gu.u(0, 130) = 1.0f;  // group 1: g stays -10: h = silu(-10)
  const Out o = run(gu, 7.0f);
  EXPECT_NEAR(o.scale(0, 0) * 448.0 / silu(7.0), 1.0, 1e-6);
  EXPECT_EQ(o.value(0, 0), 448.0f);
  // Clamped to -7 it would be silu(-7) ~ -6.4e-3; unclamped silu(-10) ~ -4.5e-4.
  EXPECT_NEAR(o.scale(0, 1) * 448.0 / -silu(-10.0), 1.0, 1e-5);
  EXPECT_EQ(o.value(0, 130), -448.0f);
}

TEST(SwigluReference, ClampOnUpIsBothSides) {
  Gu gu(1, 128);
  gu.g(0, 0) = 30.0f, gu.u(0, 0) = 10.0f;   // g → 7, u → 7
  gu.g(0, 1) = 30.0f, gu.u(0, 1) = -10.0f;  // g → 7, u → -7
  gu.g(0, 2) = 30.0f, gu.u(0, 2) = 3.0f;    // g → 7, u unchanged
  gu.g(0, 3) = 30.0f, gu.u(0, 3) = 7.0f;    // u exactly at the limit
  const Out o = run(gu, 7.0f);
  EXPECT_NEAR(o.scale(0, 0) * 448.0 / (silu(7.0) * 7.0), 1.0, 1e-6);
  EXPECT_EQ(o.value(0, 0), 448.0f);
  EXPECT_EQ(o.value(0, 1), -448.0f);
  EXPECT_EQ(o.value(0, 2), 192.0f);  // 448 * 3 / 7
  EXPECT_EQ(o.value(0, 3), 448.0f);
}

TEST(SwigluReference, NonPositiveLimitMeansNoClamp) {
  Gu gu(1, 128);
  gu.g(0, 0) = 10.0f, gu.u(0, 0) = 10.0f;
  gu.g(0, 1) = -10.0f, gu.u(0, 1) = -10.0f;
  const double unclamped = silu(10.0) * 10.0;  // 99.9546
  for (float limit : {0.0f, -0.0f, -1.0f, -7.0f}) {
    const Out o = run(gu, limit);
    EXPECT_NEAR(o.scale(0, 0) * 448.0 / unclamped, 1.0, 1e-6) << "limit " << limit;
    EXPECT_EQ(o.value(0, 0), 448.0f);
  }
  const Out c = run(gu, 7.0f);
  EXPECT_NEAR(c.scale(0, 0) * 448.0 / (silu(7.0) * 7.0), 1.0, 1e-6);
  // Infinite limit: a clamp that changes nothing.
  const Out inf = run(gu, std::numeric_limits<float>::infinity());
  EXPECT_EQ(inf.q, run(gu, 0.0f).q);
}

TEST(SwigluReference, PartialLastGroupHasItsOwnScale) {
  Gu gu(2, 144);  // groups: [0, 128) and [128, 144)
  gu.g(0, 5) = 30.0f, gu.u(0, 5) = 2.0f;       // h = 60 in group 0
  gu.g(0, 130) = 30.0f, gu.u(0, 130) = 0.25f;  // h = 7.5 in group 1
  const Out o = run(gu, 0.0f);
  ASSERT_EQ(o.groups, 2);
  EXPECT_EQ(o.scale(0, 0), quant_scale(60.0f, false));
  EXPECT_EQ(o.scale(0, 1), quant_scale(7.5f, false));
  EXPECT_EQ(o.value(0, 5), 448.0f);
  EXPECT_EQ(o.value(0, 130), 448.0f);
  EXPECT_EQ(o.scale(1, 0), quant_scale(0.0f, false));
  EXPECT_EQ(o.scale(1, 1), quant_scale(0.0f, false));

  // ue8m0: the scales are powers of two rounded up.
  const Out p = run(gu, 0.0f, true);
  EXPECT_EQ(p.scale(0, 0), quant_scale(60.0f, true));
  EXPECT_EQ(p.scale(0, 1), quant_scale(7.5f, true));
  EXPECT_EQ(p.scale(0, 1), 0.03125f);  // 7.5 / 448 = 0.0167 → 2^-5
  EXPECT_EQ(p.value(0, 130), 240.0f);  // 7.5 * 32
}

// The gpt-oss shape I = 2880 (22.5 groups): the reference equals quantize_1x128 of h computed with
// the documented float formula, so the gate/up split and the logical scale layout are as specified.
TEST(SwigluReference, MatchesDocumentedFormulaOnGptOssShape) {
  const int64_t rows = 3, inter = 2880;
  Gu gu(rows, inter);
  uint32_t state = 12345u;
  auto rnd = [&] {
    state = state * 1664525u + 1013904223u;
    return static_cast<float>(state >> 8) / 16777216.0f * 16.0f - 8.0f;  // [-8, 8)
  };
  for (auto& x : gu.v) x = bf16_to_float(bf16_from_float(rnd()));
  for (float limit : {0.0f, 7.0f}) {
    for (bool ue8m0 : {false, true}) {
      std::vector<float> h(static_cast<size_t>(rows * inter));
      for (int64_t r = 0; r < rows; ++r) {
        for (int64_t c = 0; c < inter; ++c) {
          float g = gu.g(r, c), u = gu.u(r, c);
          if (limit > 0) {
            g = std::min(g, limit);
            u = std::max(-limit, std::min(u, limit));
          }
          const float den = 1.0f + std::exp(-g);
          const float silu_g = g / den;
          h[static_cast<size_t>(r * inter + c)] = silu_g * u;
        }
      }
      const int64_t groups = ceil_div(inter, kQuantBlock);
      ASSERT_EQ(groups, 23);
      std::vector<uint8_t> q(static_cast<size_t>(rows * inter));
      std::vector<float> s(static_cast<size_t>(rows * groups));
      quantize_1x128(h.data(), rows, inter, inter, q.data(), inter, s.data(), ue8m0);
      const Out o = run(gu, limit, ue8m0);
      EXPECT_EQ(o.q, q) << "limit " << limit << " ue8m0 " << ue8m0;
      EXPECT_EQ(o.s, s) << "limit " << limit << " ue8m0 " << ue8m0;
    }
  }
}

TEST(SwigluReference, NaNStaysInItsElement) {
  for (float limit : {0.0f, 7.0f}) {
    Gu gu(2, 256);
    for (int64_t r = 0; r < 2; ++r) {
      gu.g(r, 0) = 30.0f, gu.u(r, 0) = 1.0f;
      gu.g(r, 200) = 30.0f, gu.u(r, 200) = 1.0f;
    }
    gu.g(0, 3) = kNaN, gu.u(0, 3) = 1.0f;    // NaN gate
    gu.g(0, 201) = 1.0f, gu.u(0, 201) = kNaN;  // NaN up
    const Out o = run(gu, limit);
    const float h0 = limit > 0 ? static_cast<float>(silu(7.0)) : 30.0f;
    for (int64_t r = 0; r < 2; ++r) {
      for (int64_t kb = 0; kb < 2; ++kb) {
        EXPECT_NEAR(o.scale(r, kb) * 448.0f / h0, 1.0f, 1e-6f) << "NaN is ignored by the amax";
      }
      for (int64_t c = 0; c < 256; ++c) {
        const bool nan_here = r == 0 && (c == 3 || c == 201);
        if (nan_here) {
          EXPECT_EQ(o.code(r, c), 0x7F) << r << "," << c;
        } else {
          EXPECT_NE(o.code(r, c) & 0x7F, 0x7F) << r << "," << c;
        }
      }
      EXPECT_EQ(o.value(r, 0), 448.0f);
      EXPECT_EQ(o.value(r, 200), 448.0f);
    }
  }
}

// The moekit::Error code f throws, or 0 if it returns normally.
template <typename F>
int code_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return static_cast<int>(e.code());
  }
  return 0;
}

TEST(SwigluReference, ArgumentChecks) {
  std::vector<float> gu(256, 0.0f);
  std::vector<uint8_t> q(128);
  std::vector<float> s(1);
  const int inv = static_cast<int>(ErrorCode::kInvalidArgument);
  EXPECT_EQ(code_of([&] { swiglu_quantize_reference(gu.data(), -1, 128, 0.0f, q.data(), s.data(), false); }), inv);
  EXPECT_EQ(code_of([&] { swiglu_quantize_reference(gu.data(), 1, -128, 0.0f, q.data(), s.data(), false); }), inv);
  EXPECT_EQ(code_of([&] { swiglu_quantize_reference(nullptr, 1, 128, 0.0f, q.data(), s.data(), false); }), inv);
  EXPECT_EQ(code_of([&] { swiglu_quantize_reference(gu.data(), 1, 128, kNaN, q.data(), s.data(), false); }), inv);
  EXPECT_EQ(code_of([&] { swiglu_quantize_reference(nullptr, 0, 128, 0.0f, nullptr, nullptr, false); }), 0);
}

// The GPU entry point validates everything on the host before touching the device, so its argument
// errors can be checked without a GPU. The pointers below are never dereferenced.
TEST(SwigluQuantizeValidation, RejectsBadArguments) {
  void* const p = reinterpret_cast<void*>(uintptr_t{0x10000});
  float* const sa = reinterpret_cast<float*>(uintptr_t{0x20000});
  char* const b = static_cast<char*>(p);
  const int inv = static_cast<int>(ErrorCode::kInvalidArgument);
  const int mis = static_cast<int>(ErrorCode::kMisaligned);
  const int64_t I = 2880;
  // shapes and strides
  EXPECT_EQ(code_of([&] { swiglu_quantize(p, 2 * I, -1, I, 0.f, p, I, sa, false, nullptr); }), inv);
  EXPECT_EQ(code_of([&] { swiglu_quantize(p, 2 * I, 4, 0, 0.f, p, I, sa, false, nullptr); }), inv);
  EXPECT_EQ(code_of([&] { swiglu_quantize(p, 2 * I, 4, 2888, 0.f, p, 2896, sa, false, nullptr); }), inv);
  EXPECT_EQ(code_of([&] { swiglu_quantize(p, 2 * I, 4, I, kNaN, p, I, sa, false, nullptr); }), inv);
  EXPECT_EQ(code_of([&] { swiglu_quantize(p, 2 * I - 8, 4, I, 0.f, p, I, sa, false, nullptr); }), inv);
  EXPECT_EQ(code_of([&] { swiglu_quantize(p, 2 * I, 4, I, 0.f, p, I - 16, sa, false, nullptr); }), inv);
  EXPECT_EQ(code_of([&] { swiglu_quantize(p, 2 * I + 4, 4, I, 0.f, p, I, sa, false, nullptr); }), mis);
  EXPECT_EQ(code_of([&] { swiglu_quantize(p, 2 * I, 4, I, 0.f, p, I + 8, sa, false, nullptr); }), mis);
  // pointers
  EXPECT_EQ(code_of([&] { swiglu_quantize(nullptr, 2 * I, 4, I, 0.f, p, I, sa, false, nullptr); }), inv);
  EXPECT_EQ(code_of([&] { swiglu_quantize(p, 2 * I, 4, I, 0.f, nullptr, I, sa, false, nullptr); }), inv);
  EXPECT_EQ(code_of([&] { swiglu_quantize(p, 2 * I, 4, I, 0.f, p, I, nullptr, false, nullptr); }), inv);
  EXPECT_EQ(code_of([&] { swiglu_quantize(b + 8, 2 * I, 4, I, 0.f, p, I, sa, false, nullptr); }), mis);
  EXPECT_EQ(code_of([&] { swiglu_quantize(p, 2 * I, 4, I, 0.f, b + 1, I, sa, false, nullptr); }), mis);
  EXPECT_EQ(code_of([&] { swiglu_quantize(p, 2 * I, 4, I, 0.f, p, I, sa + 1, false, nullptr); }), mis);
  // rows == 0: a no-op that needs no pointers (and makes no CUDA call)
  EXPECT_EQ(code_of([&] { swiglu_quantize(nullptr, 2 * I, 0, I, 7.f, nullptr, I, nullptr, true, nullptr); }), 0);
}

}  // namespace
}  // namespace moekit

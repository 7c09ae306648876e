// GPU tests of moe_combine: bit-exact against a host emulation of the documented FP32 slot-order
// sum, deterministic, dropped slots and all-dropped tokens, NaN locality, strides, validation.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "moekit/moekit.h"
#include "runtime/device_buffer.h"
#include "runtime/random.h"

using moekit::detail::DeviceBuffer;

namespace {

struct Case {
  int64_t t;
  int k;
  int64_t h;
  int64_t rows;
  int64_t ldy;  // 0: packed
};

// The documented arithmetic on the host: acc = fmaf(w, d, acc) in slot order, one bf16 rounding.
std::vector<uint16_t> emulate(const std::vector<uint16_t>& d, int64_t ldd, const std::vector<int32_t>& e2p,
                              const std::vector<float>& w, const Case& c, int64_t ldy) {
  std::vector<uint16_t> y(size_t(c.t * ldy), 0xFFFF);
  for (int64_t t = 0; t < c.t; ++t)
    for (int64_t col = 0; col < c.h; ++col) {
      float acc = 0.0f;
      for (int j = 0; j < c.k; ++j) {
        const int32_t row = e2p[size_t(t * c.k + j)];
        if (row < 0) continue;
        acc = std::fmaf(w[size_t(t * c.k + j)], moekit::bf16_to_float(d[size_t(row * ldd + col)]), acc);
      }
      y[size_t(t * ldy + col)] = moekit::bf16_from_float(acc);
    }
  return y;
}

void run_case(const Case& c, uint64_t seed) {
  SCOPED_TRACE(::testing::Message() << "T=" << c.t << " k=" << c.k << " H=" << c.h << " rows=" << c.rows
                                    << " ldy=" << c.ldy);
  const int64_t ldd = c.h, ldy = c.ldy ? c.ldy : c.h;
  std::mt19937_64 rng(seed);
  std::vector<int32_t> e2p(size_t(c.t * c.k));
  std::vector<float> w(e2p.size());
  for (size_t i = 0; i < e2p.size(); ++i) {
    e2p[i] = (rng() % 10 == 0) ? -1 : int32_t(rng() % uint64_t(c.rows));
    w[i] = float(rng() % 1000000) / 1e6f;
  }
  if (c.t > 2)
    for (int j = 0; j < c.k; ++j) e2p[size_t(1 * c.k + j)] = -1;  // token 1: every slot dropped
  DeviceBuffer d(size_t(c.rows * ldd * 2)), de2p(e2p.size() * 4), dw(w.size() * 4), y(size_t(c.t * ldy * 2));
  moekit::detail::fill_random_bf16(d.get(), c.rows * ldd, 4.0f, seed, nullptr);
  de2p.upload(e2p);
  dw.upload(w);
  y.fill_bytes(0xFF);
  moekit::moe_combine(d.get(), ldd, de2p.as<int32_t>(), dw.as<float>(), c.t, c.k, c.h, y.get(), ldy, nullptr);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const auto got = y.download<uint16_t>(size_t(c.t * ldy));
  const auto hd = d.download<uint16_t>(size_t(c.rows * ldd));
  const auto want = emulate(hd, ldd, e2p, w, c, ldy);
  int64_t bad = 0;
  for (size_t i = 0; i < got.size(); ++i) bad += got[i] != want[i];
  EXPECT_EQ(bad, 0) << "elements differing from the FP32 slot-order emulation (padding included)";
  if (c.t > 2)
    for (int64_t col = 0; col < c.h; ++col) EXPECT_EQ(got[size_t(1 * ldy + col)], 0u) << "all-dropped token";

  // Deterministic: a second run is bit-identical.
  y.fill_bytes(0x00);
  moekit::moe_combine(d.get(), ldd, de2p.as<int32_t>(), dw.as<float>(), c.t, c.k, c.h, y.get(), ldy, nullptr);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const auto again = y.download<uint16_t>(size_t(c.t * ldy));
  for (int64_t t = 0; t < c.t; ++t)
    for (int64_t col = 0; col < c.h; ++col)
      ASSERT_EQ(again[size_t(t * ldy + col)], got[size_t(t * ldy + col)]) << "run-to-run difference";
}

}  // namespace

TEST(MoeCombine, MatchesFp32SlotOrderEmulation) {
  uint64_t seed = 1;
  for (const Case& c : {Case{1, 8, 7168, 16, 0}, Case{7, 1, 2048, 7, 0}, Case{1000, 8, 2048, 8000, 0},
                        Case{300, 6, 2880, 1800, 2888}, Case{64, 4, 7168, 256, 7176}})
    run_case(c, ++seed);
}

TEST(MoeCombine, NaNStaysInItsTokens) {
  const int64_t t = 4, k = 2, h = 256, rows = 8;
  std::vector<int32_t> e2p = {0, 1, 2, 3, 4, 5, 6, 7};  // token i uses rows 2i, 2i+1
  std::vector<float> w(8, 0.5f);
  std::vector<uint16_t> d(size_t(rows * h), moekit::bf16_from_float(1.0f));
  d[size_t(3 * h + 10)] = 0x7FC0;  // NaN in row 3 (token 1), column 10
  DeviceBuffer dd(d.size() * 2), de2p(32), dw(32), y(size_t(t * h * 2));
  dd.upload(d);
  de2p.upload(e2p);
  dw.upload(w);
  moekit::moe_combine(dd.get(), h, de2p.as<int32_t>(), dw.as<float>(), t, int(k), h, y.get(), h, nullptr);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const auto out = y.download<uint16_t>(size_t(t * h));
  for (int64_t i = 0; i < t; ++i)
    for (int64_t col = 0; col < h; ++col) {
      const float v = moekit::bf16_to_float(out[size_t(i * h + col)]);
      if (i == 1 && col == 10) EXPECT_TRUE(std::isnan(v));
      else EXPECT_EQ(v, 1.0f) << i << "," << col;
    }
}

TEST(MoeCombine, ValidatesArguments) {
  DeviceBuffer d(4096), e(64), w(64), y(4096);
  auto call = [&](int64_t t, int k, int64_t h, int64_t ldd, int64_t ldy, const void* dp) {
    moekit::moe_combine(dp, ldd, e.as<int32_t>(), w.as<float>(), t, k, h, y.get(), ldy, nullptr);
  };
  EXPECT_NO_THROW(call(0, 8, 64, 64, 64, nullptr));  // T == 0: no-op
  EXPECT_THROW(call(2, 0, 64, 64, 64, d.get()), moekit::Error);
  EXPECT_THROW(call(2, 2, 60, 64, 64, d.get()), moekit::Error);
  EXPECT_THROW(call(2, 2, 64, 60, 64, d.get()), moekit::Error);
  EXPECT_THROW(call(2, 2, 64, 64, 64, d.as<char>() + 2), moekit::Error);
  EXPECT_THROW(call(-1, 2, 64, 64, 64, d.get()), moekit::Error);
}

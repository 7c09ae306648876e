// The benchmarks' random fills (runtime/random.h): the normal variants behind `--data normal`
// have the spread and shape they claim, stay finite and in range, and are deterministic per seed.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include "gpu_test_util.h"
#include "moekit/numerics.h"
#include "runtime/device_buffer.h"
#include "runtime/random.h"

namespace {

using moekit::detail::DeviceBuffer;

struct Moments {
  double mean = 0, sd = 0;
};

Moments moments(const std::vector<double>& v) {
  Moments m;
  for (double x : v) m.mean += x;
  m.mean /= double(v.size());
  for (double x : v) m.sd += (x - m.mean) * (x - m.mean);
  m.sd = std::sqrt(m.sd / double(v.size()));
  return m;
}

/// Share of values with |x| <= t.
double share_at_most(const std::vector<double>& v, double t) {
  int64_t n = 0;
  for (double x : v) n += std::fabs(x) <= t ? 1 : 0;
  return double(n) / double(v.size());
}

template <class T>
std::vector<T> download(const DeviceBuffer& b, int64_t n, cudaStream_t s) {
  std::vector<T> h(static_cast<size_t>(n));
  EXPECT_EQ(cudaMemcpyAsync(h.data(), b.get(), h.size() * sizeof(T), cudaMemcpyDeviceToHost, s), cudaSuccess);
  EXPECT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  return h;
}

TEST(RandomFill, NormalE4M3CodesHaveTheRequestedSpread) {
  moekit::test::Stream s;
  constexpr int64_t n = int64_t(1) << 20;
  for (float sigma : {108.0f, 159.0f}) {
    DeviceBuffer d(n);
    EXPECT_EQ(cudaMemsetAsync(d.get(), 0x7F, n, s), cudaSuccess);  // poison: NaN codes
    moekit::detail::fill_random_e4m3_normal(d.get(), n, sigma, 5, s);
    const std::vector<uint8_t> codes = download<uint8_t>(d, n, s);
    std::vector<double> v(codes.size());
    double max_abs = 0;
    int64_t nans = 0;
    for (size_t i = 0; i < codes.size(); ++i) {
      nans += (codes[i] & 0x7F) == 0x7F ? 1 : 0;
      v[i] = moekit::e4m3_to_float(codes[i]);
      max_abs = std::max(max_abs, std::fabs(v[i]));
    }
    ASSERT_EQ(nans, 0) << "sigma " << sigma;
    EXPECT_LE(max_abs, 448.0);
    EXPECT_EQ(max_abs, 448.0) << "the far tail saturates at the largest finite code (sigma " << sigma << ")";
    const Moments m = moments(v);
    // E4M3 rounding (3 mantissa bits) widens the spread by well under 1%; saturation at 448
    // (2.8-4.1 sigma) narrows it by less.
    EXPECT_NEAR(m.mean, 0.0, 0.01 * sigma) << "sigma " << sigma;
    EXPECT_NEAR(m.sd, sigma, 0.015 * sigma) << "sigma " << sigma;
    // The shape: the share of codes at most t (the largest code <= z sigma) is the normal
    // probability of |x| below the midpoint between t and the next code (round to nearest).
    for (double z : {0.5, 1.0, 2.0}) {
      double t = 0, next = 448;
      for (int c = 0; c < 0x7F; ++c) {
        const double val = moekit::e4m3_to_float(uint8_t(c));
        if (val <= z * sigma) t = std::max(t, val);
        else next = std::min(next, val);
      }
      const double expected = std::erf(0.5 * (t + next) / (sigma * std::sqrt(2.0)));
      EXPECT_NEAR(share_at_most(v, t), expected, 0.004) << "sigma " << sigma << ", |x| <= " << t;
    }
  }
}

TEST(RandomFill, NormalBf16AndDeterminism) {
  moekit::test::Stream s;
  constexpr int64_t n = int64_t(1) << 20;
  DeviceBuffer a(n * 2), b(n * 2), c(n * 2);
  moekit::detail::fill_random_bf16_normal(a.get(), n, 1.0f, 9, s);
  moekit::detail::fill_random_bf16_normal(b.get(), n, 1.0f, 9, s);
  moekit::detail::fill_random_bf16_normal(c.get(), n, 1.0f, 10, s);
  const std::vector<uint16_t> ha = download<uint16_t>(a, n, s), hb = download<uint16_t>(b, n, s),
                              hc = download<uint16_t>(c, n, s);
  EXPECT_EQ(std::memcmp(ha.data(), hb.data(), ha.size() * 2), 0) << "same seed, same values";
  int64_t same = 0;
  for (int64_t i = 0; i < n; ++i) same += ha[size_t(i)] == hc[size_t(i)] ? 1 : 0;
  EXPECT_LT(same, n / 50) << "another seed gives other values";
  std::vector<double> v(ha.size());
  for (size_t i = 0; i < ha.size(); ++i) {
    v[i] = moekit::bf16_to_float(ha[i]);
    ASSERT_TRUE(std::isfinite(v[i])) << "element " << i;
  }
  const Moments m = moments(v);
  EXPECT_NEAR(m.mean, 0.0, 0.01);
  EXPECT_NEAR(m.sd, 1.0, 0.01);
  EXPECT_NEAR(share_at_most(v, 1.0), 0.6827, 0.005);
  EXPECT_NEAR(share_at_most(v, 2.0), 0.9545, 0.003);
}

}  // namespace

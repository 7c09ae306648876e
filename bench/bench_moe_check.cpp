// `moekit bench moe`'s reference check (bench_moe_check.h).
#include "bench/bench_moe_check.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>

#include "common/check.h"
#include "moe/moe_reference.h"
#include "moekit/numerics.h"

namespace moekit::bench {

using detail::DeviceBuffer;

std::vector<int64_t> check_rows(int64_t t, uint64_t seed) {
  std::vector<int64_t> v;
  if (t <= 64) {
    v.resize(size_t(t));
    std::iota(v.begin(), v.end(), int64_t(0));
    return v;
  }
  std::mt19937_64 rng(seed);
  v = {0, t - 1};
  while (int(v.size()) < kMoeSampleRows) {
    const int64_t r = int64_t(rng() % uint64_t(t));
    if (std::find(v.begin(), v.end(), r) == v.end()) v.push_back(r);
  }
  std::sort(v.begin(), v.end());
  return v;
}

MoeCheck moe_check_rows(const float* got, const double* ref, int64_t n, int64_t h) {
  MoeCheck c;
  if (n <= 0) return c;
  c.rel_l2 = relative_l2_error(got, ref, size_t(n * h));
  std::vector<double> rows(static_cast<size_t>(n));
  for (int64_t r = 0; r < n; ++r) rows[size_t(r)] = relative_l2_error(got + r * h, ref + r * h, size_t(h));
  // NaN sorts last (above +inf): a strict weak order, so the median and the maximum see NaN rows
  // as the worst ones.
  std::sort(rows.begin(), rows.end(), [](double a, double b) { return !std::isnan(a) && (std::isnan(b) || a < b); });
  const size_t m = rows.size() / 2;
  c.row_med = rows.size() % 2 ? rows[m] : 0.5 * (rows[m - 1] + rows[m]);  // NaN if either middle row is
  c.row_max = rows.back();
  return c;
}

MoeCheck moe_reference_check(const Preset& p, const DeviceBuffer& x, const DeviceBuffer& y, const DeviceBuffer& ids,
                             const DeviceBuffer& wts, const std::vector<int64_t>& rows, const DeviceBuffer& w1,
                             const DeviceBuffer& sw1, const DeviceBuffer& w2, const DeviceBuffer& sw2,
                             const DeviceBuffer* b1, const DeviceBuffer* b2) {
  const int64_t h = p.h, I = p.inter, k = p.k, n = int64_t(rows.size());
  std::vector<uint16_t> hx(size_t(n * h)), hy(size_t(n * h));
  std::vector<int32_t> hid(size_t(n * k));
  std::vector<float> hw(size_t(n * k));
  for (int64_t i = 0; i < n; ++i) {
    const int64_t r = rows[size_t(i)];
    MOEKIT_CUDA_CHECK(cudaMemcpy(hx.data() + i * h, x.as<uint16_t>() + r * h, size_t(h) * 2, cudaMemcpyDeviceToHost));
    MOEKIT_CUDA_CHECK(cudaMemcpy(hy.data() + i * h, y.as<uint16_t>() + r * h, size_t(h) * 2, cudaMemcpyDeviceToHost));
    MOEKIT_CUDA_CHECK(cudaMemcpy(hid.data() + i * k, ids.as<int32_t>() + r * k, size_t(k) * 4, cudaMemcpyDeviceToHost));
    MOEKIT_CUDA_CHECK(cudaMemcpy(hw.data() + i * k, wts.as<float>() + r * k, size_t(k) * 4, cudaMemcpyDeviceToHost));
  }
  detail::MoeReferenceConfig rc;
  rc.num_experts = p.e;
  rc.top_k = p.k;
  rc.hidden = h;
  rc.inter = I;
  rc.limit = p.limit;
  rc.local_offset = 0;
  rc.local_count = p.e;
  rc.round_gu_bf16 = false;  // SPEC §3: GEMM1's output is not rounded
  rc.gpt_oss_activation = p.gpt_oss;
  std::vector<float> hb1, hb2;  // gpt-oss's biases, all experts (small)
  if (b1) hb1 = b1->download<float>(size_t(p.e * 2 * I));
  if (b2) hb2 = b2->download<float>(size_t(p.e * h));
  const size_t s1 = size_t(2 * I * h), s2 = size_t(h * I);
  const size_t ss1 = size_t(ceil_div(2 * I, 128) * ceil_div(h, 128)), ss2 = size_t(ceil_div(h, 128) * ceil_div(I, 128));
  std::vector<uint8_t> e1(s1), e2(s2);
  std::vector<float> es1(ss1), es2(ss2);
  auto fetch = [&](int e) {
    MOEKIT_CUDA_CHECK(cudaMemcpy(e1.data(), w1.as<uint8_t>() + e * s1, s1, cudaMemcpyDeviceToHost));
    MOEKIT_CUDA_CHECK(cudaMemcpy(e2.data(), w2.as<uint8_t>() + e * s2, s2, cudaMemcpyDeviceToHost));
    MOEKIT_CUDA_CHECK(cudaMemcpy(es1.data(), sw1.as<float>() + e * ss1, ss1 * 4, cudaMemcpyDeviceToHost));
    MOEKIT_CUDA_CHECK(cudaMemcpy(es2.data(), sw2.as<float>() + e * ss2, ss2 * 4, cudaMemcpyDeviceToHost));
    return detail::MoeReferenceExpert{e1.data(), es1.data(), e2.data(), es2.data(),
                                      hb1.empty() ? nullptr : hb1.data() + e * 2 * I,
                                      hb2.empty() ? nullptr : hb2.data() + e * h};
  };
  const auto ref = detail::moe_reference(rc, hx.data(), hid.data(), hw.data(), n, fetch);
  std::vector<float> got(hy.size());
  for (size_t i = 0; i < got.size(); ++i) got[i] = bf16_to_float(hy[i]);
  return moe_check_rows(got.data(), ref.data(), n, h);
}

double rel_l2_bf16(const std::vector<uint16_t>& a, const std::vector<uint16_t>& ref) {
  double num = 0.0, den = 0.0;
  for (size_t i = 0; i < a.size(); ++i) {
    const double x = bf16_to_float(a[i]), r = bf16_to_float(ref[i]);
    num += (x - r) * (x - r);
    den += r * r;
  }
  return den > 0 ? std::sqrt(num / den) : std::sqrt(num);
}

}  // namespace moekit::bench

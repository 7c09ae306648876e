#include "moe/moe_reference.h"

#include <algorithm>
#include <cmath>

#include "moekit/numerics.h"

namespace moekit::detail {

std::vector<double> moe_reference(const MoeReferenceConfig& c, const uint16_t* x, const int32_t* ids,
                                  const float* w, int64_t t, const MoeExpertFetch& fetch) {
  const int64_t h = c.hidden, I = c.inter, k = c.top_k;
  const int64_t kbh = ceil_div(h, kQuantBlock), kbi = ceil_div(I, kQuantBlock);
  std::vector<double> y(static_cast<size_t>(t * h), 0.0);
  if (t == 0) return y;
  // Quantize every token once.
  std::vector<float> xf(static_cast<size_t>(t * h));
  for (size_t i = 0; i < xf.size(); ++i) xf[i] = bf16_to_float(x[i]);
  std::vector<uint8_t> qx(static_cast<size_t>(t * h));
  std::vector<float> sx(static_cast<size_t>(t * kbh));
  quantize_1x128(xf.data(), t, h, h, qx.data(), h, sx.data(), false);

  // Slots per local expert, in increasing expanded index.
  std::vector<std::vector<int64_t>> slots(static_cast<size_t>(c.local_count));
  for (int64_t s = 0; s < t * k; ++s) {
    const int32_t id = ids[s];
    if (id < 0 || id >= c.num_experts) continue;
    const int64_t e = int64_t(id) - c.local_offset;
    if (e < 0 || e >= c.local_count) continue;
    slots[size_t(e)].push_back(s);
  }
  std::vector<uint8_t> qa, hq;
  std::vector<float> sa, hv, sh;
  std::vector<double> gu, out;
  for (int e = 0; e < c.local_count; ++e) {
    const auto& list = slots[size_t(e)];
    if (list.empty()) continue;
    const MoeReferenceExpert ex = fetch(e);
    const int64_t m = int64_t(list.size());
    qa.resize(size_t(m * h));
    sa.resize(size_t(m * kbh));
    for (int64_t r = 0; r < m; ++r) {
      const int64_t tok = list[size_t(r)] / k;
      std::copy_n(qx.data() + tok * h, h, qa.data() + r * h);
      std::copy_n(sx.data() + tok * kbh, kbh, sa.data() + r * kbh);
    }
    gu.resize(size_t(m * 2 * I));
    gemm_reference(qa.data(), h, sa.data(), ex.w1, h, ex.sw1, m, 2 * I, h, gu.data());
    hv.resize(size_t(m * I));
    for (int64_t r = 0; r < m; ++r)
      for (int64_t col = 0; col < I; ++col) {
        double gd = gu[size_t(r * 2 * I + col)], ud = gu[size_t(r * 2 * I + I + col)];
        if (ex.b1 != nullptr) {
          gd += double(ex.b1[col]);
          ud += double(ex.b1[I + col]);
        }
        float g = float(gd), u = float(ud);
        if (c.round_gu_bf16) {
          g = bf16_to_float(bf16_from_float(g));
          u = bf16_to_float(bf16_from_float(u));
        }
        if (c.limit > 0) {
          g = std::min(g, c.limit);
          u = std::max(std::min(u, c.limit), -c.limit);
        }
        hv[size_t(r * I + col)] = c.gpt_oss_activation ? g / (1.0f + std::exp(-c.alpha * g)) * (u + 1.0f)
                                                       : g / (1.0f + std::exp(-g)) * u;
      }
    hq.resize(size_t(m * I));
    sh.resize(size_t(m * kbi));
    quantize_1x128(hv.data(), m, I, I, hq.data(), I, sh.data(), false);
    out.resize(size_t(m * h));
    gemm_reference(hq.data(), I, sh.data(), ex.w2, I, ex.sw2, m, h, I, out.data());
    for (int64_t r = 0; r < m; ++r) {
      const int64_t s = list[size_t(r)], tok = s / k;
      const double wt = double(w[s]);
      for (int64_t col = 0; col < h; ++col)
        y[size_t(tok * h + col)] += wt * (out[size_t(r * h + col)] + (ex.b2 != nullptr ? double(ex.b2[col]) : 0.0));
    }
  }
  return y;
}

MoeExpertFetch moe_reference_fetch_all(const MoeReferenceConfig& c, const uint8_t* w1, const float* sw1,
                                       const uint8_t* w2, const float* sw2, const float* b1, const float* b2) {
  const int64_t h = c.hidden, I = c.inter;
  const int64_t kbh = ceil_div(h, kQuantBlock), kbi = ceil_div(I, kQuantBlock);
  const int64_t n_sw1 = ceil_div(2 * I, kQuantBlock) * kbh;
  return [=](int e) {
    MoeReferenceExpert ex;
    ex.w1 = w1 + size_t(e) * size_t(2 * I * h);
    ex.sw1 = sw1 + size_t(e) * size_t(n_sw1);
    ex.w2 = w2 + size_t(e) * size_t(h * I);
    ex.sw2 = sw2 + size_t(e) * size_t(kbh * kbi);
    if (b1 != nullptr) ex.b1 = b1 + size_t(e) * size_t(2 * I);
    if (b2 != nullptr) ex.b2 = b2 + size_t(e) * size_t(h);
    return ex;
  };
}

}  // namespace moekit::detail

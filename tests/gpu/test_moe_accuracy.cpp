// The MoE layer's accuracy on checkpoint-like data (tests/moe_accuracy_util.h), stage by stage, so a
// failure says where the error comes from (docs/accuracy.md):
//   x    the token quantization (codes and 1x128 scales) must equal the host quantizer's exactly;
//   h    GEMM1's FP8 output: every row's scale within kHScaleRel of the float64 reference's, and
//        only rare one-step code flips (the FP8 tensor core's accumulation moves g/u by ~1e-4);
//   y|h  y against a float64 GEMM2 + combine of the device's own h (isolates GEMM2 and the combine);
//   y    y against the float64 SPEC reference (the end-to-end figure users see).
// The forward runs through the internal plan (planning/moe_plan.h) so the workspace regions are known.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "gemm/gemm_launch.h"
#include "gemm/heuristic.h"
#include "gpu_test_util.h"
#include "moe/moe_forward.h"
#include "moe/moe_reference.h"
#include "moe_accuracy_util.h"
#include "moekit/moekit.h"
#include "planning/moe_plan.h"
#include "runtime/device_buffer.h"
#include "runtime/knobs.h"
#include "runtime/pdl.h"
#include "runtime/random.h"

using moekit::MoeGemm1Input;
using moekit::detail::DeviceBuffer;
namespace mt = moekit::test;

namespace {

struct Case {
  const char* name;
  int e, k;
  int64_t h, inter, t;
  int promote_k = 0;
  MoeGemm1Input input = MoeGemm1Input::kAuto;
  bool x_normal = true;      ///< false: x uniform in [-1, 1) (the benches' --data uniform)
  bool w_checkpoint = true;  ///< false: uniformly random E4M3 codes with scales in [0.5e-4, 1e-4)
};

struct HostWeights {
  mt::QuantizedWeights w1, w2;
};

HostWeights make_weights(const Case& c, uint64_t seed) {
  HostWeights hw;
  if (c.w_checkpoint) {
    hw.w1 = mt::checkpoint_weights(c.e, 2 * c.inter, c.h, 0.02, seed);
    hw.w2 = mt::checkpoint_weights(c.e, c.h, c.inter, 0.02, seed + 1000);
    return hw;
  }
  auto codes = [&](mt::QuantizedWeights& w, int64_t n, int64_t k, uint64_t s) {
    const int64_t ns = c.e * moekit::ceil_div(n, 128) * moekit::ceil_div(k, 128);
    DeviceBuffer q(size_t(c.e * n * k)), sc(size_t(ns) * 4);
    moekit::detail::fill_random_e4m3(q.get(), c.e * n * k, s, nullptr);
    moekit::detail::fill_random_f32(sc.as<float>(), ns, 0.5e-4f, 1e-4f, s + 1, nullptr);
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    w.q = q.download<uint8_t>(size_t(c.e * n * k));
    w.s = sc.download<float>(size_t(ns));
  };
  codes(hw.w1, 2 * c.inter, c.h, seed);
  codes(hw.w2, c.h, c.inter, seed + 1000);
  return hw;
}

std::vector<uint16_t> make_x(const Case& c, uint64_t seed) {
  if (c.x_normal) return mt::normal_bf16(c.t * c.h, 1.0, seed);
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<uint16_t> x(size_t(c.t * c.h));
  for (auto& b : x) b = moekit::bf16_from_float(u(rng));
  return x;
}

/// What one forward left on the device: y and the stages' buffers, in logical layouts.
struct DeviceRun {
  moekit::detail::MoePlan plan;
  std::vector<float> y;                     ///< [T, H]
  std::vector<int32_t> p2e, offsets, counts;  ///< permuted_to_expanded [rows], [E + 1], [E]
  std::vector<uint8_t> xq;                  ///< gather: [T, H] token-major; permuted: [rows, H]
  std::vector<float> sx;                    ///< logical scales of xq
  std::vector<uint8_t> hq;                  ///< [rows, I]
  std::vector<float> sh;                    ///< logical [rows, ceil(I / 128)]
};

DeviceRun run_forward(const Case& c, const HostWeights& hw, const std::vector<uint16_t>& x,
                      const std::vector<int32_t>& ids, const std::vector<float>& wts, cudaStream_t s) {
  namespace d = moekit::detail;
  moekit::MoeConfig cfg;
  cfg.num_experts = c.e;
  cfg.top_k = c.k;
  cfg.hidden = c.h;
  cfg.inter = c.inter;
  cfg.gemm1_promote_k = c.promote_k;
  cfg.gemm1_input = c.input;
  const moekit::MoeLayer layer(cfg);
  DeviceRun r;
  r.plan = d::plan_moe_forward(layer.config(), c.t, false, d::device_limits(),
                               moekit::moe_sort_workspace_size(c.t, c.k, c.e), d::knobs());
  const d::MoePreparedSizes ps = d::moe_prepared_sizes(c.e, c.h, c.inter);
  DeviceBuffer w1(hw.w1.q.size()), sw1(hw.w1.s.size() * 4), w2(hw.w2.q.size()), sw2(hw.w2.s.size() * 4);
  DeviceBuffer w1p(ps.w1_bytes), sw1p(ps.sw1_bytes), dx(x.size() * 2), dids(ids.size() * 4), dw(wts.size() * 4);
  DeviceBuffer y(size_t(c.t * c.h) * 2), invalid(4), ws(r.plan.workspace.bytes);
  w1.upload(hw.w1.q);
  sw1.upload(hw.w1.s);
  w2.upload(hw.w2.q);
  sw2.upload(hw.w2.s);
  dx.upload(x);
  dids.upload(ids);
  dw.upload(wts);
  d::moe_prepare_w1(w1.get(), sw1.as<float>(), c.e, c.h, c.inter, w1p.get(), sw1p.as<float>(), s);
  EXPECT_EQ(cudaMemsetAsync(ws.get(), 0xFF, ws.bytes(), s), cudaSuccess);  // poison every stage's output
  EXPECT_EQ(cudaMemsetAsync(y.get(), 0xFF, y.bytes(), s), cudaSuccess);
  d::MoeForwardRequest q;
  q.x = dx.get();
  q.topk_ids = dids.as<int32_t>();
  q.topk_weights = dw.as<float>();
  q.w1p = w1p.get();
  q.sw1p = sw1p.as<float>();
  q.w2 = w2.get();
  q.sw2 = sw2.as<float>();
  q.y = y.get();
  q.invalid_count = invalid.as<int32_t>();
  {
    const d::PdlScope pdl(true);  // as MoeLayer::forward runs it
    d::moe_forward(r.plan, q, ws.get(), ws.bytes(), s);
  }
  mt::finish(s, "moe_forward");

  const auto& w = r.plan.workspace;
  const int64_t rows = r.plan.rows;
  auto grab = [&](size_t offset, size_t bytes) {
    std::vector<uint8_t> v(bytes);
    EXPECT_EQ(cudaMemcpy(v.data(), ws.as<char>() + offset, bytes, cudaMemcpyDeviceToHost), cudaSuccess);
    return v;
  };
  auto as_i32 = [](const std::vector<uint8_t>& b) {
    std::vector<int32_t> v(b.size() / 4);
    std::memcpy(v.data(), b.data(), b.size());
    return v;
  };
  auto logical_scales = [&](size_t offset, int64_t m, int64_t k) {
    const std::vector<uint8_t> b = grab(offset, size_t(moekit::sfa_physical_size(m, k)) * 4);
    std::vector<float> phys(b.size() / 4), logical(size_t(m * moekit::ceil_div(k, 128)));
    std::memcpy(phys.data(), b.data(), b.size());
    moekit::sfa_physical_to_logical(phys.data(), m, k, logical.data());
    return logical;
  };
  r.p2e = as_i32(grab(w.permuted_to_expanded, size_t(rows) * 4));
  r.offsets = as_i32(grab(w.expert_offsets, size_t(c.e + 1) * 4));
  r.counts = as_i32(grab(w.expert_counts, size_t(c.e) * 4));
  const int64_t x_rows = r.plan.gather ? c.t : rows;
  r.xq = grab(w.a_perm, size_t(x_rows * c.h));
  r.sx = logical_scales(w.sa_perm, x_rows, c.h);
  r.hq = grab(w.hq, size_t(rows * c.inter));
  r.sh = logical_scales(w.sh, rows, c.inter);
  const std::vector<uint16_t> yb = y.download<uint16_t>(size_t(c.t * c.h));
  r.y.resize(yb.size());
  for (size_t i = 0; i < yb.size(); ++i) r.y[i] = moekit::bf16_to_float(yb[i]);
  return r;
}

constexpr double kHScaleRel = 1e-3;  // every row's h scale vs the reference's, relative

struct Findings {
  int64_t x_code_mismatch = 0, x_scale_mismatch = 0;
  double h_scale_rel_max = 0.0;
  int64_t h_rows_scale_off = 0;  ///< rows whose h scale is more than kHScaleRel off
  int64_t h_flips = 0, h_far = 0, h_elems = 0;
  mt::RowErrors given_h, spec;
  std::string worst;             ///< the rows with the largest h scale error, described
};

// The bounds (docs/accuracy.md). Measured on the H100 on checkpoint-like data with the default GEMM1
// chains: h scales within 2-3e-4 of the reference's (6e-4 with 128-long chains), 0.4% of h codes one
// rounding step off (1.3% with 128), y given the device's h at the bf16 floor (1.67e-3, rows ≤ 1.8e-3),
// y vs the SPEC reference 2.1-2.5e-3 overall (4.3e-3 with 128), row median ≤ 2.1e-3; the layer
// tests see up to 3.4e-3 / 3.3e-3 with GEMM1's 64-long chains at prefill sizes (k = 8). A CPU
// emulation of the FP32 and tensor-core arithmetic gives the same picture; the bounds leave ~2x
// margin and still catch an h scale 0.2% off, a dropped slot, or h through bf16 (tests below).
constexpr double kXMismatch = 0;          // the token quantization is the host quantizer's, bit for bit
constexpr double kHFlipShare = 0.03;      // h codes one rounding step off, share of all
constexpr double kGivenHOverall = 2.0e-3, kGivenHRow = 2.5e-3;
constexpr double kSpecOverall = 6.0e-3, kSpecRowMedian = 4.5e-3;

std::vector<std::string> violations(const Findings& f) {
  std::vector<std::string> v;
  auto check = [&](bool ok, const std::string& what) {
    if (!ok) v.push_back(what);
  };
  check(double(f.x_code_mismatch + f.x_scale_mismatch) <= kXMismatch, "x quantization differs from the host's");
  check(f.h_scale_rel_max <= kHScaleRel, "an h scale is off by " + std::to_string(f.h_scale_rel_max));
  check(f.h_far == 0, std::to_string(f.h_far) + " h codes more than one rounding step off");
  check(double(f.h_flips) <= kHFlipShare * double(std::max<int64_t>(f.h_elems, 1)), "too many h code flips");
  check(f.given_h.overall <= kGivenHOverall && f.given_h.row_max <= kGivenHRow,
        "y given the device's h: " + std::to_string(f.given_h.overall) + " / row " + std::to_string(f.given_h.row_max));
  check(f.spec.overall <= kSpecOverall && f.spec.row_median <= kSpecRowMedian,
        "y vs SPEC: " + std::to_string(f.spec.overall) + " / row median " + std::to_string(f.spec.row_median));
  return v;
}

Findings analyse(const Case& c, const HostWeights& hw, const std::vector<uint16_t>& x, const std::vector<int32_t>& ids,
                 const std::vector<float>& wts, const DeviceRun& r) {
  Findings f;
  const int64_t h = c.h, I = c.inter, kbh = moekit::ceil_div(h, 128), kbi = moekit::ceil_div(I, 128);
  std::vector<float> xf(x.size());
  for (size_t i = 0; i < x.size(); ++i) xf[i] = moekit::bf16_to_float(x[i]);
  std::vector<uint8_t> xq(size_t(c.t * h));
  std::vector<float> sx(size_t(c.t * kbh));
  moekit::quantize_1x128(xf.data(), c.t, h, h, xq.data(), h, sx.data(), false);

  // x: token t's codes and scales, wherever the device keeps them.
  const int64_t x_rows = r.plan.gather ? c.t : r.plan.rows;
  for (int64_t row = 0; row < x_rows; ++row) {
    const int64_t tok = r.plan.gather ? row : (r.p2e[size_t(row)] >= 0 ? r.p2e[size_t(row)] / c.k : -1);
    if (tok < 0) continue;
    for (int64_t col = 0; col < h; ++col)
      f.x_code_mismatch += r.xq[size_t(row * h + col)] != xq[size_t(tok * h + col)];
    for (int64_t b = 0; b < kbh; ++b) f.x_scale_mismatch += r.sx[size_t(row * kbh + b)] != sx[size_t(tok * kbh + b)];
  }

  const int64_t n_sw1 = moekit::ceil_div(2 * I, 128) * kbh, n_sw2 = kbh * kbi;
  std::vector<double> y_given_h(size_t(c.t * h), 0.0);
  struct Bad {
    double rel;
    std::string what;
  };
  std::vector<Bad> bad;
  for (int e = 0; e < c.e; ++e) {
    const int64_t first = r.offsets[size_t(e)], m = r.counts[size_t(e)];
    if (m <= 0) continue;
    std::vector<uint8_t> qa(size_t(m * h));
    std::vector<float> sa(size_t(m * kbh));
    for (int64_t i = 0; i < m; ++i) {
      const int64_t tok = r.p2e[size_t(first + i)] / c.k;
      std::copy_n(xq.data() + tok * h, h, qa.data() + i * h);
      std::copy_n(sx.data() + tok * kbh, kbh, sa.data() + i * kbh);
    }
    std::vector<double> gu(size_t(m * 2 * I));
    moekit::gemm_reference(qa.data(), h, sa.data(), hw.w1.q.data() + size_t(e) * 2 * I * h, h,
                           hw.w1.s.data() + size_t(e) * n_sw1, m, 2 * I, h, gu.data());
    std::vector<float> hv(size_t(m * I)), sh(size_t(m * kbi));
    for (int64_t i = 0; i < m; ++i)
      for (int64_t col = 0; col < I; ++col) {
        const float g = float(gu[size_t(i * 2 * I + col)]), u = float(gu[size_t(i * 2 * I + I + col)]);
        hv[size_t(i * I + col)] = g / (1.0f + std::exp(-g)) * u;  // as moe_reference
      }
    std::vector<uint8_t> hq(size_t(m * I));
    moekit::quantize_1x128(hv.data(), m, I, I, hq.data(), I, sh.data(), false);
    for (int64_t i = 0; i < m; ++i) {
      const int64_t row = first + i;
      double row_rel = 0.0;
      int64_t row_flips = 0;
      for (int64_t b = 0; b < kbi; ++b) {
        const double rel = std::abs(double(r.sh[size_t(row * kbi + b)]) / sh[size_t(i * kbi + b)] - 1.0);
        row_rel = std::max(row_rel, std::isnan(rel) ? INFINITY : rel);
      }
      for (int64_t col = 0; col < I; ++col) {
        const uint8_t got = r.hq[size_t(row * I + col)], want = hq[size_t(i * I + col)];
        if (got == want) continue;
        ++row_flips;
        f.h_far += !mt::one_rounding_step(got, want);
      }
      f.h_flips += row_flips;
      f.h_scale_rel_max = std::max(f.h_scale_rel_max, row_rel);
      if (row_rel > kHScaleRel) {
        ++f.h_rows_scale_off;
        const int32_t s = r.p2e[size_t(row)];
        bad.push_back({row_rel, "row " + std::to_string(row) + " (expert " + std::to_string(e) + ", +" +
                                    std::to_string(i) + " in segment, token " + std::to_string(s / c.k) + " slot " +
                                    std::to_string(s % c.k) + "): scale rel " + std::to_string(row_rel) + ", " +
                                    std::to_string(row_flips) + " flips"});
      }
    }
    f.h_elems += m * I;
    // y given the device's own h: GEMM2 and the weighted combine in float64.
    std::vector<double> out(size_t(m * h));
    std::vector<float> sh_dev(r.sh.begin() + first * kbi, r.sh.begin() + (first + m) * kbi);
    moekit::gemm_reference(r.hq.data() + first * I, I, sh_dev.data(), hw.w2.q.data() + size_t(e) * h * I, I,
                           hw.w2.s.data() + size_t(e) * n_sw2, m, h, I, out.data());
    for (int64_t i = 0; i < m; ++i) {
      const int32_t s = r.p2e[size_t(first + i)];
      for (int64_t col = 0; col < h; ++col)
        y_given_h[size_t((s / c.k) * h + col)] += double(wts[size_t(s)]) * out[size_t(i * h + col)];
    }
  }
  std::sort(bad.begin(), bad.end(), [](const Bad& a, const Bad& b) { return a.rel > b.rel; });
  for (size_t i = 0; i < bad.size() && i < 4; ++i) f.worst += "\n      " + bad[i].what;
  f.given_h = mt::row_errors(r.y, y_given_h, c.t, h);

  moekit::detail::MoeReferenceConfig rc;
  rc.num_experts = c.e;
  rc.top_k = c.k;
  rc.hidden = h;
  rc.inter = I;
  rc.local_count = c.e;
  const std::vector<double> ref = moekit::detail::moe_reference(
      rc, x.data(), ids.data(), wts.data(), c.t,
      moekit::detail::moe_reference_fetch_all(rc, hw.w1.q.data(), hw.w1.s.data(), hw.w2.q.data(), hw.w2.s.data()));
  f.spec = mt::row_errors(r.y, ref, c.t, h);
  return f;
}

/// y of the public MoeLayer for the same inputs (caller's ids), to show it equals the internal path's
/// accuracy; with `routing` it routes from logits instead and returns the routed ids and weights.
std::vector<float> public_forward(const Case& c, const HostWeights& hw, const std::vector<uint16_t>& x,
                                  std::vector<int32_t>* ids, std::vector<float>* wts,
                                  const moekit::RoutingConfig* routing, const std::vector<float>& logits,
                                  cudaStream_t s) {
  moekit::MoeConfig cfg;
  cfg.num_experts = c.e;
  cfg.top_k = c.k;
  cfg.hidden = c.h;
  cfg.inter = c.inter;
  if (routing) cfg.routing = *routing;
  moekit::MoeLayer layer(cfg);
  DeviceBuffer w1(hw.w1.q.size()), sw1(hw.w1.s.size() * 4), w2(hw.w2.q.size()), sw2(hw.w2.s.size() * 4);
  w1.upload(hw.w1.q);
  sw1.upload(hw.w1.s);
  w2.upload(hw.w2.q);
  sw2.upload(hw.w2.s);
  DeviceBuffer prepared(layer.prepared_weight_bytes());
  layer.prepare_weights({w1.get(), sw1.as<float>(), w2.get(), sw2.as<float>()}, prepared.get(), prepared.bytes(), s);
  const size_t slots = size_t(c.t * c.k);
  DeviceBuffer dx(x.size() * 2), dids(slots * 4), dw(slots * 4), dl(std::max<size_t>(logits.size(), 1) * 4);
  DeviceBuffer y(size_t(c.t * c.h) * 2), ws(layer.workspace_size(c.t));
  dx.upload(x);
  moekit::MoeForwardArgs a;
  a.num_tokens = c.t;
  a.x = dx.get();
  a.y = y.get();
  a.workspace = ws.get();
  a.workspace_bytes = ws.bytes();
  if (routing) {
    dl.upload(logits);
    a.logits = dl.get();
    a.routed_ids = dids.as<int32_t>();
    a.routed_weights = dw.as<float>();
  } else {
    dids.upload(*ids);
    dw.upload(*wts);
    a.topk_ids = dids.as<int32_t>();
    a.topk_weights = dw.as<float>();
  }
  EXPECT_EQ(cudaMemsetAsync(y.get(), 0xFF, y.bytes(), s), cudaSuccess);
  layer.forward(a, s);
  mt::finish(s, "MoeLayer::forward");
  if (routing) {
    *ids = dids.download<int32_t>(slots);
    *wts = dw.download<float>(slots);
  }
  const std::vector<uint16_t> yb = y.download<uint16_t>(size_t(c.t * c.h));
  std::vector<float> out(yb.size());
  for (size_t i = 0; i < yb.size(); ++i) out[i] = moekit::bf16_to_float(yb[i]);
  return out;
}

std::vector<double> spec_reference(const Case& c, const HostWeights& hw, const std::vector<uint16_t>& x,
                                   const std::vector<int32_t>& ids, const std::vector<float>& wts) {
  moekit::detail::MoeReferenceConfig rc;
  rc.num_experts = c.e;
  rc.top_k = c.k;
  rc.hidden = c.h;
  rc.inter = c.inter;
  rc.local_count = c.e;
  return moekit::detail::moe_reference(
      rc, x.data(), ids.data(), wts.data(), c.t,
      moekit::detail::moe_reference_fetch_all(rc, hw.w1.q.data(), hw.w1.s.data(), hw.w2.q.data(), hw.w2.s.data()));
}

void check_case(const Case& c, uint64_t seed) {
  SCOPED_TRACE(c.name);
  mt::Stream s;
  const HostWeights hw = make_weights(c, seed);
  const std::vector<uint16_t> x = make_x(c, seed + 7);
  std::vector<int32_t> ids;
  std::vector<float> wts;
  mt::distinct_topk(c.t, c.k, c.e, seed + 11, &ids, &wts);
  const DeviceRun r = run_forward(c, hw, x, ids, wts, s);
  const Findings f = analyse(c, hw, x, ids, wts, r);
  // The public layer on the same inputs (its kernels are the same; the FP32 atomics' order is not).
  const mt::RowErrors pub =
      mt::row_errors(public_forward(c, hw, x, &ids, &wts, nullptr, {}, s), spec_reference(c, hw, x, ids, wts), c.t, c.h);
  // The distance to the unquantized layer (checkpoint weights only; small cases: it is slow).
  std::string unq = "-";
  if (c.w_checkpoint && c.t * c.k * c.h * c.inter <= (int64_t(1) << 30)) {
    const mt::RowErrors u = mt::row_errors(
        r.y, mt::unquantized_layer(x, c.t, c.h, c.inter, c.k, c.e, ids, wts, hw.w1.bf16, hw.w2.bf16), c.t, c.h);
    unq = std::to_string(u.overall);
  }
  std::printf("[ accuracy ] %-26s %s | x mism %lld/%lld | h scale rel max %.2e, flips %.3f%% (far %lld) | "
              "y|h %.2e row max %.2e | y %.2e row med %.2e max %.2e | public y %.2e | unquantized %s%s\n",
              c.name, r.plan.gather ? "gather " : "permute", (long long)f.x_code_mismatch,
              (long long)f.x_scale_mismatch, f.h_scale_rel_max,
              100.0 * double(f.h_flips) / double(std::max<int64_t>(f.h_elems, 1)), (long long)f.h_far,
              f.given_h.overall, f.given_h.row_max, f.spec.overall, f.spec.row_median, f.spec.row_max, pub.overall,
              unq.c_str(), f.worst.c_str());
  for (const std::string& v : violations(f)) ADD_FAILURE() << v;
  EXPECT_LE(pub.overall, kSpecOverall);
  EXPECT_LE(pub.row_median, kSpecRowMedian);
}

TEST(MoeAccuracy, CheckpointLikeStages) {
  const Case cases[] = {
      {"E4 k2 H1024 I384 T64", 4, 2, 1024, 384, 64},
      {"  permuted", 4, 2, 1024, 384, 64, 0, MoeGemm1Input::kPermuted},
      {"  promote_k 128", 4, 2, 1024, 384, 64, 128},
      {"  x uniform", 4, 2, 1024, 384, 64, 0, MoeGemm1Input::kAuto, false, true},
      {"  W uniform codes", 4, 2, 1024, 384, 64, 0, MoeGemm1Input::kAuto, true, false},
      {"  both uniform", 4, 2, 1024, 384, 64, 0, MoeGemm1Input::kAuto, false, false},
      {"E16 k4 H2048 I1024 T64", 16, 4, 2048, 1024, 64},
      {"E64 k6 H2048 I1024 T500", 64, 6, 2048, 1024, 500},
      {"  permuted", 64, 6, 2048, 1024, 500, 0, MoeGemm1Input::kPermuted},
      {"E128 k8 H2048 I768 T256", 128, 8, 2048, 768, 256},
      {"E4 k2 H2880 I2880 T33", 4, 2, 2880, 2880, 33},
  };
  uint64_t seed = 1000;
  for (const Case& c : cases) check_case(c, seed += 100);
}

// Routing from logits (DeepSeek-V3's grouped sigmoid, reduced) through the public layer: the small
// batches take the fused route + sort (+ quantize) launch.
TEST(MoeAccuracy, CheckpointLikeFromLogits) {
  moekit::RoutingConfig rc;
  rc.method = moekit::RoutingMethod::kSigmoidGrouped;
  rc.num_groups = 4;
  rc.topk_groups = 2;
  rc.renormalize = true;
  rc.routed_scaling_factor = 2.5f;
  mt::Stream s;
  for (int64_t t : {1, 7, 64, 300}) {
    const Case c{"logits", 32, 4, 2048, 1024, t};
    SCOPED_TRACE(t);
    const HostWeights hw = make_weights(c, 5000 + uint64_t(t));
    const std::vector<uint16_t> x = make_x(c, 6000 + uint64_t(t));
    std::vector<float> logits(size_t(t * c.e));
    std::mt19937_64 rng(7000 + uint64_t(t));
    std::normal_distribution<float> z(0.0f, 1.0f);
    for (auto& v : logits) v = z(rng);
    std::vector<int32_t> ids;
    std::vector<float> wts;
    const std::vector<float> y = public_forward(c, hw, x, &ids, &wts, &rc, logits, s);
    const mt::RowErrors e = mt::row_errors(y, spec_reference(c, hw, x, ids, wts), t, c.h);
    std::printf("[ accuracy ] logits T=%-4lld y %.2e row med %.2e max %.2e\n", (long long)t, e.overall, e.row_median,
                e.row_max);
    // One or a few rows: a single large h element one step off moves a row by up to ~1e-2.
    EXPECT_LE(e.overall, t >= 16 ? kSpecOverall : 1.5e-2);
    if (t >= 16) EXPECT_LE(e.row_median, kSpecRowMedian);
  }
}

// The bounds would catch real defects: the same device run, analysed as if GEMM1 had written an h
// scale 0.2% too large for one expert's rows, or as if the layer had dropped one slot.
TEST(MoeAccuracy, BoundsCatchDefects) {
  const Case c{"defects", 4, 2, 1024, 384, 64};
  mt::Stream s;
  const HostWeights hw = make_weights(c, 42);
  const std::vector<uint16_t> x = make_x(c, 43);
  std::vector<int32_t> ids;
  std::vector<float> wts;
  mt::distinct_topk(c.t, c.k, c.e, 44, &ids, &wts);
  const DeviceRun r = run_forward(c, hw, x, ids, wts, s);
  EXPECT_TRUE(violations(analyse(c, hw, x, ids, wts, r)).empty());

  DeviceRun wrong_scale = r;
  const int64_t kbi = moekit::ceil_div(c.inter, 128);
  for (int64_t row = r.offsets[1]; row < r.offsets[1] + r.counts[1]; ++row)
    for (int64_t b = 0; b < kbi; ++b) wrong_scale.sh[size_t(row * kbi + b)] *= 1.002f;
  const std::vector<std::string> v1 = violations(analyse(c, hw, x, ids, wts, wrong_scale));
  EXPECT_FALSE(v1.empty()) << "an h scale 0.2% off passed";

  // The layer computed every slot; the reference that drops slot 0 of token 5 stands for a layer
  // that drops it.
  std::vector<float> dropped = wts;
  dropped[size_t(5 * c.k)] = 0.0f;
  const std::vector<std::string> v2 = violations(analyse(c, hw, x, ids, dropped, r));
  EXPECT_FALSE(v2.empty()) << "a dropped slot passed";
  for (const auto& v : v1) std::printf("[ accuracy ] h scale x1.002 caught: %s\n", v.c_str());
  for (const auto& v : v2) std::printf("[ accuracy ] dropped slot caught: %s\n", v.c_str());
}

}  // namespace

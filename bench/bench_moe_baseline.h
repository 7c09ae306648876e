// `moekit bench moe`'s in-process baseline: the unfused cuBLASLt per-expert pipeline (bench_moe.cpp's
// header comment, base_us), and its timing as one CUDA graph.
#pragma once
#include <cstdint>
#include <exception>
#include <string>
#include <vector>

#include "baseline/cublaslt.h"
#include "bench/bench.h"
#include "bench/bench_util.h"
#include "bench/moe_presets.h"
#include "common/check.h"
#include "moekit/moekit.h"
#include "runtime/device_buffer.h"

namespace moekit::bench {

using detail::DeviceBuffer;

/// The unfused cuBLASLt per-expert baseline for one (preset, T), see the header comment.
class Baseline {
 public:
  Baseline(const Preset& p, int64_t t, const RoutingConfig& rc, baseline::CublasLt& lt, const DeviceBuffer& x,
           const DeviceBuffer& logits, const DeviceBuffer& w1, const DeviceBuffer& sw1, const DeviceBuffer& w2,
           const DeviceBuffer& sw2, cudaStream_t stream)
      : p_(p), t_(t), rc_(rc), lt_(lt), x_(x), logits_(logits), w1_(w1), sw1_(sw1), w2_(w2), sw2_(sw2), s_(stream) {
    const int64_t h = p.h, I = p.inter, E = p.e, k = p.k;
    rows_ = moe_sort_rows_bound(t, p.k, p.e);
    ids_ = DeviceBuffer(size_t(t * k) * 4);
    wts_ = DeviceBuffer(size_t(t * k) * 4);
    counts_ = DeviceBuffer(size_t(E) * 4);
    offsets_ = DeviceBuffer(size_t(E + 1) * 4);
    p2e_ = DeviceBuffer(size_t(rows_) * 4);
    e2p_ = DeviceBuffer(size_t(t * k) * 4);
    invalid_ = DeviceBuffer(4);
    sort_ws_bytes_ = moe_sort_workspace_size(t, p.k, p.e);
    sort_ws_ = DeviceBuffer(std::max<size_t>(sort_ws_bytes_, 256));
    xq_ = DeviceBuffer(size_t(t * h));
    sx_ = DeviceBuffer(size_t(t * ceil_div(h, 128)) * 4);
    a_perm_ = DeviceBuffer(size_t(rows_ * h));
    sa_perm_ = DeviceBuffer(size_t(sfa_physical_size(rows_, h)) * 4);
    d1_ = DeviceBuffer(size_t(rows_ * 2 * I) * 2);
    hq_ = DeviceBuffer(size_t(rows_ * I));
    sa2_ = DeviceBuffer(size_t(sfa_physical_size(rows_, I)) * 4);
    d2_ = DeviceBuffer(size_t(rows_ * h) * 2);
    y_ = DeviceBuffer(size_t(t * h) * 2);
    // Route and sort once to learn the per-expert row counts (host side, outside timing).
    head();
    MOEKIT_CUDA_CHECK(cudaStreamSynchronize(s_));
    const auto counts = counts_.download<int32_t>(size_t(E));
    const auto offsets = offsets_.download<int32_t>(size_t(E + 1));
    for (int e = 0; e < E; ++e)
      if (counts[size_t(e)] > 0) experts_.push_back({e, offsets[size_t(e)], align_up(counts[size_t(e)], 4)});
    for (const Expert& ex : experts_) {
      for (int g = 0; g < 2; ++g) {
        const baseline::LtStatus st = lt_.prepare_fp8(gemm_args(ex, g), s_, slot(ex, g), sa_ld(g));
        if (!st) throw Error(ErrorCode::kInternal, "cuBLASLt: " + st.message);
      }
    }
  }

  /// The whole baseline on the stream.
  void run() {
    head();
    permute_quantize(x_.get(), t_, p_.h, p_.k, p2e_.as<int32_t>(), rows_, xq_.get(), sx_.as<float>(), a_perm_.get(),
                     sa_perm_.as<float>(), false, s_);
    gemms(0);
    swiglu_quantize(d1_.get(), 2 * p_.inter, rows_, p_.inter, p_.limit, hq_.get(), p_.inter, sa2_.as<float>(), false,
                    s_, offsets_.as<int32_t>() + p_.e);
    gemms(1);
    moe_combine(d2_.get(), p_.h, e2p_.as<int32_t>(), wts_.as<float>(), t_, p_.k, p_.h, y_.get(), p_.h, s_);
  }

  const DeviceBuffer& y() const { return y_; }

 private:
  struct Expert {
    int e;
    int64_t start, m4;
  };

  void head() {
    route(rc_, logits_.get(), LogitsType::kFloat32, t_, ids_.as<int32_t>(), wts_.as<float>(), s_);
    MoeSortBuffers b;
    b.expert_counts = counts_.as<int32_t>();
    b.expert_offsets = offsets_.as<int32_t>();
    b.permuted_to_expanded = p2e_.as<int32_t>();
    b.expanded_to_permuted = e2p_.as<int32_t>();
    b.invalid_count = invalid_.as<int32_t>();
    moe_sort(ids_.as<int32_t>(), t_, p_.k, p_.e, 0, p_.e, b, sort_ws_.get(), sort_ws_bytes_, s_);
  }

  int slot(const Expert& ex, int g) const { return g * p_.e + ex.e; }
  int64_t sa_ld(int) const { return sfa_ld(rows_); }

  GemmFp8Args gemm_args(const Expert& ex, int g) const {
    const int64_t h = p_.h, I = p_.inter;
    const int64_t kbh = ceil_div(h, 128), kbi = ceil_div(I, 128);
    GemmFp8Args a;
    a.m = ex.m4;
    if (g == 0) {
      a.n = 2 * I;
      a.k = h;
      a.a = a_perm_.as<uint8_t>() + ex.start * h;
      a.lda = h;
      a.sa = sa_perm_.as<float>() + ex.start;
      a.b = w1_.as<uint8_t>() + size_t(ex.e) * size_t(2 * I * h);
      a.ldb = h;
      a.sb = sw1_.as<float>() + size_t(ex.e) * size_t(ceil_div(2 * I, 128) * kbh);
      a.d = d1_.as<uint16_t>() + ex.start * 2 * I;
      a.ldd = 2 * I;
    } else {
      a.n = h;
      a.k = I;
      a.a = hq_.as<uint8_t>() + ex.start * I;
      a.lda = I;
      a.sa = sa2_.as<float>() + ex.start;
      a.b = w2_.as<uint8_t>() + size_t(ex.e) * size_t(h * I);
      a.ldb = I;
      a.sb = sw2_.as<float>() + size_t(ex.e) * size_t(kbh * kbi);
      a.d = d2_.as<uint16_t>() + ex.start * h;
      a.ldd = h;
    }
    return a;
  }

  void gemms(int g) {
    for (const Expert& ex : experts_) {
      const GemmFp8Args a = gemm_args(ex, g);
      lt_.refresh_sa_fp8(a, s_, slot(ex, g), sa_ld(g));
      const baseline::LtStatus st = lt_.gemm_fp8(a, s_, slot(ex, g));
      if (!st) throw Error(ErrorCode::kInternal, "cuBLASLt: " + st.message);
    }
  }

  const Preset& p_;
  int64_t t_;
  RoutingConfig rc_;
  baseline::CublasLt& lt_;
  const DeviceBuffer &x_, &logits_, &w1_, &sw1_, &w2_, &sw2_;
  cudaStream_t s_;
  int64_t rows_ = 0;
  size_t sort_ws_bytes_ = 0;
  DeviceBuffer ids_, wts_, counts_, offsets_, p2e_, e2p_, invalid_, sort_ws_, xq_, sx_, a_perm_, sa_perm_, d1_, hq_,
      sa2_, d2_, y_;
  std::vector<Expert> experts_;
};

/// Times the baseline as one CUDA graph (direct calls if capture fails) after cool_down(pass_us,
/// cooldown_ms); returns µs.
inline double time_baseline(Baseline& b, cudaStream_t s, int reps, std::vector<std::string>& notes, double pass_us,
                     int cooldown_ms) {
  b.run();  // first use outside capture
  MOEKIT_CUDA_CHECK(cudaStreamSynchronize(s));
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  bool graphed = cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal) == cudaSuccess;
  if (graphed) {
    try {
      b.run();
    } catch (const std::exception&) {
      graphed = false;
    }
    const cudaError_t end = cudaStreamEndCapture(s, &graph);
    graphed = graphed && end == cudaSuccess && graph && cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess;
  }
  cudaGetLastError();
  if (!graphed) notes.push_back("baseline: graph capture failed, timed as direct calls");
  cool_down(pass_us, cooldown_ms);
  const double us = time_median_us(
      [&](int) {
        if (graphed) MOEKIT_CUDA_CHECK(cudaGraphLaunch(exec, s));
        else b.run();
      },
      s, 2, reps);
  if (exec) cudaGraphExecDestroy(exec);
  if (graph) cudaGraphDestroy(graph);
  b.run();  // the output compared
  MOEKIT_CUDA_CHECK(cudaStreamSynchronize(s));
  return us;
}

}  // namespace moekit::bench

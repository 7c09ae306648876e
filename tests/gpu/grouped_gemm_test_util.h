// Shared helpers of the grouped-GEMM GPU tests (test_grouped_gemm.cpp, test_grouped_gemm_masked.cpp):
// operands, poisoned D, the sampled float64 reference check and the untouched-padding check.
#pragma once

#include <gtest/gtest.h>

#include "gpu/gpu_test_util.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <initializer_list>
#include <limits>
#include <numeric>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>
#include <cuda_runtime_api.h>

#include "moekit/moekit.h"
#include "gemm/gemm_launch.h"
#include "runtime/device_buffer.h"
#include "runtime/knobs.h"
#include "runtime/random.h"
namespace moekit::grouped_test {

using moekit::detail::DeviceBuffer;


using Counts = std::vector<int32_t>;

inline constexpr double kMaxRelL2 = 2e-3;        // SPEC §2, over all sampled rows of a run
inline constexpr double kMaxExpertRelL2 = 1e-2;  // per expert: a wrong expert's B or scales gives O(1)
inline constexpr int kRowsPerExpert = 8;         // sampled valid rows per expert (first and last included)
inline constexpr int kMaxSampledRows = 400;      // total, unless the first/last rows alone need more

using moekit::test::finish;
using moekit::test::Stream;

inline int64_t total_of(const Counts& c) { return std::accumulate(c.begin(), c.end(), int64_t(0)); }

inline std::string counts_summary(const Counts& c) {
  int64_t empty = 0, mx = 0;
  for (int32_t v : c) {
    empty += v == 0;
    mx = std::max<int64_t>(mx, v);
  }
  return "E=" + std::to_string(c.size()) + " total=" + std::to_string(total_of(c)) + " max=" + std::to_string(mx) +
         " empty=" + std::to_string(empty);
}

// ----------------------------------------------------------------------------------------------
// Count-vector generators
// ----------------------------------------------------------------------------------------------

// `total` rows over `experts` experts, heavily skewed (geometric over a random permutation of the
// experts), so a few experts hold most rows and several stay empty.
inline Counts skewed_counts(int64_t experts, int64_t total, double p, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::geometric_distribution<int64_t> geo(p);
  std::vector<int32_t> perm(static_cast<size_t>(experts));
  std::iota(perm.begin(), perm.end(), 0);
  std::shuffle(perm.begin(), perm.end(), rng);
  Counts c(size_t(experts), 0);
  for (int64_t i = 0; i < total; ++i) ++c[size_t(perm[size_t(std::min<int64_t>(geo(rng), experts - 1))])];
  return c;
}

inline Counts uniform_counts(int64_t experts, int32_t lo, int32_t hi, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int32_t> u(lo, hi);
  Counts c(static_cast<size_t>(experts));
  for (auto& v : c) v = u(rng);
  return c;
}

// ----------------------------------------------------------------------------------------------
// One grouped problem on the device
// ----------------------------------------------------------------------------------------------

struct Problem {
  std::string name;
  bool masked = false;
  Counts counts;                      // E entries; the layout's counts (masked: may exceed max_m)
  int64_t n = 0, k = 0;
  int64_t max_m = 0;                  // masked only
  int64_t rows = 0;                   // contiguous only; 0: contiguous_rows_upper_bound(total, E)
  int64_t lda = 0, ldb = 0, ldd = 0;  // 0: packed
};

struct Check {
  double rel_l2 = std::numeric_limits<double>::quiet_NaN();  // over all sampled rows
  double worst_expert_l2 = 0.0;
  int64_t worst_expert = -1;
  int64_t valid_rows = 0;
  int64_t rows_checked = 0;
  int64_t unwritten = 0;          // NaN (poison) left in [0, n) of a valid row
  int64_t clobbered_rows = 0;     // elements of rows that must not be written which changed
  int64_t clobbered_cols = 0;     // elements of columns [n, ldd) of valid rows which changed
  int64_t first_clobbered_row = -1;
};

class GroupedData {
 public:
  GroupedData(const Problem& p, uint64_t seed, cudaStream_t stream) : p_(p) {
    E_ = int64_t(p.counts.size());
    if (!p_.lda) p_.lda = p_.k;
    if (!p_.ldb) p_.ldb = p_.k;
    if (!p_.ldd) p_.ldd = p_.n;
    kb_ = moekit::ceil_div(p_.k, moekit::kQuantBlock);
    nb_ = moekit::ceil_div(p_.n, moekit::kQuantBlock);
    if (p_.masked) {
      rows_ = E_ * p_.max_m;
    } else {
      rows_ = p_.rows ? p_.rows : moekit::contiguous_rows_upper_bound(total_of(p_.counts), E_);
    }
    a_ = DeviceBuffer(size_t(std::max<int64_t>(rows_ * p_.lda, 16)));
    sa_ = DeviceBuffer(size_t(std::max<int64_t>(moekit::sfa_physical_size(rows_, p_.k), 4)) * sizeof(float));
    b_ = DeviceBuffer(size_t(E_ * p_.n * p_.ldb));
    sb_ = DeviceBuffer(size_t(E_ * nb_ * kb_) * sizeof(float));
    d_ = DeviceBuffer(size_t(std::max<int64_t>(rows_ * p_.ldd, 8)) * 2);
    counts_ = DeviceBuffer(size_t(std::max<int64_t>(E_, 1)) * sizeof(int32_t));
    offsets_ = DeviceBuffer(size_t(E_ + 1) * sizeof(int32_t));
    moekit::detail::fill_random_e4m3(a_.get(), rows_ * p_.lda, seed * 8 + 1, stream);
    moekit::detail::fill_random_e4m3(b_.get(), E_ * p_.n * p_.ldb, seed * 8 + 2, stream);
    moekit::detail::fill_random_f32(sa_.as<float>(), moekit::sfa_physical_size(rows_, p_.k), 0.25f, 2.0f,
                                    seed * 8 + 3, stream);
    moekit::detail::fill_random_f32(sb_.as<float>(), E_ * nb_ * kb_, 0.25f, 2.0f, seed * 8 + 4, stream);
    set_counts(p_.counts, stream);
    poison(stream);
  }

  int64_t rows() const { return rows_; }
  int64_t num_groups() const { return E_; }
  int32_t* counts_device() const { return counts_.as<int32_t>(); }
  int32_t* offsets_device() const { return offsets_.as<int32_t>(); }

  // Writes `counts` (and, for the contiguous layout, the host offsets) into the device buffers on
  // `stream`. The host vectors are kept until the next call, as the copies are asynchronous.
  void set_counts(const Counts& counts, cudaStream_t stream) {
    host_counts_ = counts;
    ASSERT_EQ(host_counts_.size(), size_t(E_));
    if (E_ > 0) {
      ASSERT_EQ(cudaMemcpyAsync(counts_.get(), host_counts_.data(), size_t(E_) * 4, cudaMemcpyHostToDevice, stream),
                cudaSuccess);
    }
    if (!p_.masked) {
      host_offsets_ = moekit::contiguous_offsets(host_counts_);
      ASSERT_LE(host_offsets_.back(), rows_) << "the allocation is too small for these counts";
      ASSERT_EQ(cudaMemcpyAsync(offsets_.get(), host_offsets_.data(), size_t(E_ + 1) * 4, cudaMemcpyHostToDevice,
                                stream),
                cudaSuccess);
    }
  }

  void poison(cudaStream_t stream) { ASSERT_EQ(cudaMemsetAsync(d_.get(), 0xFF, d_.bytes(), stream), cudaSuccess); }

  moekit::GroupedGemmFp8Args args() const {
    moekit::GroupedGemmFp8Args a;
    a.num_groups = E_;
    a.n = p_.n;
    a.k = p_.k;
    a.a = a_.get();
    a.lda = p_.lda;
    a.sa = sa_.as<float>();
    a.b = b_.get();
    a.ldb = p_.ldb;
    a.sb = sb_.as<float>();
    a.d = d_.get();
    a.ldd = p_.ldd;
    return a;
  }

  // Enqueues the GEMM with the device offsets / counts (whatever they hold at run time); contiguous
  // with `tile_counter` (zeroed here first): dynamic units, as the MoE layer runs its GEMM2.
  void run(cudaStream_t stream, unsigned* tile_counter = nullptr) const {
    if (p_.masked) {
      moekit::grouped_gemm_fp8_masked(args(), p_.max_m, counts_device(), stream);
    } else if (tile_counter != nullptr) {
      ASSERT_EQ(cudaMemsetAsync(tile_counter, 0, sizeof(unsigned), stream), cudaSuccess);
      moekit::detail::grouped_gemm_fp8_contiguous_counted(args(), rows_, offsets_device(), counts_device(),
                                                         tile_counter, stream);
    } else {
      moekit::grouped_gemm_fp8_contiguous(args(), rows_, offsets_device(), counts_device(), stream);
    }
  }

  // Checks D (already finished) against `counts`: see the file comment.
  Check check(const Counts& counts, uint64_t seed) const {
    Check r;
    std::vector<int64_t> start(static_cast<size_t>(E_)), valid(static_cast<size_t>(E_));
    if (p_.masked) {
      for (int64_t e = 0; e < E_; ++e) {
        start[size_t(e)] = e * p_.max_m;
        valid[size_t(e)] = std::clamp<int64_t>(counts[size_t(e)], 0, p_.max_m);
      }
    } else {
      const auto off = moekit::contiguous_offsets(counts);
      for (int64_t e = 0; e < E_; ++e) {
        start[size_t(e)] = off[size_t(e)];
        valid[size_t(e)] = counts[size_t(e)];
      }
    }

    // 1. Poison: every valid row written in [0, n); everything else untouched.
    const auto out = d_.download<uint16_t>(size_t(rows_ * p_.ldd));
    std::vector<uint8_t> is_valid(size_t(rows_), 0);
    for (int64_t e = 0; e < E_; ++e)
      for (int64_t i = 0; i < valid[size_t(e)]; ++i) is_valid[size_t(start[size_t(e)] + i)] = 1;
    for (int64_t row = 0; row < rows_; ++row) {
      const uint16_t* o = out.data() + row * p_.ldd;
      if (is_valid[size_t(row)]) {
        ++r.valid_rows;
        for (int64_t j = 0; j < p_.n; ++j) r.unwritten += std::isnan(moekit::bf16_to_float(o[j])) ? 1 : 0;
        for (int64_t j = p_.n; j < p_.ldd; ++j) r.clobbered_cols += o[j] != 0xFFFF;
      } else {
        int64_t bad = 0;
        for (int64_t j = 0; j < p_.ldd; ++j) bad += o[j] != 0xFFFF;
        if (bad && r.first_clobbered_row < 0) r.first_clobbered_row = row;
        r.clobbered_rows += bad;
      }
    }

    // 2. Reference on sampled rows: first and last valid row of every expert, then random
    //    interior rows up to kRowsPerExpert per expert and kMaxSampledRows in total.
    int64_t nonempty = 0;
    for (int64_t e = 0; e < E_; ++e) nonempty += valid[size_t(e)] > 0;
    if (nonempty == 0) return r;
    const int64_t extra = std::clamp<int64_t>((kMaxSampledRows - 2 * nonempty) / nonempty, 0, kRowsPerExpert - 2);
    std::mt19937_64 rng(seed);
    const int64_t sld = moekit::sfa_ld(rows_);
    const auto sa_phys = sa_.download<float>(size_t(moekit::sfa_physical_size(rows_, p_.k)));
    std::vector<float> got_all;
    std::vector<double> ref_all;
    for (int64_t e = 0; e < E_; ++e) {
      const int64_t v = valid[size_t(e)], s0 = start[size_t(e)];
      if (v == 0) continue;
      std::set<int64_t> pick = {s0, s0 + v - 1};
      if (v - 2 <= extra) {
        for (int64_t i = 1; i + 1 < v; ++i) pick.insert(s0 + i);
      } else {
        while (int64_t(pick.size()) < 2 + extra) pick.insert(s0 + 1 + int64_t(rng() % uint64_t(v - 2)));
      }
      const std::vector<int64_t> sel(pick.begin(), pick.end());
      const int64_t rs = int64_t(sel.size());
      std::vector<uint8_t> a_rows(size_t(rs * p_.k));
      std::vector<float> sa_rows(size_t(rs * kb_));
      for (int64_t i = 0; i < rs; ++i) {
        EXPECT_EQ(cudaMemcpy(a_rows.data() + i * p_.k, a_.as<uint8_t>() + sel[size_t(i)] * p_.lda, size_t(p_.k),
                             cudaMemcpyDeviceToHost),
                  cudaSuccess);
        for (int64_t j = 0; j < kb_; ++j) sa_rows[size_t(i * kb_ + j)] = sa_phys[size_t(j * sld + sel[size_t(i)])];
      }
      std::vector<uint8_t> hb(size_t(p_.n * p_.ldb));
      std::vector<float> hsb(size_t(nb_ * kb_));
      EXPECT_EQ(cudaMemcpy(hb.data(), b_.as<uint8_t>() + e * p_.n * p_.ldb, hb.size(), cudaMemcpyDeviceToHost),
                cudaSuccess);
      EXPECT_EQ(cudaMemcpy(hsb.data(), sb_.as<float>() + e * nb_ * kb_, hsb.size() * sizeof(float),
                           cudaMemcpyDeviceToHost),
                cudaSuccess);
      std::vector<double> ref(size_t(rs * p_.n));
      moekit::gemm_reference(a_rows.data(), p_.k, sa_rows.data(), hb.data(), p_.ldb, hsb.data(), rs, p_.n, p_.k,
                             ref.data());
      std::vector<float> got(size_t(rs * p_.n));
      for (int64_t i = 0; i < rs; ++i)
        for (int64_t j = 0; j < p_.n; ++j)
          got[size_t(i * p_.n + j)] = moekit::bf16_to_float(out[size_t(sel[size_t(i)] * p_.ldd + j)]);
      const double l2 = moekit::relative_l2_error(got.data(), ref.data(), got.size());
      if (!std::isnan(r.worst_expert_l2) && !(l2 <= r.worst_expert_l2)) {  // a NaN sticks
        r.worst_expert_l2 = l2;
        r.worst_expert = e;
      }
      got_all.insert(got_all.end(), got.begin(), got.end());
      ref_all.insert(ref_all.end(), ref.begin(), ref.end());
      r.rows_checked += rs;
    }
    r.rel_l2 = moekit::relative_l2_error(got_all.data(), ref_all.data(), got_all.size());
    return r;
  }

 private:
  Problem p_;
  int64_t E_ = 0, rows_ = 0, kb_ = 0, nb_ = 0;
  DeviceBuffer a_, sa_, b_, sb_, d_, counts_, offsets_;
  Counts host_counts_;
  std::vector<int32_t> host_offsets_;
};

inline std::string describe(const Problem& p, const Counts& counts) {
  std::string s = p.name + (p.masked ? " masked" : " contiguous") + " n=" + std::to_string(p.n) +
                  " k=" + std::to_string(p.k);
  if (p.masked) s += " max_m=" + std::to_string(p.max_m);
  if (p.lda || p.ldb || p.ldd)
    s += " ld(" + std::to_string(p.lda) + "," + std::to_string(p.ldb) + "," + std::to_string(p.ldd) + ")";
  return s + " " + counts_summary(counts);
}

inline void expect_good(const Check& r, const std::string& what) {
  EXPECT_EQ(r.unwritten, 0) << what << ": NaN left in valid rows";
  EXPECT_EQ(r.clobbered_rows, 0) << what << ": padding / masked rows written, first at row " << r.first_clobbered_row;
  EXPECT_EQ(r.clobbered_cols, 0) << what << ": columns [n, ldd) written";
  if (r.valid_rows > 0) {
    EXPECT_GT(r.rows_checked, 0) << what;
    EXPECT_LE(r.rel_l2, kMaxRelL2) << what << " (" << r.rows_checked << " rows checked)";  // fails on NaN
    EXPECT_LE(r.worst_expert_l2, kMaxExpertRelL2) << what << ": expert " << r.worst_expert;
  }
}

// Builds, runs and checks one problem with its own counts.
inline void run_problem(const Problem& p, uint64_t seed, unsigned* tile_counter = nullptr) {
  const std::string what = describe(p, p.counts);
  SCOPED_TRACE(what);
  Stream s;
  GroupedData g(p, seed, s);
  g.run(s, tile_counter);
  finish(s, what);
  expect_good(g.check(p.counts, seed), what);
}

// ----------------------------------------------------------------------------------------------
// Contiguous layouts
// ----------------------------------------------------------------------------------------------

struct Layout {
  std::string name;
  Counts counts;
};

inline std::vector<Layout> contiguous_layouts() {
  std::vector<Layout> v;
  v.push_back({"skewed", skewed_counts(32, 1500, 0.3, 11)});
  v.push_back({"some_empty", {0, 300, 0, 0, 129, 128, 0, 1}});
  v.push_back({"single_row", {0, 0, 1, 0, 0, 0}});
  {
    Counts c(64, 0);
    c[37] = 777;
    v.push_back({"all_to_one", c});
  }
  v.push_back({"e1", {1000}});
  v.push_back({"e1_one_row", {1}});
  v.push_back({"e384_small", uniform_counts(384, 0, 3, 12)});
  v.push_back({"thousands", {4000, 2500, 0, 1300, 3, 7000}});
  v.push_back({"one_32768", {0, 32768, 17}});
  v.push_back({"all_empty", Counts(8, 0)});
  // Random layouts: random E, each expert with its own random maximum.
  std::mt19937_64 rng(13);
  for (int i = 0; i < 3; ++i) {
    const int64_t e = 1 + int64_t(rng() % 40);
    Counts c(static_cast<size_t>(e));
    for (auto& x : c) {
      const int32_t mx = int32_t(rng() % 4 == 0 ? 0 : rng() % 600);
      x = mx ? int32_t(rng() % uint64_t(mx + 1)) : 0;
    }
    v.push_back({"random" + std::to_string(i), c});
  }
  return v;
}

struct Shape {
  int64_t n, k;
  bool strided;  // lda = k + 32, ldb = k + 16, ldd = n + 24
};

// Keeps device memory and the host reference bounded: B of every expert stays under 1 GiB, and the
// widest shape only runs with small totals.
inline bool shape_fits(const Shape& s, const Counts& c) {
  const int64_t e = int64_t(c.size()), total = total_of(c);
  if (e * s.n * s.k > (int64_t(1) << 30)) return false;
  if (s.n * s.k >= 4096 * 7168 && total > 2048) return false;
  if (s.n * s.k >= 2880 * 2880 && total > 20000) return false;
  return true;
}

const Shape kShapes[] = {{4096, 7168, false}, {256, 512, false}, {2880, 2880, false}, {200, 384, true}};

inline Problem make_problem(const std::string& name, bool masked, const Counts& c, const Shape& s, int64_t max_m = 0) {
  Problem p;
  p.name = name;
  p.masked = masked;
  p.counts = c;
  p.n = s.n;
  p.k = s.k;
  p.max_m = max_m;
  if (s.strided) {
    p.lda = s.k + 32;
    p.ldb = s.k + 16;
    p.ldd = s.n + 24;
  }
  return p;
}

}  // namespace moekit::grouped_test

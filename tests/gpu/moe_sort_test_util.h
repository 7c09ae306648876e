// Shared helpers of the moe_sort / permute_quantize GPU tests (test_moe_sort.cpp,
// test_permute_quantize.cpp): poisoned buffers with guard zones, random routings, the checks
// against the host reference.
#pragma once


#include "gpu/gpu_test_util.h"
#include "moe_test_util.h"

#include <algorithm>
#include <chrono>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>
#include <cuda_runtime_api.h>

#include "moe/moe_permute.h"
#include "moe/moe_sort_internal.h"
#include "moe/moe_sort_reference.h"
#include "moekit/error.h"
#include "moekit/grouped_gemm.h"
#include "moekit/moe_sort.h"
#include "moekit/numerics.h"
#include "moekit/quantize.h"
#include "runtime/device_buffer.h"
#include "runtime/random.h"

#include <gtest/gtest.h>

namespace moekit::sort_test {


using moekit::detail::DeviceBuffer;
using moekit::detail::MoeSortResult;
using SortPath = moekit::detail::MoeSortPath;
using Ids = std::vector<int32_t>;

inline constexpr int kPoisonByte = 0xA5;
inline constexpr int32_t kPoison32 = int32_t(0xA5A5A5A5u);
inline constexpr int64_t kGuard = 64;  // guard elements after every output buffer

using moekit::test::finish;
using moekit::test::Stream;

// Element-wise equality with the first few mismatches reported.
template <typename T>
inline void expect_equal(const std::vector<T>& want, const std::vector<T>& got, const std::string& what) {
  ASSERT_EQ(want.size(), got.size()) << what;
  int64_t bad = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    if (want[i] != got[i] && bad++ < 5) {
      ADD_FAILURE() << what << ": [" << i << "] want " << int64_t(want[i]) << " got " << int64_t(got[i]);
    }
  }
  EXPECT_EQ(bad, 0) << what << ": " << bad << " mismatching entries of " << want.size();
}

inline Ids random_ids(uint64_t seed, int64_t t, int k, int e_total) {
  std::mt19937_64 rng(seed);
  return moekit::test::random_topk_ids(rng, t, k, e_total);
}

// ----------------------------------------------------------------------------------------------
// moe_sort on the device with poisoned, guarded outputs
// ----------------------------------------------------------------------------------------------

class SortBuffers {
 public:
  // `shift` (0…3) moves permuted_to_expanded and expanded_to_permuted by that many int32 off
  // their 16-byte aligned allocation (the contract asks only for 4-byte alignment).
  SortBuffers(int64_t t, int k, int l, int shift = 0) : t_(t), k_(k), l_(l), shift_(shift) {
    n_ = t * k;
    rows_ = moekit::moe_sort_rows_bound(t, k, l);
    ws_bytes_ = moekit::moe_sort_workspace_size(t, k, l);
    ids_ = DeviceBuffer(size_t(std::max<int64_t>(n_, 1)) * 4);
    counts_ = DeviceBuffer(size_t(l + kGuard) * 4);
    offsets_ = DeviceBuffer(size_t(l + 1 + kGuard) * 4);
    p2e_ = DeviceBuffer(size_t(shift + rows_ + kGuard) * 4);
    e2p_ = DeviceBuffer(size_t(shift + n_ + kGuard) * 4);
    invalid_ = DeviceBuffer(size_t(1 + kGuard) * 4);
    ws_ = DeviceBuffer(ws_bytes_ + 1024);
  }

  int64_t rows() const { return rows_; }
  int64_t slots() const { return n_; }
  size_t workspace_bytes() const { return ws_bytes_; }
  void* workspace() const { return ws_.get(); }
  const int32_t* ids() const { return ids_.as<int32_t>(); }
  int32_t* p2e() const { return p2e_.as<int32_t>() + shift_; }
  int32_t* e2p() const { return e2p_.as<int32_t>() + shift_; }

  moekit::MoeSortBuffers outputs() const {
    moekit::MoeSortBuffers o;
    o.expert_counts = counts_.as<int32_t>();
    o.expert_offsets = offsets_.as<int32_t>();
    o.permuted_to_expanded = p2e();
    o.expanded_to_permuted = e2p();
    o.invalid_count = invalid_.as<int32_t>();
    return o;
  }

  // Asynchronous on `s`; `ids` must stay alive until the stream has run the copy.
  void upload_ids(const Ids& ids, cudaStream_t s) {
    ASSERT_EQ(ids.size(), size_t(n_));
    if (n_ > 0)
      ASSERT_EQ(cudaMemcpyAsync(ids_.get(), ids.data(), size_t(n_) * 4, cudaMemcpyHostToDevice, s), cudaSuccess);
  }

  void poison(cudaStream_t s) {
    for (DeviceBuffer* b : {&counts_, &offsets_, &p2e_, &e2p_, &invalid_, &ws_}) {
      ASSERT_EQ(cudaMemsetAsync(b->get(), kPoisonByte, b->bytes(), s), cudaSuccess);
    }
  }

  void run(int e_total, int off, cudaStream_t s, SortPath path = SortPath::kAuto) {
    moekit::detail::moe_sort_with_path(path, ids(), t_, k_, e_total, off, l_, outputs(), ws_.get(), ws_bytes_, s);
  }

  MoeSortResult download() const {
    MoeSortResult r;
    r.expert_counts = counts_.download<int32_t>(size_t(l_));
    r.expert_offsets = offsets_.download<int32_t>(size_t(l_) + 1);
    const auto p2e = p2e_.download<int32_t>(size_t(shift_ + rows_));
    r.permuted_to_expanded.assign(p2e.begin() + shift_, p2e.end());
    const auto e2p = e2p_.download<int32_t>(size_t(shift_ + n_));
    r.expanded_to_permuted.assign(e2p.begin() + shift_, e2p.end());
    r.invalid_count = invalid_.download<int32_t>(1)[0];
    return r;
  }

  // The guard zones around every output must still hold the poison; so must the workspace slack,
  // and the whole workspace when `workspace_untouched` (the single-CTA path does not use it).
  void expect_guards(const std::string& what, bool workspace_untouched = false) const {
    auto check = [&](const DeviceBuffer& b, int64_t before, int64_t used, const char* name) {
      const auto v = b.download<int32_t>(size_t(before + used + kGuard));
      for (int64_t i = 0; i < before + used + kGuard; ++i) {
        if (i == before) i += used;
        if (i < before + used + kGuard && v[size_t(i)] != kPoison32) {
          ADD_FAILURE() << what << ": " << name << " written outside its " << used << " entries, at element "
                        << i - before;
          return;
        }
      }
    };
    check(counts_, 0, l_, "expert_counts");
    check(offsets_, 0, l_ + 1, "expert_offsets");
    check(p2e_, shift_, rows_, "permuted_to_expanded");
    check(e2p_, shift_, n_, "expanded_to_permuted");
    check(invalid_, 0, 1, "invalid_count");
    const auto ws = ws_.download<uint8_t>(ws_.bytes());
    for (size_t i = workspace_untouched ? 0 : ws_bytes_; i < ws.size(); ++i) {
      if (ws[i] != kPoisonByte) {
        ADD_FAILURE() << what << ": workspace written at byte " << i
                      << (workspace_untouched ? " by the single-CTA path" : " past workspace_size");
        return;
      }
    }
  }

 private:
  int64_t t_ = 0, n_ = 0, rows_ = 0;
  int k_ = 0, l_ = 0, shift_ = 0;
  size_t ws_bytes_ = 0;
  DeviceBuffer ids_, counts_, offsets_, p2e_, e2p_, invalid_, ws_;
};

inline void expect_same_result(const MoeSortResult& want, const MoeSortResult& got, const std::string& what) {
  expect_equal(want.expert_counts, got.expert_counts, what + " expert_counts");
  expect_equal(want.expert_offsets, got.expert_offsets, what + " expert_offsets");
  expect_equal(want.permuted_to_expanded, got.permuted_to_expanded, what + " permuted_to_expanded");
  expect_equal(want.expanded_to_permuted, got.expanded_to_permuted, what + " expanded_to_permuted");
  EXPECT_EQ(want.invalid_count, got.invalid_count) << what << " invalid_count";
}

inline const char* path_name(SortPath p) {
  switch (p) {
    case SortPath::kSingleCta:
      return "single-CTA";
    case SortPath::kRadix:
      return "radix";
    default:
      return "auto";
  }
}

// Runs moe_sort for one slice into poisoned buffers and compares everything with the reference,
// once per path: the default choice, the radix path, and the single-CTA path where it is eligible
// (so the two implementations are also compared with each other, entry by entry). Returns the
// default path's result.
inline MoeSortResult sort_and_check(const Ids& ids, int64_t t, int k, int e_total, int off, int l, cudaStream_t s,
                             const std::string& what, int shift = 0) {
  const MoeSortResult want = moekit::detail::moe_sort_reference(ids.data(), t, k, e_total, off, l);
  const bool single = moekit::detail::moe_sort_single_cta(t, k, l);
  SortBuffers b(t, k, l, shift);
  MoeSortResult results[3];
  int runs = 0;
  for (SortPath path : {SortPath::kAuto, SortPath::kRadix, SortPath::kSingleCta}) {
    if (path == SortPath::kSingleCta && !single) continue;
    const std::string w = what + " [" + path_name(path) + (shift ? " shift " + std::to_string(shift) : "") + "]";
    b.poison(s);
    b.upload_ids(ids, s);
    b.run(e_total, off, s, path);
    finish(s, w);
    results[runs] = b.download();
    expect_same_result(want, results[runs], w);
    const bool untouched = path == SortPath::kSingleCta || (path == SortPath::kAuto && single);
    b.expect_guards(w, untouched);
    ++runs;
  }
  for (int i = 1; i < runs; ++i) expect_same_result(results[0], results[i], what + " paths agree");
  return results[0];
}

inline std::string case_name(int64_t t, int k, int e) {
  return "T=" + std::to_string(t) + " k=" + std::to_string(k) + " E=" + std::to_string(e);
}

inline std::vector<uint16_t> make_x(int64_t t, int64_t h, uint64_t seed) {
  std::vector<uint16_t> x(size_t(t * h));
  for (int64_t r = 0; r < t; ++r) {
    for (int64_t c = 0; c < h; ++c) {
      const uint64_t i = uint64_t(r * h + c);
      const int e = int((r * 7 + (c / 128) * 13 + int64_t(seed)) % 40) - 20;
      const float u = moekit::detail::hash_uniform(seed, i) * 2.0f - 1.0f;
      uint16_t b = moekit::bf16_from_float(std::ldexp(u, e));
      if (moekit::detail::hash_uniform(seed ^ 0x9E3779B97F4A7C15ull, i) < 0.01f) b = 0x0000;
      x[size_t(i)] = b;
    }
  }
  if (t > 3) {
    x[size_t(3 * h + 5)] = 0x7FC0;                          // NaN
    x[size_t(3 * h + std::min<int64_t>(200, h - 1))] = 0x7F80;  // +Inf
  }
  if (t > 5) x[size_t(5 * h + h - 1)] = 0xFF80;  // -Inf in the last (possibly partial) block
  return x;
}

inline std::vector<float> to_float(const std::vector<uint16_t>& b) {
  std::vector<float> f(b.size());
  for (size_t i = 0; i < b.size(); ++i) f[i] = moekit::bf16_to_float(b[i]);
  return f;
}

inline std::vector<uint32_t> float_bits(const std::vector<float>& v) {
  std::vector<uint32_t> u(v.size());
  std::memcpy(u.data(), v.data(), v.size() * 4);
  return u;
}

// Device buffers of permute_quantize (poisoned, with guards after a_perm and sa_perm).
struct PermuteBuffers {
  PermuteBuffers(int64_t t, int64_t h, int64_t rows) : t(t), h(h), rows(rows) {
    kb = moekit::ceil_div(h, moekit::kQuantBlock);
    sfa = moekit::sfa_physical_size(rows, h);
    x = DeviceBuffer(size_t(std::max<int64_t>(t * h, 8)) * 2);
    xq = DeviceBuffer(size_t(std::max<int64_t>(t * h, 16)));
    sx = DeviceBuffer(size_t(std::max<int64_t>(t * kb, 4)) * 4);
    a = DeviceBuffer(size_t(rows * h + kGuard));
    sa = DeviceBuffer(size_t(sfa + kGuard) * 4);
  }
  void poison(cudaStream_t s) {
    for (DeviceBuffer* b : {&xq, &sx, &a, &sa})
      ASSERT_EQ(cudaMemsetAsync(b->get(), kPoisonByte, b->bytes(), s), cudaSuccess);
  }
  void run(int k, const int32_t* p2e, bool ue8m0, cudaStream_t s) {
    moekit::permute_quantize(x.get(), t, h, k, p2e, rows, xq.get(), sx.as<float>(), a.get(), sa.as<float>(), ue8m0,
                             s);
  }
  void run_by_token(int k, const int32_t* e2p, bool ue8m0, cudaStream_t s) {
    moekit::permute_quantize_by_token(x.get(), t, h, k, e2p, rows, a.get(), sa.as<float>(), ue8m0, s);
  }
  int64_t t, h, rows, kb = 0, sfa = 0;
  DeviceBuffer x, xq, sx, a, sa;
};

// Checks xq / sx against the host quantizer and a_perm / sa_perm (whole buffers, guards included)
// against permute_quantize_reference on `p2e`.
inline void check_permute(const PermuteBuffers& b, const std::vector<float>& xf, int k, const std::vector<int32_t>& p2e,
                   bool ue8m0, const std::string& what) {
  const int64_t t = b.t, h = b.h, kb = b.kb;
  std::vector<uint8_t> q_ref(size_t(t * h));
  std::vector<float> s_ref(size_t(t * kb));
  if (t > 0) moekit::quantize_1x128(xf.data(), t, h, h, q_ref.data(), h, s_ref.data(), ue8m0);
  expect_equal(q_ref, b.xq.download<uint8_t>(size_t(t * h)), what + " xq");
  expect_equal(float_bits(s_ref), b.sx.download<uint32_t>(size_t(t * kb)), what + " sx");

  std::vector<uint8_t> a_ref(size_t(b.rows * h + kGuard), uint8_t(kPoisonByte));
  std::vector<float> sa_ref(size_t(b.sfa + kGuard));
  std::memset(sa_ref.data(), kPoisonByte, sa_ref.size() * 4);
  moekit::detail::permute_quantize_reference(xf.data(), t, h, k, p2e, ue8m0, a_ref.data(), sa_ref.data());
  expect_equal(a_ref, b.a.download<uint8_t>(a_ref.size()), what + " a_perm");
  expect_equal(float_bits(sa_ref), b.sa.download<uint32_t>(sa_ref.size()), what + " sa_perm");
}

// Checks a_perm / sa_perm of permute_quantize_by_token (whole buffers, guards included) against
// permute_quantize_by_token_reference on `e2p`: rows not named by e2p keep the poison.
inline void check_by_token(const PermuteBuffers& b, const std::vector<float>& xf, int k,
                           const std::vector<int32_t>& e2p, bool ue8m0, const std::string& what) {
  std::vector<uint8_t> a_ref(size_t(b.rows * b.h + kGuard), uint8_t(kPoisonByte));
  std::vector<float> sa_ref(size_t(b.sfa + kGuard));
  std::memset(sa_ref.data(), kPoisonByte, sa_ref.size() * 4);
  moekit::detail::permute_quantize_by_token_reference(xf.data(), b.t, b.h, k, e2p, b.rows, ue8m0, a_ref.data(),
                                                      sa_ref.data());
  expect_equal(a_ref, b.a.download<uint8_t>(a_ref.size()), what + " a_perm");
  expect_equal(float_bits(sa_ref), b.sa.download<uint32_t>(sa_ref.size()), what + " sa_perm");
}

}  // namespace moekit::sort_test

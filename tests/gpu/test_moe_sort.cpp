// GPU tests of moe_sort and permute_quantize (include/moekit/moe_sort.h, SPEC §3–4) against the
// host reference (src/moe/moe_sort_reference.h), with exact equality of every output buffer:
//
//  * every output (and the workspace) poisoned with 0xA5 bytes before each run, and followed by a
//    guard zone that must keep the poison (catches writes past the documented sizes);
//  * T ∈ {0, 1, 7, 1000, 4096} × k ∈ {1, 2, 8} × E ∈ {8, 64, 256, 384}, random ids with -1 slots,
//    invalid ids and experts repeated inside a token; the full slice, its two halves (which must
//    partition the kept slots of the full run) and an odd slice; all tokens on one expert, all
//    dropped, all invalid, a large run (multi-tile radix sort);
//  * invalid_count is set, not accumulated, across calls on the same buffers;
//  * a CUDA graph of moe_sort + permute_quantize captured once and replayed with different ids
//    and activations;
//  * permute_quantize: xq / sx bit for bit the host quantize_1x128 and the device
//    quantize_act_1x128; a_perm / sa_perm bit for bit permute_quantize_reference on the GPU's
//    permuted_to_expanded, padding rows (and the scale padding) untouched, for
//    H ∈ {2048, 2880, 7168} with NaN / Inf in some tokens; rows whose index is -1 or out of range
//    are skipped.
#include <gtest/gtest.h>

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
#include <vector>
#include <cuda_runtime_api.h>

#include "moe/moe_sort_reference.h"
#include "moekit/error.h"
#include "moekit/grouped_gemm.h"
#include "moekit/moe_sort.h"
#include "moekit/numerics.h"
#include "moekit/quantize.h"
#include "runtime/device_buffer.h"
#include "runtime/random.h"

namespace {

using moekit::detail::DeviceBuffer;
using moekit::detail::MoeSortResult;
using Ids = std::vector<int32_t>;

constexpr int kPoisonByte = 0xA5;
constexpr int32_t kPoison32 = int32_t(0xA5A5A5A5u);
constexpr int64_t kGuard = 64;  // guard elements after every output buffer

using moekit::test::finish;
using moekit::test::Stream;

// Element-wise equality with the first few mismatches reported.
template <typename T>
void expect_equal(const std::vector<T>& want, const std::vector<T>& got, const std::string& what) {
  ASSERT_EQ(want.size(), got.size()) << what;
  int64_t bad = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    if (want[i] != got[i] && bad++ < 5) {
      ADD_FAILURE() << what << ": [" << i << "] want " << int64_t(want[i]) << " got " << int64_t(got[i]);
    }
  }
  EXPECT_EQ(bad, 0) << what << ": " << bad << " mismatching entries of " << want.size();
}

Ids random_ids(uint64_t seed, int64_t t, int k, int e_total) {
  std::mt19937_64 rng(seed);
  return moekit::test::random_topk_ids(rng, t, k, e_total);
}

// ----------------------------------------------------------------------------------------------
// moe_sort on the device with poisoned, guarded outputs
// ----------------------------------------------------------------------------------------------

class SortBuffers {
 public:
  SortBuffers(int64_t t, int k, int l) : t_(t), k_(k), l_(l) {
    n_ = t * k;
    rows_ = moekit::moe_sort_rows_bound(t, k, l);
    ws_bytes_ = moekit::moe_sort_workspace_size(t, k, l);
    ids_ = DeviceBuffer(size_t(std::max<int64_t>(n_, 1)) * 4);
    counts_ = DeviceBuffer(size_t(l + kGuard) * 4);
    offsets_ = DeviceBuffer(size_t(l + 1 + kGuard) * 4);
    p2e_ = DeviceBuffer(size_t(rows_ + kGuard) * 4);
    e2p_ = DeviceBuffer(size_t(n_ + kGuard) * 4);
    invalid_ = DeviceBuffer(size_t(1 + kGuard) * 4);
    ws_ = DeviceBuffer(ws_bytes_ + 1024);
  }

  int64_t rows() const { return rows_; }
  int64_t slots() const { return n_; }
  size_t workspace_bytes() const { return ws_bytes_; }
  void* workspace() const { return ws_.get(); }
  const int32_t* ids() const { return ids_.as<int32_t>(); }
  int32_t* p2e() const { return p2e_.as<int32_t>(); }

  moekit::MoeSortBuffers outputs() const {
    moekit::MoeSortBuffers o;
    o.expert_counts = counts_.as<int32_t>();
    o.expert_offsets = offsets_.as<int32_t>();
    o.permuted_to_expanded = p2e_.as<int32_t>();
    o.expanded_to_permuted = e2p_.as<int32_t>();
    o.invalid_count = invalid_.as<int32_t>();
    return o;
  }

  // Asynchronous on `s`; `ids` must stay alive until the stream has run the copy.
  void upload_ids(const Ids& ids, cudaStream_t s) {
    ASSERT_EQ(ids.size(), size_t(n_));
    if (n_ > 0) ASSERT_EQ(cudaMemcpyAsync(ids_.get(), ids.data(), size_t(n_) * 4, cudaMemcpyHostToDevice, s), cudaSuccess);
  }

  void poison(cudaStream_t s) {
    for (DeviceBuffer* b : {&counts_, &offsets_, &p2e_, &e2p_, &invalid_, &ws_}) {
      ASSERT_EQ(cudaMemsetAsync(b->get(), kPoisonByte, b->bytes(), s), cudaSuccess);
    }
  }

  void run(int e_total, int off, cudaStream_t s) {
    moekit::moe_sort(ids(), t_, k_, e_total, off, l_, outputs(), ws_.get(), ws_bytes_, s);
  }

  MoeSortResult download() const {
    MoeSortResult r;
    r.expert_counts = counts_.download<int32_t>(size_t(l_));
    r.expert_offsets = offsets_.download<int32_t>(size_t(l_) + 1);
    r.permuted_to_expanded = p2e_.download<int32_t>(size_t(rows_));
    r.expanded_to_permuted = e2p_.download<int32_t>(size_t(n_));
    r.invalid_count = invalid_.download<int32_t>(1)[0];
    return r;
  }

  // The guard zones after every output and the workspace slack must still hold the poison.
  void expect_guards(const std::string& what) const {
    auto check = [&](const DeviceBuffer& b, int64_t used, const char* name) {
      const auto v = b.download<int32_t>(size_t(used + kGuard));
      for (int64_t i = used; i < used + kGuard; ++i) {
        if (v[size_t(i)] != kPoison32) {
          ADD_FAILURE() << what << ": " << name << " written past its end at element " << i;
          return;
        }
      }
    };
    check(counts_, l_, "expert_counts");
    check(offsets_, l_ + 1, "expert_offsets");
    check(p2e_, rows_, "permuted_to_expanded");
    check(e2p_, n_, "expanded_to_permuted");
    check(invalid_, 1, "invalid_count");
    const auto ws = ws_.download<uint8_t>(ws_.bytes());
    for (size_t i = ws_bytes_; i < ws.size(); ++i) {
      if (ws[i] != kPoisonByte) {
        ADD_FAILURE() << what << ": workspace written past workspace_size at byte " << i;
        return;
      }
    }
  }

 private:
  int64_t t_ = 0, n_ = 0, rows_ = 0;
  int k_ = 0, l_ = 0;
  size_t ws_bytes_ = 0;
  DeviceBuffer ids_, counts_, offsets_, p2e_, e2p_, invalid_, ws_;
};

void expect_same_result(const MoeSortResult& want, const MoeSortResult& got, const std::string& what) {
  expect_equal(want.expert_counts, got.expert_counts, what + " expert_counts");
  expect_equal(want.expert_offsets, got.expert_offsets, what + " expert_offsets");
  expect_equal(want.permuted_to_expanded, got.permuted_to_expanded, what + " permuted_to_expanded");
  expect_equal(want.expanded_to_permuted, got.expanded_to_permuted, what + " expanded_to_permuted");
  EXPECT_EQ(want.invalid_count, got.invalid_count) << what << " invalid_count";
}

// Runs moe_sort for one slice into poisoned buffers and compares everything with the reference.
MoeSortResult sort_and_check(const Ids& ids, int64_t t, int k, int e_total, int off, int l, cudaStream_t s,
                             const std::string& what) {
  SortBuffers b(t, k, l);
  b.poison(s);
  b.upload_ids(ids, s);
  b.run(e_total, off, s);
  finish(s, what);
  const MoeSortResult got = b.download();
  const MoeSortResult want = moekit::detail::moe_sort_reference(ids.data(), t, k, e_total, off, l);
  expect_same_result(want, got, what);
  b.expect_guards(what);
  return got;
}

std::string case_name(int64_t t, int k, int e) {
  return "T=" + std::to_string(t) + " k=" + std::to_string(k) + " E=" + std::to_string(e);
}

TEST(MoeSortGpu, MatchesReferenceWithSlices) {
  Stream s;
  uint64_t seed = 1;
  for (int64_t t : {0, 1, 7, 1000, 4096}) {
    for (int k : {1, 2, 8}) {
      for (int e : {8, 64, 256, 384}) {
        const std::string what = case_name(t, k, e);
        const Ids ids = random_ids(seed++, t, k, e);
        const auto full = sort_and_check(ids, t, k, e, 0, e, s, what + " full");
        const int h = e / 2;
        const auto lo = sort_and_check(ids, t, k, e, 0, h, s, what + " low half");
        const auto hi = sort_and_check(ids, t, k, e, h, e - h, s, what + " high half");
        sort_and_check(ids, t, k, e, 3, e / 4 + 1, s, what + " odd slice");
        if (HasFailure()) return;
        // The halves partition the kept slots of the full run, and their counts join into its.
        for (int64_t i = 0; i < t * k; ++i) {
          const int in_halves =
              (lo.expanded_to_permuted[size_t(i)] >= 0) + (hi.expanded_to_permuted[size_t(i)] >= 0);
          ASSERT_EQ(in_halves, full.expanded_to_permuted[size_t(i)] >= 0 ? 1 : 0) << what << " slot " << i;
        }
        std::vector<int32_t> joined(lo.expert_counts);
        joined.insert(joined.end(), hi.expert_counts.begin(), hi.expert_counts.end());
        EXPECT_EQ(joined, full.expert_counts) << what;
      }
    }
  }
}

TEST(MoeSortGpu, DegenerateRoutings) {
  Stream s;
  const int64_t t = 4096;
  const int k = 8, e = 256;
  const int64_t n = t * k;
  sort_and_check(Ids(size_t(n), e - 1), t, k, e, 0, e, s, "all on the last expert");
  sort_and_check(Ids(size_t(n), 0), t, k, e, 0, e, s, "all on expert 0");
  sort_and_check(Ids(size_t(n), 17), t, k, e, 16, 8, s, "all on one expert of a slice");
  sort_and_check(Ids(size_t(n), 17), t, k, e, 128, 128, s, "all outside the slice");
  sort_and_check(Ids(size_t(n), -1), t, k, e, 0, e, s, "all -1");
  sort_and_check(Ids(size_t(n), e), t, k, e, 0, e, s, "all invalid");
  sort_and_check(Ids{5}, 1, 1, 8, 0, 8, s, "one slot");
  sort_and_check(Ids{5}, 1, 1, 8, 5, 1, s, "one slot, one local expert");
  // One expert per slot, every expert used: E = k.
  Ids per_slot(size_t(64 * 8));
  for (size_t i = 0; i < per_slot.size(); ++i) per_slot[i] = int32_t(i % 8);
  sort_and_check(per_slot, 64, 8, 8, 0, 8, s, "slot j on expert j");
}

TEST(MoeSortGpu, LargeRuns) {
  // Several tiles and passes of the radix sort (1 pass for 8 experts, 2 for 384).
  Stream s;
  const int64_t t = 65536;
  for (int e : {8, 384}) {
    const Ids ids = random_ids(1000 + uint64_t(e), t, 8, e);
    sort_and_check(ids, t, 8, e, 0, e, s, case_name(t, 8, e));
    sort_and_check(ids, t, 8, e, e / 2, e - e / 2, s, case_name(t, 8, e) + " high half");
  }
}

TEST(MoeSortGpu, RepeatedCallsSetNotAccumulate) {
  // Same buffers, no re-poisoning: the second call must overwrite everything of the first,
  // invalid_count and the counts included (not add to them).
  Stream s;
  const int64_t t = 1000;
  const int k = 8, e = 64;
  SortBuffers b(t, k, e);
  b.poison(s);
  Ids first = random_ids(77, t, k, e);
  for (size_t i = 0; i < first.size(); i += 3) first[i] = e + 1;  // many invalid ids
  const Ids second = random_ids(78, t, k, e);
  b.upload_ids(first, s);
  b.run(e, 0, s);
  finish(s, "first call");
  expect_same_result(moekit::detail::moe_sort_reference(first.data(), t, k, e, 0, e), b.download(), "first call");
  b.upload_ids(second, s);
  b.run(e, 0, s);
  finish(s, "second call");
  expect_same_result(moekit::detail::moe_sort_reference(second.data(), t, k, e, 0, e), b.download(), "second call");
  b.expect_guards("second call");
}

TEST(MoeSortGpu, WorkspaceSizeAndValidation) {
  // The workspace size depends only on (T, k, L).
  EXPECT_EQ(moekit::moe_sort_workspace_size(1000, 8, 64), moekit::moe_sort_workspace_size(1000, 8, 64));
  EXPECT_GT(moekit::moe_sort_workspace_size(0, 8, 64), size_t(0));
  Stream s;
  SortBuffers b(7, 2, 8);
  moekit::MoeSortBuffers o = b.outputs();
  try {
    moekit::moe_sort(b.ids(), 7, 2, 8, 0, 8, o, b.workspace(), b.workspace_bytes() - 1, s);
    ADD_FAILURE() << "a workspace one byte too small was accepted";
  } catch (const moekit::Error& err) {
    EXPECT_EQ(err.code(), moekit::ErrorCode::kInvalidArgument) << err.what();
  }
}

// ----------------------------------------------------------------------------------------------
// permute_quantize
// ----------------------------------------------------------------------------------------------

// bf16 activations: each (token, 128-column block) gets its own magnitude (2^-20 … 2^19), with a
// few zeros; token 3 carries a NaN and an Inf, token 5 a -Inf (they must stay in their own rows).
std::vector<uint16_t> make_x(int64_t t, int64_t h, uint64_t seed) {
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

std::vector<float> to_float(const std::vector<uint16_t>& b) {
  std::vector<float> f(b.size());
  for (size_t i = 0; i < b.size(); ++i) f[i] = moekit::bf16_to_float(b[i]);
  return f;
}

std::vector<uint32_t> float_bits(const std::vector<float>& v) {
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
    for (DeviceBuffer* b : {&xq, &sx, &a, &sa}) ASSERT_EQ(cudaMemsetAsync(b->get(), kPoisonByte, b->bytes(), s), cudaSuccess);
  }
  void run(int k, const int32_t* p2e, bool ue8m0, cudaStream_t s) {
    moekit::permute_quantize(x.get(), t, h, k, p2e, rows, xq.get(), sx.as<float>(), a.get(), sa.as<float>(), ue8m0,
                             s);
  }
  int64_t t, h, rows, kb = 0, sfa = 0;
  DeviceBuffer x, xq, sx, a, sa;
};

// Checks xq / sx against the host quantizer and a_perm / sa_perm (whole buffers, guards included)
// against permute_quantize_reference on `p2e`.
void check_permute(const PermuteBuffers& b, const std::vector<float>& xf, int k, const std::vector<int32_t>& p2e,
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

TEST(PermuteQuantize, MatchesHostQuantization) {
  Stream s;
  struct Case {
    int64_t t, h;
    int k, e;
  };
  std::vector<Case> cases;
  for (int64_t h : {2048, 2880, 7168}) {
    for (int64_t t : {1, 7, 1000}) cases.push_back({t, h, 8, 64});
  }
  cases.push_back({4096, 2880, 8, 256});
  cases.push_back({300, 2880, 1, 8});
  uint64_t seed = 11;
  for (const Case& c : cases) {
    for (bool ue8m0 : {false, true}) {
      const std::string what = case_name(c.t, c.k, c.e) + " H=" + std::to_string(c.h) + (ue8m0 ? " ue8m0" : " fp32");
      const Ids ids = random_ids(seed++, c.t, c.k, c.e);
      SortBuffers sb(c.t, c.k, c.e);
      PermuteBuffers pb(c.t, c.h, sb.rows());
      const std::vector<uint16_t> xb = make_x(c.t, c.h, seed++);
      pb.x.upload(xb);
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);  // the upload ran on the legacy stream
      sb.poison(s);
      pb.poison(s);
      sb.upload_ids(ids, s);
      sb.run(c.e, 0, s);
      pb.run(c.k, sb.p2e(), ue8m0, s);
      finish(s, what);
      const MoeSortResult got = sb.download();
      expect_same_result(moekit::detail::moe_sort_reference(ids.data(), c.t, c.k, c.e, 0, c.e), got, what);
      check_permute(pb, to_float(xb), c.k, got.permuted_to_expanded, ue8m0, what);

      // The scratch quantization is bit for bit the public quantize_act_1x128.
      DeviceBuffer q2(size_t(c.t * c.h)), s2(size_t(moekit::sfa_physical_size(c.t, c.h)) * 4);
      moekit::quantize_act_1x128(pb.x.get(), c.h, c.t, c.h, q2.get(), c.h, s2.as<float>(), ue8m0, s);
      finish(s, what + " quantize_act_1x128");
      expect_equal(q2.download<uint8_t>(size_t(c.t * c.h)), pb.xq.download<uint8_t>(size_t(c.t * c.h)),
                   what + " xq vs quantize_act_1x128");
      const auto s2_phys = s2.download<float>(size_t(moekit::sfa_physical_size(c.t, c.h)));
      std::vector<float> s2_log(size_t(c.t * pb.kb));
      moekit::sfa_physical_to_logical(s2_phys.data(), c.t, c.h, s2_log.data());
      expect_equal(float_bits(s2_log), pb.sx.download<uint32_t>(size_t(c.t * pb.kb)),
                   what + " sx vs quantize_act_1x128");
      if (HasFailure()) return;
    }
  }
}

TEST(PermuteQuantize, SkipsPaddingAndOutOfRangeRows) {
  // A hand-made permuted_to_expanded over 37 rows (sfa_ld = 40: three scale padding entries per
  // K block): -1, indices >= T * k and other negatives are all skipped, and a token may appear in
  // any number of rows.
  Stream s;
  const int64_t t = 5, h = 2880;
  const int k = 3;
  std::vector<int32_t> p2e(37, -1);
  p2e[0] = 14;  // token 4
  p2e[1] = 0;   // token 0
  p2e[2] = 15;  // == T * k: out of range
  p2e[3] = 2;   // token 0 again
  p2e[7] = INT32_MAX;
  p2e[8] = -7;
  p2e[20] = 9;  // token 3 (NaN / Inf)
  p2e[36] = 7;  // token 2, last row
  DeviceBuffer dp2e(p2e.size() * 4);
  dp2e.upload(p2e);
  PermuteBuffers pb(t, h, int64_t(p2e.size()));
  const std::vector<uint16_t> xb = make_x(t, h, 5);
  pb.x.upload(xb);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  for (bool ue8m0 : {false, true}) {
    pb.poison(s);
    pb.run(k, dp2e.as<int32_t>(), ue8m0, s);
    finish(s, "hand rows");
    check_permute(pb, to_float(xb), k, p2e, ue8m0, ue8m0 ? "hand rows ue8m0" : "hand rows fp32");
  }
}

TEST(PermuteQuantize, ZeroTokensWritesNothing) {
  Stream s;
  SortBuffers sb(0, 8, 16);
  PermuteBuffers pb(0, 2048, sb.rows());
  sb.poison(s);
  pb.poison(s);
  sb.run(64, 0, s);
  pb.run(8, sb.p2e(), false, s);
  finish(s, "T = 0");
  expect_same_result(moekit::detail::moe_sort_reference(nullptr, 0, 8, 64, 0, 16), sb.download(), "T = 0");
  const auto a = pb.a.download<uint8_t>(pb.a.bytes());
  EXPECT_TRUE(std::all_of(a.begin(), a.end(), [](uint8_t v) { return v == kPoisonByte; }));
  sb.expect_guards("T = 0");
}

// ----------------------------------------------------------------------------------------------
// CUDA graph: capture once, replay with new ids and activations
// ----------------------------------------------------------------------------------------------

TEST(MoeSortGpu, CudaGraphReplayFollowsNewIds) {
  Stream s;
  const int64_t t = 1000, h = 2880;
  const int k = 8, e = 256, off = 64, l = 128;
  SortBuffers sb(t, k, l);
  PermuteBuffers pb(t, h, sb.rows());
  // Warm-up outside the capture (first-use initialization of cub and the kernels).
  const Ids warm = random_ids(1, t, k, e);
  sb.poison(s);
  sb.upload_ids(warm, s);
  sb.run(e, off, s);
  finish(s, "warm-up");

  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal), cudaSuccess);
  try {
    sb.run(e, off, s);
    pb.run(k, sb.p2e(), false, s);
  } catch (const moekit::Error& err) {
    cudaStreamEndCapture(s, &graph);
    FAIL() << "capture: " << err.what();
  }
  ASSERT_EQ(cudaStreamEndCapture(s, &graph), cudaSuccess);
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);

  std::vector<int32_t> previous;
  for (int replay = 0; replay < 3; ++replay) {
    const std::string what = "replay " + std::to_string(replay);
    Ids ids = random_ids(500 + uint64_t(replay), t, k, e);
    if (replay == 2) std::fill(ids.begin(), ids.begin() + 4000, off + 5);  // a heavy expert
    const std::vector<uint16_t> xb = make_x(t, h, 900 + uint64_t(replay));
    sb.poison(s);
    pb.poison(s);
    sb.upload_ids(ids, s);
    ASSERT_EQ(cudaMemcpyAsync(pb.x.get(), xb.data(), xb.size() * 2, cudaMemcpyHostToDevice, s), cudaSuccess);
    ASSERT_EQ(cudaGraphLaunch(exec, s), cudaSuccess);
    finish(s, what);
    const MoeSortResult got = sb.download();
    expect_same_result(moekit::detail::moe_sort_reference(ids.data(), t, k, e, off, l), got, what);
    sb.expect_guards(what);
    check_permute(pb, to_float(xb), k, got.permuted_to_expanded, false, what);
    EXPECT_NE(got.permuted_to_expanded, previous) << what << ": the replay did not follow the new ids";
    previous = got.permuted_to_expanded;
  }
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
}

}  // namespace

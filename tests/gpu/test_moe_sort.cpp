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
//  * both moe_sort paths (single-CTA for T * k <= 4096 and L <= 1024, radix otherwise) run on every
//    case where eligible, through the test hook moekit::detail::moe_sort_with_path; they must each
//    equal the reference (hence each other), the single-CTA path must not touch the workspace,
//    and edge cases (T = 0, T = 1, k = 1, E = 1, INT32_MIN/MAX, n = 4096 / 4097, L = 1024 / 1025,
//    maps only 4-byte aligned) are covered explicitly;
//  * permute_quantize_by_token: every byte of a_perm / sa_perm equal to the old two-kernel
//    permute_quantize and to its host reference (H ∈ {16, 144, 2048, 2880, 7168}, NaN / Inf, k up
//    to 40, ue8m0), also in the MoE forward's form (scales once per token, then gathered by row:
//    detail::TokenScales), dropped / out-of-range slots skipped; a graph of the single-CTA moe_sort +
//    permute_quantize_by_token has two kernel nodes and follows new ids on replay;
//  * MoeSortTiming.DISABLED_PrintLatencies prints µs per call of both paths of each stage;
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

namespace {

using moekit::detail::DeviceBuffer;
using moekit::detail::MoeSortResult;
using SortPath = moekit::detail::MoeSortPath;
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
    if (n_ > 0) ASSERT_EQ(cudaMemcpyAsync(ids_.get(), ids.data(), size_t(n_) * 4, cudaMemcpyHostToDevice, s), cudaSuccess);
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

void expect_same_result(const MoeSortResult& want, const MoeSortResult& got, const std::string& what) {
  expect_equal(want.expert_counts, got.expert_counts, what + " expert_counts");
  expect_equal(want.expert_offsets, got.expert_offsets, what + " expert_offsets");
  expect_equal(want.permuted_to_expanded, got.permuted_to_expanded, what + " permuted_to_expanded");
  expect_equal(want.expanded_to_permuted, got.expanded_to_permuted, what + " expanded_to_permuted");
  EXPECT_EQ(want.invalid_count, got.invalid_count) << what << " invalid_count";
}

const char* path_name(SortPath p) {
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
MoeSortResult sort_and_check(const Ids& ids, int64_t t, int k, int e_total, int off, int l, cudaStream_t s,
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
  // invalid_count and the counts included (not add to them). Once per path (T = 500, k = 8 is
  // n = 4000: single-CTA by default).
  Stream s;
  const int k = 8, e = 64;
  for (int64_t t : {1000, 500}) {
    for (SortPath path : {SortPath::kAuto, SortPath::kRadix, SortPath::kSingleCta}) {
      if (path == SortPath::kSingleCta && !moekit::detail::moe_sort_single_cta(t, k, e)) continue;
      const std::string what = "T=" + std::to_string(t) + " " + path_name(path);
      SortBuffers b(t, k, e);
      b.poison(s);
      Ids first = random_ids(77, t, k, e);
      for (size_t i = 0; i < first.size(); i += 3) first[i] = e + 1;  // many invalid ids
      const Ids second = random_ids(78, t, k, e);
      b.upload_ids(first, s);
      b.run(e, 0, s, path);
      finish(s, what + " first call");
      expect_same_result(moekit::detail::moe_sort_reference(first.data(), t, k, e, 0, e), b.download(),
                         what + " first call");
      b.upload_ids(second, s);
      b.run(e, 0, s, path);
      finish(s, what + " second call");
      expect_same_result(moekit::detail::moe_sort_reference(second.data(), t, k, e, 0, e), b.download(),
                         what + " second call");
      b.expect_guards(what + " second call");
    }
  }
}

TEST(MoeSortGpu, SingleCtaPathChoice) {
  // The rule: T * k <= 4096 and local_count <= 1024, from the sizes only.
  using moekit::detail::moe_sort_single_cta;
  EXPECT_TRUE(moe_sort_single_cta(0, 8, 256));
  EXPECT_TRUE(moe_sort_single_cta(1, 8, 256));
  EXPECT_TRUE(moe_sort_single_cta(512, 8, 256));
  EXPECT_TRUE(moe_sort_single_cta(4096, 1, 1024));
  EXPECT_FALSE(moe_sort_single_cta(4097, 1, 8));
  EXPECT_FALSE(moe_sort_single_cta(513, 8, 256));
  EXPECT_FALSE(moe_sort_single_cta(1, 8, 1025));
  // Forcing it where it is not eligible is an argument error, raised before any launch.
  Stream s;
  for (auto [t, k, l] : {std::tuple<int64_t, int, int>{4097, 1, 8}, {1, 1, 1025}}) {
    SortBuffers b(t, k, l);
    try {
      b.run(l, 0, s, SortPath::kSingleCta);
      ADD_FAILURE() << "single-CTA path forced for T=" << t << " k=" << k << " L=" << l;
    } catch (const moekit::Error& err) {
      EXPECT_EQ(err.code(), moekit::ErrorCode::kInvalidArgument) << err.what();
    }
  }
}

TEST(MoeSortGpu, SingleCtaMatchesRadixEdgeCases) {
  // Every case runs the default path, the radix path and (where eligible) the single-CTA path on
  // poisoned buffers; all must equal the reference, hence each other. Shifts 1-3 misalign the
  // maps so the -1 fill's scalar head and tail run.
  Stream s;
  const int32_t kMin = INT32_MIN, kMax = INT32_MAX;
  // T = 0: counts / offsets zero, every row -1 (helper CTAs only), for L = 1, 256, 1024.
  for (int l : {1, 256, 1024}) {
    for (int shift : {0, 3}) sort_and_check(Ids{}, 0, 8, 1024, 0, l, s, "T=0 L=" + std::to_string(l), shift);
  }
  // T = 1, DeepSeek-V3 routing (k = 8 of 256), full and expert-parallel slices.
  for (int shift : {0, 1, 2, 3}) {
    const Ids one = {3, 200, 17, 255, 0, 128, 64, 65};
    sort_and_check(one, 1, 8, 256, 0, 256, s, "T=1 DSv3 full", shift);
    sort_and_check(one, 1, 8, 256, 0, 128, s, "T=1 DSv3 low half", shift);
    sort_and_check(one, 1, 8, 256, 128, 128, s, "T=1 DSv3 high half", shift);
    sort_and_check(one, 1, 8, 256, 3, 65, s, "T=1 DSv3 odd slice", shift);
    sort_and_check(Ids{7, 7, 7, -1, 7, kMin, 7, kMax}, 1, 8, 256, 0, 256, s, "T=1 duplicates, -1, invalid", shift);
  }
  // k = 1 and E = 1.
  for (int32_t id : {0, -1, 1, -2, kMin, kMax}) {
    sort_and_check(Ids{id}, 1, 1, 1, 0, 1, s, "E=1 T=1 id " + std::to_string(id));
  }
  sort_and_check(random_ids(3, 1000, 1, 1), 1000, 1, 1, 0, 1, s, "E=1 T=1000 k=1");
  sort_and_check(random_ids(4, 4096, 1, 8), 4096, 1, 8, 0, 8, s, "E=8 T=4096 k=1");
  sort_and_check(random_ids(5, 4096, 1, 8), 4096, 1, 8, 2, 3, s, "E=8 T=4096 k=1 slice", 1);
  // Invalid ids of every kind, -1, duplicates; counted over the whole batch by every slice.
  {
    const Ids ids = {-2, 4, 2, kMax, kMin, 2, -1, 3, 3, 0, -1000, 1, 1, 1, 5, -1, 0, 3, 2, 2, 2};
    for (auto [off, l] : {std::pair{0, 4}, {0, 2}, {2, 2}, {1, 1}, {3, 1}}) {
      sort_and_check(ids, 7, 3, 4, off, l, s, "hand ids slice " + std::to_string(off) + "+" + std::to_string(l));
    }
  }
  // n = 4096 exactly (single-CTA) and 4097 / 4104 (radix): random, all on one expert, all dropped.
  for (int64_t t : {512, 513}) {
    const int k = 8, e = 256;
    const int64_t n = t * k;
    const std::string tn = "T=" + std::to_string(t) + " ";
    sort_and_check(random_ids(6 + uint64_t(t), t, k, e), t, k, e, 0, e, s, tn + "random");
    sort_and_check(random_ids(8 + uint64_t(t), t, k, e), t, k, e, 100, 37, s, tn + "random slice", 2);
    sort_and_check(Ids(size_t(n), e - 1), t, k, e, 0, e, s, tn + "all on the last expert");
    sort_and_check(Ids(size_t(n), 0), t, k, e, 0, e, s, tn + "all on expert 0", 1);
    sort_and_check(Ids(size_t(n), 17), t, k, e, 16, 8, s, tn + "all on one expert of a slice");
    sort_and_check(Ids(size_t(n), 17), t, k, e, 128, 128, s, tn + "all outside the slice");
    sort_and_check(Ids(size_t(n), -1), t, k, e, 0, e, s, tn + "all -1");
    sort_and_check(Ids(size_t(n), kMin), t, k, e, 0, e, s, tn + "all INT32_MIN");
    // Every token's k slots on one expert (duplicates), tokens cycling over the experts.
    Ids dup(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) dup[size_t(i)] = int32_t((i / k) % e);
    sort_and_check(dup, t, k, e, 0, e, s, tn + "k duplicates per token");
  }
  // L = 1024 (the largest single-CTA slice) and 1025 (radix only), including k > 32.
  sort_and_check(random_ids(9, 4, 1024, 1024), 4, 1024, 1024, 0, 1024, s, "T=4 k=1024 E=1024");
  sort_and_check(random_ids(10, 4096, 1, 1024), 4096, 1, 1024, 0, 1024, s, "T=4096 k=1 E=1024", 3);
  sort_and_check(random_ids(11, 64, 8, 2048), 64, 8, 2048, 1000, 1024, s, "E=2048 slice of 1024");
  sort_and_check(random_ids(12, 64, 8, 1025), 64, 8, 1025, 0, 1025, s, "E=1025 (radix)");
  // Decode-typical sizes over the presets' expert counts, each slice kind.
  uint64_t seed = 100;
  for (int64_t t : {1, 2, 7, 64, 256}) {
    for (int k : {1, 4, 8}) {
      for (int e : {32, 128, 256, 384}) {
        const Ids ids = random_ids(seed++, t, k, e);
        const std::string what = case_name(t, k, e);
        sort_and_check(ids, t, k, e, 0, e, s, what + " full");
        sort_and_check(ids, t, k, e, e / 2, e - e / 2, s, what + " high half", int(seed % 4));
        if (HasFailure()) return;
      }
    }
  }
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
  void run_by_token(int k, const int32_t* e2p, bool ue8m0, cudaStream_t s) {
    moekit::permute_quantize_by_token(x.get(), t, h, k, e2p, rows, a.get(), sa.as<float>(), ue8m0, s);
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

// Checks a_perm / sa_perm of permute_quantize_by_token (whole buffers, guards included) against
// permute_quantize_by_token_reference on `e2p`: rows not named by e2p keep the poison.
void check_by_token(const PermuteBuffers& b, const std::vector<float>& xf, int k, const std::vector<int32_t>& e2p,
                    bool ue8m0, const std::string& what) {
  std::vector<uint8_t> a_ref(size_t(b.rows * b.h + kGuard), uint8_t(kPoisonByte));
  std::vector<float> sa_ref(size_t(b.sfa + kGuard));
  std::memset(sa_ref.data(), kPoisonByte, sa_ref.size() * 4);
  moekit::detail::permute_quantize_by_token_reference(xf.data(), b.t, b.h, k, e2p, b.rows, ue8m0, a_ref.data(),
                                                      sa_ref.data());
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
// permute_quantize_by_token (one launch, driven by expanded_to_permuted)
// ----------------------------------------------------------------------------------------------

TEST(PermuteQuantizeByToken, MatchesTwoKernelPath) {
  // moe_sort, then the old two-kernel permute_quantize and the new one into separately poisoned
  // buffers: every byte of a_perm and sa_perm (codes and scales of every valid row, the untouched
  // padding rows and scale padding, the guards) must be equal, and equal to the host reference.
  // x has NaN / +Inf in token 3 and -Inf in token 5's last (partial) block.
  Stream s;
  struct Case {
    int64_t t, h;
    int k, e;
  };
  std::vector<Case> cases;
  for (int64_t h : {144, 2048, 2880, 7168}) {
    for (int64_t t : {1, 7, 1000}) cases.push_back({t, h, 8, 64});
  }
  cases.push_back({1, 7168, 8, 256});   // DeepSeek-V3 decode
  cases.push_back({64, 7168, 8, 256});
  cases.push_back({4096, 2880, 8, 256});
  cases.push_back({300, 2880, 1, 8});
  cases.push_back({5, 2880, 40, 64});   // k > 32: two rounds of destination rows
  cases.push_back({3, 144, 33, 16});
  cases.push_back({2, 16, 2, 4});       // H = 16: one partial block of 16 columns
  uint64_t seed = 31;
  for (const Case& c : cases) {
    for (bool ue8m0 : {false, true}) {
      const std::string what = case_name(c.t, c.k, c.e) + " H=" + std::to_string(c.h) + (ue8m0 ? " ue8m0" : " fp32");
      const Ids ids = random_ids(seed++, c.t, c.k, c.e);
      SortBuffers sb(c.t, c.k, c.e);
      PermuteBuffers old_pb(c.t, c.h, sb.rows()), new_pb(c.t, c.h, sb.rows()), tok_pb(c.t, c.h, sb.rows());
      const std::vector<uint16_t> xb = make_x(c.t, c.h, seed++);
      old_pb.x.upload(xb);
      new_pb.x.upload(xb);
      tok_pb.x.upload(xb);
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);  // the uploads ran on the legacy stream
      sb.poison(s);
      old_pb.poison(s);
      new_pb.poison(s);
      tok_pb.poison(s);
      sb.upload_ids(ids, s);
      sb.run(c.e, 0, s);
      old_pb.run(c.k, sb.p2e(), ue8m0, s);
      new_pb.run_by_token(c.k, sb.e2p(), ue8m0, s);
      // The MoE forward's form: scales once per token into tok_pb.sx (poisoned), then row by row.
      moekit::detail::permute_quantize_by_token_zeroing(
          tok_pb.x.get(), c.t, c.h, c.k, sb.e2p(), sb.rows(), tok_pb.a.get(), tok_pb.sa.as<float>(), ue8m0, nullptr,
          s, nullptr, 0, moekit::detail::TokenScales{tok_pb.sx.as<float>(), sb.p2e()});
      finish(s, what);
      const MoeSortResult got = sb.download();
      expect_same_result(moekit::detail::moe_sort_reference(ids.data(), c.t, c.k, c.e, 0, c.e), got, what);
      expect_equal(old_pb.a.download<uint8_t>(old_pb.a.bytes()), new_pb.a.download<uint8_t>(new_pb.a.bytes()),
                   what + " a_perm new vs old");
      expect_equal(old_pb.sa.download<uint32_t>(old_pb.sa.bytes() / 4),
                   new_pb.sa.download<uint32_t>(new_pb.sa.bytes() / 4), what + " sa_perm new vs old");
      expect_equal(old_pb.a.download<uint8_t>(old_pb.a.bytes()), tok_pb.a.download<uint8_t>(tok_pb.a.bytes()),
                   what + " a_perm token scales vs old");
      expect_equal(old_pb.sa.download<uint32_t>(old_pb.sa.bytes() / 4),
                   tok_pb.sa.download<uint32_t>(tok_pb.sa.bytes() / 4), what + " sa_perm token scales vs old");
      check_by_token(new_pb, to_float(xb), c.k, got.expanded_to_permuted, ue8m0, what + " vs reference");
      if (HasFailure()) return;
    }
  }
}

TEST(PermuteQuantizeByToken, SkipsDroppedAndOutOfRangeSlots) {
  // A hand-made expanded_to_permuted for T = 5, k = 3 over 37 rows (sfa_ld = 40): -1, other
  // negatives, rows_bound and INT32_MAX are skipped; token 3 (NaN / Inf) lands in two rows, the
  // last row is written. The old path, fed the matching permuted_to_expanded, writes the same bytes.
  Stream s;
  const int64_t t = 5, h = 2880, rows = 37;
  const int k = 3;
  const std::vector<int32_t> e2p = {1, 3, -1,  // token 0
                                    -1, INT32_MIN, 37,  // token 1: nothing
                                    36, INT32_MAX, -7,  // token 2: the last row
                                    20, 5, -1,  // token 3: two rows
                                    0, -1, 12};  // token 4
  std::vector<int32_t> p2e(size_t(rows), -1);
  for (size_t i = 0; i < e2p.size(); ++i) {
    if (e2p[i] >= 0 && e2p[i] < rows) p2e[size_t(e2p[i])] = int32_t(i);
  }
  DeviceBuffer de2p(e2p.size() * 4), dp2e(p2e.size() * 4);
  de2p.upload(e2p);
  dp2e.upload(p2e);
  PermuteBuffers old_pb(t, h, rows), new_pb(t, h, rows);
  const std::vector<uint16_t> xb = make_x(t, h, 5);
  old_pb.x.upload(xb);
  new_pb.x.upload(xb);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  for (bool ue8m0 : {false, true}) {
    const std::string what = ue8m0 ? "hand slots ue8m0" : "hand slots fp32";
    old_pb.poison(s);
    new_pb.poison(s);
    old_pb.run(k, dp2e.as<int32_t>(), ue8m0, s);
    new_pb.run_by_token(k, de2p.as<int32_t>(), ue8m0, s);
    finish(s, what);
    check_by_token(new_pb, to_float(xb), k, e2p, ue8m0, what);
    expect_equal(old_pb.a.download<uint8_t>(old_pb.a.bytes()), new_pb.a.download<uint8_t>(new_pb.a.bytes()),
                 what + " a_perm new vs old");
    expect_equal(old_pb.sa.download<uint32_t>(old_pb.sa.bytes() / 4),
                 new_pb.sa.download<uint32_t>(new_pb.sa.bytes() / 4), what + " sa_perm new vs old");
  }
}

TEST(PermuteQuantizeByToken, NoTokensOrNoRowsWritesNothing) {
  Stream s;
  SortBuffers sb(0, 8, 16);
  PermuteBuffers pb(0, 2048, sb.rows());
  sb.poison(s);
  pb.poison(s);
  sb.run(64, 0, s);
  pb.run_by_token(8, sb.e2p(), false, s);
  EXPECT_NO_THROW(moekit::permute_quantize_by_token(nullptr, 0, 2048, 8, nullptr, 1024, nullptr, nullptr, false, s));
  // T > 0 but rows_bound = 0: nothing to write, nothing dereferenced.
  EXPECT_NO_THROW(moekit::permute_quantize_by_token(nullptr, 4, 2048, 8, nullptr, 0, nullptr, nullptr, false, s));
  finish(s, "T = 0");
  const auto a = pb.a.download<uint8_t>(pb.a.bytes());
  EXPECT_TRUE(std::all_of(a.begin(), a.end(), [](uint8_t v) { return v == kPoisonByte; }));
  const auto sa = pb.sa.download<uint8_t>(pb.sa.bytes());
  EXPECT_TRUE(std::all_of(sa.begin(), sa.end(), [](uint8_t v) { return v == kPoisonByte; }));
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

TEST(MoeSortGpu, CudaGraphSingleCtaPathAndByToken) {
  // The decode pipeline head: moe_sort (single-CTA path: one kernel node) + permute_quantize_by_token
  // (one kernel node), captured once per size and replayed with new ids and activations, every
  // output poisoned before each replay and compared with the references.
  Stream s;
  struct Case {
    int64_t t;
    int e, off, l;
  };
  for (const Case& c : {Case{1, 256, 0, 256}, Case{64, 256, 64, 128}, Case{512, 256, 0, 256}}) {
    const int k = 8;
    const int64_t h = 7168;
    const std::string base = "T=" + std::to_string(c.t) + " slice " + std::to_string(c.off) + "+" + std::to_string(c.l);
    ASSERT_TRUE(moekit::detail::moe_sort_single_cta(c.t, k, c.l)) << base;
    SortBuffers sb(c.t, k, c.l, 1);  // misaligned maps on purpose
    PermuteBuffers pb(c.t, h, sb.rows());

    cudaGraph_t graph = nullptr;
    cudaGraphExec_t exec = nullptr;
    ASSERT_EQ(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal), cudaSuccess);
    try {
      sb.run(c.e, c.off, s);
      pb.run_by_token(k, sb.e2p(), false, s);
    } catch (const moekit::Error& err) {
      cudaStreamEndCapture(s, &graph);
      FAIL() << base << " capture: " << err.what();
    }
    ASSERT_EQ(cudaStreamEndCapture(s, &graph), cudaSuccess);
    size_t nodes = 0;
    ASSERT_EQ(cudaGraphGetNodes(graph, nullptr, &nodes), cudaSuccess);
    EXPECT_EQ(nodes, size_t(2)) << base << ": moe_sort + permute_quantize_by_token should be two kernel nodes";
    ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);

    std::vector<int32_t> previous;
    for (int replay = 0; replay < 3; ++replay) {
      const std::string what = base + " replay " + std::to_string(replay);
      Ids ids = random_ids(700 + uint64_t(replay) + uint64_t(c.t), c.t, k, c.e);
      if (replay == 2) std::fill(ids.begin(), ids.begin() + std::min<int64_t>(c.t * k, 2000), c.off + 5);  // heavy expert
      const std::vector<uint16_t> xb = make_x(c.t, h, 900 + uint64_t(replay));
      sb.poison(s);
      pb.poison(s);
      sb.upload_ids(ids, s);
      ASSERT_EQ(cudaMemcpyAsync(pb.x.get(), xb.data(), xb.size() * 2, cudaMemcpyHostToDevice, s), cudaSuccess);
      ASSERT_EQ(cudaGraphLaunch(exec, s), cudaSuccess);
      finish(s, what);
      const MoeSortResult got = sb.download();
      expect_same_result(moekit::detail::moe_sort_reference(ids.data(), c.t, k, c.e, c.off, c.l), got, what);
      sb.expect_guards(what, /*workspace_untouched=*/true);
      check_by_token(pb, to_float(xb), k, got.expanded_to_permuted, false, what);
      EXPECT_NE(got.permuted_to_expanded, previous) << what << ": the replay did not follow the new ids";
      previous = got.permuted_to_expanded;
    }
    cudaGraphExecDestroy(exec);
    cudaGraphDestroy(graph);
    if (HasFailure()) return;
  }
}

// ----------------------------------------------------------------------------------------------
// Timing (not a correctness test; run with --gtest_also_run_disabled_tests)
// ----------------------------------------------------------------------------------------------

// Mean µs per call of `body` (which enqueues `calls` calls on s): captured into one graph, replayed.
template <typename F>
double graph_us_per_call(cudaStream_t s, int calls, F&& body) {
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  EXPECT_EQ(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal), cudaSuccess);
  body();
  EXPECT_EQ(cudaStreamEndCapture(s, &graph), cudaSuccess);
  EXPECT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  EXPECT_EQ(cudaGraphLaunch(exec, s), cudaSuccess);  // warm-up
  finish(s, "timing warm-up");
  cudaEvent_t e0 = nullptr, e1 = nullptr;
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  constexpr int kReps = 10;
  cudaEventRecord(e0, s);
  for (int i = 0; i < kReps; ++i) cudaGraphLaunch(exec, s);
  cudaEventRecord(e1, s);
  finish(s, "timing");
  float ms = 0.0f;
  cudaEventElapsedTime(&ms, e0, e1);
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  return double(ms) * 1000.0 / (double(kReps) * calls);
}

TEST(MoeSortTiming, DISABLED_PrintLatencies) {
  // DeepSeek-V3 shapes (E = 256, k = 8, H = 7168). Back-to-back calls in one graph: the numbers
  // include each kernel's launch and drain, not the host.
  Stream s;
  const int k = 8, e = 256;
  const int64_t h = 7168;
  std::printf("moe_sort (E=256, k=8), us per call:\n%8s %12s %12s\n", "T", "single-CTA", "radix");
  for (int64_t t : {1, 8, 64, 256, 512}) {
    SortBuffers sb(t, k, e);
    const Ids ids = random_ids(5, t, k, e);
    sb.upload_ids(ids, s);
    finish(s, "upload");
    double us[2] = {0, 0};
    int i = 0;
    for (SortPath path : {SortPath::kSingleCta, SortPath::kRadix}) {
      us[i++] = graph_us_per_call(s, 20, [&] {
        for (int c = 0; c < 20; ++c) sb.run(e, 0, s, path);
      });
    }
    std::printf("%8lld %12.2f %12.2f\n", static_cast<long long>(t), us[0], us[1]);
  }
  std::printf("permute + quantize (H=7168, k=8, E=256), us per call:\n%8s %12s %12s %10s\n", "T", "by_token",
              "two-kernel", "by_token GB/s");
  for (int64_t t : {1, 8, 64, 256, 4096, 16384}) {
    SortBuffers sb(t, k, e);
    PermuteBuffers pb(t, h, sb.rows());
    const Ids ids = random_ids(6, t, k, e);
    sb.upload_ids(ids, s);
    ASSERT_EQ(cudaMemsetAsync(pb.x.get(), 0x3C, pb.x.bytes(), s), cudaSuccess);  // bf16 ~0.0116
    sb.run(e, 0, s);
    finish(s, "sort");
    const int calls = t >= 4096 ? 2 : 20;
    const double by_token = graph_us_per_call(s, calls, [&] {
      for (int c = 0; c < calls; ++c) pb.run_by_token(k, sb.e2p(), false, s);
    });
    const double two = graph_us_per_call(s, calls, [&] {
      for (int c = 0; c < calls; ++c) pb.run(k, sb.p2e(), false, s);
    });
    // Bytes of the new kernel: x once, k FP8 rows + k scale rows per token (dropped slots ~5%).
    const double bytes = double(t) * h * 2 + double(t) * k * (h + 4.0 * double(moekit::ceil_div(h, 128)));
    std::printf("%8lld %12.2f %12.2f %10.0f\n", static_cast<long long>(t), by_token, two, bytes / (by_token * 1e3));
  }
}

}  // namespace

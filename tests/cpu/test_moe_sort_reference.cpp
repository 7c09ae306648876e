// CPU tests of the host reference of moe_sort / permute_quantize (src/moe/moe_sort_reference.h),
// which the GPU tests compare against, and of the host-side argument validation of moe_sort and
// permute_quantize (include/moekit/moe_sort.h) — everything that throws before touching a GPU.
//
// Hand cases with every output written out (duplicates in a token count twice, -1 slots, invalid
// ids, expert-parallel slices, all tokens on one expert, k = 1, T = 0), then random cases checked
// against the layout's invariants, recomputed independently of the reference's construction.
#include <gtest/gtest.h>

#include "moe_test_util.h"

#include <algorithm>
#include <climits>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "moe/moe_sort_internal.h"
#include "moe/moe_sort_reference.h"
#include "moekit/error.h"
#include "moekit/grouped_gemm.h"
#include "moekit/moe_sort.h"
#include "moekit/numerics.h"

namespace {

using moekit::ErrorCode;
using moekit::detail::moe_sort_reference;
using moekit::detail::MoeSortResult;
using Ids = std::vector<int32_t>;

MoeSortResult sort_ref(const Ids& ids, int64_t t, int k, int e, int off, int l) {
  return moe_sort_reference(ids.empty() ? nullptr : ids.data(), t, k, e, off, l);
}

// permuted_to_expanded of `rows` rows: -1 everywhere except the given (row, index) pairs.
std::vector<int32_t> rows_with(int64_t rows, const std::vector<std::pair<int32_t, int32_t>>& set) {
  std::vector<int32_t> v(size_t(rows), -1);
  for (auto [r, i] : set) v[size_t(r)] = i;
  return v;
}

template <typename F>
void expect_error(ErrorCode code, F&& f, const std::string& what) {
  try {
    f();
    ADD_FAILURE() << what << ": no exception";
  } catch (const moekit::Error& e) {
    EXPECT_EQ(e.code(), code) << what << ": " << e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << what << ": unexpected exception " << e.what();
  }
}

// Checks `r` against the contract, recomputed from `ids` directly: counts, invalid count, aligned
// offsets, each expert's rows holding exactly its slots in increasing expanded index, padding and
// rows past offsets[L] at -1, and the two maps inverse to each other.
void expect_valid_layout(const Ids& ids, int64_t t, int k, int e_total, int off, int l, const MoeSortResult& r,
                         const std::string& what) {
  const int64_t n = t * k;
  const int64_t rows = moekit::moe_sort_rows_bound(t, k, l);
  ASSERT_EQ(rows, moekit::contiguous_rows_upper_bound(n, l)) << what;
  ASSERT_EQ(r.expert_counts.size(), size_t(l)) << what;
  ASSERT_EQ(r.expert_offsets.size(), size_t(l) + 1) << what;
  ASSERT_EQ(r.permuted_to_expanded.size(), size_t(rows)) << what;
  ASSERT_EQ(r.expanded_to_permuted.size(), size_t(n)) << what;

  std::vector<std::vector<int32_t>> slots(static_cast<size_t>(l));
  int32_t invalid = 0;
  for (int64_t i = 0; i < n; ++i) {
    const int32_t id = ids[size_t(i)];
    if (id < -1 || id >= e_total) ++invalid;
    if (id >= off && id < off + l) slots[size_t(id - off)].push_back(int32_t(i));
  }
  EXPECT_EQ(r.invalid_count, invalid) << what;
  EXPECT_EQ(r.expert_offsets[0], 0) << what;
  std::vector<int32_t> expect_p2e(size_t(rows), -1);
  for (int e = 0; e < l; ++e) {
    EXPECT_EQ(r.expert_counts[size_t(e)], int32_t(slots[size_t(e)].size())) << what << " expert " << e;
    EXPECT_EQ(r.expert_offsets[size_t(e) + 1] - r.expert_offsets[size_t(e)],
              moekit::align_up(int64_t(slots[size_t(e)].size()), moekit::kGroupAlign))
        << what << " expert " << e;
    for (size_t j = 0; j < slots[size_t(e)].size(); ++j) {
      expect_p2e[size_t(r.expert_offsets[size_t(e)]) + j] = slots[size_t(e)][j];
    }
  }
  EXPECT_LE(r.expert_offsets.back(), rows) << what;
  EXPECT_EQ(r.permuted_to_expanded, expect_p2e) << what;
  std::vector<int32_t> expect_e2p(size_t(n), -1);
  for (int64_t row = 0; row < rows; ++row) {
    if (expect_p2e[size_t(row)] >= 0) expect_e2p[size_t(expect_p2e[size_t(row)])] = int32_t(row);
  }
  EXPECT_EQ(r.expanded_to_permuted, expect_e2p) << what;
}

Ids random_ids(std::mt19937_64& rng, int64_t t, int k, int e_total) {
  return moekit::test::random_topk_ids(rng, t, k, e_total);
}

// ----------------------------------------------------------------------------------------------
// Hand cases
// ----------------------------------------------------------------------------------------------

TEST(MoeSortReference, HandCaseDuplicatesAndMinusOne) {
  // token 0 → experts 1, 3; token 1 → expert 1 twice (two rows); token 2 → -1 (dropped), 0.
  const Ids ids = {1, 3, 1, 1, -1, 0};
  const auto r = sort_ref(ids, 3, 2, 4, 0, 4);
  EXPECT_EQ(r.expert_counts, (std::vector<int32_t>{1, 3, 0, 1}));
  EXPECT_EQ(r.expert_offsets, (std::vector<int32_t>{0, 128, 256, 256, 384}));
  EXPECT_EQ(moekit::moe_sort_rows_bound(3, 2, 4), 640);  // align_up(6 + 4 * 127, 128)
  EXPECT_EQ(r.permuted_to_expanded, rows_with(640, {{0, 5}, {128, 0}, {129, 2}, {130, 3}, {256, 1}}));
  EXPECT_EQ(r.expanded_to_permuted, (std::vector<int32_t>{128, 256, 129, 130, -1, 0}));
  EXPECT_EQ(r.invalid_count, 0);
  expect_valid_layout(ids, 3, 2, 4, 0, 4, r, "hand");
}

TEST(MoeSortReference, HandCaseInvalidIds) {
  const Ids ids = {-2, 4, 2, INT32_MAX, INT32_MIN, 2};
  const auto r = sort_ref(ids, 2, 3, 4, 0, 4);
  EXPECT_EQ(r.invalid_count, 4);  // -2, 4 (= E), INT32_MAX, INT32_MIN; -1 would not count
  EXPECT_EQ(r.expert_counts, (std::vector<int32_t>{0, 0, 2, 0}));
  EXPECT_EQ(r.expert_offsets, (std::vector<int32_t>{0, 0, 0, 128, 128}));
  EXPECT_EQ(r.permuted_to_expanded, rows_with(moekit::moe_sort_rows_bound(2, 3, 4), {{0, 2}, {1, 5}}));
  EXPECT_EQ(r.expanded_to_permuted, (std::vector<int32_t>{-1, -1, 0, -1, -1, 1}));
}

TEST(MoeSortReference, HandCaseExpertParallelSlices) {
  const Ids ids = {1, 3, 1, 1, -1, 0};
  // Slice [1, 3): experts 1 and 2. Ids 0 and 3 are valid but not local: dropped, not invalid.
  const auto a = sort_ref(ids, 3, 2, 4, 1, 2);
  EXPECT_EQ(a.expert_counts, (std::vector<int32_t>{3, 0}));
  EXPECT_EQ(a.expert_offsets, (std::vector<int32_t>{0, 128, 128}));
  EXPECT_EQ(a.permuted_to_expanded, rows_with(384, {{0, 0}, {1, 2}, {2, 3}}));
  EXPECT_EQ(a.expanded_to_permuted, (std::vector<int32_t>{0, -1, 1, 2, -1, -1}));
  EXPECT_EQ(a.invalid_count, 0);
  // Slice [3, 4).
  const auto b = sort_ref(ids, 3, 2, 4, 3, 1);
  EXPECT_EQ(b.expert_counts, (std::vector<int32_t>{1}));
  EXPECT_EQ(b.expert_offsets, (std::vector<int32_t>{0, 128}));
  EXPECT_EQ(b.permuted_to_expanded, rows_with(256, {{0, 1}}));
  EXPECT_EQ(b.expanded_to_permuted, (std::vector<int32_t>{-1, 0, -1, -1, -1, -1}));
  // Invalid ids are counted by every slice (each GPU sees the whole topk_ids).
  const Ids bad = {7, 0, -5, 2};
  EXPECT_EQ(sort_ref(bad, 2, 2, 4, 2, 2).invalid_count, 2);
  EXPECT_EQ(sort_ref(bad, 2, 2, 4, 0, 2).invalid_count, 2);
}

TEST(MoeSortReference, AllTokensOnOneExpert) {
  {
    const Ids ids(300, 5);
    const auto r = sort_ref(ids, 300, 1, 8, 0, 8);
    EXPECT_EQ(r.expert_counts, (std::vector<int32_t>{0, 0, 0, 0, 0, 300, 0, 0}));
    EXPECT_EQ(r.expert_offsets, (std::vector<int32_t>{0, 0, 0, 0, 0, 0, 384, 384, 384}));
    for (int32_t i = 0; i < 300; ++i) {
      EXPECT_EQ(r.permuted_to_expanded[size_t(i)], i);
      EXPECT_EQ(r.expanded_to_permuted[size_t(i)], i);
    }
    for (size_t row = 300; row < r.permuted_to_expanded.size(); ++row) EXPECT_EQ(r.permuted_to_expanded[row], -1);
  }
  {  // k = 2, both slots of every token on expert 7: 200 rows, in expanded order
    const Ids ids(200, 7);
    const auto r = sort_ref(ids, 100, 2, 8, 0, 8);
    EXPECT_EQ(r.expert_counts[7], 200);
    EXPECT_EQ(r.expert_offsets.back(), 256);
    for (int32_t i = 0; i < 200; ++i) EXPECT_EQ(r.permuted_to_expanded[size_t(i)], i);
    expect_valid_layout(ids, 100, 2, 8, 0, 8, r, "all on expert 7, k = 2");
  }
}

TEST(MoeSortReference, TopKOne) {
  const Ids ids = {2, 0, 2, -1, 1, 2, 9};
  const auto r = sort_ref(ids, 7, 1, 3, 0, 3);
  EXPECT_EQ(r.expert_counts, (std::vector<int32_t>{1, 1, 3}));
  EXPECT_EQ(r.expert_offsets, (std::vector<int32_t>{0, 128, 256, 384}));
  EXPECT_EQ(r.invalid_count, 1);
  EXPECT_EQ(r.permuted_to_expanded,
            rows_with(moekit::moe_sort_rows_bound(7, 1, 3), {{0, 1}, {128, 4}, {256, 0}, {257, 2}, {258, 5}}));
  EXPECT_EQ(r.expanded_to_permuted, (std::vector<int32_t>{256, 0, 257, -1, 128, 258, -1}));
}

TEST(MoeSortReference, ZeroTokens) {
  for (int l : {1, 8, 256}) {
    const auto r = moe_sort_reference(nullptr, 0, 8, 384, 0, l);
    EXPECT_EQ(r.expert_counts, std::vector<int32_t>(size_t(l), 0));
    EXPECT_EQ(r.expert_offsets, std::vector<int32_t>(size_t(l) + 1, 0));
    EXPECT_EQ(r.permuted_to_expanded.size(), size_t(moekit::align_up(int64_t(l) * 127, 128)));
    EXPECT_TRUE(std::all_of(r.permuted_to_expanded.begin(), r.permuted_to_expanded.end(),
                            [](int32_t v) { return v == -1; }));
    EXPECT_TRUE(r.expanded_to_permuted.empty());
    EXPECT_EQ(r.invalid_count, 0);
  }
}

TEST(MoeSortReference, ExactSegmentFill) {
  // 128 slots on expert 0 and 129 on expert 1: a full segment, then one spilling into a second.
  Ids ids(257);
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = i < 128 ? 0 : 1;
  const auto r = sort_ref(ids, 257, 1, 2, 0, 2);
  EXPECT_EQ(r.expert_offsets, (std::vector<int32_t>{0, 128, 384}));
  EXPECT_EQ(r.permuted_to_expanded[127], 127);
  EXPECT_EQ(r.permuted_to_expanded[128], 128);
  EXPECT_EQ(r.permuted_to_expanded[256], 256);
  EXPECT_EQ(r.permuted_to_expanded[257], -1);
  expect_valid_layout(ids, 257, 1, 2, 0, 2, r, "exact fill");
}

// ----------------------------------------------------------------------------------------------
// Random cases: invariants, and the two halves of an expert-parallel split partition the full run
// ----------------------------------------------------------------------------------------------

TEST(MoeSortReference, RandomInvariantsAndSlicePartition) {
  std::mt19937_64 rng(20240611);
  for (int64_t t : {1, 7, 100, 1000}) {
    for (int k : {1, 2, 8}) {
      for (int e : {1, 8, 64, 256, 384}) {
        const Ids ids = random_ids(rng, t, k, e);
        const std::string what = "T=" + std::to_string(t) + " k=" + std::to_string(k) + " E=" + std::to_string(e);
        const auto full = sort_ref(ids, t, k, e, 0, e);
        expect_valid_layout(ids, t, k, e, 0, e, full, what + " full");
        if (e < 2) continue;
        const int h = e / 2;
        const auto lo = sort_ref(ids, t, k, e, 0, h);
        const auto hi = sort_ref(ids, t, k, e, h, e - h);
        expect_valid_layout(ids, t, k, e, 0, h, lo, what + " low half");
        expect_valid_layout(ids, t, k, e, h, e - h, hi, what + " high half");
        for (int64_t i = 0; i < t * k; ++i) {
          const bool in_full = full.expanded_to_permuted[size_t(i)] >= 0;
          const int in_halves = (lo.expanded_to_permuted[size_t(i)] >= 0) + (hi.expanded_to_permuted[size_t(i)] >= 0);
          ASSERT_EQ(in_halves, in_full ? 1 : 0) << what << " slot " << i;
        }
        std::vector<int32_t> joined(lo.expert_counts);
        joined.insert(joined.end(), hi.expert_counts.begin(), hi.expert_counts.end());
        EXPECT_EQ(joined, full.expert_counts) << what;
        EXPECT_EQ(lo.invalid_count, full.invalid_count) << what;
        EXPECT_EQ(hi.invalid_count, full.invalid_count) << what;
      }
    }
  }
}

// ----------------------------------------------------------------------------------------------
// permute_quantize_reference
// ----------------------------------------------------------------------------------------------

TEST(MoeSortReference, PermuteQuantizeReferenceRows) {
  const int64_t t = 3, h = 2880, kb = moekit::ceil_div(h, 128);  // 22 full blocks + one of 64
  const int k = 2;
  std::vector<float> x(size_t(t * h));
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (size_t i = 0; i < x.size(); ++i) x[i] = moekit::bf16_to_float(moekit::bf16_from_float(u(rng) * float(i % 97 + 1)));
  for (bool ue8m0 : {false, true}) {
    std::vector<uint8_t> q(size_t(t * h));
    std::vector<float> s(size_t(t * kb));
    moekit::quantize_1x128(x.data(), t, h, h, q.data(), h, s.data(), ue8m0);

    // rows: 0 ← slot 5 (token 2), 2 ← slot 0 (token 0), 3 ← slot 3 (token 1), 5 ← slot 2
    // (token 1); row 6 holds 7 >= T * k and must be skipped like the -1 rows.
    const std::vector<int32_t> p2e = {5, -1, 0, 3, -1, 2, 7, -1};
    const int64_t rows = int64_t(p2e.size()), ld = moekit::sfa_ld(rows);
    std::vector<uint8_t> a(size_t(rows * h), 0xA5);
    std::vector<float> sa(size_t(moekit::sfa_physical_size(rows, h)), -3.0f);
    moekit::detail::permute_quantize_reference(x.data(), t, h, k, p2e, ue8m0, a.data(), sa.data());
    const int64_t token_of_row[] = {2, -1, 0, 1, -1, 1, -1, -1};
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t tok = token_of_row[r];
      for (int64_t c = 0; c < h; ++c) {
        const uint8_t want = tok < 0 ? uint8_t(0xA5) : q[size_t(tok * h + c)];
        ASSERT_EQ(a[size_t(r * h + c)], want) << "row " << r << " col " << c;
      }
      for (int64_t b = 0; b < kb; ++b) {
        const float want = tok < 0 ? -3.0f : s[size_t(tok * kb + b)];
        ASSERT_EQ(std::memcmp(&sa[size_t(b * ld + r)], &want, 4), 0) << "row " << r << " block " << b;
      }
    }
  }
}

TEST(MoeSortReference, PermuteQuantizeByTokenReferenceMatchesRowDriven) {
  // Driven by expanded_to_permuted from moe_sort_reference, the by-token reference writes exactly
  // what the row-driven reference writes from permuted_to_expanded (every byte, padding untouched);
  // out-of-range entries (-1, other negatives, >= rows_bound) are skipped.
  std::mt19937_64 rng(99);
  for (auto [t, k, e, h] : {std::tuple<int64_t, int, int, int64_t>{7, 3, 8, 2880}, {1, 8, 256, 144}, {20, 1, 4, 256}}) {
    const Ids ids = random_ids(rng, t, k, e);
    const auto r = sort_ref(ids, t, k, e, 0, e);
    const int64_t rows = int64_t(r.permuted_to_expanded.size());
    std::vector<float> x(size_t(t * h));
    std::uniform_real_distribution<float> u(-4.0f, 4.0f);
    for (float& v : x) v = moekit::bf16_to_float(moekit::bf16_from_float(u(rng)));
    for (bool ue8m0 : {false, true}) {
      std::vector<uint8_t> a1(size_t(rows * h), 0xA5), a2(a1);
      std::vector<float> s1(size_t(moekit::sfa_physical_size(rows, h)), -3.0f), s2(s1);
      moekit::detail::permute_quantize_reference(x.data(), t, h, k, r.permuted_to_expanded, ue8m0, a1.data(), s1.data());
      moekit::detail::permute_quantize_by_token_reference(x.data(), t, h, k, r.expanded_to_permuted, rows, ue8m0,
                                                          a2.data(), s2.data());
      EXPECT_EQ(a1, a2) << "T=" << t << " k=" << k;
      EXPECT_EQ(std::memcmp(s1.data(), s2.data(), s1.size() * 4), 0) << "T=" << t << " k=" << k;
    }
  }
  // Hand map: slot 0 → row 2, slot 1 dropped, slot 2 → rows_bound (skipped), slot 3 → row 0.
  const int64_t h = 128, rows = 4;
  std::vector<float> x(size_t(2 * h));
  for (int64_t c = 0; c < h; ++c) {
    x[size_t(c)] = float(c % 7) - 3.0f;
    x[size_t(h + c)] = float(c % 5) * 0.25f;
  }
  std::vector<uint8_t> q(size_t(2 * h));
  std::vector<float> sc(2);
  moekit::quantize_1x128(x.data(), 2, h, h, q.data(), h, sc.data(), false);
  std::vector<uint8_t> a(size_t(rows * h), 0xA5);
  std::vector<float> sa(size_t(moekit::sfa_physical_size(rows, h)), -3.0f);
  moekit::detail::permute_quantize_by_token_reference(x.data(), 2, h, 2, {2, -1, 4, 0}, rows, false, a.data(),
                                                      sa.data());
  for (int64_t c = 0; c < h; ++c) {
    EXPECT_EQ(a[size_t(2 * h + c)], q[size_t(c)]);
    EXPECT_EQ(a[size_t(c)], q[size_t(h + c)]);
    EXPECT_EQ(a[size_t(h + c)], 0xA5);
    EXPECT_EQ(a[size_t(3 * h + c)], 0xA5);
  }
  EXPECT_EQ(sa, (std::vector<float>{sc[1], -3.0f, sc[0], -3.0f}));
}

// ----------------------------------------------------------------------------------------------
// Argument validation (all of it happens before any CUDA call, so it runs without a GPU)
// ----------------------------------------------------------------------------------------------

TEST(MoeSortValidation, SizesAndSlices) {
  expect_error(ErrorCode::kInvalidArgument, [] { moekit::moe_sort_rows_bound(-1, 2, 8); }, "T < 0");
  expect_error(ErrorCode::kInvalidArgument, [] { moekit::moe_sort_rows_bound(4, 0, 8); }, "k = 0");
  expect_error(ErrorCode::kInvalidArgument, [] { moekit::moe_sort_rows_bound(4, 2, 0); }, "L = 0");
  expect_error(ErrorCode::kInvalidArgument, [] { moekit::moe_sort_rows_bound(int64_t(1) << 28, 8, 8); },
               "T * k >= 2^31");
  expect_error(ErrorCode::kInvalidArgument, [] { moekit::moe_sort_rows_bound(int64_t(1) << 40, 1, 8); },
               "T >= 2^31");
  expect_error(ErrorCode::kInvalidArgument, [] { moekit::moe_sort_rows_bound(1, 1, 1 << 25); },
               "rows >= 2^31");
  expect_error(ErrorCode::kInvalidArgument, [] { moekit::moe_sort_workspace_size(-1, 2, 8); }, "ws T < 0");
  EXPECT_EQ(moekit::moe_sort_rows_bound(0, 8, 1), 128);
  EXPECT_EQ(moekit::moe_sort_rows_bound(4096, 8, 256), moekit::contiguous_rows_upper_bound(32768, 256));

  const Ids ids = {0, 1};
  expect_error(ErrorCode::kInvalidArgument, [&] { sort_ref(ids, 1, 2, 0, 0, 1); }, "ref E = 0");
  expect_error(ErrorCode::kInvalidArgument, [&] { sort_ref(ids, 1, 2, 4, 3, 2); }, "ref slice past E");
  expect_error(ErrorCode::kInvalidArgument, [&] { sort_ref(ids, 1, 2, 4, -1, 2); }, "ref negative offset");
  expect_error(ErrorCode::kInvalidArgument, [&] { moe_sort_reference(nullptr, 1, 2, 4, 0, 4); }, "ref null ids");
}

TEST(MoeSortValidation, MoeSortArguments) {
  // Fake device pointers: every call below must throw before dereferencing or launching anything.
  alignas(16) static int32_t fake[64];
  moekit::MoeSortBuffers out;
  out.expert_counts = fake;
  out.expert_offsets = fake + 8;
  out.permuted_to_expanded = fake + 16;
  out.expanded_to_permuted = fake + 24;
  out.invalid_count = fake + 32;
  void* ws = fake + 40;
  auto sort = [&](const int32_t* ids, int64_t t, int k, int e, int off, int l, const moekit::MoeSortBuffers& o,
                  void* w) { moekit::moe_sort(ids, t, k, e, off, l, o, w, 1 << 20, nullptr); };
  expect_error(ErrorCode::kInvalidArgument, [&] { sort(fake, -1, 2, 8, 0, 8, out, ws); }, "T < 0");
  expect_error(ErrorCode::kInvalidArgument, [&] { sort(fake, 4, 0, 8, 0, 8, out, ws); }, "k = 0");
  expect_error(ErrorCode::kInvalidArgument, [&] { sort(fake, 4, 2, 0, 0, 1, out, ws); }, "E = 0");
  expect_error(ErrorCode::kInvalidArgument, [&] { sort(fake, 4, 2, 8, 0, 0, out, ws); }, "L = 0");
  expect_error(ErrorCode::kInvalidArgument, [&] { sort(fake, 4, 2, 8, 4, 5, out, ws); }, "slice past E");
  expect_error(ErrorCode::kInvalidArgument, [&] { sort(fake, 4, 2, 8, -1, 4, out, ws); }, "negative offset");
  expect_error(ErrorCode::kInvalidArgument, [&] { sort(nullptr, 4, 2, 8, 0, 8, out, ws); }, "null ids");
  expect_error(ErrorCode::kInvalidArgument, [&] { sort(fake, 4, 2, 8, 0, 8, out, nullptr); }, "null workspace");
  for (int which = 0; which < 5; ++which) {
    moekit::MoeSortBuffers o = out;
    int32_t** field[] = {&o.expert_counts, &o.expert_offsets, &o.permuted_to_expanded, &o.expanded_to_permuted,
                         &o.invalid_count};
    *field[which] = nullptr;
    expect_error(ErrorCode::kInvalidArgument, [&] { sort(fake, 4, 2, 8, 0, 8, o, ws); },
                 "null output " + std::to_string(which));
    *field[which] = reinterpret_cast<int32_t*>(reinterpret_cast<char*>(fake) + 2);
    expect_error(ErrorCode::kMisaligned, [&] { sort(fake, 4, 2, 8, 0, 8, o, ws); },
                 "misaligned output " + std::to_string(which));
  }
  expect_error(ErrorCode::kMisaligned,
               [&] { sort(reinterpret_cast<const int32_t*>(reinterpret_cast<char*>(fake) + 1), 4, 2, 8, 0, 8, out, ws); },
               "misaligned ids");
}

TEST(MoeSortValidation, PermuteQuantizeArguments) {
  alignas(16) static unsigned char fake[4096];
  void* x = fake;
  void* xq = fake + 256;
  float* sx = reinterpret_cast<float*>(fake + 512);
  int32_t* p2e = reinterpret_cast<int32_t*>(fake + 1024);
  void* a = fake + 2048;
  float* sa = reinterpret_cast<float*>(fake + 3072);
  auto pq = [&](const void* xx, int64_t t, int64_t h, int k, const int32_t* p, int64_t rows, void* q, float* s,
                void* ap, float* sp) { moekit::permute_quantize(xx, t, h, k, p, rows, q, s, ap, sp, false, nullptr); };
  expect_error(ErrorCode::kInvalidArgument, [&] { pq(x, -1, 256, 2, p2e, 128, xq, sx, a, sa); }, "T < 0");
  expect_error(ErrorCode::kInvalidArgument, [&] { pq(x, 4, 2888, 2, p2e, 128, xq, sx, a, sa); }, "H % 16");
  expect_error(ErrorCode::kInvalidArgument, [&] { pq(x, 4, 0, 2, p2e, 128, xq, sx, a, sa); }, "H = 0");
  expect_error(ErrorCode::kInvalidArgument, [&] { pq(x, 4, 256, 0, p2e, 128, xq, sx, a, sa); }, "k = 0");
  expect_error(ErrorCode::kInvalidArgument, [&] { pq(x, 4, 256, 2, p2e, -128, xq, sx, a, sa); }, "rows < 0");
  expect_error(ErrorCode::kInvalidArgument, [&] { pq(nullptr, 4, 256, 2, p2e, 128, xq, sx, a, sa); }, "null x");
  expect_error(ErrorCode::kInvalidArgument, [&] { pq(x, 4, 256, 2, p2e, 128, nullptr, sx, a, sa); }, "null xq");
  expect_error(ErrorCode::kInvalidArgument, [&] { pq(x, 4, 256, 2, p2e, 128, xq, nullptr, a, sa); }, "null sx");
  expect_error(ErrorCode::kInvalidArgument, [&] { pq(x, 4, 256, 2, nullptr, 128, xq, sx, a, sa); }, "null p2e");
  expect_error(ErrorCode::kInvalidArgument, [&] { pq(x, 4, 256, 2, p2e, 128, xq, sx, nullptr, sa); }, "null a_perm");
  expect_error(ErrorCode::kInvalidArgument, [&] { pq(x, 4, 256, 2, p2e, 128, xq, sx, a, nullptr); }, "null sa_perm");
  expect_error(ErrorCode::kMisaligned, [&] { pq(fake + 8, 4, 256, 2, p2e, 128, xq, sx, a, sa); }, "misaligned x");
  expect_error(ErrorCode::kMisaligned, [&] { pq(x, 4, 256, 2, p2e, 128, fake + 264, sx, a, sa); }, "misaligned xq");
  expect_error(ErrorCode::kMisaligned,
               [&] { pq(x, 4, 256, 2, p2e, 128, xq, reinterpret_cast<float*>(fake + 516), a, sa); }, "misaligned sx");
  expect_error(ErrorCode::kMisaligned, [&] { pq(x, 4, 256, 2, p2e, 128, xq, sx, fake + 2056, sa); },
               "misaligned a_perm");
  expect_error(ErrorCode::kMisaligned,
               [&] { pq(x, 4, 256, 2, p2e, 128, xq, sx, a, reinterpret_cast<float*>(fake + 3076)); },
               "misaligned sa_perm");
  expect_error(ErrorCode::kMisaligned,
               [&] { pq(x, 4, 256, 2, reinterpret_cast<int32_t*>(fake + 1026), 128, xq, sx, a, sa); },
               "misaligned p2e");
  // T = 0 is valid and does nothing (no launch, so this runs without a GPU too).
  EXPECT_NO_THROW(pq(nullptr, 0, 2880, 8, nullptr, 1024, nullptr, nullptr, nullptr, nullptr));
}

TEST(MoeSortValidation, PermuteQuantizeByTokenArguments) {
  alignas(16) static unsigned char fake[4096];
  void* x = fake;
  int32_t* e2p = reinterpret_cast<int32_t*>(fake + 1024);
  void* a = fake + 2048;
  float* sa = reinterpret_cast<float*>(fake + 3072);
  auto pq = [&](const void* xx, int64_t t, int64_t h, int k, const int32_t* m, int64_t rows, void* ap, float* sp) {
    moekit::permute_quantize_by_token(xx, t, h, k, m, rows, ap, sp, false, nullptr);
  };
  expect_error(ErrorCode::kInvalidArgument, [&] { pq(x, -1, 256, 2, e2p, 128, a, sa); }, "T < 0");
  expect_error(ErrorCode::kInvalidArgument, [&] { pq(x, int64_t(1) << 31, 256, 2, e2p, 128, a, sa); }, "T >= 2^31");
  expect_error(ErrorCode::kInvalidArgument, [&] { pq(x, int64_t(1) << 29, 256, 8, e2p, 128, a, sa); },
               "T * k >= 2^31");
  expect_error(ErrorCode::kInvalidArgument, [&] { pq(x, 4, 2888, 2, e2p, 128, a, sa); }, "H % 16");
  expect_error(ErrorCode::kInvalidArgument, [&] { pq(x, 4, 0, 2, e2p, 128, a, sa); }, "H = 0");
  expect_error(ErrorCode::kInvalidArgument, [&] { pq(x, 4, int64_t(1) << 31, 2, e2p, 128, a, sa); }, "H too large");
  expect_error(ErrorCode::kInvalidArgument, [&] { pq(x, 4, 256, 0, e2p, 128, a, sa); }, "k = 0");
  expect_error(ErrorCode::kInvalidArgument, [&] { pq(x, 4, 256, 2, e2p, -128, a, sa); }, "rows < 0");
  expect_error(ErrorCode::kInvalidArgument, [&] { pq(x, 4, 256, 2, e2p, int64_t(1) << 31, a, sa); }, "rows >= 2^31");
  expect_error(ErrorCode::kInvalidArgument, [&] { pq(nullptr, 4, 256, 2, e2p, 128, a, sa); }, "null x");
  expect_error(ErrorCode::kInvalidArgument, [&] { pq(x, 4, 256, 2, nullptr, 128, a, sa); }, "null e2p");
  expect_error(ErrorCode::kInvalidArgument, [&] { pq(x, 4, 256, 2, e2p, 128, nullptr, sa); }, "null a_perm");
  expect_error(ErrorCode::kInvalidArgument, [&] { pq(x, 4, 256, 2, e2p, 128, a, nullptr); }, "null sa_perm");
  expect_error(ErrorCode::kMisaligned, [&] { pq(fake + 8, 4, 256, 2, e2p, 128, a, sa); }, "misaligned x");
  expect_error(ErrorCode::kMisaligned, [&] { pq(x, 4, 256, 2, e2p, 128, fake + 2056, sa); }, "misaligned a_perm");
  expect_error(ErrorCode::kMisaligned,
               [&] { pq(x, 4, 256, 2, e2p, 128, a, reinterpret_cast<float*>(fake + 3076)); }, "misaligned sa_perm");
  expect_error(ErrorCode::kMisaligned,
               [&] { pq(x, 4, 256, 2, reinterpret_cast<int32_t*>(fake + 1026), 128, a, sa); }, "misaligned e2p");
  // Nothing to write: no launch, so these run without a GPU too. No scratch buffers are needed.
  EXPECT_NO_THROW(pq(nullptr, 0, 2880, 8, nullptr, 1024, nullptr, nullptr));
  EXPECT_NO_THROW(pq(nullptr, 4, 2880, 8, nullptr, 0, nullptr, nullptr));
}

TEST(MoeSortValidation, SingleCtaPathRule) {
  // Pure host rule (no GPU): T * k <= 4096 and local_count <= 1024; invalid sizes throw.
  using moekit::detail::moe_sort_single_cta;
  EXPECT_TRUE(moe_sort_single_cta(0, 8, 1));
  EXPECT_TRUE(moe_sort_single_cta(1, 8, 256));
  EXPECT_TRUE(moe_sort_single_cta(512, 8, 1024));
  EXPECT_FALSE(moe_sort_single_cta(513, 8, 256));
  EXPECT_FALSE(moe_sort_single_cta(1, 1, 1025));
  expect_error(ErrorCode::kInvalidArgument, [] { moe_sort_single_cta(-1, 8, 256); }, "T < 0");
  expect_error(ErrorCode::kInvalidArgument, [] { moe_sort_single_cta(1, 0, 256); }, "k = 0");
}

}  // namespace

// CPU tests of the contiguous grouped layout helpers (include/moekit/grouped_gemm.h, SPEC §4):
// contiguous_offsets (each expert's segment padded to kGroupAlign rows) and
// contiguous_rows_upper_bound (the allocation that fits every layout of a given total).
#include <gtest/gtest.h>

#include <cstdint>
#include <numeric>
#include <random>
#include <vector>

#include "moekit/error.h"
#include "moekit/grouped_gemm.h"
#include "moekit/numerics.h"

namespace {

using Counts = std::vector<int32_t>;

// The structural properties every offsets vector must have, whatever the counts.
void expect_well_formed(const Counts& counts, const std::vector<int32_t>& off) {
  ASSERT_EQ(off.size(), counts.size() + 1);
  EXPECT_EQ(off[0], 0);
  for (size_t e = 0; e < counts.size(); ++e) {
    const int64_t seg = int64_t(off[e + 1]) - off[e];
    EXPECT_EQ(off[e] % moekit::kGroupAlign, 0) << "expert " << e;
    EXPECT_GE(seg, counts[e]) << "expert " << e;
    EXPECT_LT(seg, int64_t(counts[e]) + moekit::kGroupAlign) << "expert " << e;
    EXPECT_EQ(seg, moekit::align_up(counts[e], moekit::kGroupAlign)) << "expert " << e;
  }
}

int64_t sum(const Counts& c) { return std::accumulate(c.begin(), c.end(), int64_t(0)); }

// `total` rows spread over `experts` experts in one of several random shapes.
Counts random_partition(std::mt19937_64& rng, int64_t total, int64_t experts) {
  Counts c(size_t(experts), 0);
  switch (rng() % 4) {
    case 0:  // uniform multinomial
      for (int64_t i = 0; i < total; ++i) ++c[rng() % uint64_t(experts)];
      break;
    case 1:  // all on one expert
      c[rng() % uint64_t(experts)] = int32_t(total);
      break;
    case 2: {  // skewed: each row goes to a low expert index with high probability
      std::geometric_distribution<int64_t> geo(0.3);
      for (int64_t i = 0; i < total; ++i) ++c[size_t(std::min<int64_t>(geo(rng), experts - 1))];
      break;
    }
    default: {  // one row each on as many experts as possible, the rest on one
      int64_t left = total;
      for (int64_t e = 0; e < experts && left > 0; ++e, --left) c[size_t(e)] = 1;
      c[rng() % uint64_t(experts)] += int32_t(left);
      break;
    }
  }
  return c;
}

}  // namespace

TEST(GroupedLayout, ContiguousOffsetsHandComputed) {
  EXPECT_EQ(moekit::contiguous_offsets({0}), (std::vector<int32_t>{0, 0}));
  EXPECT_EQ(moekit::contiguous_offsets({1}), (std::vector<int32_t>{0, 128}));
  EXPECT_EQ(moekit::contiguous_offsets({127}), (std::vector<int32_t>{0, 128}));
  EXPECT_EQ(moekit::contiguous_offsets({128}), (std::vector<int32_t>{0, 128}));
  EXPECT_EQ(moekit::contiguous_offsets({129}), (std::vector<int32_t>{0, 256}));
  EXPECT_EQ(moekit::contiguous_offsets({256, 257}), (std::vector<int32_t>{0, 256, 640}));
  EXPECT_EQ(moekit::contiguous_offsets({3, 0, 200, 128, 129, 0}),
            (std::vector<int32_t>{0, 128, 128, 384, 512, 768, 768}));
  EXPECT_EQ(moekit::contiguous_offsets({32768, 1}), (std::vector<int32_t>{0, 32768, 32896}));
}

TEST(GroupedLayout, ContiguousOffsetsEmptyExperts) {
  EXPECT_EQ(moekit::contiguous_offsets({0, 0, 0, 0}), (std::vector<int32_t>{0, 0, 0, 0, 0}));
  EXPECT_EQ(moekit::contiguous_offsets({0, 5, 0, 0, 7, 0}), (std::vector<int32_t>{0, 0, 128, 128, 128, 256, 256}));
  // No experts at all: the contract says E + 1 entries.
  EXPECT_EQ(moekit::contiguous_offsets({}), (std::vector<int32_t>{0}));
}

TEST(GroupedLayout, ContiguousOffsetsAllToOne) {
  Counts c(384, 0);
  c[200] = 4096 + 3;
  const auto off = moekit::contiguous_offsets(c);
  expect_well_formed(c, off);
  for (size_t e = 0; e <= 200; ++e) EXPECT_EQ(off[e], 0) << e;
  for (size_t e = 201; e <= 384; ++e) EXPECT_EQ(off[e], 4096 + 128) << e;
}

TEST(GroupedLayout, ContiguousOffsetsExactly128And129) {
  // 128 rows fill one aligned segment exactly; 129 spill one row into a second one.
  const auto a = moekit::contiguous_offsets({128, 128, 128});
  EXPECT_EQ(a, (std::vector<int32_t>{0, 128, 256, 384}));
  const auto b = moekit::contiguous_offsets({129, 129, 129});
  EXPECT_EQ(b, (std::vector<int32_t>{0, 256, 512, 768}));
  const auto c = moekit::contiguous_offsets({128, 129, 1, 128});
  EXPECT_EQ(c, (std::vector<int32_t>{0, 128, 384, 512, 640}));
}

TEST(GroupedLayout, ContiguousOffsetsNegativeCountThrows) {
  for (const Counts& c : {Counts{-1}, Counts{5, -1, 3}, Counts{0, 0, -128}}) {
    try {
      (void)moekit::contiguous_offsets(c);
      ADD_FAILURE() << "no error for a negative count";
    } catch (const moekit::Error& e) {
      EXPECT_EQ(e.code(), moekit::ErrorCode::kInvalidArgument) << e.what();
    }
  }
}

TEST(GroupedLayout, ContiguousRowsUpperBoundHandComputed) {
  // total + E * 127, rounded up to 128.
  EXPECT_EQ(moekit::contiguous_rows_upper_bound(0, 1), 128);
  EXPECT_EQ(moekit::contiguous_rows_upper_bound(1, 1), 128);
  EXPECT_EQ(moekit::contiguous_rows_upper_bound(128, 1), 256);
  EXPECT_EQ(moekit::contiguous_rows_upper_bound(129, 1), 256);
  EXPECT_EQ(moekit::contiguous_rows_upper_bound(256, 2), 512);
  EXPECT_EQ(moekit::contiguous_rows_upper_bound(1000, 8), 2048);
  EXPECT_EQ(moekit::contiguous_rows_upper_bound(32768, 4), 33280);
  EXPECT_EQ(moekit::contiguous_rows_upper_bound(0, 384), 48768);
  for (int64_t e : {1, 7, 256, 384})
    for (int64_t t : {0, 1, 127, 128, 129, 5000, 262144})
      EXPECT_EQ(moekit::contiguous_rows_upper_bound(t, e) % moekit::kGroupAlign, 0) << t << " rows, " << e;
}

TEST(GroupedLayout, ContiguousRowsUpperBoundIsReachedByOneRowPerExpert) {
  // E experts with one row each need E full segments: the bound is tight there.
  for (int64_t e : {1, 2, 7, 256, 384}) {
    const Counts c(size_t(e), 1);
    EXPECT_EQ(moekit::contiguous_offsets(c).back(), moekit::contiguous_rows_upper_bound(e, e)) << e;
  }
}

TEST(GroupedLayout, ContiguousRowsUpperBoundCoversRandomCounts) {
  std::mt19937_64 rng(20240603);
  for (int trial = 0; trial < 300; ++trial) {
    const int64_t experts = 1 + int64_t(rng() % 384);
    const int64_t total = trial % 10 == 0 ? int64_t(rng() % 4) : int64_t(rng() % 40000);
    const int64_t bound = moekit::contiguous_rows_upper_bound(total, experts);
    // Several count vectors with the same total all fit in the same allocation.
    for (int rep = 0; rep < 4; ++rep) {
      const Counts c = random_partition(rng, total, experts);
      ASSERT_EQ(sum(c), total);
      const auto off = moekit::contiguous_offsets(c);
      expect_well_formed(c, off);
      EXPECT_LE(off.back(), bound) << "E=" << experts << " total=" << total;
      EXPECT_GE(off.back(), total);
    }
  }
}

// CPU tests of the GEMM configuration heuristic and the shared-memory layout rules.
#include <gtest/gtest.h>

#include <tuple>

#include <array>

#include "gemm/heuristic.h"
#include "kernels/sm90/fp8_gemm_layout.cuh"
#include "moekit/error.h"
#include "moekit/numerics.h"

using moekit::GemmConfig;
using moekit::detail::GemmDeviceLimits;

namespace {

void expect_runnable(const GemmConfig& c, int64_t m, int64_t n, int64_t k, const GemmDeviceLimits& lim) {
  SCOPED_TRACE(::testing::Message() << m << "x" << n << "x" << k << " -> " << c.str());
  EXPECT_EQ(moekit::detail::gemm_config_problem(c, lim), "");
  // With clusters, M blocks are taken in groups of `multicast` (the last may hold a ghost tile).
  const int64_t tiles = moekit::align_up(moekit::ceil_div(m, c.block_m), c.multicast) * moekit::ceil_div(n, c.block_n);
  EXPECT_LE(c.num_sms, lim.num_sms);
  EXPECT_LE(c.num_sms, tiles) << "more CTAs than tiles";
  EXPECT_GE(c.stages, 2);
  EXPECT_EQ(c.num_sms % c.multicast, 0);
}

}  // namespace

TEST(GemmConfig, EveryIssueShapeGetsARunnableConfig) {
  GemmDeviceLimits lim;
  for (int64_t m : {1, 3, 64, 127, 129, 4096, 16384})
    for (auto [n, k] : {std::pair<int64_t, int64_t>{2112, 7168}, {24576, 1536}, {32768, 512}, {7168, 16384},
                        {4096, 7168}, {7168, 2048}, {64, 128}, {2880, 2880}})
      expect_runnable(moekit::detail::select_gemm_config(m, n, k, lim), m, n, k, lim);
}

TEST(GemmConfig, SmallMUsesOneWarpgroupTiles) {
  GemmDeviceLimits lim;
  EXPECT_EQ(moekit::detail::select_gemm_config(1, 7168, 16384, lim).block_m, 64);
  EXPECT_EQ(moekit::detail::select_gemm_config(64, 4096, 7168, lim).block_m, 64);
  // Large M: 256-row tiles (two 128-row waves; docs/performance.md §256-row tiles as two 128-row waves: 4096x7168x16384 741 us vs m128n128
  // 816 us on the H100), unless the caller or the device limits rule them out.
  EXPECT_EQ(moekit::detail::select_gemm_config(4096, 7168, 16384, lim).block_m, 256);
  EXPECT_EQ(moekit::detail::select_gemm_config(4096, 7168, 16384, lim, 1, false, false).block_m, 128);
}

// Groups of 512-1023 rows take 256-row tiles with the TMA store only in long launches, and the
// contiguous layout counts its 256-row units over 128-aligned segments (docs/performance.md §256-row tiles as two 128-row waves, H100: the MoE
// prefill GEMM2, 256 groups of ~512 rows at (7168, 2048), 4030 us vs 4454-4519 with 128-row tiles; 2 x
// 512 masked slower with 3 stages). Short launches (<= 2 waves) take them from 256 rows per group with
// direct stores and 4 stages (docs/performance.md §Direct-store epilogue for short launches).
TEST(GemmConfig, WideTilesForGroupsOf512OnlyInLongLaunches) {
  GemmDeviceLimits lim;
  using moekit::detail::select_gemm_config;
  EXPECT_EQ(select_gemm_config(639, 7168, 2048, lim, 256, false, true, true).block_m, 256);  // T = 16384's GEMM2
  EXPECT_EQ(select_gemm_config(639, 7168, 2048, lim, 256, false, true, false).block_m, 128);  // ceil(639/256) = 3
  EXPECT_EQ(select_gemm_config(255, 7168, 2048, lim, 256, false, true, true).block_m, 128);  // T = 4096's
  EXPECT_EQ(select_gemm_config(700, 4096, 7168, lim, 4, false, true, true).block_m, 128);    // < 8 waves
  EXPECT_EQ(select_gemm_config(256, 7168, 2048, lim, 8, false, true, false).block_m, 128);   // 3.4 waves of m256
  EXPECT_FALSE(select_gemm_config(256, 7168, 2048, lim, 8, false, true, false).direct_store);
}

// DeepGEMM's masked rows (1-2 waves): direct stores, 256 x 128 tiles with 4 stages
// (docs/performance.md §Direct-store epilogue for short launches, H100, kernel-only: 49.0 / 31.9 /
// 51.2 / 32.6 / 60.2 / 37.8 us against 51.8 / 32.9 / 56.8 / 34.8 / 67.0 / 40.5 with the earlier
// TMA-store picks); long launches keep the TMA store (contiguous 4 x 8192, dense M = 4096:
// 1.5-13% slower with direct stores), and so do 64-row tiles, split-K and the MoE GEMM2's epilogue.
TEST(GemmConfig, DirectStoreOnShortLaunches) {
  GemmDeviceLimits lim;
  using moekit::detail::select_gemm_config;
  for (const auto& [groups, m, n, k] : {std::tuple{1, 1024, 4096, 7168}, std::tuple{1, 1024, 7168, 2048},
                                        std::tuple{2, 512, 4096, 7168}, std::tuple{2, 512, 7168, 2048},
                                        std::tuple{4, 256, 4096, 7168}, std::tuple{4, 256, 7168, 2048}}) {
    const GemmConfig c = select_gemm_config(m, n, k, lim, groups, false, true, false);
    SCOPED_TRACE(::testing::Message() << groups << " x " << m << " (" << n << ", " << k << ") -> " << c.str());
    // 4 x 256 (4096, 7168): the model puts both tiles at the DRAM floor and keeps 128 x 128 (6
    // stages; measured 63.0 us against 60.2 for m256n128s4r, both under DeepGEMM's 64.5).
    const bool m128 = groups == 4 && n == 4096;
    EXPECT_EQ(c.block_m, m128 ? 128 : 256);
    EXPECT_EQ(c.block_n, 128);
    EXPECT_EQ(c.stages, m128 ? 6 : 4);
    EXPECT_EQ(c.multicast, 1);
    EXPECT_TRUE(c.direct_store);
    EXPECT_EQ(moekit::detail::gemm_config_problem(c, lim), "");
  }
  EXPECT_TRUE(select_gemm_config(1024, 4096, 7168, lim, 1, true).direct_store);  // dense, one wave
  EXPECT_FALSE(select_gemm_config(8192, 4096, 7168, lim, 4, false, true, true).direct_store);
  EXPECT_FALSE(select_gemm_config(4096, 7168, 16384, lim, 1, true).direct_store);
  EXPECT_FALSE(select_gemm_config(4096, 7168, 2048, lim, 1, true).direct_store);
  for (int64_t m : {1, 16, 64}) {  // decode: 64-row tiles
    const GemmConfig d = select_gemm_config(m, 7168, 2048, lim, 32, false, true, false);
    EXPECT_EQ(d.block_m, 64) << d.str();
    EXPECT_FALSE(d.direct_store) << d.str();
  }
  EXPECT_FALSE(select_gemm_config(64, 7168, 16384, lim, 1, true).direct_store);  // split-K or 64-row tiles
  EXPECT_FALSE(select_gemm_config(128, 32768, 512, lim, 1, true).direct_store);   // 4 K blocks
  EXPECT_TRUE(select_gemm_config(1024, 7168, 1024, lim, 1, true).direct_store);   // 8 K blocks, 1.7 waves
  EXPECT_FALSE(moekit::detail::select_moe_gemm2_config(128, 4, 512, 7168, 2048, lim).direct_store);
}

// 256-row tiles run in pairs sharing A only on long launches (docs/performance.md §Multicast pairs only for long launches, H100: 1.2-1.6% faster
// on 4096x7168x16384 and the contiguous 4 x 8192 cases, 1-3 us slower on one- or two-wave launches).
TEST(GemmConfig, PairsSharingAOnlyForLongLaunches) {
  GemmDeviceLimits lim;
  for (auto [m, n, k, groups] : {std::array<int64_t, 4>{4096, 7168, 16384, 1}, {8192, 7168, 7168, 1},
                                 {8192, 4096, 7168, 4}, {8192, 7168, 2048, 4}}) {
    const GemmConfig c = moekit::detail::select_gemm_config(m, n, k, lim, groups);
    SCOPED_TRACE(::testing::Message() << m << "x" << n << "x" << k << " x" << groups << " -> " << c.str());
    EXPECT_EQ(c.block_m, 256);
    EXPECT_EQ(c.multicast, 2);
    EXPECT_EQ(c.num_sms % 2, 0);
    EXPECT_EQ(moekit::detail::gemm_config_problem(c, lim), "");
  }
  for (auto [m, n, k, groups] : {std::array<int64_t, 4>{1024, 4096, 7168, 1}, {1024, 7168, 2048, 1},
                                 {4096, 7168, 2048, 1}}) {
    const GemmConfig c = moekit::detail::select_gemm_config(m, n, k, lim, groups);
    SCOPED_TRACE(::testing::Message() << m << "x" << n << "x" << k << " x" << groups << " -> " << c.str());
    EXPECT_EQ(c.multicast, 1);
  }
}

// Large-M shapes whose N is not a multiple of 128: the 128-row tiles that straddle B-scale blocks
// (n112, n120, n96) measured slower than n128 on the H100 (docs/performance.md §Tile widths that straddle B-scale blocks: 4096x2112x7168 n112 140 us
// vs n128 128, 4096x2880x7168 n120 173 vs 155, 1024x7168x2048 n112 38.2 vs 34.9).
TEST(GemmConfig, LargeMAvoidsTilesStraddlingScaleBlocks) {
  const GemmDeviceLimits lim;
  for (auto [m, n, k, groups] : {std::array<int64_t, 4>{4096, 2112, 7168, 1}, {4096, 2880, 7168, 1},
                                 {4096, 2880, 2880, 1}, {1024, 7168, 2048, 1}, {512, 2880, 2880, 128}}) {
    const GemmConfig c = moekit::detail::select_gemm_config(m, n, k, lim, groups);
    SCOPED_TRACE(::testing::Message() << m << "x" << n << "x" << k << " x" << groups << " -> " << c.str());
    EXPECT_GE(c.block_m, 128);
    EXPECT_TRUE(c.block_n > 128 || 128 % c.block_n == 0);
  }
}

TEST(GemmConfig, SmallMSpreadsWeightsOverMostSms) {
  // Decode-like shapes are bound by reading B: they need most SMs pulling.
  GemmDeviceLimits lim;
  for (auto [n, k] : {std::pair<int64_t, int64_t>{2112, 7168}, {7168, 16384}, {4096, 7168}}) {
    const GemmConfig c = moekit::detail::select_gemm_config(64, n, k, lim);
    EXPECT_GE(c.num_sms, 100) << n << "x" << k << " -> " << c.str();
  }
}

// Dense decode shapes with few N blocks split K over clusters (measured on the H100,
// docs/performance.md §Split-K over clusters for small-M dense: 64x2112x7168 18.0 us unsplit,
// 14.6 us over 3 CTAs) — in one wave of whole clusters; shapes with enough tiles do not.
TEST(GemmConfig, DenseSmallMSplitsKWhereTilesAreFew) {
  GemmDeviceLimits lim;
  for (int64_t m : {1, 64, 128}) {
    const GemmConfig c = moekit::detail::select_gemm_config(m, 2112, 7168, lim, 1, true);
    EXPECT_GT(c.split_k, 1) << m << " -> " << c.str();
    EXPECT_GE(c.num_sms, 96) << m << " -> " << c.str();
    EXPECT_EQ(c.num_sms % c.split_k, 0) << c.str();
    EXPECT_EQ(moekit::detail::gemm_config_problem(c, lim), "") << c.str();
  }
  EXPECT_EQ(moekit::detail::select_gemm_config(64, 2112, 7168, lim).split_k, 1);  // grouped: never
  for (auto [m, n, k] : {std::tuple<int64_t, int64_t, int64_t>{64, 24576, 1536}, {4096, 7168, 16384}, {64, 32768, 512}})
    EXPECT_EQ(moekit::detail::select_gemm_config(m, n, k, lim, 1, true).split_k, 1) << m << "x" << n << "x" << k;
  // Fewer co-resident clusters than num_sms / size: the grid stays within one wave of them.
  lim.cluster_slots[3] = 30;
  lim.cluster_slots[2] = 60;
  lim.cluster_slots[4] = 20;
  const GemmConfig c = moekit::detail::select_gemm_config(64, 2112, 7168, lim, 1, true);
  if (c.split_k > 1) EXPECT_LE(c.num_sms, lim.cluster_slots[c.split_k] * c.split_k) << c.str();
}

TEST(GemmConfig, StagesRespectSharedMemory) {
  GemmDeviceLimits lim;
  for (int bm : {64, 128, 256})
    for (int bn : {16, 64, 112, 128, 160, 192})
      if (bm < 256 || bn <= 128) {
        const int s = moekit::detail::gemm_max_stages(bm, bn, lim);
        ASSERT_GE(s, 2);
        EXPECT_LE(moekit::sm90::gemm_smem_bytes(bm, bn, s), lim.smem_bytes);
        if (s < 10) EXPECT_GT(moekit::sm90::gemm_smem_bytes(bm, bn, s + 1), lim.smem_bytes);
      }
}

// Direct stores free the bf16 staging tile: one more stage for the tiles the masked rows run
// (256 x 128: 4 instead of 3; 128 x 128: 6 instead of 5), checked by the forced-config check too.
TEST(GemmConfig, DirectStoreFreesTheStagingTile) {
  GemmDeviceLimits lim;
  EXPECT_EQ(moekit::sm90::gemm_bf16_staging_bytes(256, 128, false), 65536u);
  EXPECT_EQ(moekit::sm90::gemm_bf16_staging_bytes(256, 128, true), 0u);
  EXPECT_EQ(moekit::detail::gemm_max_stages(256, 128, lim), 3);
  EXPECT_EQ(moekit::detail::gemm_max_stages(128, 128, lim), 5);
  for (const auto& [bm, bn, s] : {std::tuple{256, 128, 4}, std::tuple{128, 128, 6}}) {
    GemmConfig c{bm, bn, s, 4, 132, 1};
    EXPECT_NE(moekit::detail::gemm_config_problem(c, lim), "") << c.str();  // no room beside the staging tile
    c.direct_store = true;
    EXPECT_EQ(moekit::detail::gemm_config_problem(c, lim), "") << c.str();
    c.stages = s + 1;
    EXPECT_NE(moekit::detail::gemm_config_problem(c, lim), "") << c.str();
    EXPECT_LE(moekit::sm90::gemm_smem_bytes(bm, bn, s, 1, true), lim.smem_bytes);
    EXPECT_GT(moekit::sm90::gemm_smem_bytes(bm, bn, s + 1, 1, true), lim.smem_bytes);
  }
}

TEST(GemmConfig, RejectsBadForcedConfigs) {
  GemmDeviceLimits lim;
  GemmConfig c{128, 128, 4, 8, 132};
  EXPECT_EQ(moekit::detail::gemm_config_problem(c, lim), "");
  c.multicast = 2;
  EXPECT_EQ(moekit::detail::gemm_config_problem(c, lim), "");
  c.num_sms = 131;  // clusters of two need an even grid
  EXPECT_NE(moekit::detail::gemm_config_problem(c, lim), "");
  c.num_sms = 132;
  c.multicast = 3;
  EXPECT_NE(moekit::detail::gemm_config_problem(c, lim), "");
  c.multicast = 1;
  c.block_n = 176;  // would straddle three B-scale blocks
  EXPECT_NE(moekit::detail::gemm_config_problem(c, lim), "");
  c.block_n = 116;  // not a multiple of 8
  EXPECT_NE(moekit::detail::gemm_config_problem(c, lim), "");
  c = {256, 128, 4, 8, 132};  // 256-row tiles: 3 stages fit next to the 64 KiB staging tile, not 4
  EXPECT_NE(moekit::detail::gemm_config_problem(c, lim), "");
  c.stages = 3;
  EXPECT_EQ(moekit::detail::gemm_config_problem(c, lim), "");
  c.block_n = 160;  // two waves of sums: at most 128 columns
  EXPECT_NE(moekit::detail::gemm_config_problem(c, lim), "");
  c = {256, 120, 3, 8, 132, 2};  // pairs sharing A: B is not split, so any block_n <= 128
  EXPECT_EQ(moekit::detail::gemm_config_problem(c, lim), "");
  c.num_sms = 131;  // whole clusters
  EXPECT_NE(moekit::detail::gemm_config_problem(c, lim), "");
  c = {256, 128, 3, 8, 132, 2, 2};  // no split-K
  EXPECT_NE(moekit::detail::gemm_config_problem(c, lim), "");
  c = {512, 128, 2, 8, 132};
  EXPECT_NE(moekit::detail::gemm_config_problem(c, lim), "");
  c = {128, 128, 40, 8, 132};  // far too much shared memory
  EXPECT_NE(moekit::detail::gemm_config_problem(c, lim), "");
  c = {128, 128, 4, 8, 500};
  EXPECT_NE(moekit::detail::gemm_config_problem(c, lim), "");
  // Split-K: 1..8 CTAs per cluster, a grid of whole clusters, no multicast, its partials' memory.
  c = {64, 64, 8, 1, 132, 1, 4};
  EXPECT_EQ(moekit::detail::gemm_config_problem(c, lim), "");
  c.split_k = 8;  // 132 CTAs are not whole clusters of 8
  EXPECT_NE(moekit::detail::gemm_config_problem(c, lim), "");
  c.num_sms = 128;
  EXPECT_EQ(moekit::detail::gemm_config_problem(c, lim), "");
  c.split_k = 9;
  EXPECT_NE(moekit::detail::gemm_config_problem(c, lim), "");
  c.split_k = 0;
  EXPECT_NE(moekit::detail::gemm_config_problem(c, lim), "");
  c = {64, 64, 8, 1, 132, 2, 2};
  EXPECT_NE(moekit::detail::gemm_config_problem(c, lim), "");
  c = {128, 192, 4, 8, 132, 1, 2};  // 4 stages fit without split-K, not with its 96 KiB of partials
  EXPECT_EQ(moekit::detail::gemm_config_problem(GemmConfig{128, 192, 4, 8, 132, 1}, lim), "");
  EXPECT_NE(moekit::detail::gemm_config_problem(c, lim), "");
}

TEST(GemmLayout, SwizzleChoiceTilesBlockN) {
  for (int bn = 16; bn <= 192; bn += 8) {
    if (!moekit::sm90::gemm_block_n_supported(bn)) continue;
    const unsigned sw = moekit::sm90::gemm_d_swizzle_bytes(bn);
    if (sw) EXPECT_EQ((bn * 2) % sw, 0u) << bn;
    EXPECT_EQ(bn % moekit::sm90::gemm_d_box_cols(bn), 0u) << bn;
    EXPECT_EQ(moekit::sm90::gemm_d_box_cols(bn) * 2 % 16, 0u) << bn;  // TMA box rows: 16-byte multiples
  }
  EXPECT_EQ(moekit::sm90::gemm_d_swizzle_bytes(56), 0u);
  EXPECT_EQ(moekit::sm90::gemm_d_box_cols(56), 56u);
  EXPECT_EQ(moekit::sm90::gemm_d_swizzle_bytes(128), 128u);
  EXPECT_EQ(moekit::sm90::gemm_d_swizzle_bytes(96), 64u);
  EXPECT_EQ(moekit::sm90::gemm_d_swizzle_bytes(112), 32u);
}

// The promotion of straddling tiles picks one B scale per group of gcd(128, BLOCK_N) / 8 chunks
// (Fp8GemmTraits::kSbChunkGroup): valid only if every tile's first-block chunk count is a multiple
// of the group, for tiles at multiples of BLOCK_N.
TEST(GemmLayout, FirstScaleBlockEndsOnAChunkGroup) {
  using moekit::sm90::gemm_gcd;
  using moekit::sm90::gemm_sb_first_block_chunks;
  for (unsigned bn = 16; bn <= 192; bn += 8) {
    if (!moekit::sm90::gemm_block_n_supported(int(bn))) continue;
    const unsigned group = unsigned(gemm_gcd(128, int(bn))) / 8;
    for (unsigned j = 0; j < 64; ++j) {
      const unsigned former = gemm_sb_first_block_chunks(j * bn, bn, 128);
      EXPECT_GE(former, 1u) << bn << " tile " << j;
      EXPECT_LE(former, bn / 8) << bn << " tile " << j;
      EXPECT_EQ(former % group, 0u) << bn << " tile " << j;
      // Columns of the first block: up to the next multiple of 128.
      EXPECT_EQ(j * bn + former * 8, former == bn / 8 ? j * bn + bn : (j * bn / 128 + 1) * 128) << bn << " tile " << j;
    }
  }
  EXPECT_EQ(gemm_gcd(128, 192) / 8, 8);
  EXPECT_EQ(gemm_sb_first_block_chunks(192, 192, 128), 8u);   // columns 192..255 in block 1, 256..383 in block 2
  EXPECT_EQ(gemm_sb_first_block_chunks(384, 192, 128), 16u);  // 384..511 in block 3, 512..575 in block 4
}

// Staged B scales (256-row tiles only) fit next to the stages the heuristic counts on.
TEST(GemmLayout, StagedScalesOnlyForWideTiles) {
  EXPECT_EQ(moekit::sm90::gemm_sb_stage_floats(128, 192), 0u);
  EXPECT_EQ(moekit::sm90::gemm_sb_stage_floats(64, 64), 0u);
  EXPECT_EQ(moekit::sm90::gemm_sb_stage_floats(256, 128), moekit::sm90::kGemmMaxStagedKb);
  EXPECT_EQ(moekit::sm90::gemm_sb_stage_floats(256, 96), 2 * moekit::sm90::kGemmMaxStagedKb);
  GemmDeviceLimits lim;
  EXPECT_EQ(moekit::detail::gemm_max_stages(256, 128, lim), 3);
  EXPECT_EQ(moekit::detail::gemm_max_stages(128, 192, lim), 4);
}

TEST(GemmConfig, ParsesItsOwnString) {
  const GemmConfig c{128, 160, 5, 8, 132, 2};
  const GemmConfig p = GemmConfig::parse(c.str());
  EXPECT_EQ(p.block_m, 128);
  EXPECT_EQ(p.block_n, 160);
  EXPECT_EQ(p.stages, 5);
  EXPECT_EQ(p.raster_group, 8);
  EXPECT_EQ(p.num_sms, 132);
  EXPECT_EQ(p.multicast, 2);
  EXPECT_EQ(GemmConfig::parse("m64n32s10g1x128").multicast, 1);
  EXPECT_THROW(GemmConfig::parse("m64n32"), moekit::Error);
  EXPECT_THROW(GemmConfig::parse("m64n32s10g1x128c2junk"), moekit::Error);
  const GemmConfig k4{64, 64, 10, 1, 132, 1, 4};
  EXPECT_EQ(k4.str(), "m64n64s10g1x132c1k4");
  const GemmConfig q = GemmConfig::parse(k4.str());
  EXPECT_EQ(q.split_k, 4);
  EXPECT_EQ(q.multicast, 1);
  EXPECT_EQ(q.num_sms, 132);
  EXPECT_EQ(GemmConfig::parse("m64n32s10g1x128").split_k, 1);
  EXPECT_EQ(GemmConfig{}.str().find('k'), std::string::npos);  // no suffix without split-K
  // Direct stores: the trailing "r", after the other suffixes.
  GemmConfig r{256, 128, 4, 4, 132, 1};
  r.direct_store = true;
  EXPECT_EQ(r.str(), "m256n128s4g4x132c1r");
  EXPECT_TRUE(GemmConfig::parse(r.str()).direct_store);
  EXPECT_EQ(GemmConfig::parse(r.str()).stages, 4);
  const GemmConfig kr = GemmConfig::parse("m64n64s10g1x132c1k4r");
  EXPECT_TRUE(kr.direct_store);
  EXPECT_EQ(kr.split_k, 4);
  EXPECT_EQ(kr.str(), "m64n64s10g1x132c1k4r");
  EXPECT_FALSE(GemmConfig::parse("m64n32s10g1x128c1").direct_store);
  EXPECT_FALSE(GemmConfig{}.direct_store);
  EXPECT_THROW(GemmConfig::parse("m64n32s10g1x128c1rr"), moekit::Error);
  EXPECT_THROW(GemmConfig::parse("m64n32s10g1x128rc1"), moekit::Error);
  EXPECT_THROW(GemmConfig::parse("m64n32s10g1x128c1k"), moekit::Error);
  EXPECT_THROW(GemmConfig::parse("m64n32s10g1x128k2c1"), moekit::Error);
}

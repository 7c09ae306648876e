#include "gemm/heuristic.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "common/check.h"
#include "kernels/sm90/fp8_gemm_layout.cuh"
#include "moekit/numerics.h"

namespace moekit::detail {
namespace {

constexpr int kMaxStages = 10;

// Model constants (H100 SXM; leads, refined by measurement — docs/performance.md §Tile heuristic model).
constexpr double kPeakFp8PerSm = 1.45e15 / 132;  // sustained dense FP8 FLOP/s per SM
constexpr double kL2BytesPerSm = 1.0e11;         // bytes/s one SM can pull through TMA from L2
constexpr double kDramBytes = 3.0e12;            // device memory bytes/s (read + write)
constexpr double kDramBytesPerSm = 2.3e10;       // per pulling CTA (measured: 112 CTAs -> 2.58 TB/s)
constexpr double kTileOverhead = 1.0e-6;         // s per tile: scale loads, epilogue, pipeline fill
// A single M block's A tile read by every CTA at once ("hot" lines): measured on the H100 at
// 64x2112x7168 with 132 CTAs of m64n16, 60 MB of A in a 12.3 us K loop (docs/performance.md §Split-K over clusters for small-M dense).
constexpr double kL2HotBytes = 4.9e12;
// Split-K: the cluster's handover (its barrier, the ranks' skew) and rank 0's DSMEM reads of the
// other ranks' FP32 partials, measured (MOEKIT_TRACE_GEMM, docs/performance.md §Split-K over clusters for small-M dense): 2.1 us for one 32 KB
// partial, 7.4 us for seven.
constexpr double kSplitFixed = 1.3e-6;
constexpr double kDsmemBytes = 3.6e10;           // bytes/s one SM reads from its cluster's peers
// 256-row tiles in pairs sharing A (A multicast, a third fewer L2 -> SM bytes per MMA), measured
// against single CTAs on the H100 (docs/performance.md §Multicast pairs only for long launches): 1.2-1.6% faster on long multi-wave launches
// (contiguous 4 x 8192 (4096, 7168) 1484 vs 1503 us, dense 4096x7168x16384 728 vs 738), but 1-3 us
// slower on one- or two-wave launches (1024x4096x7168 53.8 vs 52.7; masked 1 x 1024 (7168, 2048)
// 36.2 vs 34.6), so the model charges a fixed cost per launch.
constexpr double kPairSpeedup = 0.985;
// Groups of 512-1023 rows take 256-row tiles only in launches of at least this many waves.
constexpr int64_t kWideMinWaves = 8;
constexpr double kPairFixed = 1.5e-6;
// Launches of at most this many waves of tiles (128- and 256-row tiles, no split-K) store D
// straight from registers (GemmConfig::direct_store) and take the stage its staging tile frees.
// Measured on the H100 (docs/performance.md §Direct-store epilogue for short launches), kernel-only: DeepGEMM's six masked rows (1-2 waves) 2-10%
// faster with m256n128s4r than with the TMA-store picks (masked 1 x 1024 (4096, 7168) 51.8 -> 49.0 us:
// the 4th stage removes the CTAs whose K loop ran 6-9 us late), but longer launches slower (the
// direct epilogue issues in ~1.7 us against ~0.9, on every tile's critical path: contiguous 4 x 8192
// (7168, 2048) 758 -> 795 us, dense 4096x7168x2048 105-108 -> 107-121 us).
constexpr int64_t kDirectMaxWaves = 2;
// ... and at least this many K blocks: a short K loop has little to gain from a deeper pipeline and
// its epilogue is a large share of each tile (measured on the H100: 128x32768x512 14% slower with
// a slower epilogue and one more stage; docs/performance.md §Direct-store epilogue for short
// launches).
constexpr int64_t kDirectMinKBlocks = 8;
constexpr int kMaxModelSplit = 4;                // clusters of up to 4 CTAs (of 8, fewer are co-resident)

constexpr int kBlockNs[] = {16, 24, 32, 40, 48, 56, 64, 72, 80, 88, 96, 104, 112, 120, 128, 144, 160, 192};

}  // namespace

namespace {
// Most stages (≤ kMaxStages, 0 if not even 2) that fit next to a staging buffer of `epilogue_smem`
// bytes (~0u: the bf16 D tile) with split-K over `split_k` CTAs.
int stages_that_fit(unsigned epilogue_smem, int bm, int bn, int split_k, const GemmDeviceLimits& lim) {
  const unsigned epi = epilogue_smem == ~0u ? sm90::gemm_smem_d_bytes(bm, bn) : epilogue_smem;
  for (int s = kMaxStages; s >= 2; --s)
    if (sm90::gemm_smem_bytes_with(epi, bm, bn, s, split_k) <= lim.smem_bytes) return s;
  return 0;
}
}  // namespace

int gemm_max_stages(int block_m, int block_n, const GemmDeviceLimits& lim) {
  return stages_that_fit(~0u, block_m, block_n, 1, lim);
}

std::string gemm_config_problem(const GemmConfig& c, const GemmDeviceLimits& lim) {
  if (!sm90::gemm_block_m_supported(c.block_m)) return concat("block_m=", c.block_m, " is not 64, 128 or 256");
  if (c.block_m == 256 && (c.block_n > 128 || c.split_k != 1))
    return concat("block_m=256 needs block_n <= 128 and split_k=1");
  if (!sm90::gemm_block_n_supported(c.block_n))
    return concat("block_n=", c.block_n, " is not a multiple of 8 in [16,128] or one of 144, 160, 192");
  if (c.stages < 2) return concat("stages=", c.stages, " < 2");
  if (c.split_k < 1 || c.split_k > sm90::kGemmMaxSplitK)
    return concat("split_k=", c.split_k, " is not in [1, ", sm90::kGemmMaxSplitK, "]");
  if (c.split_k > 1 && c.multicast != 1) return concat("split_k=", c.split_k, " needs multicast=1");
  if (c.num_sms % c.split_k != 0) return concat("num_sms=", c.num_sms, " is not a multiple of split_k=", c.split_k);
  const unsigned need = sm90::gemm_smem_bytes(c.block_m, c.block_n, c.stages, c.split_k, c.direct_store);
  if (need > lim.smem_bytes)
    return concat("needs ", need, " bytes of shared memory, the device allows ", lim.smem_bytes);
  if (c.num_sms < 1 || c.num_sms > lim.num_sms) return concat("num_sms=", c.num_sms, " out of [1, ", lim.num_sms, "]");
  if (c.raster_group < 1) return concat("raster_group=", c.raster_group, " < 1");
  if (c.multicast != 1 && c.multicast != 2) return concat("multicast=", c.multicast, " is not 1 or 2");
  if (c.num_sms % c.multicast != 0) return concat("num_sms=", c.num_sms, " is not a multiple of multicast=", c.multicast);
  if (!sm90::gemm_cluster_shares_a(c.block_m, c.multicast) && (c.block_n / c.multicast) % 8 != 0)
    return concat("block_n=", c.block_n, " cannot be split ", c.multicast, " ways");
  return {};
}

GemmConfig select_gemm_config(int64_t m, int64_t n, int64_t k, const GemmDeviceLimits& lim, int64_t groups,
                              bool allow_split_k, bool allow_wide, bool contiguous) {
  GemmConfig best;
  double best_time = 1e30;
  m = std::max<int64_t>(m, 1);
  groups = std::max<int64_t>(groups, 1);
  const double unique_bytes = double(groups) * double(m * k + n * k + 2 * m * n);
  const int64_t num_kb = ceil_div(std::max<int64_t>(k, 1), int64_t(kQuantBlock));
  for (int bm : {64, 128, 256}) {
    if (bm == 128 && m <= 64) continue;  // half the tile would be padding
    // 256-row tiles only as 256 x 128 and for groups of >= 1024 rows, or of >= 512 rows in launches
    // of many waves, where they were measured (H100, docs/performance.md §256-row tiles as two 128-row waves): faster at 1024...32768
    // rows per group, and on the MoE layer's prefill GEMM2 (256 groups of ~512 rows, (7168, 2048),
    // T = 16384: 4030 vs 4454-4519 us); 2 x 512 and 4 x 256 masked (7168, 2048) (two waves or
    // fewer) 4% / 3% slower than 128-row tiles with tail halves, T = 4096's GEMM2 (~128 rows per
    // group) 3.7% slower end to end; 4096x2112x7168 m256n64 129.1 us against m128n192 121.0.
    // Also groups of 256-1023 rows in short launches (direct stores, 4 stages; docs/performance.md
    // §Direct-store epilogue for short launches): measured
    // (kernel-only) masked 2 x 512 / 4 x 256 (7168, 2048) 32.6 / 37.8 us against 33.8 / 38.6 with
    // m128n128s6r and 34.8 / 40.7 with m128n128s5; (4096, 7168) 51.2 / 60.2 against 56.8 / 67.0.
    if (bm == 256 && (!allow_wide || m < 256)) continue;
    const int64_t m_blocks = ceil_div(m, bm);
    // Pairs sharing B (mc = 2, block_m <= 128) are supported but not chosen: measured on the H100
    // they were 4-10% slower than mc = 1 with pipelined tiles (docs/performance.md §Pipelined promotion); they stay
    // reachable by forcing them. 256-row tiles are also modelled as pairs sharing A.
    for (int mc : {1, 2}) {
      if (mc == 2 && bm != 256) continue;
      for (int split = 1; split <= (allow_split_k && bm < 256 ? kMaxModelSplit : 1); ++split) {
        if (split > num_kb) break;
        const int64_t max_ctas = lim.max_cluster_ctas(mc * split);
        for (int bn : kBlockNs) {
          if (bm == 256 && bn != 128) continue;
          const bool share_a = sm90::gemm_cluster_shares_a(bm, mc);
          const int64_t row_tiles =
              contiguous && bm == 256 ? ceil_div(groups * ceil_div(m, int64_t(128)), int64_t(2)) : groups * m_blocks;
          const int64_t tiles = share_a ? row_tiles * ceil_div(ceil_div(n, bn), mc) * mc
                                        : groups * ceil_div(m_blocks, mc) * mc * ceil_div(n, bn);  // incl. ghost tiles
          const bool direct = bm >= 128 && split == 1 && num_kb >= kDirectMinKBlocks &&
                              tiles <= kDirectMaxWaves * max_ctas;
          const int stages = stages_that_fit(direct ? 0u : ~0u, bm, bn, split, lim);
          if (stages < 2) continue;
          // Split-K only where its clusters run in one wave (a cluster's tiles queue behind each
          // handover: measured 4x slower with several tiles per cluster).
          if (split > 1 && tiles * split > max_ctas) continue;
          if (bm == 256 && m < 1024 && !direct && (m < 512 || tiles < kWideMinWaves * max_ctas)) continue;
          const int64_t ctas = std::min(tiles * split, max_ctas) / mc * mc;
          const int64_t waves = ceil_div(tiles * split, ctas);
          // K per CTA (the whole K without split-K, as the grouped / MoE selections were calibrated).
          const double k_cta =
              split == 1 ? double(k) : double(ceil_div(num_kb, int64_t(split)) * kQuantBlock);
          // Tiles with block_n <= 128 overlap each warpgroup's FP32 promotion with its own next
          // MMAs (double-buffered accumulators); wider tiles rely on the other warpgroup, and a
          // single warpgroup (block_m 64) cannot hide it at all.
          // Calibrated on the H100 (docs/performance.md §Pipelined promotion): m128n128 pipelined 1237 TFLOPS, m128n160 serial
          // ~1070, m64n128 ~900.
          // 256-row tiles (two 128-row waves, serial per wave) measured 9% more MMA work per second
          // than pipelined 128-row tiles (H100, docs/performance.md §256-row tiles as two 128-row waves: 4096x7168x16384 m256n128 741 us in 7
          // waves vs m128n128 816 us in 14; a stage feeds twice the MMAs for 1.5x the bytes).
          // Serial 128-row tiles 160 and 192 wide pick their B scale per 64 / 32 columns, not per
          // 8-column chunk (Fp8GemmTraits::kSbChunkGroup), and take no issue turns: measured
          // 4096x2112x7168 m128n192 104.8 us, n160 123.5, against m128n128 120.3 (docs/performance.md
          // §Tile widths that straddle B-scale blocks).
          const bool pipelined = bn <= 128;
          const double serial128_eff = bn == 192 ? 0.95 : bn == 160 ? 0.90 : 0.86;
          const double mma_eff = bm == 256 ? 1.09
                                 : bm == 128 ? (pipelined ? 1.0 : serial128_eff)
                                             : (pipelined ? 0.75 : 0.6);
          // Pipelined 128-row tiles whose columns straddle 128-row B-scale blocks measured slower per K
          // block than their width predicts, on the H100 at M = 4096, K = 7168 (docs/performance.md §Tile widths that straddle B-scale blocks): n96
          // 448 ns, n112 500, n120 514 against n128 464 and n64 320 — about 24 more columns' worth
          // (e.g. 4096x2112x7168 n112 140 us vs n128 128, 4096x2880x7168 n120 173 vs 155). Likely cause,
          // not established: their promotion selects each 8-column chunk's B scale at run time.
          const bool straddles = bm >= 128 && pipelined && 128 % bn != 0;
          const int bn_mma = straddles ? bn + 24 : bn;
          const double t_mma = 2.0 * bm * bn_mma * k_cta / (kPeakFp8PerSm * mma_eff);
          // Each CTA pulls its share of the A and B tiles through L2.
          const double t_load =
              (share_a ? double(bm) / mc + double(bn) : double(bm) + double(bn) / mc) * k_cta / kL2BytesPerSm;
          // With one or two M blocks, ctas / m_blocks CTAs read the same A lines at once (calibrated
          // on the dense GEMM only; the grouped and MoE selections keep the model they were measured with).
          const double t_a_hot = allow_split_k && m_blocks * groups <= 2
                                     ? double(ctas) / double(m_blocks) * bm * k_cta / kL2HotBytes
                                     : 0.0;
          const double t_reduce =
              split > 1 ? kSplitFixed + double(split - 1) * bm * bn * 4.0 / kDsmemBytes : 0.0;
          const double dram_floor = unique_bytes / std::min(kDramBytes, double(ctas) * kDramBytesPerSm);
          // With a single M block no other tile reuses a B tile: each CTA streams its tiles' B from
          // DRAM at the per-CTA rate, so a short last wave costs a whole tile's stream.
          const double t_b_stream = m_blocks == 1 ? double(bn) * k_cta / kDramBytesPerSm : 0.0;
          const double t_tile = std::max({t_mma, t_load, t_b_stream, t_a_hot}) + kTileOverhead + t_reduce;
          double t = std::max(double(waves) * t_tile, dram_floor);
          if (share_a) t = t * kPairSpeedup + kPairFixed;
          // On (near) ties prefer less L2 traffic: the larger tile. Split-K and pairs only for a clear
          // gain (the handover, and the pairs' fixed cost, are the least certain terms).
          const bool better =
              split > 1 ? t < best_time * 0.95
                        : t < best_time * 0.99 ||
                              (t <= best_time * 1.01 && mc == best.multicast &&
                               bm * bn > best.block_m * best.block_n);
          if (better) {
            best_time = std::min(t, best_time);
            best.block_m = bm;
            best.block_n = bn;
            best.stages = stages;
            best.multicast = mc;
            best.raster_group = static_cast<int>(std::min<int64_t>(m_blocks * groups, 8));
            best.num_sms = static_cast<int>(ctas);
            best.split_k = split;
            best.direct_store = direct;
          }
        }
      }
    }
  }
  return best;
}

std::vector<GemmConfig> gemm_sweep_candidates(int64_t m, int64_t n, int64_t k, const GemmDeviceLimits& lim) {
  std::vector<GemmConfig> out;
  const int64_t num_kb = ceil_div(std::max<int64_t>(k, 1), int64_t(kQuantBlock));
  for (int bm : {64, 128, 256}) {
    if (bm == 128 && m <= 64) continue;
    if (bm == 256 && m <= 128) continue;
    const int64_t m_blocks = ceil_div(std::max<int64_t>(m, 1), int64_t(bm));
    for (int bn : {32, 64, 96, 128, 160, 192}) {
      if (bm == 256 && bn > 128) continue;
      const int64_t tiles = m_blocks * ceil_div(n, int64_t(bn));
      for (int split : {1, 2, 3, 4, 6, 8}) {
        if (split > num_kb || (split > 1 && (tiles >= 2 * lim.num_sms || bm == 256))) continue;
        GemmConfig c;
        c.block_m = bm;
        c.block_n = bn;
        c.split_k = split;
        c.stages = stages_that_fit(~0u, bm, bn, split, lim);
        c.raster_group = static_cast<int>(std::min<int64_t>(m_blocks, 8));
        c.num_sms = static_cast<int>(std::min<int64_t>(tiles * split, lim.max_cluster_ctas(split)));
        if (c.stages >= 2 && c.num_sms >= split) out.push_back(c);
        if (bm == 256 && c.stages >= 2) {  // also as pairs sharing A (whole clusters, ghost tiles included)
          c.multicast = 2;
          const int64_t pair_tiles = m_blocks * ceil_div(ceil_div(n, int64_t(bn)), int64_t(2)) * 2;
          c.num_sms = static_cast<int>(std::min<int64_t>(pair_tiles, lim.max_cluster_ctas(2)) / 2 * 2);
          out.push_back(c);
        }
      }
    }
  }
  return out;
}

GemmConfig select_moe_gemm1_config(int64_t rows_bound, int64_t n, int64_t rows_per_expert, unsigned epilogue_smem,
                                   const GemmDeviceLimits& lim) {
  GemmConfig c;
  c.block_m = 64;
  c.block_n = 256;
  c.stages = stages_that_fit(epilogue_smem, c.block_m, c.block_n, 1, lim);
  // Measured (docs/performance.md §GEMM1 B-multicast pairs): without pairing, the persistent CTAs that share an
  // expert's B tile drift apart and re-read it from DRAM (GEMM1 at DRAM peak, ~2x the weight bytes).
  // Dynamic scheduling (single CTAs, one pass) keeps them together too, but measured no faster at
  // T = 16384 and 2% slower at T = 4096 than the pairs (which halve B's L2 -> SM traffic), so
  // prefill keeps the pairs (docs/performance.md §GEMM1 B-multicast pairs); they take their units
  // dynamically too (rank 0 claims for both) when the layer passes a tile counter.
  c.multicast = rows_per_expert >= 128 ? 2 : 1;
  c.raster_group = 8;
  const int64_t tiles = std::max<int64_t>(1, rows_bound / c.block_m * ceil_div(n, c.block_n));
  c.num_sms = static_cast<int>(std::min<int64_t>(lim.num_sms, tiles)) / c.multicast * c.multicast;
  if (c.num_sms < c.multicast) {
    c.multicast = 1;
    c.num_sms = 1;
  }
  return c;
}

bool mxfp4_pairs_fit(const GemmConfig& c) {
  return c.multicast == 2 && c.block_m == 64 && sm90::gemm_mx_raw_rows(c.block_n, 2) % 32 == 0;
}

int fit_mxfp4_stages(GemmConfig& c, unsigned epilogue_smem, int stages, const GemmDeviceLimits& lim) {
  c.split_k = 1;
  if (c.block_n % 32 != 0) {  // (the MoE GEMM1's 256 columns, two warpgroups wide, stay)
    c.block_n = static_cast<int>(align_up(c.block_n, 32));
    if (c.block_n > 128 && c.block_n != 160 && c.block_n != 192) c.block_n = 192;
  }
  if (c.block_m == 256 && c.block_n > 128) c.block_n = 128;
  if (!mxfp4_pairs_fit(c)) c.multicast = 1;
  const unsigned epi =
      epilogue_smem == ~0u ? sm90::gemm_bf16_staging_bytes(c.block_m, c.block_n, c.direct_store) : epilogue_smem;
  for (int s = std::max(stages, 2); s >= 2; --s)
    for (int raw = 16; raw >= 2; --raw)
      if (sm90::gemm_smem_bytes_with(epi, c.block_m, c.block_n, s, 1, raw, c.multicast) <= lim.smem_bytes) {
        c.stages = s;
        return raw;
      }
  return 0;
}

GemmConfig select_moe_gemm2_config(int64_t rows_per_group, int64_t groups, int64_t rows_bound, int64_t n, int64_t k,
                                   const GemmDeviceLimits& lim) {
  // No 256-row tiles: the layer runs this GEMM only while y_acc fits in L2 (T·H·4 ≤ 16 MiB, e.g.
  // T ≤ 585 at H = 7168), far below 512 rows per expert. (An earlier "256-row tiles no faster at
  // T = 16384" was not a measurement of this kernel: there the layer runs the rows GEMM2,
  // docs/performance.md §256-row tiles as two 128-row waves.)
  GemmConfig c = select_gemm_config(rows_per_group, n, k, lim, groups, false, false);
  c.multicast = 1;
  c.direct_store = false;  // its own (scatter-add) epilogue
  c.stages = stages_that_fit(0, c.block_m, c.block_n, 1, lim);
  const int64_t tiles = std::max<int64_t>(1, rows_bound / c.block_m * ceil_div(n, c.block_n));
  c.num_sms = static_cast<int>(std::min<int64_t>(lim.num_sms, tiles));
  return c;
}

}  // namespace moekit::detail

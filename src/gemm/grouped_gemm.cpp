// Host side of the grouped (MoE) FP8 GEMMs: layouts, validation, configuration and launch. The
// kernels are the dense GEMM's mainloop with the contiguous or masked tile scheduler.
#include "moekit/grouped_gemm.h"

#include <string>

#include "common/check.h"
#include "gemm/gemm_launch.h"
#include "gemm/heuristic.h"
#include "moekit/numerics.h"
#include "runtime/device.h"
#include "runtime/jit.h"
#include "runtime/knobs.h"

namespace moekit {
namespace detail {
namespace {

void validate_grouped(const char* fn, const GroupedGemmFp8Args& a, int64_t rows) {
  MOEKIT_REQUIRE(a.num_groups >= 1 && a.num_groups < (int64_t(1) << 20), ErrorCode::kInvalidArgument, fn,
                 ": num_groups = ", a.num_groups, " must be in [1, 2^20)");
  validate_nk(fn, a.n, a.k);
  MOEKIT_REQUIRE(a.num_groups * a.n < (int64_t(1) << 31), ErrorCode::kInvalidArgument, fn,
                 ": num_groups * n must be < 2^31");
  MOEKIT_REQUIRE(rows < (int64_t(1) << 31), ErrorCode::kInvalidArgument, fn, ": ", rows, " rows must be < 2^31");
  if (rows > 0) validate_operands(fn, a.k, a.n, a.a, a.lda, a.sa, a.b, a.ldb, a.sb, a.d, a.ldd);
}

// Grouped configurations pair CTAs only along N (256-row tiles sharing A, whose two tiles always
// have the same rows and group); pairs along M would need both tiles in one group.
GemmConfig grouped_config(int64_t m_per_group, int64_t groups, int64_t n, int64_t k, bool contiguous) {
  GemmConfig c = config_override(knobs().grouped_config, select_gemm_config(m_per_group, n, k, device_limits(), groups,
                                                                             false, true, contiguous));
  if (!sm90::gemm_cluster_shares_a(c.block_m, c.multicast)) c.multicast = 1;
  return c;
}

// At most one CTA per tile of an upper bound of `row_tiles` tile rows (ghost tiles of pairs
// included), in whole clusters.
int cluster_ctas(const GemmConfig& c, int64_t row_tiles, int64_t n) {
  const int64_t mc = c.multicast;
  const int64_t tiles = row_tiles * ceil_div(ceil_div(n, c.block_n), mc) * mc;
  return static_cast<int>(std::max<int64_t>(mc, std::min<int64_t>(c.num_sms, tiles) / mc * mc));
}

void launch_grouped(Fp8GemmKernel kernel, const GroupedGemmFp8Args& a, int64_t rows, const GemmConfig& c,
                    const int32_t* offsets, const int32_t* counts, int64_t max_m, cudaStream_t stream,
                    unsigned* tile_counter = nullptr, int mx_stages = 0) {
  sm90::GroupedGemmParams p{};
  if (tile_counter != nullptr) {  // contiguous only: dynamic units in one M-major pass
    p.tile_counter = tile_counter;
    p.sched_one_pass = rows / a.num_groups > 64 ? 1u : 0u;
  }
  p.group_offsets = offsets;
  p.group_counts = counts;
  p.tail_halves = 1;  // masked, and contiguous with 256-row tiles
  p.num_groups = static_cast<unsigned>(a.num_groups);
  p.group_max_m = static_cast<unsigned>(max_m);
  p.d = a.d;
  p.ldd = static_cast<unsigned>(a.ldd);
  const Fp8GemmOperands op{a.a, a.lda, a.sa, a.b, a.ldb, a.sb, a.d, a.ldd, rows, a.num_groups * a.n, a.n, a.k};
  Fp8GemmFamily family;
  family.b_evict_first = max_m > 0;  // masked only (Fp8GemmFamily::b_evict_first)
  family.mx_stages = mx_stages;
  launch_fp8_gemm(c, kernel, op, p, stream, family);
}

// `dynamic`: units are claimed from a tile counter, which only single CTAs do (a pair's CTAs must
// take the same unit); measured on the MoE layer's prefill GEMM2 (H100, docs/performance.md §Multicast pairs only for long launches), dynamic
// single CTAs beat static pairs by 14% (4030 vs 4662 us at T = 16384).
GemmConfig contiguous_config(int64_t rows, int64_t groups, int64_t n, int64_t k, bool dynamic = false) {
  return select_grouped_contiguous_config(rows, groups, n, k, dynamic, device_limits(), knobs().grouped_config);
}

GemmConfig masked_config(int64_t max_m, int64_t groups, int64_t n, int64_t k) {
  GemmConfig c = grouped_config(max_m, groups, n, k, false);
  c.num_sms = cluster_ctas(c, groups * ceil_div(max_m, c.block_m), n);
  return c;
}

void prepare(const GemmConfig& c, Fp8GemmKernel kernel) {
  std::string entry;
  jit::get_kernel(fp8_gemm_kernel_source(c, kernel, &entry), entry);
}

}  // namespace

GemmConfig select_grouped_contiguous_config(int64_t rows, int64_t groups, int64_t n, int64_t k, bool dynamic,
                                            const GemmDeviceLimits& lim, const std::string& forced) {
  GemmConfig c = forced.empty()
                     ? select_gemm_config(std::max<int64_t>(1, rows / groups), n, k, lim, groups, false, true, true)
                     : GemmConfig::parse(forced);
  if (!sm90::gemm_cluster_shares_a(c.block_m, c.multicast)) c.multicast = 1;
  if (dynamic) c.multicast = 1;
  c.num_sms = cluster_ctas(c, ceil_div(rows, c.block_m), n);
  return c;
}

}  // namespace detail

std::vector<int32_t> contiguous_offsets(const std::vector<int32_t>& counts) {
  std::vector<int32_t> offsets(counts.size() + 1, 0);
  int64_t acc = 0;
  for (size_t e = 0; e < counts.size(); ++e) {
    MOEKIT_REQUIRE(counts[e] >= 0, ErrorCode::kInvalidArgument, "moekit::contiguous_offsets: counts[", e, "] = ",
                   counts[e], " is negative");
    acc += align_up(counts[e], kGroupAlign);
    MOEKIT_REQUIRE(acc < (int64_t(1) << 31), ErrorCode::kInvalidArgument,
                   "moekit::contiguous_offsets: the layout exceeds 2^31 rows");
    offsets[e + 1] = static_cast<int32_t>(acc);
  }
  return offsets;
}

int64_t contiguous_rows_upper_bound(int64_t total_rows, int64_t num_groups) {
  MOEKIT_REQUIRE(total_rows >= 0 && num_groups >= 1, ErrorCode::kInvalidArgument,
                 "moekit::contiguous_rows_upper_bound: need total_rows >= 0 and num_groups >= 1");
  return align_up(total_rows + num_groups * (kGroupAlign - 1), kGroupAlign);
}

void grouped_gemm_fp8_contiguous(const GroupedGemmFp8Args& a, int64_t rows, const int32_t* offsets,
                                 const int32_t* counts, cudaStream_t stream) {
  detail::grouped_gemm_fp8_contiguous_counted(a, rows, offsets, counts, nullptr, stream);
}

void detail::grouped_gemm_fp8_contiguous_counted(const GroupedGemmFp8Args& a, int64_t rows, const int32_t* offsets,
                                                 const int32_t* counts, unsigned* tile_counter, cudaStream_t stream,
                                                 const GemmConfig* config, int mx_stages) {
  constexpr const char* fn = "moekit::grouped_gemm_fp8_contiguous";
  MOEKIT_REQUIRE(rows >= 0 && rows % kGroupAlign == 0, ErrorCode::kInvalidArgument, fn, ": rows = ", rows,
                 " must be a non-negative multiple of ", kGroupAlign);
  detail::validate_grouped(fn, a, rows);
  if (rows == 0) return;
  MOEKIT_REQUIRE(offsets && counts, ErrorCode::kInvalidArgument, fn, ": offsets and counts are required");
  detail::require_sm90(fn);
  const GemmConfig c = config ? *config : detail::contiguous_config(rows, a.num_groups, a.n, a.k, tile_counter != nullptr);
  detail::launch_grouped(mx_stages ? detail::Fp8GemmKernel::kContiguousMxfp4 : detail::Fp8GemmKernel::kContiguous, a,
                         rows, c, offsets, counts, 0, stream, tile_counter, mx_stages);
}

void grouped_gemm_fp8_masked(const GroupedGemmFp8Args& a, int64_t max_m, const int32_t* counts, cudaStream_t stream) {
  constexpr const char* fn = "moekit::grouped_gemm_fp8_masked";
  MOEKIT_REQUIRE(max_m >= 1, ErrorCode::kInvalidArgument, fn, ": max_m = ", max_m, " must be >= 1");
  const int64_t rows = a.num_groups * max_m;
  detail::validate_grouped(fn, a, rows);
  MOEKIT_REQUIRE(counts, ErrorCode::kInvalidArgument, fn, ": counts is required");
  detail::require_sm90(fn);
  const GemmConfig c = detail::masked_config(max_m, a.num_groups, a.n, a.k);
  detail::launch_grouped(detail::Fp8GemmKernel::kMasked, a, rows, c, nullptr, counts, max_m, stream);
}

void grouped_gemm_fp8_prepare_contiguous(int64_t rows, int64_t num_groups, int64_t n, int64_t k) {
  detail::require_sm90("moekit::grouped_gemm_fp8_prepare_contiguous");
  MOEKIT_REQUIRE(rows > 0 && num_groups >= 1, ErrorCode::kInvalidArgument,
                 "moekit::grouped_gemm_fp8_prepare_contiguous: need rows > 0 and num_groups >= 1");
  detail::prepare(detail::contiguous_config(rows, num_groups, n, k), detail::Fp8GemmKernel::kContiguous);
}

void grouped_gemm_fp8_prepare_masked(int64_t max_m, int64_t num_groups, int64_t n, int64_t k) {
  detail::require_sm90("moekit::grouped_gemm_fp8_prepare_masked");
  MOEKIT_REQUIRE(max_m >= 1 && num_groups >= 1, ErrorCode::kInvalidArgument,
                 "moekit::grouped_gemm_fp8_prepare_masked: need max_m >= 1 and num_groups >= 1");
  detail::prepare(detail::masked_config(max_m, num_groups, n, k), detail::Fp8GemmKernel::kMasked);
}

}  // namespace moekit

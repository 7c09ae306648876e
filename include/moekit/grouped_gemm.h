// moekit — grouped FP8 block-scaled GEMMs for Mixture-of-Experts (SPEC §4).
//
// All groups (experts) share N and K; group e multiplies its rows of A by its own B[e] (N x K FP8,
// 128x128 FP32 scales). Only M is grouped. Two layouts:
//
//  * Contiguous (prefill): A is one [rows, K] tensor whose rows are sorted by expert; expert e owns
//    rows [offsets[e], offsets[e] + counts[e]) and its segment is padded to a multiple of
//    kGroupAlign rows, so offsets[e+1] = offsets[e] + align_up(counts[e], kGroupAlign).
//    `offsets` (E + 1 entries) and `counts` (E) live in device memory; the kernel finds each
//    M-tile's expert by binary search in `offsets` and its valid rows from `counts`. Padding rows
//    of D are never written. The grid is sized from the allocated `rows` (an upper bound), never
//    from device values: no host synchronization.
//  * Masked (decode): A is [E, max_m, K], `counts[E]` in device memory; rows of expert e at or past
//    counts[e] are neither computed nor written. D is [E, max_m, N]. Capturable in a CUDA graph;
//    replays follow the counts in device memory at replay time.
//
// Both run the same kernel mainloop as the dense GEMM (moekit/gemm.h) with a grouped tile
// scheduler, and throw moekit::Error on invalid arguments.
#pragma once
#include <cstdint>
#include <vector>
#include <cuda_runtime_api.h>

namespace moekit {

/// Row alignment of every expert's segment in the contiguous layout (the largest BLOCK_M).
inline constexpr int64_t kGroupAlign = 128;

/// Operands shared by both grouped layouts. All pointers are device pointers.
struct GroupedGemmFp8Args {
  int64_t num_groups = 0;    ///< E ≥ 1
  int64_t n = 0;             ///< n ≥ 8, n % 8 == 0
  int64_t k = 0;             ///< k ≥ 16, k % 16 == 0
  const void* a = nullptr;   ///< FP8 A rows (layout-specific count), row stride lda
  int64_t lda = 0;           ///< ≥ k, % 16 == 0
  /// A scales, physical layout [ceil(k/128), sfa_ld(R)] where R is the number of A rows the call
  /// covers: the allocated `rows` (contiguous) or E * max_m (masked), not the valid rows.
  const float* sa = nullptr;
  const void* b = nullptr;   ///< FP8 B [E, n, k]: group e's row j at b + (e*n + j)*ldb
  int64_t ldb = 0;           ///< ≥ k, % 16 == 0
  const float* sb = nullptr; ///< B scales [E, ceil(n/128), ceil(k/128)] row-major
  void* d = nullptr;         ///< bf16 D rows (same row count R as A), row stride ldd
  int64_t ldd = 0;           ///< ≥ n, % 8 == 0
};

/// Host reference of the contiguous layout: offsets[0] = 0,
/// offsets[e+1] = offsets[e] + align_up(counts[e], kGroupAlign). Returns E + 1 entries ({0} for
/// no groups). Throws kInvalidArgument on a negative count or a layout of 2^31 rows or more.
std::vector<int32_t> contiguous_offsets(const std::vector<int32_t>& counts);

/// Rows a contiguous layout of `total_rows` real rows over `num_groups` experts can need at most:
/// total_rows + num_groups * (kGroupAlign - 1), rounded up to kGroupAlign. Allocate A and D with
/// this many rows to stay free of host synchronization. Throws kInvalidArgument for
/// total_rows < 0 or num_groups < 1.
int64_t contiguous_rows_upper_bound(int64_t total_rows, int64_t num_groups);

/// Device version of contiguous_offsets: reads counts[E] and writes offsets[E+1] on `stream`
/// (one small kernel; no host synchronization; graph-capturable). Same values as the host one;
/// a negative count (which the host version rejects) counts as 0. Needs num_groups ≥ 1.
void contiguous_offsets_device(const int32_t* counts, int64_t num_groups, int32_t* offsets, cudaStream_t stream);

/// Contiguous grouped GEMM over `rows` allocated rows of A and D (rows ≥ 0, rows % kGroupAlign
/// == 0; rows == 0 does nothing after validating the other arguments). Rows past offsets[E] are
/// ignored; if offsets[E] exceeds `rows`, only the first `rows` rows are computed. A count larger
/// than its aligned segment is clamped to the segment. Requires num_groups * n < 2^31.
void grouped_gemm_fp8_contiguous(const GroupedGemmFp8Args& args, int64_t rows, const int32_t* offsets,
                                 const int32_t* counts, cudaStream_t stream);

/// Masked grouped GEMM: A [E, max_m, K] (row e*max_m + i, stride lda), D [E, max_m, N] (row
/// stride ldd); counts[e] valid rows per group, clamped to [0, max_m] (negative counts as 0).
/// Requires num_groups * n < 2^31 and num_groups * max_m < 2^31.
void grouped_gemm_fp8_masked(const GroupedGemmFp8Args& args, int64_t max_m, const int32_t* counts,
                             cudaStream_t stream);

/// Compile (or load from the disk cache) the kernel a later call with the same shapes will use,
/// so that call can be captured in a CUDA graph. The configuration depends only on these host
/// values (rows / E or max_m, E, n, k), never on device counts.
void grouped_gemm_fp8_prepare_contiguous(int64_t rows, int64_t num_groups, int64_t n, int64_t k);
void grouped_gemm_fp8_prepare_masked(int64_t max_m, int64_t num_groups, int64_t n, int64_t k);

}  // namespace moekit

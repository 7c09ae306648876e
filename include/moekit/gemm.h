// moekit — FP8 block-scaled GEMM on Hopper (sm_90a).
//
//   D[m, n] (bf16) = Σ_kb sa[m, kb] · sb[n/128, kb] · Σ_{k∈kb} A[m, k] · B[n, k]
//
// A is FP8 E4M3 [M, K] row-major with one FP32 scale per 1x128 block (physical layout of
// numerics.h, K-block-major), B is FP8 E4M3 [N, K] row-major ("NT") with one FP32 scale per
// 128x128 block ([ceil(N/128), ceil(K/128)] row-major). Accumulation is two-level: each K block's
// tensor-core partial sum is promoted into FP32 registers with its scales.
//
// Kernels are specialized per tile configuration and compiled at first use with NVRTC; the
// result is cached in memory and on disk (MOEKIT_CACHE_DIR, default ~/.cache/moekit). See
// docs/design.md.
#pragma once
#include <cstdint>
#include <string>
#include <cuda_runtime_api.h>

namespace moekit {

/// Arguments of one dense block-scaled FP8 GEMM. All pointers are device pointers.
struct GemmFp8Args {
  int64_t m = 0;  ///< rows of A and D; any m ≥ 0 (m == 0 is a no-op)
  int64_t n = 0;  ///< rows of B, columns of D; n ≥ 8, n % 8 == 0 (16-byte rows of D)
  int64_t k = 0;  ///< reduction size; k ≥ 16, k % 16 == 0 (16-byte rows of A and B)
  const void* a = nullptr;   ///< FP8 E4M3 [m, k]; 16-byte aligned
  int64_t lda = 0;           ///< row stride of A in elements (bytes); lda ≥ k, lda % 16 == 0
  const float* sa = nullptr; ///< A scales, physical layout [ceil(k/128), sfa_ld(m)]; 16-byte aligned
  const void* b = nullptr;   ///< FP8 E4M3 [n, k]; 16-byte aligned
  int64_t ldb = 0;           ///< row stride of B in elements; ldb ≥ k, ldb % 16 == 0
  const float* sb = nullptr; ///< B scales [ceil(n/128), ceil(k/128)] row-major; 4-byte aligned
  void* d = nullptr;         ///< bf16 [m, n]; 16-byte aligned
  int64_t ldd = 0;           ///< row stride of D in elements; ldd ≥ n, ldd % 8 == 0
};

/// A kernel tile configuration. Normally chosen by moekit's heuristic; tests and benchmarks may
/// force one. block_m ∈ {64, 128, 256}; block_n a multiple of 8 in [16, 128] or one of
/// {144, 160, 192} (≤ 128 with block_m 256, which also needs split_k = 1);
/// stages ≥ 2 and small enough for shared memory.
struct GemmConfig {
  int block_m = 0;
  int block_n = 0;
  int stages = 0;
  int raster_group = 0;  ///< tiles are visited in groups of this many M blocks (L2 reuse)
  int num_sms = 0;       ///< persistent CTAs launched (≤ multiprocessor count, a multiple of multicast)
  /// CTAs per thread-block cluster (1 or 2), sharing an operand by TMA multicast. With 2 and
  /// block_m ≤ 128, the two CTAs compute vertically adjacent tiles and each loads half of their
  /// common B tile for both; with block_m 256 they compute horizontally adjacent tiles and each
  /// loads one of the two 128-row halves of their common A tile for both.
  int multicast = 1;
  /// CTAs that share each tile's K blocks (1 ... 8; dense GEMM only, with multicast = 1). With S > 1
  /// the S CTAs of a thread-block cluster each accumulate about num_kb / S K blocks of the same tile
  /// and the first adds the others' FP32 partial sums from their shared memory (no workspace; the
  /// sum order is fixed, so results are deterministic) — for shapes with too few tiles to fill the
  /// GPU (small M). num_sms must be a multiple of S, and S ≤ ceil(k / 128).
  int split_k = 1;
  /// The bf16 D tile goes from registers straight to global memory (16-byte stores after a
  /// transpose inside each quad of lanes) instead of through a shared-memory staging tile and the
  /// TMA store; the BLOCK_M x BLOCK_N x 2 bytes this frees hold more pipeline stages (256 x 128
  /// tiles: 4 instead of 3; 128 x 128: 6 instead of 5). Dense and grouped bf16 GEMMs only.
  bool direct_store = false;
  /// Human-readable form, e.g. "m128n128s5g8x132c2", "m64n64s10g1x132c1k4" with split_k = 4, or
  /// "m256n128s4g4x132c1r" with direct_store.
  std::string str() const;
  /// Parses str()'s form (the trailing "c<multicast>", "k<split_k>" and "r" may be omitted). Throws
  /// moekit::Error(kInvalidArgument) on malformed text; does not check that the config can run.
  static GemmConfig parse(const std::string& text);
};

/// The configuration gemm_fp8_nt would use for this shape on the current device.
GemmConfig gemm_fp8_select_config(int64_t m, int64_t n, int64_t k);

/// Runs D = A·Bᵀ with block scales on `stream` (asynchronous, graph-capturable once the kernel is
/// compiled — call it once outside capture, or call gemm_fp8_prepare, to compile it first).
/// Validates every argument and the device (sm_90) and throws moekit::Error on failure.
/// Thread-safe: concurrent calls on different streams are allowed.
void gemm_fp8_nt(const GemmFp8Args& args, cudaStream_t stream);

/// Same, with a forced configuration (validated; throws kInvalidArgument if it cannot run).
void gemm_fp8_nt(const GemmFp8Args& args, const GemmConfig& config, cudaStream_t stream);

/// Compiles (or loads from the disk cache) the kernel for this shape's configuration without
/// launching anything, so a later call can be captured in a CUDA graph.
void gemm_fp8_prepare(int64_t m, int64_t n, int64_t k);

}  // namespace moekit

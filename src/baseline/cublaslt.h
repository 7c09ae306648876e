// cuBLASLt baselines for the benchmarks and tests: the block-scaled FP8 GEMM with exactly
// moekit's semantics (gemm.h), the FP8 GEMM with per-tensor scales (a ceiling, not the same math),
// and a plain BF16 GEMM of the same shape.
//
// Mapping. moekit computes D[m, n] (bf16, row-major) = A[m, k] · B[n, k]ᵀ. cuBLASLt is
// column-major, and a row-major D[m, n] is the column-major matrix Dᵀ[n, m] = B · Aᵀ, so:
//   cuBLASLt A := our B, stored column-major K x N (ld = ldb), TRANSA = T  → op(A) is N x K
//   cuBLASLt B := our A, stored column-major K x M (ld = lda), TRANSB = N  → op(B) is K x M
//   cuBLASLt D := our D, column-major N x M (ld = ldd);  cuBLASLt (m, n, k) = our (n, m, k).
// This is the "TN" form cuBLASLt requires for FP8 on Hopper.
//
// Scales (cuBLAS documentation, section 3.1.4.5 "128-element 1D and 128x128 2D Block Scaling For
// FP8 Data Types" and 3.1.4.5.1 "Scaling factors layouts"):
//   * our B (128x128 blocks) is cuBLASLt's A with CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F:
//     K-major, shape L4 x ceil(N/128) with L = ceil(K/128) and L4 = L rounded up to a multiple of
//     4, i.e. sb_lt[nb * L4 + kb]. Ours is sb[nb * L + kb], so prepare_fp8 re-strides it.
//   * our A (1x128 blocks) is cuBLASLt's B with CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F: N-major
//     (cuBLASLt's N = our M), shape M x L, i.e. sa_lt[kb * M + row]. Ours is
//     sa[kb * sfa_ld(M) + row] with sfa_ld(M) = align_up(M, 4), identical once M % 4 == 0.
//   * cuBLASLt requires M and N (both of its dimensions) to be multiples of 4 and 16-byte aligned
//     scale pointers; other shapes are reported as unsupported (LtStatus), never run.
// BLK128x128 on cuBLASLt's A with VEC128 on its B is one of the three supported combinations.
//
// The class is not thread-safe; use one instance per thread.
#pragma once
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>
#include <cuda_runtime_api.h>

#include "moekit/gemm.h"
#include "runtime/device_buffer.h"

namespace moekit::baseline {

/// Outcome of a baseline call that may legitimately be unavailable for a shape (cuBLASLt reports
/// the configuration unsupported, or a documented restriction is not met). Real failures (CUDA
/// errors, invalid arguments, other cuBLAS errors) throw moekit::Error instead.
struct LtStatus {
  bool ok = true;
  std::string message;  ///< why not, when !ok (already names cuBLASLt and the shape)
  explicit operator bool() const { return ok; }
  static LtStatus success() { return {}; }
  static LtStatus unsupported(std::string why) { return {false, std::move(why)}; }
};

/// Plain BF16 GEMM D[m, n] = A[m, k] · B[n, k]ᵀ, all bf16 row-major (FP32 accumulation); with
/// `b_kn`, B is stored [k, n] row-major and D = A · B. `batch` > 1: that many GEMMs, the i-th's
/// matrices `stride_*` elements after the (i−1)-th's.
struct GemmBf16Args {
  int64_t m = 0, n = 0, k = 0;
  const void* a = nullptr;  ///< bf16 [m, k], row stride lda elements
  int64_t lda = 0;
  const void* b = nullptr;  ///< bf16 [n, k], row stride ldb elements
  int64_t ldb = 0;
  void* d = nullptr;        ///< bf16 [m, n], row stride ldd elements
  int64_t ldd = 0;
  bool b_kn = false;
  int64_t batch = 1, stride_a = 0, stride_b = 0, stride_d = 0;
};

class CublasLt {
 public:
  static constexpr size_t kDefaultWorkspaceBytes = size_t(32) << 20;

  /// Creates the cuBLASLt handle and the workspace on the current device.
  explicit CublasLt(size_t workspace_bytes = kDefaultWorkspaceBytes);
  ~CublasLt();
  CublasLt(const CublasLt&) = delete;
  CublasLt& operator=(const CublasLt&) = delete;

  /// Converts the scales of `args` (moekit layouts, gemm.h) into cuBLASLt's layouts in buffers
  /// owned by this object under `slot` (one slot per rotating input set), enqueued on `stream`,
  /// and selects (once per shape) the cuBLASLt algorithm. Run it again whenever the scale
  /// contents change. Returns !ok when cuBLASLt cannot run this shape.
  /// `sa_ld` (0: sfa_ld(args.m)) is the leading dimension of args.sa in floats, so args.sa may be
  /// the rows [r0, r0 + m) of a larger physical A-scale tensor (pass its sfa_ld(rows) and
  /// sa + r0, r0 a multiple of 4).
  LtStatus prepare_fp8(const GemmFp8Args& args, cudaStream_t stream, int slot = 0, int64_t sa_ld = 0);

  /// Re-converts only the A scales of a slot prepared by prepare_fp8 with the same args.sa and
  /// shape (one 2D copy on `stream`): for A scales whose contents change every call (an MoE
  /// layer's activations), while the B scales stay as converted.
  void refresh_sa_fp8(const GemmFp8Args& args, cudaStream_t stream, int slot, int64_t sa_ld = 0);

  /// Runs the block-scaled FP8 GEMM for `args` with the scales converted by prepare_fp8 under
  /// `slot` (args.sa / args.sb and the shape must be those that slot was prepared with; a, b, d
  /// may differ). Only cublasLtMatmul is enqueued. Returns !ok when cuBLASLt cannot run it.
  LtStatus gemm_fp8(const GemmFp8Args& args, cudaStream_t stream, int slot = 0);

  /// cuBLASLt's FP8 GEMM on the operands of `args` with per-tensor scales (none set, i.e. 1) instead
  /// of block scales; args.sa / args.sb are ignored. Not moekit's math: the same MMAs without the
  /// per-128-K promotion, so a ceiling for block-scaled kernels in the benchmarks. Returns !ok when
  /// cuBLASLt cannot run it.
  LtStatus gemm_fp8_tensor_scaled(const GemmFp8Args& args, cudaStream_t stream);

  /// Plain BF16 GEMM of the same orientation. Returns !ok when cuBLASLt cannot run it.
  LtStatus gemm_bf16(const GemmBf16Args& args, cudaStream_t stream);

  /// "cuBLASLt 13.0.0" (the library loaded at run time).
  static std::string version();

 private:
  struct Plan;
  struct Slot {
    detail::DeviceBuffer sa_lt, sb_lt;  ///< converted scales (cuBLASLt layouts)
    const float* src_sa = nullptr;      ///< what they were converted from
    const float* src_sb = nullptr;
    int64_t m = -1, n = -1, k = -1;
    std::string why;                    ///< non-empty when cuBLASLt cannot run this slot's shape
  };
  // kind (0 = fp8 block-scaled, 1 = bf16, 2 = fp8 per-tensor scales, 3 = bf16 with B [k, n]), m,
  // n, k, lda, ldb, ldd, batch, stride_a, stride_b, stride_d
  using PlanKey = std::tuple<int, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t,
                             int64_t>;

  Plan& plan_fp8(const GemmFp8Args& args, const Slot* slot);  ///< slot null: per-tensor scales
  Plan& plan_bf16(const GemmBf16Args& args);
  /// cublasLtMatmul of plan `p` on our A, B, D (`what` names the GEMM in errors).
  LtStatus matmul(Plan& p, const void* a, const void* b, void* d, const std::string& shape, const char* what,
                  cudaStream_t stream);

  void* handle_ = nullptr;  ///< cublasLtHandle_t
  detail::DeviceBuffer workspace_;
  std::map<PlanKey, std::unique_ptr<Plan>> plans_;
  std::vector<Slot> slots_;
};

}  // namespace moekit::baseline

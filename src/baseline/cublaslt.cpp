// cuBLASLt baselines (see cublaslt.h for how moekit's row-major NT GEMM and its scale layouts map
// onto cuBLASLt's column-major TN GEMM).
#include "baseline/cublaslt.h"

#include <cublasLt.h>

#include "common/check.h"
#include "moekit/numerics.h"

namespace moekit::baseline {
namespace {

cublasLtHandle_t as_handle(void* h) { return static_cast<cublasLtHandle_t>(h); }

std::string status_text(cublasStatus_t s) {
  const char* name = cublasLtGetStatusName(s);
  const char* text = cublasLtGetStatusString(s);
  return detail::concat(name ? name : "CUBLAS_STATUS_?", " (", text ? text : "unknown", ")");
}

/// cuBLASLt's answers for "this configuration cannot run here", as opposed to a real failure.
/// (cublasLt.h: unsupported data/scale/compute-type combinations return CUBLAS_STATUS_INVALID_VALUE.)
bool is_unsupported(cublasStatus_t s) {
  return s == CUBLAS_STATUS_NOT_SUPPORTED || s == CUBLAS_STATUS_INVALID_VALUE ||
         s == CUBLAS_STATUS_ARCH_MISMATCH;
}

void check_lt(cublasStatus_t s, const char* what) {
  if (s != CUBLAS_STATUS_SUCCESS)
    detail::throw_error(ErrorCode::kCudaError,
                        detail::concat("moekit::baseline: cuBLASLt ", what, " failed: ", status_text(s)));
}

std::string shape_str(int64_t m, int64_t n, int64_t k) { return detail::concat(m, "x", n, "x", k); }

/// Shape, strides and (for m > 0) pointers of a call without a prepared slot; `fn` names it.
template <class Args>
void require_args(const char* fn, const Args& a) {
  MOEKIT_REQUIRE(a.m >= 0 && a.n > 0 && a.k > 0, ErrorCode::kInvalidArgument, fn, ": bad shape m=", a.m, " n=", a.n,
                 " k=", a.k);
  MOEKIT_REQUIRE(a.lda >= a.k && a.ldb >= a.k && a.ldd >= a.n, ErrorCode::kInvalidArgument, fn,
                 ": strides too small (lda=", a.lda, " ldb=", a.ldb, " ldd=", a.ldd, ")");
  MOEKIT_REQUIRE(a.m == 0 || (a.a && a.b && a.d), ErrorCode::kInvalidArgument, fn, ": null pointer");
}

bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; }

class PreferenceGuard {
 public:
  PreferenceGuard() { check_lt(cublasLtMatmulPreferenceCreate(&p_), "cublasLtMatmulPreferenceCreate"); }
  ~PreferenceGuard() {
    if (p_) cublasLtMatmulPreferenceDestroy(p_);
  }
  PreferenceGuard(const PreferenceGuard&) = delete;
  PreferenceGuard& operator=(const PreferenceGuard&) = delete;
  cublasLtMatmulPreference_t get() const { return p_; }

 private:
  cublasLtMatmulPreference_t p_ = nullptr;
};

constexpr float kOne = 1.0f;
constexpr float kZero = 0.0f;

}  // namespace

/// A matmul descriptor, its layouts and the selected algorithm for one shape. C aliases D
/// (beta = 0), so one layout serves both.
struct CublasLt::Plan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
  cublasLtMatmulAlgo_t algo{};
  bool supported = false;
  std::string why;  ///< the reason, when !supported

  Plan() = default;
  Plan(const Plan&) = delete;
  Plan& operator=(const Plan&) = delete;
  ~Plan() {
    if (d) cublasLtMatrixLayoutDestroy(d);
    if (b) cublasLtMatrixLayoutDestroy(b);
    if (a) cublasLtMatrixLayoutDestroy(a);
    if (desc) cublasLtMatmulDescDestroy(desc);
  }

  /// Sets an attribute; an "unsupported" answer marks the plan unsupported (returns false), any
  /// other failure throws.
  template <typename T>
  bool set(cublasLtMatmulDescAttributes_t attr, const T& value, const char* name) {
    const cublasStatus_t s = cublasLtMatmulDescSetAttribute(desc, attr, &value, sizeof(T));
    if (s == CUBLAS_STATUS_SUCCESS) return true;
    if (!is_unsupported(s)) check_lt(s, name);
    why = detail::concat("cuBLASLt rejects ", name, ": ", status_text(s));
    return false;
  }

  bool layout(cublasLtMatrixLayout_t* out, cudaDataType type, int64_t rows, int64_t cols, int64_t ld) {
    const cublasStatus_t s = cublasLtMatrixLayoutCreate(out, type, static_cast<uint64_t>(rows),
                                                        static_cast<uint64_t>(cols), ld);
    if (s == CUBLAS_STATUS_SUCCESS) return true;
    if (!is_unsupported(s)) check_lt(s, "cublasLtMatrixLayoutCreate");
    why = detail::concat("cuBLASLt rejects a ", rows, "x", cols, " (ld ", ld, ") layout: ", status_text(s));
    return false;
  }

  /// Asks the heuristic for candidates and keeps the best one that fits the workspace.
  void select(cublasLtHandle_t handle, size_t workspace_bytes, const std::string& label) {
    PreferenceGuard pref;
    const uint64_t ws = workspace_bytes;
    check_lt(cublasLtMatmulPreferenceSetAttribute(pref.get(), CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws,
                                                  sizeof ws),
             "cublasLtMatmulPreferenceSetAttribute(MAX_WORKSPACE_BYTES)");
    constexpr int kWanted = 8;
    cublasLtMatmulHeuristicResult_t results[kWanted] = {};
    int count = 0;
    const cublasStatus_t s =
        cublasLtMatmulAlgoGetHeuristic(handle, desc, a, b, d, d, pref.get(), kWanted, results, &count);
    if (is_unsupported(s)) {
      why = detail::concat("cuBLASLt has no ", label, " kernel: ", status_text(s));
      return;
    }
    check_lt(s, "cublasLtMatmulAlgoGetHeuristic");
    for (int i = 0; i < count; ++i) {
      if (results[i].state == CUBLAS_STATUS_SUCCESS && results[i].workspaceSize <= workspace_bytes) {
        algo = results[i].algo;
        supported = true;
        return;
      }
    }
    why = detail::concat("cuBLASLt has no ", label, " kernel (the heuristic returned ", count,
                         " candidates, none usable)");
  }
};

CublasLt::CublasLt(size_t workspace_bytes) : workspace_(workspace_bytes) {
  cublasLtHandle_t h = nullptr;
  check_lt(cublasLtCreate(&h), "cublasLtCreate");
  handle_ = h;
}

CublasLt::~CublasLt() {
  plans_.clear();  // descriptors before the handle
  if (handle_) cublasLtDestroy(as_handle(handle_));
}

std::string CublasLt::version() {
  const size_t v = cublasLtGetVersion();  // e.g. 130000 for 13.0.0
  return detail::concat("cuBLASLt ", v / 10000, ".", (v / 100) % 100, ".", v % 100);
}

// ---------------------------------------------------------------------------------------------
// Block-scaled FP8
// ---------------------------------------------------------------------------------------------

LtStatus CublasLt::prepare_fp8(const GemmFp8Args& args, cudaStream_t stream, int slot_index, int64_t sa_ld) {
  const int64_t m = args.m, n = args.n, k = args.k;
  MOEKIT_REQUIRE(slot_index >= 0, ErrorCode::kInvalidArgument, "CublasLt::prepare_fp8: slot ", slot_index,
                 " < 0");
  MOEKIT_REQUIRE(m >= 0 && n > 0 && k > 0, ErrorCode::kInvalidArgument,
                 "CublasLt::prepare_fp8: bad shape m=", m, " n=", n, " k=", k);
  MOEKIT_REQUIRE(args.lda >= k && args.ldb >= k && args.ldd >= n, ErrorCode::kInvalidArgument,
                 "CublasLt::prepare_fp8: strides too small (lda=", args.lda, " ldb=", args.ldb,
                 " ldd=", args.ldd, ") for ", shape_str(m, n, k));
  MOEKIT_REQUIRE(m == 0 || (args.a && args.b && args.d && args.sa && args.sb), ErrorCode::kInvalidArgument,
                 "CublasLt::prepare_fp8: null pointer");

  if (static_cast<size_t>(slot_index) >= slots_.size()) slots_.resize(slot_index + 1);
  Slot& slot = slots_[slot_index];
  slot.m = m;
  slot.n = n;
  slot.k = k;
  slot.src_sa = args.sa;
  slot.src_sb = args.sb;
  slot.why.clear();

  // Documented restrictions (cuBLAS docs 3.1.4.5.1 and the cublasLtMatmul FP8 requirements);
  // cuBLASLt's M and N are our n and m.
  const std::string shape = shape_str(m, n, k);
  if (m % 4 != 0 || n % 4 != 0) {
    slot.why = detail::concat(
        "cuBLASLt block-scaled FP8 needs M and N to be multiples of 4 (cuBLAS docs 3.1.4.5.1); shape ", shape);
    return LtStatus::unsupported(slot.why);
  }
  if (k % 16 != 0 || args.lda % 16 != 0 || args.ldb % 16 != 0 || args.ldd % 8 != 0 ||
      (m > 0 && (!aligned16(args.a) || !aligned16(args.b) || !aligned16(args.d)))) {
    slot.why = detail::concat("cuBLASLt FP8 needs 16-byte aligned pointers, K and leading dimensions; shape ",
                              shape, " lda=", args.lda, " ldb=", args.ldb, " ldd=", args.ldd);
    return LtStatus::unsupported(slot.why);
  }
  if (m == 0) return LtStatus::success();

  const int64_t kb = ceil_div(k, kQuantBlock);   // L
  const int64_t kb4 = align_up(kb, 4);           // L4
  const int64_t nb = ceil_div(n, kQuantBlock);
  const size_t sa_bytes = static_cast<size_t>(kb * m) * sizeof(float);
  const size_t sb_bytes = static_cast<size_t>(kb4 * nb) * sizeof(float);
  if (slot.sa_lt.bytes() != sa_bytes) slot.sa_lt = detail::DeviceBuffer(sa_bytes);
  if (slot.sb_lt.bytes() != sb_bytes) slot.sb_lt = detail::DeviceBuffer(sb_bytes);

  // A scales: ours sa[kb * sfa_ld(m) + row] → cuBLASLt (VEC128, "N-major") sa_lt[kb * m + row].
  // With m % 4 == 0 the strides agree; the 2D copy keeps the general form.
  if (sa_ld == 0) sa_ld = sfa_ld(m);
  MOEKIT_REQUIRE(sa_ld >= m, ErrorCode::kInvalidArgument, "CublasLt::prepare_fp8: sa_ld = ", sa_ld, " < m = ", m);
  MOEKIT_CUDA_CHECK(cudaMemcpy2DAsync(slot.sa_lt.get(), m * sizeof(float), args.sa, sa_ld * sizeof(float),
                                      m * sizeof(float), kb, cudaMemcpyDeviceToDevice, stream));
  // B scales: ours sb[nb * L + kb] → cuBLASLt (BLK128x128, "K-major", column stride L4)
  // sb_lt[nb * L4 + kb]; the padding entries are zeroed (never read).
  if (kb4 != kb) MOEKIT_CUDA_CHECK(cudaMemsetAsync(slot.sb_lt.get(), 0, sb_bytes, stream));
  MOEKIT_CUDA_CHECK(cudaMemcpy2DAsync(slot.sb_lt.get(), kb4 * sizeof(float), args.sb, kb * sizeof(float),
                                      kb * sizeof(float), nb, cudaMemcpyDeviceToDevice, stream));

  const Plan& plan = plan_fp8(args, &slot);
  if (!plan.supported) slot.why = plan.why + "; shape " + shape;
  return slot.why.empty() ? LtStatus::success() : LtStatus::unsupported(slot.why);
}

void CublasLt::refresh_sa_fp8(const GemmFp8Args& args, cudaStream_t stream, int slot_index, int64_t sa_ld) {
  MOEKIT_REQUIRE(slot_index >= 0 && static_cast<size_t>(slot_index) < slots_.size(), ErrorCode::kInvalidArgument,
                 "CublasLt::refresh_sa_fp8: slot ", slot_index, " was never prepared");
  const Slot& slot = slots_[slot_index];
  MOEKIT_REQUIRE(slot.m == args.m && slot.k == args.k && slot.src_sa == args.sa, ErrorCode::kInvalidArgument,
                 "CublasLt::refresh_sa_fp8: slot ", slot_index, " was prepared for another shape or A scales");
  if (!slot.why.empty() || args.m == 0) return;
  const int64_t m = args.m, kb = ceil_div(args.k, kQuantBlock);
  if (sa_ld == 0) sa_ld = sfa_ld(m);
  MOEKIT_REQUIRE(sa_ld >= m, ErrorCode::kInvalidArgument, "CublasLt::refresh_sa_fp8: sa_ld = ", sa_ld, " < m = ", m);
  MOEKIT_CUDA_CHECK(cudaMemcpy2DAsync(slot.sa_lt.get(), m * sizeof(float), args.sa, sa_ld * sizeof(float),
                                      m * sizeof(float), kb, cudaMemcpyDeviceToDevice, stream));
}

CublasLt::Plan& CublasLt::plan_fp8(const GemmFp8Args& args, const Slot* slot) {
  const PlanKey key{slot ? 0 : 2, args.m, args.n, args.k, args.lda, args.ldb, args.ldd, 1, 0, 0, 0};
  auto it = plans_.find(key);
  if (it != plans_.end()) return *it->second;
  auto plan = std::make_unique<Plan>();
  Plan& p = *plan;
  plans_.emplace(key, std::move(plan));

  check_lt(cublasLtMatmulDescCreate(&p.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F), "cublasLtMatmulDescCreate");
  const int32_t trans_a = CUBLAS_OP_T, trans_b = CUBLAS_OP_N;
  if (!p.set(CUBLASLT_MATMUL_DESC_TRANSA, trans_a, "TRANSA") ||
      !p.set(CUBLASLT_MATMUL_DESC_TRANSB, trans_b, "TRANSB"))
    return p;
  if (slot) {  // block-scaled; without a slot: the default per-tensor scalar scales (none set: 1)
    const int32_t mode_a = CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F;  // cuBLASLt A = our B (weights)
    const int32_t mode_b = CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F;      // cuBLASLt B = our A (activations)
    const void* scale_a = slot->sb_lt.get();
    const void* scale_b = slot->sa_lt.get();
    if (!p.set(CUBLASLT_MATMUL_DESC_A_SCALE_MODE, mode_a, "A_SCALE_MODE = BLK128x128_32F") ||
        !p.set(CUBLASLT_MATMUL_DESC_B_SCALE_MODE, mode_b, "B_SCALE_MODE = VEC128_32F") ||
        // The heuristic needs the scale pointers of block-scaled modes to be set.
        !p.set(CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, scale_a, "A_SCALE_POINTER") ||
        !p.set(CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, scale_b, "B_SCALE_POINTER"))
      return p;
  }
  // Column-major: A is K x N (ld = ldb, op = T), B is K x M (ld = lda, op = N), D is N x M.
  if (!p.layout(&p.a, CUDA_R_8F_E4M3, args.k, args.n, args.ldb) ||
      !p.layout(&p.b, CUDA_R_8F_E4M3, args.k, args.m, args.lda) ||
      !p.layout(&p.d, CUDA_R_16BF, args.n, args.m, args.ldd))
    return p;
  p.select(as_handle(handle_), workspace_.bytes(),
           slot ? "block-scaled FP8 (BLK128x128 x VEC128)" : "FP8 with per-tensor scales");
  return p;
}

LtStatus CublasLt::gemm_fp8(const GemmFp8Args& args, cudaStream_t stream, int slot_index) {
  MOEKIT_REQUIRE(slot_index >= 0 && static_cast<size_t>(slot_index) < slots_.size(), ErrorCode::kInvalidArgument,
                 "CublasLt::gemm_fp8: slot ", slot_index, " was never prepared (call prepare_fp8 first)");
  const Slot& slot = slots_[slot_index];
  MOEKIT_REQUIRE(slot.m == args.m && slot.n == args.n && slot.k == args.k && slot.src_sa == args.sa &&
                     slot.src_sb == args.sb,
                 ErrorCode::kInvalidArgument, "CublasLt::gemm_fp8: slot ", slot_index, " was prepared for ",
                 shape_str(slot.m, slot.n, slot.k), " with other scale pointers; call prepare_fp8 for ",
                 shape_str(args.m, args.n, args.k), " and these scales first");
  if (!slot.why.empty()) return LtStatus::unsupported(slot.why);
  if (args.m == 0) return LtStatus::success();
  const PlanKey key{0, args.m, args.n, args.k, args.lda, args.ldb, args.ldd, 1, 0, 0, 0};
  auto it = plans_.find(key);
  MOEKIT_REQUIRE(it != plans_.end(), ErrorCode::kInvalidArgument,
                 "CublasLt::gemm_fp8: the strides differ from those given to prepare_fp8");
  Plan& p = *it->second;
  const std::string shape = shape_str(args.m, args.n, args.k);
  if (!p.supported) return LtStatus::unsupported(p.why + "; shape " + shape);
  if (!aligned16(args.a) || !aligned16(args.b) || !aligned16(args.d))
    return LtStatus::unsupported("cuBLASLt FP8 needs 16-byte aligned A, B and D; shape " + shape);

  const void* scale_a = slot.sb_lt.get();
  const void* scale_b = slot.sa_lt.get();
  check_lt(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &scale_a, sizeof scale_a),
           "cublasLtMatmulDescSetAttribute(A_SCALE_POINTER)");
  check_lt(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &scale_b, sizeof scale_b),
           "cublasLtMatmulDescSetAttribute(B_SCALE_POINTER)");
  return matmul(p, args.a, args.b, args.d, shape, "block-scaled FP8", stream);
}

LtStatus CublasLt::matmul(Plan& p, const void* a, const void* b, void* d, const std::string& shape, const char* what,
                          cudaStream_t stream) {
  // cuBLASLt's A is our B and its B is our A (see the header).
  const cublasStatus_t s = cublasLtMatmul(as_handle(handle_), p.desc, &kOne, b, p.a, a, p.b, &kZero, d, p.d, d, p.d,
                                          &p.algo, workspace_.get(), workspace_.bytes(), stream);
  if (is_unsupported(s))
    return LtStatus::unsupported(
        detail::concat("cublasLtMatmul (", what, ") refused shape ", shape, ": ", status_text(s)));
  check_lt(s, detail::concat("cublasLtMatmul (", what, ")").c_str());
  return LtStatus::success();
}

LtStatus CublasLt::gemm_fp8_tensor_scaled(const GemmFp8Args& args, cudaStream_t stream) {
  require_args("CublasLt::gemm_fp8_tensor_scaled", args);
  if (args.m == 0) return LtStatus::success();
  const std::string shape = shape_str(args.m, args.n, args.k);
  if (args.k % 16 != 0 || args.lda % 16 != 0 || args.ldb % 16 != 0 || args.ldd % 8 != 0 || !aligned16(args.a) ||
      !aligned16(args.b) || !aligned16(args.d))
    return LtStatus::unsupported("cuBLASLt FP8 needs 16-byte aligned pointers, K and leading dimensions; shape " +
                                 shape);
  Plan& p = plan_fp8(args, nullptr);
  if (!p.supported) return LtStatus::unsupported(p.why + "; shape " + shape);
  return matmul(p, args.a, args.b, args.d, shape, "FP8, per-tensor scales", stream);
}

// ---------------------------------------------------------------------------------------------
// Plain BF16
// ---------------------------------------------------------------------------------------------

CublasLt::Plan& CublasLt::plan_bf16(const GemmBf16Args& args) {
  const PlanKey key{args.b_kn ? 3 : 1, args.m, args.n, args.k, args.lda, args.ldb, args.ldd, args.batch,
                    args.stride_a, args.stride_b, args.stride_d};
  auto it = plans_.find(key);
  if (it != plans_.end()) return *it->second;
  auto plan = std::make_unique<Plan>();
  Plan& p = *plan;
  plans_.emplace(key, std::move(plan));

  check_lt(cublasLtMatmulDescCreate(&p.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F), "cublasLtMatmulDescCreate");
  // Column-major: cuBLASLt's A is our B — K x N with op T, or (b_kn) N x K with op N.
  const int32_t trans_a = args.b_kn ? CUBLAS_OP_N : CUBLAS_OP_T, trans_b = CUBLAS_OP_N;
  if (!p.set(CUBLASLT_MATMUL_DESC_TRANSA, trans_a, "TRANSA") ||
      !p.set(CUBLASLT_MATMUL_DESC_TRANSB, trans_b, "TRANSB"))
    return p;
  if (!(args.b_kn ? p.layout(&p.a, CUDA_R_16BF, args.n, args.k, args.ldb)
                  : p.layout(&p.a, CUDA_R_16BF, args.k, args.n, args.ldb)) ||
      !p.layout(&p.b, CUDA_R_16BF, args.k, args.m, args.lda) ||
      !p.layout(&p.d, CUDA_R_16BF, args.n, args.m, args.ldd))
    return p;
  if (args.batch > 1) {
    const int32_t count = static_cast<int32_t>(args.batch);
    const struct {
      cublasLtMatrixLayout_t layout;
      int64_t stride;
    } batched[3] = {{p.a, args.stride_b}, {p.b, args.stride_a}, {p.d, args.stride_d}};
    for (const auto& m : batched) {
      check_lt(cublasLtMatrixLayoutSetAttribute(m.layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof count),
               "cublasLtMatrixLayoutSetAttribute(BATCH_COUNT)");
      check_lt(cublasLtMatrixLayoutSetAttribute(m.layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &m.stride,
                                                sizeof m.stride),
               "cublasLtMatrixLayoutSetAttribute(STRIDED_BATCH_OFFSET)");
    }
  }
  p.select(as_handle(handle_), workspace_.bytes(), "BF16");
  return p;
}

LtStatus CublasLt::gemm_bf16(const GemmBf16Args& args, cudaStream_t stream) {
  const char* fn = "CublasLt::gemm_bf16";
  MOEKIT_REQUIRE(args.m >= 0 && args.n > 0 && args.k > 0 && args.batch >= 1, ErrorCode::kInvalidArgument, fn,
                 ": bad shape m=", args.m, " n=", args.n, " k=", args.k, " batch=", args.batch);
  MOEKIT_REQUIRE(args.lda >= args.k && args.ldb >= (args.b_kn ? args.n : args.k) && args.ldd >= args.n,
                 ErrorCode::kInvalidArgument, fn, ": strides too small (lda=", args.lda, " ldb=", args.ldb,
                 " ldd=", args.ldd, ")");
  MOEKIT_REQUIRE(args.m == 0 || (args.a && args.b && args.d), ErrorCode::kInvalidArgument, fn, ": null pointer");
  if (args.m == 0) return LtStatus::success();
  Plan& p = plan_bf16(args);
  const std::string shape = shape_str(args.m, args.n, args.k);
  if (!p.supported) return LtStatus::unsupported(p.why + "; shape " + shape);
  return matmul(p, args.a, args.b, args.d, shape, "BF16", stream);
}

}  // namespace moekit::baseline

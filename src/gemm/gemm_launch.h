// Internal launch helpers of the FP8 GEMM family, shared by the dense, grouped and MoE entry points
// (gemm/fp8_gemm_launch.cpp).
#pragma once
#include <cuda.h>
#include <cstddef>
#include <string>
#include <type_traits>
#include <cuda_runtime_api.h>

#include "kernels/sm90/fp8_gemm_layout.cuh"
#include "kernels/sm90/gemm_params.cuh"
#include "moekit/gemm.h"
#include "moekit/grouped_gemm.h"

namespace moekit::detail {

/// Throws kInvalidArgument unless n and k meet the kernels' shape rules. `fn` names the caller.
void validate_nk(const char* fn, int64_t n, int64_t k);

/// Throws kInvalidArgument / kMisaligned unless the operand pointers and strides are usable.
void validate_operands(const char* fn, int64_t k, int64_t n, const void* a, int64_t lda, const float* sa,
                       const void* b, int64_t ldb, const float* sb, const void* d, int64_t ldd);

struct GemmDeviceLimits;
/// The current device's limits for the configuration heuristic.
GemmDeviceLimits device_limits();

/// A 2D tiled TMA descriptor: `inner` x `outer` elements, rows `row_stride_elems` apart.
CUtensorMap make_tma_2d(CUtensorMapDataType dtype, size_t elem_bytes, const void* ptr, uint64_t inner,
                        uint64_t outer, uint64_t row_stride_elems, uint32_t box_inner, uint32_t box_outer,
                        CUtensorMapSwizzle swizzle);

/// The TMA swizzle mode for a swizzle span of 32, 64 or 128 bytes (else none).
CUtensorMapSwizzle swizzle_for_bytes(unsigned bytes);

/// The kernel bodies launch_fp8_gemm runs (moekit::sm90::<body> in their entry headers).
enum class Fp8GemmKernel {
  kDense,                ///< fp8_gemm_dense (kernels/sm90/gemm.cuh)
  kContiguous,           ///< fp8_gemm_contiguous (kernels/sm90/grouped_gemm.cuh)
  kMasked,               ///< fp8_gemm_masked (kernels/sm90/grouped_gemm.cuh)
  kMoeGemm1Swiglu,       ///< moe_gemm1_swiglu_contiguous (kernels/sm90/moe_gemm.cuh)
  kMoeGemm1SwigluGather, ///< moe_gemm1_swiglu_gather_contiguous (kernels/sm90/moe_gemm.cuh)
  kMoeGemm2Scatter,      ///< moe_gemm2_scatter_contiguous (kernels/sm90/moe_gemm.cuh)
  // MXFP4 B (Fp8GemmFamily::mx_stages raw slots; B prepared by moe_weights_mxfp4.cu):
  kContiguousMxfp4,      ///< fp8_gemm_contiguous_mxfp4 (kernels/sm90/grouped_gemm.cuh)
  kMoeGemm1SwigluMxfp4,  ///< moe_gemm1_swiglu_mxfp4 (kernels/sm90/moe_gemm.cuh)
  kMoeGemm2ScatterMxfp4, ///< moe_gemm2_scatter_mxfp4 (kernels/sm90/moe_gemm.cuh)
  // MXFP4 weights as the MMA's A operand (Fp8GemmFamily::mx_decode; kernels/sm90/mxfp4_decode_gemm.cuh):
  kMoeGemm1SwigluMxfp4Decode,  ///< moe_gemm1_swiglu_mxfp4_decode (kernels/sm90/moe_gemm.cuh)
  kMoeGemm2ScatterMxfp4Decode, ///< moe_gemm2_scatter_mxfp4_decode (kernels/sm90/moe_gemm.cuh)
  kCount
};

/// What the launch machinery knows of a kernel body.
struct Fp8GemmKernelInfo {
  const char* body;     ///< moekit::sm90::<body>; also the stem of the generated entry's name
  const char* header;   ///< the entry header that defines it
  const char* params;   ///< its parameter struct, sm90::<params>
  size_t params_bytes;  ///< sizeof that struct
  bool split_k;         ///< takes kSplitK (before kDirectStore): split-K configurations
  bool direct_store;    ///< a bf16 body taking kDirectStore last: GemmConfig::direct_store
  bool promote_k;       ///< takes kPromoteK fifth (sixth with mx): Fp8GemmFamily::promote_k other than 128
  bool mx;              ///< MXFP4 B: takes kMxStages fifth (Fp8GemmFamily::mx_stages)
  bool mx_decode = false;  ///< the MXFP4 decode family (Fp8GemmFamily::mx_decode)
};
const Fp8GemmKernelInfo& fp8_gemm_kernel_info(Fp8GemmKernel kernel);

/// What differs between the launches of one kernel body.
struct Fp8GemmFamily {
  int wg_n = 1;                                       ///< math warpgroups along N
  unsigned epilogue_smem = ~0u;                       ///< staging bytes; ~0u: the bf16 D tile
  const CUtensorMap* tma_d = nullptr;                 ///< null: bf16 D from the operands
  int sb_rows = 128;                                  ///< rows of B per B-scale block along N
  /// 0: B row-major (row stride ldb); R: B in the K-block tiled layout of GemmParams::b_chunk_rows
  /// (ldb ignored; the kernel's BLOCK_N must be R, or divide it when tiles start at multiples of it).
  int b_chunk_rows = 0;
  /// Rows per A TMA box (GemmParams::a_box_rows): 0 = BLOCK_M; 8 = load only a tile's valid rows
  /// (decode-sized groups). Needs a scheduler that sets Tile::valid_rows.
  int a_box_rows = 0;
  /// Inside a PdlScope: find the first tile before waiting for the previous kernel
  /// (GemmParams::pdl_early; the group layout must be at least two launches old).
  bool pdl_early = false;
  /// K per tensor-core accumulation chain (Fp8GemmTraits::kPromoteK): 128, or 64 / 32 for bodies
  /// that take it as a fifth template argument (the MoE GEMM1).
  int promote_k = 128;
  /// B may be loaded with an L2 evict-first policy where each B tile is read by at most two M blocks
  /// of its group (GemmParams::b_evict_first). Off for the plain contiguous body: measured on the
  /// H100 (docs/performance.md §B evict-first) the MoE layer's rows GEMM2 got 2% (T = 1024) and 14% (T = 4096) slower
  /// with it, where the masked rows, the dense small-M shapes and the decode GEMMs got faster.
  bool b_evict_first = true;
  /// MXFP4 B (the *Mxfp4 kernels, and only those): raw slots (Fp8GemmTraits::kMxStages). B is then
  /// the prepared sub-chunk tensor (fp8_gemm_layout.cuh kMxfp4Sub*), b_rows a multiple of 32.
  int mx_stages = 0;
  /// The MXFP4 decode bodies (*Mxfp4Decode, and only those): GemmConfig::block_m is the tokens per
  /// tile (8, 16 or 32: the MMA's N), block_n the weight rows per tile (128 or 256), stages the A
  /// stages; gemm_mx_decode_threads(k_groups) threads, shared memory gemm_mx_decode_smem_bytes.
  bool mx_decode = false;
  /// The MXFP4 decode bodies only: tiles in stream-K pieces (scheduler_stream_k.cuh); GEMM1's then
  /// needs MoeGemm1Fields::sk_partials / sk_flags and a grid of at most kStreamKMaxCtas.
  bool stream_k = false;
  /// The MXFP4 decode bodies only: K groups per tile (MxDecodeTraits::kKGroups; 2 on 8-token tiles).
  int k_groups = 1;
  /// The MXFP4 decode GEMM1 only, 8-token tiles: A gathered by token (MxDecodeTraits::kGatherA): the
  /// A map has one-row boxes (a_box_rows 1); the scales are copied from MoeGemm1Params::sa_gather.
  bool a_gather = false;
};

/// NVRTC source of one kernel: an extern "C" entry that calls moekit::sm90::<body><BM, BN, S, C>.
/// Sets *entry to the entry's name. Throws kInvalidArgument where the body cannot run `c` (split-K,
/// direct stores) or family.promote_k.
std::string fp8_gemm_kernel_source(const GemmConfig& c, Fp8GemmKernel kernel, std::string* entry,
                                   const Fp8GemmFamily& family = {});

/// The operands of one launch of the GEMM family: `rows` rows of A and D, `b_rows` rows of B
/// (E * n for grouped GEMMs), A scales in the physical layout over `rows` — or over `a_rows` rows
/// of A when that is set (the gather variant, whose A holds one row per token).
struct Fp8GemmOperands {
  const void* a;
  int64_t lda;
  const float* sa;
  const void* b;
  int64_t ldb;
  const float* sb;
  void* d;
  int64_t ldd;
  int64_t rows, b_rows, n, k;
  int64_t a_rows = 0;
};

/// launch_fp8_gemm with the family's parameter struct at `family_params` (`family_params_bytes`
/// bytes) and `params` its GemmParams part.
void launch_fp8_gemm_with(const GemmConfig& c, Fp8GemmKernel kernel, const Fp8GemmOperands& op,
                          sm90::GemmParams& params, void* family_params, size_t family_params_bytes,
                          cudaStream_t stream, const Fp8GemmFamily& family);

/// Builds the TMA descriptors, fills the GemmParams part of `params` (the family's fields are the
/// caller's), compiles/loads `kernel` for `c` (cached) and launches it with c.num_sms persistent
/// CTAs (clusters of c.multicast). P: the body's parameter struct (Fp8GemmKernelInfo::params).
template <class P>
void launch_fp8_gemm(const GemmConfig& c, Fp8GemmKernel kernel, const Fp8GemmOperands& op, P params,
                     cudaStream_t stream, const Fp8GemmFamily& family = {}) {
  static_assert(std::is_base_of_v<sm90::GemmParams, P> && std::is_trivially_copyable_v<P>);
  launch_fp8_gemm_with(c, kernel, op, params, &params, sizeof(P), stream, family);
}

/// A tile configuration override (knobs(): grouped_config, moe_gemm1_config, moe_gemm2_config): the
/// GemmConfig `text` replaces the heuristic's pick `c` unless empty. Shape checks are the launch's
/// (a config that does not fit fails there with a CUDA error).
GemmConfig config_override(const std::string& text, const GemmConfig& c);

/// grouped_gemm_fp8_contiguous with dynamic tile scheduling when `tile_counter` (a device counter
/// that is 0 at launch; the caller zeroes it) is not null (GroupedLayoutParams::tile_counter), and with
/// `config` when given (the MoE plan's pick, select_grouped_contiguous_config) instead of the
/// heuristic's. `mx_stages` > 0: B is MXFP4 prepared as the MoE layer's W2 (moe_prepare_w2_mxfp4,
/// ldb ignored), streamed through that many raw slots (Fp8GemmFamily::mx_stages; `config` required).
void grouped_gemm_fp8_contiguous_counted(const GroupedGemmFp8Args& a, int64_t rows, const int32_t* offsets,
                                         const int32_t* counts, unsigned* tile_counter, cudaStream_t stream,
                                         const GemmConfig* config = nullptr, int mx_stages = 0);

/// Dynamic shared memory of configuration `c` in `family`.
unsigned fp8_gemm_smem_bytes(const GemmConfig& c, const Fp8GemmFamily& family);
/// Threads per CTA of configuration `c` in `family`.
int fp8_gemm_threads(const GemmConfig& c, const Fp8GemmFamily& family);

}  // namespace moekit::detail

// moekit — the FP8 block-scaled Mixture-of-Experts layer (SPEC §3), public API.
//
//   y[t] = Σ_j topk_weights[t, j] · W2[e] · quant(silu(g) · u),   (g, u) = W1[e] · quant(x[t]),
//   e = topk_ids[t, j]
//
// Life cycle:
//   1. MoeLayer layer(config);                        validates the configuration (no GPU needed)
//   2. layer.prepare_weights(w, buf, bytes, stream);  one-time weight preparation into caller memory
//   3. layer.prepare_kernels(T, ws, ws_bytes, stream) (optional) compiles the kernels a forward
//      with T tokens uses, so that forward can then be captured in a CUDA graph
//   4. layer.forward(args, stream);                   any number of times, asynchronous, no host sync
//
// Memory: the layer allocates no device memory in forward. The caller owns the prepared-weight
// buffer (prepared_weight_bytes()) and the per-call workspace (workspace_size(T)), both 256-byte
// aligned (cudaMalloc memory is).
//
// Thread-safety: construction and prepare_weights are set-up steps (not thread-safe, and
// prepare_weights must not run concurrently with forward). Afterwards the layer is immutable:
// forward, prepare_kernels and the size queries are const and may be called concurrently from
// several threads, on different streams, each call with its own workspace and outputs.
#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>
#include <cuda_runtime_api.h>

#include "moekit/routing.h"

namespace moekit {
namespace detail {
struct MoeLayerAccess;  // the expert-parallel layer's view of a local layer (src/moe/moe_layer_access.h)
}  // namespace detail

/// How GEMM1 gets its FP8 activations. Either way each token is quantized once (1x128 scales) and
/// the results are bit-identical; only speed differs.
enum class MoeGemm1Input {
  kAuto,      ///< the faster of the two for T and the shapes (measured: docs/performance.md §Gather vs permute)
  kPermuted,  ///< one pass writes a copy of each token per slot, sorted by expert; GEMM1 loads tiles by TMA
  kGathered,  ///< tokens stay in place; GEMM1 reads each row from its token (FP8 weights: cp.async;
              ///< MXFP4: one-row TMA boxes, decode sizes only), no copy. Falls back to kPermuted
              ///< when T · H ≥ 2^32 (and with MXFP4 weights elsewhere: MoeConfig::gemm1_input).
};

/// How the expert weights are stored (MoeWeights).
enum class MoeWeightFormat {
  kFp8,    ///< FP8 E4M3 with one FP32 scale per 128 x 128 block (DeepSeek-V3, SPEC §3)
  /// MXFP4 (OCP MX, SPEC §6): E2M1 codes, two per byte along K, and one UE8M0 scale per 32 of K
  /// (gpt-oss, DeepSeek-V4's experts). The GEMMs stream the 4-bit codes and expand them in shared
  /// memory into the FP8 tensor-core path, with one FP32 scale per 128 x 128 block
  /// (moekit::mxfp4_to_fp8 in moekit/mxfp4.h: exact while a block's scales span at most 15
  /// binades).
  kMxfp4,
};

/// GEMM1's activation h(g, u) (after the optional clamp, MoeConfig::limit).
enum class MoeActivation {
  kSwiglu,  ///< h = silu(g) · u (SPEC §3)
  kGptOss,  ///< gpt-oss's: h = g · sigmoid(α g) · (u + 1), α = MoeConfig::activation_alpha (SPEC §6)
};

/// Shape and options of one MoE layer.
struct MoeConfig {
  int num_experts = 0;   ///< E: experts of the whole model (ids are in [0, E)); 1 ≤ E ≤ 65536
  int top_k = 0;         ///< k: slots per token; 1 ≤ k ≤ E
  int64_t hidden = 0;    ///< H: model width; a multiple of 16, 16 ≤ H ≤ 2^20 (need not be a multiple of 128)
  int64_t inter = 0;     ///< I: expert intermediate width; a multiple of 16, 16 ≤ I ≤ 2^20
  /// How forward gets the top-k ids and weights. Set: forward may take router logits and routes
  /// them with this configuration (its num_experts / top_k must equal E / k, or be 0 to inherit
  /// them; correction_bias, a device pointer, must stay valid while the layer is used).
  /// Unset: the caller always passes topk_ids / topk_weights.
  std::optional<RoutingConfig> routing;
  float limit = 0.0f;    ///< SwiGLU clamp: g ≤ limit, −limit ≤ u ≤ limit; ≤ 0: no clamp (NaN/+Inf rejected)
  /// Expert-parallel slice: this layer computes only experts [local_offset, local_offset +
  /// local_count) and y gets only their contributions. local_count = 0 means all experts (then
  /// local_offset must be 0). The weights hold the local experts only.
  int local_offset = 0;
  int local_count = 0;
  /// true: bit-identical output from run to run (and between eager and graph replay) for the
  /// same inputs — GEMM2's rows are combined per token in slot order (FP32, one bf16 rounding).
  /// false (default, faster): GEMM2's epilogue scatter-adds weighted rows into an FP32 buffer
  /// with atomics, so the summation order, and the last bits of y, may vary between runs.
  bool deterministic = false;
  /// K per FP8 tensor-core accumulation chain in GEMM1 (the chains are summed in FP32): 32, 64 or
  /// 128, or 0 (default) for automatic: 32 while GEMM1 streams weights (≤ 64 expected rows per
  /// expert, where the extra FP32 work is hidden), 64 beyond. GEMM1's output h is requantized to
  /// FP8, which turns the tensor core's reduced-precision accumulation (its error grows with the
  /// chain) into whole E4M3 steps of h; see docs/performance.md §GEMM1 accumulation chains for the
  /// measured errors and costs. 128 (DeepGEMM's choice) is the fastest at prefill sizes and the
  /// least accurate. With MXFP4 weights the automatic choice is 64 at every size (a K block
  /// streams in half the time, and 32 measured slower there).
  int gemm1_promote_k = 0;
  /// GEMM1's activation path (MoeGemm1Input); automatic by default. MXFP4 weights take the permuted
  /// copy, except with kGathered where the decode GEMM1 runs 8-token tiles (a few rows per expert)
  /// and the sort's launch can quantize the tokens: then it reads their rows (docs/mxfp4.md
  /// §Gathered tokens: 2 µs faster on deepseek-v3 at T = 1, slower on gpt-oss-120b).
  MoeGemm1Input gemm1_input = MoeGemm1Input::kAuto;
  /// The expert weights' format (MoeWeights). kMxfp4 needs H a multiple of 32 and I of 64.
  MoeWeightFormat weight_format = MoeWeightFormat::kFp8;
  /// GEMM1's activation; kGptOss (with limit = 7, biases in MoeWeights and topk_softmax routing:
  /// gpt-oss's layer) needs I a multiple of 64.
  MoeActivation activation = MoeActivation::kSwiglu;
  float activation_alpha = 1.702f;  ///< α of kGptOss (finite, > 0)
};

/// The user's weights of the local experts in the SPEC §3 convention (device pointers): W1's rows
/// [0, I) are the gate rows and [I, 2I) the up rows (gpt-oss's checkpoints interleave them:
/// moekit::gpt_oss_w1_to_moekit_rows reorders).
struct MoeWeights {
  /// kFp8: E4M3 [E_local, 2I, H]. kMxfp4: E2M1 codes [E_local, 2I, H/2] bytes, the low nibble the
  /// even element (gpt-oss's `*_blocks` [E, N, K/32, 16] as they are). 16-byte aligned.
  const void* w1 = nullptr;
  const float* sw1 = nullptr; ///< kFp8: FP32 [E_local, ceil(2I/128), ceil(H/128)]; 4-byte aligned. kMxfp4: unused
  const void* w2 = nullptr;   ///< kFp8: E4M3 [E_local, H, I]. kMxfp4: codes [E_local, H, I/2]. 16-byte aligned
  const float* sw2 = nullptr; ///< kFp8: FP32 [E_local, ceil(H/128), ceil(I/128)]; 4-byte aligned. kMxfp4: unused
  const uint8_t* w1_scales = nullptr;  ///< kMxfp4: UE8M0 [E_local, 2I, H/32] (gpt-oss's `*_scales`). kFp8: unused
  const uint8_t* w2_scales = nullptr;  ///< kMxfp4: UE8M0 [E_local, H, I/32]. kFp8: unused
  /// kMxfp4: W1's codes and scales in gpt-oss's row order (row 2i gate row i, row 2i + 1 up row i:
  /// `mlp1_weight.blocks` / `.scales` of its checkpoints as they are); preparation reorders them.
  /// false: the SPEC order (gate rows, then up rows).
  bool w1_gate_up_interleaved = false;
  /// Optional per-expert biases (gpt-oss; needs I a multiple of 64): b1 [E_local, 2I] added to
  /// GEMM1's output (g and u, rows in W1's order: with w1_gate_up_interleaved interleaved too)
  /// before the clamp; b2 [E_local, H] added to GEMM2's output before the router weight. FP32, or
  /// bf16 with bias_bf16. Copied into the prepared buffer (as FP32); null = none.
  const void* b1 = nullptr;
  const void* b2 = nullptr;
  bool bias_bf16 = false;
};

/// Inputs and outputs of one forward call (device pointers).
/// Routing: either `logits` (requires MoeConfig::routing) or `topk_ids` + `topk_weights`, not both.
struct MoeForwardArgs {
  int64_t num_tokens = 0;      ///< T ≥ 0; T · k < 2^31. T = 0 launches nothing and leaves y untouched
  const void* x = nullptr;     ///< bf16 [T, H] row-major; 16-byte aligned
  void* y = nullptr;           ///< bf16 [T, H] row-major, fully written (no accumulation); 16-byte aligned,
                               ///< must not overlap x or the workspace
  const void* logits = nullptr;              ///< [T, E] router logits (fp32 or bf16, see logits_type)
  LogitsType logits_type = LogitsType::kFloat32;
  const int32_t* topk_ids = nullptr;         ///< [T, k]: -1 = no expert; ids outside [-1, E) are invalid
  const float* topk_weights = nullptr;       ///< [T, k]
  /// Optional, logits path only: where the routed ids / weights [T, k] are also written (e.g. to
  /// inspect or reuse the routing). Null: they live only in the workspace.
  int32_t* routed_ids = nullptr;
  float* routed_weights = nullptr;
  /// Optional device int32: set (not accumulated) to the number of slots with an id outside
  /// [-1, E) over the whole batch. Such slots are skipped (never an out-of-bounds access). Written
  /// on every call with T > 0; with T = 0 it is set to 0.
  int32_t* invalid_count = nullptr;
  void* workspace = nullptr;   ///< scratch, 256-byte aligned, at least workspace_size(T) bytes (T = 0: may be null)
  size_t workspace_bytes = 0;
};

/// The MoE layer. See the top of this header for the life cycle and thread-safety.
class MoeLayer {
 public:
  /// Checks a configuration without constructing a layer; throws moekit::Error(kInvalidArgument)
  /// naming the offending field. Needs no GPU.
  static void validate(const MoeConfig& config);

  /// Validates `config` (as validate) and stores it, with local_count = 0 resolved to E and the
  /// routing configuration's num_experts / top_k filled in. Touches no GPU.
  explicit MoeLayer(const MoeConfig& config);

  /// The validated configuration (local_count and routing resolved).
  const MoeConfig& config() const { return config_; }

  /// Bytes of the prepared-weight buffer prepare_weights fills (a pure function of the config).
  size_t prepared_weight_bytes() const;

  /// One-time weight preparation: converts W1 / sW1 (SPEC convention) into the kernels' layout in
  /// `prepared` (caller-owned device memory, 256-byte aligned, ≥ prepared_weight_bytes(); keep it
  /// alive and unchanged while the layer is used). FP8: W2 / sW2 are used in place, not copied:
  /// their pointers are kept, so they must stay alive and unchanged too. MXFP4: both are converted
  /// into `prepared` (the 4-bit codes stay 4-bit). W1 / sW1 (MXFP4: every input) may be freed once
  /// `stream` has passed this call. Asynchronous on `stream`; a forward on another stream must be
  /// ordered after it by the caller. May be called again to switch weights (not concurrently with
  /// forward). Throws kInvalidArgument / kMisaligned on bad pointers or a too small buffer.
  void prepare_weights(const MoeWeights& weights, void* prepared, size_t prepared_bytes, cudaStream_t stream);

  /// True once prepare_weights has been called.
  bool weights_prepared() const { return prepared_; }

  /// Workspace bytes forward needs for T tokens (includes the routed ids and weights when routing
  /// from logits). Non-decreasing in T; 0 for T = 0. Needs a CUDA device for T > 0 (the sort's
  /// scratch size depends on the device). Throws kInvalidArgument for T < 0 or T · k ≥ 2^31.
  size_t workspace_size(int64_t num_tokens) const;

  /// Runs the layer on `stream`: asynchronous, no host synchronization, allocates nothing,
  /// capturable in a CUDA graph once the kernels for this T are compiled (prepare_kernels, or any
  /// earlier forward with the same T). Validates every pointer, alignment and size before
  /// launching anything: kInvalidArgument (including "workspace too small", "weights not
  /// prepared"), kMisaligned. y[t] gets the sum over t's slots accumulated in FP32 and rounded
  /// once to bf16 (in slot order with MoeConfig::deterministic); tokens whose slots are all
  /// dropped (-1, invalid, or outside the EP slice) get y = 0. NaN/Inf in x row t affect y row t only.
  /// The layer's kernels use programmatic dependent launch: each may be scheduled while the one
  /// before it (the first: whatever precedes the call on `stream`) finishes, and waits for it
  /// before touching memory, so stream order is kept; only launch latency overlaps.
  void forward(const MoeForwardArgs& args, cudaStream_t stream) const;

  /// Compiles (NVRTC, cached in memory and on disk) and loads every kernel a forward with
  /// `num_tokens` tokens launches, by running one forward on zero inputs (x, y, logits / ids are
  /// allocated here; `workspace` as for forward), then synchronizes `stream`. Call it once per
  /// token count you will capture in a CUDA graph, after prepare_weights; capturing a forward
  /// whose kernels are not compiled yet fails. Which kernels run depends only on T and the
  /// config, never on the routing, so the graph may be replayed with any inputs. T = 0: no-op.
  void prepare_kernels(int64_t num_tokens, void* workspace, size_t workspace_bytes, cudaStream_t stream) const;

 private:
  friend struct detail::MoeLayerAccess;
  MoeConfig config_;
  bool prepared_ = false;
  const void* w1p_ = nullptr;
  const float* sw1p_ = nullptr;
  const void* w2_ = nullptr;
  const float* sw2_ = nullptr;
  const float* b1p_ = nullptr;  ///< prepared FP32 biases, or null (none given)
  const float* b2p_ = nullptr;
};

}  // namespace moekit

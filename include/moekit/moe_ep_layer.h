// moekit — the MoE layer with expert parallelism over NCCL (built when NCCL is found: the
// `moekit_ep` library, cmake/nccl.cmake). G ranks (one GPU each, one NCCL communicator) split the
// E experts evenly: rank r owns experts [r·E/G, (r+1)·E/G) and holds only their weights. Each rank
// passes its own tokens; forward quantizes them once (FP8, 1x128 scales), dispatches them to the
// ranks that own their experts, runs the local experts there (the kernels of moekit::MoeLayer),
// and combines the weighted expert outputs back on the token's rank.
//
//   y[t] = Σ_j topk_weights[t, j] · W2[e] · quant(silu(g) · u),   as MoeLayer (SPEC §3)
//
// Two modes (MoeEpMode):
//   kLowLatency     decode: every rank sends its max_tokens_per_rank rows to every rank
//                   (ncclAllGather of the FP8 rows, scales, ids and weights), the owners' expert
//                   outputs return by an all-to-all of equal blocks. Fixed sizes: no host
//                   synchronization, CUDA-graph capturable. Bytes scale with G · max_tokens_per_rank.
//   kHighThroughput prefill: each token goes only to the ranks that own one of its experts, once
//                   per rank; the counts are exchanged first (while the rows are packed) and
//                   forward waits for them on the host (not capturable). Bytes scale with the
//                   tokens actually routed.
// Combine: each owner sends back, per token, the sum of its local slots' weighted rows (bf16,
// rounded once there); the token's rank adds the G partial sums in FP32 in rank order and rounds
// once to bf16. With MoeConfig::deterministic each owner sends every slot's unweighted bf16 row
// instead, and the token's rank sums its k slots in slot order exactly as MoeLayer's
// deterministic combine does: y is bit-identical to a single-GPU MoeLayer with the same
// configuration (same gemm1_promote_k: give it explicitly, since the automatic choice depends on
// the expected rows per expert) — k times the combine bytes.
//
// Every call marked *collective* must be made by all ranks of the communicator (each on its own
// device and stream); a rank that blocks on the host (kHighThroughput) blocks until its peers
// call. One process may drive several GPUs (one thread per rank, e.g. ncclCommInitAll's
// communicators), as the tests do.
//
// Weights: FP8, or MXFP4 (the received rows are then copied per slot for the expansion / decode
// GEMMs); gpt-oss's per-expert biases with deterministic = false only (the deterministic combine
// on the token's rank would need every rank's b2). E a multiple of G; caller top-k ids, or logits
// routed on the token's rank.
#pragma once
#include <cstddef>
#include <cstdint>

#include <cuda_runtime_api.h>
#include <nccl.h>

#include "moekit/moe_ep_config.h"
#include "moekit/moe_layer.h"

namespace moekit {

/// The expert-parallel MoE layer of one rank. Not copyable; the communicator is borrowed (it
/// must outlive the layer and is used on the streams given to forward). Destroy the CUDA graphs
/// that captured a forward before the communicator: ncclCommDestroy waits for every graph that
/// holds its operations.
class MoeEpLayer {
 public:
  /// `comm` must be a blocking communicator (the default of ncclCommInitRank / ncclCommInitAll).
  /// Validates `config` against the communicator (E % G == 0, limits of MoeLayer for the local
  /// slice, max_tokens_per_rank) and builds the local layer of experts [rank·E/G, (rank+1)·E/G)
  /// (kHighThroughput: also a stream and an event on the communicator's device). Throws
  /// moekit::Error(kInvalidArgument) naming the field. Not collective.
  MoeEpLayer(const MoeEpConfig& config, ncclComm_t comm);
  ~MoeEpLayer();
  MoeEpLayer(const MoeEpLayer&) = delete;
  MoeEpLayer& operator=(const MoeEpLayer&) = delete;

  int rank() const { return rank_; }
  int world_size() const { return world_; }
  const MoeEpConfig& config() const { return config_; }
  /// The local slice's MoeLayer configuration (local_offset / local_count set).
  const MoeConfig& local_config() const { return local_.config(); }

  /// Bytes of the prepared-weight buffer of the local experts (MoeLayer::prepared_weight_bytes).
  size_t prepared_weight_bytes() const { return local_.prepared_weight_bytes(); }
  /// Prepares the local experts' weights (E/G experts, as MoeLayer::prepare_weights); biases with
  /// deterministic = true are rejected (kInvalidArgument). Not collective.
  void prepare_weights(const MoeWeights& local_weights, void* prepared, size_t prepared_bytes, cudaStream_t stream);

  /// Workspace bytes of forward (a function of the configuration and G; needs the device).
  size_t workspace_size() const;

  /// Collective. Runs the layer for this rank's tokens on `stream` (the current device must be
  /// the communicator's). kLowLatency: asynchronous, no host synchronization, capturable once the
  /// kernels are loaded (prepare_kernels). kHighThroughput: the host waits once, for the counts
  /// exchange, which runs on the layer's own stream after everything already queued on `stream`
  /// (so the host also waits for that); not capturable (kInvalidArgument under capture). Validates
  /// every argument (and that the weights are prepared) before the first collective; a rank that
  /// throws leaves its peers waiting, so validate inputs consistently on all ranks. The inputs
  /// must not overlap the workspace or y. One forward at a time per layer (calls share the
  /// layer's communicator, side stream and host buffer): not thread-safe.
  void forward(const MoeEpForwardArgs& args, cudaStream_t stream) const;

  /// Collective. One forward with no tokens on this rank (kLowLatency: the full-capacity forward
  /// every call runs), then synchronizes `stream`: compiles and loads the MoE forward's run-time
  /// compiled (NVRTC) kernels, so later kLowLatency forwards can be captured in a CUDA graph. (The
  /// layer's other kernels are compiled ahead of time.)
  void prepare_kernels(void* workspace, size_t workspace_bytes, cudaStream_t stream) const;

 private:
  MoeEpConfig config_;
  ncclComm_t comm_ = nullptr;
  int rank_ = 0, world_ = 1, device_ = 0;
  MoeLayer local_;
  // High throughput: the counts exchange runs on side_ while the tokens are packed on the
  // caller's stream (routed_ orders it after the routing).
  cudaStream_t side_ = nullptr;
  cudaEvent_t routed_ = nullptr;
  int32_t* host_counts_ = nullptr;  // pinned [2 G]: the counts' copy the host waits for
  void release_ht_resources() noexcept;
};

}  // namespace moekit

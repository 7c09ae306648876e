// Per-stage timing hook of the MoE forward, for `moekit bench moe`'s stage breakdown only.
//
// When a trace is installed on the calling thread (moe_stage_trace() != nullptr), MoeLayer::forward
// and moe_forward record a CUDA event on the stream at the start and after every stage. Nothing
// is recorded otherwise (the default; one thread-local load per stage). Not part of the public API.
#pragma once
#include <string>
#include <cuda_runtime_api.h>

namespace moekit::detail {

struct MoeStageTrace {
  static constexpr int kMaxStages = 12;
  cudaEvent_t start = nullptr;                ///< recorded by moe_stage_begin
  cudaEvent_t events[kMaxStages] = {};        ///< caller-created; events[i] ends stage i
  const char* names[kMaxStages] = {};         ///< filled by the forward
  int count = 0;                              ///< stages recorded in the last forward
};

/// The calling thread's installed trace (nullptr: tracing off).
MoeStageTrace*& moe_stage_trace();

/// Records the trace's start event (first call of a forward); no-op when tracing is off.
void moe_stage_begin(cudaStream_t stream);

/// Ends stage `name` at this point of the stream; no-op when tracing is off.
void moe_stage_mark(const char* name, cudaStream_t stream);

/// Diagnostics only (the results are wrong while it is set): true when MOEKIT_DIAG_SKIP
/// (knobs().diag_skip: a comma-separated list of stage names as in the trace; honoured only by a
/// library configured with -DMOEKIT_DIAGNOSTICS=ON) names `stage`, which the forward then does not
/// launch — leave-one-out timing of the chain.
bool moe_diag_skip(const char* stage);

/// Whether the comma-separated stage list `list` names `stage` (the plan's form of moe_diag_skip).
bool moe_diag_skip(const std::string& list, const char* stage);

}  // namespace moekit::detail

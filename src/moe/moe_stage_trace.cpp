#include "moe/moe_stage_trace.h"

#include <string>

#include "common/check.h"
#include "runtime/knobs.h"

namespace moekit::detail {
namespace {

// Inside a stream capture the record must be external to become a graph node (so replays are
// timed too); outside one that flag is refused.
void record(cudaEvent_t e, cudaStream_t stream) {
  cudaStreamCaptureStatus capturing = cudaStreamCaptureStatusNone;
  MOEKIT_CUDA_CHECK(cudaStreamIsCapturing(stream, &capturing));
  MOEKIT_CUDA_CHECK(capturing == cudaStreamCaptureStatusActive
                        ? cudaEventRecordWithFlags(e, stream, cudaEventRecordExternal)
                        : cudaEventRecord(e, stream));
}

}  // namespace

MoeStageTrace*& moe_stage_trace() {
  thread_local MoeStageTrace* trace = nullptr;
  return trace;
}

void moe_stage_begin(cudaStream_t stream) {
  MoeStageTrace* t = moe_stage_trace();
  if (!t) return;
  t->count = 0;
  record(t->start, stream);
}

void moe_stage_mark(const char* name, cudaStream_t stream) {
  MoeStageTrace* t = moe_stage_trace();
  if (!t || t->count >= MoeStageTrace::kMaxStages) return;
  t->names[t->count] = name;
  record(t->events[t->count], stream);
  ++t->count;
}

bool moe_diag_skip(const std::string& list, const char* stage) {
  if (list.empty()) return false;
  return ("," + list + ",").find("," + std::string(stage) + ",") != std::string::npos;
}

bool moe_diag_skip(const char* stage) { return moe_diag_skip(knobs().diag_skip, stage); }

}  // namespace moekit::detail

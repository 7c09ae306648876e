#include "moe/moe_stage_trace.h"

#include <string>

#include "common/check.h"
#include "runtime/knobs.h"

namespace moekit::detail {

MoeStageTrace*& moe_stage_trace() {
  thread_local MoeStageTrace* trace = nullptr;
  return trace;
}

void moe_stage_begin(cudaStream_t stream) {
  MoeStageTrace* t = moe_stage_trace();
  if (!t) return;
  t->count = 0;
  MOEKIT_CUDA_CHECK(cudaEventRecord(t->start, stream));
}

void moe_stage_mark(const char* name, cudaStream_t stream) {
  MoeStageTrace* t = moe_stage_trace();
  if (!t || t->count >= MoeStageTrace::kMaxStages) return;
  t->names[t->count] = name;
  MOEKIT_CUDA_CHECK(cudaEventRecord(t->events[t->count], stream));
  ++t->count;
}

bool moe_diag_skip(const std::string& list, const char* stage) {
  if (list.empty()) return false;
  return ("," + list + ",").find("," + std::string(stage) + ",") != std::string::npos;
}

bool moe_diag_skip(const char* stage) { return moe_diag_skip(knobs().diag_skip, stage); }

}  // namespace moekit::detail

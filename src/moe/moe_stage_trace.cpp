#include "moe/moe_stage_trace.h"

#include <cstdlib>
#include <string>

#include "common/check.h"

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

bool moe_diag_skip(const char* stage) {
  static const std::string list = [] {
    const char* v = std::getenv("MOEKIT_DIAG_SKIP");
    std::string l;
    if (v && *v) {
      l = ",";
      l += v;
      l += ",";
    }
    return l;
  }();
  if (list.empty()) return false;
  std::string key = ",";
  key += stage;
  key += ",";
  return list.find(key) != std::string::npos;
}

}  // namespace moekit::detail

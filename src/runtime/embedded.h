// Kernel sources embedded into the library at build time (cmake/embed_sources.cmake) for NVRTC.
#pragma once
#include <vector>

namespace moekit::jit {

struct EmbeddedFile {
  const char* path;  ///< relative to src/, e.g. "kernels/sm90/gemm.cuh"
  const char* text;
};

/// Every embedded header (src/ptx/*.cuh, src/kernels/sm90/*.cuh).
const std::vector<EmbeddedFile>& embedded_sources();

}  // namespace moekit::jit

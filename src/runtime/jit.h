// Run-time compilation of shape-specialized kernels (NVRTC → sm_90a cubin) with an in-memory
// and an on-disk cache.
//
// Why run-time compilation: the GEMM family is specialized on (BLOCK_M, BLOCK_N, stages) and the
// heuristic picks among dozens of combinations per shape; instantiating them all ahead of time
// would make every build (and CI on 2 cores) slow. NVRTC compiles sm_90a code without a GPU, so
// CI still compile-checks every kernel family (tests/cpu/test_jit.cpp), and `moekit jit warm`
// fills the disk cache ahead of deployment. See docs/design.md.
//
// Cache key: a 128-bit hash of the generated source, every embedded header, the NVRTC options
// and the NVRTC version. Cache directory: $MOEKIT_CACHE_DIR, else $XDG_CACHE_HOME/moekit, else
// $HOME/.cache/moekit, else /tmp/moekit-cache. Files are written to a temporary name and renamed,
// so concurrent processes never see a partial cubin.
#pragma once
#include <cuda.h>
#include <string>
#include <vector>

namespace moekit::jit {

/// The sm_90a cubin of a translation unit (compiled, or read from the disk cache).
/// Needs no GPU. Throws ErrorCode::kCompileError with the NVRTC log on failure.
std::vector<char> compile_cubin(const std::string& source, const std::string& name_hint);

/// The compiler's messages for that translation unit (NVRTC and ptxas: warnings and performance
/// advisories such as C7514, "wgmma serialized"), kept in the disk cache next to the cubin;
/// compiles first if needed. Empty when the compiler said nothing (or for a cubin cached by an
/// older moekit).
std::string compile_log(const std::string& source, const std::string& name_hint);

/// A loaded kernel: the function and the dynamic shared memory it was configured for.
struct Kernel {
  CUfunction fn = nullptr;
};

/// Compiles (or loads from cache), loads into the current context and returns the extern "C"
/// kernel `entry` of `source`, with its dynamic shared-memory limit raised to the device's
/// opt-in maximum. Thread-safe; memoized per (device, entry): one entry name must always come
/// with the same source (the generators put every template argument into the name).
Kernel get_kernel(const std::string& source, const std::string& entry);

/// Directory of the on-disk cache (created on first use).
std::string cache_dir();

}  // namespace moekit::jit

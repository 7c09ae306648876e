// Internal argument and CUDA-call checking. Every failure becomes a moekit::Error.
#pragma once
#include <sstream>
#include <string>
#include <cuda_runtime_api.h>
#include "moekit/error.h"

namespace moekit::detail {

template <typename... Ts>
std::string concat(const Ts&... parts) {
  std::ostringstream os;
  (os << ... << parts);
  return os.str();
}

[[noreturn]] inline void throw_error(ErrorCode code, const std::string& msg) { throw Error(code, msg); }

inline void check_cuda(cudaError_t e, const char* what, const char* file, int line) {
  if (e != cudaSuccess) {
    throw_error(ErrorCode::kCudaError, concat("moekit: CUDA error in ", what, " (", file, ":", line,
                                              "): ", cudaGetErrorName(e), ": ", cudaGetErrorString(e)));
  }
}

}  // namespace moekit::detail

/// Throws moekit::Error(code, "<fn>: <message>") unless cond holds.
#define MOEKIT_REQUIRE(cond, code, ...)                                                          \
  do {                                                                                           \
    if (!(cond)) ::moekit::detail::throw_error(code, ::moekit::detail::concat(__VA_ARGS__));    \
  } while (0)

#define MOEKIT_CUDA_CHECK(expr) ::moekit::detail::check_cuda((expr), #expr, __FILE__, __LINE__)

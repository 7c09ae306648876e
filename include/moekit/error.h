// moekit — error reporting.
//
// Every public entry point validates its arguments before touching the GPU and throws
// moekit::Error on bad input; CUDA/driver/NVRTC failures are reported the same way.
#pragma once
#include <stdexcept>
#include <string>

namespace moekit {

/// What went wrong. Stable numeric values: callers may switch on them.
enum class ErrorCode : int {
  kInvalidArgument = 1,  ///< a shape, stride, pointer or option is out of range
  kMisaligned = 2,       ///< a pointer or stride breaks the 16-byte alignment TMA needs
  kUnsupportedDevice = 3,///< the current GPU is not sm_90 (Hopper) or no GPU is present
  kCudaError = 4,        ///< a CUDA runtime or driver call failed
  kCompileError = 5,     ///< run-time compilation (NVRTC) of a kernel failed
  kInternal = 6,         ///< a bug in moekit: please report it
};

/// Exception thrown by every moekit function that fails.
class Error : public std::runtime_error {
 public:
  Error(ErrorCode code, const std::string& what) : std::runtime_error(what), code_(code) {}
  /// The category of the failure.
  ErrorCode code() const noexcept { return code_; }

 private:
  ErrorCode code_;
};

}  // namespace moekit

// Helpers shared by the GPU tests.
#pragma once
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

namespace moekit::test {

/// A non-blocking stream owned for the scope of a test.
class Stream {
 public:
  Stream() { EXPECT_EQ(cudaStreamCreateWithFlags(&s_, cudaStreamNonBlocking), cudaSuccess); }
  ~Stream() {
    if (s_) cudaStreamDestroy(s_);
  }
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  operator cudaStream_t() const { return s_; }

 private:
  cudaStream_t s_ = nullptr;
};

/// Waits for the stream with a deadline, so a kernel that never finishes fails the run loudly
/// instead of hanging the whole executable (a hung kernel cannot be recovered: report and exit).
inline void finish(cudaStream_t s, const std::string& what, double seconds = 120.0) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  for (;;) {
    const cudaError_t e = cudaStreamQuery(s);
    if (e == cudaSuccess) return;
    if (e != cudaErrorNotReady) {
      ADD_FAILURE() << what << ": " << cudaGetErrorName(e) << ": " << cudaGetErrorString(e);
      return;
    }
    if (std::chrono::steady_clock::now() > deadline) {
      std::fprintf(stderr, "FATAL: %s did not finish within %.0f s (hang); aborting the GPU tests\n", what.c_str(),
                   seconds);
      std::fflush(stderr);
      std::_Exit(1);
    }
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
}

}  // namespace moekit::test

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

/// Captures body() (work it enqueues on s) into a CUDA graph, launches the graph once and waits
/// for it (finish), then destroys it.
template <class F>
void run_in_graph(cudaStream_t s, F&& body) {
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal), cudaSuccess);
  body();
  ASSERT_EQ(cudaStreamEndCapture(s, &graph), cudaSuccess);
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  EXPECT_EQ(cudaGraphLaunch(exec, s), cudaSuccess);
  finish(s, "graph replay");
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
}

}  // namespace moekit::test

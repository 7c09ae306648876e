// GPU correctness of the masked grouped FP8 GEMM (include/moekit/grouped_gemm.h), checked as in
// test_grouped_gemm.cpp: random counts, full and zero counts, large shapes, clamping at max_m and
// CUDA-graph replays that follow new device counts.

#include "grouped_gemm_test_util.h"

using namespace moekit::grouped_test;

// ----------------------------------------------------------------------------------------------
// Masked grouped GEMM
// ----------------------------------------------------------------------------------------------

TEST(GroupedGemmMasked, RandomCounts) {
  uint64_t seed = 2000;
  for (int64_t e : {1, 4, 32, 256})
    for (int64_t max_m : {1, 7, 64, 100, 256}) {
      const Counts c = uniform_counts(e, 0, int32_t(max_m), seed);
      run_problem(make_problem("random", true, c, {256, 512, false}, max_m), ++seed);
      if (HasFatalFailure()) return;
    }
}

TEST(GroupedGemmMasked, FullCountsStrided) {
  uint64_t seed = 3000;
  for (int64_t e : {1, 4, 32, 256})
    for (int64_t max_m : {1, 7, 64, 100, 256}) {
      const Counts c(static_cast<size_t>(e), static_cast<int32_t>(max_m));
      run_problem(make_problem("full", true, c, {200, 384, true}, max_m), ++seed);
      if (HasFatalFailure()) return;
    }
}

// Every count zero: the call returns (no hang) and writes nothing.
TEST(GroupedGemmMasked, AllZeroCountsWriteNothing) {
  uint64_t seed = 4000;
  for (int64_t e : {1, 4, 32, 256})
    for (int64_t max_m : {1, 7, 64, 100, 256}) {
      run_problem(make_problem("zeros", true, Counts(size_t(e), 0), {256, 512, false}, max_m), ++seed);
      if (HasFatalFailure()) return;
    }
}

// The shapes and tails on the masked layout.
TEST(GroupedGemmMasked, LargeShapes) {
  run_problem(make_problem("gemm1", true, uniform_counts(4, 0, 64, 1), {4096, 7168, false}, 64), 4101);
  run_problem(make_problem("gemm1_small", true, {7, 0}, {4096, 7168, false}, 7), 4102);
  run_problem(make_problem("gemm2", true, uniform_counts(8, 1, 100, 2), {7168, 2048, false}, 100), 4103);
  run_problem(make_problem("gptoss", true, uniform_counts(4, 0, 100, 3), {2880, 2880, false}, 100), 4104);
  run_problem(make_problem("gptoss_strided", true, uniform_counts(3, 50, 130, 4), {2880, 2880, true}, 130), 4105);
}

// Documented: counts above max_m are clamped to max_m.
TEST(GroupedGemmMasked, CountsAboveMaxMAreClamped) {
  run_problem(make_problem("clamp", true, {9, 7, 100000, 0}, {256, 512, false}, 7), 4201);
}

// Captured once, replayed with three count vectors written into the same device buffer.
TEST(GroupedGemmMasked, CudaGraphReplayFollowsDeviceCounts) {
  const int64_t E = 8, max_m = 64, n = 256, k = 512;
  Problem p = make_problem("graph", true, Counts(size_t(E), 0), {n, k, false}, max_m);
  Stream s;
  GroupedData g(p, 41, s);
  finish(s, "setup");
  moekit::grouped_gemm_fp8_prepare_masked(max_m, E, n, k);

  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal), cudaSuccess);
  g.run(s);
  ASSERT_EQ(cudaStreamEndCapture(s, &graph), cudaSuccess);
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);

  const std::vector<Counts> replays = {uniform_counts(E, 0, int32_t(max_m), 8), Counts(size_t(E), int32_t(max_m)),
                                       Counts{0, 1, 63, 0, 17, 64, 2, 0}};
  for (const Counts& c : replays) {
    const std::string what = "replay " + counts_summary(c);
    g.set_counts(c, s);  // cudaMemcpyAsync into the captured counts buffer
    g.poison(s);
    ASSERT_EQ(cudaGraphLaunch(exec, s), cudaSuccess);
    finish(s, what);
    expect_good(g.check(c, 99), what);
  }
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
}

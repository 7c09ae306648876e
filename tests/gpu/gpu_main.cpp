// Main of the GPU test executable. With no CUDA device it prints why and exits 77, which ctest
// (SKIP_RETURN_CODE 77) reports as skipped rather than passed.
#include <cstdio>
#include <gtest/gtest.h>

#include "runtime/device.h"

int main(int argc, char** argv) {
  if (!moekit::detail::gpu_available()) {
    std::printf("moekit_gpu_tests: no CUDA device visible; GPU tests skipped.\n");
    return 77;
  }
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}

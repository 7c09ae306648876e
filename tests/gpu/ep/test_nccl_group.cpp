// The NCCL group of one process (src/ep/nccl_group.h), built with NCCL only: an all-to-all over
// every visible GPU (one: a loopback) delivers each block to its peer, byte for byte.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include <cuda_runtime.h>

#include "ep/nccl_group.h"
#include "moekit/error.h"

TEST(NcclGroup, AllToAllDeliversEveryBlock) {
  int g = 0;
  ASSERT_EQ(cudaGetDeviceCount(&g), cudaSuccess);
  std::vector<int> devices;
  for (int d = 0; d < g; ++d) devices.push_back(d);
  moekit::detail::NcclGroup group(devices);
  const size_t block = 3 * 1024 + 16;  // bytes per peer
  const size_t n = static_cast<size_t>(g);
  std::vector<void*> send(n), recv(n);
  std::vector<cudaStream_t> streams(n);
  for (int r = 0; r < g; ++r) {
    ASSERT_EQ(cudaSetDevice(r), cudaSuccess);
    ASSERT_EQ(cudaStreamCreate(&streams[size_t(r)]), cudaSuccess);
    ASSERT_EQ(cudaMalloc(&send[size_t(r)], block * size_t(g)), cudaSuccess);
    ASSERT_EQ(cudaMalloc(&recv[size_t(r)], block * size_t(g)), cudaSuccess);
    std::vector<uint8_t> h(block * size_t(g));
    for (size_t i = 0; i < h.size(); ++i) h[i] = uint8_t(31 * r + 7 * (i / block) + i % 251);  // (sender, peer, offset)
    ASSERT_EQ(cudaMemcpy(send[size_t(r)], h.data(), h.size(), cudaMemcpyHostToDevice), cudaSuccess);
    ASSERT_EQ(cudaMemset(recv[size_t(r)], 0xA5, h.size()), cudaSuccess);
  }
  moekit::detail::nccl_all_to_all(group, std::vector<const void*>(send.begin(), send.end()), recv, block, streams);
  for (int r = 0; r < g; ++r) {
    ASSERT_EQ(cudaSetDevice(r), cudaSuccess);
    ASSERT_EQ(cudaStreamSynchronize(streams[size_t(r)]), cudaSuccess);
    std::vector<uint8_t> h(block * size_t(g));
    ASSERT_EQ(cudaMemcpy(h.data(), recv[size_t(r)], h.size(), cudaMemcpyDeviceToHost), cudaSuccess);
    for (int p = 0; p < g; ++p)  // block p came from rank p: its block r
      for (size_t i = 0; i < block; ++i)
        ASSERT_EQ(h[size_t(p) * block + i], uint8_t(31 * p + 7 * r + (size_t(r) * block + i) % 251)) << r << " " << p;
    cudaFree(send[size_t(r)]);
    cudaFree(recv[size_t(r)]);
    cudaStreamDestroy(streams[size_t(r)]);
  }
  EXPECT_THROW(moekit::detail::NcclGroup({0, 0}), moekit::Error);
  EXPECT_THROW(moekit::detail::NcclGroup({g}), moekit::Error);
}

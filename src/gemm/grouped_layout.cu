// Device computation of the contiguous grouped layout's segment offsets from per-group counts.
#include <cub/block/block_scan.cuh>

#include "common/check.h"
#include "moekit/grouped_gemm.h"

namespace moekit {
namespace {

constexpr int kThreads = 256;

// One block scans the counts in chunks of kThreads, carrying the running total. Negative counts
// count as 0 (a device kernel cannot throw; the host version rejects them).
__global__ void contiguous_offsets_kernel(const int32_t* counts, int num_groups, int32_t* offsets) {
  using Scan = cub::BlockScan<int32_t, kThreads>;
  __shared__ typename Scan::TempStorage temp;
  __shared__ int32_t carry;
  if (threadIdx.x == 0) {
    carry = 0;
    offsets[0] = 0;
  }
  __syncthreads();
  for (int base = 0; base < num_groups; base += kThreads) {
    const int e = base + int(threadIdx.x);
    int32_t c = e < num_groups ? counts[e] : 0;
    c = c > 0 ? (c + int32_t(kGroupAlign) - 1) / int32_t(kGroupAlign) * int32_t(kGroupAlign) : 0;
    int32_t inclusive = 0, total = 0;
    Scan(temp).InclusiveSum(c, inclusive, total);
    if (e < num_groups) offsets[e + 1] = carry + inclusive;
    __syncthreads();
    if (threadIdx.x == 0) carry += total;
    __syncthreads();
  }
}

}  // namespace

void contiguous_offsets_device(const int32_t* counts, int64_t num_groups, int32_t* offsets, cudaStream_t stream) {
  MOEKIT_REQUIRE(num_groups >= 1 && num_groups < (int64_t(1) << 20), ErrorCode::kInvalidArgument,
                 "moekit::contiguous_offsets_device: num_groups = ", num_groups, " must be in [1, 2^20)");
  MOEKIT_REQUIRE(counts && offsets, ErrorCode::kInvalidArgument,
                 "moekit::contiguous_offsets_device: counts and offsets are required");
  contiguous_offsets_kernel<<<1, kThreads, 0, stream>>>(counts, static_cast<int>(num_groups), offsets);
  MOEKIT_CUDA_CHECK(cudaGetLastError());
}

}  // namespace moekit

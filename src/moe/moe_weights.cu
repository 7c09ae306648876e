// Weight preparation for the fused GEMM1 and the FP32 → bf16 finalize of the fused GEMM2.
//
// Prepared W1 (per expert, moe_prepared_w1_rows(I) = 2 * align_up(I, 128) rows of H bytes): the
// rows of h tile t (h columns [128 t, 128 t + 128)) are the 256 rows
//   [256 t,       +64)  gate rows 128 t +  0 … 63      [256 t + 64,  +64)  up rows of the same
//   [256 t + 128, +64)  gate rows 128 t + 64 … 127     [256 t + 192, +64)  up rows of the same
// (up row j is SPEC row I + j); rows past I are zero. So each GEMM1 math warpgroup's 128 columns
// are 64 gate and the matching 64 up columns. The bytes are stored K-block tiled
// (GemmParams::b_chunk_rows = kW1ChunkRows = 256): for every 256-row block and K block, its
// 256 x 128 bytes are one contiguous chunk (K padded to a multiple of 128 with zeros), so each
// GEMM1 stage reads its B tile as one sequential 32 KB run instead of 256 pieces of 128 bytes
// spread over 256 rows (DRAM page locality at decode, where GEMM1 streams W1 once). Prepared scales: one per 64 rows and K block,
// sw1p[e][r / 64][kb] = sW1[e][src_row / 128][kb]. With I % 64 == 0 every 64-row run comes from one
// 128-row scale block of the SPEC layout, so the block-scaled products are unchanged; zero runs
// get scale 0.
#include <cstdint>

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "common/check.h"
#include "moe/moe_gemm.h"
#include "moe/moe_w1_layout.h"
#include "moekit/mxfp4.h"
#include "moekit/numerics.h"
#include "ptx/ptx.cuh"
#include "runtime/pdl.h"

namespace moekit::detail {
namespace {

// One 16-byte unit of the K-block tiled prepared W1 per iteration (destination order, so the
// stores are sequential): chunk (row block of 256, kb) holds 256 rows x 128 bytes.
__global__ void prepare_w1_tiled_kernel(const uint8_t* w1, uint8_t* w1p, int64_t rows_p, int64_t inter,
                                        int64_t hidden, int64_t num_kb, int64_t total_units) {
  constexpr int64_t kUnitsPerRow = 128 / 16, kUnitsPerChunk = kW1ChunkRows * kUnitsPerRow;
  for (int64_t u = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; u < total_units;
       u += int64_t(gridDim.x) * blockDim.x) {
    const int64_t chunk = u / kUnitsPerChunk, rem = u % kUnitsPerChunk;
    const int64_t row = (chunk / num_kb) * kW1ChunkRows + rem / kUnitsPerRow;
    const int64_t col = (chunk % num_kb) * 128 + (rem % kUnitsPerRow) * 16;
    const int64_t e = row / rows_p, src = prepared_source_row(row % rows_p, inter);
    uint4 v = make_uint4(0, 0, 0, 0);
    if (src >= 0 && col < hidden) v = *reinterpret_cast<const uint4*>(w1 + (e * 2 * inter + src) * hidden + col);
    reinterpret_cast<uint4*>(w1p)[u] = v;
  }
}

__global__ void prepare_w1_scales_kernel(const float* sw1, float* sw1p, int64_t rows_p, int64_t inter,
                                         int64_t kbh, int64_t total) {
  const int64_t runs = rows_p / 64, sblocks = ceil_div(2 * inter, kQuantBlock);
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t kb = i % kbh, run = (i / kbh) % runs, e = i / (kbh * runs);
    const int64_t src = prepared_source_row(run * 64, inter);
    sw1p[i] = src >= 0 ? sw1[(e * sblocks + src / kQuantBlock) * kbh + kb] : 0.0f;
  }
}

__global__ void finalize_kernel(const float4* acc, uint2* y, int64_t n4) {
  ptx::griddep_wait();  // PDL (runtime/pdl.h): y_acc from the previous kernel
  ptx::griddep_launch_dependents();
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n4; i += int64_t(gridDim.x) * blockDim.x) {
    const float4 v = acc[i];
    uint2 o;
    o.x = ptx::pack_bf16x2(v.x, v.y);
    o.y = ptx::pack_bf16x2(v.z, v.w);
    y[i] = o;
  }
}

int grid_for(int64_t n, int threads) {
  const int64_t b = ceil_div(std::max<int64_t>(n, 1), threads);
  return static_cast<int>(std::min<int64_t>(b, 132 * 16));
}

}  // namespace

void moe_prepare_w1_fused(const void* w1, const float* sw1, int num_experts, int64_t hidden, int64_t inter, void* w1p,
                          float* sw1p, cudaStream_t stream) {
  const int64_t rows_p = moe_prepared_w1_rows(inter);
  const int64_t kbh = ceil_div(hidden, kQuantBlock);
  const int64_t units = int64_t(num_experts) * rows_p * kbh * (128 / 16);
  prepare_w1_tiled_kernel<<<grid_for(units, 256), 256, 0, stream>>>(
      static_cast<const uint8_t*>(w1), static_cast<uint8_t*>(w1p), rows_p, inter, hidden, kbh, units);
  MOEKIT_CUDA_CHECK(cudaGetLastError());
  moe_prepare_w1_scales(sw1, num_experts, hidden, inter, sw1p, stream);
}

void moe_prepare_w1_scales(const float* sw1, int num_experts, int64_t hidden, int64_t inter, float* sw1p,
                           cudaStream_t stream) {
  const int64_t rows_p = moe_prepared_w1_rows(inter);
  const int64_t kbh = ceil_div(hidden, kQuantBlock);
  const int64_t total = int64_t(num_experts) * (rows_p / 64) * kbh;
  prepare_w1_scales_kernel<<<grid_for(total, 256), 256, 0, stream>>>(sw1, sw1p, rows_p, inter, kbh, total);
  MOEKIT_CUDA_CHECK(cudaGetLastError());
}

namespace {
// One thread per element: dst[e][r] = FP32 of src[e][stored row of r] (b1 in gpt-oss's interleaved
// order when interleaved_inter > 0).
__global__ void prepare_bias_kernel(const void* src, bool bf16, int64_t rows, int64_t interleaved_inter, int64_t total,
                                    float* dst) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t r = i % rows, e = i / rows;
    const int64_t s = e * rows + (interleaved_inter > 0 ? gpt_oss_w1_source_row(r, interleaved_inter) : r);
    dst[i] = bf16 ? __bfloat162float(static_cast<const __nv_bfloat16*>(src)[s]) : static_cast<const float*>(src)[s];
  }
}
}  // namespace

void moe_prepare_bias(const void* src, bool bf16, int num_experts, int64_t rows, int64_t interleaved_inter, float* dst,
                      cudaStream_t stream) {
  const int64_t total = int64_t(num_experts) * rows;
  prepare_bias_kernel<<<grid_for(total, 256), 256, 0, stream>>>(src, bf16, rows, interleaved_inter, total, dst);
  MOEKIT_CUDA_CHECK(cudaGetLastError());
}

void moe_finalize_bf16(const float* y_acc, int64_t num_tokens, int64_t hidden, void* y, cudaStream_t stream) {
  const int64_t n4 = num_tokens * hidden / 4;
  if (n4 == 0) return;
  launch_pdl(finalize_kernel, dim3(grid_for(n4, 256)), dim3(256), 0, stream, reinterpret_cast<const float4*>(y_acc),
             static_cast<uint2*>(y), n4);
  MOEKIT_CUDA_CHECK(cudaGetLastError());
}

}  // namespace moekit::detail

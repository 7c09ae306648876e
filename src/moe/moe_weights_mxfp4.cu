// MXFP4 weight preparation (docs/design.md §MXFP4 weights): from the checkpoint's codes and UE8M0
// scales to what the GEMMs' MXFP4 loader reads (kernels/sm90/mxfp4_loader.cuh):
//   * per 128 x 128 block of the SPEC rows, sb = 2^(m − 133) with m the block's largest finite
//     scale byte (NaN if any byte is 255): the FP8 weights' scale layout, so the promotion and the
//     epilogues are the FP8 layer's;
//   * per 32 rows and K block, a sub-chunk: the rows' 64 code bytes as loader words
//     (mxfp4_loader_word of mxfp4_fragment_word: block s's four words in the row's 16-byte unit
//     mxfp4_row_unit(row, s)) and their four table offsets (mxfp4_table_offset(mxfp4_shift(s, m))).
// Sub-chunk order: W1 in the prepared W1's rows (moe_w1_layout.h), K-block tiled by kW1ChunkRows
// (a 256-row tile's K block is one contiguous run); W2 by 32-row group, then K block. K is padded
// to whole K blocks with zero codes. The expansion of these bytes equals moekit::mxfp4_to_fp8 bit
// for bit (tests/gpu/test_moe_mxfp4.cpp runs the layer both ways).
#include <cmath>
#include <cstdint>

#include <cuda_runtime.h>

#include "common/check.h"
#include "kernels/sm90/fp8_gemm_layout.cuh"
#include "kernels/sm90/mxfp4_expand.cuh"
#include "moe/moe_gemm.h"
#include "moe/moe_w1_layout.h"
#include "moekit/mxfp4.h"
#include "moekit/numerics.h"

namespace moekit::detail {
namespace {

using sm90::kMxfp4CodeBytes;
using sm90::kMxfp4SubBytes;
using sm90::kMxfp4SubRows;

int grid_for(int64_t n, int threads) {
  const int64_t b = ceil_div(std::max<int64_t>(n, 1), threads);
  return static_cast<int>(std::min<int64_t>(b, 132 * 16));
}

// The stored row of SPEC row r: r, or with gpt-oss's interleaved W1 (inter > 0) its row there.
__host__ __device__ inline int64_t stored_row(int64_t r, int64_t interleaved_inter) {
  return interleaved_inter > 0 ? gpt_oss_w1_source_row(r, interleaved_inter) : r;
}

// One thread per (expert, 128-row block, K block) of R rows x K (SPEC order): the block's scale.
__global__ void mxfp4_block_scales_kernel(const uint8_t* scales, int64_t rows, int64_t k, int64_t total,
                                          int64_t interleaved_inter, float* sb) {
  const int64_t nb = ceil_div(rows, kQuantBlock), kbs = ceil_div(k, kQuantBlock), per_row = k / kMxfp4Block;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t kb = i % kbs, b = (i / kbs) % nb, e = i / (kbs * nb);
    const int64_t r0 = b * kQuantBlock, r1 = min(rows, r0 + kQuantBlock);
    const int64_t c0 = kb * (kQuantBlock / kMxfp4Block), c1 = min(per_row, c0 + kQuantBlock / kMxfp4Block);
    int m = 0;
    bool nan = false;
    for (int64_t r = r0; r < r1; ++r) {
      const uint8_t* row = scales + (e * rows + stored_row(r, interleaved_inter)) * per_row;
      for (int64_t c = c0; c < c1; ++c) {
        const int s = row[c];
        nan = nan || s == 255;
        if (s != 255) m = max(m, s);
      }
    }
    // A NaN block keeps m in its NaN's payload: its shifts are then those of mxfp4_shifts.
    sb[i] = nan ? __int_as_float(0x7fc00000 | m) : ldexpf(1.0f, m - 133);
  }
}

// The block's largest finite scale byte back from its scale (a NaN block's from its payload).
__device__ inline unsigned block_max_byte(float sb) {
  return isnan(sb) ? unsigned(__float_as_int(sb) & 0xFF) : unsigned(ilogbf(sb) + 133);
}

// One thread per (expert, destination row, K block): the row's 64 code bytes as loader words and
// its four shift indices, at the row's place in its sub-chunk. kW1: destination rows are the
// prepared W1's (SPEC row prepared_source_row, or zeros; stored as stored_row says); else
// destination row = source row.
template <bool kW1>
__global__ void mxfp4_sub_chunks_kernel(const uint8_t* codes, const uint8_t* scales, const float* sb,
                                        int64_t src_rows, int64_t dst_rows, int64_t k, int64_t inter,
                                        int64_t interleaved_inter, int64_t chunk_rows, int64_t total, uint8_t* out) {
  const int64_t kbs = ceil_div(k, kQuantBlock), per_row = k / kMxfp4Block, nb = ceil_div(src_rows, kQuantBlock);
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t kb = i % kbs, r = (i / kbs) % dst_rows, e = i / (kbs * dst_rows);
    const int64_t src = kW1 ? prepared_source_row(r, inter) : r;
    const int64_t g = e * dst_rows + r, within = g % chunk_rows;
    uint8_t* sub = out + ((g / chunk_rows) * kbs + kb) * (chunk_rows / kMxfp4SubRows) * kMxfp4SubBytes +
                   (within / kMxfp4SubRows) * kMxfp4SubBytes;
    const int64_t rr = within % kMxfp4SubRows;
    uint32_t words[16] = {};
    uint32_t idx = 0;  // four table offsets, one byte each; 0 (shift −13) expands to zeros
    if (src >= 0) {
      const int64_t stored = stored_row(src, interleaved_inter);
      const uint8_t* row = codes + (e * src_rows + stored) * (k / 2);
      const int64_t bytes = min(int64_t(64), k / 2 - kb * 64);  // K is a multiple of 32: whole 16-byte units
      for (int64_t s = 0; s < bytes / 16; ++s) {  // 32-block s into its (swizzled) 16-byte unit
        const uint4 b = *reinterpret_cast<const uint4*>(row + kb * 64 + 16 * s);
        const unsigned v[4] = {b.x, b.y, b.z, b.w};
        const unsigned u = sm90::mxfp4_row_unit(unsigned(rr), unsigned(s));
        for (unsigned q = 0; q < 4; ++q) words[4 * u + q] = sm90::mxfp4_loader_word(sm90::mxfp4_fragment_word(v, q));
      }
      const unsigned m = block_max_byte(sb[(e * nb + src / kQuantBlock) * kbs + kb]);
      const uint8_t* srow = scales + (e * src_rows + stored) * per_row;
      for (int64_t q = 0; q < 4 && kb * 4 + q < per_row; ++q)
        idx |= uint32_t(sm90::mxfp4_table_offset(sm90::mxfp4_shift(srow[kb * 4 + q], m))) << (8 * q);
    }
    uint4* dst = reinterpret_cast<uint4*>(sub + rr * 64);
    for (int u = 0; u < 4; ++u) dst[u] = make_uint4(words[4 * u], words[4 * u + 1], words[4 * u + 2], words[4 * u + 3]);
    *reinterpret_cast<uint32_t*>(sub + kMxfp4CodeBytes + rr * 4) = idx;
  }
}

// One thread per 8 elements (4 code bytes) of E matrices [rows, k]: their E4M3 bytes in the FP8 form.
__global__ void mxfp4_to_fp8_kernel(const uint8_t* codes, const uint8_t* scales, const float* sb, int64_t rows,
                                    int64_t k, int64_t total, uint8_t* q) {
  const int64_t per_row = k / 8, kbs = ceil_div(k, kQuantBlock), nb = ceil_div(rows, kQuantBlock);
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t r = i / per_row, c = (i % per_row) * 8, e = r / rows;  // r: row over all experts
    const unsigned m = block_max_byte(sb[(e * nb + (r % rows) / kQuantBlock) * kbs + c / kQuantBlock]);
    const int shift = sm90::mxfp4_shift(scales[r * (k / kMxfp4Block) + c / kMxfp4Block], m);
    const uint32_t word = *reinterpret_cast<const uint32_t*>(codes + r * (k / 2) + c / 2);
    uint2 out;
    sm90::mxfp4_expand8(sm90::mxfp4_loader_word(word), sm90::mxfp4_table(shift), out.x, out.y);
    *reinterpret_cast<uint2*>(q + r * k + c) = out;
  }
}

void block_scales(const uint8_t* scales, int num_experts, int64_t rows, int64_t k, float* sb, cudaStream_t stream,
                  int64_t interleaved_inter = 0) {
  const int64_t total = int64_t(num_experts) * ceil_div(rows, kQuantBlock) * ceil_div(k, kQuantBlock);
  mxfp4_block_scales_kernel<<<grid_for(total, 256), 256, 0, stream>>>(scales, rows, k, total, interleaved_inter, sb);
  MOEKIT_CUDA_CHECK(cudaGetLastError());
}

}  // namespace

void mxfp4_to_fp8_device(const void* codes, const uint8_t* scales, int num_experts, int64_t rows, int64_t k, void* q,
                         float* sb, cudaStream_t stream) {
  block_scales(scales, num_experts, rows, k, sb, stream);
  const int64_t total = int64_t(num_experts) * rows * (k / 8);
  mxfp4_to_fp8_kernel<<<grid_for(total, 256), 256, 0, stream>>>(static_cast<const uint8_t*>(codes), scales, sb, rows,
                                                               k, total, static_cast<uint8_t*>(q));
  MOEKIT_CUDA_CHECK(cudaGetLastError());
}

int64_t moe_mxfp4_weight_bytes(int num_experts, int64_t rows, int64_t k) {
  return int64_t(num_experts) * (rows / kMxfp4SubRows) * ceil_div(k, kQuantBlock) * kMxfp4SubBytes;
}

void moe_prepare_w1_mxfp4(const void* codes, const uint8_t* scales, bool interleaved, int num_experts, int64_t hidden,
                          int64_t inter, float* sw1_blocks, void* w1p, float* sw1p, cudaStream_t stream) {
  const int64_t il = interleaved ? inter : 0;
  block_scales(scales, num_experts, 2 * inter, hidden, sw1_blocks, stream, il);
  const int64_t rows_p = moe_prepared_w1_rows(inter);
  const int64_t total = int64_t(num_experts) * rows_p * ceil_div(hidden, kQuantBlock);
  mxfp4_sub_chunks_kernel<true><<<grid_for(total, 128), 128, 0, stream>>>(
      static_cast<const uint8_t*>(codes), scales, sw1_blocks, 2 * inter, rows_p, hidden, inter, il, kW1ChunkRows,
      total, static_cast<uint8_t*>(w1p));
  MOEKIT_CUDA_CHECK(cudaGetLastError());
  moe_prepare_w1_scales(sw1_blocks, num_experts, hidden, inter, sw1p, stream);
}

void moe_prepare_w2_mxfp4(const void* codes, const uint8_t* scales, int num_experts, int64_t hidden, int64_t inter,
                          void* w2p, float* sw2, cudaStream_t stream) {
  block_scales(scales, num_experts, hidden, inter, sw2, stream);
  const int64_t total = int64_t(num_experts) * hidden * ceil_div(inter, kQuantBlock);
  mxfp4_sub_chunks_kernel<false><<<grid_for(total, 128), 128, 0, stream>>>(
      static_cast<const uint8_t*>(codes), scales, sw2, hidden, hidden, inter, inter, 0, kMxfp4SubRows, total,
      static_cast<uint8_t*>(w2p));
  MOEKIT_CUDA_CHECK(cudaGetLastError());
}

}  // namespace moekit::detail

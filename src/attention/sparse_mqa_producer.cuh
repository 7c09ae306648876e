// Sparse MQA attention (sparse_mqa_kernel.cuh): the producer warpgroup — the gather of each tile's
// cache entries, their dequantization, the per-key bias.
#pragma once
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include "attention/sparse_mqa_common.cuh"

namespace moekit::attn {

// 8 E4M3 codes (little-endian in lo, hi) times a power of two → 8 bf16 (exact: ≤ 4 significant bits).
__device__ __forceinline__ uint4 dequant8(uint32_t lo, uint32_t hi, float scale) {
  uint4 r;
  uint32_t* out = &r.x;
  const uint32_t in[2] = {lo, hi};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const __nv_fp8x2_storage_t pair = static_cast<__nv_fp8x2_storage_t>((in[i >> 1] >> (16 * (i & 1))) & 0xFFFFu);
    const __half2_raw h = __nv_cvt_fp8x2_to_halfraw2(pair, __NV_E4M3);
    const float2 f = __half22float2(*reinterpret_cast<const __half2*>(&h));
    out[i] = ptx::pack_bf16x2(f.x * scale, f.y * scale);
  }
  return r;
}

// The producer's copies of a tile: warp w copies keys [kK/4 · w, kK/4 · (w + 1)) (kK = tile keys).
//  - bf16 rows: consecutive lanes take consecutive 16-byte granules of a key, so an instruction
//    reads whole lines.
//  - mixed entries: 128 / kK lanes per key, each a contiguous share of the key's 28 granules of
//    FP8 codes, 8 of rope dims and 7 scales (measured on the H100, 2026-11-27, 64-key tiles: 274
//    TFLOPS at h128 top-k 2048 T = 128 against 212 with the line-coalesced order of the bf16 rows).
//    The rope dims go straight to their place in the tile; the codes of dim chunk g land as 4 raw
//    granules in row k of chunk g (slots 0-3 or 4-7 by the key's parity, so a quarter-warp's reads
//    of two keys' raw granules hit every bank once) and are dequantized there; the 7 scales land
//    in a 32-byte slot per key.
template <int kK>
__device__ __forceinline__ uint32_t raw_slot_offset(int key, int g, int q) {
  return uint32_t(g * (kK * 128) + key * 128 + (q + 4 * (key & 1)) * 16);
}

// `ids`: lane l < kK / 4 holds the entry (or −1) of key kK / 4 · warp + l.
template <int D, bool kMixed>
__device__ __forceinline__ void issue_tile_copies(const SparseMqaParams& p, int32_t ids, int warp, int lane,
                                                  uint32_t tile, uint32_t scales, float* bias) {
  constexpr int kK = SparseMqaTraits<D>::kTileKeys, kPerWarp = kK / 4;
  if constexpr (kMixed) {
    constexpr int kLanes = 32 / kPerWarp, kNope = 28 / kLanes, kRope = 8 / kLanes;  // per lane
    const int key = kPerWarp * warp + lane / kLanes, part = lane % kLanes;
    const int32_t entry = __shfl_sync(0xFFFFFFFFu, ids, lane / kLanes);
    const uint32_t bytes = entry >= 0 ? 16u : 0u;  // no entry: zeros, nothing read
    const int64_t e = entry >= 0 ? entry : 0;
    const uint8_t* nope = p.nope + e * p.nope_stride;
#pragma unroll
    for (int n = kNope * part; n < kNope * (part + 1); ++n)
      ptx::cp_async_16(tile + raw_slot_offset<kK>(key, n >> 2, n & 3), nope + 16 * n, bytes);
    const uint8_t* rope = reinterpret_cast<const uint8_t*>(p.rope) + e * p.rope_stride;
#pragma unroll
    for (int v = kRope * part; v < kRope * (part + 1); ++v)
      ptx::cp_async_16(tile + tile_offset<kK>(key, 56 + v), rope + 16 * v, bytes);
    const uint8_t* sc = reinterpret_cast<const uint8_t*>(p.scales) + e * p.scales_stride;
#pragma unroll
    for (int j = kRope * part; j < kRope * (part + 1); ++j)  // 8 slots, 7 scales
      if (j < 7) ptx::cp_async_4(scales + key * 32 + 4 * j, sc + 4 * j, bytes / 4);
  } else {
    constexpr int kGranules = D / 8;  // per key
#pragma unroll 3
    for (int k = 0; k < kPerWarp * kGranules / 32; ++k) {
      const int f = 32 * k + lane, kl = f / kGranules, gr = f % kGranules;
      const int32_t entry = __shfl_sync(0xFFFFFFFFu, ids, kl);
      const int64_t e = entry >= 0 ? entry : 0;
      ptx::cp_async_16(tile + tile_offset<kK>(kPerWarp * warp + kl, gr), p.kv + e * D + 8 * gr, entry >= 0 ? 16u : 0u);
    }
  }
  if (lane < kPerWarp) bias[kPerWarp * warp + lane] = ids >= 0 ? 0.0f : -INFINITY;
}

// Dequantizes this warp's keys of a landed mixed tile in place, four lanes per key (lane q of a
// key expands raw granule q of every chunk). Every lane reads its raw granules before any lane of
// the key writes the row (__syncwarp), so the expansion may overwrite them.
template <int kK>
__device__ __forceinline__ void dequantize_tile(uint32_t tile, uint32_t scales, int warp, int lane) {
  const int q = lane & 3;
#pragma unroll 1
  for (int round = 0; round < kK / 32; ++round) {
    const int key = warp * (kK / 4) + round * 8 + (lane >> 2);
    uint32_t raw[7][4];
    float sc[7];
#pragma unroll
    for (int g = 0; g < 7; ++g) {
      ptx::ld_shared_v4(tile + raw_slot_offset<kK>(key, g, q), raw[g]);
      sc[g] = ptx::ld_shared_f32(scales + key * 32 + 4 * g);
    }
    __syncwarp();
#pragma unroll
    for (int g = 0; g < 7; ++g) {
      const uint4 lo = dequant8(raw[g][0], raw[g][1], sc[g]), hi = dequant8(raw[g][2], raw[g][3], sc[g]);
      const uint32_t wlo[4] = {lo.x, lo.y, lo.z, lo.w}, whi[4] = {hi.x, hi.y, hi.z, hi.w};
      ptx::st_shared_v4(tile + tile_offset<kK>(key, 8 * g + 2 * q), wlo);
      ptx::st_shared_v4(tile + tile_offset<kK>(key, 8 * g + 2 * q + 1), whi);
    }
  }
}

// The producer: the keys' rows are gathered with cp.async (no registers held while in flight)
// kStages − 1 tiles ahead of the one being finished; finishing a tile = waiting for this thread's
// copies, then (mixed) dequantizing in place, then the full barrier. A tile's copies are issued as
// soon as the consumers release its stage, so they are in flight while the consumers work.
// (Prefetching the next tile's rows into L2 with bulk prefetches measured slower: 243 against
// 276 TFLOPS, H100, 2026-11-27.)
template <int D, bool kMixed>
__device__ __forceinline__ void produce_tiles(const SparseMqaParams& p, int64_t t,
                                              const KeyRanges<SparseMqaTraits<D>::kTileKeys>& kr,
                                              uint32_t tiles_smem, float* bias_smem, uint32_t scales_smem,
                                              uint32_t bars) {
  using Tr = SparseMqaTraits<D>;
  constexpr int kK = Tr::kTileKeys, kPerWarp = kK / 4, kAhead = Tr::kStages - 1;
  const int warp = (threadIdx.x >> 5) & 3, lane = threadIdx.x & 31;
  const int n = kr.tiles();
  // Lane l < kPerWarp: the entry of key kPerWarp · warp + l of tile i.
  const auto entry_of = [&](int i) {
    if (i >= n || lane >= kPerWarp) return int32_t(-1);
    int start, limit;
    kr.tile(i, start, limit);
    const int key = kPerWarp * warp + lane;
    return start + key < limit ? key_entry(p, t, kr, start + key) : int32_t(-1);
  };
  int32_t ids_next = entry_of(0);  // loaded a tile before its copies
  const auto issue = [&](int j) {
    const int32_t ids = ids_next;
    ids_next = entry_of(j + 1);
    if (j >= n) return;
    const int stage = j % Tr::kStages;
    if (j >= Tr::kStages) ptx::mbar_wait(bars + 8 * (Tr::kStages + stage), ((j / Tr::kStages) - 1) & 1);
    issue_tile_copies<D, kMixed>(p, ids, warp, lane, tiles_smem + stage * Tr::kTileBytes,
                                 scales_smem + stage * kK * 32, bias_smem + stage * kK);
  };
  for (int j = 0; j < kAhead; ++j) {
    issue(j);
    ptx::cp_async_commit();
  }
  for (int i = 0; i < n; ++i) {
    const int stage = i % Tr::kStages;
    ptx::cp_async_wait<kAhead - 1>();
    __syncwarp();  // a warp dequantizes the keys its own threads copied
    if constexpr (kMixed) dequantize_tile<kK>(tiles_smem + stage * Tr::kTileBytes, scales_smem + stage * kK * 32, warp, lane);
    ptx::fence_proxy_async_smem();  // the tile is read by wgmma (async proxy)
    ptx::mbar_arrive(bars + 8 * stage);
    issue(i + kAhead);
    ptx::cp_async_commit();
  }
}

}  // namespace moekit::attn

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

// The cp.async copies of a tile of bf16 rows: warp w copies keys [kK/4 · w, kK/4 · (w + 1))
// (kK = tile keys), consecutive lanes taking consecutive 16-byte granules of a key, so an
// instruction reads whole lines. `ids`: lane l < kK / 4 holds the entry (or −1) of key
// kK / 4 · warp + l.
template <int D>
__device__ __forceinline__ void issue_tile_copies(const SparseMqaParams& p, int32_t ids, int warp, int lane,
                                                  uint32_t tile, float* bias) {
  constexpr int kK = SparseMqaTraits<D>::kTileKeys, kPerWarp = kK / 4, kGranules = D / 8;
#pragma unroll 3
  for (int k = 0; k < kPerWarp * kGranules / 32; ++k) {
    const int f = 32 * k + lane, kl = f / kGranules, gr = f % kGranules;
    const int32_t entry = __shfl_sync(0xFFFFFFFFu, ids, kl);
    const int64_t e = entry >= 0 ? entry : 0;
    ptx::cp_async_16(tile + tile_offset<kK>(kPerWarp * warp + kl, gr), p.kv + e * D + 8 * gr,
                     entry >= 0 ? 16u : 0u);  // no entry: zeros, nothing read
  }
  if (lane < kPerWarp) bias[kPerWarp * warp + lane] = ids >= 0 ? 0.0f : -INFINITY;
}

// Mixed entries are gathered through registers: four lanes per key, lane q loading granule q (16
// bytes) of each of the 7 chunks of FP8 codes, rope granules 2q and 2q + 1 and scales q and q + 4;
// the next tile's loads are issued as soon as a tile is stored, before its stage is free, and the
// codes are dequantized on their way into the tile. Measured on the H100 (2026-11-27, h128 top-k
// 2048): T = 128 237.9 µs, prefill 333 TFLOPS, against 262.2 µs / 301 TFLOPS with the raw codes
// copied by cp.async into the tile and dequantized in place: one pass over
// shared memory instead of three.

struct MixedKeyRegs {
  uint4 nope[7], rope[2];
  float scale_lo, scale_hi;
};

__device__ __forceinline__ void load_mixed_key(const SparseMqaParams& p, int32_t entry, int q, MixedKeyRegs& r) {
  if (entry < 0) {  // no entry: zeros
#pragma unroll
    for (int g = 0; g < 7; ++g) r.nope[g] = make_uint4(0, 0, 0, 0);
    r.rope[0] = r.rope[1] = make_uint4(0, 0, 0, 0);
    r.scale_lo = r.scale_hi = 0.0f;
    return;
  }
  const uint8_t* nope = p.nope + int64_t(entry) * p.nope_stride + 16 * q;
#pragma unroll
  for (int g = 0; g < 7; ++g) r.nope[g] = __ldg(reinterpret_cast<const uint4*>(nope + 64 * g));
  const uint8_t* rope = reinterpret_cast<const uint8_t*>(p.rope) + int64_t(entry) * p.rope_stride + 32 * q;
  r.rope[0] = __ldg(reinterpret_cast<const uint4*>(rope));
  r.rope[1] = __ldg(reinterpret_cast<const uint4*>(rope + 16));
  const float* scales = reinterpret_cast<const float*>(reinterpret_cast<const uint8_t*>(p.scales) +
                                                       int64_t(entry) * p.scales_stride);
  r.scale_lo = __ldg(scales + q);
  r.scale_hi = q < 3 ? __ldg(scales + q + 4) : 0.0f;
}

__device__ __forceinline__ void store_mixed_key(uint32_t tile, int key, int lane, const MixedKeyRegs& r) {
  const int q = lane & 3;
#pragma unroll
  for (int g = 0; g < 7; ++g) {
    const float sc = __shfl_sync(0xFFFFFFFFu, g < 4 ? r.scale_lo : r.scale_hi, (lane & ~3) | (g & 3));
    const uint4 lo = dequant8(r.nope[g].x, r.nope[g].y, sc), hi = dequant8(r.nope[g].z, r.nope[g].w, sc);
    const uint32_t wlo[4] = {lo.x, lo.y, lo.z, lo.w}, whi[4] = {hi.x, hi.y, hi.z, hi.w};
    ptx::st_shared_v4(tile + tile_offset<64>(key, 8 * g + 2 * q), wlo);
    ptx::st_shared_v4(tile + tile_offset<64>(key, 8 * g + 2 * q + 1), whi);
  }
#pragma unroll
  for (int v = 0; v < 2; ++v) {
    const uint32_t w[4] = {r.rope[v].x, r.rope[v].y, r.rope[v].z, r.rope[v].w};
    ptx::st_shared_v4(tile + tile_offset<64>(key, 56 + 2 * q + v), w);
  }
}

template <int D>
__device__ __forceinline__ void produce_mixed_tiles_via_registers(const SparseMqaParams& p, int64_t t,
                                                                  const KeyRanges<64>& kr, uint32_t tiles_smem,
                                                                  float* bias_smem, uint32_t bars) {
  using Tr = SparseMqaTraits<D>;
  static_assert(Tr::kTileKeys == 64, "four lanes per key, two rounds of 8 keys per warp");
  const int warp = (threadIdx.x >> 5) & 3, lane = threadIdx.x & 31;
  const int n = kr.tiles();
  const auto entry_of = [&](int i) { return warp_tile_ids(p, t, kr, i, warp, lane); };
  MixedKeyRegs r[2];
  const auto load_tile = [&](int32_t ids) {
#pragma unroll
    for (int round = 0; round < 2; ++round)
      load_mixed_key(p, __shfl_sync(0xFFFFFFFFu, ids, 8 * round + (lane >> 2)), lane & 3, r[round]);
  };
  int32_t ids = entry_of(0), ids_next = entry_of(1);
  if (n > 0) load_tile(ids);
  for (int i = 0; i < n; ++i) {
    const int stage = i % Tr::kStages;
    if (i >= Tr::kStages) ptx::mbar_wait(bars + 8 * (Tr::kStages + stage), ((i / Tr::kStages) - 1) & 1);
    const uint32_t tile = tiles_smem + stage * Tr::kTileBytes;
#pragma unroll
    for (int round = 0; round < 2; ++round) store_mixed_key(tile, 16 * warp + 8 * round + (lane >> 2), lane, r[round]);
    if (lane < 16) bias_smem[stage * 64 + 16 * warp + lane] = ids >= 0 ? 0.0f : -INFINITY;
    ptx::fence_proxy_async_smem();  // the tile is read by wgmma (async proxy)
    ptx::mbar_arrive(bars + 8 * stage);
    ids = ids_next;
    ids_next = entry_of(i + 2);
    if (i + 1 < n) load_tile(ids);
  }
}

// The producer. bf16 rows are gathered with cp.async (no registers held while in flight)
// kStages − 1 tiles ahead of the one being finished; finishing a tile = waiting for this thread's
// copies, then the full barrier; a tile's copies are issued as soon as the consumers release its
// stage, so they are in flight while the consumers work. Mixed entries go through registers
// (above). At dim 512 the tile after the one being copied is also prefetched into L2 (below); an
// earlier form that prefetched the tile being copied measured slower (243 against 276 TFLOPS,
// H100, 2026-11-27).
template <int D, bool kMixed>
__device__ __forceinline__ void produce_tiles(const SparseMqaParams& p, int64_t t,
                                              const KeyRanges<SparseMqaTraits<D>::kTileKeys>& kr,
                                              uint32_t tiles_smem, float* bias_smem, uint32_t bars) {
  using Tr = SparseMqaTraits<D>;
  if constexpr (kMixed) {
    produce_mixed_tiles_via_registers<D>(p, t, kr, tiles_smem, bias_smem, bars);
  } else {
    constexpr int kK = Tr::kTileKeys, kAhead = Tr::kStages - 1;
    const int warp = (threadIdx.x >> 5) & 3, lane = threadIdx.x & 31;
    const int n = kr.tiles();
    const auto entry_of = [&](int i) { return warp_tile_ids(p, t, kr, i, warp, lane); };
    int32_t ids_next = entry_of(0);  // loaded a tile before its copies
    // At dim 512 (copies one tile ahead) the rows of the tile after are prefetched into L2 as a
    // tile's copies are issued: h128 top-k 2048 T = 64 / 128 about −2% (114.0 → 111.5, 220.5 →
    // 216.2 µs), prefill within ±2% (H100, four A/B rounds on two machines; docs/attention.md). The
    // same for mixed entries was 5% slower.
    constexpr bool kAheadToL2 = kAhead == 1;
    int32_t ids_ahead = kAheadToL2 ? entry_of(1) : -1;
    const auto issue = [&](int j) {
      const int32_t ids = ids_next;
      if constexpr (kAheadToL2) {
        if (lane < kK / 4 && ids_ahead >= 0)  // tile j + 1
          ptx::bulk_prefetch_l2(p.kv + int64_t(ids_ahead) * D, uint32_t(D) * 2u);
        ids_next = ids_ahead;
        ids_ahead = entry_of(j + 2);
      } else {
        ids_next = entry_of(j + 1);
      }
      if (j >= n) return;
      const int stage = j % Tr::kStages;
      if (j >= Tr::kStages) ptx::mbar_wait(bars + 8 * (Tr::kStages + stage), ((j / Tr::kStages) - 1) & 1);
      issue_tile_copies<D>(p, ids, warp, lane, tiles_smem + stage * Tr::kTileBytes, bias_smem + stage * kK);
    };
    for (int j = 0; j < kAhead; ++j) {
      issue(j);
      ptx::cp_async_commit();
    }
    for (int i = 0; i < n; ++i) {
      ptx::cp_async_wait<kAhead - 1>();
      ptx::fence_proxy_async_smem();  // the tile is read by wgmma (async proxy)
      ptx::mbar_arrive(bars + 8 * (i % Tr::kStages));
      issue(i + kAhead);
      ptx::cp_async_commit();
    }
  }
}

}  // namespace moekit::attn

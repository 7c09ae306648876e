// Sparse MQA attention on Hopper (include/moekit/attention.h, docs/design.md §DeepSeek-V4
// attention): one CTA per (token, split of its keys, 64 query heads).
//
//   warpgroup 0  producer: gathers the split's keys 64 at a time (cache entries by index) with
//                cp.async into a 128-byte swizzled tile, kStages − 1 tiles ahead, dequantizes
//                mixed FP8 entries exactly to bf16 in place, and writes a per-key bias (0, or
//                −inf for no entry / masked); the tiles form a ring of kStages, full/empty
//                mbarriers between the roles.
//   warpgroups 1…  consumers. D ≤ 128: one computes S = Q·Kᵀ for the tile (M = 64 heads,
//                N = 64 keys, K = dim, Q and K from shared memory), the online softmax in
//                registers, and O += P·V (P from registers, V = the same tile read MN-major).
//                D ≥ 256 (O of 64 × 512 FP32 does not fit one warpgroup's registers): the
//                scorer computes S and the softmax once, hands P and the rows' rescale factors
//                to the accumulator through shared memory (two buffers, named barriers), and
//                accumulates the lower half of the dims; the accumulator the upper half, with P
//                from shared memory, while the scorer computes the next tile's S.
//
// Outputs: the final bf16 o and lse (one split, normalized, sink in the denominator), or the
// split's partial (o normalized within the split, lse) as FP32 for the merge.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cstdint>

#include "ptx/ptx.cuh"
#include "ptx/wgmma_bf16.cuh"

namespace moekit::attn {

struct SparseMqaParams {
  const __nv_bfloat16* q;
  int64_t num_tokens;
  int heads;
  float scale_log2;    // softmax_scale · log2(e)
  const float* sink;   // natural-log logits [heads] or null
  const __nv_bfloat16* kv;                                         // bf16 entries [N, dim]
  const uint8_t* nope; const float* scales; const __nv_bfloat16* rope;  // mixed entries
  int64_t nope_stride, scales_stride, rope_stride;                      // bytes per entry
  int64_t num_entries;
  const int32_t* topk_indices; int topk; const int32_t* topk_lens;
  const int32_t* window_indices; int window; const int32_t* window_lens;
  const int32_t* token_request; int64_t num_requests;
  const int32_t* window_positions; const int32_t* query_positions;
  int head_blocks, splits, topk_splits, chunk, window_offset;
  bool final_out;                  // write o (bf16) / lse; else part_o / part_lse
  __nv_bfloat16* o; float* lse;
  float* part_o; float* part_lse;  // [dest, T, heads, dim], [dest, T, heads]
  int window_dest_shift;           // split s ≥ topk_splits writes partial s + shift
};

template <int D>
struct SparseMqaTraits {
  static constexpr int kTileKeys = 64;
  static constexpr int kHeads = 64;
  static constexpr int kChunkBytes = 64 * 128;          // 64 rows × 64 bf16 (one swizzle span)
  static constexpr int kTileBytes = kTileKeys * D * 2;
  static constexpr int kQBytes = kHeads * D * 2;
  static constexpr int kStages = D == 512 ? 2 : 4;
  static constexpr int kConsumers = D >= 256 ? 2 : 1;
  static constexpr int kThreads = 128 * (1 + kConsumers);
  static constexpr int kPOffset = kQBytes + kStages * kTileBytes;            // 2 P buffers (two consumers)
  static constexpr int kBiasOffset = kPOffset + (kConsumers == 2 ? 2 * 64 * 128 : 0);
  static constexpr int kScalesOffset = kBiasOffset + kStages * kTileKeys * 4;  // mixed: 32 B per key
  static constexpr int kAlphaOffset = kScalesOffset + kStages * kTileKeys * 32;  // 2 × 64 rescale factors
  static constexpr int kRowsOffset = kAlphaOffset + 2 * 64 * 4;                  // 64 rows' 1 / denominator
  static constexpr int kBarOffset = kRowsOffset + 64 * 4;
  static constexpr int kSmemBytes = kBarOffset + 2 * kStages * 8 + 1024;  // + alignment slack
  // Registers after setmaxnreg with two consumers: the producer holds one round of raw codes, the
  // scorer S, P and half of O, the accumulator half of O. setmaxnreg.inc only takes what the
  // CTA's other warps released: the total must stay within the launch's 384 × 168, or the
  // scorer waits forever.
  static constexpr int kProducerRegs = 104;
  static constexpr int kScoreRegs = 240;
  static constexpr int kAccumulateRegs = 160;
  static_assert(kConsumers == 1 || kProducerRegs + kScoreRegs + kAccumulateRegs <= 3 * 168,
                "setmaxnreg would ask for more registers than the CTA was launched with");
};

// Byte offset of 16-byte vector v (8 bf16 dims) of row r in a [64 rows, D] swizzled tile.
__device__ __forceinline__ uint32_t tile_offset(int r, int v) {
  return uint32_t((v >> 3) * (64 * 128) + r * 128 + (((v & 7) ^ (r & 7)) << 4));
}

// The keys of one CTA: virtual ranges [a0, a1) (top-k) and [b0, b1) (window), 64-key tiles each.
struct KeyRanges {
  int a0, a1, b0, b1, na, nb, request;
  __device__ int tiles() const { return na + nb; }
  __device__ void tile(int i, int& start, int& limit) const {
    if (i < na) { start = a0 + 64 * i; limit = a1; } else { start = b0 + 64 * (i - na); limit = b1; }
  }
};

__device__ __forceinline__ KeyRanges key_ranges(const SparseMqaParams& p, int64_t t, int s) {
  KeyRanges k;
  const int vbeg = s * p.chunk, vend = vbeg + p.chunk;
  int topk_len = p.topk;
  if (p.topk_lens != nullptr) topk_len = min(max(__ldg(p.topk_lens + t), 0), p.topk);
  k.request = p.token_request != nullptr ? __ldg(p.token_request + t) : int(t);
  int wlen = 0;
  if (p.window > 0 && k.request >= 0 && k.request < p.num_requests)
    wlen = p.window_lens != nullptr ? min(max(__ldg(p.window_lens + k.request), 0), p.window) : p.window;
  k.a0 = vbeg;
  k.a1 = max(k.a0, min(vend, min(p.window_offset, topk_len)));
  k.b0 = max(vbeg, p.window_offset);
  k.b1 = max(k.b0, min(vend, p.window_offset + wlen));
  k.na = (k.a1 - k.a0 + 63) / 64;
  k.nb = (k.b1 - k.b0 + 63) / 64;
  return k;
}

// Cache entry of virtual key vi of token t (−1: none or masked).
__device__ __forceinline__ int32_t key_entry(const SparseMqaParams& p, int64_t t, const KeyRanges& k, int vi) {
  int32_t e;
  if (vi < p.window_offset) {
    e = __ldg(p.topk_indices + t * p.topk + vi);
  } else {
    const int64_t j = int64_t(k.request) * p.window + (vi - p.window_offset);
    e = __ldg(p.window_indices + j);
    if (p.window_positions != nullptr && __ldg(p.window_positions + j) > __ldg(p.query_positions + t)) e = -1;
  }
  return (e >= 0 && e < p.num_entries) ? e : -1;
}

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

// The producer's copies of a tile: warp w copies keys [16w, 16w + 16).
//  - bf16 rows: consecutive lanes take consecutive 16-byte granules of a key, so an instruction
//    reads whole lines.
//  - mixed entries: lanes 2k and 2k + 1 take key k's granules 0-13 / 14-27 of FP8 codes, rope
//    granules 0-3 / 4-7 and scales 0-3 / 4-6 (measured on the H100, 2026-11-27: 274 TFLOPS at
//    h128 top-k 2048 T = 128 against 212 with the line-coalesced order of the bf16 rows). The rope
//    dims go straight to their place in the tile; the codes of dim chunk g land as 4 raw granules
//    in row k of chunk g (slots 0-3 or 4-7 by the key's parity, so a quarter-warp's reads of two
//    keys' raw granules hit every bank once) and are dequantized there; the 7 scales land in a
//    32-byte slot per key.
__device__ __forceinline__ uint32_t raw_slot_offset(int key, int g, int q) {
  return uint32_t(g * (64 * 128) + key * 128 + (q + 4 * (key & 1)) * 16);
}

// `ids`: lane l < 16 holds the entry (or −1) of key 16 · warp + l.
template <int D, bool kMixed>
__device__ __forceinline__ void issue_tile_copies(const SparseMqaParams& p, int32_t ids, int warp, int lane,
                                                  uint32_t tile, uint32_t scales, float* bias) {
  if constexpr (kMixed) {
    const int key = 16 * warp + (lane >> 1), half = lane & 1;
    const int32_t entry = __shfl_sync(0xFFFFFFFFu, ids, lane >> 1);
    const uint32_t bytes = entry >= 0 ? 16u : 0u;  // no entry: zeros, nothing read
    const int64_t e = entry >= 0 ? entry : 0;
    const uint8_t* nope = p.nope + e * p.nope_stride;
#pragma unroll
    for (int n = 14 * half; n < 14 * half + 14; ++n)
      ptx::cp_async_16(tile + raw_slot_offset(key, n >> 2, n & 3), nope + 16 * n, bytes);
    const uint8_t* rope = reinterpret_cast<const uint8_t*>(p.rope) + e * p.rope_stride;
#pragma unroll
    for (int v = 4 * half; v < 4 * half + 4; ++v) ptx::cp_async_16(tile + tile_offset(key, 56 + v), rope + 16 * v, bytes);
    const uint8_t* sc = reinterpret_cast<const uint8_t*>(p.scales) + e * p.scales_stride;
#pragma unroll
    for (int j = 4 * half; j < 4 * half + 4; ++j)
      if (j < 7) ptx::cp_async_4(scales + key * 32 + 4 * j, sc + 4 * j, bytes / 4);
  } else {
    constexpr int kGranules = D / 8;  // per key
#pragma unroll 3
    for (int k = 0; k < 16 * kGranules / 32; ++k) {
      const int f = 32 * k + lane, kl = f / kGranules, gr = f % kGranules;
      const int32_t entry = __shfl_sync(0xFFFFFFFFu, ids, kl);
      const int64_t e = entry >= 0 ? entry : 0;
      ptx::cp_async_16(tile + tile_offset(16 * warp + kl, gr), p.kv + e * D + 8 * gr, entry >= 0 ? 16u : 0u);
    }
  }
  if (lane < 16) bias[16 * warp + lane] = ids >= 0 ? 0.0f : -INFINITY;
}

// Dequantizes this warp's 16 keys of a landed mixed tile in place, four lanes per key (lane q of a
// key expands raw granule q of every chunk). Every lane reads its raw granules before any lane of
// the key writes the row (__syncwarp), so the expansion may overwrite them.
__device__ __forceinline__ void dequantize_tile(uint32_t tile, uint32_t scales, int warp, int lane) {
  const int q = lane & 3;
#pragma unroll 1
  for (int round = 0; round < 2; ++round) {
    const int key = warp * 16 + round * 8 + (lane >> 2);
    uint32_t raw[7][4];
    float sc[7];
#pragma unroll
    for (int g = 0; g < 7; ++g) {
      ptx::ld_shared_v4(tile + raw_slot_offset(key, g, q), raw[g]);
      sc[g] = ptx::ld_shared_f32(scales + key * 32 + 4 * g);
    }
    __syncwarp();
#pragma unroll
    for (int g = 0; g < 7; ++g) {
      const uint4 lo = dequant8(raw[g][0], raw[g][1], sc[g]), hi = dequant8(raw[g][2], raw[g][3], sc[g]);
      const uint32_t wlo[4] = {lo.x, lo.y, lo.z, lo.w}, whi[4] = {hi.x, hi.y, hi.z, hi.w};
      ptx::st_shared_v4(tile + tile_offset(key, 8 * g + 2 * q), wlo);
      ptx::st_shared_v4(tile + tile_offset(key, 8 * g + 2 * q + 1), whi);
    }
  }
}

// The producer: the keys' rows are gathered with cp.async (no registers held while in flight)
// kStages − 1 tiles ahead of the one being finished; finishing a tile = waiting for this thread's
// copies, then (mixed) dequantizing in place, then the full barrier. A tile's copies are issued as
// soon as the consumers release its stage, so they are in flight while the consumers work.
template <int D, bool kMixed>
__device__ __forceinline__ void produce_tiles(const SparseMqaParams& p, int64_t t, const KeyRanges& kr,
                                              uint32_t tiles_smem, float* bias_smem, uint32_t scales_smem,
                                              uint32_t bars) {
  using Tr = SparseMqaTraits<D>;
  constexpr int kAhead = Tr::kStages - 1;
  const int warp = (threadIdx.x >> 5) & 3, lane = threadIdx.x & 31;
  const int n = kr.tiles();
  // Lane l < 16: the entry of key 16 · warp + l of tile i.
  const auto entry_of = [&](int i) {
    if (i >= n || lane >= 16) return int32_t(-1);
    int start, limit;
    kr.tile(i, start, limit);
    const int key = 16 * warp + lane;
    return start + key < limit ? key_entry(p, t, kr, start + key) : int32_t(-1);
  };
  const auto issue = [&](int i, int32_t ids) {
    const int stage = i % Tr::kStages;
    if (i >= Tr::kStages) ptx::mbar_wait(bars + 8 * (Tr::kStages + stage), ((i / Tr::kStages) - 1) & 1);
    issue_tile_copies<D, kMixed>(p, ids, warp, lane, tiles_smem + stage * Tr::kTileBytes,
                                 scales_smem + stage * 64 * 32, bias_smem + stage * 64);
  };
  int32_t entry_next = entry_of(0);
  for (int i = 0; i < kAhead; ++i) {
    const int32_t entry = entry_next;
    entry_next = entry_of(i + 1);
    if (i < n) issue(i, entry);
    ptx::cp_async_commit();
  }
  for (int i = 0; i < n; ++i) {
    const int stage = i % Tr::kStages;
    ptx::cp_async_wait<kAhead - 1>();
    __syncwarp();  // a warp dequantizes the keys its own threads copied
    if constexpr (kMixed) dequantize_tile(tiles_smem + stage * Tr::kTileBytes, scales_smem + stage * 64 * 32, warp, lane);
    ptx::fence_proxy_async_smem();  // the tile is read by wgmma (async proxy)
    ptx::mbar_arrive(bars + 8 * stage);
    const int j = i + kAhead;
    if (j < n) {
      const int32_t entry = entry_next;
      entry_next = entry_of(j + 1);
      issue(j, entry);
    }
    ptx::cp_async_commit();
  }
}

// Consumer building blocks. A thread of a consumer warpgroup holds rows r0 = 16 warp + lane / 4
// and r0 + 8 of the accumulators (wgmma_bf16.cuh's layout).

// S = Q·Kᵀ of one tile (64 heads × 64 keys), waited for.
template <int D>
__device__ __forceinline__ void qk_tile(uint64_t desc_q, uint32_t tile, float (&s)[32]) {
  const uint64_t desc_k = ptx::smem_desc_k_sw128(tile);
  ptx::wgmma_fence();
#pragma unroll
  for (int k = 0; k < D / 16; ++k) {
    const uint64_t off = uint64_t(((k >> 2) * SparseMqaTraits<D>::kChunkBytes + (k & 3) * 32) >> 4);
    ptx::WgmmaBf16<64>::mma(desc_q + off, desc_k + off, s, k > 0 ? 1u : 0u);
  }
  ptx::wgmma_commit();
  ptx::wgmma_wait<0>();
#pragma unroll
  for (int j = 0; j < 32; ++j) ptx::fence_operand(s[j]);
}

// Online softmax of a tile's scores in base 2: updates the running max m and sum l of this
// thread's rows, returns their rescale factors alpha and P packed as the P·V A fragments.
__device__ __forceinline__ void online_softmax(float (&s)[32], const float* bias, float scale_log2, float (&m)[2],
                                               float (&l)[2], float (&alpha)[2], uint32_t (&pa)[4][4]) {
  const int quad = threadIdx.x & 3;
  float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
  for (int j = 0; j < 8; ++j) {
    const float2 b = *reinterpret_cast<const float2*>(bias + 8 * j + 2 * quad);
    s[4 * j + 0] = fmaf(s[4 * j + 0], scale_log2, b.x);
    s[4 * j + 1] = fmaf(s[4 * j + 1], scale_log2, b.y);
    s[4 * j + 2] = fmaf(s[4 * j + 2], scale_log2, b.x);
    s[4 * j + 3] = fmaf(s[4 * j + 3], scale_log2, b.y);
    mx[0] = fmaxf(mx[0], fmaxf(s[4 * j + 0], s[4 * j + 1]));
    mx[1] = fmaxf(mx[1], fmaxf(s[4 * j + 2], s[4 * j + 3]));
  }
  float ref[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xFFFFFFFFu, mx[r], 1));
    mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xFFFFFFFFu, mx[r], 2));
    const float m_new = fmaxf(m[r], mx[r]);
    ref[r] = m_new == -INFINITY ? 0.0f : m_new;  // nothing seen yet: every p and alpha is 0
    alpha[r] = ptx::ex2_approx_ftz(m[r] - ref[r]);
    m[r] = m_new;
    l[r] *= alpha[r];
  }
#pragma unroll
  for (int j = 0; j < 32; j += 2) {
    const int r = (j >> 1) & 1;
    const float p0 = ptx::ex2_approx_ftz(s[j] - ref[r]), p1 = ptx::ex2_approx_ftz(s[j + 1] - ref[r]);
    l[r] += p0 + p1;
    pa[j >> 3][(j >> 1) & 3] = ptx::pack_bf16x2(p0, p1);
  }
}

template <int kAcc>
__device__ __forceinline__ void rescale(float (&o)[kAcc], const float (&alpha)[2]) {
#pragma unroll
  for (int j = 0; j < kAcc; ++j) o[j] *= alpha[(j >> 1) & 1];
}

// O += P · V over one tile, P from registers; V = the tile read MN-major from `v_base` (N dims).
template <int N>
__device__ __forceinline__ void pv_tile(uint32_t (&pa)[4][4], uint32_t v_base, float (&o)[N / 2]) {
  ptx::wgmma_fence();
#pragma unroll
  for (int kk = 0; kk < 4; ++kk)
    ptx::WgmmaBf16Rs<N>::mma_bt(pa[kk], ptx::smem_desc_mn_sw128(v_base + kk * 16 * 128, 64 * 128), o, 1u);
  ptx::wgmma_commit();
  ptx::wgmma_wait<0>();
#pragma unroll
  for (int j = 0; j < N / 2; ++j) ptx::fence_operand(o[j]);
#pragma unroll
  for (int kk = 0; kk < 4; ++kk)
#pragma unroll
    for (int j = 0; j < 4; ++j) ptx::fence_operand(pa[kk][j]);
}

// The same with P from shared memory (64 × 64 bf16, K-major, swizzled like a key tile's chunk).
template <int N>
__device__ __forceinline__ void pv_tile_smem(uint32_t p_smem, uint32_t v_base, float (&o)[N / 2]) {
  const uint64_t desc_p = ptx::smem_desc_k_sw128(p_smem);
  ptx::wgmma_fence();
#pragma unroll
  for (int kk = 0; kk < 4; ++kk)
    ptx::WgmmaBf16SsBt<N>::mma_bt(desc_p + uint64_t((kk * 32) >> 4),
                                  ptx::smem_desc_mn_sw128(v_base + kk * 16 * 128, 64 * 128), o, 1u);
  ptx::wgmma_commit();
  ptx::wgmma_wait<0>();
#pragma unroll
  for (int j = 0; j < N / 2; ++j) ptx::fence_operand(o[j]);
}

// P's fragments into shared memory, the layout pv_tile_smem reads.
__device__ __forceinline__ void store_p(uint32_t p_smem, const uint32_t (&pa)[4][4]) {
  const int warp = (threadIdx.x >> 5) & 3, lane = threadIdx.x & 31, quad = lane & 3;
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int r = 16 * warp + (lane >> 2) + 8 * half;
#pragma unroll
    for (int kk = 0; kk < 4; ++kk)
#pragma unroll
      for (int g = 0; g < 2; ++g)
        ptx::st_shared_u32(p_smem + r * 128 + (((2 * kk + g) ^ (r & 7)) << 4) + 4 * quad, pa[kk][2 * g + half]);
  }
}

// Row r of this thread's pair (r = 0, 1): its head, its denominator's inverse (0: nothing to
// attend) and lse, from the full row sums.
struct RowOut {
  float inv[2], lse[2];
};
__device__ __forceinline__ RowOut finish_rows(const SparseMqaParams& p, int hb, float (&l)[2], const float (&m)[2]) {
  const int warp = (threadIdx.x >> 5) & 3, lane = threadIdx.x & 31;
  RowOut out;
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    l[r] += __shfl_xor_sync(0xFFFFFFFFu, l[r], 1);
    l[r] += __shfl_xor_sync(0xFFFFFFFFu, l[r], 2);
    const int h = hb * 64 + 16 * warp + (lane >> 2) + 8 * r;
    const bool any = l[r] > 0.0f;
    out.lse[r] = any ? (m[r] + __log2f(l[r])) * 0.69314718055994531f : -INFINITY;
    float denom = l[r];
    if (p.final_out && p.sink != nullptr && any && h < p.heads)
      denom += exp2f(__ldg(p.sink + h) * 1.4426950408889634f - m[r]);
    out.inv[r] = any ? 1.0f / denom : 0.0f;
  }
  return out;
}

// Writes this thread's part of dims [d0, d0 + N) of its two rows (and, if `with_lse`, the lse).
template <int D, int N>
__device__ __forceinline__ void store_rows(const SparseMqaParams& p, int64_t t, int split, int hb, const float (&o)[N / 2],
                                           const RowOut& rows, int d0, bool with_lse) {
  const int warp = (threadIdx.x >> 5) & 3, lane = threadIdx.x & 31, quad = lane & 3;
  const int dest = split < p.topk_splits || p.topk_splits == 0 ? split : split + p.window_dest_shift;
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int h = hb * 64 + 16 * warp + (lane >> 2) + 8 * r;
    if (h >= p.heads) continue;
    const float inv = rows.inv[r];
    const int64_t row = t * p.heads + h;
    if (p.final_out) {
      __nv_bfloat16* out = p.o + row * D + d0 + 2 * quad;
#pragma unroll
      for (int j = 0; j < N / 8; ++j)
        *reinterpret_cast<uint32_t*>(out + 8 * j) = ptx::pack_bf16x2(o[4 * j + 2 * r] * inv, o[4 * j + 2 * r + 1] * inv);
      if (with_lse && quad == 0 && p.lse != nullptr) p.lse[row] = rows.lse[r];
    } else {
      const int64_t prow = int64_t(dest) * p.num_tokens * p.heads + row;
      float* out = p.part_o + prow * D + d0 + 2 * quad;
#pragma unroll
      for (int j = 0; j < N / 8; ++j)
        *reinterpret_cast<float2*>(out + 8 * j) = make_float2(o[4 * j + 2 * r] * inv, o[4 * j + 2 * r + 1] * inv);
      if (with_lse && quad == 0) p.part_lse[prow] = rows.lse[r];
    }
  }
}

// Named barriers between the two consumers (D ≥ 256): P of tile i in buffer i % 2 is ready / free
// again, and the rows' final scale is ready.
constexpr uint32_t kBarPReady = 1, kBarPFree = 3, kBarRows = 5;

// The only consumer (D ≤ 128): every dim.
template <int D>
__device__ __forceinline__ void consume_tiles(const SparseMqaParams& p, int64_t t, int split, int hb,
                                              const KeyRanges& kr, uint32_t q_smem, uint32_t tiles_smem,
                                              const float* bias_smem, uint32_t bars) {
  using Tr = SparseMqaTraits<D>;
  float o[D / 2];
#pragma unroll
  for (int i = 0; i < D / 2; ++i) o[i] = 0.0f;
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};
  const uint64_t desc_q = ptx::smem_desc_k_sw128(q_smem);
  for (int i = 0; i < kr.tiles(); ++i) {
    const int stage = i % Tr::kStages;
    ptx::mbar_wait(bars + 8 * stage, (i / Tr::kStages) & 1);
    ptx::fence_proxy_async_smem();  // parts of the tile were written by the producer's cp.async
    const uint32_t tile = tiles_smem + stage * Tr::kTileBytes;
    float s[32], alpha[2];
    uint32_t pa[4][4];
    qk_tile<D>(desc_q, tile, s);
    online_softmax(s, bias_smem + stage * 64, p.scale_log2, m, l, alpha, pa);
    rescale(o, alpha);
    pv_tile<D>(pa, tile, o);
    ptx::mbar_arrive(bars + 8 * (Tr::kStages + stage));  // every thread: its bias reads are done
  }
  store_rows<D, D>(p, t, split, hb, o, finish_rows(p, hb, l, m), 0, true);
}

// Consumer 0 of two (D ≥ 256): S and the softmax of every tile, once; P and the rows' rescale
// factors go to shared memory for consumer 1; then O += P·V for the lower half of the dims.
template <int D>
__device__ __forceinline__ void score_tiles(const SparseMqaParams& p, int64_t t, int split, int hb, const KeyRanges& kr,
                                            uint32_t q_smem, uint32_t tiles_smem, const float* bias_smem,
                                            uint32_t p_smem, float* alpha_smem, float* rows_smem, uint32_t bars) {
  using Tr = SparseMqaTraits<D>;
  constexpr int kN = D / 2;
  const int warp = (threadIdx.x >> 5) & 3, lane = threadIdx.x & 31, r0 = 16 * warp + (lane >> 2);
  float o[kN / 2];
#pragma unroll
  for (int i = 0; i < kN / 2; ++i) o[i] = 0.0f;
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};
  const uint64_t desc_q = ptx::smem_desc_k_sw128(q_smem);
  const int n = kr.tiles();
  for (int i = 0; i < n; ++i) {
    const int stage = i % Tr::kStages, b = i & 1;
    ptx::mbar_wait(bars + 8 * stage, (i / Tr::kStages) & 1);
    ptx::fence_proxy_async_smem();
    const uint32_t tile = tiles_smem + stage * Tr::kTileBytes;
    float s[32], alpha[2];
    uint32_t pa[4][4];
    qk_tile<D>(desc_q, tile, s);
    online_softmax(s, bias_smem + stage * 64, p.scale_log2, m, l, alpha, pa);
    if (i >= 2) ptx::named_barrier_sync(kBarPFree + b, 256);  // consumer 1 is done with tile i − 2's P
    store_p(p_smem + b * 8192, pa);
    if ((lane & 3) == 0) {
      alpha_smem[64 * b + r0] = alpha[0];
      alpha_smem[64 * b + r0 + 8] = alpha[1];
    }
    ptx::fence_proxy_async_smem();  // P is read by consumer 1's wgmma
    ptx::named_barrier_arrive(kBarPReady + b, 256);
    rescale(o, alpha);
    pv_tile<kN>(pa, tile, o);
    ptx::mbar_arrive(bars + 8 * (Tr::kStages + stage));
  }
  const RowOut rows = finish_rows(p, hb, l, m);
  if ((lane & 3) == 0) {
    rows_smem[r0] = rows.inv[0];
    rows_smem[r0 + 8] = rows.inv[1];
  }
  ptx::named_barrier_arrive(kBarRows, 256);
  store_rows<D, kN>(p, t, split, hb, o, rows, 0, true);
}

// Consumer 1 of two: O += P·V for the upper half of the dims, P and the rescale factors from
// consumer 0.
template <int D>
__device__ __forceinline__ void accumulate_tiles(const SparseMqaParams& p, int64_t t, int split, int hb,
                                                 const KeyRanges& kr, uint32_t tiles_smem, uint32_t p_smem,
                                                 const float* alpha_smem, const float* rows_smem, uint32_t bars) {
  using Tr = SparseMqaTraits<D>;
  constexpr int kN = D / 2;
  const int warp = (threadIdx.x >> 5) & 3, lane = threadIdx.x & 31, r0 = 16 * warp + (lane >> 2);
  float o[kN / 2];
#pragma unroll
  for (int i = 0; i < kN / 2; ++i) o[i] = 0.0f;
  const int n = kr.tiles();
  for (int i = 0; i < n; ++i) {
    const int stage = i % Tr::kStages, b = i & 1;
    ptx::named_barrier_sync(kBarPReady + b, 256);
    ptx::mbar_wait(bars + 8 * stage, (i / Tr::kStages) & 1);  // complete already (consumer 0 waited)
    ptx::fence_proxy_async_smem();
    const float alpha[2] = {alpha_smem[64 * b + r0], alpha_smem[64 * b + r0 + 8]};
    rescale(o, alpha);
    pv_tile_smem<kN>(p_smem + b * 8192, tiles_smem + stage * Tr::kTileBytes + (kN / 64) * Tr::kChunkBytes, o);
    if (i + 2 < n) ptx::named_barrier_arrive(kBarPFree + b, 256);
    ptx::mbar_arrive(bars + 8 * (Tr::kStages + stage));
  }
  ptx::named_barrier_sync(kBarRows, 256);
  RowOut rows;
  rows.inv[0] = rows_smem[r0];
  rows.inv[1] = rows_smem[r0 + 8];
  store_rows<D, kN>(p, t, split, hb, o, rows, kN, false);
}

template <int D, bool kMixed>
__global__ void __launch_bounds__(SparseMqaTraits<D>::kThreads, 1) sparse_mqa_kernel(const SparseMqaParams p) {
  using Tr = SparseMqaTraits<D>;
  extern __shared__ uint8_t attn_smem_raw[];
  const uint32_t raw = ptx::smem_addr(attn_smem_raw);
  const uint32_t base = (raw + 1023u) & ~1023u;
  uint8_t* base_ptr = attn_smem_raw + (base - raw);
  const uint32_t q_smem = base, tiles_smem = base + Tr::kQBytes, bars = base + Tr::kBarOffset;
  const uint32_t scales_smem = base + Tr::kScalesOffset, p_smem = base + Tr::kPOffset;
  float* bias_smem = reinterpret_cast<float*>(base_ptr + Tr::kBiasOffset);
  float* alpha_smem = reinterpret_cast<float*>(base_ptr + Tr::kAlphaOffset);
  float* rows_smem = reinterpret_cast<float*>(base_ptr + Tr::kRowsOffset);

  const int hb = int(blockIdx.x % unsigned(p.head_blocks));
  const int64_t ts = blockIdx.x / unsigned(p.head_blocks);
  const int split = int(ts % p.splits);
  const int64_t t = ts / p.splits;

  if (threadIdx.x == 0) {
    for (int s = 0; s < Tr::kStages; ++s) {
      ptx::mbar_init(bars + 8 * s, 128);                                 // full: every producer thread
      ptx::mbar_init(bars + 8 * (Tr::kStages + s), 128 * Tr::kConsumers);  // empty: every consumer thread
    }
    ptx::fence_mbar_init();
  }
  // Q's 64 heads of token t (rows past `heads` are zero), swizzled like the key tiles.
  for (int i = threadIdx.x; i < 64 * (D / 8); i += Tr::kThreads) {
    const int r = i / (D / 8), v = i % (D / 8), h = hb * 64 + r;
    uint4 w = make_uint4(0, 0, 0, 0);
    if (h < p.heads) w = __ldg(reinterpret_cast<const uint4*>(p.q + (t * p.heads + h) * D) + v);
    const uint32_t words[4] = {w.x, w.y, w.z, w.w};
    ptx::st_shared_v4(q_smem + tile_offset(r, v), words);
  }
  ptx::fence_proxy_async_smem();
  __syncthreads();

  const KeyRanges kr = key_ranges(p, t, split);
  const int wg = threadIdx.x / 128;
  if (wg == 0) {
    if constexpr (Tr::kConsumers == 2) ptx::setmaxnreg_dec<Tr::kProducerRegs>();
    produce_tiles<D, kMixed>(p, t, kr, tiles_smem, bias_smem, scales_smem, bars);
  } else if constexpr (Tr::kConsumers == 1) {
    consume_tiles<D>(p, t, split, hb, kr, q_smem, tiles_smem, bias_smem, bars);
  } else if (wg == 1) {
    ptx::setmaxnreg_inc<Tr::kScoreRegs>();
    score_tiles<D>(p, t, split, hb, kr, q_smem, tiles_smem, bias_smem, p_smem, alpha_smem, rows_smem, bars);
  } else {
    ptx::setmaxnreg_dec<Tr::kAccumulateRegs>();
    accumulate_tiles<D>(p, t, split, hb, kr, tiles_smem, p_smem, alpha_smem, rows_smem, bars);
  }
}

}  // namespace moekit::attn

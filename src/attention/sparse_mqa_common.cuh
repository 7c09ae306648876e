// Sparse MQA attention (sparse_mqa_kernel.cuh): the kernel's parameters, its shared-memory plan
// and the per-CTA key ranges every role reads.
#pragma once
#include <cuda_bf16.h>

#include <cstdint>

#include "ptx/ptx.cuh"

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
  bool merge_follows;              // a merge kernel (a PDL dependent) reads part_o / part_lse
  __nv_bfloat16* o; float* lse;
  float* part_o; float* part_lse;  // [dest, T, heads, dim], [dest, T, heads]
  int window_dest_shift;           // split s ≥ topk_splits writes partial s + shift
};

template <int D>
struct SparseMqaTraits {
  // Tiles of 64 keys; at dim 512 two stages (four of 32 keys measured slower: 267 against 276
  // TFLOPS mixed, 307 against 334 bf16, h128 top-k 2048 T = 128, H100, 2026-11-27, two runs).
  static constexpr int kTileKeys = 64;
  static constexpr int kHeads = 64;
  static constexpr int kChunkBytes = kTileKeys * 128;  // a tile's 64 dims (one swizzle span) of every key
  static constexpr int kTileBytes = kTileKeys * D * 2;
  static constexpr int kQBytes = kHeads * D * 2;
  static constexpr int kStages = D == 512 ? 2 : 4;
  static constexpr int kConsumers = D >= 256 ? 2 : 1;
  static constexpr int kThreads = 128 * (1 + kConsumers);
  static constexpr int kPOffset = kQBytes + kStages * kTileBytes;            // 2 P buffers (two consumers)
  static constexpr int kBiasOffset = kPOffset + (kConsumers == 2 ? 2 * 64 * 128 : 0);
  static constexpr int kAlphaOffset = kBiasOffset + kStages * kTileKeys * 4;  // 2 × 64 rescale factors
  static constexpr int kRowsOffset = kAlphaOffset + 2 * 64 * 4;                  // 64 rows' 1 / denominator
  static constexpr int kBarOffset = kRowsOffset + 64 * 4;
  static constexpr int kSmemBytes = kBarOffset + 2 * kStages * 8 + 1024;  // + alignment slack
  // Registers after setmaxnreg with two consumers: the producer holds a tile's raw codes, the
  // scorer S, P and half of O, the accumulator half of O. setmaxnreg.inc only takes what the
  // CTA's other warps released: the total must stay within the launch's 384 × 168, or the
  // scorer waits forever.
  static constexpr int kProducerRegs = 104;
  static constexpr int kScoreRegs = 240;
  static constexpr int kAccumulateRegs = 160;
  static_assert(kConsumers == 1 || kProducerRegs + kScoreRegs + kAccumulateRegs <= 3 * 168,
                "setmaxnreg would ask for more registers than the CTA was launched with");
};

// Byte offset of 16-byte vector v (8 bf16 dims) of row r in a [kRows, D] swizzled tile (Q: 64
// head rows; a key tile: kTileKeys rows): 64-dim chunks of kRows × 128 bytes.
template <int kRows>
__device__ __forceinline__ uint32_t tile_offset(int r, int v) {
  return uint32_t((v >> 3) * (kRows * 128) + r * 128 + (((v & 7) ^ (r & 7)) << 4));
}

// The keys of one CTA: virtual ranges [a0, a1) (top-k) and [b0, b1) (window), tiles of kKeys each.
template <int kKeys>
struct KeyRanges {
  int a0, a1, b0, b1, na, nb, request;
  __device__ int tiles() const { return na + nb; }
  __device__ void tile(int i, int& start, int& limit) const {
    if (i < na) { start = a0 + kKeys * i; limit = a1; } else { start = b0 + kKeys * (i - na); limit = b1; }
  }
};

template <int kKeys>
__device__ __forceinline__ KeyRanges<kKeys> key_ranges(const SparseMqaParams& p, int64_t t, int s) {
  KeyRanges<kKeys> k;
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
  k.na = (k.a1 - k.a0 + kKeys - 1) / kKeys;
  k.nb = (k.b1 - k.b0 + kKeys - 1) / kKeys;
  return k;
}

// Cache entry of virtual key vi of token t (−1: none or masked).
template <int kKeys>
__device__ __forceinline__ int32_t key_entry(const SparseMqaParams& p, int64_t t, const KeyRanges<kKeys>& k, int vi) {
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

// The producer's entry ids of tile i: lane l < kK / 4 of warp w holds the entry (or −1) of the
// tile's key kK / 4 · w + l; −1 past the last tile.
template <int kK>
__device__ __forceinline__ int32_t warp_tile_ids(const SparseMqaParams& p, int64_t t, const KeyRanges<kK>& kr, int i,
                                                 int warp, int lane) {
  if (i >= kr.tiles() || lane >= kK / 4) return -1;
  int start, limit;
  kr.tile(i, start, limit);
  const int key = kK / 4 * warp + lane;
  return start + key < limit ? key_entry(p, t, kr, start + key) : -1;
}

}  // namespace moekit::attn

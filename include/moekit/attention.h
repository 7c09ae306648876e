// moekit — DeepSeek-V4 attention's cache and rotary ops (issue 38). The attention kernels that
// read this cache come next; the float64 references of every piece are in
// src/attention/attention_reference.h (docs/design.md §DeepSeek-V4 attention).
#pragma once
#include <cstdint>
#include <cuda_runtime_api.h>

namespace moekit {

/// The mixed FP8/BF16 KV cache of DeepSeek-V4 (head dim 512, K = V), one entry per cached token:
/// dims [0, 448) are E4M3 codes `nope[e, d]` times a power-of-two scale `scales[e, d / 64]`, dims
/// [448, 512) are bf16 `rope[e, d − 448]`. Three row-major arrays (device pointers).
struct MixedKvCache {
  static constexpr int kNope = 448;   ///< FP8 dims
  static constexpr int kRope = 64;    ///< bf16 dims (the RoPE dims)
  static constexpr int kGroup = 64;   ///< FP8 dims per scale
  static constexpr int kScales = kNope / kGroup;
  uint8_t* nope = nullptr;   ///< [num_entries, 448] E4M3 codes
  float* scales = nullptr;   ///< [num_entries, 7] powers of two (FP32)
  void* rope = nullptr;      ///< [num_entries, 64] bf16, 16-byte aligned
  int64_t num_entries = 0;
};

/// Writes T new K rows into the cache: row t (bf16 [T, 512], row stride ldk ≥ 512 elements, a
/// multiple of 8; 16-byte aligned) goes to entry slots[t]. Each group of 64 FP8 dims gets the
/// smallest power of two s with amax / s ≤ 448 (1 for an all-zero group, NaN if the group holds a
/// NaN; an infinite amax gives s = 1 and codes ±448; below ~448 · 2^-126 the quotient rounds in
/// the subnormal range, so s may be one step off and is itself subnormal) and codes E4M3(x / s)
/// (RN, satfinite); the rope dims are copied bit for bit. The same as detail::quantize_mixed_kv
/// (which writes a NaN rope dim as 0x7FFF). Slots < 0 or ≥ num_entries are skipped (never
/// written); slots must be distinct (two rows to one slot race).
/// Asynchronous, capturable; throws moekit::Error (kInvalidArgument, kMisaligned) on bad arguments.
void mixed_kv_cache_write(const void* k, int64_t num_tokens, int64_t ldk, const int32_t* slots,
                          const MixedKvCache& cache, cudaStream_t stream);

/// RoPE in place on the last 64 dims of x, bf16 [T, heads, dim] (contiguous; dim ≥ 64, a multiple
/// of 8), interleaved pairs (2i, 2i + 1) of those dims: (a, b) → (a cos θ − b sin θ, a sin θ +
/// b cos θ), θ of token t at positions[t] from cos / sin FP32 [max_positions, 32]; `inverse`
/// rotates by −θ (DeepSeek-V4's inverse RoPE on the attention output, with the same tables). Math
/// in FP32, one bf16 rounding. Tokens whose position is < 0 or ≥ max_positions are left as they
/// are; the other dims are never touched. Asynchronous, capturable; throws on bad arguments.
void rope_inplace(void* x, int64_t num_tokens, int heads, int64_t dim, const int32_t* positions, const float* cos,
                  const float* sin, int64_t max_positions, bool inverse, cudaStream_t stream);

}  // namespace moekit

// Sparse MQA attention on Hopper (include/moekit/attention.h, docs/design.md §DeepSeek-V4
// attention): one CTA per (token, split of its keys, 64 query heads).
//
//   warpgroup 0  producer: gathers the split's keys 64 at a time (cache entries by index) into a
//                128-byte swizzled tile — bf16 rows with cp.async kStages − 1 tiles ahead, mixed
//                FP8 entries through registers a tile ahead, dequantized exactly to bf16 on the
//                way — and writes a per-key bias (0, or −inf for no entry / masked); the tiles
//                form a ring of kStages, full/empty mbarriers between the roles.
//   warpgroups 1…  consumers. D ≤ 128: one computes S = Q·Kᵀ for the tile (M = 64 heads,
//                N = the tile's keys, K = dim, Q and K from shared memory), the online softmax in
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
#include "attention/sparse_mqa_common.cuh"
#include "attention/sparse_mqa_consumer.cuh"
#include "attention/sparse_mqa_producer.cuh"

namespace moekit::attn {

template <int D, bool kMixed>
__global__ void __launch_bounds__(SparseMqaTraits<D>::kThreads, 1) sparse_mqa_kernel(const SparseMqaParams p) {
  using Tr = SparseMqaTraits<D>;
  extern __shared__ uint8_t attn_smem_raw[];
  const uint32_t raw = ptx::smem_addr(attn_smem_raw);
  const uint32_t base = (raw + 1023u) & ~1023u;
  uint8_t* base_ptr = attn_smem_raw + (base - raw);
  const uint32_t q_smem = base, tiles_smem = base + Tr::kQBytes, bars = base + Tr::kBarOffset;
  const uint32_t p_smem = base + Tr::kPOffset;
  float* bias_smem = reinterpret_cast<float*>(base_ptr + Tr::kBiasOffset);
  float* alpha_smem = reinterpret_cast<float*>(base_ptr + Tr::kAlphaOffset);
  float* rows_smem = reinterpret_cast<float*>(base_ptr + Tr::kRowsOffset);

  // The merge of split partials (a PDL dependent) may launch now: its CTAs wait for this grid to
  // finish on SMs this grid leaves free (its CTAs are all resident when splits are planned). Only
  // then: a caller's own PDL kernel after a direct launch keeps the plain completion order.
  if (p.merge_follows) ptx::griddep_launch_dependents();
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
    ptx::st_shared_v4(q_smem + tile_offset<64>(r, v), words);
  }
  ptx::fence_proxy_async_smem();
  __syncthreads();

  const KeyRanges<Tr::kTileKeys> kr = key_ranges<Tr::kTileKeys>(p, t, split);
  const int wg = threadIdx.x / 128;
  if (wg == 0) {
    if constexpr (Tr::kConsumers == 2) ptx::setmaxnreg_dec<Tr::kProducerRegs>();
    produce_tiles<D, kMixed>(p, t, kr, tiles_smem, bias_smem, bars);
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

// Sparse MQA attention (sparse_mqa_kernel.cuh): the consumer warpgroups — S = Q·Kᵀ, the online
// softmax, O += P·V and the output rows.
#pragma once
#include "attention/sparse_mqa_common.cuh"
#include "ptx/wgmma_bf16.cuh"

namespace moekit::attn {

// Consumer building blocks. A thread of a consumer warpgroup holds rows r0 = 16 warp + lane / 4
// and r0 + 8 of the accumulators (wgmma_bf16.cuh's layout); kK = keys per tile.

// S = Q·Kᵀ of one tile (64 heads × kK keys), waited for.
template <int D>
__device__ __forceinline__ void qk_tile(uint64_t desc_q, uint32_t tile, float (&s)[SparseMqaTraits<D>::kTileKeys / 2]) {
  constexpr int kK = SparseMqaTraits<D>::kTileKeys;
  const uint64_t desc_k = ptx::smem_desc_k_sw128(tile);
  ptx::wgmma_fence();
#pragma unroll
  for (int k = 0; k < D / 16; ++k) {
    const uint64_t off_q = uint64_t(((k >> 2) * (64 * 128) + (k & 3) * 32) >> 4);
    const uint64_t off_k = uint64_t(((k >> 2) * (kK * 128) + (k & 3) * 32) >> 4);
    ptx::WgmmaBf16<kK>::mma(desc_q + off_q, desc_k + off_k, s, k > 0 ? 1u : 0u);
  }
  ptx::wgmma_commit();
  ptx::wgmma_wait<0>();
#pragma unroll
  for (int j = 0; j < kK / 2; ++j) ptx::fence_operand(s[j]);
}

// Online softmax of a tile's scores in base 2: updates the running max m and sum l of this
// thread's rows, returns their rescale factors alpha and P packed as the P·V A fragments.
template <int kK>
__device__ __forceinline__ void online_softmax(float (&s)[kK / 2], const float* bias, float scale_log2, float (&m)[2],
                                               float (&l)[2], float (&alpha)[2], uint32_t (&pa)[kK / 16][4]) {
  const int quad = threadIdx.x & 3;
  float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
  for (int j = 0; j < kK / 8; ++j) {
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
  for (int j = 0; j < kK / 2; j += 2) {
    const int r = (j >> 1) & 1;
    const float p0 = ptx::ex2_approx_ftz(s[j] - ref[r]), p1 = ptx::ex2_approx_ftz(s[j + 1] - ref[r]);
    l[r] += p0 + p1;
    pa[j >> 3][(j >> 1) & 3] = ptx::pack_bf16x2(p0, p1);
  }
}

template <int kAcc>
__device__ __forceinline__ void zero(float (&o)[kAcc]) {
#pragma unroll
  for (int j = 0; j < kAcc; ++j) o[j] = 0.0f;
}

template <int kAcc>
__device__ __forceinline__ void rescale(float (&o)[kAcc], const float (&alpha)[2]) {
#pragma unroll
  for (int j = 0; j < kAcc; ++j) o[j] *= alpha[(j >> 1) & 1];
}

// O += P · V over one tile, P from registers; V = the tile read MN-major from `v_base` (N dims).
template <int N, int kK>
__device__ __forceinline__ void pv_tile(uint32_t (&pa)[kK / 16][4], uint32_t v_base, float (&o)[N / 2]) {
  ptx::wgmma_fence();
#pragma unroll
  for (int kk = 0; kk < kK / 16; ++kk)
    ptx::WgmmaBf16Rs<N>::mma_bt(pa[kk], ptx::smem_desc_mn_sw128(v_base + kk * 16 * 128, kK * 128), o, 1u);
  ptx::wgmma_commit();
  ptx::wgmma_wait<0>();
#pragma unroll
  for (int j = 0; j < N / 2; ++j) ptx::fence_operand(o[j]);
#pragma unroll
  for (int kk = 0; kk < kK / 16; ++kk)
#pragma unroll
    for (int j = 0; j < 4; ++j) ptx::fence_operand(pa[kk][j]);
}

// The same with P from shared memory (64 rows × kK bf16 in 128-byte swizzled rows, K-major).
template <int N, int kK>
__device__ __forceinline__ void pv_tile_smem(uint32_t p_smem, uint32_t v_base, float (&o)[N / 2]) {
  const uint64_t desc_p = ptx::smem_desc_k_sw128(p_smem);
  ptx::wgmma_fence();
#pragma unroll
  for (int kk = 0; kk < kK / 16; ++kk)
    ptx::WgmmaBf16SsBt<N>::mma_bt(desc_p + uint64_t((kk * 32) >> 4),
                                  ptx::smem_desc_mn_sw128(v_base + kk * 16 * 128, kK * 128), o, 1u);
  ptx::wgmma_commit();
  ptx::wgmma_wait<0>();
#pragma unroll
  for (int j = 0; j < N / 2; ++j) ptx::fence_operand(o[j]);
}

// P's fragments into shared memory, the layout pv_tile_smem reads.
template <int kK>
__device__ __forceinline__ void store_p(uint32_t p_smem, const uint32_t (&pa)[kK / 16][4]) {
  const int warp = (threadIdx.x >> 5) & 3, lane = threadIdx.x & 31, quad = lane & 3;
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int r = 16 * warp + (lane >> 2) + 8 * half;
#pragma unroll
    for (int kk = 0; kk < kK / 16; ++kk)
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
                                              const KeyRanges<SparseMqaTraits<D>::kTileKeys>& kr, uint32_t q_smem,
                                              uint32_t tiles_smem, const float* bias_smem, uint32_t bars) {
  using Tr = SparseMqaTraits<D>;
  constexpr int kK = Tr::kTileKeys;
  float o[D / 2];
  zero(o);
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};
  const uint64_t desc_q = ptx::smem_desc_k_sw128(q_smem);
  for (int i = 0; i < kr.tiles(); ++i) {
    const int stage = i % Tr::kStages;
    ptx::mbar_wait(bars + 8 * stage, (i / Tr::kStages) & 1);
    ptx::fence_proxy_async_smem();  // parts of the tile were written by the producer's cp.async
    const uint32_t tile = tiles_smem + stage * Tr::kTileBytes;
    float s[kK / 2], alpha[2];
    uint32_t pa[kK / 16][4];
    qk_tile<D>(desc_q, tile, s);
    online_softmax<kK>(s, bias_smem + stage * kK, p.scale_log2, m, l, alpha, pa);
    rescale(o, alpha);
    pv_tile<D, kK>(pa, tile, o);
    ptx::mbar_arrive(bars + 8 * (Tr::kStages + stage));  // every thread: its bias reads are done
  }
  store_rows<D, D>(p, t, split, hb, o, finish_rows(p, hb, l, m), 0, true);
}

// Consumer 0 of two (D ≥ 256): S and the softmax of every tile, once; P and the rows' rescale
// factors go to shared memory for consumer 1; then O += P·V for the lower half of the dims.
template <int D>
__device__ __forceinline__ void score_tiles(const SparseMqaParams& p, int64_t t, int split, int hb,
                                            const KeyRanges<SparseMqaTraits<D>::kTileKeys>& kr, uint32_t q_smem,
                                            uint32_t tiles_smem, const float* bias_smem, uint32_t p_smem,
                                            float* alpha_smem, float* rows_smem, uint32_t bars) {
  using Tr = SparseMqaTraits<D>;
  constexpr int kN = D / 2, kK = Tr::kTileKeys;
  const int warp = (threadIdx.x >> 5) & 3, lane = threadIdx.x & 31, r0 = 16 * warp + (lane >> 2);
  float o[kN / 2];
  zero(o);
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};
  const uint64_t desc_q = ptx::smem_desc_k_sw128(q_smem);
  const int n = kr.tiles();
  for (int i = 0; i < n; ++i) {
    const int stage = i % Tr::kStages, b = i & 1;
    ptx::mbar_wait(bars + 8 * stage, (i / Tr::kStages) & 1);
    ptx::fence_proxy_async_smem();
    const uint32_t tile = tiles_smem + stage * Tr::kTileBytes;
    float s[kK / 2], alpha[2];
    uint32_t pa[kK / 16][4];
    qk_tile<D>(desc_q, tile, s);
    online_softmax<kK>(s, bias_smem + stage * kK, p.scale_log2, m, l, alpha, pa);
    if (i >= 2) ptx::named_barrier_sync(kBarPFree + b, 256);  // consumer 1 is done with tile i − 2's P
    store_p<kK>(p_smem + b * 8192, pa);
    if ((lane & 3) == 0) {
      alpha_smem[64 * b + r0] = alpha[0];
      alpha_smem[64 * b + r0 + 8] = alpha[1];
    }
    ptx::fence_proxy_async_smem();  // P is read by consumer 1's wgmma
    ptx::named_barrier_arrive(kBarPReady + b, 256);
    rescale(o, alpha);
    pv_tile<kN, kK>(pa, tile, o);
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
                                                 const KeyRanges<SparseMqaTraits<D>::kTileKeys>& kr,
                                                 uint32_t tiles_smem, uint32_t p_smem, const float* alpha_smem,
                                                 const float* rows_smem, uint32_t bars) {
  using Tr = SparseMqaTraits<D>;
  constexpr int kN = D / 2, kK = Tr::kTileKeys;
  const int warp = (threadIdx.x >> 5) & 3, lane = threadIdx.x & 31, r0 = 16 * warp + (lane >> 2);
  float o[kN / 2];
  zero(o);
  const int n = kr.tiles();
  for (int i = 0; i < n; ++i) {
    const int stage = i % Tr::kStages, b = i & 1;
    ptx::named_barrier_sync(kBarPReady + b, 256);
    ptx::mbar_wait(bars + 8 * stage, (i / Tr::kStages) & 1);  // complete already (consumer 0 waited)
    ptx::fence_proxy_async_smem();
    const float alpha[2] = {alpha_smem[64 * b + r0], alpha_smem[64 * b + r0 + 8]};
    rescale(o, alpha);
    pv_tile_smem<kN, kK>(p_smem + b * 8192, tiles_smem + stage * Tr::kTileBytes + (kN / 64) * Tr::kChunkBytes, o);
    if (i + 2 < n) ptx::named_barrier_arrive(kBarPFree + b, 256);
    ptx::mbar_arrive(bars + 8 * (Tr::kStages + stage));
  }
  ptx::named_barrier_sync(kBarRows, 256);
  RowOut rows;
  rows.inv[0] = rows_smem[r0];
  rows.inv[1] = rows_smem[r0 + 8];
  store_rows<D, kN>(p, t, split, hb, o, rows, kN, false);
}

}  // namespace moekit::attn

// Epilogues of the MoE layer's two grouped GEMMs (SPEC §3), plugged into the sm90 FP8 mainloop.
//
// SwigluFp8Epilogue — GEMM1. Tile 64 rows x 256 columns of the prepared W1 (moe_prepare_w1), two
//   math warpgroups side by side: warpgroup wn holds columns [128 wn, 128 wn + 128) = 64 gate and
//   the 64 up columns of the same h indices, so h = silu(g) * u is formed in registers:
//     acc[4i + j] (chunk i < 8) is g and acc[32 + 4i + j] is u of h column 64 wn + 8i + 2(l%4) + j%2,
//     row r0 (j < 2) or r0 + 8 (j ≥ 2).
//   The 1x128 quantization block of h is the tile's 128 h columns: each warpgroup reduces its row
//   maxima over a quad (shuffles), the two warpgroups swap them through shared memory, and both
//   quantize with s = max(amax, 1e-4) / 448, q = e4m3(h / s) (the correctly rounded quotient,
//   computed branch-free; RN, satfinite) — the operations of the host quantizer, so h never makes
//   a bf16 round trip. q goes to a 128-byte
//   swizzled staging tile and out with one TMA store (clipped at I and at the tensor's rows); the
//   scale to sa_out[h_block * sa_out_ld + row] (the A-scale layout GEMM2 reads).
//   Rows past the tile's valid rows are padding of the same expert segment (64-row tiles never
//   cross the 128-aligned segments): their accumulators hold garbage, so they are quantized as
//   zeros (h = 0, the minimum scale); storing them is harmless, GEMM2 skips them.
//
// ScatterAddEpilogue — GEMM2. Each valid row r of the tile with e = row_map[m0 + r] ≥ 0 is added,
//   times row_weight[e], into out_acc[e / top_k, n0 : n0 + BLOCK_N] with 16-byte FP32 vector
//   atomics (red.global.add.v4.f32): lanes l and l^1 swap halves so each lane owns 4 consecutive
//   columns of one row (even lanes row r0, odd lanes row r0 + 8). The sum over a token's slots is
//   FP32 but its order is not fixed (see the layer's deterministic mode).
#pragma once
#include "kernels/sm90/fp8_gemm_layout.cuh"
#include "kernels/sm90/scheduler.cuh"
#include "ptx/ptx.cuh"

namespace moekit::sm90 {

/// The GEMM1 epilogues' element math (this one and epilogue_mx_decode.cuh's): the activation
/// with its clamp, and the division of the FP8 requantization.
struct SwigluMath {
  // Branch-free division (the IEEE __fdiv_rn carries a slow-path branch per call, which serializes
  // the 96 divisions of a thread into dependent chains: measured 12 µs per tile). With r = RN(1/y),
  // q0 = RN(x r), e = x - y q0 (exact by FMA) and q0 + e r rounded once is the correctly rounded
  // x / y (Markstein) whenever x / y neither overflows nor underflows — always the case below.
  __device__ __forceinline__ static float div_with_recip(float x, float y, float r) {
    const float q0 = __fmul_rn(x, r);
    return __fmaf_rn(__fmaf_rn(-y, q0, x), r, q0);
  }

  /// The optional clamp (SPEC §3: g <= limit, -limit <= u <= limit; comparisons keep NaN).
  __device__ __forceinline__ static void clamp(float& g, float& u, float limit) {
    g = g > limit ? limit : g;
    u = u > limit ? limit : (u < -limit ? -limit : u);
  }

  /// silu(g) * u = g / (1 + 2^(-g log2 e)) * u with the special-function unit's 2^x and 1/x (a few
  /// FP32 ulps): h feeds an E4M3 quantizer with 3 mantissa bits, and g itself carries the tensor
  /// core's ~1e-4 accumulation error, so the IEEE-exact forms (accurate expf, a Newton step and a
  /// Markstein division: ~20 instructions per element) bought nothing but epilogue time
  /// (docs/performance.md §SwiGLU epilogue). The exponent is capped so the denominator stays
  /// finite (silu of g < -80 is below 1e-33, far under any row's quantization step); a NaN g stays
  /// NaN. The bare MUFU forms give the bits
  /// of __expf / __fdividef here (their fix-ups only touch results below 2^-126, which vanish in
  /// 1 + e, and divisors of 2^126 or more, which 1 + e^80 is not) in 7 instead of 15 instructions
  /// per element (measured: the same rel_l2 on every preset; GEMM1 -0.3% at T = 4096, the layer
  /// -1 µs at T = 1, docs/performance.md §SwiGLU epilogue).
  __device__ __forceinline__ static float silu_mul(float g, float u) {
    const float e = ptx::ex2_approx_ftz(fminf(-g, 80.0f) * 1.44269504088896341f);
    return __fmul_rn(g, ptx::rcp_approx_ftz(1.0f + e)) * u;
  }

  /// gpt-oss's g·sigmoid(alpha·g)·(u + 1) (SPEC §6), in silu_mul's form.
  __device__ __forceinline__ static float gpt_oss_mul(float g, float u, float alpha) {
    const float e = ptx::ex2_approx_ftz(fminf(-alpha * g, 80.0f) * 1.44269504088896341f);
    return __fmul_rn(g, ptx::rcp_approx_ftz(1.0f + e)) * (u + 1.0f);
  }

  /// Byte offset of FP8 column c (0..127) of row r in the 128-byte swizzled staging tile.
  __device__ __forceinline__ static u32 staging_offset(u32 r, u32 c) {
    return r * 128u + ((((c >> 4) ^ (r & 7u)) << 4) | (c & 15u));
  }
};

template <class T>
struct SwigluFp8Epilogue : SwigluMath {
  static_assert(T::kBlockM == 64 && T::kWgN == 2 && T::kWgCols == 128, "GEMM1 tile: 64 x (2 x 128)");
  static constexpr u32 kSmemBytes = kSwigluEpilogueSmem;
  static constexpr u32 kMathThreads = T::kMathThreads;
  static constexpr u32 kXchOffset = 64u * 128u;  // row maxima [2][64] floats after the tile

  /// gpt-oss's biases: g and u of h column c (of the tile's 128, this warpgroup's 64 from
  /// `h_col0`) get b1[c] and b1[I + c] of the tile's expert.
  __device__ __forceinline__ static void add_bias(float (&acc)[64], const Tile& t, const MoeGemm1Params& p,
                                                  const MathThread& th) {
    const u32 e = t.b_row0 / p.n, h_col0 = t.n0 / 2u + th.wn * 64u + 2u * (th.lane % 4u);
    const float* b = p.b1 + static_cast<unsigned long long>(e) * 2u * p.b1_inter;
#pragma unroll
    for (u32 i = 0; i < 32; ++i) {
      const u32 c = h_col0 + 8u * (i / 4u) + (i & 1u);
      if (c < p.b1_inter) {
        acc[i] += __ldg(b + c);
        acc[32 + i] += __ldg(b + p.b1_inter + c);
      }
    }
  }

  /// h of this thread's 32 elements in place of the gate accumulators (rows r0 when `lo`, r0 + 8
  /// when `hi`; the other rows' h is 0) and their partial row maxima.
  template <bool kLo, bool kHi>
  __device__ __forceinline__ static void swiglu_rows(float (&acc)[64], float limit, bool gpt_oss, float alpha,
                                                     float& amax0, float& amax1) {
    if (limit > 0.0f) {  // uniform: the clamp costs nothing where no limit is set
#pragma unroll
      for (int i = 0; i < 32; ++i) clamp(acc[i], acc[32 + i], limit);
    }
#pragma unroll
    for (int i = 0; i < 32; ++i) {
      const bool lo_row = (i & 2) == 0;
      if (lo_row ? !kLo : !kHi) {
        acc[i] = 0.0f;
        continue;
      }
      acc[i] = gpt_oss ? gpt_oss_mul(acc[i], acc[32 + i], alpha) : silu_mul(acc[i], acc[32 + i]);
      if (lo_row) amax0 = fmaxf(amax0, fabsf(acc[i]));
      else amax1 = fmaxf(amax1, fabsf(acc[i]));
    }
  }

  __device__ __forceinline__ static void store(float (&acc)[64], const Tile& t, const MoeGemm1Params& p, u32 smem_d,
                                               const ptx::TmaDescriptor& tma_d, const MathThread& th) {
#if MOEKIT_DIAG_NO_EPILOGUE
    diag_sink(acc, p.sa_out);
    return;
#endif
    const u32 r0 = th.warp * 16 + th.lane / 4;
    // Padding rows (past the tile's valid rows) hold garbage — with 8-row A boxes, stale shared
    // memory and unwritten A scales — whose NaN / Inf / denormal values send every IEEE division
    // below down its slow path (measured: 12 µs per tile instead of ~1). They are never used:
    // quantize zeros instead.
    if (r0 >= t.valid_rows) {
#pragma unroll
      for (int i = 0; i < 64; ++i)
        if ((i & 2) == 0) acc[i] = 0.0f;
    }
    if (r0 + 8 >= t.valid_rows) {
#pragma unroll
      for (int i = 0; i < 64; ++i)
        if ((i & 2) != 0) acc[i] = 0.0f;
    }
    // h in place of the gate accumulators, and this thread's partial row maxima. A warp whose rows
    // r0 (r0 + 8) are all padding skips their SwiGLU (warp-uniform): decode tiles hold a few valid
    // rows of 64, and this epilogue sits on the critical path of a CTA's last tile (docs/performance.md §SwiGLU epilogue).
    float amax0 = 0.0f, amax1 = 0.0f;
    const u32 warp_row0 = th.warp * 16;
    if (p.b1 != nullptr && warp_row0 < t.valid_rows) add_bias(acc, t, p, th);  // (padding rows' h is zeroed below)
    const bool gpt_oss = p.gpt_oss != 0;
    if (warp_row0 + 8 < t.valid_rows) swiglu_rows<true, true>(acc, p.limit, gpt_oss, p.alpha, amax0, amax1);
    else if (warp_row0 < t.valid_rows) swiglu_rows<true, false>(acc, p.limit, gpt_oss, p.alpha, amax0, amax1);
    else swiglu_rows<false, false>(acc, p.limit, gpt_oss, p.alpha, amax0, amax1);
    amax0 = fmaxf(amax0, __shfl_xor_sync(0xffffffffu, amax0, 1));
    amax0 = fmaxf(amax0, __shfl_xor_sync(0xffffffffu, amax0, 2));
    amax1 = fmaxf(amax1, __shfl_xor_sync(0xffffffffu, amax1, 1));
    amax1 = fmaxf(amax1, __shfl_xor_sync(0xffffffffu, amax1, 2));

    const u32 xch = smem_d + kXchOffset;
    // The previous tile's TMA store must have finished reading the staging tile, and every thread
    // must be done with the previous tile's maxima.
    if (th.warpgroup == 0 && th.warp == 0 && th.lane == 0) ptx::tma_store_wait_read<0>();
    ptx::named_barrier_sync(1, kMathThreads);
    if (th.lane % 4 == 0) {
      ptx::st_shared_f32(xch + (th.wn * 64 + r0) * 4, amax0);
      ptx::st_shared_f32(xch + (th.wn * 64 + r0 + 8) * 4, amax1);
    }
    ptx::named_barrier_sync(1, kMathThreads);
    amax0 = fmaxf(amax0, ptx::ld_shared_f32(xch + ((1 - th.wn) * 64 + r0) * 4));
    amax1 = fmaxf(amax1, ptx::ld_shared_f32(xch + ((1 - th.wn) * 64 + r0 + 8) * 4));
    const float s0 = __fdiv_rn(fmaxf(amax0, 1e-4f), 448.0f);
    const float s1 = __fdiv_rn(fmaxf(amax1, 1e-4f), 448.0f);
    // h / s exactly as the host quantizer's IEEE division (see div_with_recip), one reciprocal per row.
    const float i0 = __frcp_rn(s0), i1 = __frcp_rn(s1);

    const u32 col = th.wn * 64 + 2 * (th.lane % 4);
#pragma unroll
    for (u32 i = 0; i < 8; ++i) {
      ptx::st_shared_u16(smem_d + staging_offset(r0, col + 8 * i),
                         ptx::pack_e4m3x2(div_with_recip(acc[4 * i + 0], s0, i0),
                                          div_with_recip(acc[4 * i + 1], s0, i0)));
      ptx::st_shared_u16(smem_d + staging_offset(r0 + 8, col + 8 * i),
                         ptx::pack_e4m3x2(div_with_recip(acc[4 * i + 2], s1, i1),
                                          div_with_recip(acc[4 * i + 3], s1, i1)));
    }
    const u32 h_block = t.n0 / u32(T::kBlockN);
    if (th.wn == 0 && th.lane % 4 == 0) {
      float* sa = p.sa_out + static_cast<unsigned long long>(h_block) * p.sa_out_ld + t.m0;
      if (t.m0 + r0 < p.m) sa[r0] = s0;
      if (t.m0 + r0 + 8 < p.m) sa[r0 + 8] = s1;
    }
    ptx::fence_proxy_async_smem();
    ptx::named_barrier_sync(1, kMathThreads);
    if (th.warpgroup == 0 && th.warp == 0 && th.lane == 0) {
      ptx::tma_store_2d(&tma_d, smem_d, int(h_block * 128), int(t.m0));
      ptx::tma_store_commit();
    }
  }

  __device__ __forceinline__ static void finish(const MathThread& th, const GemmParams&) {
    if (th.warpgroup == 0 && th.warp == 0 && th.lane == 0) ptx::tma_store_wait<0>();
  }
};

template <class T>
struct ScatterAddEpilogue {
  static_assert(T::kWgN == 1, "warpgroups stacked along M");
  static constexpr u32 kSmemBytes = 0;
  static constexpr int kAcc = T::kBlockN / 2;

  /// Adds the tile's rows (kAcc per thread and wave; wave w's rows 128 w further down), each times
  /// its router weight, into out_acc at its token's row.
  __device__ __forceinline__ static void store(const float (&acc_all)[kAcc * T::kWaves], const Tile& t,
                                               const MoeGemm2Params& p, u32, const ptx::TmaDescriptor&,
                                               const MathThread& th) {
    const bool odd = (th.lane & 1u) != 0;
#pragma unroll
    for (u32 wave = 0; wave < u32(T::kWaves); ++wave) {
      const float* acc = acc_all + wave * kAcc;
      const u32 row = wave * 128 + th.wm * 64 + th.warp * 16 + th.lane / 4 + (odd ? 8u : 0u);
      int e = -1;
      if (row < t.valid_rows) e = ptx::ld_chain(p.row_map + t.m0 + row);
      const float w = e >= 0 ? ptx::ld_chain(p.row_weight + e) : 0.0f;
      float* dst = p.out_acc + (e >= 0 ? static_cast<unsigned long long>(u32(e) / p.top_k) * p.n : 0ull) + t.n0 +
                   4 * ((th.lane % 4) / 2);
      // gpt-oss's b2 (SPEC §6): o = W2·h + b2 of the tile's expert, before the router weight.
      const float* bias = p.b2 != nullptr ? p.b2 + static_cast<unsigned long long>(t.b_row0 / p.n) * p.n + t.n0 +
                                                4 * ((th.lane % 4) / 2)
                                          : nullptr;
#pragma unroll
      for (u32 i = 0; i < u32(kAcc) / 4; ++i) {
        // Even lanes send their row-r0+8 pair and keep row r0; odd lanes the reverse.
        const float x = odd ? acc[4 * i + 0] : acc[4 * i + 2];
        const float y = odd ? acc[4 * i + 1] : acc[4 * i + 3];
        const float rx = __shfl_xor_sync(0xffffffffu, x, 1);
        const float ry = __shfl_xor_sync(0xffffffffu, y, 1);
        const float v0 = odd ? rx : acc[4 * i + 0];
        const float v1 = odd ? ry : acc[4 * i + 1];
        const float v2 = odd ? acc[4 * i + 2] : rx;
        const float v3 = odd ? acc[4 * i + 3] : ry;
        if (e >= 0 && t.n0 + 8 * i + 4 * ((th.lane % 4) / 2) < p.n) {
          float4 b = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
          if (bias != nullptr) b = __ldg(reinterpret_cast<const float4*>(bias + 8 * i));
          ptx::red_add_v4_f32(dst + 8 * i, w * (v0 + b.x), w * (v1 + b.y), w * (v2 + b.z), w * (v3 + b.w));
        }
      }
    }
    __syncwarp();  // the next tile's wgmma needs a converged warp
  }

  __device__ __forceinline__ static void finish(const MathThread&, const GemmParams&) {}
};

}  // namespace moekit::sm90

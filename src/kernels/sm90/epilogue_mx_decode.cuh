// Epilogues of the MXFP4 decode GEMMs (mxfp4_decode_gemm.cuh), whose sums are transposed: a
// thread holds weight rows r = 16 warp + lane/4 and r + 8 of each 64-row MMA tile, for tokens
// 8c + 2 (lane % 4) + {0, 1} (out[t][4c + {0, 1}]: row r; out[t][4c + {2, 3}]: row r + 8).
//
// MxDecodeSwigluEpilogue — GEMM1 on 256 rows of the prepared W1 (moe_w1_layout.h): warpgroup w's
//   MMA tiles 2w and 2w + 1 are the gate and up rows of the same 64 h columns 64 w + r, so h is
//   formed in registers as in SwigluFp8Epilogue (biases, clamp, activation). The 1x128 block of a
//   token is the tile's 128 h columns: quad-mates share tokens, so each thread's two rows, then
//   the warp's eight row groups (shuffles), then the eight warps (shared memory) give the token's
//   maximum; h is quantized with SwigluMath::div_with_recip into the 128-byte swizzled staging
//   tile (one row per token) and stored with one TMA box of kTok rows; the scales to
//   sa_out[h_block * sa_out_ld + row]. Tokens past the tile's valid rows are quantized as zeros.
// MxDecodeScatterEpilogue — GEMM2: each valid token column c with e = row_map[m0 + c] ≥ 0 adds
//   row_weight[e] · (out + b2) of its rows into out_acc[e / top_k] (FP32 atomics; a warp's eight
//   consecutive rows per token make 32-byte pieces). Under stream-K every piece adds its partial
//   sum, and the piece with the tile's first K block the bias.
#pragma once
#include "kernels/sm90/epilogue_moe.cuh"

namespace moekit::sm90 {

template <class T>
struct MxDecodeSwigluEpilogue : SwigluMath {
  static_assert(T::kMTiles == 2 && T::kSbRows == 64, "GEMM1 tile: 256 prepared W1 rows, gate and up per warpgroup");
  static constexpr int kAcc = T::kAcc;
  static constexpr bool kWholeSum = true;  ///< stream-K: the activation needs the tile's whole sum
  static constexpr u32 kTok = u32(T::kBlockM);
  static constexpr u32 kSmemBytes = gemm_mx_decode_swiglu_smem(T::kBlockM);
  static constexpr u32 kXchOffset = kTok * 128u;  // token maxima [8 warps][kTok] floats after the tile

  __device__ __forceinline__ static void store(float (&out)[2][kAcc], const Tile& t, const MoeGemm1Params& p,
                                               u32 smem_d, const ptx::TmaDescriptor& tma_d, const MathThread& th) {
    const u32 q = th.lane % 4u, r = 16u * th.warp + th.lane / 4u;
    const u32 col0 = 64u * th.warpgroup + r;  // this thread's h columns in the tile: col0 and col0 + 8
    const u32 h0 = t.n0 / 2u + col0;
    float* g = out[0];
    const float* u = out[1];
    float bg0 = 0.0f, bg1 = 0.0f, bu0 = 0.0f, bu1 = 0.0f;
    if (p.b1 != nullptr) {
      const float* b = p.b1 + static_cast<unsigned long long>(t.b_row0 / p.n) * 2u * p.b1_inter;
      if (h0 < p.b1_inter) {
        bg0 = __ldg(b + h0);
        bu0 = __ldg(b + p.b1_inter + h0);
      }
      if (h0 + 8u < p.b1_inter) {
        bg1 = __ldg(b + h0 + 8u);
        bu1 = __ldg(b + p.b1_inter + h0 + 8u);
      }
    }
    const bool gpt_oss = p.gpt_oss != 0;
    float amax[kAcc / 2];  // per token column of this thread (2 per 8-token chunk)
#pragma unroll
    for (int i = 0; i < kAcc / 2; ++i) amax[i] = 0.0f;
#pragma unroll
    for (int i = 0; i < kAcc; ++i) {
      const u32 tok = 8u * u32(i / 4) + 2u * q + u32(i & 1);
      const bool hi = (i & 2) != 0;
      float gv = g[i] + (hi ? bg1 : bg0), uv = u[i] + (hi ? bu1 : bu0);
      if (p.limit > 0.0f) clamp(gv, uv, p.limit);
      // Padding tokens hold garbage (stale A rows and scales): quantized as zeros.
      const float h = tok < t.valid_rows ? (gpt_oss ? gpt_oss_mul(gv, uv, p.alpha) : silu_mul(gv, uv)) : 0.0f;
      g[i] = h;
      float& m = amax[2 * (i / 4) + (i & 1)];
      m = fmaxf(m, fabsf(h));
    }
#pragma unroll
    for (int i = 0; i < kAcc / 2; ++i) {  // over the warp's eight row groups (lanes of the same q)
      amax[i] = fmaxf(amax[i], __shfl_xor_sync(0xffffffffu, amax[i], 4));
      amax[i] = fmaxf(amax[i], __shfl_xor_sync(0xffffffffu, amax[i], 8));
      amax[i] = fmaxf(amax[i], __shfl_xor_sync(0xffffffffu, amax[i], 16));
    }
    const u32 xch = smem_d + kXchOffset;
    const u32 warp8 = 4u * th.warpgroup + th.warp;
    // The previous tile's TMA store must have read the staging tile, and everyone its maxima.
    if (threadIdx.x == 0) ptx::tma_store_wait_read<0>();
    ptx::named_barrier_sync(1, T::kMathThreads);
    if (th.lane < 4) {
#pragma unroll
      for (int i = 0; i < kAcc / 2; ++i)
        ptx::st_shared_f32(xch + (warp8 * kTok + 8u * u32(i / 2) + 2u * q + u32(i & 1)) * 4u, amax[i]);
    }
    ptx::named_barrier_sync(1, T::kMathThreads);
    float s[kAcc / 2], inv[kAcc / 2];
#pragma unroll
    for (int i = 0; i < kAcc / 2; ++i) {
      const u32 tok = 8u * u32(i / 2) + 2u * q + u32(i & 1);
      float m = 0.0f;
#pragma unroll
      for (u32 w = 0; w < 8; ++w) m = fmaxf(m, ptx::ld_shared_f32(xch + (w * kTok + tok) * 4u));
      s[i] = __fdiv_rn(fmaxf(m, 1e-4f), 448.0f);
      inv[i] = __frcp_rn(s[i]);
    }
#pragma unroll
    for (int i = 0; i < kAcc; ++i) {
      const u32 tok = 8u * u32(i / 4) + 2u * q + u32(i & 1);
      const u32 col = col0 + ((i & 2) ? 8u : 0u);
      const int k = 2 * (i / 4) + (i & 1);
      const float v = div_with_recip(g[i], s[k], inv[k]);
      ptx::st_shared_u8(smem_d + staging_offset(tok, col), ptx::pack_e4m3x2(v, 0.0f) & 0xFFu);
    }
    const u32 h_block = t.n0 / 256u;
    if (th.warpgroup == 0 && th.warp == 0 && th.lane < 4) {
      float* sa = p.sa_out + static_cast<unsigned long long>(h_block) * p.sa_out_ld + t.m0;
#pragma unroll
      for (int i = 0; i < kAcc / 2; ++i) {
        const u32 tok = 8u * u32(i / 2) + 2u * q + u32(i & 1);
        if (t.m0 + tok < p.m) sa[tok] = s[i];
      }
    }
    ptx::fence_proxy_async_smem();
    ptx::named_barrier_sync(1, T::kMathThreads);
    if (threadIdx.x == 0) {
      ptx::tma_store_2d(&tma_d, smem_d, int(h_block * 128u), int(t.m0));
      ptx::tma_store_commit();
    }
  }

  __device__ __forceinline__ static void finish(const MathThread&, const GemmParams&) {
    if (threadIdx.x == 0) ptx::tma_store_wait<0>();
  }
};

template <class T>
struct MxDecodeScatterEpilogue {
  static constexpr int kAcc = T::kAcc;
  static constexpr bool kWholeSum = false;  ///< stream-K: each piece adds its own partial sum
  static constexpr u32 kSmemBytes = 0;

  __device__ __forceinline__ static void store(float (&out)[T::kMTiles][kAcc], const Tile& t, const MoeGemm2Params& p,
                                               u32, const ptx::TmaDescriptor&, const MathThread& th) {
    const u32 q = th.lane % 4u, r = 16u * th.warp + th.lane / 4u;
    // Stream-K pieces: the bias once, with the tile's first K block.
    const float* bias = p.b2 != nullptr && t.kb_begin == 0
                            ? p.b2 + static_cast<unsigned long long>(t.b_row0 / p.n) * p.n
                            : nullptr;
#pragma unroll
    for (int c = 0; c < kAcc / 2; ++c) {  // this thread's token columns
      const u32 tok = 8u * u32(c / 2) + 2u * q + u32(c & 1);
      const int e = tok < t.valid_rows ? ptx::ld_chain(p.row_map + t.m0 + tok) : -1;
      if (e < 0) continue;
      const float w = ptx::ld_chain(p.row_weight + e);
      float* dst = p.out_acc + static_cast<unsigned long long>(u32(e) / p.top_k) * p.n;
#pragma unroll
      for (int j = 0; j < T::kMTiles; ++j) {
        const u32 row = t.n0 + 64u * (th.warpgroup * T::kMTiles + j) + r;
#pragma unroll
        for (u32 h = 0; h < 2; ++h) {
          const u32 n = row + 8u * h;
          if (n >= p.n) continue;
          const float v = out[j][4 * (c / 2) + 2 * h + (c & 1)] + (bias != nullptr ? __ldg(bias + n) : 0.0f);
          atomicAdd(dst + n, w * v);
        }
      }
    }
    __syncwarp();  // the next tile's wgmma needs a converged warp
  }

  __device__ __forceinline__ static void finish(const MathThread&, const GemmParams&) {}
};

}  // namespace moekit::sm90

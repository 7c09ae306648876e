// Device side of the routing kernels (routing.cu): order keys, logits loads, group limiting and
// the per-token top-k of one warp (route_token). Shared by route_kernel and the fused
// route + single-CTA sort of the MoE forward (route_sort.cu). The semantics and the design are
// described at the top of routing.cu.
#pragma once
#include <cstdint>

#include <cuda_runtime.h>

#include "moe/routing_params.h"
#include "ptx/ptx.cuh"

namespace moekit::detail::routing {

constexpr unsigned kFullMask = 0xFFFFFFFFu;

// ---------------------------------------------------------------------------------------------
// Order keys
// ---------------------------------------------------------------------------------------------

// Monotone map of a float to uint32: a < b ⇔ key(a) < key(b) for numbers, −0 → +0, NaN → 1 (below
// −Inf = 0x007FFFFF). 0 is left for "not selectable".
__device__ __forceinline__ uint32_t order_key(float f) {
  if (f != f) return 1u;
  uint32_t b = __float_as_uint(f);
  if (b == 0x80000000u) b = 0u;
  return (b & 0x80000000u) ? ~b : (b | 0x80000000u);
}

// Inverse of order_key (keys 0 and 1 → NaN).
__device__ __forceinline__ float key_value(uint32_t k) {
  if (k <= 1u) return __uint_as_float(0x7FC00000u);
  return __uint_as_float((k & 0x80000000u) ? (k ^ 0x80000000u) : ~k);
}

__device__ __forceinline__ void top2_insert(uint32_t& t1, uint32_t& t2, uint32_t x) {
  if (x > t1) {
    t2 = t1;
    t1 = x;
  } else if (x > t2) {
    t2 = x;
  }
}

__device__ __forceinline__ void top2_merge(uint32_t& t1, uint32_t& t2, uint32_t o1, uint32_t o2) {
  const uint32_t lo = min(t1, o1);
  t1 = max(t1, o1);
  t2 = max(lo, max(t2, o2));
}

// Key of a group score: its b for a 1-expert group, else the fp32 sum of its two best b.
__device__ __forceinline__ uint32_t group_key(uint32_t t1, uint32_t t2, int group_size) {
  return group_size == 1 ? t1 : order_key(key_value(t1) + key_value(t2));
}

// s / sum for 0 ≤ s ≤ sum ≤ 32 (a picked s over the sum of the picked s), within 2 ulp, without
// IEEE division: its slow path is a called subroutine, and the call makes ptxas spill in the
// larger kernels. A sum below 2^-100 (all picked logits below about −69) is scaled by 2^64 first
// (exact) to stay in __fdividef's range; sum = 0 gives 0 · Inf = NaN, as 0 / 0.
__device__ __forceinline__ float normalized(float s, float sum) {
  if (sum < 0x1p-100f) {
    s *= 0x1p64f;
    sum *= 0x1p64f;
  }
  return __fdividef(s, sum);
}

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(kFullMask, v, off);
  return v;
}

__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) v = fmaxf(v, __shfl_xor_sync(kFullMask, v, off));
  return v;
}

// ---------------------------------------------------------------------------------------------
// Loads: T = float or uint16_t (bf16 bits). Experts past E read as 0 (never selectable anyway).
// ---------------------------------------------------------------------------------------------

__device__ __forceinline__ float to_float(float v) { return v; }
__device__ __forceinline__ float to_float(uint16_t v) { return __uint_as_float(static_cast<uint32_t>(v) << 16); }

template <typename T>
__device__ __forceinline__ void unpack_word(uint32_t w, float* out) {
  if constexpr (sizeof(T) == 4) {
    out[0] = __uint_as_float(w);
  } else {
    out[0] = __uint_as_float(w << 16);
    out[1] = __uint_as_float(w & 0xFFFF0000u);
  }
}

template <int NPL, typename T, int VB>
__device__ __forceinline__ void load_vec(const T* row, int e0, int E, float (&x)[NPL]) {
  constexpr int V = VB / static_cast<int>(sizeof(T));  // elements per load
  if constexpr (V >= 2 && NPL % V == 0) {
#pragma unroll
    for (int p = 0; p < NPL / V; ++p) {
      const int e = e0 + p * V;
      float* out = x + p * V;
      if (e < E) {  // E % V == 0: a load is all in or all out
        if constexpr (VB == 16) {
          const uint4 u = ptx::ld_chain(reinterpret_cast<const uint4*>(row + e));
          unpack_word<T>(u.x, out);
          unpack_word<T>(u.y, out + 4 / sizeof(T));
          unpack_word<T>(u.z, out + 8 / sizeof(T));
          unpack_word<T>(u.w, out + 12 / sizeof(T));
        } else if constexpr (VB == 8) {
          const uint2 u = ptx::ld_chain(reinterpret_cast<const uint2*>(row + e));
          unpack_word<T>(u.x, out);
          unpack_word<T>(u.y, out + 4 / sizeof(T));
        } else {
          unpack_word<T>(ptx::ld_chain(reinterpret_cast<const unsigned int*>(row + e)), out);
        }
      } else {
#pragma unroll
        for (int i = 0; i < V; ++i) out[i] = 0.0f;
      }
    }
  } else {
    // Not a combination the host picks; keep it correct anyway.
#pragma unroll
    for (int i = 0; i < NPL; ++i) x[i] = (e0 + i < E) ? to_float(ptx::ld_chain(row + e0 + i)) : 0.0f;
  }
}

template <int NPL, typename T>
__device__ __forceinline__ void load_row(const T* row, int e0, int E, int vec_bytes, float (&x)[NPL]) {
  if (vec_bytes == 16) {
    load_vec<NPL, T, 16>(row, e0, E, x);
  } else if (vec_bytes == 8) {
    load_vec<NPL, T, 8>(row, e0, E, x);
  } else if (vec_bytes == 4) {
    load_vec<NPL, T, 4>(row, e0, E, x);
  } else {
#pragma unroll
    for (int i = 0; i < NPL; ++i) x[i] = (e0 + i < E) ? to_float(ptx::ld_chain(row + e0 + i)) : 0.0f;
  }
}

// ---------------------------------------------------------------------------------------------
// Selection helpers
// ---------------------------------------------------------------------------------------------

// The lane's best selectable key (0 if none), its register slot and its s (sigmoid only).
template <int NPL>
__device__ __forceinline__ void local_best(const uint32_t (&vk)[NPL], const float (&sv)[NPL], uint32_t& bk,
                                           int& bi, float& bs) {
  bk = 0u;
  bi = 0;
  bs = 0.0f;
#pragma unroll
  for (int i = 0; i < NPL; ++i) {
    if (vk[i] > bk) {  // strict: the first of equal keys (lower index) stays
      bk = vk[i];
      bi = i;
      bs = sv[i];
    }
  }
}

// Group limiting: sets the keys of experts outside the topk_groups best groups to 0.
template <int NPL>
__device__ __forceinline__ void drop_groups(uint32_t (&vk)[NPL], const Params& p, uint32_t* gs, uint8_t* kept,
                                            int lane, int e0, int g0, int q0) {
  const int E = p.num_experts, G = p.group_size, ng = p.num_groups;
  if (p.group_mode == kGroupsSegment) {
    uint32_t t1 = 0u, t2 = 0u;
#pragma unroll
    for (int i = 0; i < NPL; ++i) top2_insert(t1, t2, vk[i]);
    for (int off = 1; off < (1 << p.seg_shift); off <<= 1) {
      const uint32_t o1 = __shfl_xor_sync(kFullMask, t1, off);
      const uint32_t o2 = __shfl_xor_sync(kFullMask, t2, off);
      top2_merge(t1, t2, o1, o2);
    }
    const int g = lane >> p.seg_shift;
    if ((lane & ((1 << p.seg_shift) - 1)) == 0 && g < ng) gs[g] = group_key(t1, t2, G);
  } else if (p.group_mode == kGroupsLocal) {
    uint32_t t1 = 0u, t2 = 0u;
    int g = g0, q = 0;  // q0 == 0 here: lanes start at a group boundary
#pragma unroll
    for (int i = 0; i < NPL; ++i) {
      if (e0 + i < E) {
        top2_insert(t1, t2, vk[i]);
        if (++q == G) {
          gs[g] = group_key(t1, t2, G);
          ++g;
          q = 0;
          t1 = t2 = 0u;
        }
      }
    }
  } else {  // kGroupsGeneric
    for (int g = 0; g < ng; ++g) {
      const int lo = g * G, hi = lo + G;
      uint32_t t1 = 0u, t2 = 0u;
#pragma unroll
      for (int i = 0; i < NPL; ++i)
        if (e0 + i >= lo && e0 + i < hi) top2_insert(t1, t2, vk[i]);
#pragma unroll
      for (int off = 16; off > 0; off >>= 1) {
        const uint32_t o1 = __shfl_xor_sync(kFullMask, t1, off);
        const uint32_t o2 = __shfl_xor_sync(kFullMask, t2, off);
        top2_merge(t1, t2, o1, o2);
      }
      if (lane == 0) gs[g] = group_key(t1, t2, G);
    }
  }
  __syncwarp();
  // Rank of group g = number of groups ahead of it; kept if rank < topk_groups.
  for (int g = lane; g < ng; g += 32) {
    const uint32_t mine = gs[g];
    int ahead = 0;
    for (int j = 0; j < ng; ++j) {
      const uint32_t o = gs[j];
      ahead += (o > mine || (o == mine && j < g)) ? 1 : 0;
    }
    kept[g] = ahead < p.topk_groups ? 1 : 0;
  }
  __syncwarp();
  int g = g0, q = q0;
#pragma unroll
  for (int i = 0; i < NPL; ++i) {
    if (e0 + i < E) {
      if (!kept[g]) vk[i] = 0u;
      if (++q == G) {
        q = 0;
        ++g;
      }
    }
  }
  __syncwarp();  // the next token rewrites gs / kept
}

/// Per-warp group scratch for sigmoid_grouped with group limiting (null otherwise): p.smem_words
/// 32-bit words of shared memory at `warp_smem`.
struct GroupScratch {
  uint32_t* gs = nullptr;
  uint8_t* kept = nullptr;
  int g0 = 0, q0 = 0;  // group of the lane's first expert and its position inside that group
};

template <bool kSigmoid>
__device__ __forceinline__ GroupScratch group_scratch(const Params& p, uint32_t* warp_smem, int e0) {
  GroupScratch s;
  if constexpr (kSigmoid) {
    if (p.group_mode != kGroupsAll) {
      s.gs = warp_smem;
      s.kept = reinterpret_cast<uint8_t*>(warp_smem + p.num_groups);
      s.g0 = e0 / p.group_size;
      s.q0 = e0 - s.g0 * p.group_size;
    }
  }
  return s;
}

/// Routes token t with the calling warp (all 32 lanes): writes p.ids / p.weights [t, 0:k) and
/// returns, in lane j < k, the id of slot j (lanes ≥ k: unspecified).
template <int NPL, typename T, bool kSigmoid>
__device__ __forceinline__ int route_token(const Params& p, int64_t t, const GroupScratch& scratch, int lane) {
  const int E = p.num_experts, k = p.top_k;
  const int e0 = lane * NPL;
  uint32_t* gs = scratch.gs;
  uint8_t* kept = scratch.kept;
  const int g0 = scratch.g0, q0 = scratch.q0;
  const T* row = static_cast<const T*>(p.logits) + t * E;
  float x[NPL];
  load_row<NPL, T>(row, e0, E, p.vec_bytes, x);

  uint32_t vk[NPL];
  float sv[NPL];  // sigmoid: s; otherwise unused
  float row_max = 0.0f, row_sum = 1.0f;
  if constexpr (kSigmoid) {
    // The bias is re-read per token (L1 hits: every warp reads the same E floats); holding it in
    // registers across the token loop costs NPL registers and made ptxas spill at NPL = 12.
    float bias[NPL];
#pragma unroll
    for (int i = 0; i < NPL; ++i) bias[i] = (p.bias != nullptr && e0 + i < E) ? __ldg(p.bias + e0 + i) : 0.0f;
#pragma unroll
    for (int i = 0; i < NPL; ++i) {
      // 1 / (1 + e^-x) with the fast reciprocal (≤ 2 ulp; IEEE division brings a called
      // slow path that made ptxas spill). 1 + e ≥ 2^126 (x < −87.3) gives 0.
      const float s = __fdividef(1.0f, 1.0f + expf(-x[i]));
      sv[i] = s;
      vk[i] = (e0 + i < E) ? order_key(s + bias[i]) : 0u;
    }
    if (p.group_mode != kGroupsAll) drop_groups<NPL>(vk, p, gs, kept, lane, e0, g0, q0);
  } else {
#pragma unroll
    for (int i = 0; i < NPL; ++i) {
      sv[i] = 0.0f;
      vk[i] = (e0 + i < E) ? order_key(x[i]) : 0u;
    }
    if (p.full_softmax) {
      // Max over the non-NaN logits (fmaxf ignores NaN); all-NaN rows give −Inf here and NaN
      // weights below, as the reference's NaN max does.
      float m = -INFINITY;
#pragma unroll
      for (int i = 0; i < NPL; ++i)
        if (e0 + i < E) m = fmaxf(m, x[i]);
      row_max = warp_max(m);
      float s = 0.0f;
#pragma unroll
      for (int i = 0; i < NPL; ++i)
        if (e0 + i < E) s += expf(x[i] - row_max);
      row_sum = warp_sum(s);
    }
  }

  uint32_t bk;
  int bi;
  float bs;
  local_best<NPL>(vk, sv, bk, bi, bs);
  int my_id = 0;
  float my_val = 0.0f, top_val = 0.0f;
  for (int r = 0; r < k; ++r) {
    // Warp argmax: the largest key (one redux.sync), then the lowest lane holding it. Lanes own
    // contiguous experts and a lane's best is its first maximal key, so this is the lowest expert
    // index among the maximal keys.
    const uint32_t top = __reduce_max_sync(kFullMask, bk);
    const int owner = __ffs(__ballot_sync(kFullMask, bk == top)) - 1;
    const int winner = owner * NPL + __shfl_sync(kFullMask, bi, owner);
    float val;
    if constexpr (kSigmoid) {
      val = __shfl_sync(kFullMask, bs, owner);
    } else {
      val = key_value(top);
    }
    if (r == 0) top_val = val;
    if (lane == r) {
      my_id = winner;
      my_val = val;
    }
    if (lane == owner) {
#pragma unroll
      for (int i = 0; i < NPL; ++i)
        if (i == bi) vk[i] = 0u;
      local_best<NPL>(vk, sv, bk, bi, bs);
    }
  }

  // Divisions use the fast reciprocal (≤ 2 ulp, valid for divisors in [2^-126, 2^126]): the
  // softmax sums are in [1, E] (they include exp(0) = 1) or NaN; see normalized().
  float w;
  if constexpr (kSigmoid) {
    const float sum = warp_sum(lane < k ? my_val : 0.0f);
    w = (p.renormalize ? normalized(my_val, sum) : my_val) * p.scale;
  } else if (p.full_softmax) {
    w = __fdividef(expf(my_val - row_max), row_sum);
  } else {
    const float ev = expf(my_val - top_val);
    w = __fdividef(ev, warp_sum(lane < k ? ev : 0.0f));
  }
  if (lane < k) {
    p.ids[t * k + lane] = my_id;
    p.weights[t * k + lane] = w;
  }
  return my_id;
}

}  // namespace moekit::detail::routing

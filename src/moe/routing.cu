// moekit — MoE routing kernels: router logits → top-k expert ids and weights (routing.h, SPEC §3).
//
// Semantics (shared with route_reference(), see routing_reference.cpp for the formulas):
//   * Selection order: larger score first, equal scores → lower index, NaN below every number (−Inf
//     included; NaNs among themselves by index), −0 == +0. The same order ranks groups.
//   * softmax_topk selects on the logits (softmax is strictly increasing, so this is the top-k of p
//     without the ties that rounding p to fp32 would create); topk_softmax likewise.
//   * sigmoid_grouped selects on b = s + bias computed in fp32, s = 1 / (1 + expf(−l)) with the
//     fast fp32 reciprocal (a few ulp in all): two experts whose fp32 b are equal are tied even
//     where float64 would separate them (e.g. s saturates to 1.0f for logits above ~17). Group
//     score = fp32 sum of the group's two best b.
//   * Weights in fp32 with expf and __fdividef (a few ulp; the float64 reference agrees to ~1e-6).
//   * Ids are always in [0, E) and distinct within a token: NaN logits rank last, so a NaN expert
//     is picked only when fewer than k non-NaN candidates remain. NaN/Inf reach the weights exactly
//     as the IEEE formulas say (e.g. softmax_topk without renormalize: a NaN anywhere in the row
//     makes the row's weights NaN; an +Inf logit gives Inf − Inf = NaN weights).
//   * Limits: E ≤ 1024 (≤ 32 experts per lane), k ≤ 32 (one slot per lane).
//
// Design: one warp per token (4 warps per 128-thread CTA, grid-stride over tokens). Lane l owns
// the NPL consecutive experts [l·NPL, l·NPL + NPL), NPL ∈ {1, 2, 4, 8, 12, 16, 24, 32} the
// smallest with 32·NPL ≥ E (E = 256 → 8, E = 384 → 12), in registers. Logits are loaded with
// 16-, 8- or 4-byte vector loads when the pointer, E and NPL allow it (chosen on the host), else
// element by element. Each expert's selection score becomes a 32-bit order key (NaN → 1, expert
// not selectable → 0), so every comparison is an unsigned integer compare. Top-k: k rounds of a
// warp argmax. Each lane keeps its best key (the first of equal keys, i.e. the lowest index);
// a round is __reduce_max_sync of those keys, a ballot of the lanes holding the maximum, the lowest
// such lane (lanes own increasing expert ranges, so that is the lowest expert index among equal
// keys) and one shuffle for its register slot (two for sigmoid_grouped: s too). The owning lane
// clears the winner and rescans its NPL keys. Lane j keeps slot j; the weights are computed by
// lanes < k at the end (one warp sum) and stored coalesced.
// sigmoid_grouped with topk_groups < num_groups: group scores (top-2 of b in key space) are
// computed in one of three ways picked on the host from the group size G:
//   segment: G a multiple of NPL, G / NPL = S a power of two → each lane is inside one group;
//            log2(S) xor-shuffle top-2 merges in aligned segments of S lanes (E = 256, 8 groups:
//            NPL = 8, S = 4, two steps for all groups at once);
//   local:   NPL a multiple of G → a lane holds whole groups and scores them alone;
//   generic: anything else → one warp-wide top-2 reduction per group.
// The scores go to shared memory (per warp: num_groups keys + num_groups kept flags); lane g
// ranks group g against all groups (broadcast reads), and experts of dropped groups get key 0.
// With topk_groups == num_groups (e.g. kimi-k2's single group) the group step is skipped.
#include <algorithm>
#include <cstdint>

#include <cuda_runtime.h>

#include "common/check.h"
#include "moekit/routing.h"
#include "ptx/ptx.cuh"
#include "runtime/pdl.h"

namespace moekit {
namespace detail {
// routing_reference.cpp: the configuration check shared by route() and route_reference().
void validate_routing_config(const RoutingConfig& c, const char* fn);
}  // namespace detail

namespace {

constexpr int kWarpsPerBlock = 4;
constexpr int kThreads = 32 * kWarpsPerBlock;
constexpr unsigned kFullMask = 0xFFFFFFFFu;
constexpr int64_t kMaxGrid = int64_t{1} << 20;  // CTAs; grid-stride beyond

enum GroupMode : int { kGroupsAll = 0, kGroupsSegment = 1, kGroupsLocal = 2, kGroupsGeneric = 3 };

struct Params {
  const void* logits;
  const float* bias;  // [E] or null
  int32_t* ids;
  float* weights;
  int64_t num_tokens;
  int num_experts;
  int top_k;
  int vec_bytes;      // logits load width: 16, 8, 4, or 0 = one element at a time
  bool full_softmax;  // softmax_topk without renormalize: weights over the whole row's softmax
  bool renormalize;   // sigmoid_grouped
  float scale;        // sigmoid_grouped: routed_scaling_factor
  int num_groups, group_size, topk_groups;
  int group_mode;     // GroupMode
  int seg_shift;      // kGroupsSegment: log2(lanes per group)
  int smem_words;     // 32-bit words of shared memory per warp (group scores + kept flags)
};

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
          const uint4 u = __ldg(reinterpret_cast<const uint4*>(row + e));
          unpack_word<T>(u.x, out);
          unpack_word<T>(u.y, out + 4 / sizeof(T));
          unpack_word<T>(u.z, out + 8 / sizeof(T));
          unpack_word<T>(u.w, out + 12 / sizeof(T));
        } else if constexpr (VB == 8) {
          const uint2 u = __ldg(reinterpret_cast<const uint2*>(row + e));
          unpack_word<T>(u.x, out);
          unpack_word<T>(u.y, out + 4 / sizeof(T));
        } else {
          unpack_word<T>(__ldg(reinterpret_cast<const unsigned int*>(row + e)), out);
        }
      } else {
#pragma unroll
        for (int i = 0; i < V; ++i) out[i] = 0.0f;
      }
    }
  } else {
    // Not a combination the host picks; keep it correct anyway.
#pragma unroll
    for (int i = 0; i < NPL; ++i) x[i] = (e0 + i < E) ? to_float(__ldg(row + e0 + i)) : 0.0f;
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
    for (int i = 0; i < NPL; ++i) x[i] = (e0 + i < E) ? to_float(__ldg(row + e0 + i)) : 0.0f;
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

// ---------------------------------------------------------------------------------------------
// Kernel
// ---------------------------------------------------------------------------------------------

// CTAs per SM promised to ptxas: it then budgets 65536 / (128 · n) registers per thread (64 up to
// NPL = 12, 85, 128, 170). Without it ptxas picked ~56 registers and spilled a few words at NPL = 12.
constexpr int min_ctas_per_sm(int npl) { return npl <= 12 ? 8 : npl <= 16 ? 6 : npl <= 24 ? 4 : 3; }

template <int NPL, typename T, bool kSigmoid>
__global__ void __launch_bounds__(kThreads, min_ctas_per_sm(NPL)) route_kernel(const Params p) {
  ptx::griddep_wait();  // PDL (runtime/pdl.h): the logits may come from the previous kernel
  ptx::griddep_launch_dependents();
  extern __shared__ uint32_t smem[];
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  const int E = p.num_experts, k = p.top_k;
  const int e0 = lane * NPL;

  uint32_t* gs = nullptr;
  uint8_t* kept = nullptr;
  int g0 = 0, q0 = 0;
  if constexpr (kSigmoid) {
    if (p.group_mode != kGroupsAll) {
      gs = smem + warp * p.smem_words;
      kept = reinterpret_cast<uint8_t*>(gs + p.num_groups);
      g0 = e0 / p.group_size;
      q0 = e0 - g0 * p.group_size;
    }
  }

  const int64_t stride = static_cast<int64_t>(gridDim.x) * kWarpsPerBlock;
  for (int64_t t = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + warp; t < p.num_tokens; t += stride) {
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
  }
}

// ---------------------------------------------------------------------------------------------
// Host side
// ---------------------------------------------------------------------------------------------

constexpr int kNplChoices[] = {1, 2, 4, 8, 12, 16, 24, 32};

int pick_npl(int E) {
  for (int n : kNplChoices)
    if (32 * n >= E) return n;
  return 0;  // E > 1024: rejected by validation
}

template <int NPL, typename T, bool kSigmoid>
void launch(const Params& p, int grid, size_t smem, cudaStream_t stream) {
  detail::launch_pdl(route_kernel<NPL, T, kSigmoid>, dim3(grid), dim3(kThreads), smem, stream, p);
}

template <typename T, bool kSigmoid>
void dispatch_npl(int npl, const Params& p, int grid, size_t smem, cudaStream_t stream) {
  switch (npl) {
    case 1: return launch<1, T, kSigmoid>(p, grid, smem, stream);
    case 2: return launch<2, T, kSigmoid>(p, grid, smem, stream);
    case 4: return launch<4, T, kSigmoid>(p, grid, smem, stream);
    case 8: return launch<8, T, kSigmoid>(p, grid, smem, stream);
    case 12: return launch<12, T, kSigmoid>(p, grid, smem, stream);
    case 16: return launch<16, T, kSigmoid>(p, grid, smem, stream);
    case 24: return launch<24, T, kSigmoid>(p, grid, smem, stream);
    case 32: return launch<32, T, kSigmoid>(p, grid, smem, stream);
    default:
      detail::throw_error(ErrorCode::kInternal, detail::concat("moekit::route: no kernel for NPL = ", npl));
  }
}

bool is_pow2(int v) { return v > 0 && (v & (v - 1)) == 0; }

}  // namespace

void route(const RoutingConfig& config, const void* logits, LogitsType logits_type, int64_t num_tokens,
           int32_t* topk_ids, float* topk_weights, cudaStream_t stream) {
  const char* fn = "moekit::route";
  const auto kInv = ErrorCode::kInvalidArgument;
  detail::validate_routing_config(config, fn);
  MOEKIT_REQUIRE(logits_type == LogitsType::kFloat32 || logits_type == LogitsType::kBFloat16, kInv, fn,
                 ": unknown logits type ", static_cast<int>(logits_type));
  MOEKIT_REQUIRE(num_tokens >= 0, kInv, fn, ": num_tokens = ", num_tokens, " must be >= 0");
  if (num_tokens == 0) return;
  MOEKIT_REQUIRE(logits != nullptr, kInv, fn, ": logits is null with num_tokens = ", num_tokens);
  MOEKIT_REQUIRE(topk_ids != nullptr, kInv, fn, ": topk_ids is null with num_tokens = ", num_tokens);
  MOEKIT_REQUIRE(topk_weights != nullptr, kInv, fn, ": topk_weights is null with num_tokens = ", num_tokens);
  const size_t elem = logits_type == LogitsType::kFloat32 ? 4 : 2;
  const auto addr = [](const void* q) { return reinterpret_cast<uintptr_t>(q); };
  MOEKIT_REQUIRE(addr(logits) % elem == 0, ErrorCode::kMisaligned, fn, ": logits (", logits,
                 ") must be aligned to its element size ", elem);
  MOEKIT_REQUIRE(addr(topk_ids) % 4 == 0 && addr(topk_weights) % 4 == 0, ErrorCode::kMisaligned, fn,
                 ": topk_ids and topk_weights must be 4-byte aligned");
  MOEKIT_REQUIRE(addr(config.correction_bias) % 4 == 0, ErrorCode::kMisaligned, fn,
                 ": correction_bias must be 4-byte aligned");

  const int E = config.num_experts;
  const int npl = pick_npl(E);
  const bool sigmoid = config.method == RoutingMethod::kSigmoidGrouped;

  Params p{};
  p.logits = logits;
  p.bias = config.correction_bias;
  p.ids = topk_ids;
  p.weights = topk_weights;
  p.num_tokens = num_tokens;
  p.num_experts = E;
  p.top_k = config.top_k;
  p.vec_bytes = 0;
  for (int vb : {16, 8, 4}) {
    const int v = vb / static_cast<int>(elem);
    if (v >= 2 && npl % v == 0 && E % v == 0 && addr(logits) % vb == 0) {
      p.vec_bytes = vb;
      break;
    }
  }
  p.full_softmax = config.method == RoutingMethod::kSoftmaxTopk && !config.renormalize;
  p.renormalize = config.renormalize;
  p.scale = sigmoid ? config.routed_scaling_factor : 1.0f;
  p.num_groups = sigmoid ? config.num_groups : 1;
  p.group_size = E / p.num_groups;
  p.topk_groups = sigmoid ? config.topk_groups : 1;
  p.group_mode = kGroupsAll;
  p.seg_shift = 0;
  p.smem_words = 0;
  if (sigmoid && p.topk_groups < p.num_groups) {
    const int G = p.group_size;
    if (G % npl == 0 && is_pow2(G / npl) && G / npl <= 32) {
      p.group_mode = kGroupsSegment;
      while ((1 << p.seg_shift) < G / npl) ++p.seg_shift;
    } else if (npl % G == 0) {
      p.group_mode = kGroupsLocal;
    } else {
      p.group_mode = kGroupsGeneric;
    }
    p.smem_words = p.num_groups + (p.num_groups + 3) / 4;  // keys + kept bytes
  }
  const size_t smem = static_cast<size_t>(p.smem_words) * 4 * kWarpsPerBlock;  // ≤ 20 KiB
  const int grid = static_cast<int>(std::min<int64_t>((num_tokens + kWarpsPerBlock - 1) / kWarpsPerBlock, kMaxGrid));

  if (logits_type == LogitsType::kFloat32) {
    if (sigmoid) dispatch_npl<float, true>(npl, p, grid, smem, stream);
    else dispatch_npl<float, false>(npl, p, grid, smem, stream);
  } else {
    if (sigmoid) dispatch_npl<uint16_t, true>(npl, p, grid, smem, stream);
    else dispatch_npl<uint16_t, false>(npl, p, grid, smem, stream);
  }
  MOEKIT_CUDA_CHECK(cudaGetLastError());
}

}  // namespace moekit

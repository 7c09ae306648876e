// MXFP4 → E4M3 expansion (docs/design.md §MXFP4 weights), shared by the host (tests, the FP8
// form of include/moekit/mxfp4.h) and the planned weight loader of the sm90 GEMMs. Plain C++ with
// no CUDA dependency, like fp8_gemm_layout.cuh; on the device the byte permutation is one prmt.
//
// A 32-block of codes with scale byte s, inside a 128 x 128 block whose largest scale byte is m,
// expands with shift = s − m + 6 (≤ 6): each element becomes e4m3(e2m1 · 2^shift). Its eight
// possible magnitudes form one 8-byte table, so four elements take one byte permutation plus
// their sign bits, which the prepared weights keep where the bytes need them (mxfp4_loader_word).
#pragma once

// Host and device under nvcc (the preparation kernels), plain functions elsewhere (NVRTC compiles
// them as device code by default).
#if defined(__CUDACC__)
#define MOEKIT_MXFP4_HD __host__ __device__
#else
#define MOEKIT_MXFP4_HD
#endif

namespace moekit::sm90 {

/// Shifts at or below this expand every code to ±0 (6 · 2^−13 rounds to 0 in E4M3).
inline constexpr int kMxfp4ZeroShift = -13;

/// The expansion shift of a 32-block with scale byte s inside a 128 x 128 block whose largest
/// finite scale byte is m, clamped to [kMxfp4ZeroShift, 6]: lower shifts all expand to zeros, and
/// a NaN scale byte (255, above m) leaves its block's scale NaN anyway.
constexpr int mxfp4_shift(unsigned s, unsigned m) {
  const int d = int(s) - int(m) + 6;
  return d < kMxfp4ZeroShift ? kMxfp4ZeroShift : d > 6 ? 6 : d;
}

/// The prepared weights' byte for a 32-block with expansion shift `shift` (mxfp4_shift): the byte
/// offset of its table among the loaders' tables in shared memory, one 8-byte table per shift from
/// kMxfp4ZeroShift up.
constexpr unsigned mxfp4_table_offset(int shift) { return 8u * unsigned(shift - kMxfp4ZeroShift); }

/// E4M3 bits of E2M1 magnitude `code & 7` times 2^shift (shift ≤ 6, so at most 6 · 2^6 = 384):
/// exact while the product is a multiple of E4M3's smallest subnormal 2^−9, else rounded to
/// nearest even among the subnormals, as the GPU's cvt.rn.satfinite.e4m3x2.f32 rounds.
constexpr unsigned mxfp4_e4m3_magnitude(unsigned code, int shift) {
  // Twice the E2M1 magnitudes {0, 0.5, 1, 1.5, 2, 3, 4, 6}, one nibble each.
  const unsigned twice = (0xC8643210u >> (4u * (code & 7u))) & 0xFu;
  if (twice == 0 || shift <= kMxfp4ZeroShift) return 0;
  const int up = shift + 8;  // value = twice · 2^(shift − 1) = twice · 2^up units of 2^−9
  if (up >= 0) {
    const unsigned units = twice << up;
    if (units < 8) return units;  // a subnormal, exact
    const int p = twice >= 8 ? 3 : twice >= 4 ? 2 : twice >= 2 ? 1 : 0;  // twice = 2^p · (1 + half / 2)
    const unsigned half = p >= 1 ? (twice >> (p - 1)) & 1u : 0u;
    return (unsigned(p + shift - 1 + 7) << 3) | (half << 2);
  }
  const int d = -up;  // 1 … 4: round twice / 2^d to nearest even
  const unsigned q = twice >> d, rem = twice & ((1u << d) - 1u), mid = 1u << (d - 1);
  return q + ((rem > mid || (rem == mid && (q & 1u) != 0)) ? 1u : 0u);
}

/// The E4M3 bytes of the eight magnitudes under one shift: codes 0–3 in `lo`, 4–7 in `hi`.
struct Mxfp4Table {
  unsigned lo, hi;
};

constexpr Mxfp4Table mxfp4_table(int shift) {
  Mxfp4Table t{0u, 0u};
  for (unsigned c = 0; c < 4; ++c) {
    t.lo |= mxfp4_e4m3_magnitude(c, shift) << (8u * c);
    t.hi |= mxfp4_e4m3_magnitude(c + 4u, shift) << (8u * c);
  }
  return t;
}

/// Byte i of the result is byte (sel >> 4i) & 7 of {hi, lo}, i < 4 (prmt's default mode, which
/// reads the low 16 bits of sel; bit 3 of each of those nibbles must be clear).
MOEKIT_MXFP4_HD inline unsigned mxfp4_byte_perm(unsigned lo, unsigned hi, unsigned sel) {
#if defined(__CUDA_ARCH__)
  return __byte_perm(lo, hi, sel);
#else
  unsigned r = 0;
  for (unsigned i = 0; i < 4; ++i) {
    const unsigned idx = (sel >> (4u * i)) & 7u;
    const unsigned byte = idx < 4 ? (lo >> (8u * idx)) & 0xFFu : (hi >> (8u * (idx - 4u))) & 0xFFu;
    r |= byte << (8u * i);
  }
  return r;
#endif
}

/// The loader word of eight E2M1 codes: `natural` holds them as stored (element i in nibble i:
/// the low nibble of each byte is the even element); the prepared weights hold this permutation
/// instead (moe_weights_mxfp4.cu), which keeps each element's magnitude in its nibble's low three
/// bits and moves the sign bits so that the expansion needs no bit spreading: bit 3 of nibble
/// 2j + 1 is element j's sign, bit 3 of nibble 2j element 4 + j's (j < 4).
constexpr unsigned mxfp4_loader_word(unsigned natural) {
  unsigned w = natural & 0x77777777u;
  for (unsigned j = 0; j < 4; ++j) {
    w |= ((natural >> (4u * j + 3u)) & 1u) << (8u * j + 7u);
    w |= ((natural >> (4u * (4u + j) + 3u)) & 1u) << (8u * j + 3u);
  }
  return w;
}

/// The natural word (eight codes, element i in nibble i) that word q (< 4) of a 32-block's prepared
/// row holds: elements 4q … 4q + 3 and 16 + 4q … 16 + 4q + 3 of the block, whose 16 code bytes are
/// `v` (v[i] = bytes 4i … 4i + 3, as stored). Expanded (mxfp4_expand8), its low word is then the
/// block's columns 4q … 4q + 3 and its high word columns 16 + 4q …: exactly the registers a
/// tensor-core A fragment of thread q of a quad holds for one row (wgmma m64nNk32, 8-bit A:
/// reg 0 / 2 = row r, columns 4q / 16 + 4q of the k32 step), and the four words of a block, low
/// halves then high halves, are its two 16-byte column units in order (the expansion into a B
/// stage, mxfp4_loader.cuh).
MOEKIT_MXFP4_HD inline unsigned mxfp4_fragment_word(const unsigned (&v)[4], unsigned q) {
  const unsigned sh = 16u * (q & 1u);
  return ((v[q >> 1] >> sh) & 0xFFFFu) | (((v[2u + (q >> 1)] >> sh) & 0xFFFFu) << 16);
}

/// The 16-byte unit of a prepared row (32 rows per sub-chunk, row rr) that holds 32-block s: the
/// blocks are XOR-swizzled by row pair, so the eight rows a warp's fragment loads touch (rows
/// rr … rr + 7, one word each) fall in 32 different banks, and a 16-byte unit stays whole.
MOEKIT_MXFP4_HD inline unsigned mxfp4_row_unit(unsigned rr, unsigned s) { return s ^ ((rr >> 1) & 3u); }

/// Eight codes as a loader word (mxfp4_loader_word) → their E4M3 bytes under table t, elements
/// 0–3 in out_lo and 4–7 in out_hi (little-endian: element order in memory): two byte
/// permutations and two sign merges. −0 stays −0 (0x80).
MOEKIT_MXFP4_HD inline void mxfp4_expand8(unsigned word, Mxfp4Table t, unsigned& out_lo, unsigned& out_hi) {
  const unsigned mag = word & 0x77777777u;  // selector nibbles with bit 3 clear (prmt's plain mode)
  out_lo = mxfp4_byte_perm(t.lo, t.hi, mag) | (word & 0x80808080u);
  out_hi = mxfp4_byte_perm(t.lo, t.hi, mag >> 16) | ((word << 4) & 0x80808080u);
}

}  // namespace moekit::sm90

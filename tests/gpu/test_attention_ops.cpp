// DeepSeek-V4 attention's cache writer and RoPE (include/moekit/attention.h) against the host
// references (src/attention/attention_reference.h): the written entries bit for bit, untouched
// slots left alone; RoPE within one bf16 rounding of the float64 rotation, the other dims and
// rows without a position unchanged, forward then inverse back to the input within 2^-7 of each
// pair's norm (two bf16 roundings through a rotation; 1 ulp per element cannot hold).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

#include "attention/attention_reference.h"
#include "gpu_test_util.h"
#include "moekit/attention.h"
#include "moekit/numerics.h"
#include "runtime/device_buffer.h"

namespace {

using moekit::MixedKvCache;
using moekit::detail::DeviceBuffer;

// Distance in units in the last place of two bf16 values of the same sign (0 when equal).
int ulp_distance(uint16_t a, uint16_t b) {
  const auto ordered = [](uint16_t v) { return (v & 0x8000) ? -int(v & 0x7FFF) : int(v); };
  return std::abs(ordered(a) - ordered(b));
}

TEST(MixedKvCacheWrite, MatchesTheHostQuantizerAndSkipsBadSlots) {
  constexpr int64_t kEntries = 50, kT = 19, kLd = 520;  // ldk > 512: a padded row stride
  std::mt19937 rng(3);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<uint16_t> k(size_t(kT * kLd), moekit::bf16_from_float(7.0f));
  for (int64_t t = 0; t < kT; ++t)
    for (int g = 0; g < 8; ++g) {
      const float scale = std::ldexp(1.0f, int(rng() % 24) - 12);  // groups across 2^-12 … 2^11
      for (int d = 0; d < 64; ++d) k[size_t(t * kLd + g * 64 + d)] = moekit::bf16_from_float(normal(rng) * scale);
    }
  for (int d = 0; d < 64; ++d) k[size_t(2 * kLd + 64 + d)] = 0;       // an all-zero group
  k[size_t(3 * kLd + 5)] = moekit::bf16_from_float(NAN);             // a NaN group
  k[size_t(4 * kLd + 130)] = moekit::bf16_from_float(448.0f * 8.0f);  // amax exactly 448 · 2^3
  std::vector<int32_t> slots(kT);
  for (int64_t t = 0; t < kT; ++t) slots[size_t(t)] = int32_t((t * 7 + 3) % kEntries);
  slots[5] = -1;
  slots[6] = int32_t(kEntries);  // out of range: skipped

  DeviceBuffer dk = DeviceBuffer::from(k), ds = DeviceBuffer::from(slots);
  DeviceBuffer nope(size_t(kEntries * 448)), scales(size_t(kEntries * 7 * 4)), rope(size_t(kEntries * 64 * 2));
  ASSERT_EQ(cudaMemset(nope.get(), 0xA5, nope.bytes()), cudaSuccess);
  ASSERT_EQ(cudaMemset(scales.get(), 0xA5, scales.bytes()), cudaSuccess);
  ASSERT_EQ(cudaMemset(rope.get(), 0xA5, rope.bytes()), cudaSuccess);
  const MixedKvCache cache{nope.as<uint8_t>(), scales.as<float>(), rope.get(), kEntries};
  moekit::test::Stream s;
  moekit::mixed_kv_cache_write(dk.get(), kT, kLd, ds.as<int32_t>(), cache, s);
  moekit::test::finish(s, "mixed_kv_cache_write");
  const auto got_nope = nope.download<uint8_t>(nope.bytes());
  const auto got_scales = scales.download<uint32_t>(size_t(kEntries * 7));
  const auto got_rope = rope.download<uint16_t>(size_t(kEntries * 64));

  std::vector<bool> written(kEntries, false);
  for (int64_t t = 0; t < kT; ++t) {
    const int32_t e = slots[size_t(t)];
    if (e < 0 || e >= kEntries) continue;
    written[size_t(e)] = true;
    std::vector<float> row(512);
    for (int d = 0; d < 512; ++d) row[size_t(d)] = moekit::bf16_to_float(k[size_t(t * kLd + d)]);
    std::vector<uint8_t> want_nope(448);
    std::vector<float> want_scales(7);
    std::vector<uint16_t> want_rope(64);
    moekit::detail::quantize_mixed_kv(row.data(), 1, want_nope.data(), want_scales.data(), want_rope.data());
    for (int d = 0; d < 448; ++d) ASSERT_EQ(got_nope[size_t(e * 448 + d)], want_nope[size_t(d)]) << t << " " << d;
    for (int g = 0; g < 7; ++g) {
      const uint32_t bits = got_scales[size_t(e * 7 + g)];
      float got;
      std::memcpy(&got, &bits, 4);
      if (std::isnan(want_scales[size_t(g)])) EXPECT_TRUE(std::isnan(got)) << t << " " << g;
      else EXPECT_EQ(got, want_scales[size_t(g)]) << t << " " << g;
    }
    for (int d = 0; d < 64; ++d) ASSERT_EQ(got_rope[size_t(e * 64 + d)], want_rope[size_t(d)]) << t << " " << d;
  }
  for (int64_t e = 0; e < kEntries; ++e) {
    if (written[size_t(e)]) continue;
    for (int d = 0; d < 448; ++d) ASSERT_EQ(got_nope[size_t(e * 448 + d)], 0xA5) << "slot " << e << " touched";
    for (int g = 0; g < 7; ++g) ASSERT_EQ(got_scales[size_t(e * 7 + g)], 0xA5A5A5A5u) << "slot " << e << " touched";
    for (int d = 0; d < 64; ++d) ASSERT_EQ(got_rope[size_t(e * 64 + d)], 0xA5A5) << "slot " << e << " touched";
  }
}

TEST(RopeInplace, MatchesTheReferenceAndRoundTrips) {
  constexpr int64_t kT = 11, kMaxPos = 4096;
  constexpr int kHeads = 4;
  for (int64_t dim : {64, 128, 512}) {
    SCOPED_TRACE(dim);
    std::mt19937 rng(static_cast<unsigned>(dim));
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::vector<uint16_t> x(size_t(kT * kHeads * dim));
    for (auto& v : x) v = moekit::bf16_from_float(normal(rng));
    std::vector<int32_t> pos(kT);
    for (auto& p : pos) p = int32_t(rng() % kMaxPos);
    pos[2] = -1;
    pos[3] = int32_t(kMaxPos);  // past the table: left alone
    std::vector<float> cos(size_t(kMaxPos * 32)), sin(cos.size());
    for (int64_t p = 0; p < kMaxPos; ++p)
      for (int i = 0; i < 32; ++i) {
        const double theta = double(p) * std::pow(10000.0, -2.0 * i / 64.0);
        cos[size_t(p * 32 + i)] = float(std::cos(theta));
        sin[size_t(p * 32 + i)] = float(std::sin(theta));
      }
    DeviceBuffer dx = DeviceBuffer::from(x), dp = DeviceBuffer::from(pos), dc = DeviceBuffer::from(cos),
                 dsn = DeviceBuffer::from(sin);
    moekit::test::Stream s;
    moekit::rope_inplace(dx.get(), kT, kHeads, dim, dp.as<int32_t>(), dc.as<float>(), dsn.as<float>(), kMaxPos,
                         false, s);
    moekit::test::finish(s, "rope_inplace");
    const auto fwd = dx.download<uint16_t>(x.size());

    // The float64 rotation of the same bf16 inputs, per (token, head) row.
    std::vector<int32_t> row_pos(size_t(kT * kHeads));
    std::vector<double> ref(x.size());
    for (size_t i = 0; i < x.size(); ++i) ref[i] = moekit::bf16_to_float(x[i]);
    for (int64_t r = 0; r < kT * kHeads; ++r) {
      const int32_t p = pos[size_t(r / kHeads)];
      row_pos[size_t(r)] = p < kMaxPos ? p : -1;
    }
    moekit::detail::rope_reference(ref.data(), kT * kHeads, dim, 64, row_pos.data(), cos.data(), sin.data(), kMaxPos,
                                   false);
    int worst = 0;
    for (size_t i = 0; i < x.size(); ++i) {
      const int64_t d = int64_t(i) % dim;
      const bool rotated = d >= dim - 64 && row_pos[i / size_t(dim)] >= 0;
      if (!rotated) {
        ASSERT_EQ(fwd[i], x[i]) << "element " << i << " is not a rope dim of a positioned row";
        continue;
      }
      worst = std::max(worst, ulp_distance(fwd[i], moekit::bf16_from_float(float(ref[i]))));
    }
    EXPECT_LE(worst, 1) << "vs the float64 rotation rounded once";

    moekit::rope_inplace(dx.get(), kT, kHeads, dim, dp.as<int32_t>(), dc.as<float>(), dsn.as<float>(), kMaxPos, true,
                         s);
    moekit::test::finish(s, "rope_inplace inverse");
    // Forward then inverse: the forward's bf16 rounding (half an ulp of each rotated component)
    // is rotated back into both components, so the bound is per pair, relative to its norm: each
    // of the two roundings moves a component by at most 2^-9 of the pair's norm (x 1.01 for the
    // FP32 math), |x' - x| <= 2^-7 |(a, b)| after the rotation back; 1 ulp per element cannot hold
    // for the smaller component of a pair.
    const auto back = dx.download<uint16_t>(x.size());
    double worst_rel = 0.0;
    for (size_t i = 0; i + 1 < x.size(); i += 2) {
      const double a = moekit::bf16_to_float(x[i]), b = moekit::bf16_to_float(x[i + 1]);
      const double norm = std::sqrt(a * a + b * b);
      if (norm == 0.0) continue;
      for (size_t j = i; j < i + 2; ++j)
        worst_rel = std::max(worst_rel, std::fabs(double(moekit::bf16_to_float(back[j])) -
                                                  double(moekit::bf16_to_float(x[j]))) / norm);
    }
    EXPECT_LE(worst_rel, std::ldexp(1.0, -7) * 1.01) << "forward then inverse, relative to each pair's norm";
  }
}

// attention_merge at dims whose float4 count is not 32, 64 or 128 per row (row groups of 32, 64 or
// 128 threads; rows that do not fill the last block), with up to 9 sources (two loads of four plus
// one), empty sources (lse = −inf, their o poisoned with NaN: never read), per-source weight logits
// and a sink, against the float64 merge; a row whose sources are all empty gets o = 0, lse = −inf.
TEST(AttentionMerge, AnyDimManySourcesEmptySources) {
  constexpr int64_t kT = 5;
  constexpr int kHeads = 3;
  const int64_t rows = kT * kHeads;
  for (int dim : {68, 260, 300, 516}) {
    for (int sources : {1, 5, 9}) {
      SCOPED_TRACE(::testing::Message() << "dim " << dim << ", sources " << sources);
      std::mt19937 rng(unsigned(dim * 31 + sources));
      std::normal_distribution<float> normal(0.0f, 1.0f);
      std::vector<float> o(size_t(sources * rows * dim)), lse(size_t(sources * rows)), w(size_t(sources * kHeads));
      std::vector<float> sink(kHeads);
      for (auto& v : o) v = normal(rng);
      for (auto& v : w) v = 0.5f * normal(rng);
      for (auto& v : sink) v = normal(rng);
      for (int i = 0; i < sources; ++i)
        for (int64_t r = 0; r < rows; ++r) {
          // Source 1 is empty for every third row; the last row has no source at all.
          const bool empty = r == rows - 1 || (i == 1 && r % 3 == 0);
          lse[size_t(i * rows + r)] = empty ? -INFINITY : 2.0f * normal(rng);
          if (empty) std::fill_n(o.begin() + (i * rows + r) * dim, dim, NAN);
        }
      DeviceBuffer d_o = DeviceBuffer::from(o), d_l = DeviceBuffer::from(lse), d_w = DeviceBuffer::from(w),
                   d_s = DeviceBuffer::from(sink), out(size_t(rows * dim) * 2), out_l(size_t(rows) * 4);
      moekit::test::Stream s;
      moekit::attention_merge(d_o.as<float>(), d_l.as<float>(), sources, kT, kHeads, dim, d_w.as<float>(),
                              d_s.as<float>(), out.get(), out_l.as<float>(), s);
      moekit::test::finish(s, "attention_merge");
      const auto got = out.download<uint16_t>(size_t(rows * dim));
      const auto got_l = out_l.download<float>(size_t(rows));
      const std::vector<double> sink_d(sink.begin(), sink.end());
      for (int64_t t = 0; t < kT; ++t) {
        std::vector<moekit::detail::AttentionRefOut> parts(static_cast<size_t>(sources));
        std::vector<std::vector<double>> wd(static_cast<size_t>(sources));
        std::vector<const double*> wp;
        for (int i = 0; i < sources; ++i) {
          auto& part = parts[size_t(i)];
          for (int h = 0; h < kHeads; ++h) {
            const int64_t r = t * kHeads + h;
            const float l = lse[size_t(i * rows + r)];
            part.lse.push_back(l);
            for (int d = 0; d < dim; ++d)  // (the reference reads every o: zeros where the kernel gets NaN)
              part.o.push_back(std::isinf(l) ? 0.0 : double(o[size_t((i * rows + r) * dim + d)]));
            wd[size_t(i)].push_back(w[size_t(i * kHeads + h)]);
          }
          wp.push_back(wd[size_t(i)].data());
        }
        const auto ref = moekit::detail::merge_partials_reference(parts, wp, kHeads, dim, sink_d.data());
        for (int h = 0; h < kHeads; ++h) {
          const int64_t r = t * kHeads + h;
          const double ref_lse = ref.lse[size_t(h)];
          if (std::isinf(ref_lse)) {
            EXPECT_TRUE(std::isinf(got_l[size_t(r)]) && got_l[size_t(r)] < 0) << "row " << r;
          } else {
            EXPECT_NEAR(got_l[size_t(r)], ref_lse, 1e-4 * std::max(1.0, std::abs(ref_lse))) << "row " << r;
          }
          for (int d = 0; d < dim; ++d) {
            const double want = ref.o[size_t(h * dim + d)];
            const float have = moekit::bf16_to_float(got[size_t(r * dim + d)]);
            ASSERT_TRUE(std::isfinite(have)) << "row " << r << " dim " << d;
            EXPECT_NEAR(have, want, 8e-3 * std::abs(want) + 1e-5) << "row " << r << " dim " << d;
          }
        }
      }
    }
  }
}

}  // namespace

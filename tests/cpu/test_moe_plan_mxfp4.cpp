// The MoE plan on MXFP4 weights (planning/moe_plan.cpp plan_mxfp4_gemms): the expansion GEMMs'
// tiles, stages and raw slots, and where the decode GEMMs take over.
#include <gtest/gtest.h>

#include <string>
#include <tuple>

#include "kernels/sm90/fp8_gemm_layout.cuh"
#include "moe/moe_sort_internal.h"
#include "moekit/moe_layer.h"
#include "planning/moe_plan.h"
#include "runtime/knobs.h"

namespace {

using moekit::MoeConfig;
using moekit::RoutingMethod;
using moekit::detail::GemmDeviceLimits;
using moekit::detail::Knobs;
using moekit::detail::MoePlan;
using moekit::detail::plan_moe_forward;

struct Preset {
  const char* name;
  int e, k;
  int64_t h, inter;
  RoutingMethod method;
  int groups, topk_groups;
};
constexpr Preset kPresets[] = {
    {"deepseek-v3", 256, 8, 7168, 2048, RoutingMethod::kSigmoidGrouped, 8, 4},
    {"gpt-oss-120b", 128, 4, 2880, 2880, RoutingMethod::kTopkSoftmax, 1, 1},
    {"mixtral-8x7b", 8, 2, 4096, 14336, RoutingMethod::kSoftmaxTopk, 1, 1},
};

MoeConfig layer_config(const Preset& p, bool mxfp4) {
  MoeConfig m;
  m.num_experts = p.e;
  m.top_k = p.k;
  m.hidden = p.h;
  m.inter = p.inter;
  moekit::RoutingConfig r;
  r.method = p.method;
  r.renormalize = p.method != RoutingMethod::kTopkSoftmax;
  r.num_groups = p.groups;
  r.topk_groups = p.topk_groups;
  m.routing = r;
  if (mxfp4) m.weight_format = moekit::MoeWeightFormat::kMxfp4;
  return moekit::MoeLayer(m).config();  // validated and resolved, as the layer plans it
}

Knobs no_decode() {
  Knobs k;
  k.mxfp4_decode = false;
  return k;
}

}  // namespace

// MXFP4 weights on the expansion GEMMs (MOEKIT_MXFP4_DECODE=0 at decode sizes, every plan past
// them): GEMM1 on the permuted copy (the gather's warps expand the weights), B-sharing pairs where
// the FP8 plan pairs GEMM1's CTAs and experts get 512+ rows (each expands half of B; no tail
// split), single CTAs elsewhere, widths in whole 32-row sub-chunks, two expanded stages at decode and three beyond,
// and raw slots filling the rest of shared memory; FP8 plans are unchanged.
TEST(MoePlan, Mxfp4WeightsPlanPairsOrSingleCtasWithRawSlots) {
  for (const Preset& pr : kPresets) {
    const MoeConfig m = layer_config(pr, true);
    for (int64_t t : {1, 64, 1024, 4096, 16384}) {
      SCOPED_TRACE(::testing::Message() << pr.name << " T=" << t);
      const MoePlan p = plan_moe_forward(m, t, false, GemmDeviceLimits{}, 0, no_decode());
      const MoePlan f8 = plan_moe_forward(layer_config(pr, false), t, false, GemmDeviceLimits{}, 0, Knobs{});
      EXPECT_FALSE(p.gather);
      EXPECT_FALSE(p.quantize_in_sort);
      EXPECT_FALSE(p.gemm1.mx_decode);
      EXPECT_FALSE(p.gemm2.mx_decode);
      EXPECT_EQ(f8.gemm1.mx_stages, 0);
      EXPECT_EQ(f8.gemm2.mx_stages, 0);
      const int stages = p.load.rows_per_active <= 64 ? 2 : 3;
      EXPECT_EQ(p.gemm1.config.block_m, 64);
      EXPECT_EQ(p.gemm1.config.block_n, 256);
      EXPECT_EQ(p.gemm2.config.block_m, f8.gemm2.config.block_m);
      EXPECT_EQ(p.gemm1.config.multicast, f8.gemm1.config.multicast == 2 && p.load.rows_per_active >= 512 ? 2 : 1);
      EXPECT_FALSE(p.gemm1.pair_tail_split);
      if (p.gemm1.config.multicast == 2) EXPECT_EQ(p.gemm1.config.num_sms % 2, 0);
      EXPECT_EQ(p.gemm2.config.multicast, 1);
      for (const auto& [c, mx, epi] :
           {std::tuple{p.gemm1.config, p.gemm1.mx_stages, moekit::sm90::kSwigluEpilogueSmem},
            std::tuple{p.gemm2.config, p.gemm2.mx_stages,
                       p.gemm2.rows_then_combine
                           ? moekit::sm90::gemm_bf16_staging_bytes(p.gemm2.config.block_m, p.gemm2.config.block_n,
                                                                   p.gemm2.config.direct_store)
                           : 0u}}) {
        EXPECT_TRUE(c.multicast == 1 || (c.block_n == 256 && moekit::detail::mxfp4_pairs_fit(c))) << c.str();
        EXPECT_EQ(c.block_n % 32, 0);
        EXPECT_LE(c.stages, stages);
        if (c.stages < stages)  // fewer only where the preferred count leaves no room for two raw slots
          EXPECT_GT(moekit::sm90::gemm_smem_bytes_with(epi, c.block_m, c.block_n, stages, 1, 2, c.multicast),
                    GemmDeviceLimits{}.smem_bytes);
        EXPECT_GE(mx, 2);
        EXPECT_LE(mx, 16);
        const unsigned smem = moekit::sm90::gemm_smem_bytes_with(epi, c.block_m, c.block_n, c.stages, 1, mx, c.multicast);
        EXPECT_LE(smem, GemmDeviceLimits{}.smem_bytes);
        if (mx < 16)
          EXPECT_GT(moekit::sm90::gemm_smem_bytes_with(epi, c.block_m, c.block_n, c.stages, 1, mx + 1, c.multicast),
                    GemmDeviceLimits{}.smem_bytes)
              << "as many raw slots as fit";
      }
    }
  }
  moekit::GemmConfig c{64, 144, 5, 8, 132, 2};  // halves of 80 rows: not whole sub-chunks
  EXPECT_GE(moekit::detail::fit_mxfp4_stages(c, 0, 3, GemmDeviceLimits{}), 2);
  EXPECT_EQ(c.str(), "m64n160s3g8x132c1");
  for (moekit::GemmConfig w : {moekit::GemmConfig{256, 128, 3, 8, 132, 2}, moekit::GemmConfig{128, 128, 3, 8, 132, 2}}) {
    EXPECT_GE(moekit::detail::fit_mxfp4_stages(w, ~0u, 3, GemmDeviceLimits{}), 2);  // (256-row pairs share A)
    EXPECT_EQ(w.multicast, 1) << w.str();
  }
  // GEMM1's pairs: a raw slot holds half of B (128 rows), so more fit than for a single CTA.
  moekit::GemmConfig pair{64, 256, 5, 8, 132, 2}, single{64, 256, 5, 8, 132, 1};
  const int raw_pair = moekit::detail::fit_mxfp4_stages(pair, moekit::sm90::kSwigluEpilogueSmem, 3, GemmDeviceLimits{});
  const int raw_single =
      moekit::detail::fit_mxfp4_stages(single, moekit::sm90::kSwigluEpilogueSmem, 3, GemmDeviceLimits{});
  EXPECT_EQ(pair.str(), "m64n256s3g8x132c2");
  EXPECT_EQ(single.str(), "m64n256s3g8x132c1");
  EXPECT_GT(raw_pair, raw_single);
  EXPECT_EQ(moekit::sm90::gemm_mx_raw_rows(256, 2), 128);
  const std::string text = moekit::detail::describe_moe_plan(
      plan_moe_forward(layer_config(kPresets[0], true), 1024, false, GemmDeviceLimits{}, 0, Knobs{}));
  EXPECT_NE(text.find("mxfp4 raw slots"), std::string::npos) << text;
  EXPECT_NE(text.find("MXFP4"), std::string::npos) << text;
}

// Decode sizes (at most 16 expected rows per active expert) run the decode GEMMs: tokens per tile
// with room for the busiest experts (8, 16 or 32), GEMM1 on 256 prepared rows, the scatter-add GEMM2 on
// 256 or 128, one ring of as many slots (raw weights + A stage) as fit; the deterministic layer's
// rows GEMM2 keeps the expansion GEMM. Larger loads keep the expansion GEMMs.
TEST(MoePlan, Mxfp4DecodeSizesRunTheDecodeGemms) {
  const GemmDeviceLimits lim{};
  int gathered_plans = 0;
  for (const Preset& pr : kPresets) {
    for (bool det : {false, true}) {
      MoeConfig m = layer_config(pr, true);
      m.deterministic = det;
      for (int64_t t : {1, 7, 64, 256, 1024, 4096}) {
        SCOPED_TRACE(::testing::Message() << pr.name << " T=" << t << (det ? " deterministic" : ""));
        const MoePlan p = plan_moe_forward(m, t, false, lim, 0, Knobs{});
        const bool decode = p.load.rows_per_active <= 16;
        EXPECT_EQ(p.gemm1.mx_decode, decode);
        EXPECT_EQ(p.gemm2.mx_decode, decode && !p.gemm2.rows_then_combine);
        if (!decode) continue;
        const int tok = p.gemm1.config.block_m;
        EXPECT_TRUE(moekit::sm90::gemm_mx_decode_supported(tok, p.gemm1.config.block_n));
        EXPECT_GE(tok, std::min<int64_t>(32, 2 * p.load.rows_per_active)) << "room for the busiest experts";
        EXPECT_EQ(p.gemm1.config.block_n, 256);
        EXPECT_EQ(p.gemm1.config.stages, p.gemm1.mx_stages) << "one ring: a raw slot and an A stage per K block";
        EXPECT_EQ(p.gemm1.config.multicast, 1);
        const unsigned epi1 = moekit::sm90::gemm_mx_decode_swiglu_smem(tok);
        auto smem = [&](const moekit::GemmConfig& c, unsigned epi, int sb_rows, int slots, int k_groups) {
          return moekit::sm90::gemm_mx_decode_smem_bytes(epi, c.block_m, c.block_n, sb_rows, slots, slots, k_groups);
        };
        EXPECT_GE(p.gemm1.mx_stages, 2);
        EXPECT_LE(smem(p.gemm1.config, epi1, 64, p.gemm1.mx_stages, p.gemm1.k_groups), lim.smem_bytes);
        if (p.gemm1.mx_stages < 16)
          EXPECT_GT(smem(p.gemm1.config, epi1, 64, p.gemm1.mx_stages + p.gemm1.k_groups, p.gemm1.k_groups),
                    lim.smem_bytes)
              << "as many slots as fit (an even number with two K groups)";
        if (p.gemm2.mx_decode) {
          EXPECT_EQ(p.gemm2.config.block_m, tok);
          // Stream-K pieces on 256 rows while the 256-row tiles make at most four waves; else whole
          // tiles, 256 rows while every SM gets one.
          const int64_t tiles2 = p.load.active * ((pr.h + 255) / 256) * ((p.load.rows_per_active + tok - 1) / tok);
          EXPECT_EQ(p.gemm2.stream_k, tiles2 <= 4 * lim.num_sms);
          if (p.gemm2.stream_k) EXPECT_FALSE(p.gemm2.dynamic);
          EXPECT_EQ(p.gemm2.config.block_n,
                    p.gemm2.stream_k || p.load.active * ((pr.h + 255) / 256) >= lim.num_sms ? 256 : 128);
          EXPECT_EQ(p.gemm2.config.stages, p.gemm2.mx_stages);
          EXPECT_GE(p.gemm2.mx_stages, 2);
          EXPECT_LE(smem(p.gemm2.config, 0, 128, p.gemm2.mx_stages, p.gemm2.k_groups), lim.smem_bytes);
        }
        EXPECT_FALSE(p.gemm1.stream_k) << "GEMM1 keeps whole tiles unless MOEKIT_MXFP4_STREAM_K says otherwise";
        // Two K groups on GEMM1's 8-token tiles (not in the deterministic layer), one on GEMM2's.
        EXPECT_EQ(p.gemm1.k_groups, tok == 8 && !det ? 2 : 1);
        EXPECT_EQ(p.gemm2.k_groups, 1);
        const std::string text = moekit::detail::describe_moe_plan(p);
        EXPECT_NE(text.find("decode GEMM"), std::string::npos) << text;
        EXPECT_EQ(text.find("stream-K") != std::string::npos, p.gemm2.stream_k) << text;
        // MOEKIT_MXFP4_STREAM_K=3: both GEMMs, except GEMM1 of the deterministic layer (the FP8
        // form's sum order), on static schedules.
        Knobs both;
        both.mxfp4_stream_k = 3;
        const MoePlan b = plan_moe_forward(m, t, false, lim, 0, both);
        EXPECT_EQ(b.gemm1.stream_k, !det);
        if (b.gemm1.stream_k) EXPECT_FALSE(b.gemm1.dynamic);
        EXPECT_EQ(b.gemm2.stream_k, b.gemm2.mx_decode);
        // MOEKIT_MXFP4_STREAM_K=0: whole tiles, GEMM2 on 256 rows only while every SM gets a tile.
        Knobs whole;
        whole.mxfp4_stream_k = 0;
        const MoePlan q = plan_moe_forward(m, t, false, lim, 0, whole);
        EXPECT_FALSE(q.gemm1.stream_k);
        EXPECT_FALSE(q.gemm2.stream_k);
        if (q.gemm2.mx_decode)
          EXPECT_EQ(q.gemm2.config.block_n, q.load.active * ((pr.h + 255) / 256) >= lim.num_sms ? 256 : 128);
        // MOEKIT_MXFP4_K_GROUPS=3: two K groups on 8-token tiles (GEMM1 not in the deterministic
        // layer), with the exchange in the ring's shared memory.
        Knobs kg;
        kg.mxfp4_k_groups = 3;
        const MoePlan g = plan_moe_forward(m, t, false, lim, 0, kg);
        EXPECT_EQ(g.gemm1.k_groups, tok == 8 && !det ? 2 : 1);
        EXPECT_LE(moekit::sm90::gemm_mx_decode_smem_bytes(epi1, tok, 256, 64, g.gemm1.mx_stages, g.gemm1.mx_stages,
                                                          g.gemm1.k_groups),
                  lim.smem_bytes);
        if (g.gemm2.mx_decode) {
          EXPECT_EQ(g.gemm2.k_groups, tok == 8 ? 2 : 1);
          EXPECT_LE(moekit::sm90::gemm_mx_decode_smem_bytes(0, tok, g.gemm2.config.block_n, 128, g.gemm2.mx_stages,
                                                            g.gemm2.mx_stages, g.gemm2.k_groups),
                    lim.smem_bytes);
        }
        EXPECT_EQ(moekit::detail::describe_moe_plan(g).find("K groups") != std::string::npos,
                  g.gemm1.k_groups > 1 || g.gemm2.k_groups > 1);
        // The decode GEMM1 reads token rows only when asked (MoeGemm1Input::kGathered), on 8-token
        // tiles where the sort's launch quantizes the tokens, and then never in stream-K pieces.
        EXPECT_FALSE(p.gather);
        MoeConfig gm = m;
        gm.gemm1_input = moekit::MoeGemm1Input::kGathered;
        const MoePlan ga = plan_moe_forward(gm, t, false, lim, 0, Knobs{});
        EXPECT_EQ(ga.gather, tok == 8 && moekit::detail::moe_sort_quantize_applies(t, pr.k, pr.e));
        gathered_plans += ga.gather ? 1 : 0;
        if (ga.gather) {
          EXPECT_TRUE(ga.quantize_in_sort);
          // A forced GEMM1 configuration of 16 tokens takes the permuted copy back.
          Knobs forced;
          forced.moe_gemm1_config = "m16n256s8g8x132c1";
          const MoePlan fb = plan_moe_forward(gm, t, false, lim, 0, forced);
          EXPECT_EQ(fb.gemm1.config.block_m, 16);
          EXPECT_FALSE(fb.gather);
          EXPECT_FALSE(fb.quantize_in_sort);
          EXPECT_TRUE(fb.gemm1.pdl_early);
          EXPECT_FALSE(ga.gemm1.pdl_early) << "the layout comes from the previous launch";
          EXPECT_FALSE(ga.permute_token_scales);
          // (The deterministic layer's GEMM1 never runs in pieces.)
          EXPECT_EQ(plan_moe_forward(gm, t, false, lim, 0, both).gather, det) << "stream-K GEMM1 keeps the copy";
        }
        // The exchange lies between the one-group core and the raw slots.
        if (g.gemm1.k_groups == 2)
          EXPECT_GE(moekit::sm90::gemm_mx_region_offset(
                        moekit::sm90::gemm_mx_decode_core_bytes(epi1, tok, 256, 64, g.gemm1.mx_stages, 2)),
                    moekit::sm90::gemm_mx_decode_core_bytes(epi1, tok, 256, 64, g.gemm1.mx_stages, 1) +
                        moekit::sm90::gemm_mx_decode_xch_bytes(tok, 256, 2));
        EXPECT_TRUE(g.gemm1.k_groups == 1 || g.gemm1.mx_stages % 2 == 0) << "two K groups need an even ring";
        Knobs one;
        one.mxfp4_k_groups = 0;
        const MoePlan o = plan_moe_forward(m, t, false, lim, 0, one);
        EXPECT_EQ(o.gemm1.k_groups, 1);
        EXPECT_EQ(o.gemm2.k_groups, 1);
      }
    }
  }
  EXPECT_GT(gathered_plans, 0);
  EXPECT_FALSE(moekit::sm90::gemm_mx_decode_supported(64, 256));
  EXPECT_FALSE(moekit::sm90::gemm_mx_decode_supported(8, 192));
}

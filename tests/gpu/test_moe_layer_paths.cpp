// GPU tests of the public MoE layer: paths that must agree — routing from logits vs the caller's
// ids per routing method, CUDA-graph replay with new logits vs eager, deterministic runs bit for
// bit, gathered vs permuted activations bit for bit (harness: moe_layer_harness.h).
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "moe_layer_harness.h"

using namespace moe_layer_test;

namespace {
// ---------------------------------------------------------------------------------------------
// Routing from logits vs caller ids
// ---------------------------------------------------------------------------------------------

TEST(MoeLayer, LogitsPathMatchesIdsPath) {
  moekit::test::Stream s;
  const Weights W(32, 512, 256, 9);
  DeviceBuffer bias(32 * 4);
  moekit::detail::fill_random_f32(bias.as<float>(), 32, -0.01f, 0.01f, 5, nullptr);
  struct M {
    const char* name;
    RoutingMethod method;
    bool renorm;
    int groups, keep;
    float scale;
  };
  const M methods[] = {{"softmax_topk renorm", RoutingMethod::kSoftmaxTopk, true, 1, 1, 1.0f},
                       {"softmax_topk", RoutingMethod::kSoftmaxTopk, false, 1, 1, 1.0f},
                       {"topk_softmax", RoutingMethod::kTopkSoftmax, false, 1, 1, 1.0f},
                       {"sigmoid_grouped", RoutingMethod::kSigmoidGrouped, true, 4, 2, 2.5f}};
  for (const M& m : methods)
    for (LogitsType type : {LogitsType::kFloat32, LogitsType::kBFloat16}) {
      SCOPED_TRACE(::testing::Message() << m.name << (type == LogitsType::kFloat32 ? " fp32" : " bf16"));
      MoeConfig c = small_config(32, 6, 512, 256);
      RoutingConfig r;
      r.method = m.method;
      r.renormalize = m.renorm;
      r.num_groups = m.groups;
      r.topk_groups = m.keep;
      r.routed_scaling_factor = m.scale;
      if (m.method == RoutingMethod::kSigmoidGrouped) r.correction_bias = bias.as<float>();
      c.routing = r;
      const Layer L(c, W, s);
      for (int64_t t : {1, 64, 500}) {
        Inputs in = make_x(t, c.hidden, 120 + uint64_t(t));
        random_logits(in, c, 130 + uint64_t(t), type);
        const Result via_logits = run(L, in, true, s);
        // Routing alone, then the ids path with its output.
        DeviceBuffer ids(size_t(t * c.top_k * 4)), w(size_t(t * c.top_k * 4));
        moekit::route(*L.layer.config().routing, in.logits.get(), type, t, ids.as<int32_t>(), w.as<float>(), s);
        moekit::test::finish(s, "route");
        in.ids = ids.download<int32_t>(size_t(t * c.top_k));
        in.w = w.download<float>(size_t(t * c.top_k));
        EXPECT_EQ(via_logits.ids, in.ids);
        EXPECT_EQ(via_logits.w, in.w);
        const Result via_ids = run(L, in, false, s);
        EXPECT_EQ(via_logits.y, via_ids.y) << "T=" << t;
        EXPECT_EQ(via_logits.invalid, 0);
        if (t <= 64) expect_accurate(check_rows(L, in, via_logits, all_rows(t), m.name));
      }
    }
}

// ---------------------------------------------------------------------------------------------
// CUDA graph and determinism
// ---------------------------------------------------------------------------------------------

TEST(MoeLayer, GraphReplayWithNewLogitsMatchesEager) {
  moekit::test::Stream s;
  const Weights W(32, 1024, 512, 10);
  DeviceBuffer bias(32 * 4);
  moekit::detail::fill_random_f32(bias.as<float>(), 32, -0.01f, 0.01f, 6, nullptr);
  // Bit-for-bit in the deterministic mode; in the fast mode (FP32 atomics, order varies) within
  // a few bf16 roundings.
  for (bool det : {true, false}) {
    SCOPED_TRACE(mode_name(det));
    MoeConfig c = small_config(32, 8, 1024, 512, det);
    RoutingConfig r;
    r.method = RoutingMethod::kSigmoidGrouped;
    r.num_groups = 4;
    r.topk_groups = 2;
    r.renormalize = true;
    r.routed_scaling_factor = 2.5f;
    r.correction_bias = bias.as<float>();
    c.routing = r;
    const Layer L(c, W, s);
    for (int64_t t : {1, 7, 64, 1000}) {
      SCOPED_TRACE(::testing::Message() << "T=" << t);
      Inputs in = make_x(t, c.hidden, 140 + uint64_t(t));
      random_logits(in, c, 150);
      const size_t ws_bytes = L.layer.workspace_size(t);
      DeviceBuffer ws(ws_bytes), y(size_t(t * c.hidden * 2)), invalid(4);
      L.layer.prepare_kernels(t, ws.get(), ws_bytes, s);
      moekit::MoeForwardArgs a;
      a.num_tokens = t;
      a.x = in.x.get();
      a.y = y.get();
      a.logits = in.logits.get();
      a.invalid_count = invalid.as<int32_t>();
      a.workspace = ws.get();
      a.workspace_bytes = ws_bytes;
      const cudaGraphExec_t exec = capture_forward(L.layer, a, s);
      ASSERT_NE(exec, nullptr);
      std::vector<uint16_t> previous;
      for (int replay = 0; replay < 3; ++replay) {
        // New routing in the same logits buffer.
        moekit::detail::fill_random_f32(in.logits.as<float>(), t * c.num_experts, -2.0f, 2.0f, 1000 + uint64_t(replay),
                                        s);
        ASSERT_EQ(cudaMemsetAsync(y.get(), 0xFF, y.bytes(), s), cudaSuccess);
        ASSERT_EQ(cudaGraphLaunch(exec, s), cudaSuccess);
        moekit::test::finish(s, "graph replay");
        const auto y_graph = y.download<uint16_t>(size_t(t * c.hidden));
        ASSERT_EQ(cudaMemsetAsync(y.get(), 0xFF, y.bytes(), s), cudaSuccess);
        L.layer.forward(a, s);
        moekit::test::finish(s, "eager forward");
        const auto y_eager = y.download<uint16_t>(size_t(t * c.hidden));
        if (det) {
          EXPECT_EQ(y_graph, y_eager) << "replay " << replay;
        } else {
          std::vector<float> g(y_graph.size());
          std::vector<double> e(y_eager.size());
          for (size_t i = 0; i < g.size(); ++i) {
            g[i] = moekit::bf16_to_float(y_graph[i]);
            e[i] = moekit::bf16_to_float(y_eager[i]);
          }
          EXPECT_LE(moekit::relative_l2_error(g.data(), e.data(), g.size()), 2e-3) << "replay " << replay;
        }
        EXPECT_NE(y_graph, previous) << "replay " << replay << " did not see the new logits";
        previous = y_graph;
        if (replay == 0 && t <= 64) {
          Result res{y_eager, 0, {}, {}};
          DeviceBuffer ids(size_t(t * c.top_k * 4)), w(size_t(t * c.top_k * 4));
          moekit::route(*L.layer.config().routing, in.logits.get(), LogitsType::kFloat32, t, ids.as<int32_t>(), w.as<float>(), s);
          moekit::test::finish(s, "route");
          res.ids = ids.download<int32_t>(size_t(t * c.top_k));
          res.w = w.download<float>(size_t(t * c.top_k));
          expect_accurate(check_rows(L, in, res, all_rows(t), "graph replay"));
        }
      }
      cudaGraphExecDestroy(exec);
    }
  }
}

TEST(MoeLayer, DeterministicRunsAreBitIdentical) {
  moekit::test::Stream s;
  const MoeConfig c = small_config(64, 6, 2048, 1408);  // deepseek-v2-lite shape
  const Weights W(64, 2048, 1408, 11);
  const Layer L(c, W, s);
  for (int64_t t : {7, 1000, 4096}) {
    Inputs in = make_x(t, c.hidden, 160 + uint64_t(t));
    random_ids(in, c, 170 + uint64_t(t), true);
    const Result a = run(L, in, false, s), b = run(L, in, false, s);
    EXPECT_EQ(a.y, b.y) << "T=" << t;
    EXPECT_EQ(a.invalid, b.invalid);
  }
}

// GEMM1's two activation paths (MoeConfig::gemm1_input) quantize each token once and feed GEMM1
// the same bytes, so in the deterministic mode y must be bit-identical between them — with
// duplicate, -1 and invalid ids, the K tail of the gpt-oss shape (H = 2880), an EP slice, and T from
// decode (8-row A boxes vs gathered rows) to prefill (multicast pairs).
TEST(MoeLayer, GatheredAndPermutedActivationsAreBitIdentical) {
  moekit::test::Stream s;
  struct Case {
    int e, k;
    int64_t h, i;
    int local_offset, local_count;
  };
  for (const Case& cs : {Case{64, 6, 2048, 1408, 0, 0}, Case{32, 4, 2880, 2880, 8, 16}}) {
    const Weights W(cs.e, cs.h, cs.i, 21);
    MoeConfig c = small_config(cs.e, cs.k, cs.h, cs.i);
    c.local_offset = cs.local_offset;
    c.local_count = cs.local_count;
    c.gemm1_input = moekit::MoeGemm1Input::kPermuted;
    const Layer permuted(c, W, s);
    c.gemm1_input = moekit::MoeGemm1Input::kGathered;
    const Layer gathered(c, W, s);
    for (int64_t t : {1, 7, 300, 2500}) {
      SCOPED_TRACE(::testing::Message() << "E=" << cs.e << " H=" << cs.h << " T=" << t);
      Inputs in = make_x(t, c.hidden, 190 + uint64_t(t));
      random_ids(in, c, 200 + uint64_t(t), true);
      const Result a = run(permuted, in, false, s), b = run(gathered, in, false, s);
      EXPECT_EQ(a.y, b.y);
      EXPECT_EQ(a.invalid, b.invalid);
    }
  }
}

}  // namespace

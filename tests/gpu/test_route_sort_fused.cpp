// GPU tests of the MoE forward's fused stages (src/moe/route_sort.h): route + single-CTA sort, with
// and without the quantize, and sort + quantize, each bit-identical to the separate kernels on
// poisoned buffers (the routing cases: test_routing.cpp).

#include "routing_test_util.h"

namespace {

using namespace moekit::routing_test;

// ---------------------------------------------------------------------------------------------
// The MoE forward's fused route + single-CTA sort (src/moe/route_sort.h): every output bit-identical
// to route() followed by moe_sort(), on poisoned buffers.
// ---------------------------------------------------------------------------------------------

struct SortOut {
  DeviceBuffer ids, w, counts, offsets, p2e, e2p, invalid;
  SortOut(int64_t T, int k, int L)
      : ids(size_t(T * k) * 4), w(size_t(T * k) * 4), counts(size_t(L) * 4), offsets(size_t(L + 1) * 4),
        p2e(size_t(moekit::moe_sort_rows_bound(T, k, L)) * 4), e2p(size_t(T * k) * 4), invalid(4) {
    for (DeviceBuffer* b : {&ids, &w, &counts, &offsets, &p2e, &e2p, &invalid}) b->fill_bytes(0xA5);
  }
  moekit::MoeSortBuffers buffers() {
    moekit::MoeSortBuffers b;
    b.expert_counts = counts.as<int32_t>();
    b.expert_offsets = offsets.as<int32_t>();
    b.permuted_to_expanded = p2e.as<int32_t>();
    b.expanded_to_permuted = e2p.as<int32_t>();
    b.invalid_count = invalid.as<int32_t>();
    return b;
  }
};

void expect_same_bytes(DeviceBuffer& a, DeviceBuffer& b, const std::string& what) {
  const auto x = a.download<uint8_t>(a.bytes()), y = b.download<uint8_t>(b.bytes());
  EXPECT_TRUE(x == y) << what;
}

// The token quantization fused into moe_route_sort (RouteSortQuantize) against
// quantize_tokens_zeroing: random bf16 tokens (never zeros), poisoned outputs, accumulator and
// counters; every byte must match, and the accumulator and counters must come back zeroed.
struct QuantSide {
  DeviceBuffer xq, sx, acc, counters;
  QuantSide(int64_t T, int64_t H)
      : xq(size_t(T * H)), sx(size_t(moekit::sfa_physical_size(T, H)) * 4), acc(size_t(T * H) * 4), counters(3 * 4) {
    for (DeviceBuffer* b : {&xq, &sx, &acc, &counters}) EXPECT_EQ(cudaMemset(b->get(), 0x7B, b->bytes()), cudaSuccess);
  }
  moekit::detail::RouteSortQuantize args(const void* x, int64_t H) {
    return {x, H, xq.get(), sx.as<float>(), acc.as<float>(), counters.as<unsigned>(), 3};
  }
};

// Runs both sides on the same logits (fp32 or bf16-exact values) and compares every buffer. With
// hidden > 0 the fused side also quantizes T random tokens of that width (QuantSide).
void check_route_sort(const Case& cs, const std::vector<float>& logits, int64_t T, bool bf16, int off, int L,
                      const std::vector<float>& bias, const std::string& what, int64_t hidden = 0) {
  RoutingConfig c = make_config(cs);
  const int k = c.top_k;
  ASSERT_TRUE(moekit::detail::moe_route_sort_applies(c, T, L)) << what;
  std::vector<uint8_t> bytes(logits.size() * (bf16 ? 2 : 4));
  for (size_t i = 0; i < logits.size(); ++i) {
    if (bf16) {
      const uint16_t b = moekit::bf16_from_float(logits[i]);
      std::memcpy(bytes.data() + 2 * i, &b, 2);
    } else {
      std::memcpy(bytes.data() + 4 * i, &logits[i], 4);
    }
  }
  DeviceBuffer dl(bytes.size()), db(bias.size() * 4);
  dl.upload(bytes);
  if (!bias.empty()) {
    db.upload(bias);
    c.correction_bias = db.as<float>();
  }
  const LogitsType type = bf16 ? LogitsType::kBFloat16 : LogitsType::kFloat32;
  const size_t ws_bytes = moekit::moe_sort_workspace_size(T, k, L);
  DeviceBuffer ws(ws_bytes);
  SortOut a(T, k, L), b(T, k, L);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  moekit::route(c, dl.get(), type, T, a.ids.as<int32_t>(), a.w.as<float>(), nullptr);
  moekit::moe_sort(a.ids.as<int32_t>(), T, k, c.num_experts, off, L, a.buffers(), ws.get(), ws_bytes, nullptr);
  DeviceBuffer x(size_t(std::max<int64_t>(T * hidden, 1)) * 2);
  QuantSide qa(T, std::max<int64_t>(hidden, 16)), qb(T, std::max<int64_t>(hidden, 16));
  moekit::detail::RouteSortQuantize q;
  if (hidden > 0) {
    std::mt19937_64 rng(uint64_t(T * 1000 + hidden));
    std::uniform_real_distribution<float> val(-3.0f, 3.0f);
    std::vector<uint16_t> xs(size_t(T * hidden));
    for (auto& v : xs) v = moekit::bf16_from_float(val(rng) + 1e-3f);
    x.upload(xs);
    moekit::detail::quantize_tokens_zeroing(x.get(), T, hidden, qa.xq.get(), qa.sx.as<float>(), qa.acc.as<float>(),
                                            nullptr, qa.counters.as<unsigned>(), 3);
    q = qb.args(x.get(), hidden);
  }
  moekit::detail::moe_route_sort(c, dl.get(), type, T, b.ids.as<int32_t>(), b.w.as<float>(), c.num_experts, off, L,
                                 b.buffers(), ws.get(), ws_bytes, nullptr, hidden > 0 ? &q : nullptr);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  if (hidden > 0) {
    expect_same_bytes(qa.xq, qb.xq, what + ": xq");
    expect_same_bytes(qa.sx, qb.sx, what + ": sx");
    const auto acc = qb.acc.download<float>(size_t(T * hidden));
    EXPECT_TRUE(std::all_of(acc.begin(), acc.end(), [](float v) { return v == 0.0f; })) << what << ": y_acc zeroed";
    const auto ctr = qb.counters.download<unsigned>(3);
    EXPECT_TRUE(std::all_of(ctr.begin(), ctr.end(), [](unsigned v) { return v == 0u; })) << what << ": counters";
    const auto codes = qb.xq.download<uint8_t>(size_t(T * hidden));
    EXPECT_GT(std::count_if(codes.begin(), codes.end(), [](uint8_t v) { return (v & 0x7F) != 0; }), T * hidden / 2)
        << what << ": the codes are not mostly zero";
  }
  expect_same_bytes(a.ids, b.ids, what + ": topk_ids");
  expect_same_bytes(a.w, b.w, what + ": topk_weights");
  expect_same_bytes(a.counts, b.counts, what + ": expert_counts");
  expect_same_bytes(a.offsets, b.offsets, what + ": expert_offsets");
  expect_same_bytes(a.p2e, b.p2e, what + ": permuted_to_expanded");
  expect_same_bytes(a.e2p, b.e2p, what + ": expanded_to_permuted");
  expect_same_bytes(a.invalid, b.invalid, what + ": invalid_count");
  // And the routing itself is right (the reference, not only route()).
  expect_match(make_config(cs), T, run_reference(make_config(cs), logits, T, bias),
               Routed{b.ids.download<int32_t>(size_t(T * k)), b.w.download<float>(size_t(T * k))}, what);
}

TEST(RouteSortFusedGpu, MatchesRouteThenSort) {
  std::vector<Case> cases = preset_cases();
  for (const auto& cs : shape_cases())
    if (moekit::detail::route_npl(cs.E) <= 12) cases.push_back(cs);
  int ran = 0;
  uint64_t seed = 11;
  for (const auto& cs : cases) {
    const RoutingConfig c = make_config(cs);
    for (int64_t T : {1, 3, 8}) {
      // Full slice, the upper half, and an odd slice in the middle.
      const int E = cs.E;
      const std::pair<int, int> slices[] = {{0, E}, {E / 2, E - E / 2}, {E / 3, std::max(1, E / 3)}};
      for (const auto& [off, L] : slices) {
        if (!moekit::detail::moe_route_sort_applies(c, T, L)) continue;
        const bool bf16 = (seed % 2) == 0;
        const std::vector<float> bias = cs.bias ? random_bias(E, seed ^ 0xB1A5) : std::vector<float>{};
        const auto logits = make_logits(c, T, bf16, bias.empty() ? nullptr : bias.data(), seed);
        // Every other case also quantizes tokens, of widths with and without a partial 128-block.
        const int64_t hidden_cases[] = {0, 7168, 0, 2880, 0, 528};
        check_route_sort(cs, logits, T, bf16, off, L, bias,
                         cs.name + "_T" + std::to_string(T) + "_slice" + std::to_string(off) + "+" + std::to_string(L) +
                             (bf16 ? "_bf16" : "_fp32"),
                         hidden_cases[seed % 6]);
        ++seed;
        ++ran;
      }
    }
  }
  EXPECT_GE(ran, 80) << "too few fused cases ran";
}

// The launch with its quantization CTAs, captured in a CUDA graph and replayed, writes the same
// bytes as when launched eagerly (sizes with and without the sort's helper CTAs).
TEST(RouteSortFusedGpu, QuantizeInGraphMatchesEager) {
  moekit::test::Stream s;
  const Case cs{"sig32", 32, 8, RoutingMethod::kSigmoidGrouped, true, 4, 2, 2.5f, false};
  const RoutingConfig c = make_config(cs);
  const int64_t H = 1024;
  for (int64_t T : {1, 7, 8}) {
    SCOPED_TRACE(::testing::Message() << "T=" << T);
    const auto logits = make_logits(c, T, false, nullptr, 77 + uint64_t(T));
    DeviceBuffer dl(logits.size() * 4), x(size_t(T * H) * 2);
    dl.upload(logits);
    std::mt19937_64 rng{uint64_t(T)};
    std::uniform_real_distribution<float> val(-3.0f, 3.0f);
    std::vector<uint16_t> xs(size_t(T * H));
    for (auto& v : xs) v = moekit::bf16_from_float(val(rng) + 1e-3f);
    x.upload(xs);
    const size_t ws_bytes = moekit::moe_sort_workspace_size(T, c.top_k, c.num_experts);
    DeviceBuffer ws(ws_bytes);
    SortOut se(T, c.top_k, c.num_experts), sg(T, c.top_k, c.num_experts);
    QuantSide qe(T, H), qg(T, H);
    auto run = [&](SortOut& o, QuantSide& q) {
      const moekit::detail::RouteSortQuantize args = q.args(x.get(), H);
      moekit::detail::moe_route_sort(c, dl.get(), LogitsType::kFloat32, T, o.ids.as<int32_t>(), o.w.as<float>(),
                                     c.num_experts, 0, c.num_experts, o.buffers(), ws.get(), ws_bytes, s, &args);
    };
    run(se, qe);
    ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
    moekit::test::run_in_graph(s, [&] { run(sg, qg); });
    expect_same_bytes(se.ids, sg.ids, "topk_ids");
    expect_same_bytes(se.offsets, sg.offsets, "expert_offsets");
    expect_same_bytes(se.p2e, sg.p2e, "permuted_to_expanded");
    expect_same_bytes(qe.xq, qg.xq, "xq");
    expect_same_bytes(qe.sx, qg.sx, "sx");
    expect_same_bytes(qe.acc, qg.acc, "zeroed accumulator");
    expect_same_bytes(qe.counters, qg.counters, "zeroed counters");
  }
}

TEST(RouteSortFusedGpu, NaNAndInfRows) {
  for (const auto& cs : preset_cases()) {
    Case c0 = cs;
    c0.bias = false;
    const auto logits = special_rows(cs.E, cs.k, 7);
    const int64_t T = static_cast<int64_t>(logits.size()) / cs.E;
    check_route_sort(c0, logits, T, false, 0, cs.E, {}, cs.name + "_special");
  }
}

// moe_sort_quantize (callers' top-k ids: the single-CTA sort with the token quantization in the same
// launch) against moe_sort followed by quantize_tokens_zeroing: random ids with duplicates, -1 and
// invalid ids, EP slices, hidden sizes with and without a partial 128-block, poisoned outputs; every
// byte must match. Also once captured in a CUDA graph and replayed with other ids.
TEST(SortQuantizeFusedGpu, MatchesSortThenQuantize) {
  using moekit::detail::moe_sort_quantize;
  struct Shape {
    int64_t T;
    int k, E, off, L;
    int64_t H;
  };
  const Shape shapes[] = {{1, 8, 256, 0, 256, 7168},  {2, 8, 256, 0, 256, 7168},  {7, 8, 256, 128, 128, 2880},
                          {64, 8, 256, 0, 256, 7168}, {256, 8, 256, 0, 256, 528}, {33, 1, 16, 3, 9, 2880},
                          {5, 4, 384, 0, 384, 1024},  {128, 6, 64, 16, 32, 7168}};
  moekit::test::Stream s;
  uint64_t seed = 5;
  for (const Shape& sh : shapes) {
    const std::string what = "T" + std::to_string(sh.T) + "_k" + std::to_string(sh.k) + "_E" + std::to_string(sh.E) +
                             "_slice" + std::to_string(sh.off) + "+" + std::to_string(sh.L) + "_H" +
                             std::to_string(sh.H);
    SCOPED_TRACE(what);
    ASSERT_TRUE(moekit::detail::moe_sort_quantize_applies(sh.T, sh.k, sh.L));
    std::mt19937_64 rng(seed++);
    auto random_ids = [&] {
      std::uniform_int_distribution<int> id(0, sh.E - 1), odd(0, 31);
      std::vector<int32_t> ids(size_t(sh.T * sh.k));
      for (auto& v : ids) {
        const int o = odd(rng);
        v = o == 0 ? -1 : o == 1 ? sh.E + o : o == 2 ? ids[0] : id(rng);  // -1, invalid, duplicates
      }
      ids.back() = sh.E + 7;  // at least one invalid id
      return ids;
    };
    std::uniform_real_distribution<float> val(-3.0f, 3.0f);
    std::vector<uint16_t> xs(size_t(sh.T * sh.H));
    for (auto& v : xs) v = moekit::bf16_from_float(val(rng) + 1e-3f);
    DeviceBuffer ids(size_t(sh.T * sh.k) * 4), x(xs.size() * 2);
    x.upload(xs);
    const size_t ws_bytes = moekit::moe_sort_workspace_size(sh.T, sh.k, sh.L);
    DeviceBuffer ws(ws_bytes);
    auto compare = [&](const std::vector<int32_t>& id_values, bool in_graph) {
      ids.upload(id_values);
      SortOut a(sh.T, sh.k, sh.L), b(sh.T, sh.k, sh.L);
      QuantSide qa(sh.T, sh.H), qb(sh.T, sh.H);
      moekit::moe_sort(ids.as<int32_t>(), sh.T, sh.k, sh.E, sh.off, sh.L, a.buffers(), ws.get(), ws_bytes, s);
      moekit::detail::quantize_tokens_zeroing(x.get(), sh.T, sh.H, qa.xq.get(), qa.sx.as<float>(), qa.acc.as<float>(),
                                              s, qa.counters.as<unsigned>(), 3);
      ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
      const moekit::detail::RouteSortQuantize q = qb.args(x.get(), sh.H);
      auto run = [&] {
        moe_sort_quantize(ids.as<int32_t>(), sh.T, sh.k, sh.E, sh.off, sh.L, b.buffers(), ws.get(), ws_bytes, q, s);
      };
      if (in_graph) moekit::test::run_in_graph(s, run);
      else run();
      ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
      expect_same_bytes(qa.xq, qb.xq, "xq");
      expect_same_bytes(qa.sx, qb.sx, "sx");
      expect_same_bytes(qa.acc, qb.acc, "zeroed accumulator");
      expect_same_bytes(qa.counters, qb.counters, "zeroed counters");
      const auto acc = qb.acc.download<float>(size_t(sh.T * sh.H));
      EXPECT_TRUE(std::all_of(acc.begin(), acc.end(), [](float v) { return v == 0.0f; })) << "y_acc zeroed";
      const auto codes = qb.xq.download<uint8_t>(size_t(sh.T * sh.H));
      EXPECT_GT(std::count_if(codes.begin(), codes.end(), [](uint8_t v) { return (v & 0x7F) != 0; }), sh.T * sh.H / 2)
          << "the codes are not mostly zero";
      expect_same_bytes(a.counts, b.counts, "expert_counts");
      expect_same_bytes(a.offsets, b.offsets, "expert_offsets");
      expect_same_bytes(a.p2e, b.p2e, "permuted_to_expanded");
      expect_same_bytes(a.e2p, b.e2p, "expanded_to_permuted");
      expect_same_bytes(a.invalid, b.invalid, "invalid_count");
      EXPECT_GT(a.invalid.download<int32_t>(1)[0], 0) << "the ids include invalid ones";
    };
    compare(random_ids(), false);
    compare(random_ids(), true);
  }
  EXPECT_FALSE(moekit::detail::moe_sort_quantize_applies(0, 8, 256));
  EXPECT_FALSE(moekit::detail::moe_sort_quantize_applies(4096, 8, 256)) << "the radix path's sizes";
}

TEST(RouteSortFusedGpu, Applicability) {
  using moekit::detail::moe_route_sort_applies;
  const auto cases = preset_cases();
  const RoutingConfig ds = make_config(cases[0]);  // deepseek-v3: E = 256, 8 groups
  EXPECT_TRUE(moe_route_sort_applies(ds, 1, 256));
  EXPECT_TRUE(moe_route_sort_applies(ds, 8, 256));
  EXPECT_FALSE(moe_route_sort_applies(ds, 9, 256)) << "larger batches route faster in their own kernel";
  EXPECT_FALSE(moe_route_sort_applies(ds, 0, 256));
  EXPECT_TRUE(moe_route_sort_applies(make_config(cases[1]), 8, 384)) << "kimi-k2: NPL 12";
  RoutingConfig big = make_config(Case{"softmax_E640", 640, 16, RoutingMethod::kSoftmaxTopk, true});
  EXPECT_FALSE(moe_route_sort_applies(big, 1, 640)) << "NPL 24 does not fit the sort's registers";
  // 256 groups of one: 320 words of group scratch per routing warp; 3 KB hold 2 warps.
  RoutingConfig g256 = make_config(Case{"g256", 256, 8, RoutingMethod::kSigmoidGrouped, true, 256, 64, 1.0f, true});
  EXPECT_TRUE(moe_route_sort_applies(g256, 2, 256));
  EXPECT_FALSE(moe_route_sort_applies(g256, 3, 256));
  EXPECT_FALSE(moe_route_sort_applies(ds, 8, 1025)) << "L above the single-CTA sort's limit";
}

}  // namespace

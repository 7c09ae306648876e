// GPU routing (moekit::route) against the host reference (route_reference): every SPEC §5 preset,
// shapes that reach each kernel path (experts per lane, load width, group-score mode), deliberate
// ties, NaN/Inf rows, poisoned outputs, misaligned logits, a large batch and CUDA-graph capture.
//
// Random data is drawn so that the reference's float64 ranking cannot differ from the kernel's
// fp32 one: logits are distinct within a row (selection on logits is then exact for the softmax
// methods), and for sigmoid_grouped a row is redrawn until the scores that decide the result (the
// kept-group boundary, and the k + 1 best b among the kept experts) are at least kMargin apart.
// Ids must then match exactly and weights within 1e-5 relative.

#include "routing_test_util.h"

namespace {

using namespace moekit::routing_test;

// ---------------------------------------------------------------------------------------------
// Tests
// ---------------------------------------------------------------------------------------------

struct Param {
  Case c;
  int64_t T;
  bool bf16;
};

std::string param_name(const Param& p) {
  return p.c.name + "_T" + std::to_string(p.T) + (p.bf16 ? "_bf16" : "_fp32");
}

void PrintTo(const Param& p, std::ostream* os) { *os << param_name(p); }

class RoutingGpuTest : public ::testing::TestWithParam<Param> {};

TEST_P(RoutingGpuTest, MatchesReference) {
  const Param& p = GetParam();
  check_case(p.c, p.T, p.bf16, 1000 + static_cast<uint64_t>(p.c.E * 7 + p.c.k * 131 + p.T * 3 + p.bf16));
}

std::vector<Param> params(const std::vector<Case>& cases) {
  std::vector<Param> v;
  for (const auto& c : cases)
    for (int64_t T : {1, 7, 1000})
      for (bool bf16 : {false, true}) v.push_back({c, T, bf16});
  return v;
}

INSTANTIATE_TEST_SUITE_P(Presets, RoutingGpuTest, ::testing::ValuesIn(params(preset_cases())),
                         [](const ::testing::TestParamInfo<Param>& i) { return param_name(i.param); });
INSTANTIATE_TEST_SUITE_P(Shapes, RoutingGpuTest, ::testing::ValuesIn(params(shape_cases())),
                         [](const ::testing::TestParamInfo<Param>& i) { return param_name(i.param); });

TEST(RoutingGpu, LargeBatch) {
  // Prefill-sized batches (many CTAs, every warp loops once).
  for (const auto& cs : preset_cases()) {
    if (cs.name != "deepseek_v3" && cs.name != "kimi_k2" && cs.name != "qwen3") continue;
    check_case(cs, 16384, false, 77);
    if (cs.name == "deepseek_v3") check_case(cs, 16384, true, 78);
  }
}

TEST(RoutingGpu, NonDefaultStream) {
  cudaStream_t st;
  ASSERT_EQ(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking), cudaSuccess);
  for (const auto& cs : preset_cases()) check_case(cs, 300, false, 5, st);
  cudaStreamDestroy(st);
}

TEST(RoutingGpu, MisalignedLogits) {
  // Offsets that force narrower loads: fp32 +4 (element loads), fp32 +8 (8-byte loads where the
  // experts per lane allow), bf16 +2 (element loads), bf16 +4 (4-byte loads).
  for (const auto& cs : preset_cases()) {
    check_case(cs, 33, false, 11, nullptr, 4);
    check_case(cs, 33, false, 12, nullptr, 8);
    check_case(cs, 33, true, 13, nullptr, 2);
    check_case(cs, 33, true, 14, nullptr, 4);
  }
}

// Rows built from a few values, so that many scores are exactly equal. Equal inputs give equal
// fp32 and float64 scores, so ties resolve the same way on both sides (lower index / lower group).
// Values are all positive so that no two sigmoid sums coincide in the reals without being equal.
std::vector<float> tie_rows(int E, int G) {
  std::vector<float> l;
  auto push = [&](auto f) {
    for (int e = 0; e < E; ++e) l.push_back(f(e));
  };
  push([](int) { return 0.5f; });                                                  // all equal
  push([](int e) { return (e % 2) ? -0.0f : 0.0f; });                              // ±0
  push([](int e) { return 0.3f + 0.37f * static_cast<float>(e % 8); });           // period 8
  push([](int e) { return 0.3f + 0.37f * static_cast<float>((e / 8) % 8); });     // blocks of 8
  push([&](int e) { return 0.3f + 0.37f * static_cast<float>(((E - 1 - e) / 8) % 8); });  // mirrored
  push([&](int e) { return 0.2f + 0.5f * static_cast<float>((e % G) % 3); });     // same in every group
  push([&](int e) { return e < E / 2 ? 1.25f : 2.5f; });                           // two halves
  return l;
}

TEST(RoutingGpu, DeliberateTies) {
  for (const auto& cs : preset_cases()) {
    for (bool with_bias : {false, true}) {
      if (with_bias && !cs.bias) continue;
      RoutingConfig c = make_config(cs);
      const int E = cs.E, G = E / cs.groups;
      // A bias that repeats in every group keeps groups exactly tied.
      std::vector<float> bias;
      if (with_bias)
        for (int e = 0; e < E; ++e) bias.push_back(0.125f * static_cast<float>((e % G) % 5));
      const auto logits = tie_rows(E, G);
      const int64_t T = static_cast<int64_t>(logits.size()) / E;
      for (bool bf16 : {false, true}) {
        // The tie values are not all bf16-exact: round them (the reference sees the same values).
        std::vector<float> l = logits;
        if (bf16)
          for (auto& v : l) v = moekit::bf16_to_float(moekit::bf16_from_float(v));
        const std::string what = cs.name + "_ties" + (with_bias ? "_bias" : "") + (bf16 ? "_bf16" : "_fp32");
        const Routed ref = run_reference(c, l, T, bias);
        expect_match(c, T, ref, run_gpu(c, l, bf16, T, bias), what);
        // Rows 0 and 1 are all equal (±0 included): ids 0..k-1 for every method, the groups tying
        // too (the first groups are kept). Not with a bias, which separates the experts.
        if (!with_bias)
          for (int j = 0; j < 2 * cs.k; ++j) EXPECT_EQ(ref.ids[j], j % cs.k) << what;
      }
    }
  }
}

TEST(RoutingGpu, NaNAndInfRows) {
  for (const auto& cs : preset_cases()) {
    Case c0 = cs;
    c0.bias = false;
    const RoutingConfig c = make_config(c0);
    const auto logits = special_rows(cs.E, cs.k, 99);
    const int64_t T = static_cast<int64_t>(logits.size()) / cs.E;
    for (bool bf16 : {false, true}) {
      std::vector<float> l = logits;
      if (bf16)  // the grid values are not all bf16-exact; NaN/Inf are
        for (auto& v : l) v = moekit::bf16_to_float(moekit::bf16_from_float(v));
      const std::string what = cs.name + "_special" + (bf16 ? "_bf16" : "_fp32");
      expect_match(c, T, run_reference(c, l, T, {}), run_gpu(c, l, bf16, T, {}), what);
    }
  }
}

TEST(RoutingGpu, GraphCaptureMatchesDirect) {
  for (const auto& cs : preset_cases()) {
    const RoutingConfig c0 = make_config(cs);
    const int64_t T = 500;
    const std::vector<float> bias = cs.bias ? random_bias(cs.E, 3) : std::vector<float>{};
    const auto logits = make_logits(c0, T, false, bias.empty() ? nullptr : bias.data(), 21);
    DeviceBuffer dl(logits.size() * 4), db(bias.size() * 4);
    dl.upload(logits);
    RoutingConfig c = c0;
    if (!bias.empty()) {
      db.upload(bias);
      c.correction_bias = db.as<float>();
    }
    const size_t n = static_cast<size_t>(T * cs.k);
    DeviceBuffer i1(n * 4), w1(n * 4), i2(n * 4), w2(n * 4);
    i2.fill_bytes(0xFF);
    w2.fill_bytes(0xFF);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    cudaStream_t st;
    ASSERT_EQ(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking), cudaSuccess);
    moekit::route(c, dl.get(), LogitsType::kFloat32, T, i1.as<int32_t>(), w1.as<float>(), st);

    cudaGraph_t graph = nullptr;
    ASSERT_EQ(cudaStreamBeginCapture(st, cudaStreamCaptureModeGlobal), cudaSuccess);
    moekit::route(c, dl.get(), LogitsType::kFloat32, T, i2.as<int32_t>(), w2.as<float>(), st);
    ASSERT_EQ(cudaStreamEndCapture(st, &graph), cudaSuccess);
    cudaGraphExec_t exec = nullptr;
    ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
    for (int rep = 0; rep < 3; ++rep) ASSERT_EQ(cudaGraphLaunch(exec, st), cudaSuccess);
    ASSERT_EQ(cudaStreamSynchronize(st), cudaSuccess);
    EXPECT_EQ(i1.download<int32_t>(n), i2.download<int32_t>(n)) << cs.name;
    EXPECT_EQ(w1.download<uint32_t>(n), w2.download<uint32_t>(n)) << cs.name << " (bitwise)";
    const Routed ref = run_reference(c0, logits, T, bias);
    expect_match(c0, T, ref, Routed{i2.download<int32_t>(n), w2.download<float>(n)}, cs.name + "_graph");
    cudaGraphExecDestroy(exec);
    cudaGraphDestroy(graph);
    cudaStreamDestroy(st);
  }
}

TEST(RoutingGpu, EmptyIsNoOp) {
  DeviceBuffer di(256), dw(256);
  di.fill_bytes(0xFF);
  dw.fill_bytes(0xFF);
  for (const auto& cs : preset_cases()) {
    const RoutingConfig c = make_config(cs);
    EXPECT_NO_THROW(moekit::route(c, nullptr, LogitsType::kFloat32, 0, nullptr, nullptr, nullptr));
    EXPECT_NO_THROW(moekit::route(c, di.get(), LogitsType::kBFloat16, 0, di.as<int32_t>(), dw.as<float>(), nullptr));
  }
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  for (uint8_t b : di.download<uint8_t>(256)) EXPECT_EQ(b, 0xFF);
  for (uint8_t b : dw.download<uint8_t>(256)) EXPECT_EQ(b, 0xFF);
}

}  // namespace

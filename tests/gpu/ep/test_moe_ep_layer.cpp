// The expert-parallel layer (include/moekit/moe_ep_layer.h) against the single-GPU MoeLayer on the
// same tokens: G = 1, 2 and 4 ranks (as many as are visible), one thread per rank, both modes,
// deterministic (bit-identical) and not (relative L2), with random routing (−1 and invalid ids
// included), all tokens on rank 0's experts, and ranks without tokens; MXFP4 experts, and
// gpt-oss's layer with its biases; a captured low-latency forward replayed with new routing equals
// the eager forward; bad configurations and arguments throw before any collective.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <memory>
#include <random>
#include <thread>
#include <vector>

#include <cuda_runtime.h>

#include "ep/nccl_group.h"
#include "../gpu_test_util.h"
#include "../moe_layer_harness.h"
#include "moekit/moe_ep_layer.h"

namespace {

using moe_layer_test::Layer;
using moe_layer_test::Weights;
using moekit::MoeConfig;
using moekit::MoeEpConfig;
using moekit::MoeEpForwardArgs;
using moekit::MoeEpLayer;
using moekit::MoeEpMode;
using moekit::detail::DeviceBuffer;
using moekit::detail::NcclGroup;

constexpr int kExperts = 32, kTopK = 4;
constexpr int64_t kHidden = 640, kInter = 320, kCapacity = 64;

int visible_gpus() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess ? n : 0;
}

MoeConfig layer_config(bool deterministic) {
  MoeConfig c;
  c.num_experts = kExperts;
  c.top_k = kTopK;
  c.hidden = kHidden;
  c.inter = kInter;
  c.deterministic = deterministic;
  c.gemm1_promote_k = 64;  // the automatic choice depends on the expected rows per expert
  return c;
}

// One rank's tokens (host).
struct RankInputs {
  int64_t t = 0;
  std::vector<uint16_t> x;
  std::vector<int32_t> ids;
  std::vector<float> w;
};

enum class Routing { kRandom, kAllOnRankZero, kSomeRanksEmpty };

std::vector<RankInputs> make_inputs(int g, Routing routing, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<RankInputs> in(static_cast<size_t>(g));
  for (int r = 0; r < g; ++r) {
    RankInputs& v = in[size_t(r)];
    v.t = routing == Routing::kSomeRanksEmpty && r % 2 == 1 ? 0 : int64_t(5 + (rng() % uint64_t(kCapacity - 5)));
    if (r == 0) v.t = kCapacity;  // one full rank
    v.x.resize(size_t(v.t * kHidden));
    for (auto& e : v.x) e = moekit::bf16_from_float(normal(rng));
    if (routing == Routing::kAllOnRankZero) {
      v.ids.resize(size_t(v.t * kTopK));
      for (auto& id : v.ids) id = int32_t(rng() % uint64_t(kExperts / g));
    } else {
      v.ids = moekit::test::random_topk_ids(rng, v.t, kTopK, kExperts);
    }
    v.w.resize(v.ids.size());
    for (auto& e : v.w) e = float(rng() % 1000) / 1000.0f;
  }
  return in;
}

int32_t invalid_slots(const std::vector<int32_t>& ids) {
  int32_t n = 0;
  for (int32_t id : ids) n += (id < -1 || id >= kExperts) ? 1 : 0;
  return n;
}

// Runs fn(rank) on one thread per rank, each with its device current.
template <class F>
void on_ranks(int g, F&& fn) {
  std::vector<std::thread> threads;
  for (int r = 0; r < g; ++r)
    threads.emplace_back([&, r] {
      try {
        ASSERT_EQ(cudaSetDevice(r), cudaSuccess);
        fn(r);
      } catch (const std::exception& e) {
        ADD_FAILURE() << "rank " << r << ": " << e.what();
      }
    });
  for (auto& t : threads) t.join();
}

// The whole model's MXFP4 weights (checkpoint-like codes and UE8M0 scales) and gpt-oss-style FP32
// biases on one device; the same on every device (seeded device fills).
struct MxfpWeights {
  DeviceBuffer c1, s1, c2, s2, b1, b2;
  MxfpWeights() {
    const int64_t e = kExperts, h = kHidden, i = kInter;
    c1 = DeviceBuffer(size_t(e * 2 * i * h / 2));
    s1 = DeviceBuffer(size_t(e * 2 * i * h / 32));
    c2 = DeviceBuffer(size_t(e * h * i / 2));
    s2 = DeviceBuffer(size_t(e * h * i / 32));
    b1 = DeviceBuffer(size_t(e * 2 * i) * 4);
    b2 = DeviceBuffer(size_t(e * h) * 4);
    moekit::detail::fill_checkpoint_mxfp4(c1.as<uint8_t>(), s1.as<uint8_t>(), e, 2 * i, h, 0.02f, 21, nullptr);
    moekit::detail::fill_checkpoint_mxfp4(c2.as<uint8_t>(), s2.as<uint8_t>(), e, h, i, 0.02f, 22, nullptr);
    moekit::detail::fill_random_f32(b1.as<float>(), e * 2 * i, -0.5f, 0.5f, 23, nullptr);
    moekit::detail::fill_random_f32(b2.as<float>(), e * h, -0.5f, 0.5f, 24, nullptr);
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  }
  /// Experts [first, ...), with or without the biases.
  moekit::MoeWeights slice(int first, bool biases) const {
    const int64_t h = kHidden, i = kInter;
    moekit::MoeWeights w;
    w.w1 = c1.as<uint8_t>() + first * 2 * i * h / 2;
    w.w1_scales = s1.as<uint8_t>() + first * 2 * i * h / 32;
    w.w2 = c2.as<uint8_t>() + first * h * i / 2;
    w.w2_scales = s2.as<uint8_t>() + first * h * i / 32;
    if (biases) {
      w.b1 = b1.as<float>() + first * 2 * i;
      w.b2 = b2.as<float>() + first * h;
    }
    return w;
  }
};

// G ranks with their communicators, streams and the whole model's weights on every device.
struct World {
  int g;
  NcclGroup group;
  std::vector<std::unique_ptr<Weights>> weights;
  std::vector<std::unique_ptr<MxfpWeights>> mxfp4;
  std::vector<cudaStream_t> streams;
  static std::vector<int> first(int g) {
    std::vector<int> d;
    for (int r = 0; r < g; ++r) d.push_back(r);
    return d;
  }
  explicit World(int ranks) : g(ranks), group(first(ranks)) {
    for (int r = 0; r < g; ++r) {
      EXPECT_EQ(cudaSetDevice(r), cudaSuccess);
      weights.push_back(std::make_unique<Weights>(kExperts, kHidden, kInter, 77));  // the same on every device
      mxfp4.push_back(std::make_unique<MxfpWeights>());
      cudaStream_t s = nullptr;
      EXPECT_EQ(cudaStreamCreate(&s), cudaSuccess);
      streams.push_back(s);
    }
    cudaSetDevice(0);
  }
  ~World() {
    for (int r = 0; r < g; ++r) {
      cudaSetDevice(r);
      cudaStreamDestroy(streams[size_t(r)]);
    }
    cudaSetDevice(0);
  }
};

// One rank's layer, prepared weights, workspace and device buffers.
struct Rank {
  std::unique_ptr<MoeEpLayer> layer;
  DeviceBuffer prepared, ws, x, y, ids, w, invalid;
  /// `local` gives the weights of the experts from a first index (default: the FP8 weights).
  Rank(const World& world, int r, const MoeEpConfig& cfg, const RankInputs& in,
       const std::function<moekit::MoeWeights(int)>& local = nullptr) {
    layer = std::make_unique<MoeEpLayer>(cfg, world.group.comm(r));
    cudaStream_t s = world.streams[size_t(r)];
    prepared = DeviceBuffer(layer->prepared_weight_bytes());
    const int first = layer->local_config().local_offset;
    layer->prepare_weights(local ? local(first) : world.weights[size_t(r)]->slice(first), prepared.get(),
                           prepared.bytes(), s);
    ws = DeviceBuffer(layer->workspace_size());
    const size_t xy = size_t(std::max<int64_t>(cfg.max_tokens_per_rank * kHidden * 2, 16));
    const size_t slots = size_t(cfg.max_tokens_per_rank * kTopK) * 4;
    x = DeviceBuffer(xy);
    y = DeviceBuffer(xy);
    ids = DeviceBuffer(slots);
    w = DeviceBuffer(slots);
    invalid = DeviceBuffer(4);
    load(in, s);
  }
  void load(const RankInputs& in, cudaStream_t s) {
    if (in.t == 0) return;
    EXPECT_EQ(cudaMemcpyAsync(x.get(), in.x.data(), in.x.size() * 2, cudaMemcpyHostToDevice, s), cudaSuccess);
    EXPECT_EQ(cudaMemcpyAsync(ids.get(), in.ids.data(), in.ids.size() * 4, cudaMemcpyHostToDevice, s), cudaSuccess);
    EXPECT_EQ(cudaMemcpyAsync(w.get(), in.w.data(), in.w.size() * 4, cudaMemcpyHostToDevice, s), cudaSuccess);
  }
  MoeEpForwardArgs args(int64_t t) const {
    MoeEpForwardArgs a;
    a.num_tokens = t;
    a.x = x.get();
    a.y = y.get();
    a.topk_ids = ids.as<int32_t>();
    a.topk_weights = w.as<float>();
    a.invalid_count = invalid.as<int32_t>();
    a.workspace = ws.get();
    a.workspace_bytes = ws.bytes();
    return a;
  }
  std::vector<uint16_t> forward(int64_t t, cudaStream_t s) {
    EXPECT_EQ(cudaMemsetAsync(y.get(), 0xFF, y.bytes(), s), cudaSuccess);  // poisoned: every row must be written
    EXPECT_EQ(cudaMemsetAsync(invalid.get(), 0x7F, 4, s), cudaSuccess);
    layer->forward(args(t), s);
    moekit::test::finish(s, "MoeEpLayer::forward");
    return y.download<uint16_t>(size_t(t * kHidden));
  }
};

// A single-GPU layer `c` (device 0, all experts: `weights`) on every rank's tokens, concatenated in
// rank order.
std::vector<uint16_t> single_gpu(const World& world, const MoeConfig& c, const moekit::MoeWeights& weights,
                                 const std::vector<RankInputs>& in) {
  cudaSetDevice(0);
  moe_layer_test::Inputs all;
  for (const RankInputs& v : in) {
    all.t += v.t;
    all.hx.insert(all.hx.end(), v.x.begin(), v.x.end());
    all.ids.insert(all.ids.end(), v.ids.begin(), v.ids.end());
    all.w.insert(all.w.end(), v.w.begin(), v.w.end());
  }
  all.x = DeviceBuffer::from(all.hx.empty() ? std::vector<uint16_t>(8) : all.hx);
  const Layer ref(c, *world.weights[0], weights, world.streams[0]);  // (its FP8 reference is not used)
  return moe_layer_test::run(ref, all, false, world.streams[0]).y;
}

std::vector<uint16_t> single_gpu(const World& world, bool det, const std::vector<RankInputs>& in) {
  return single_gpu(world, layer_config(det), world.weights[0]->slice(0), in);
}

double to_double(uint16_t b) { return double(moekit::bf16_to_float(b)); }

// The layer under test: its configuration and which weights (FP8, or MXFP4 with or without the biases).
struct Variant {
  MoeConfig layer;
  bool mxfp4 = false, biases = false;
};

void check_against_single_gpu(World& world, MoeEpMode mode, const Variant& v, Routing routing, uint64_t seed) {
  const int g = world.g;
  const bool det = v.layer.deterministic;
  SCOPED_TRACE(testing::Message() << "G = " << g << (mode == MoeEpMode::kLowLatency ? " low latency" : " high throughput")
                                  << (det ? " deterministic" : "") << (v.mxfp4 ? " mxfp4" : "")
                                  << (v.biases ? " biases" : "") << " routing " << int(routing));
  const std::vector<RankInputs> in = make_inputs(g, routing, seed);
  const std::vector<uint16_t> ref = single_gpu(
      world, v.layer, v.mxfp4 ? world.mxfp4[0]->slice(0, v.biases) : world.weights[0]->slice(0), in);
  MoeEpConfig cfg;
  cfg.layer = v.layer;
  cfg.mode = mode;
  cfg.max_tokens_per_rank = kCapacity;
  std::vector<std::vector<uint16_t>> y(static_cast<size_t>(g));
  std::vector<int32_t> invalid(static_cast<size_t>(g), -1);
  on_ranks(g, [&](int r) {
    const auto local = [&](int first) { return world.mxfp4[size_t(r)]->slice(first, v.biases); };
    Rank rank(world, r, cfg, in[size_t(r)], v.mxfp4 ? std::function<moekit::MoeWeights(int)>(local) : nullptr);
    EXPECT_EQ(rank.layer->local_config().local_count, kExperts / g);
    y[size_t(r)] = rank.forward(in[size_t(r)].t, world.streams[size_t(r)]);
    invalid[size_t(r)] = rank.invalid.download<int32_t>(1)[0];
  });
  std::vector<double> got, want;
  size_t at = 0, mismatches = 0;
  for (int r = 0; r < g; ++r) {
    EXPECT_EQ(invalid[size_t(r)], invalid_slots(in[size_t(r)].ids)) << "rank " << r;
    ASSERT_EQ(y[size_t(r)].size(), size_t(in[size_t(r)].t * kHidden));
    for (size_t i = 0; i < y[size_t(r)].size(); ++i, ++at) {
      mismatches += y[size_t(r)][i] != ref[at] ? 1 : 0;
      got.push_back(to_double(y[size_t(r)][i]));
      want.push_back(to_double(ref[at]));
    }
  }
  for (double v : got) ASSERT_TRUE(std::isfinite(v));
  if (det) {
    EXPECT_EQ(mismatches, 0u) << "of " << got.size() << " elements";
  } else if (!want.empty()) {
    EXPECT_LE(moekit::test::rel_l2(got, want), 5e-3);
  }
}

TEST(MoeEpLayer, MatchesTheSingleGpuLayer) {
  const int n = visible_gpus();
  if (n < 1) GTEST_SKIP() << "no GPU";
  for (int g : {1, 2, 4}) {
    if (g > n) break;
    World world(g);
    uint64_t seed = 1000 * uint64_t(g);
    for (MoeEpMode mode : {MoeEpMode::kLowLatency, MoeEpMode::kHighThroughput})
      for (bool det : {false, true})
        for (Routing routing : {Routing::kRandom, Routing::kAllOnRankZero, Routing::kSomeRanksEmpty})
          check_against_single_gpu(world, mode, Variant{layer_config(det)}, routing, ++seed);
  }
}

// MXFP4 experts (DeepSeek-V4's, gpt-oss's): the received rows are copied per slot for the
// expansion / decode GEMMs. Deterministic: bit-identical to the single-GPU MXFP4 layer; gpt-oss's
// layer (its activation, clamp and biases, which need deterministic = false): within 5e-3.
TEST(MoeEpLayer, Mxfp4ExpertsAndGptOssBiases) {
  const int n = visible_gpus();
  if (n < 1) GTEST_SKIP() << "no GPU";
  for (int g : {1, 2, 4}) {
    if (g > n) break;
    World world(g);
    uint64_t seed = 5000 * uint64_t(g);
    Variant mx{layer_config(true), true, false};
    mx.layer.weight_format = moekit::MoeWeightFormat::kMxfp4;
    Variant oss = mx;
    oss.layer.deterministic = false;
    oss.layer.activation = moekit::MoeActivation::kGptOss;
    oss.layer.limit = 7.0f;
    oss.biases = true;
    for (MoeEpMode mode : {MoeEpMode::kLowLatency, MoeEpMode::kHighThroughput})
      for (const Variant* v : {&mx, &oss})
        for (Routing routing : {Routing::kRandom, Routing::kSomeRanksEmpty})
          check_against_single_gpu(world, mode, *v, routing, ++seed);
  }
}

// Low latency in a CUDA graph: captured once, replayed with new ids and weights in the same
// buffers, it equals the eager forward bit for bit (deterministic mode).
TEST(MoeEpLayer, GraphReplayWithNewRoutingEqualsEager) {
  const int g = std::min(visible_gpus(), 4);
  if (g < 1) GTEST_SKIP() << "no GPU";
  World world(g);
  MoeEpConfig cfg;
  cfg.layer = layer_config(true);
  cfg.mode = MoeEpMode::kLowLatency;
  cfg.max_tokens_per_rank = kCapacity;
  const std::vector<RankInputs> first = make_inputs(g, Routing::kRandom, 5), second = make_inputs(g, Routing::kRandom, 6);
  std::vector<Rank*> ranks(static_cast<size_t>(g), nullptr);
  std::vector<std::vector<uint16_t>> replayed(static_cast<size_t>(g)), eager(static_cast<size_t>(g));
  std::vector<cudaGraphExec_t> exec(static_cast<size_t>(g), nullptr);
  on_ranks(g, [&](int r) {
    cudaStream_t s = world.streams[size_t(r)];
    ranks[size_t(r)] = new Rank(world, r, cfg, first[size_t(r)]);
    Rank& k = *ranks[size_t(r)];
    k.layer->prepare_kernels(k.ws.get(), k.ws.bytes(), s);
    cudaGraph_t graph = nullptr;
    ASSERT_EQ(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal), cudaSuccess);
    k.layer->forward(k.args(first[size_t(r)].t), s);
    ASSERT_EQ(cudaStreamEndCapture(s, &graph), cudaSuccess);
    ASSERT_EQ(cudaGraphInstantiate(&exec[size_t(r)], graph, 0), cudaSuccess);
    cudaGraphDestroy(graph);
  });
  // Replay with the second inputs' x, ids and weights in the captured buffers, at the first
  // inputs' token counts (the captured T).
  std::vector<RankInputs> second_at_first_t = second;
  for (int r = 0; r < g; ++r) {
    RankInputs& v = second_at_first_t[size_t(r)];
    const int64_t t = first[size_t(r)].t;
    v.t = t;
    v.x.resize(size_t(t * kHidden), moekit::bf16_from_float(0.25f));
    v.ids.resize(size_t(t * kTopK), 3);
    v.w.resize(size_t(t * kTopK), 0.5f);
  }
  on_ranks(g, [&](int r) {
    cudaStream_t s = world.streams[size_t(r)];
    Rank& k = *ranks[size_t(r)];
    const int64_t t = first[size_t(r)].t;
    k.load(second_at_first_t[size_t(r)], s);
    EXPECT_EQ(cudaMemsetAsync(k.y.get(), 0xFF, k.y.bytes(), s), cudaSuccess);
    EXPECT_EQ(cudaGraphLaunch(exec[size_t(r)], s), cudaSuccess);
    moekit::test::finish(s, "graph replay");
    replayed[size_t(r)] = k.y.download<uint16_t>(size_t(t * kHidden));
  });
  on_ranks(g, [&](int r) {
    eager[size_t(r)] = ranks[size_t(r)]->forward(first[size_t(r)].t, world.streams[size_t(r)]);
  });
  for (int r = 0; r < g; ++r) {
    EXPECT_EQ(replayed[size_t(r)], eager[size_t(r)]) << "rank " << r;
    cudaSetDevice(r);
    cudaGraphExecDestroy(exec[size_t(r)]);
    delete ranks[size_t(r)];
  }
  cudaSetDevice(0);
}

TEST(MoeEpLayer, RejectsBadConfigurationsAndArguments) {
  const int n = visible_gpus();
  if (n < 1) GTEST_SKIP() << "no GPU";
  const int g = std::min(n, 2);
  World world(g);
  on_ranks(g, [&](int r) {
    ncclComm_t comm = world.group.comm(r);
    MoeEpConfig ok;
    ok.layer = layer_config(false);
    ok.max_tokens_per_rank = 8;
    auto bad = [&](auto edit) {
      MoeEpConfig c = ok;
      edit(c);
      EXPECT_THROW((MoeEpLayer{c, comm}), moekit::Error);
    };
    bad([](MoeEpConfig& c) { c.max_tokens_per_rank = 0; });
    bad([](MoeEpConfig& c) { c.layer.local_count = 4; });
    bad([](MoeEpConfig& c) { c.layer.gemm1_input = moekit::MoeGemm1Input::kPermuted; });
    bad([](MoeEpConfig& c) { c.layer.inter = 96; });
    bad([](MoeEpConfig& c) { c.layer.top_k = 0; });
    if (g == 2) bad([](MoeEpConfig& c) { c.layer.num_experts = 33; });
    EXPECT_THROW((MoeEpLayer{ok, nullptr}), moekit::Error);
    MoeEpLayer layer(ok, comm);
    EXPECT_EQ(layer.rank(), r);
    EXPECT_EQ(layer.world_size(), g);
    MoeEpForwardArgs a;
    a.num_tokens = 9;  // > max_tokens_per_rank
    EXPECT_THROW(layer.forward(a, world.streams[size_t(r)]), moekit::Error);
    a.num_tokens = 1;  // no workspace, no x
    EXPECT_THROW(layer.forward(a, world.streams[size_t(r)]), moekit::Error);
    MoeEpConfig det = ok;
    det.layer.deterministic = true;
    MoeEpLayer det_layer(det, comm);
    moekit::MoeWeights biased;
    biased.b2 = &ok;  // any non-null pointer: rejected before use
    EXPECT_THROW(det_layer.prepare_weights(biased, nullptr, 0, world.streams[size_t(r)]), moekit::Error);
  });
}

}  // namespace

// `moekit bench ep`: the expert-parallel layer (moekit::MoeEpLayer) of one preset over G GPUs of
// this machine, one thread per rank in this process. Per G, mode and T (tokens per rank): the
// dispatch (quantize, route, pack and NCCL transfer), the local experts and the combine (NCCL
// transfer and the sum on the token's rank), each the median over the reps of the slowest rank
// (the combine: of the fastest, whose peers are all done when it starts, so no waiting counts);
// the bytes each moves to other ranks and their GB/s; and, in the same run, NCCL's own all-to-all
// of the same bytes per rank (equal blocks), the baseline of the transfers.
#include <algorithm>
#include <barrier>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <cuda_runtime.h>

#include "bench/bench.h"
#include "bench/bench_util.h"
#include "bench/moe_presets.h"
#include "common/check.h"
#include "ep/nccl_group.h"
#include "moe/moe_stage_trace.h"
#include "moekit/moe_ep_layer.h"
#include "moekit/numerics.h"
#include "runtime/device_buffer.h"
#include "runtime/random.h"

namespace moekit::bench {
namespace {

using detail::DeviceBuffer;

// Runs fn(rank) on one thread per rank with its device current; rethrows the first failure.
template <class F>
void on_ranks(int g, F&& fn) {
  std::vector<std::thread> threads;
  std::vector<std::string> errors(static_cast<size_t>(g));
  for (int r = 0; r < g; ++r)
    threads.emplace_back([&, r] {
      try {
        MOEKIT_CUDA_CHECK(cudaSetDevice(r));
        fn(r);
      } catch (const std::exception& e) {
        errors[size_t(r)] = e.what();
      }
    });
  for (auto& t : threads) t.join();
  for (int r = 0; r < g; ++r)
    MOEKIT_REQUIRE(errors[size_t(r)].empty(), ErrorCode::kInternal, "rank ", r, ": ", errors[size_t(r)]);
}

// The stage times of one forward (µs): dispatch, the local experts, combine, all.
struct StageTimes {
  double dispatch = 0, prep = 0, experts = 0, combine = 0, total = 0;  // prep: the dispatch before NCCL
};

StageTimes stage_times(const detail::MoeStageTrace& t) {
  StageTimes s;
  float prev = 0.0f;
  for (int i = 0; i < t.count; ++i) {
    float ms = 0.0f;
    cudaEventElapsedTime(&ms, t.start, t.events[i]);
    const double us = 1e3 * double(ms - prev);
    const std::string name = t.names[i];
    if (name == "ep_quantize_route") s.prep += us;
    if (name == "ep_quantize_route" || name == "ep_dispatch") s.dispatch += us;
    else if (name == "ep_combine") s.combine += us;
    else s.experts += us;
    prev = ms;
  }
  s.total = 1e3 * double(prev);
  return s;
}

// One rank: its local experts' weights, inputs and a stream.
struct RankState {
  cudaStream_t stream = nullptr;
  DeviceBuffer w1, sw1, w2, sw2, x, y, ids, w, a2a_send, a2a_recv;
  std::vector<int32_t> host_ids;
};

// Bytes per rank sent to other ranks: (dispatch, combine), the max over ranks.
std::pair<double, double> off_rank_bytes(const Preset& p, int g, int64_t t, bool ht,
                                         const std::vector<RankState>& ranks) {
  const double row = double(p.h) + 4.0 * double(ceil_div(p.h, kQuantBlock)) + 8.0 * p.k;
  if (!ht) return {double(g - 1) * double(t) * row, double(g - 1) * double(t) * double(p.h) * 2.0};
  double most = 0;
  const int per_rank = p.e / g;
  for (int r = 0; r < g; ++r) {
    int64_t sent = 0;
    for (int64_t i = 0; i < t; ++i) {
      uint32_t mask = 0;
      for (int j = 0; j < p.k; ++j) mask |= 1u << (ranks[size_t(r)].host_ids[size_t(i * p.k + j)] / per_rank);
      sent += __builtin_popcount(mask & ~(1u << r));
    }
    most = std::max(most, double(sent));
  }
  return {most * row, most * double(p.h) * 2.0};
}

// NCCL's all-to-all of `bytes` per rank (equal blocks to every rank, its own included), µs.
double nccl_all_to_all_us(const detail::NcclGroup& group, std::vector<RankState>& ranks, double off_rank_bytes,
                          int reps) {
  const int g = group.size();
  const size_t per_peer = std::max<size_t>(256, size_t(off_rank_bytes / std::max(1, g - 1)) / 256 * 256);
  std::vector<double> us(static_cast<size_t>(g));
  std::barrier sync(g);
  on_ranks(g, [&](int r) {
    RankState& s = ranks[size_t(r)];
    if (s.a2a_send.bytes() < per_peer * size_t(g)) {
      s.a2a_send = DeviceBuffer(per_peer * size_t(g));
      s.a2a_recv = DeviceBuffer(per_peer * size_t(g));
    }
    auto run = [&] {
      detail::check_nccl(ncclGroupStart(), "ncclGroupStart");
      for (int p = 0; p < g; ++p) {
        detail::check_nccl(ncclSend(s.a2a_send.as<char>() + size_t(p) * per_peer, per_peer, ncclUint8, p,
                                    group.comm(r), s.stream), "ncclSend");
        detail::check_nccl(ncclRecv(s.a2a_recv.as<char>() + size_t(p) * per_peer, per_peer, ncclUint8, p,
                                    group.comm(r), s.stream), "ncclRecv");
      }
      detail::check_nccl(ncclGroupEnd(), "ncclGroupEnd");
    };
    for (int i = 0; i < 3; ++i) run();
    cudaEvent_t e0, e1;
    MOEKIT_CUDA_CHECK(cudaEventCreate(&e0));
    MOEKIT_CUDA_CHECK(cudaEventCreate(&e1));
    std::vector<double> v;
    for (int i = 0; i < reps; ++i) {
      sync.arrive_and_wait();
      MOEKIT_CUDA_CHECK(cudaEventRecord(e0, s.stream));
      run();
      MOEKIT_CUDA_CHECK(cudaEventRecord(e1, s.stream));
      MOEKIT_CUDA_CHECK(cudaEventSynchronize(e1));
      float ms = 0;
      cudaEventElapsedTime(&ms, e0, e1);
      v.push_back(1e3 * ms);
    }
    us[size_t(r)] = median_of(v);
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
  });
  return *std::max_element(us.begin(), us.end());
}

// One rank's layer over `comm` for its first T tokens (y: `y`), weights prepared and the kernels
// loaded by three forwards (collective: every rank builds its layers in the same order).
struct RankLayer {
  std::unique_ptr<MoeEpLayer> layer;
  DeviceBuffer prepared, ws;
  MoeEpForwardArgs args;
};

RankLayer rank_layer(const Preset& p, ncclComm_t comm, RankState& s, void* y, int64_t t, MoeEpMode mode) {
  MoeEpConfig cfg;
  cfg.layer = preset_moe_config(p, 0, MoeGemm1Input::kAuto, nullptr);
  cfg.layer.routing.reset();
  cfg.mode = mode;
  cfg.max_tokens_per_rank = std::max<int64_t>(t, 1);
  RankLayer l;
  l.layer = std::make_unique<MoeEpLayer>(cfg, comm);
  l.prepared = DeviceBuffer(l.layer->prepared_weight_bytes());
  l.ws = DeviceBuffer(l.layer->workspace_size());
  l.layer->prepare_weights({s.w1.get(), s.sw1.as<float>(), s.w2.get(), s.sw2.as<float>()}, l.prepared.get(),
                           l.prepared.bytes(), s.stream);
  MoeEpForwardArgs& a = l.args;
  a.num_tokens = t;
  a.x = s.x.get();
  a.y = y;
  a.topk_ids = s.ids.as<int32_t>();
  a.topk_weights = s.w.as<float>();
  a.workspace = l.ws.get();
  a.workspace_bytes = l.ws.bytes();
  for (int i = 0; i < 3; ++i) l.layer->forward(a, s.stream);
  MOEKIT_CUDA_CHECK(cudaStreamSynchronize(s.stream));
  return l;
}

// Low latency runs as a decode engine runs it: one captured forward, replayed (nullptr for high
// throughput, which runs eagerly).
cudaGraphExec_t capture_low_latency(const RankLayer& l, cudaStream_t stream) {
  if (l.layer->config().mode != MoeEpMode::kLowLatency) return nullptr;
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  MOEKIT_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  l.layer->forward(l.args, stream);
  MOEKIT_CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
  MOEKIT_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
  cudaGraphDestroy(graph);
  return exec;
}

void run_forward(const RankLayer& l, cudaGraphExec_t exec, cudaStream_t stream) {
  if (exec)
    MOEKIT_CUDA_CHECK(cudaGraphLaunch(exec, stream));
  else
    l.layer->forward(l.args, stream);
}

StageTimes time_layer(const Preset& p, const detail::NcclGroup& group, std::vector<RankState>& ranks, int64_t t,
                      MoeEpMode mode, int reps) {
  const int g = group.size();
  std::vector<StageTimes> per_rank(static_cast<size_t>(g));
  std::barrier sync(g);
  on_ranks(g, [&](int r) {
    RankState& s = ranks[size_t(r)];
    const RankLayer l = rank_layer(p, group.comm(r), s, s.y.get(), t, mode);
    detail::MoeStageTrace trace;
    MOEKIT_CUDA_CHECK(cudaEventCreate(&trace.start));
    for (auto& e : trace.events) MOEKIT_CUDA_CHECK(cudaEventCreate(&e));
    detail::moe_stage_trace() = &trace;
    const cudaGraphExec_t exec = capture_low_latency(l, s.stream);
    std::vector<double> d, pr, x, c, all;
    for (int i = 0; i < reps; ++i) {
      sync.arrive_and_wait();  // the ranks start each rep together
      run_forward(l, exec, s.stream);
      MOEKIT_CUDA_CHECK(cudaStreamSynchronize(s.stream));
      const StageTimes st = stage_times(trace);
      d.push_back(st.dispatch);
      pr.push_back(st.prep);
      x.push_back(st.experts);
      c.push_back(st.combine);
      all.push_back(st.total);
    }
    if (exec) cudaGraphExecDestroy(exec);
    detail::moe_stage_trace() = nullptr;
    per_rank[size_t(r)] = {median_of(d), median_of(pr), median_of(x), median_of(c), median_of(all)};
    cudaEventDestroy(trace.start);
    for (auto& e : trace.events) cudaEventDestroy(e);
  });
  // Combine: the rank whose experts finish last waits for no peer there, so its combine is the
  // combine's own cost (the others' include waiting for it).
  StageTimes m;
  m.combine = per_rank[0].combine;
  for (const StageTimes& s : per_rank) {
    m.dispatch = std::max(m.dispatch, s.dispatch);
    m.prep = std::max(m.prep, s.prep);
    m.experts = std::max(m.experts, s.experts);
    m.combine = std::min(m.combine, s.combine);
    m.total = std::max(m.total, s.total);
  }
  return m;
}

// Two micro-batches of T tokens per rank, each its own layer over its own communicator (the way an
// engine overlaps one batch's communication with the other's experts): µs of the pair run one
// after the other on one stream, and on two streams at once; the median over the reps of the
// slowest rank.
std::pair<double, double> time_two_batches(const Preset& p, const detail::NcclGroup& first,
                                           const detail::NcclGroup& second, std::vector<RankState>& ranks,
                                           int64_t t, MoeEpMode mode, int reps) {
  const int g = first.size();
  std::vector<std::pair<double, double>> per_rank(static_cast<size_t>(g));
  std::barrier sync(g);
  on_ranks(g, [&](int r) {
    RankState& s = ranks[size_t(r)];
    DeviceBuffer y2(s.y.bytes());
    const RankLayer a = rank_layer(p, first.comm(r), s, s.y.get(), t, mode);
    const RankLayer b = rank_layer(p, second.comm(r), s, y2.get(), t, mode);
    cudaStream_t s2 = nullptr;
    cudaEvent_t e0, e1, b_done;
    MOEKIT_CUDA_CHECK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
    MOEKIT_CUDA_CHECK(cudaEventCreate(&e0));
    MOEKIT_CUDA_CHECK(cudaEventCreate(&e1));
    MOEKIT_CUDA_CHECK(cudaEventCreateWithFlags(&b_done, cudaEventDisableTiming));
    const cudaGraphExec_t ga = capture_low_latency(a, s.stream), gb = capture_low_latency(b, s2);
    std::vector<double> in_sequence, together;
    for (int i = 0; i < 2 * reps; ++i) {
      const bool overlapped = i % 2 == 1;
      sync.arrive_and_wait();
      MOEKIT_CUDA_CHECK(cudaEventRecord(e0, s.stream));
      if (overlapped) MOEKIT_CUDA_CHECK(cudaStreamWaitEvent(s2, e0, 0));
      run_forward(a, ga, s.stream);
      run_forward(b, gb, overlapped ? s2 : s.stream);
      if (overlapped) {
        MOEKIT_CUDA_CHECK(cudaEventRecord(b_done, s2));
        MOEKIT_CUDA_CHECK(cudaStreamWaitEvent(s.stream, b_done, 0));
      }
      MOEKIT_CUDA_CHECK(cudaEventRecord(e1, s.stream));
      MOEKIT_CUDA_CHECK(cudaEventSynchronize(e1));
      float ms = 0;
      cudaEventElapsedTime(&ms, e0, e1);
      (overlapped ? together : in_sequence).push_back(1e3 * ms);
    }
    per_rank[size_t(r)] = {median_of(in_sequence), median_of(together)};
    if (ga) cudaGraphExecDestroy(ga);
    if (gb) cudaGraphExecDestroy(gb);
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
    cudaEventDestroy(b_done);
    cudaStreamSynchronize(s2);
    cudaStreamDestroy(s2);
  });
  std::pair<double, double> m{0, 0};
  for (const auto& v : per_rank) m = {std::max(m.first, v.first), std::max(m.second, v.second)};
  return m;
}

void usage() {
  std::printf(
      "usage: moekit bench ep [--preset NAME] [--ranks G,...] [--tokens T,...] [--mode ll|ht|both] [--reps R]\n"
      "                       [--overlap]\n"
      "  the expert-parallel layer over G GPUs of this machine (default: 2 and 4, those visible), T tokens per\n"
      "  rank (default 1,8,64,128,512,4096), FP8 weights of deepseek-v3 (default); one thread per rank.\n"
      "  --overlap: also two micro-batches of T tokens (two layers, two communicators), one after the other\n"
      "  and on two streams at once: how much of the communication the other batch's experts hide.\n");
}

}  // namespace

int bench_ep_main(int argc, char** argv) {
  std::string preset = "deepseek-v3", modes = "both";
  std::vector<int64_t> ranks_list = {2, 4}, tokens = {1, 8, 64, 128, 512, 4096};
  int reps = 20;
  bool overlap = false;
  for (int i = 1; i < argc; ++i) {
    const std::string o = argv[i];
    const char* v = i + 1 < argc ? argv[i + 1] : nullptr;
    if (o == "--preset" && v) preset = argv[++i];
    else if (o == "--ranks" && v) ranks_list = int_list(argv[++i]);
    else if (o == "--tokens" && v) tokens = int_list(argv[++i]);
    else if (o == "--mode" && v) modes = argv[++i];
    else if (o == "--reps" && v) reps = std::max(1, std::atoi(argv[++i]));
    else if (o == "--overlap") overlap = true;
    else {
      usage();
      return o == "-h" || o == "--help" ? 0 : 2;
    }
  }
  const Preset* p = nullptr;
  for (const Preset& q : kPresets)
    if (preset == q.name) p = &q;
  MOEKIT_REQUIRE(p && !p->gpt_oss, ErrorCode::kInvalidArgument, "bench ep: unknown or unsupported preset '", preset,
                 "' (FP8 presets without biases)");
  int visible = 0;
  MOEKIT_CUDA_CHECK(cudaGetDeviceCount(&visible));
  std::vector<MoeEpMode> mode_list;
  if (modes != "ht") mode_list.push_back(MoeEpMode::kLowLatency);
  if (modes != "ll") mode_list.push_back(MoeEpMode::kHighThroughput);
  std::printf("# moekit bench ep: %s (E = %d, k = %d, H = %lld, I = %lld), FP8 weights, %d visible GPUs, reps %d\n",
              p->name, p->e, p->k, (long long)p->h, (long long)p->inter, visible, reps);
  std::printf("# dispatch = quantize + route + pack (prep) + NCCL transfer; combine = NCCL transfer + sum on the token's rank;\n"
              "# ll: replays of a captured forward; ht: eager (a host sync for the counts); the ranks start each rep together;\n"
              "# times: median over the reps of the slowest rank (combine: of the fastest, the one no peer keeps waiting);\n"
              "# MB: bytes each rank sends to the other ranks;\n"
              "# NCCL a2a: ncclSend/ncclRecv all-to-all of the same bytes per rank (equal blocks), this run.\n"
              "# Within one forward the stages run in sequence; --overlap times two micro-batches on two streams.\n");
  std::printf("%2s %-4s %6s | %9s %7s %7s %8s %9s %6s | %9s %7s %8s %9s %6s | %9s %9s\n", "G", "mode", "T/rank",
              "disp us", "prep", "MB", "GB/s", "a2a us", "ratio", "comb us", "MB", "GB/s", "a2a us", "ratio", "experts",
              "layer us");
  for (int64_t g64 : ranks_list) {
    const int g = int(g64);
    if (g < 1 || g > visible || p->e % g != 0) {
      std::printf("# G = %d skipped (%d GPUs visible, E %% G must be 0)\n", g, visible);
      continue;
    }
    std::vector<int> devices;
    for (int r = 0; r < g; ++r) devices.push_back(r);
    detail::NcclGroup group(devices);
    std::unique_ptr<detail::NcclGroup> second;  // --overlap: the other micro-batch's communicators
    if (overlap) second = std::make_unique<detail::NcclGroup>(devices);
    struct Row {
      int64_t t;
      MoeEpMode mode;
      double comm, layer;  // one forward: dispatch + combine, all
    };
    std::vector<Row> rows;
    std::vector<RankState> ranks(static_cast<size_t>(g));
    const int64_t local = p->e / g, t_max = *std::max_element(tokens.begin(), tokens.end());
    on_ranks(g, [&](int r) {  // the local experts' weights, checkpoint-like; x ~ N(0, 1)
      RankState& s = ranks[size_t(r)];
      MOEKIT_CUDA_CHECK(cudaStreamCreate(&s.stream));
      s.w1 = DeviceBuffer(size_t(local * 2 * p->inter * p->h));
      s.sw1 = DeviceBuffer(size_t(local * ceil_div(2 * p->inter, 128) * ceil_div(p->h, 128)) * 4);
      s.w2 = DeviceBuffer(size_t(local * p->h * p->inter));
      s.sw2 = DeviceBuffer(size_t(local * ceil_div(p->h, 128) * ceil_div(p->inter, 128)) * 4);
      detail::fill_checkpoint_weights(s.w1.get(), s.sw1.as<float>(), local, 2 * p->inter, p->h, 0.02f, 11 + r, s.stream);
      detail::fill_checkpoint_weights(s.w2.get(), s.sw2.as<float>(), local, p->h, p->inter, 0.02f, 97 + r, s.stream);
      s.x = DeviceBuffer(size_t(t_max * p->h * 2));
      s.y = DeviceBuffer(size_t(t_max * p->h * 2));
      detail::fill_random_bf16_normal(s.x.get(), t_max * p->h, 1.0f, 5 + r, s.stream);
      std::mt19937_64 rng(1234 + r);
      s.host_ids.resize(size_t(t_max * p->k));
      std::vector<float> w(s.host_ids.size());
      for (int64_t i = 0; i < t_max; ++i) {  // k distinct experts per token, uniform
        std::vector<int32_t> pick;
        while (int(pick.size()) < p->k) {
          const int32_t e = int32_t(rng() % uint64_t(p->e));
          if (std::find(pick.begin(), pick.end(), e) == pick.end()) pick.push_back(e);
        }
        std::copy(pick.begin(), pick.end(), s.host_ids.begin() + i * p->k);
      }
      for (auto& v : w) v = float(rng() % 1000 + 1) / 1000.0f;
      s.ids = DeviceBuffer::from(s.host_ids);
      s.w = DeviceBuffer::from(w);
      MOEKIT_CUDA_CHECK(cudaStreamSynchronize(s.stream));
    });
    for (int64_t t : tokens)
      for (MoeEpMode mode : mode_list) {
        const bool ht = mode == MoeEpMode::kHighThroughput;
        const auto bytes = off_rank_bytes(*p, g, t, ht, ranks);
        const StageTimes ours = time_layer(*p, group, ranks, t, mode, reps);
        const double nd = g > 1 ? nccl_all_to_all_us(group, ranks, bytes.first, reps) : 0.0;
        const double nc = g > 1 ? nccl_all_to_all_us(group, ranks, bytes.second, reps) : 0.0;
        auto gbs = [](double b, double us) { return us > 0 ? b / us * 1e-3 : 0.0; };
        auto ratio = [&](double b, double us, double base) { return base > 0 ? gbs(b, us) / gbs(b, base) : 0.0; };
        std::printf("%2d %-4s %6lld | %9.1f %7.1f %7.2f %8.1f %9.1f %6.2f | %9.1f %7.2f %8.1f %9.1f %6.2f | %9.1f %9.1f\n",
                    g, ht ? "ht" : "ll", (long long)t, ours.dispatch, ours.prep, bytes.first * 1e-6,
                    gbs(bytes.first, ours.dispatch),
                    nd, ratio(bytes.first, ours.dispatch, nd), ours.combine, bytes.second * 1e-6,
                    gbs(bytes.second, ours.combine), nc, ratio(bytes.second, ours.combine, nc), ours.experts,
                    ours.total);
        std::fflush(stdout);
        rows.push_back({t, mode, ours.dispatch + ours.combine, ours.total});
      }
    if (overlap && g > 1) {
      std::printf("# two micro-batches of T/rank each: in sequence (one stream) vs on two streams; hidden = saved /\n"
                  "# the two batches' communication (2 x (disp + comb) above)\n");
      std::printf("%2s %-4s %6s | %9s %9s | %12s %12s %9s %7s\n", "G", "mode", "T/rank", "1 fwd us", "comm us",
                  "2 in seq us", "2 at once us", "saved us", "hidden");
      for (const Row& row : rows) {
        const auto [seq, both] = time_two_batches(*p, group, *second, ranks, row.t, row.mode, reps);
        std::printf("%2d %-4s %6lld | %9.1f %9.1f | %12.1f %12.1f %9.1f %6.0f%%\n", g,
                    row.mode == MoeEpMode::kHighThroughput ? "ht" : "ll", (long long)row.t, row.layer, row.comm, seq,
                    both, seq - both, 100.0 * (seq - both) / (2.0 * row.comm));
        std::fflush(stdout);
      }
    }
    on_ranks(g, [&](int r) { cudaStreamDestroy(ranks[size_t(r)].stream); });
  }
  return 0;
}

}  // namespace moekit::bench

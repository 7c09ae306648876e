// `moekit bench moe`: the public MoE layer (moekit::MoeLayer, include/moekit/moe_layer.h) on
// synthetic weights per SPEC §5 preset and token count — the project's main benchmark.
//
//   moekit bench moe [--preset NAME|all] [--tokens 1,8,64,...] [--reps R] [--format text|csv|json]
//                    [--no-check] [--no-baseline] [--gemm1-promote-k 0|32|64|128] [--cooldown-ms MS]
//                    [--energy] [--data checkpoint|uniform|normal] [--weights fp8|mxfp4] [--explain]
//
// Inputs (bench_util.h, BenchData): --data checkpoint (the default) makes the weights as a model
// checkpoint's, bf16 N(0, 0.02²) quantized by SPEC §1's 128x128 quantizer (codes and scales), and
// x ~ N(0, 1); --data uniform: every E4M3 weight code equally likely, x uniform in [-1, 1); --data
// normal: the codes of amax-scaled normal weights, x ~ N(0, 1). Router logits
// uniform in [-2, 2) (fp32); sigmoid_grouped correction bias uniform in [-0.01, 0.01). (Wider
// logits saturate the sigmoid and let the bias decide: with logits in [-4, 4] and bias in [-0.1,
// 0.1] only ~90 of DeepSeek-V3's 256 experts were hit at T = 64, where uniform routing hits ~220.
// With these ranges the CPU routing reference hits 59 / 227 / 256 experts at T = 8 / 64 / 256 for
// deepseek-v3 (uniform: 57 / 221 / 256), and the softmax presets match uniform use; kimi-k2, 384
// experts in one group, stays a little below: 252 / 353 at T = 64 / 256 vs 283 / 382.) The layer
// routes from the logits (routing included in every time). Weight scales: the quantizer's with
// checkpoint, else random in [0.5e-4, 1e-4).
//
// Columns
//   experts_hit  distinct experts the routing picked (the decode floor streams each once)
//   rel_l2       ‖y − ref‖ / ‖ref‖ vs the float64 SPEC §3 reference (src/moe/moe_reference.h) over
//                the checked rows: every row for T ≤ 64, 16 random rows (first and last included)
//                otherwise (bench_moe_check.h)
//   row_med, row_max  median / maximum over the checked rows of ‖y_r − ref_r‖ / ‖ref_r‖ (a NaN row
//                shows nan). A T with rel_l2 > 6e-3 or row_med > 4.5e-3 (T < 16: rel_l2 > 1.5e-2; the
//                bounds on checkpoint data, docs/accuracy.md) is noted and makes the exit status 1.
//   us           whole layer from logits, median of R runs, CUDA events (bench_util)
//   route_us     routing alone; moe_us  the layer from the routed ids (everything after routing).
// After the table, "stages" lines break the layer down: one event after every stage of the forward
// (src/moe/moe_stage_trace.h), all forwards queued behind a spin kernel, median per stage over the
// runs. Each stage's time includes the launch gap before its first kernel.
//   TFLOPS       2 · T · k · 3 · H · I / us;  weight_GB/s  touched experts' FP8 weights + scales / us
//   floor_us     touched experts' weight bytes / measured device copy bandwidth (issue 4's decode
//                floor); x_floor = us / floor_us
//   base_us      in-process unfused baseline: route + moe_sort + permute/quantize (ours), then per
//                expert cuBLASLt block-scaled FP8 GEMM1, swiglu_quantize, per expert cuBLASLt GEMM2,
//                moe_combine; the per-expert row counts are downloaded before timing (the baseline
//                may sync; the layer never does), the whole sequence is replayed as one CUDA graph.
//                cuBLASLt needs each GEMM's A scales as one dense [kb, m] block, so every expert
//                GEMM is preceded by one small 2D copy of its rows' scales (counted in base_us).
//                vs_base = base_us / us; base_diff = ‖y − y_base‖ / ‖y_base‖ over all rows.
// --weights mxfp4: the layer runs MXFP4 experts (MoeWeightFormat::kMxfp4): bf16 N(0, 0.02²) weights
// quantized by the OCP MX rule (checkpoint data only). floor_us and weight_GB/s then count their
// bytes (codes + UE8M0 scales: 4.25 bits a weight); the reference check and the cuBLASLt baseline
// use their FP8 form (moekit::mxfp4_to_fp8, computed on the device), and fp8_us times the FP8 layer
// on that form in the same run: the in-process baseline (vs_fp8 = fp8_us / us).
// gpt-oss-120b and gpt-oss-20b run gpt-oss's layer (SPEC §6: its activation, clamp 7, biases b1 and
// b2 uniform in [-0.5, 0.5), in the reference too); the unfused baseline does not (base_us n/a).
// --energy adds an "energy" line per T: after a cool-down, at least 1.5 s of back-to-back forwards
// (at least R), joules per layer from NVML's energy counter and the average power over them — at
// prefill sizes the layer runs at the GPU's power limit, where its time follows its energy
// (docs/performance.md §Energy and the power limit).
// Each timed pass longer than 20 ms (the layer's, the stages', the baseline's) starts after
// --cooldown-ms (default 1500) of idle time, so that none runs hotter for following another
// (docs/performance.md §Timing method). In csv / json mode the table alone goes to stdout, the notes to stderr.
// --explain prints, instead of measuring, the forward's plan per preset and T (every choice the
// layer makes: planning/moe_plan.h); it needs no GPU (without one: the H100's limits).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <functional>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "baseline/cublaslt.h"
#include "bench/bench.h"
#include "bench/bench_moe_baseline.h"
#include "bench/bench_moe_check.h"
#include "bench/bench_util.h"
#include "bench/moe_presets.h"
#include "common/check.h"
#include "moe/moe_gemm.h"
#include "moe/moe_stage_trace.h"
#include "moekit/moekit.h"
#include "runtime/device.h"
#include "runtime/device_buffer.h"
#include "runtime/random.h"

namespace moekit::bench {
namespace {

using detail::DeviceBuffer;

/// Median µs of every stage of `forward` (see the header comment), as "name us, name us, ...".
std::string stage_breakdown(const std::function<void()>& forward, cudaStream_t stream, int reps) {
  reps = std::clamp(reps, 1, 50);
  using detail::MoeStageTrace;
  std::vector<MoeStageTrace> traces(static_cast<size_t>(reps));
  for (auto& t : traces) {
    MOEKIT_CUDA_CHECK(cudaEventCreate(&t.start));
    for (auto& e : t.events) MOEKIT_CUDA_CHECK(cudaEventCreate(&e));
  }
  forward();  // warm-up
  MOEKIT_CUDA_CHECK(cudaStreamSynchronize(stream));
  detail::gpu_spin(stream, std::min(20000.0, 2000.0 + 200.0 * reps));
  for (auto& t : traces) {
    detail::moe_stage_trace() = &t;
    forward();
  }
  detail::moe_stage_trace() = nullptr;
  MOEKIT_CUDA_CHECK(cudaStreamSynchronize(stream));
  std::string out;
  const int stages = traces[0].count;
  for (int i = 0; i < stages; ++i) {
    std::vector<double> us;
    for (const auto& t : traces) {
      float ms = 0.f;
      MOEKIT_CUDA_CHECK(cudaEventElapsedTime(&ms, i ? t.events[i - 1] : t.start, t.events[i]));
      us.push_back(1000.0 * ms);
    }
    out += fmt("%s%s %.1f", i ? ", " : "", traces[0].names[i], median_of(us));
  }
  for (auto& t : traces) {
    cudaEventDestroy(t.start);
    for (auto& e : t.events) cudaEventDestroy(e);
  }
  return out;
}

void usage(FILE* out) {
  std::fprintf(out,
               "usage: moekit bench moe [--preset NAME|all] [--tokens T1,T2,...] [--reps R]\n"
               "                        [--format text|csv|json] [--no-check] [--no-baseline]\n"
               "                        [--gemm1-promote-k 0|32|64|128] [--gemm1-input auto|permuted|gathered]\n"
               "                        [--cooldown-ms MS] [--energy] [--data checkpoint|uniform|normal] [--explain]\n"
               "                        [--loop N] [--weights fp8|mxfp4]\n"
               "  presets: deepseek-v3 (default), kimi-k2, qwen3-235b-a22b, qwen3-30b-a3b, mixtral-8x7b,\n"
               "           gpt-oss-120b, deepseek-v2-lite, gpt-oss-20b, deepseek-v4-flash, all\n"
               "  tokens default: 1,8,64,256,1024,4096,16384\n"
               "  --no-check     skip the float64 reference check (rel_l2, row_med, row_max)\n"
               "  --no-baseline  skip the unfused cuBLASLt per-expert baseline (base_us)\n"
               "  --gemm1-promote-k  MoeConfig::gemm1_promote_k: 0 automatic (default), 32, 64 or 128\n"
               "                 (K per tensor-core accumulation chain of GEMM1: accuracy vs prefill speed)\n"
               "  --gemm1-input  MoeConfig::gemm1_input: auto (default), permuted (copy per slot) or gathered\n"
               "                 (GEMM1 reads rows by token)\n"
               "  --cooldown-ms  idle time before each timed pass longer than 20 ms (default 1500, 0: none)\n"
               "  --loop N       also N back-to-back forwards per T: host enqueue us/call, stream us/call eager\n"
               "                 and as CUDA graph replays (compare: bench/python_overhead.py)\n"
               "  --energy       joules per layer and average watts over >= 1.5 s of back-to-back forwards (NVML)\n"
               "  --data D       checkpoint (default: weights made as a checkpoint's, bf16 N(0, 0.02^2) quantized\n"
               "                 128x128, codes and scales; x ~ N(0, 1)), uniform (x uniform in [-1, 1), every\n"
               "                 E4M3 weight code equally likely, scales random in [0.5e-4, 1e-4)) or normal\n"
               "                 (x ~ N(0, 1), weight codes of amax-scaled normal data as DeepGEMM's tests make\n"
               "                 them, random scales)\n"
               "  --weights W    fp8 (default) or mxfp4: MXFP4 experts (checkpoint data), timed against the FP8\n"
               "                 layer on their FP8 form (fp8_us, vs_fp8)\n"
               "  --explain      print the forward's plan per preset and T (layout, routing + sort fusion, gather\n"
               "                 or permute, GEMM1 / GEMM2 configurations, scheduling, workspace) instead of\n"
               "                 measuring; needs no GPU (uses the H100's limits then, and says so)\n");
}

}  // namespace

int bench_moe_main(int argc, char** argv) {
  std::string preset = "deepseek-v3", format = "text";
  std::vector<int64_t> tokens = {1, 8, 64, 256, 1024, 4096, 16384};
  int reps = 10;
  int cooldown_ms = 1500;
  bool check = true, with_baseline = true, energy = false, explain = false;
  int loop_calls = 0;
  BenchData data = BenchData::kCheckpoint;
  int promote_k = MoeConfig{}.gemm1_promote_k;
  MoeGemm1Input gemm1_input = MoeConfig{}.gemm1_input;
  bool mxfp4 = false;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--preset" && i + 1 < argc) preset = argv[++i];
    else if (arg == "--reps" && i + 1 < argc) reps = std::max(1, std::atoi(argv[++i]));
    else if (arg == "--format" && i + 1 < argc) format = argv[++i];
    else if (arg == "--csv") format = "csv";
    else if (arg == "--json") format = "json";
    else if (arg == "--no-check") check = false;
    else if (arg == "--cooldown-ms" && i + 1 < argc) cooldown_ms = std::clamp(std::atoi(argv[++i]), 0, 60000);
    else if (arg == "--no-baseline") with_baseline = false;
    else if (arg == "--energy") energy = true;
    else if (arg == "--explain") explain = true;
    else if (arg == "--loop" && i + 1 < argc) loop_calls = std::max(0, std::atoi(argv[++i]));
    else if (arg == "--data" && i + 1 < argc) {
      if (!parse_bench_data(argv[++i], &data, /*allow_checkpoint=*/true)) {
        std::fprintf(stderr, "moekit bench moe: --data must be checkpoint, uniform or normal (got '%s')\n", argv[i]);
        return 2;
      }
    }
    else if (arg == "--gemm1-promote-k" && i + 1 < argc) promote_k = std::atoi(argv[++i]);
    else if (arg == "--weights" && i + 1 < argc) {
      const std::string v = argv[++i];
      if (v != "fp8" && v != "mxfp4") {
        std::fprintf(stderr, "moekit bench moe: --weights must be fp8 or mxfp4 (got '%s')\n", v.c_str());
        return 2;
      }
      mxfp4 = v == "mxfp4";
    }
    else if (arg == "--gemm1-input" && i + 1 < argc) {
      const std::string v = argv[++i];
      if (v == "auto") gemm1_input = MoeGemm1Input::kAuto;
      else if (v == "permuted") gemm1_input = MoeGemm1Input::kPermuted;
      else if (v == "gathered") gemm1_input = MoeGemm1Input::kGathered;
      else {
        std::fprintf(stderr, "moekit bench moe: --gemm1-input must be auto, permuted or gathered (got '%s')\n",
                     v.c_str());
        return 2;
      }
    }
    else if (arg == "--tokens" && i + 1 < argc) {
      tokens.clear();
      std::stringstream ss(argv[++i]);
      std::string item;
      while (std::getline(ss, item, ',')) {
        char* end = nullptr;
        const long long v = std::strtoll(item.c_str(), &end, 10);
        if (item.empty() || *end != '\0' || v < 0) {
          std::fprintf(stderr, "moekit bench moe: bad token count '%s'\n", item.c_str());
          return 2;
        }
        tokens.push_back(v);
      }
    } else if (arg == "-h" || arg == "--help") {
      usage(stdout);
      return 0;
    } else {
      std::fprintf(stderr, "moekit bench moe: unknown option '%s'\n", arg.c_str());
      usage(stderr);
      return 2;
    }
  }
  if (format != "text" && format != "csv" && format != "json") {
    std::fprintf(stderr, "moekit bench moe: unknown format '%s'\n", format.c_str());
    return 2;
  }
  std::vector<const Preset*> presets;
  for (const Preset& p : kPresets)
    if (preset == "all" || preset == p.name) presets.push_back(&p);
  if (presets.empty()) {
    std::fprintf(stderr, "moekit bench moe: unknown preset '%s'\n", preset.c_str());
    usage(stderr);
    return 2;
  }
  if (mxfp4 && data != BenchData::kCheckpoint) {
    std::fprintf(stderr, "moekit bench moe: --weights mxfp4 makes checkpoint-like weights only (no --data %s)\n",
                 bench_data_name(data));
    return 2;
  }
  if (explain) return explain_moe_plans(presets, tokens, promote_k, gemm1_input, mxfp4);
  if (!detail::gpu_available()) {
    std::fprintf(stderr, "moekit bench moe: no CUDA device visible\n");
    return 1;
  }
  FILE* info = format == "text" ? stdout : stderr;
  const detail::DeviceInfo& dev = detail::current_device();
  cudaDeviceProp prop{};
  MOEKIT_CUDA_CHECK(cudaGetDeviceProperties(&prop, dev.device));
  const double copy_bw = measured_copy_bandwidth();
  std::fprintf(info,
               "# moekit MoeLayer (routing from fp32 logits included); %s, %d SMs; copy bandwidth %.0f GB/s "
               "(read + write), streaming reads %.0f GB/s\n",
               prop.name, dev.num_sms, copy_bw / 1e9, measured_read_bandwidth() / 1e9);
  std::fprintf(info, "# data: %s (--data): %s\n", bench_data_name(data),
               data == BenchData::kCheckpoint ? "weights bf16 N(0, 0.02^2) quantized 128x128, x ~ N(0, 1)"
               : data == BenchData::kNormal   ? "E4M3 codes of amax-scaled normal weights, random scales, x ~ N(0, 1)"
                                              : "every E4M3 weight code equally likely, random scales, x in [-1, 1)");
  std::fprintf(info, "# us = whole layer; route_us = routing alone; moe_us = layer from the routed ids\n");
  if (check)
    std::fprintf(info, "# check vs float64 SPEC reference on all rows for T<=64, %d sampled rows above: rel_l2 over "
                       "them, row_med / row_max of each row's rel L2; noted above rel_l2 %.1e or row_med %.1e "
                       "(T < 16: rel_l2 %.1e)\n",
                 kMoeSampleRows, kMoeMaxRelL2, kMoeMaxRowMedian, kMoeMaxRelL2FewRows);
  else
    std::fprintf(info, "# check vs float64 SPEC reference skipped (--no-check)\n");
  if (with_baseline)
    std::fprintf(info, "# base = unfused: route + sort + permute/quant + cuBLASLt %s per expert GEMM1 + SwiGLU/quant + "
                       "per expert GEMM2 + combine, one CUDA graph\n",
                 baseline::CublasLt::version().c_str());
  std::fflush(info);

  const BenchStream bench_stream;
  const cudaStream_t stream = bench_stream.get();
  std::unique_ptr<baseline::CublasLt> lt;
  if (with_baseline) lt = std::make_unique<baseline::CublasLt>();
  std::vector<std::string> stage_lines, energy_lines, loop_lines;
  Table table({"preset", "T", "experts_hit", "rel_l2", "row_med", "row_max", "us", "route_us", "moe_us", "TFLOPS",
               "weight_GB/s", "floor_us", "x_floor", "fp8_us", "vs_fp8", "base_us", "vs_base", "base_diff", "note"});
  int failures = 0;
  for (const Preset* p : presets) {
    const int64_t h = p->h, I = p->inter, E = p->e;
    const int64_t kbh = ceil_div(h, 128), kbi = ceil_div(I, 128);
    DeviceBuffer w1(size_t(E * 2 * I * h)), w2(size_t(E * h * I));
    DeviceBuffer sw1(size_t(E * ceil_div(2 * I, 128) * kbh * 4)), sw2(size_t(E * kbh * kbi * 4));
    DeviceBuffer bias(size_t(E * 4));
    DeviceBuffer c1, s1, c2, s2;  // --weights mxfp4: codes and scales (w1 ... sw2 hold their FP8 form)
    if (mxfp4) {
      c1 = DeviceBuffer(size_t(E * 2 * I * h / 2));
      s1 = DeviceBuffer(size_t(E * 2 * I * h / 32));
      c2 = DeviceBuffer(size_t(E * h * I / 2));
      s2 = DeviceBuffer(size_t(E * h * I / 32));
      detail::fill_checkpoint_mxfp4(c1.as<uint8_t>(), s1.as<uint8_t>(), E, 2 * I, h, kCheckpointWeightSigma, 11, stream);
      detail::fill_checkpoint_mxfp4(c2.as<uint8_t>(), s2.as<uint8_t>(), E, h, I, kCheckpointWeightSigma, 12, stream);
      detail::mxfp4_to_fp8_device(c1.get(), s1.as<uint8_t>(), int(E), 2 * I, h, w1.get(), sw1.as<float>(), stream);
      detail::mxfp4_to_fp8_device(c2.get(), s2.as<uint8_t>(), int(E), h, I, w2.get(), sw2.as<float>(), stream);
    } else if (data == BenchData::kCheckpoint) {  // codes and the quantizer's scales: W1 [E, 2I, H], W2 [E, H, I]
      detail::fill_checkpoint_weights(w1.get(), sw1.as<float>(), E, 2 * I, h, kCheckpointWeightSigma, 11, stream);
      detail::fill_checkpoint_weights(w2.get(), sw2.as<float>(), E, h, I, kCheckpointWeightSigma, 12, stream);
    } else {
      fill_fp8_weights(w1.get(), E * 2 * I * h, data, 11, stream);
      fill_fp8_weights(w2.get(), E * h * I, data, 12, stream);
      detail::fill_random_f32(sw1.as<float>(), E * ceil_div(2 * I, 128) * kbh, 0.5e-4f, 1e-4f, 13, stream);
      detail::fill_random_f32(sw2.as<float>(), E * kbh * kbi, 0.5e-4f, 1e-4f, 14, stream);
    }
    detail::fill_random_f32(bias.as<float>(), E, -0.01f, 0.01f, 15, stream);
    DeviceBuffer b1, b2;  // gpt-oss presets: its layer's biases, uniform in [-0.5, 0.5)
    if (p->gpt_oss) {
      b1 = DeviceBuffer(size_t(E * 2 * I * 4));
      b2 = DeviceBuffer(size_t(E * h * 4));
      detail::fill_random_f32(b1.as<float>(), E * 2 * I, -0.5f, 0.5f, 16, stream);
      detail::fill_random_f32(b2.as<float>(), E * h, -0.5f, 0.5f, 17, stream);
    }
    const MoeConfig cfg = preset_moe_config(*p, promote_k, gemm1_input, bias.as<float>());
    const RoutingConfig& rc = *cfg.routing;
    MoeConfig cfg_mx = cfg;
    cfg_mx.weight_format = MoeWeightFormat::kMxfp4;
    MoeLayer layer(mxfp4 ? cfg_mx : cfg), fp8_layer(cfg);
    DeviceBuffer prepared(layer.prepared_weight_bytes()), fp8_prepared;
    MoeWeights mw;
    mw.w1 = c1.get();
    mw.w1_scales = c1.get() ? s1.as<uint8_t>() : nullptr;
    mw.w2 = c2.get();
    mw.w2_scales = c2.get() ? s2.as<uint8_t>() : nullptr;
    MoeWeights fw{w1.get(), sw1.as<float>(), w2.get(), sw2.as<float>()};
    fw.b1 = mw.b1 = b1.get();
    fw.b2 = mw.b2 = b2.get();
    layer.prepare_weights(mxfp4 ? mw : fw, prepared.get(), prepared.bytes(), stream);
    if (mxfp4) {
      fp8_prepared = DeviceBuffer(fp8_layer.prepared_weight_bytes());
      fp8_layer.prepare_weights(fw, fp8_prepared.get(), fp8_prepared.bytes(), stream);
    }
    // Bytes per expert of what the layer streams: FP8 codes + FP32 block scales, or MXFP4 codes + UE8M0 scales.
    const double weights = double(2 * I * h + h * I);
    const double expert_bytes =
        mxfp4 ? weights / 2 + weights / 32 : weights + 4.0 * double(ceil_div(2 * I, 128) * kbh + kbh * kbi);
    for (int64_t t : tokens) {
      std::fprintf(stderr, "[%s T=%lld]\n", p->name, (long long)t);
      std::vector<std::string> row = {p->name, std::to_string(t)};
      std::vector<std::string> notes;
      std::string hit_s = "-", rel_s = "-", rmed_s = "-", rmax_s = "-", us_s = "-", route_s = "-", moe_s = "-",
                  tf_s = "-", gbs_s = "-", floor_s = "-", xf_s = "-", base_s = "-", vsb_s = "-", bdiff_s = "-",
                  fp8_s = "-", vsf_s = "-";
      try {
        const int64_t tk = std::max<int64_t>(t * p->k, 1);
        DeviceBuffer x(size_t(std::max<int64_t>(t, 1) * h * 2)), logits(size_t(std::max<int64_t>(t, 1) * E * 4));
        DeviceBuffer ids(size_t(tk * 4)), wts(size_t(tk * 4)), y(size_t(std::max<int64_t>(t, 1) * h * 2)), invalid(4);
        fill_bf16_activations(x.get(), t * h, data, 21 + uint64_t(t), stream);
        detail::fill_random_f32(logits.as<float>(), t * E, -2.0f, 2.0f, 31 + uint64_t(t), stream);
        const size_t ws_bytes = layer.workspace_size(t);
        DeviceBuffer ws(std::max<size_t>(ws_bytes, 256));
        MoeForwardArgs a;
        a.num_tokens = t;
        a.x = x.get();
        a.y = y.get();
        a.logits = logits.get();
        a.invalid_count = invalid.as<int32_t>();
        a.workspace = ws.get();
        a.workspace_bytes = ws.bytes();
        MoeForwardArgs a_ids = a;  // the layer after routing: from the routed ids
        a_ids.logits = nullptr;
        a_ids.topk_ids = ids.as<int32_t>();
        a_ids.topk_weights = wts.as<float>();
        layer.prepare_kernels(t, ws.get(), ws.bytes(), stream);
        // One forward that also exports its routing (for experts_hit and the reference).
        MoeForwardArgs a_out = a;
        a_out.routed_ids = ids.as<int32_t>();
        a_out.routed_weights = wts.as<float>();
        MOEKIT_CUDA_CHECK(cudaMemsetAsync(y.get(), 0xFF, y.bytes(), stream));
        layer.forward(a_out, stream);
        MOEKIT_CUDA_CHECK(cudaStreamSynchronize(stream));
        const double pass_us = time_median_us([&](int) { layer.forward(a, stream); }, stream, 0, 1) * (reps + 2);
        cool_down(pass_us, cooldown_ms);
        const double us = time_median_us([&](int) { layer.forward(a, stream); }, stream, 2, reps);
        const double route_us = time_median_us(
            [&](int) { route(rc, logits.get(), LogitsType::kFloat32, t, ids.as<int32_t>(), wts.as<float>(), stream); },
            stream, 2, reps);
        cool_down(pass_us, cooldown_ms);
        const double moe_us = time_median_us([&](int) { layer.forward(a_ids, stream); }, stream, 2, reps);
        if (mxfp4) {  // the in-process baseline: the FP8 layer on the same shapes and values
          fp8_layer.prepare_kernels(t, ws.get(), ws.bytes(), stream);
          cool_down(pass_us, cooldown_ms);
          const double fp8_us = time_median_us([&](int) { fp8_layer.forward(a, stream); }, stream, 2, reps);
          fp8_s = fmt("%.1f", fp8_us);
          vsf_s = fmt("%.2f", fp8_us / us);
        }
        cool_down(pass_us, cooldown_ms);
        stage_lines.push_back(fmt("# stages %s T=%lld (us): ", p->name, (long long)t) +
                              stage_breakdown([&] { layer.forward(a, stream); }, stream, reps));
        if (loop_calls > 0) {
          const CallLoopTiming l = time_call_loop([&] { layer.forward(a, stream); }, stream, loop_calls);
          loop_lines.push_back(fmt("# loop %s T=%lld, %d calls: host %.1f us/call, back-to-back %.1f us/call, "
                                   "graph replay %.1f us/call",
                                   p->name, (long long)t, loop_calls, l.host_us, l.loop_us, l.graph_us));
          cool_down(pass_us, cooldown_ms);
        }
        if (energy) energy_lines.push_back(fmt("# energy %s T=%lld: ", p->name, (long long)t) +
                                           energy_per_call([&](int) { layer.forward(a, stream); }, stream, us, reps,
                                                           pass_us, cooldown_ms, "layer"));
        MOEKIT_CUDA_CHECK(cudaMemsetAsync(y.get(), 0xFF, y.bytes(), stream));
        layer.forward(a_out, stream);  // the output checked
        MOEKIT_CUDA_CHECK(cudaStreamSynchronize(stream));
        const auto hid = ids.download<int32_t>(size_t(t * p->k));
        const int32_t inv = invalid.download<int32_t>(1)[0];
        if (inv != 0) notes.push_back("invalid ids: " + std::to_string(inv));
        const std::set<int32_t> hit(hid.begin(), hid.end());
        const double flops = 2.0 * double(t) * p->k * double(3 * I * h);
        const double floor_us = double(hit.size()) * expert_bytes / copy_bw * 1e6;
        hit_s = std::to_string(hit.size());
        us_s = fmt("%.1f", us);
        route_s = fmt("%.1f", route_us);
        moe_s = fmt("%.1f", moe_us);
        if (t > 0) {
          tf_s = fmt("%.1f", flops / (us * 1e-6) / 1e12);
          gbs_s = fmt("%.0f", double(hit.size()) * expert_bytes / (us * 1e-6) / 1e9);
          floor_s = fmt("%.1f", floor_us);
          xf_s = fmt("%.2f", us / floor_us);
        }
        if (check && t > 0) {
          const std::vector<int64_t> rows = check_rows(t, 77 + uint64_t(t));
          const MoeCheck c = moe_reference_check(*p, x, y, ids, wts, rows, w1, sw1, w2, sw2, p->gpt_oss ? &b1 : nullptr,
                                                 p->gpt_oss ? &b2 : nullptr);
          const bool many = int64_t(rows.size()) >= kMoeManyRows;
          const double max_rel = many ? kMoeMaxRelL2 : kMoeMaxRelL2FewRows;
          rel_s = fmt("%.2e", c.rel_l2);  // NaN / inf print as nan / inf
          rmed_s = fmt("%.2e", c.row_med);
          rmax_s = fmt("%.2e", c.row_max);
          // row_max is nan / inf iff a checked row is (NaN rows sort last); then so is rel_l2.
          const bool finite = std::isfinite(c.rel_l2) && std::isfinite(c.row_max);
          const bool rel_bad = finite && c.rel_l2 > max_rel, med_bad = finite && many && c.row_med > kMoeMaxRowMedian;
          if (!finite) notes.push_back("nan/inf in checked rows");
          if (rel_bad) notes.push_back(fmt("rel_l2 above %.1e", max_rel));
          if (med_bad) notes.push_back(fmt("row_med above %.1e", kMoeMaxRowMedian));
          if (!finite || rel_bad || med_bad) ++failures;
        }
        if (lt && t > 0 && p->gpt_oss) {
          base_s = "n/a";  // the unfused baseline runs SPEC §3's SwiGLU layer without biases
        } else if (lt && t > 0) {
          try {
            Baseline b(*p, t, rc, *lt, x, logits, w1, sw1, w2, sw2, stream);
            const double base_us = time_baseline(b, stream, reps, notes, pass_us, cooldown_ms);
            base_s = fmt("%.1f", base_us);
            vsb_s = fmt("%.2f", base_us / us);
            const auto ours = y.download<uint16_t>(size_t(t * h));
            const auto theirs = b.y().download<uint16_t>(size_t(t * h));
            bdiff_s = fmt("%.2e", rel_l2_bf16(ours, theirs));
          } catch (const std::exception& e) {
            base_s = "err";
            notes.push_back(std::string("baseline: ") + one_line(e.what()));
            cudaGetLastError();
          }
        }
      } catch (const std::exception& e) {
        notes.push_back(one_line(e.what()));
        cudaGetLastError();
        ++failures;
      }
      std::string note;
      for (const auto& s : notes) note += (note.empty() ? "" : "; ") + s;
      row.insert(row.end(), {hit_s, rel_s, rmed_s, rmax_s, us_s, route_s, moe_s, tf_s, gbs_s, floor_s, xf_s, fp8_s,
                             vsf_s, base_s, vsb_s, bdiff_s, note.empty() ? "-" : note});
      table.add_row(std::move(row));
      if (format == "text") {  // progress: print the table so far
        std::fprintf(stderr, "  %s us, rel_l2 %s, row_med %s, row_max %s, base %s us\n", us_s.c_str(), rel_s.c_str(),
                     rmed_s.c_str(), rmax_s.c_str(), base_s.c_str());
      }
    }
  }
  std::printf("%s", format == "csv" ? table.csv().c_str() : format == "json" ? table.json().c_str() : table.text().c_str());
  std::fflush(stdout);
  for (const auto& line : stage_lines) std::fprintf(info, "%s\n", line.c_str());
  for (const auto& line : energy_lines) std::fprintf(info, "%s\n", line.c_str());
  for (const auto& line : loop_lines) std::fprintf(info, "%s\n", line.c_str());
  return failures ? 1 : 0;
}

}  // namespace moekit::bench

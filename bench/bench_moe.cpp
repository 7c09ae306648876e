// `moekit bench moe`: the MoE layer on synthetic weights per SPEC §5 preset and token count.
// For now it times the unfused layer (routing + moe_sort + permute/quantize + grouped GEMM1 +
// SwiGLU/requant + grouped GEMM2 + combine), the in-process baseline the fused layer will be
// compared with. Correctness is covered by tests/gpu/test_moe_unfused.cpp.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "bench/bench.h"
#include "bench/bench_util.h"
#include "moe/moe_unfused.h"
#include "moekit/moekit.h"
#include "runtime/device.h"
#include "runtime/device_buffer.h"
#include "runtime/random.h"

namespace moekit::bench {
namespace {

struct Preset {
  const char* name;
  int e, k;
  int64_t h, inter;
  RoutingMethod method;
  bool renormalize;
  int groups, topk_groups;
  float scale, limit;
};

// SPEC §5.
const Preset kPresets[] = {
    {"deepseek-v3", 256, 8, 7168, 2048, RoutingMethod::kSigmoidGrouped, true, 8, 4, 2.5f, 0.0f},
    {"kimi-k2", 384, 8, 7168, 2048, RoutingMethod::kSigmoidGrouped, true, 1, 1, 2.827f, 0.0f},
    {"qwen3-235b-a22b", 128, 8, 4096, 1536, RoutingMethod::kSoftmaxTopk, true, 1, 1, 1.0f, 0.0f},
    {"qwen3-30b-a3b", 128, 8, 2048, 768, RoutingMethod::kSoftmaxTopk, true, 1, 1, 1.0f, 0.0f},
    {"mixtral-8x7b", 8, 2, 4096, 14336, RoutingMethod::kSoftmaxTopk, true, 1, 1, 1.0f, 0.0f},
    {"gpt-oss-120b", 128, 4, 2880, 2880, RoutingMethod::kTopkSoftmax, false, 1, 1, 1.0f, 7.0f},
    {"deepseek-v2-lite", 64, 6, 2048, 1408, RoutingMethod::kSoftmaxTopk, false, 1, 1, 1.0f, 0.0f},
};

// vLLM's Triton fused_moe GEMM-only times for deepseek-v3 on this H100 (from issue 4), µs.
double vllm_deepseek_us(int64_t t) {
  switch (t) {
    case 1: return 209;
    case 8: return 1006;
    case 64: return 3381;
    case 256: return 4035;
    case 1024: return 4366;
    case 4096: return 6571;
    case 16384: return 20817;
    default: return 0;
  }
}

void usage(FILE* out) {
  std::fprintf(out,
               "usage: moekit bench moe [--preset NAME|all] [--tokens T1,T2,...] [--reps R] [--csv|--json]\n"
               "  presets: deepseek-v3 (default), kimi-k2, qwen3-235b-a22b, qwen3-30b-a3b, mixtral-8x7b,\n"
               "           gpt-oss-120b, deepseek-v2-lite, all\n"
               "  tokens default: 1,8,64,256,1024,4096,16384\n");
}

}  // namespace

int bench_moe_main(int argc, char** argv) {
  std::string preset = "deepseek-v3", format = "text";
  std::vector<int64_t> tokens = {1, 8, 64, 256, 1024, 4096, 16384};
  int reps = 10;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--preset" && i + 1 < argc) preset = argv[++i];
    else if (arg == "--reps" && i + 1 < argc) reps = std::max(1, std::atoi(argv[++i]));
    else if (arg == "--csv") format = "csv";
    else if (arg == "--json") format = "json";
    else if (arg == "--tokens" && i + 1 < argc) {
      tokens.clear();
      std::stringstream ss(argv[++i]);
      std::string item;
      while (std::getline(ss, item, ',')) tokens.push_back(std::atoll(item.c_str()));
    } else if (arg == "-h" || arg == "--help") {
      usage(stdout);
      return 0;
    } else {
      std::fprintf(stderr, "moekit bench moe: unknown option '%s'\n", arg.c_str());
      usage(stderr);
      return 2;
    }
  }
  if (!detail::gpu_available()) {
    std::fprintf(stderr, "moekit bench moe: no CUDA device visible\n");
    return 1;
  }
  std::vector<const Preset*> presets;
  for (const Preset& p : kPresets)
    if (preset == "all" || preset == p.name) presets.push_back(&p);
  if (presets.empty()) {
    std::fprintf(stderr, "moekit bench moe: unknown preset '%s'\n", preset.c_str());
    return 2;
  }
  FILE* info = format == "text" ? stdout : stderr;
  const double copy_bw = measured_copy_bandwidth();
  std::fprintf(info, "# unfused layer (routing + sort + permute/quant + GEMM1 + SwiGLU/requant + GEMM2 + combine); "
                     "copy bandwidth %.0f GB/s\n", copy_bw / 1e9);
  const BenchStream bench_stream;
  const cudaStream_t stream = bench_stream.get();
  Table table({"preset", "T", "experts_hit", "us", "TFLOPS", "weight_GB/s", "floor_us", "x_floor", "vllm_gemm_us",
               "vs_vllm"});
  for (const Preset* p : presets) {
    const int64_t h = p->h, I = p->inter, E = p->e;
    const int64_t kbh = ceil_div(h, 128), kbi = ceil_div(I, 128);
    detail::DeviceBuffer w1(size_t(E * 2 * I * h)), w2(size_t(E * h * I));
    detail::DeviceBuffer sw1(size_t(E * ceil_div(2 * I, 128) * kbh * 4)), sw2(size_t(E * kbh * kbi * 4));
    detail::DeviceBuffer bias(size_t(E * 4));
    detail::fill_random_e4m3(w1.get(), E * 2 * I * h, 11, stream);
    detail::fill_random_e4m3(w2.get(), E * h * I, 12, stream);
    detail::fill_random_f32(sw1.as<float>(), E * ceil_div(2 * I, 128) * kbh, 0.5e-4f, 1e-4f, 13, stream);
    detail::fill_random_f32(sw2.as<float>(), E * kbh * kbi, 0.5e-4f, 1e-4f, 14, stream);
    detail::fill_random_f32(bias.as<float>(), E, -0.1f, 0.1f, 15, stream);
    RoutingConfig rc;
    rc.method = p->method;
    rc.num_experts = p->e;
    rc.top_k = p->k;
    rc.renormalize = p->renormalize;
    if (p->method == RoutingMethod::kSigmoidGrouped) {
      rc.num_groups = p->groups;
      rc.topk_groups = p->topk_groups;
      rc.routed_scaling_factor = p->scale;
      rc.correction_bias = bias.as<float>();
    }
    const double expert_bytes = double(2 * I * h + h * I) + 4.0 * double(ceil_div(2 * I, 128) * kbh + kbh * kbi);
    for (int64_t t : tokens) {
      detail::DeviceBuffer x(size_t(std::max<int64_t>(t, 1) * h * 2)), logits(size_t(std::max<int64_t>(t, 1) * E * 4));
      detail::DeviceBuffer ids(size_t(std::max<int64_t>(t * p->k, 1) * 4)), wts(size_t(std::max<int64_t>(t * p->k, 1) * 4));
      detail::DeviceBuffer y(size_t(std::max<int64_t>(t, 1) * h * 2)), invalid(4);
      detail::fill_random_bf16(x.get(), t * h, 1.0f, 21 + uint64_t(t), stream);
      detail::fill_random_f32(logits.as<float>(), t * E, -4.0f, 4.0f, 31 + uint64_t(t), stream);
      const size_t ws_bytes = detail::moe_unfused_workspace_size(t, p->k, h, I, p->e);
      detail::DeviceBuffer ws(ws_bytes);
      detail::MoeUnfusedArgs a;
      a.num_tokens = t; a.top_k = p->k; a.hidden = h; a.inter = I; a.num_experts = p->e;
      a.local_offset = 0; a.local_count = p->e; a.limit = p->limit;
      a.x = x.get(); a.topk_ids = ids.as<int32_t>(); a.topk_weights = wts.as<float>();
      a.w1 = w1.get(); a.sw1 = sw1.as<float>(); a.w2 = w2.get(); a.sw2 = sw2.as<float>();
      a.y = y.get(); a.invalid_count = invalid.as<int32_t>();
      auto layer = [&](int) {
        route(rc, logits.get(), LogitsType::kFloat32, t, ids.as<int32_t>(), wts.as<float>(), stream);
        detail::moe_forward_unfused(a, ws.get(), ws_bytes, stream);
      };
      layer(0);  // compile kernels, warm up
      MOEKIT_CUDA_CHECK(cudaStreamSynchronize(stream));
      const double us = time_median_us(layer, stream, 2, reps);
      // Experts touched by this routing (the decode floor streams their weights once).
      const auto hid = ids.download<int32_t>(size_t(t * p->k));
      const std::set<int32_t> hit(hid.begin(), hid.end());
      const double flops = 2.0 * double(t) * p->k * double(2 * I * h + h * I);
      // Decode floor as issue 4 defines it: touched experts' weight bytes / measured copy bandwidth.
      const double floor_us = double(hit.size()) * expert_bytes / copy_bw * 1e6;
      const double vllm = std::strcmp(p->name, "deepseek-v3") == 0 ? vllm_deepseek_us(t) : 0.0;
      table.add_row({p->name, std::to_string(t), std::to_string(hit.size()), fmt("%.1f", us),
                     fmt("%.1f", flops / (us * 1e-6) / 1e12),
                     fmt("%.0f", double(hit.size()) * expert_bytes / (us * 1e-6) / 1e9), fmt("%.1f", floor_us),
                     fmt("%.2f", us / floor_us), vllm > 0 ? fmt("%.0f", vllm) : "-",
                     vllm > 0 ? fmt("%.2f", vllm / us) : "-"});
    }
  }
  std::printf("%s", format == "csv" ? table.csv().c_str() : format == "json" ? table.json().c_str() : table.text().c_str());
  return 0;
}

}  // namespace moekit::bench

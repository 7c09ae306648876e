#include "tools/commands.h"

#include <cstdio>
#include <cstring>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "bench/moe_presets.h"
#include "gemm/gemm_launch.h"
#include "gemm/heuristic.h"
#include "moe/moe_gemm.h"
#include "moekit/moekit.h"
#include "planning/moe_plan.h"
#include "runtime/device.h"
#include "runtime/jit.h"
#include "runtime/knobs.h"

namespace moekit::tools {
namespace {

struct Shape {
  long long m, n, k;
};

std::vector<Shape> parse_shapes(const char* s) {
  std::vector<Shape> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) {
    Shape sh{};
    if (std::sscanf(item.c_str(), "%lld:%lld:%lld", &sh.m, &sh.n, &sh.k) != 3)
      throw Error(ErrorCode::kInvalidArgument, "bad shape '" + item + "', expected M:N:K");
    out.push_back(sh);
  }
  return out;
}

std::vector<Shape> default_shapes() {
  std::vector<Shape> v;
  for (long long m : {64LL, 128LL, 4096LL})
    for (auto nk : {std::pair{2112LL, 7168LL}, {24576LL, 1536LL}, {32768LL, 512LL}, {7168LL, 16384LL},
                    {4096LL, 7168LL}, {7168LL, 2048LL}})
      v.push_back({m, nk.first, nk.second});
  return v;
}

std::vector<long long> parse_list(const char* s) {
  std::vector<long long> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) {
    char* end = nullptr;
    const long long v = std::strtoll(item.c_str(), &end, 10);
    if (item.empty() || *end != '\0' || v < 0)
      throw Error(ErrorCode::kInvalidArgument, "bad token count '" + item + "'");
    out.push_back(v);
  }
  return out;
}

}  // namespace

int jit_warm_main(int argc, char** argv) {
  std::vector<Shape> shapes = default_shapes();
  std::string forced;  // --config: this configuration instead of the heuristic's (as bench gemm --config)
  std::string moe;     // --moe PRESET|all: the MoE layer's GEMMs instead of dense shapes
  std::vector<long long> tokens = {1, 8, 64, 256, 1024, 4096, 16384};
  bool mxfp4 = false;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--shapes") && i + 1 < argc) shapes = parse_shapes(argv[++i]);
    else if (!std::strcmp(argv[i], "--config") && i + 1 < argc) forced = argv[++i];
    else if (!std::strcmp(argv[i], "--moe") && i + 1 < argc) moe = argv[++i];
    else if (!std::strcmp(argv[i], "--tokens") && i + 1 < argc) tokens = parse_list(argv[++i]);
    else if (!std::strcmp(argv[i], "--weights") && i + 1 < argc && (!std::strcmp(argv[i + 1], "fp8") ||
                                                                     !std::strcmp(argv[i + 1], "mxfp4")))
      mxfp4 = !std::strcmp(argv[++i], "mxfp4");
    else {
      std::fprintf(stderr, "moekit jit warm: unknown option '%s'\n", argv[i]);
      return 2;
    }
  }
  // Without a GPU, assume an H100/H200 (132 SMs, 227 KiB shared memory): the same configs.
  detail::GemmDeviceLimits lim;
  if (detail::gpu_available()) lim = detail::device_limits();
  std::set<std::pair<std::string, std::string>> sources;  // (entry, source)
  if (!moe.empty()) {
    // The fused GEMMs each preset's forward launches for each T (its plan; routing from logits).
    bool found = false;
    for (const bench::Preset& p : bench::kPresets) {
      if (moe != "all" && moe != p.name) continue;
      found = true;
      MoeConfig c = bench::preset_moe_config(p, 0, MoeGemm1Input::kAuto, nullptr);
      if (mxfp4) c.weight_format = MoeWeightFormat::kMxfp4;
      const MoeConfig resolved = MoeLayer(c).config();
      for (long long t : tokens)
        for (auto& s : detail::moe_gemm_kernel_sources(
                 detail::plan_moe_forward(resolved, t, true, lim, 0, detail::knobs())))
          sources.insert(std::move(s));
    }
    if (!found) {
      std::fprintf(stderr, "moekit jit warm: unknown preset '%s'\n", moe.c_str());
      return 2;
    }
    shapes.clear();
  }
  for (const Shape& s : shapes) {
    const GemmConfig c = forced.empty() ? detail::select_gemm_config(s.m, s.n, s.k, lim, 1, true)
                                        : GemmConfig::parse(forced);
    std::string entry;
    std::string src = detail::fp8_gemm_kernel_source(c, detail::Fp8GemmKernel::kDense, &entry);
    sources.insert({entry, src});
  }
  std::vector<std::pair<std::string, std::string>> work(sources.begin(), sources.end());
  std::printf("compiling %zu kernels into %s\n", work.size(), jit::cache_dir().c_str());
  const unsigned threads = std::max(1u, std::thread::hardware_concurrency());
  std::vector<std::thread> pool;
  std::vector<std::string> errors(work.size());
  for (unsigned t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      for (size_t i = t; i < work.size(); i += threads) {
        try {
          jit::compile_cubin(work[i].second, work[i].first);
        } catch (const std::exception& e) {
          errors[i] = e.what();
        }
      }
    });
  }
  for (auto& th : pool) th.join();
  int failed = 0;
  for (size_t i = 0; i < work.size(); ++i) {
    std::printf("  %-40s %s\n", work[i].first.c_str(), errors[i].empty() ? "ok" : errors[i].c_str());
    failed += !errors[i].empty();
  }
  return failed ? 1 : 0;
}

int info_main(int, char**) {
  std::printf("moekit 0.1.0\nkernel cache: %s\n", jit::cache_dir().c_str());
  if (!detail::gpu_available()) {
    std::printf("device: none visible\n");
    return 0;
  }
  const auto& d = detail::current_device();
  std::printf("device %d: sm_%d%d, %d SMs, %zu KiB opt-in shared memory, %zu MiB L2\n", d.device, d.cc_major,
              d.cc_minor, d.num_sms, d.smem_optin / 1024, d.l2_bytes >> 20);
  return 0;
}

}  // namespace moekit::tools

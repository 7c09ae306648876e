// moekit command-line tool.
//
//   moekit bench gemm  [--csv|--json] [...]   dense FP8 block-scaled GEMM vs cuBLASLt
//   moekit bench quant [--csv|--json]         activation / weight quantization kernels
//   moekit bench grouped [--csv|--json]       grouped (contiguous / masked) FP8 GEMMs vs cuBLASLt per expert
//   moekit bench ep [--ranks G,..] [...]      the expert-parallel layer over G GPUs vs NCCL's all-to-all (NCCL builds)
//   moekit jit warm [--shapes M:N:K,..] [--config CFG]  compile (NVRTC) the kernels those shapes use into the disk cache
//   moekit jit warm --moe PRESET|all [--tokens T,..] [--weights fp8|mxfp4]  the MoE layer's GEMM kernels per T
//   moekit info                               device, cache directory, version
#include <cstdio>
#include <cstring>
#include <exception>
#include <string>

#include "bench/bench.h"
#include "moekit/moekit.h"
#include "tools/commands.h"

namespace {

void usage() {
  std::printf(
      "usage: moekit <command> [options]\n"
      "  bench gemm  [--csv|--json] [--shapes M:N:K,...] [--reps R]\n"
      "                              FP8 block-scaled GEMM: ours vs cuBLASLt FP8 block-scaled and BF16\n"
      "  bench quant [--csv|--json]  quantization kernels vs the measured copy bandwidth\n"
      "  bench moe   [--preset NAME|all] [--tokens T,...] [--reps R] [--csv|--json] [--explain]\n"
      "                              the MoE layer (moekit::MoeLayer) on synthetic weights, per token count\n"
      "                              (--explain: the forward's plan per token count, no GPU needed)\n"
      "  bench grouped [--csv|--json] [--reps R] [--no-baseline]\n"
      "                              grouped FP8 GEMMs (contiguous, masked): ours vs cuBLASLt once per expert\n"
      "  bench ep    [--preset NAME] [--ranks G,...] [--tokens T,...] [--mode ll|ht|both] [--reps R]\n"
      "                              the expert-parallel layer (moekit::MoeEpLayer) over G GPUs, NCCL's all-to-all\n"
      "                              of the same bytes as baseline (builds with NCCL only)\n"
      "  bench attention [--tokens T,...] [--heads H,...] [--topk K,...] [--prefill T] [--kv mixed|bf16]\n"
      "                              DeepSeek-V4 sparse MQA attention (dim 512, top-k + 128-entry window, sink) vs\n"
      "                              an unfused gather + cuBLASLt baseline\n"
      "  jit warm    [--shapes M:N:K,...] [--config CFG]\n"
      "                              compile the kernels those shapes use (or CFG) into the disk cache (no GPU needed)\n"
      "  jit warm    --moe PRESET|all [--tokens T1,T2,...] [--weights fp8|mxfp4]\n"
      "                              compile the fused GEMMs the MoE layer's forward launches for each T\n"
      "  info                        device, kernel cache directory, version\n");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || !std::strcmp(argv[1], "-h") || !std::strcmp(argv[1], "--help")) {
    usage();
    return argc < 2 ? 2 : 0;
  }
  try {
    std::string cmd = argv[1];
    if (cmd == "bench" && argc >= 3) {
      std::string what = argv[2];
      if (what == "gemm") return moekit::bench::bench_gemm_main(argc - 2, argv + 2);
      if (what == "quant") return moekit::bench::bench_quant_main(argc - 2, argv + 2);
      if (what == "grouped") return moekit::bench::bench_grouped_main(argc - 2, argv + 2);
      if (what == "moe") return moekit::bench::bench_moe_main(argc - 2, argv + 2);
      if (what == "attention") return moekit::bench::bench_attention_main(argc - 2, argv + 2);
#ifdef MOEKIT_HAS_NCCL
      if (what == "ep") return moekit::bench::bench_ep_main(argc - 2, argv + 2);
#else
      if (what == "ep") {
        std::fprintf(stderr, "moekit: bench ep needs a build with NCCL (cmake/nccl.cmake: pip install nvidia-nccl-cu13)\n");
        return 2;
      }
#endif
      std::fprintf(stderr, "moekit: unknown benchmark '%s'\n", what.c_str());
      usage();
      return 2;
    }
    if (cmd == "jit" && argc >= 3 && std::string(argv[2]) == "warm") return moekit::tools::jit_warm_main(argc - 2, argv + 2);
    if (cmd == "info") return moekit::tools::info_main(argc - 1, argv + 1);
    std::fprintf(stderr, "moekit: unknown command '%s'\n", cmd.c_str());
    usage();
    return 2;
  } catch (const moekit::Error& e) {
    std::fprintf(stderr, "moekit: error: %s\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "moekit: error: %s\n", e.what());
    return 1;
  }
}

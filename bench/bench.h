// Entry points of the `moekit bench ...` subcommands. argv[0] is the subcommand name.
#pragma once

namespace moekit::bench {
int bench_gemm_main(int argc, char** argv);   ///< moekit bench gemm [--csv|--json] [--shapes ...]
int bench_quant_main(int argc, char** argv);  ///< moekit bench quant [--csv|--json]
int bench_grouped_main(int argc, char** argv);  ///< moekit bench grouped [--csv|--json] [--reps R]
int bench_moe_main(int argc, char** argv);      ///< moekit bench moe [--preset P] [--tokens ...]
int bench_ep_main(int argc, char** argv);
int bench_attention_main(int argc, char** argv);  ///< moekit bench attention [--tokens ...] [--heads ...] [--topk ...]       ///< moekit bench ep [--ranks G,..] [--tokens ...] (built with NCCL)
}  // namespace moekit::bench

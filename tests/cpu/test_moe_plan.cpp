// The MoE forward's plan (src/planning/moe_plan.h), pinned for the SPEC §5 presets and a sweep of
// T on the H100's limits (GemmDeviceLimits defaults).
//
// The expected rows were recorded from the decision code as it was BEFORE the plan existed
// (commit 67179bb: moe_forward.cpp, moe_gemm.cpp, route_sort.cu, grouped_gemm.cpp's contiguous
// configuration, with no tuning or A/B environment variable set) by a throwaway program linked
// against that library; the plan must reproduce every one of them, so the refactor changed nothing
// that runs. Workspace bytes are with a moe_sort scratch of 0 bytes (its size needs a GPU).
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

#include "moe/moe_stage_trace.h"
#include "kernels/sm90/fp8_gemm_layout.cuh"
#include "moekit/error.h"
#include "moekit/moe_layer.h"
#include "planning/moe_plan.h"
#include "runtime/knobs.h"

namespace {

using moekit::MoeConfig;
using moekit::MoeGemm1Input;
using moekit::RoutingMethod;
using moekit::detail::GemmDeviceLimits;
using moekit::detail::Knobs;
using moekit::detail::MoePlan;
using moekit::detail::plan_moe_forward;

struct Case {
  const char* name;
  int e, k;
  int64_t h, inter;
  RoutingMethod method;
  int groups, topk_groups;
  bool from_logits, deterministic;
  int local_offset, local_count, promote_k;
  MoeGemm1Input input;
};

constexpr RoutingMethod kSig = RoutingMethod::kSigmoidGrouped, kSoft = RoutingMethod::kSoftmaxTopk,
                        kTopkSoft = RoutingMethod::kTopkSoftmax;
constexpr MoeGemm1Input kAuto = MoeGemm1Input::kAuto;

// SPEC §5 presets (routing from logits, as bench moe runs them), then variants of deepseek-v3.
const Case kCases[] = {
    {"deepseek-v3", 256, 8, 7168, 2048, kSig, 8, 4, true, false, 0, 256, 0, kAuto},
    {"kimi-k2", 384, 8, 7168, 2048, kSig, 1, 1, true, false, 0, 384, 0, kAuto},
    {"qwen3-235b-a22b", 128, 8, 4096, 1536, kSoft, 1, 1, true, false, 0, 128, 0, kAuto},
    {"qwen3-30b-a3b", 128, 8, 2048, 768, kSoft, 1, 1, true, false, 0, 128, 0, kAuto},
    {"mixtral-8x7b", 8, 2, 4096, 14336, kSoft, 1, 1, true, false, 0, 8, 0, kAuto},
    {"gpt-oss-120b", 128, 4, 2880, 2880, kTopkSoft, 1, 1, true, false, 0, 128, 0, kAuto},
    {"deepseek-v2-lite", 64, 6, 2048, 1408, kSoft, 1, 1, true, false, 0, 64, 0, kAuto},
    {"gpt-oss-20b", 32, 4, 2880, 2880, kTopkSoft, 1, 1, true, false, 0, 32, 0, kAuto},
    {"deepseek-v4-flash", 256, 6, 4096, 2048, kSig, 1, 1, true, false, 0, 256, 0, kAuto},
    {"deepseek-v3/ids", 256, 8, 7168, 2048, kSig, 8, 4, false, false, 0, 256, 0, kAuto},
    {"deepseek-v3/deterministic", 256, 8, 7168, 2048, kSig, 8, 4, true, true, 0, 256, 0, kAuto},
    {"deepseek-v3/ep32", 256, 8, 7168, 2048, kSig, 8, 4, true, false, 64, 32, 0, kAuto},
    {"deepseek-v3/permuted", 256, 8, 7168, 2048, kSig, 8, 4, true, false, 0, 256, 0, MoeGemm1Input::kPermuted},
    {"deepseek-v3/gathered", 256, 8, 7168, 2048, kSig, 8, 4, false, false, 0, 256, 0, MoeGemm1Input::kGathered},
    {"deepseek-v3/promote128", 256, 8, 7168, 2048, kSig, 8, 4, true, false, 0, 256, 128, kAuto},
    {"unfused-i1040", 16, 2, 1024, 1040, kSoft, 1, 1, true, false, 0, 16, 0, kAuto},
};

// One recorded forward: its choices as the pre-plan code made them.
struct Expected {
  const char* name;
  int64_t t;
  bool fused, route_sort, quantize_in_sort, sort_single_cta, gather, permute_token_scales, rows_then_combine;
  int64_t active, rows_per_active, rows;
  const char* gemm1;
  int promote_k;
  bool tail_split, gemm1_dynamic, gemm1_one_pass;
  int a_box_rows;
  const char* gemm2;
  bool gemm2_dynamic;
  size_t workspace_bytes;
};

// name, T, fused, route_sort, quantize_in_sort, sort_single_cta, gather, permute_token_scales,
// rows_then_combine, active, rows_per_active, rows, GEMM1, promote_k, tail_split, GEMM1 dynamic,
// GEMM1 one pass, a_box_rows, GEMM2, GEMM2 dynamic, workspace bytes.
const Expected kExpected[] = {
    {"deepseek-v3", 1, true, true, true, false, true, false, false, 8, 2, 32640, "m64n256s5g8x132c1", 32, false, false, false, 8, "m64n112s10g8x132c1", false, 778271200},
    {"deepseek-v3", 2, true, true, true, false, true, false, false, 16, 2, 32640, "m64n256s5g8x132c1", 32, false, false, false, 8, "m64n128s9g8x132c1", true, 778271424},
    {"deepseek-v3", 3, true, true, true, false, true, false, false, 23, 2, 32640, "m64n256s5g8x132c1", 32, false, false, false, 8, "m64n160s7g8x132c1", true, 778271648},
    {"deepseek-v3", 8, true, true, true, false, true, false, false, 57, 2, 32640, "m64n256s5g8x132c1", 32, false, true, false, 8, "m64n160s7g8x132c1", true, 778272768},
    {"deepseek-v3", 9, true, false, true, true, true, false, false, 63, 2, 32640, "m64n256s5g8x132c1", 32, false, true, false, 8, "m64n144s8g8x132c1", true, 778273248},
    {"deepseek-v3", 17, true, false, true, true, true, false, false, 106, 2, 32768, "m64n256s5g8x132c1", 32, false, true, false, 8, "m64n192s6g8x132c1", true, 781327328},
    {"deepseek-v3", 64, true, false, true, true, true, false, false, 221, 3, 33024, "m64n256s5g8x132c1", 32, false, true, false, 8, "m64n192s6g8x132c1", true, 787443200},
    {"deepseek-v3", 100, true, false, true, true, true, false, false, 245, 4, 33408, "m64n256s5g8x132c1", 32, false, true, false, 8, "m64n192s6g8x132c1", true, 796608640},
    {"deepseek-v3", 256, true, false, true, true, true, false, false, 256, 9, 34560, "m64n256s5g8x132c1", 32, false, true, false, 8, "m64n192s6g8x132c1", true, 824116736},
    {"deepseek-v3", 585, true, false, false, false, true, false, false, 256, 19, 37248, "m64n256s5g8x132c1", 32, false, true, false, 8, "m64n192s6g8x132c1", true, 888293856},
    {"deepseek-v3", 586, true, false, false, false, true, false, true, 256, 19, 37248, "m64n256s5g8x132c1", 32, false, true, false, 8, "m128n128s5g8x132c1", true, 888294080},
    {"deepseek-v3", 1000, true, false, false, false, true, false, true, 256, 32, 40576, "m64n256s5g8x132c1", 32, false, true, false, 8, "m128n128s5g8x132c1", true, 967752704},
    {"deepseek-v3", 1024, true, false, false, false, true, false, true, 256, 33, 40704, "m64n256s5g8x132c1", 32, false, true, false, 0, "m128n128s5g8x132c1", true, 970810880},
    {"deepseek-v3", 2048, true, false, false, false, true, false, true, 256, 64, 48896, "m64n256s5g8x132c1", 32, false, true, false, 0, "m128n128s5g8x132c1", true, 1166403072},
    {"deepseek-v3", 4096, true, false, false, false, false, true, true, 256, 128, 65280, "m64n256s5g8x132c2", 64, false, true, true, 0, "m128n192s4g8x132c1", true, 1557587456},
    {"deepseek-v3", 5000, true, false, false, false, false, true, true, 256, 157, 72576, "m64n256s5g8x132c2", 64, false, true, true, 0, "m128n128s5g8x132c1", true, 1731784704},
    {"deepseek-v3", 8192, true, false, false, false, false, true, true, 256, 256, 98048, "m64n256s5g8x132c2", 64, true, true, true, 0, "m128n128s5g8x132c1", true, 2339956224},
    {"deepseek-v3", 16384, true, false, false, false, false, true, true, 256, 512, 163584, "m64n256s5g8x132c2", 64, true, true, true, 0, "m256n128s3g8x132c1", true, 3904693760},
    {"kimi-k2", 1, true, true, true, false, true, false, false, 8, 2, 48896, "m64n256s5g8x132c1", 32, false, false, false, 8, "m64n112s10g8x132c1", false, 1165880288},
    {"kimi-k2", 2, true, true, true, false, true, false, false, 16, 2, 48896, "m64n256s5g8x132c1", 32, false, false, false, 8, "m64n128s9g8x132c1", true, 1165880512},
    {"kimi-k2", 3, true, true, true, false, true, false, false, 23, 2, 48896, "m64n256s5g8x132c1", 32, false, false, false, 8, "m64n160s7g8x132c1", true, 1165880736},
    {"kimi-k2", 8, true, true, true, false, true, false, false, 59, 2, 48896, "m64n256s5g8x132c1", 32, false, true, false, 8, "m64n192s6g8x132c1", true, 1165881856},
    {"kimi-k2", 9, true, false, true, true, true, false, false, 66, 2, 48896, "m64n256s5g8x132c1", 32, false, true, false, 8, "m64n192s6g8x132c1", true, 1165882336},
    {"kimi-k2", 17, true, false, true, true, true, false, false, 115, 2, 49024, "m64n256s5g8x132c1", 32, false, true, false, 8, "m64n160s7g8x132c1", true, 1168936416},
    {"kimi-k2", 64, true, false, true, true, true, false, false, 283, 2, 49280, "m64n256s5g8x132c1", 32, false, true, false, 8, "m64n192s6g8x132c1", true, 1175052288},
    {"kimi-k2", 100, true, false, true, true, true, false, false, 336, 3, 49664, "m64n256s5g8x132c1", 32, false, true, false, 8, "m64n192s6g8x132c1", true, 1184217728},
    {"kimi-k2", 256, true, false, true, true, true, false, false, 382, 6, 50816, "m64n256s5g8x132c1", 32, false, true, false, 8, "m64n192s6g8x132c1", true, 1211725824},
    {"kimi-k2", 585, true, false, false, false, true, false, false, 384, 13, 53504, "m64n256s5g8x132c1", 32, false, true, false, 8, "m64n192s6g8x132c1", true, 1275902944},
    {"kimi-k2", 586, true, false, false, false, true, false, true, 384, 13, 53504, "m64n256s5g8x132c1", 32, false, true, false, 8, "m128n128s5g8x132c1", true, 1275903168},
    {"kimi-k2", 1000, true, false, false, false, true, false, true, 384, 21, 56832, "m64n256s5g8x132c1", 32, false, true, false, 8, "m128n128s5g8x132c1", true, 1355361792},
    {"kimi-k2", 1024, true, false, false, false, true, false, true, 384, 22, 56960, "m64n256s5g8x132c1", 32, false, true, false, 8, "m128n128s5g8x132c1", true, 1358419968},
    {"kimi-k2", 2048, true, false, false, false, true, false, true, 384, 43, 65152, "m64n256s5g8x132c1", 32, false, true, false, 0, "m128n128s5g8x132c1", true, 1554012160},
    {"kimi-k2", 4096, true, false, false, false, true, false, true, 384, 86, 81536, "m64n256s5g8x132c1", 64, false, true, true, 0, "m128n128s5g8x132c1", true, 1945196544},
    {"kimi-k2", 5000, true, false, false, false, true, false, true, 384, 105, 88832, "m64n256s5g8x132c1", 64, false, true, true, 0, "m128n192s4g8x132c1", true, 2119393792},
    {"kimi-k2", 8192, true, false, false, false, false, true, true, 384, 171, 114304, "m64n256s5g8x132c2", 64, false, true, true, 0, "m128n128s5g8x132c1", true, 2727565312},
    {"kimi-k2", 16384, true, false, false, false, false, true, true, 384, 342, 179840, "m64n256s5g8x132c2", 64, true, true, true, 0, "m128n128s5g8x132c1", true, 4292302848},
    {"qwen3-235b-a22b", 1, true, true, true, false, true, false, false, 8, 2, 16384, "m64n256s5g8x132c1", 32, false, false, false, 8, "m64n128s9g8x132c1", false, 229443456},
    {"qwen3-235b-a22b", 2, true, true, true, false, true, false, false, 15, 2, 16384, "m64n256s5g8x132c1", 32, false, false, false, 8, "m64n160s7g8x132c1", false, 229443584},
    {"qwen3-235b-a22b", 3, true, true, true, false, true, false, false, 22, 2, 16384, "m64n256s5g8x132c1", 32, false, false, false, 8, "m64n144s8g8x132c1", false, 229443712},
    {"qwen3-235b-a22b", 8, true, true, true, false, true, false, false, 51, 2, 16384, "m64n256s5g8x132c1", 32, false, false, false, 8, "m64n192s6g8x132c1", true, 229444352},
    {"qwen3-235b-a22b", 9, true, false, true, true, true, false, false, 55, 2, 16384, "m64n256s5g8x132c1", 32, false, false, false, 8, "m64n160s7g8x132c1", true, 229444736},
    {"qwen3-235b-a22b", 17, true, false, true, true, true, false, false, 84, 2, 16512, "m64n256s5g8x132c1", 32, false, true, false, 8, "m64n192s6g8x132c1", true, 231238528},
    {"qwen3-235b-a22b", 64, true, false, true, true, true, false, false, 126, 5, 16768, "m64n256s5g8x132c1", 32, false, true, false, 8, "m64n192s6g8x132c1", true, 234830848},
    {"qwen3-235b-a22b", 100, true, false, true, true, true, false, false, 128, 7, 17152, "m64n256s5g8x132c1", 32, false, true, false, 8, "m64n192s6g8x132c1", true, 240214272},
    {"qwen3-235b-a22b", 256, true, false, true, true, true, false, false, 128, 17, 18304, "m64n256s5g8x132c1", 32, false, true, false, 8, "m64n192s6g8x132c1", true, 256371712},
    {"qwen3-235b-a22b", 585, true, false, false, false, true, false, false, 128, 37, 20992, "m64n256s5g8x132c1", 32, false, true, false, 0, "m64n192s6g8x132c1", true, 294067328},
    {"qwen3-235b-a22b", 586, true, false, false, false, true, false, false, 128, 37, 20992, "m64n256s5g8x132c1", 32, false, true, false, 0, "m64n192s6g8x132c1", true, 294067456},
    {"qwen3-235b-a22b", 1000, true, false, false, false, true, false, false, 128, 63, 24320, "m64n256s5g8x132c1", 32, false, true, false, 0, "m64n192s6g8x132c1", true, 340738816},
    {"qwen3-235b-a22b", 1024, true, false, false, false, true, false, false, 128, 64, 24448, "m64n256s5g8x132c1", 32, false, true, false, 0, "m64n192s6g8x132c1", true, 342535168},
    {"qwen3-235b-a22b", 2048, true, false, false, false, false, true, true, 128, 128, 32640, "m64n256s5g8x132c2", 64, false, true, true, 0, "m128n192s4g8x132c1", true, 457419776},
    {"qwen3-235b-a22b", 4096, true, false, false, false, false, true, true, 128, 256, 49024, "m64n256s5g8x132c2", 64, true, true, true, 0, "m128n192s4g8x132c1", true, 687188992},
    {"qwen3-235b-a22b", 5000, true, false, false, false, false, true, true, 128, 313, 56320, "m64n256s5g8x132c2", 64, true, true, true, 0, "m128n128s5g8x132c1", true, 789506816},
    {"qwen3-235b-a22b", 8192, true, false, false, false, false, true, true, 128, 512, 81792, "m64n256s5g8x132c2", 64, true, true, true, 0, "m256n128s3g8x132c1", true, 1146727424},
    {"qwen3-235b-a22b", 16384, true, false, false, false, false, true, true, 128, 1024, 147328, "m64n256s5g8x132c2", 64, true, true, true, 0, "m256n128s3g8x132c1", true, 2065804288},
    {"qwen3-30b-a3b", 1, true, true, true, false, true, false, false, 8, 2, 16384, "m64n256s5g8x132c1", 32, false, false, false, 8, "m64n128s9g8x132c1", false, 114755392},
    {"qwen3-30b-a3b", 2, true, true, true, false, true, false, false, 15, 2, 16384, "m64n256s5g8x132c1", 32, false, false, false, 8, "m64n128s9g8x132c1", false, 114755456},
    {"qwen3-30b-a3b", 3, true, true, true, false, true, false, false, 22, 2, 16384, "m64n256s5g8x132c1", 32, false, false, false, 8, "m64n192s6g8x132c1", false, 114755520},
    {"qwen3-30b-a3b", 8, true, true, true, false, true, false, false, 51, 2, 16384, "m64n256s5g8x132c1", 32, false, false, false, 8, "m64n144s8g8x132c1", false, 114755840},
    {"qwen3-30b-a3b", 9, true, false, true, true, true, false, false, 55, 2, 16384, "m64n256s5g8x132c1", 32, false, false, false, 8, "m64n192s6g8x132c1", false, 114756160},
    {"qwen3-30b-a3b", 17, true, false, true, true, true, false, false, 84, 2, 16512, "m64n256s5g8x132c1", 32, false, false, false, 8, "m64n192s6g8x132c1", true, 115653440},
    {"qwen3-30b-a3b", 64, true, false, true, true, true, false, false, 126, 5, 16768, "m64n256s5g8x132c1", 32, false, false, false, 8, "m64n192s6g8x132c1", true, 117450752},
    {"qwen3-30b-a3b", 100, true, false, true, true, true, false, false, 128, 7, 17152, "m64n256s5g8x132c1", 32, false, false, false, 8, "m64n192s6g8x132c1", true, 120143872},
    {"qwen3-30b-a3b", 256, true, false, true, true, true, false, false, 128, 17, 18304, "m64n256s5g8x132c1", 32, false, false, false, 8, "m64n192s6g8x132c1", true, 128227328},
    {"qwen3-30b-a3b", 585, true, false, false, false, true, false, false, 128, 37, 20992, "m64n256s5g8x132c1", 32, false, false, false, 0, "m64n192s6g8x132c1", true, 147085888},
    {"qwen3-30b-a3b", 586, true, false, false, false, true, false, false, 128, 37, 20992, "m64n256s5g8x132c1", 32, false, false, false, 0, "m64n192s6g8x132c1", true, 147085952},
    {"qwen3-30b-a3b", 1000, true, false, false, false, true, false, false, 128, 63, 24320, "m64n256s5g8x132c1", 32, false, false, false, 0, "m64n192s6g8x132c1", true, 170434816},
    {"qwen3-30b-a3b", 1024, true, false, false, false, true, false, false, 128, 64, 24448, "m64n256s5g8x132c1", 32, false, false, false, 0, "m64n192s6g8x132c1", true, 171333632},
    {"qwen3-30b-a3b", 2048, true, false, false, false, false, false, false, 128, 128, 32640, "m64n256s5g8x132c2", 64, false, true, true, 0, "m128n192s5g8x132c1", true, 228808704},
    {"qwen3-30b-a3b", 4096, true, false, false, false, false, true, true, 128, 256, 49024, "m64n256s5g8x132c2", 64, true, true, true, 0, "m128n192s4g8x132c1", true, 343758848},
    {"qwen3-30b-a3b", 5000, true, false, false, false, false, true, true, 128, 313, 56320, "m64n256s5g8x132c2", 64, true, true, true, 0, "m128n192s4g8x132c1", true, 394946816},
    {"qwen3-30b-a3b", 8192, true, false, false, false, false, true, true, 128, 512, 81792, "m64n256s5g8x132c2", 64, true, true, true, 0, "m256n128s3g8x132c1", true, 573659136},
    {"qwen3-30b-a3b", 16384, true, false, false, false, false, true, true, 128, 1024, 147328, "m64n256s5g8x132c2", 64, true, true, true, 0, "m256n128s3g8x132c1", true, 1033459712},
    {"mixtral-8x7b", 1, true, true, true, false, true, false, false, 2, 2, 1024, "m64n256s5g8x132c1", 32, false, false, false, 8, "m64n64s10g2x132c1", false, 27858048},
    {"mixtral-8x7b", 2, true, true, true, false, true, false, false, 3, 2, 1024, "m64n256s5g8x132c1", 32, false, false, false, 8, "m64n96s10g3x132c1", false, 27858176},
    {"mixtral-8x7b", 3, true, true, true, false, true, false, false, 4, 2, 1024, "m64n256s5g8x132c1", 32, false, false, false, 8, "m64n128s9g4x132c1", false, 27858304},
    {"mixtral-8x7b", 8, true, true, true, false, true, false, false, 7, 3, 1152, "m64n256s5g8x132c1", 32, false, false, false, 8, "m64n112s10g7x132c1", false, 31341056},
    {"mixtral-8x7b", 9, true, false, true, true, true, false, false, 7, 3, 1152, "m64n256s5g8x132c1", 32, false, false, false, 8, "m64n112s10g7x132c1", false, 31341184},
    {"mixtral-8x7b", 17, true, false, true, true, true, false, false, 8, 5, 1152, "m64n256s5g8x132c1", 32, false, true, false, 8, "m64n128s9g8x132c1", false, 31342208},
    {"mixtral-8x7b", 64, true, false, true, true, true, false, false, 8, 17, 1152, "m64n256s5g8x132c1", 32, false, true, false, 8, "m64n128s9g8x132c1", false, 31348480},
    {"mixtral-8x7b", 100, true, false, true, true, true, false, false, 8, 26, 1280, "m64n256s5g8x132c1", 32, false, true, false, 8, "m64n128s9g8x132c1", false, 34835712},
    {"mixtral-8x7b", 256, true, false, true, true, true, false, false, 8, 64, 1536, "m64n256s5g8x132c1", 32, false, true, false, 0, "m64n128s9g8x132c1", false, 41820928},
    {"mixtral-8x7b", 585, true, false, false, true, false, false, false, 8, 147, 2304, "m64n256s5g8x132c2", 64, false, true, true, 0, "m128n128s6g8x132c1", false, 62758528},
    {"mixtral-8x7b", 586, true, false, false, true, false, false, false, 8, 147, 2304, "m64n256s5g8x132c2", 64, false, true, true, 0, "m128n128s6g8x132c1", false, 62758656},
    {"mixtral-8x7b", 1000, true, false, false, true, false, false, false, 8, 250, 3072, "m64n256s5g8x132c2", 64, false, true, true, 0, "m128n128s6g8x132c1", false, 83707648},
    {"mixtral-8x7b", 1024, true, false, false, true, false, false, false, 8, 256, 3072, "m64n256s5g8x132c2", 64, true, true, true, 0, "m128n128s6g8x132c1", false, 83710720},
    {"mixtral-8x7b", 2048, true, false, false, true, false, false, true, 8, 512, 5120, "m64n256s5g8x132c2", 64, true, true, true, 0, "m128n128s5g8x132c1", true, 139563776},
    {"mixtral-8x7b", 4096, true, false, false, false, false, false, true, 8, 1024, 9216, "m64n256s5g8x132c2", 64, true, true, true, 0, "m256n128s3g8x132c1", true, 251269888},
    {"mixtral-8x7b", 5000, true, false, false, false, false, false, true, 8, 1250, 11136, "m64n256s5g8x132c2", 64, true, true, true, 0, "m256n128s3g8x132c1", true, 303624704},
    {"mixtral-8x7b", 8192, true, false, false, false, false, true, true, 8, 2048, 17408, "m64n256s5g8x132c2", 64, true, true, true, 0, "m256n128s3g8x132c1", true, 474682112},
    {"mixtral-8x7b", 16384, true, false, false, false, false, true, true, 8, 4096, 33792, "m64n256s5g8x132c2", 64, true, true, true, 0, "m256n128s3g8x132c1", true, 921506560},
    {"gpt-oss-120b", 1, true, true, true, false, true, false, false, 4, 2, 16384, "m64n256s5g8x132c1", 32, false, false, false, 8, "m64n88s10g4x132c1", false, 191825756},
    {"gpt-oss-120b", 2, true, true, true, false, true, false, false, 8, 2, 16384, "m64n256s5g8x132c1", 32, false, false, false, 8, "m64n88s10g8x132c1", false, 191825848},
    {"gpt-oss-120b", 3, true, true, true, false, true, false, false, 11, 2, 16384, "m64n256s5g8x132c1", 32, false, false, false, 8, "m64n120s9g8x132c1", false, 191825940},
    {"gpt-oss-120b", 8, true, true, true, false, true, false, false, 28, 2, 16384, "m64n256s5g8x132c1", 32, false, false, false, 8, "m64n160s7g8x132c1", false, 191826400},
    {"gpt-oss-120b", 9, true, false, true, true, true, false, false, 31, 2, 16384, "m64n256s5g8x132c1", 32, false, false, false, 8, "m64n144s8g8x132c1", false, 191826492},
    {"gpt-oss-120b", 17, true, false, true, true, true, false, false, 53, 2, 16384, "m64n256s5g8x132c1", 32, false, true, false, 8, "m64n120s9g8x132c1", true, 191827484},
    {"gpt-oss-120b", 64, true, false, true, true, true, false, false, 111, 3, 16512, "m64n256s5g8x132c1", 32, false, true, false, 8, "m64n192s6g8x132c1", true, 193330944},
    {"gpt-oss-120b", 100, true, false, true, true, true, false, false, 122, 4, 16768, "m64n256s5g8x132c1", 32, false, true, false, 8, "m64n192s6g8x132c1", true, 196332272},
    {"gpt-oss-120b", 256, true, false, true, true, true, false, false, 128, 9, 17280, "m64n256s5g8x132c1", 32, false, true, false, 8, "m64n192s6g8x132c1", true, 202343424},
    {"gpt-oss-120b", 585, true, false, true, true, true, false, false, 128, 19, 18688, "m64n256s5g8x132c1", 32, false, true, false, 8, "m64n192s6g8x132c1", true, 218863932},
    {"gpt-oss-120b", 586, true, false, true, true, true, false, false, 128, 19, 18688, "m64n256s5g8x132c1", 32, false, true, false, 8, "m64n192s6g8x132c1", true, 218864024},
    {"gpt-oss-120b", 1000, true, false, true, true, true, false, false, 128, 32, 20352, "m64n256s5g8x132c1", 32, false, true, false, 8, "m64n192s6g8x132c1", true, 238390880},
    {"gpt-oss-120b", 1024, true, false, true, true, true, false, false, 128, 33, 20352, "m64n256s5g8x132c1", 32, false, true, false, 0, "m64n192s6g8x132c1", true, 238393344},
    {"gpt-oss-120b", 2048, true, false, false, false, true, false, true, 128, 64, 24448, "m64n256s5g8x132c1", 32, false, true, false, 0, "m128n128s5g8x132c1", true, 286459904},
    {"gpt-oss-120b", 4096, true, false, false, false, false, false, true, 128, 128, 32640, "m64n256s5g8x132c2", 64, false, true, true, 0, "m128n192s4g8x132c1", true, 382593024},
    {"gpt-oss-120b", 5000, true, false, false, false, false, false, true, 128, 157, 36352, "m64n256s5g8x132c2", 64, false, true, true, 0, "m128n192s4g8x132c1", true, 426150880},
    {"gpt-oss-120b", 8192, true, false, false, false, false, true, true, 128, 256, 49024, "m64n256s5g8x132c2", 64, true, true, true, 0, "m128n192s4g8x132c1", true, 574859264},
    {"gpt-oss-120b", 16384, true, false, false, false, false, true, true, 128, 512, 81792, "m64n256s5g8x132c2", 64, true, true, true, 0, "m256n128s3g8x132c1", true, 959391744},
    {"deepseek-v2-lite", 1, true, true, true, false, true, false, false, 6, 2, 8192, "m64n256s5g8x132c1", 32, false, false, false, 8, "m64n96s10g6x132c1", false, 62784832},
    {"deepseek-v2-lite", 2, true, true, true, false, true, false, false, 11, 2, 8192, "m64n256s5g8x132c1", 32, false, false, false, 8, "m64n192s6g8x132c1", false, 62784896},
    {"deepseek-v2-lite", 3, true, true, true, false, true, false, false, 16, 2, 8192, "m64n256s5g8x132c1", 32, false, false, false, 8, "m64n128s9g8x132c1", false, 62784960},
    {"deepseek-v2-lite", 8, true, true, true, false, true, false, false, 34, 2, 8192, "m64n256s5g8x132c1", 32, false, false, false, 8, "m64n192s6g8x132c1", false, 62785280},
    {"deepseek-v2-lite", 9, true, false, true, true, true, false, false, 37, 2, 8192, "m64n256s5g8x132c1", 32, false, false, false, 8, "m64n160s7g8x132c1", false, 62785344},
    {"deepseek-v2-lite", 17, true, false, true, true, true, false, false, 51, 2, 8320, "m64n256s5g8x132c1", 32, false, false, false, 8, "m64n144s8g8x132c1", false, 63767104},
    {"deepseek-v2-lite", 64, true, false, true, true, true, false, false, 64, 7, 8576, "m64n256s5g8x132c1", 32, false, false, false, 8, "m64n128s9g8x132c1", true, 65733120},
    {"deepseek-v2-lite", 100, true, false, true, true, true, false, false, 64, 10, 8832, "m64n256s5g8x132c1", 32, false, false, false, 8, "m64n128s9g8x132c1", true, 67698432},
    {"deepseek-v2-lite", 256, true, false, true, true, true, false, false, 64, 25, 9728, "m64n256s5g8x132c1", 32, false, false, false, 8, "m64n128s9g8x132c1", true, 74578944},
    {"deepseek-v2-lite", 585, true, false, true, true, true, false, false, 64, 55, 11648, "m64n256s5g8x132c1", 32, false, false, false, 0, "m64n128s9g8x132c1", true, 89322816},
    {"deepseek-v2-lite", 586, true, false, true, true, true, false, false, 64, 55, 11648, "m64n256s5g8x132c1", 32, false, false, false, 0, "m64n128s9g8x132c1", true, 89322880},
    {"deepseek-v2-lite", 1000, true, false, false, false, true, false, false, 64, 94, 14208, "m64n256s5g8x132c1", 64, false, true, true, 0, "m128n128s6g8x132c1", true, 108979200},
    {"deepseek-v2-lite", 1024, true, false, false, false, true, false, false, 64, 96, 14336, "m64n256s5g8x132c1", 64, false, true, true, 0, "m128n128s6g8x132c1", true, 109962240},
    {"deepseek-v2-lite", 2048, true, false, false, false, false, false, false, 64, 192, 20480, "m64n256s5g8x132c2", 64, false, true, true, 0, "m128n192s5g8x132c1", true, 157139968},
    {"deepseek-v2-lite", 4096, true, false, false, false, false, false, true, 64, 384, 32768, "m64n256s5g8x132c2", 64, true, true, true, 0, "m256n128s3g8x132c1", true, 251495424},
    {"deepseek-v2-lite", 5000, true, false, false, false, false, false, true, 64, 469, 38144, "m64n256s5g8x132c2", 64, true, true, true, 0, "m256n128s3g8x132c1", true, 292776704},
    {"deepseek-v2-lite", 8192, true, false, false, false, false, true, true, 64, 768, 57344, "m64n256s5g8x132c2", 64, true, true, true, 0, "m256n128s3g8x132c1", true, 440206336},
    {"deepseek-v2-lite", 16384, true, false, false, false, false, true, true, 64, 1536, 106496, "m64n256s5g8x132c2", 64, true, true, true, 0, "m256n128s3g8x132c1", true, 817628160},
    {"gpt-oss-20b", 1, true, true, true, false, true, false, false, 4, 2, 4096, "m64n256s5g8x132c1", 32, false, false, false, 8, "m64n88s10g4x132c1", false, 47957084},
    {"gpt-oss-20b", 2, true, true, true, false, true, false, false, 7, 2, 4096, "m64n256s5g8x132c1", 32, false, false, false, 8, "m64n160s7g7x132c1", false, 47957176},
    {"gpt-oss-20b", 3, true, true, true, false, true, false, false, 10, 2, 4096, "m64n256s5g8x132c1", 32, false, false, false, 8, "m64n112s10g8x132c1", false, 47957268},
    {"gpt-oss-20b", 8, true, true, true, false, true, false, false, 20, 2, 4096, "m64n256s5g8x132c1", 32, false, false, false, 8, "m64n112s10g8x132c1", false, 47957728},
    {"gpt-oss-20b", 9, true, false, true, true, true, false, false, 22, 2, 4224, "m64n256s5g8x132c1", 32, false, false, false, 8, "m64n160s7g8x132c1", false, 49456444},
    {"gpt-oss-20b", 17, true, false, true, true, true, false, false, 28, 3, 4224, "m64n256s5g8x132c1", 32, false, false, false, 8, "m64n160s7g8x132c1", false, 49457436},
    {"gpt-oss-20b", 64, true, false, true, true, true, false, false, 32, 9, 4352, "m64n256s5g8x132c1", 32, false, false, false, 8, "m64n144s8g8x132c1", false, 50960896},
    {"gpt-oss-20b", 100, true, false, true, true, true, false, false, 32, 13, 4480, "m64n256s5g8x132c1", 32, false, false, false, 8, "m64n144s8g8x132c1", false, 52463600},
    {"gpt-oss-20b", 256, true, false, true, true, true, false, false, 32, 33, 5120, "m64n256s5g8x132c1", 32, false, false, false, 0, "m64n144s8g8x132c1", false, 59973376},
    {"gpt-oss-20b", 585, true, false, true, true, true, false, false, 32, 74, 6528, "m64n256s5g8x132c1", 64, false, true, true, 0, "m128n144s6g8x132c1", false, 76493884},
    {"gpt-oss-20b", 586, true, false, true, true, true, false, false, 32, 74, 6528, "m64n256s5g8x132c1", 64, false, true, true, 0, "m128n144s6g8x132c1", false, 76493976},
    {"gpt-oss-20b", 1000, true, false, true, true, true, false, false, 32, 125, 8064, "m64n256s5g8x132c1", 64, false, true, true, 0, "m128n192s5g8x132c1", false, 94522208},
    {"gpt-oss-20b", 1024, true, false, false, true, false, false, false, 32, 128, 8192, "m64n256s5g8x132c2", 64, false, true, true, 0, "m128n192s5g8x132c1", false, 96023296},
    {"gpt-oss-20b", 2048, true, false, false, false, false, false, true, 32, 256, 12288, "m64n256s5g8x132c2", 64, true, true, true, 0, "m128n192s4g8x132c1", true, 144089856},
    {"gpt-oss-20b", 4096, true, false, false, false, false, false, true, 32, 512, 20480, "m64n256s5g8x132c2", 64, true, true, true, 0, "m256n128s3g8x132c1", true, 240222976},
    {"gpt-oss-20b", 5000, true, false, false, false, false, false, true, 32, 625, 24064, "m64n256s5g8x132c2", 64, true, true, true, 0, "m256n128s3g8x132c1", true, 282282208},
    {"gpt-oss-20b", 8192, true, false, false, false, false, true, true, 32, 1024, 36864, "m64n256s5g8x132c2", 64, true, true, true, 0, "m256n128s3g8x132c1", true, 432489216},
    {"gpt-oss-20b", 16384, true, false, false, false, false, true, true, 32, 2048, 69632, "m64n256s5g8x132c2", 64, true, true, true, 0, "m256n128s3g8x132c1", true, 817021696},
    {"deepseek-v4-flash", 1, true, true, true, false, true, false, false, 6, 2, 32640, "m64n256s5g8x132c1", 32, false, false, false, 8, "m64n192s6g6x132c1", false, 474327424},
    {"deepseek-v4-flash", 2, true, true, true, false, true, false, false, 12, 2, 32640, "m64n256s5g8x132c1", 32, false, false, false, 8, "m64n192s6g8x132c1", false, 474327552},
    {"deepseek-v4-flash", 3, true, true, true, false, true, false, false, 17, 2, 32640, "m64n256s5g8x132c1", 32, false, false, false, 8, "m64n192s6g8x132c1", false, 474327680},
    {"deepseek-v4-flash", 8, true, true, true, false, true, false, false, 44, 2, 32640, "m64n256s5g8x132c1", 32, false, false, false, 8, "m64n160s7g8x132c1", true, 474328320},
    {"deepseek-v4-flash", 9, true, false, true, true, true, false, false, 49, 2, 32640, "m64n256s5g8x132c1", 32, false, false, false, 8, "m64n128s9g8x132c1", true, 474328448},
    {"deepseek-v4-flash", 17, true, false, true, true, true, false, false, 84, 2, 32640, "m64n256s5g8x132c1", 32, false, true, false, 8, "m64n192s6g8x132c1", true, 474329728},
    {"deepseek-v4-flash", 64, true, false, true, true, true, false, false, 199, 2, 32896, "m64n256s5g8x132c1", 32, false, true, false, 8, "m64n160s7g8x132c1", true, 478056960},
    {"deepseek-v4-flash", 100, true, false, true, true, true, false, false, 232, 3, 33152, "m64n256s5g8x132c1", 32, false, true, false, 8, "m64n192s6g8x132c1", true, 481782784},
    {"deepseek-v4-flash", 256, true, false, true, true, true, false, false, 255, 7, 34048, "m64n256s5g8x132c1", 32, false, true, false, 8, "m64n128s9g8x132c1", true, 494827008},
    {"deepseek-v4-flash", 585, true, false, true, true, true, false, false, 256, 14, 36096, "m64n256s5g8x132c1", 32, false, true, false, 8, "m64n192s6g8x132c1", true, 524638592},
    {"deepseek-v4-flash", 586, true, false, true, true, true, false, false, 256, 14, 36096, "m64n256s5g8x132c1", 32, false, true, false, 8, "m64n192s6g8x132c1", true, 524638720},
    {"deepseek-v4-flash", 1000, true, false, false, false, true, false, false, 256, 24, 38528, "m64n256s5g8x132c1", 32, false, true, false, 8, "m64n192s6g8x132c1", true, 560043520},
    {"deepseek-v4-flash", 1024, true, false, false, false, true, false, false, 256, 25, 38656, "m64n256s5g8x132c1", 32, false, true, false, 8, "m64n192s6g8x132c1", true, 561907200},
    {"deepseek-v4-flash", 2048, true, false, false, false, true, false, true, 256, 48, 44800, "m64n256s5g8x132c1", 32, false, true, false, 0, "m128n128s5g8x132c1", true, 651347456},
    {"deepseek-v4-flash", 4096, true, false, false, false, true, false, true, 256, 96, 57088, "m64n256s5g8x132c1", 64, false, true, true, 0, "m128n192s4g8x132c1", true, 830227968},
    {"deepseek-v4-flash", 5000, true, false, false, false, true, false, true, 256, 118, 62592, "m64n256s5g8x132c1", 64, false, true, true, 0, "m128n192s4g8x132c1", true, 910349568},
    {"deepseek-v4-flash", 8192, true, false, false, false, false, true, true, 256, 192, 81664, "m64n256s5g8x132c2", 64, false, true, true, 0, "m128n128s5g8x132c1", true, 1187988992},
    {"deepseek-v4-flash", 16384, true, false, false, false, false, true, true, 256, 384, 130816, "m64n256s5g8x132c2", 64, true, true, true, 0, "m128n128s5g8x132c1", true, 1903511040},
    {"deepseek-v3/ids", 1, true, false, true, true, true, false, false, 8, 2, 32640, "m64n256s5g8x132c1", 32, false, false, false, 8, "m64n112s10g8x132c1", false, 778271200},
    {"deepseek-v3/ids", 2, true, false, true, true, true, false, false, 16, 2, 32640, "m64n256s5g8x132c1", 32, false, false, false, 8, "m64n128s9g8x132c1", true, 778271424},
    {"deepseek-v3/ids", 3, true, false, true, true, true, false, false, 23, 2, 32640, "m64n256s5g8x132c1", 32, false, false, false, 8, "m64n160s7g8x132c1", true, 778271648},
    {"deepseek-v3/ids", 8, true, false, true, true, true, false, false, 57, 2, 32640, "m64n256s5g8x132c1", 32, false, true, false, 8, "m64n160s7g8x132c1", true, 778272768},
    {"deepseek-v3/ids", 9, true, false, true, true, true, false, false, 63, 2, 32640, "m64n256s5g8x132c1", 32, false, true, false, 8, "m64n144s8g8x132c1", true, 778273248},
    {"deepseek-v3/ids", 17, true, false, true, true, true, false, false, 106, 2, 32768, "m64n256s5g8x132c1", 32, false, true, false, 8, "m64n192s6g8x132c1", true, 781327328},
    {"deepseek-v3/ids", 64, true, false, true, true, true, false, false, 221, 3, 33024, "m64n256s5g8x132c1", 32, false, true, false, 8, "m64n192s6g8x132c1", true, 787443200},
    {"deepseek-v3/ids", 100, true, false, true, true, true, false, false, 245, 4, 33408, "m64n256s5g8x132c1", 32, false, true, false, 8, "m64n192s6g8x132c1", true, 796608640},
    {"deepseek-v3/ids", 256, true, false, true, true, true, false, false, 256, 9, 34560, "m64n256s5g8x132c1", 32, false, true, false, 8, "m64n192s6g8x132c1", true, 824116736},
    {"deepseek-v3/ids", 585, true, false, false, false, true, false, false, 256, 19, 37248, "m64n256s5g8x132c1", 32, false, true, false, 8, "m64n192s6g8x132c1", true, 888293856},
    {"deepseek-v3/ids", 586, true, false, false, false, true, false, true, 256, 19, 37248, "m64n256s5g8x132c1", 32, false, true, false, 8, "m128n128s5g8x132c1", true, 888294080},
    {"deepseek-v3/ids", 1000, true, false, false, false, true, false, true, 256, 32, 40576, "m64n256s5g8x132c1", 32, false, true, false, 8, "m128n128s5g8x132c1", true, 967752704},
    {"deepseek-v3/ids", 1024, true, false, false, false, true, false, true, 256, 33, 40704, "m64n256s5g8x132c1", 32, false, true, false, 0, "m128n128s5g8x132c1", true, 970810880},
    {"deepseek-v3/ids", 2048, true, false, false, false, true, false, true, 256, 64, 48896, "m64n256s5g8x132c1", 32, false, true, false, 0, "m128n128s5g8x132c1", true, 1166403072},
    {"deepseek-v3/ids", 4096, true, false, false, false, false, true, true, 256, 128, 65280, "m64n256s5g8x132c2", 64, false, true, true, 0, "m128n192s4g8x132c1", true, 1557587456},
    {"deepseek-v3/ids", 5000, true, false, false, false, false, true, true, 256, 157, 72576, "m64n256s5g8x132c2", 64, false, true, true, 0, "m128n128s5g8x132c1", true, 1731784704},
    {"deepseek-v3/ids", 8192, true, false, false, false, false, true, true, 256, 256, 98048, "m64n256s5g8x132c2", 64, true, true, true, 0, "m128n128s5g8x132c1", true, 2339956224},
    {"deepseek-v3/ids", 16384, true, false, false, false, false, true, true, 256, 512, 163584, "m64n256s5g8x132c2", 64, true, true, true, 0, "m256n128s3g8x132c1", true, 3904693760},
    {"deepseek-v3/deterministic", 1, true, true, true, false, true, false, true, 8, 2, 32640, "m64n256s5g8x132c1", 32, false, false, false, 8, "m128n192s4g8x132c1", true, 778271200},
    {"deepseek-v3/deterministic", 2, true, true, true, false, true, false, true, 16, 2, 32640, "m64n256s5g8x132c1", 32, false, false, false, 8, "m128n192s4g8x132c1", true, 778271424},
    {"deepseek-v3/deterministic", 3, true, true, true, false, true, false, true, 23, 2, 32640, "m64n256s5g8x132c1", 32, false, false, false, 8, "m128n192s4g8x132c1", true, 778271648},
    {"deepseek-v3/deterministic", 8, true, true, true, false, true, false, true, 57, 2, 32640, "m64n256s5g8x132c1", 32, false, true, false, 8, "m128n192s4g8x132c1", true, 778272768},
    {"deepseek-v3/deterministic", 9, true, false, true, true, true, false, true, 63, 2, 32640, "m64n256s5g8x132c1", 32, false, true, false, 8, "m128n192s4g8x132c1", true, 778273248},
    {"deepseek-v3/deterministic", 17, true, false, true, true, true, false, true, 106, 2, 32768, "m64n256s5g8x132c1", 32, false, true, false, 8, "m128n192s4g8x132c1", true, 781327328},
    {"deepseek-v3/deterministic", 64, true, false, true, true, true, false, true, 221, 3, 33024, "m64n256s5g8x132c1", 32, false, true, false, 8, "m128n128s5g8x132c1", true, 787443200},
    {"deepseek-v3/deterministic", 100, true, false, true, true, true, false, true, 245, 4, 33408, "m64n256s5g8x132c1", 32, false, true, false, 8, "m128n128s5g8x132c1", true, 796608640},
    {"deepseek-v3/deterministic", 256, true, false, true, true, true, false, true, 256, 9, 34560, "m64n256s5g8x132c1", 32, false, true, false, 8, "m128n128s5g8x132c1", true, 824116736},
    {"deepseek-v3/deterministic", 585, true, false, false, false, true, false, true, 256, 19, 37248, "m64n256s5g8x132c1", 32, false, true, false, 8, "m128n128s5g8x132c1", true, 888293856},
    {"deepseek-v3/deterministic", 586, true, false, false, false, true, false, true, 256, 19, 37248, "m64n256s5g8x132c1", 32, false, true, false, 8, "m128n128s5g8x132c1", true, 888294080},
    {"deepseek-v3/deterministic", 1000, true, false, false, false, true, false, true, 256, 32, 40576, "m64n256s5g8x132c1", 32, false, true, false, 8, "m128n128s5g8x132c1", true, 967752704},
    {"deepseek-v3/deterministic", 1024, true, false, false, false, true, false, true, 256, 33, 40704, "m64n256s5g8x132c1", 32, false, true, false, 0, "m128n128s5g8x132c1", true, 970810880},
    {"deepseek-v3/deterministic", 2048, true, false, false, false, true, false, true, 256, 64, 48896, "m64n256s5g8x132c1", 32, false, true, false, 0, "m128n128s5g8x132c1", true, 1166403072},
    {"deepseek-v3/deterministic", 4096, true, false, false, false, false, true, true, 256, 128, 65280, "m64n256s5g8x132c2", 64, false, true, true, 0, "m128n192s4g8x132c1", true, 1557587456},
    {"deepseek-v3/deterministic", 5000, true, false, false, false, false, true, true, 256, 157, 72576, "m64n256s5g8x132c2", 64, false, true, true, 0, "m128n128s5g8x132c1", true, 1731784704},
    {"deepseek-v3/deterministic", 8192, true, false, false, false, false, true, true, 256, 256, 98048, "m64n256s5g8x132c2", 64, true, true, true, 0, "m128n128s5g8x132c1", true, 2339956224},
    {"deepseek-v3/deterministic", 16384, true, false, false, false, false, true, true, 256, 512, 163584, "m64n256s5g8x132c2", 64, true, true, true, 0, "m256n128s3g8x132c1", true, 3904693760},
    {"deepseek-v3/ep32", 1, true, true, true, false, true, false, false, 1, 1, 4096, "m64n256s5g8x132c1", 32, false, false, false, 8, "m64n56s10g1x132c1", false, 97666272},
    {"deepseek-v3/ep32", 2, true, true, true, false, true, false, false, 2, 2, 4096, "m64n256s5g8x132c1", 32, false, false, false, 8, "m64n112s10g2x132c1", false, 97666496},
    {"deepseek-v3/ep32", 3, true, true, true, false, true, false, false, 3, 2, 4096, "m64n256s5g8x132c1", 32, false, false, false, 8, "m64n88s10g3x132c1", false, 97666720},
    {"deepseek-v3/ep32", 8, true, true, true, false, true, false, false, 7, 2, 4224, "m64n256s5g8x132c1", 32, false, false, false, 8, "m64n128s9g7x132c1", false, 100719872},
    {"deepseek-v3/ep32", 9, true, false, true, true, true, false, false, 8, 2, 4224, "m64n256s5g8x132c1", 32, false, false, false, 8, "m64n112s10g8x132c1", false, 100720352},
    {"deepseek-v3/ep32", 17, true, false, true, true, true, false, false, 13, 2, 4224, "m64n256s5g8x132c1", 32, false, false, false, 8, "m64n144s8g8x132c1", false, 100722400},
    {"deepseek-v3/ep32", 64, true, false, true, true, true, false, false, 28, 3, 4608, "m64n256s5g8x132c1", 32, false, false, false, 8, "m64n128s9g8x132c1", true, 109890304},
    {"deepseek-v3/ep32", 100, true, false, true, true, true, false, false, 31, 4, 4864, "m64n256s5g8x132c1", 32, false, false, false, 8, "m64n192s6g8x132c1", true, 116003712},
    {"deepseek-v3/ep32", 256, true, false, true, true, true, false, false, 32, 9, 6144, "m64n256s5g8x132c1", 32, false, false, false, 8, "m64n160s7g8x132c1", true, 146563840},
    {"deepseek-v3/ep32", 585, true, false, false, false, true, false, false, 32, 19, 8832, "m64n256s5g8x132c1", 32, false, false, false, 8, "m64n160s7g8x132c1", true, 210740960},
    {"deepseek-v3/ep32", 586, true, false, false, false, true, false, true, 32, 19, 8832, "m64n256s5g8x132c1", 32, false, false, false, 8, "m128n128s5g8x132c1", true, 210741184},
    {"deepseek-v3/ep32", 1000, true, false, false, false, true, false, true, 32, 32, 12160, "m64n256s5g8x132c1", 32, false, false, false, 8, "m128n128s5g8x132c1", true, 290199808},
    {"deepseek-v3/ep32", 1024, true, false, false, false, true, false, true, 32, 33, 12288, "m64n256s5g8x132c1", 32, false, false, false, 0, "m128n128s5g8x132c1", true, 293257984},
    {"deepseek-v3/ep32", 2048, true, false, false, false, true, false, true, 32, 64, 20480, "m64n256s5g8x132c1", 32, false, false, false, 0, "m256n128s3g8x132c1", true, 488850176},
    {"deepseek-v3/ep32", 4096, true, false, false, false, false, true, true, 32, 128, 36864, "m64n256s5g8x132c2", 64, false, true, true, 0, "m256n128s3g8x132c1", true, 880034560},
    {"deepseek-v3/ep32", 5000, true, false, false, false, false, true, true, 32, 157, 44160, "m64n256s5g8x132c2", 64, false, true, true, 0, "m256n128s3g8x132c1", true, 1054231808},
    {"deepseek-v3/ep32", 8192, true, false, false, false, false, true, true, 32, 256, 69632, "m64n256s5g8x132c2", 64, true, true, true, 0, "m256n128s3g8x132c1", true, 1662403328},
    {"deepseek-v3/ep32", 16384, true, false, false, false, false, true, true, 32, 512, 135168, "m64n256s5g8x132c2", 64, true, true, true, 0, "m256n128s3g8x132c1", true, 3227140864},
    {"deepseek-v3/permuted", 1, true, true, false, false, false, false, false, 8, 2, 32640, "m64n256s5g8x132c1", 32, false, false, false, 8, "m64n112s10g8x132c1", false, 778271200},
    {"deepseek-v3/permuted", 2, true, true, false, false, false, false, false, 16, 2, 32640, "m64n256s5g8x132c1", 32, false, false, false, 8, "m64n128s9g8x132c1", true, 778271424},
    {"deepseek-v3/permuted", 3, true, true, false, false, false, false, false, 23, 2, 32640, "m64n256s5g8x132c1", 32, false, false, false, 8, "m64n160s7g8x132c1", true, 778271648},
    {"deepseek-v3/permuted", 8, true, true, false, false, false, false, false, 57, 2, 32640, "m64n256s5g8x132c1", 32, false, true, false, 8, "m64n160s7g8x132c1", true, 778272768},
    {"deepseek-v3/permuted", 9, true, false, false, true, false, false, false, 63, 2, 32640, "m64n256s5g8x132c1", 32, false, true, false, 8, "m64n144s8g8x132c1", true, 778273248},
    {"deepseek-v3/permuted", 17, true, false, false, true, false, false, false, 106, 2, 32768, "m64n256s5g8x132c1", 32, false, true, false, 8, "m64n192s6g8x132c1", true, 781327328},
    {"deepseek-v3/permuted", 64, true, false, false, true, false, false, false, 221, 3, 33024, "m64n256s5g8x132c1", 32, false, true, false, 8, "m64n192s6g8x132c1", true, 787443200},
    {"deepseek-v3/permuted", 100, true, false, false, true, false, false, false, 245, 4, 33408, "m64n256s5g8x132c1", 32, false, true, false, 8, "m64n192s6g8x132c1", true, 796608640},
    {"deepseek-v3/permuted", 256, true, false, false, true, false, false, false, 256, 9, 34560, "m64n256s5g8x132c1", 32, false, true, false, 8, "m64n192s6g8x132c1", true, 824116736},
    {"deepseek-v3/permuted", 585, true, false, false, false, false, false, false, 256, 19, 37248, "m64n256s5g8x132c1", 32, false, true, false, 8, "m64n192s6g8x132c1", true, 888293856},
    {"deepseek-v3/permuted", 586, true, false, false, false, false, false, true, 256, 19, 37248, "m64n256s5g8x132c1", 32, false, true, false, 8, "m128n128s5g8x132c1", true, 888294080},
    {"deepseek-v3/permuted", 1000, true, false, false, false, false, false, true, 256, 32, 40576, "m64n256s5g8x132c1", 32, false, true, false, 8, "m128n128s5g8x132c1", true, 967752704},
    {"deepseek-v3/permuted", 1024, true, false, false, false, false, false, true, 256, 33, 40704, "m64n256s5g8x132c1", 32, false, true, false, 0, "m128n128s5g8x132c1", true, 970810880},
    {"deepseek-v3/permuted", 2048, true, false, false, false, false, true, true, 256, 64, 48896, "m64n256s5g8x132c1", 32, false, true, false, 0, "m128n128s5g8x132c1", true, 1166403072},
    {"deepseek-v3/permuted", 4096, true, false, false, false, false, true, true, 256, 128, 65280, "m64n256s5g8x132c2", 64, false, true, true, 0, "m128n192s4g8x132c1", true, 1557587456},
    {"deepseek-v3/permuted", 5000, true, false, false, false, false, true, true, 256, 157, 72576, "m64n256s5g8x132c2", 64, false, true, true, 0, "m128n128s5g8x132c1", true, 1731784704},
    {"deepseek-v3/permuted", 8192, true, false, false, false, false, true, true, 256, 256, 98048, "m64n256s5g8x132c2", 64, true, true, true, 0, "m128n128s5g8x132c1", true, 2339956224},
    {"deepseek-v3/permuted", 16384, true, false, false, false, false, true, true, 256, 512, 163584, "m64n256s5g8x132c2", 64, true, true, true, 0, "m256n128s3g8x132c1", true, 3904693760},
    {"deepseek-v3/gathered", 1, true, false, true, true, true, false, false, 8, 2, 32640, "m64n256s5g8x132c1", 32, false, false, false, 8, "m64n112s10g8x132c1", false, 778271200},
    {"deepseek-v3/gathered", 2, true, false, true, true, true, false, false, 16, 2, 32640, "m64n256s5g8x132c1", 32, false, false, false, 8, "m64n128s9g8x132c1", true, 778271424},
    {"deepseek-v3/gathered", 3, true, false, true, true, true, false, false, 23, 2, 32640, "m64n256s5g8x132c1", 32, false, false, false, 8, "m64n160s7g8x132c1", true, 778271648},
    {"deepseek-v3/gathered", 8, true, false, true, true, true, false, false, 57, 2, 32640, "m64n256s5g8x132c1", 32, false, true, false, 8, "m64n160s7g8x132c1", true, 778272768},
    {"deepseek-v3/gathered", 9, true, false, true, true, true, false, false, 63, 2, 32640, "m64n256s5g8x132c1", 32, false, true, false, 8, "m64n144s8g8x132c1", true, 778273248},
    {"deepseek-v3/gathered", 17, true, false, true, true, true, false, false, 106, 2, 32768, "m64n256s5g8x132c1", 32, false, true, false, 8, "m64n192s6g8x132c1", true, 781327328},
    {"deepseek-v3/gathered", 64, true, false, true, true, true, false, false, 221, 3, 33024, "m64n256s5g8x132c1", 32, false, true, false, 8, "m64n192s6g8x132c1", true, 787443200},
    {"deepseek-v3/gathered", 100, true, false, true, true, true, false, false, 245, 4, 33408, "m64n256s5g8x132c1", 32, false, true, false, 8, "m64n192s6g8x132c1", true, 796608640},
    {"deepseek-v3/gathered", 256, true, false, true, true, true, false, false, 256, 9, 34560, "m64n256s5g8x132c1", 32, false, true, false, 8, "m64n192s6g8x132c1", true, 824116736},
    {"deepseek-v3/gathered", 585, true, false, false, false, true, false, false, 256, 19, 37248, "m64n256s5g8x132c1", 32, false, true, false, 8, "m64n192s6g8x132c1", true, 888293856},
    {"deepseek-v3/gathered", 586, true, false, false, false, true, false, true, 256, 19, 37248, "m64n256s5g8x132c1", 32, false, true, false, 8, "m128n128s5g8x132c1", true, 888294080},
    {"deepseek-v3/gathered", 1000, true, false, false, false, true, false, true, 256, 32, 40576, "m64n256s5g8x132c1", 32, false, true, false, 8, "m128n128s5g8x132c1", true, 967752704},
    {"deepseek-v3/gathered", 1024, true, false, false, false, true, false, true, 256, 33, 40704, "m64n256s5g8x132c1", 32, false, true, false, 0, "m128n128s5g8x132c1", true, 970810880},
    {"deepseek-v3/gathered", 2048, true, false, false, false, true, false, true, 256, 64, 48896, "m64n256s5g8x132c1", 32, false, true, false, 0, "m128n128s5g8x132c1", true, 1166403072},
    {"deepseek-v3/gathered", 4096, true, false, false, false, true, false, true, 256, 128, 65280, "m64n256s5g8x132c2", 64, false, true, true, 0, "m128n192s4g8x132c1", true, 1557587456},
    {"deepseek-v3/gathered", 5000, true, false, false, false, true, false, true, 256, 157, 72576, "m64n256s5g8x132c2", 64, false, true, true, 0, "m128n128s5g8x132c1", true, 1731784704},
    {"deepseek-v3/gathered", 8192, true, false, false, false, true, false, true, 256, 256, 98048, "m64n256s5g8x132c2", 64, true, true, true, 0, "m128n128s5g8x132c1", true, 2339956224},
    {"deepseek-v3/gathered", 16384, true, false, false, false, true, false, true, 256, 512, 163584, "m64n256s5g8x132c2", 64, true, true, true, 0, "m256n128s3g8x132c1", true, 3904693760},
    {"deepseek-v3/promote128", 1, true, true, true, false, true, false, false, 8, 2, 32640, "m64n256s5g8x132c1", 128, false, false, false, 8, "m64n112s10g8x132c1", false, 778271200},
    {"deepseek-v3/promote128", 2, true, true, true, false, true, false, false, 16, 2, 32640, "m64n256s5g8x132c1", 128, false, false, false, 8, "m64n128s9g8x132c1", true, 778271424},
    {"deepseek-v3/promote128", 3, true, true, true, false, true, false, false, 23, 2, 32640, "m64n256s5g8x132c1", 128, false, false, false, 8, "m64n160s7g8x132c1", true, 778271648},
    {"deepseek-v3/promote128", 8, true, true, true, false, true, false, false, 57, 2, 32640, "m64n256s5g8x132c1", 128, false, true, false, 8, "m64n160s7g8x132c1", true, 778272768},
    {"deepseek-v3/promote128", 9, true, false, true, true, true, false, false, 63, 2, 32640, "m64n256s5g8x132c1", 128, false, true, false, 8, "m64n144s8g8x132c1", true, 778273248},
    {"deepseek-v3/promote128", 17, true, false, true, true, true, false, false, 106, 2, 32768, "m64n256s5g8x132c1", 128, false, true, false, 8, "m64n192s6g8x132c1", true, 781327328},
    {"deepseek-v3/promote128", 64, true, false, true, true, true, false, false, 221, 3, 33024, "m64n256s5g8x132c1", 128, false, true, false, 8, "m64n192s6g8x132c1", true, 787443200},
    {"deepseek-v3/promote128", 100, true, false, true, true, true, false, false, 245, 4, 33408, "m64n256s5g8x132c1", 128, false, true, false, 8, "m64n192s6g8x132c1", true, 796608640},
    {"deepseek-v3/promote128", 256, true, false, true, true, true, false, false, 256, 9, 34560, "m64n256s5g8x132c1", 128, false, true, false, 8, "m64n192s6g8x132c1", true, 824116736},
    {"deepseek-v3/promote128", 585, true, false, false, false, true, false, false, 256, 19, 37248, "m64n256s5g8x132c1", 128, false, true, false, 8, "m64n192s6g8x132c1", true, 888293856},
    {"deepseek-v3/promote128", 586, true, false, false, false, true, false, true, 256, 19, 37248, "m64n256s5g8x132c1", 128, false, true, false, 8, "m128n128s5g8x132c1", true, 888294080},
    {"deepseek-v3/promote128", 1000, true, false, false, false, true, false, true, 256, 32, 40576, "m64n256s5g8x132c1", 128, false, true, false, 8, "m128n128s5g8x132c1", true, 967752704},
    {"deepseek-v3/promote128", 1024, true, false, false, false, true, false, true, 256, 33, 40704, "m64n256s5g8x132c1", 128, false, true, false, 0, "m128n128s5g8x132c1", true, 970810880},
    {"deepseek-v3/promote128", 2048, true, false, false, false, true, false, true, 256, 64, 48896, "m64n256s5g8x132c1", 128, false, true, false, 0, "m128n128s5g8x132c1", true, 1166403072},
    {"deepseek-v3/promote128", 4096, true, false, false, false, false, true, true, 256, 128, 65280, "m64n256s5g8x132c2", 128, false, true, true, 0, "m128n192s4g8x132c1", true, 1557587456},
    {"deepseek-v3/promote128", 5000, true, false, false, false, false, true, true, 256, 157, 72576, "m64n256s5g8x132c2", 128, false, true, true, 0, "m128n128s5g8x132c1", true, 1731784704},
    {"deepseek-v3/promote128", 8192, true, false, false, false, false, true, true, 256, 256, 98048, "m64n256s5g8x132c2", 128, true, true, true, 0, "m128n128s5g8x132c1", true, 2339956224},
    {"deepseek-v3/promote128", 16384, true, false, false, false, false, true, true, 256, 512, 163584, "m64n256s5g8x132c2", 128, true, true, true, 0, "m256n128s3g8x132c1", true, 3904693760},
    {"unfused-i1040", 1, false, false, false, false, false, false, false, 0, 0, 0, "", 0, false, false, false, 0, "", false, 0},
    {"unfused-i1040", 2, false, false, false, false, false, false, false, 0, 0, 0, "", 0, false, false, false, 0, "", false, 0},
    {"unfused-i1040", 3, false, false, false, false, false, false, false, 0, 0, 0, "", 0, false, false, false, 0, "", false, 0},
    {"unfused-i1040", 8, false, false, false, false, false, false, false, 0, 0, 0, "", 0, false, false, false, 0, "", false, 0},
    {"unfused-i1040", 9, false, false, false, false, false, false, false, 0, 0, 0, "", 0, false, false, false, 0, "", false, 0},
    {"unfused-i1040", 17, false, false, false, false, false, false, false, 0, 0, 0, "", 0, false, false, false, 0, "", false, 0},
    {"unfused-i1040", 64, false, false, false, false, false, false, false, 0, 0, 0, "", 0, false, false, false, 0, "", false, 0},
    {"unfused-i1040", 100, false, false, false, false, false, false, false, 0, 0, 0, "", 0, false, false, false, 0, "", false, 0},
    {"unfused-i1040", 256, false, false, false, false, false, false, false, 0, 0, 0, "", 0, false, false, false, 0, "", false, 0},
    {"unfused-i1040", 585, false, false, false, false, false, false, false, 0, 0, 0, "", 0, false, false, false, 0, "", false, 0},
    {"unfused-i1040", 586, false, false, false, false, false, false, false, 0, 0, 0, "", 0, false, false, false, 0, "", false, 0},
    {"unfused-i1040", 1000, false, false, false, false, false, false, false, 0, 0, 0, "", 0, false, false, false, 0, "", false, 0},
    {"unfused-i1040", 1024, false, false, false, false, false, false, false, 0, 0, 0, "", 0, false, false, false, 0, "", false, 0},
    {"unfused-i1040", 2048, false, false, false, false, false, false, false, 0, 0, 0, "", 0, false, false, false, 0, "", false, 0},
    {"unfused-i1040", 4096, false, false, false, false, false, false, false, 0, 0, 0, "", 0, false, false, false, 0, "", false, 0},
    {"unfused-i1040", 5000, false, false, false, false, false, false, false, 0, 0, 0, "", 0, false, false, false, 0, "", false, 0},
    {"unfused-i1040", 8192, false, false, false, false, false, false, false, 0, 0, 0, "", 0, false, false, false, 0, "", false, 0},
    {"unfused-i1040", 16384, false, false, false, false, false, false, false, 0, 0, 0, "", 0, false, false, false, 0, "", false, 0},
};

MoeConfig layer_config(const Case& c) {
  MoeConfig m;
  m.num_experts = c.e;
  m.top_k = c.k;
  m.hidden = c.h;
  m.inter = c.inter;
  moekit::RoutingConfig r;
  r.method = c.method;
  r.renormalize = c.method != kTopkSoft;
  r.num_groups = c.groups;
  r.topk_groups = c.topk_groups;
  m.routing = r;
  m.deterministic = c.deterministic;
  m.local_offset = c.local_offset;
  m.local_count = c.local_count;
  m.gemm1_promote_k = c.promote_k;
  m.gemm1_input = c.input;
  return moekit::MoeLayer(m).config();  // validated and resolved, as the layer plans it
}

const Case& case_named(const std::string& name) {
  for (const Case& c : kCases)
    if (name == c.name) return c;
  throw std::runtime_error("no case " + name);
}

MoePlan plan_for(const Case& c, int64_t t, const Knobs& knobs = {}) {
  return plan_moe_forward(layer_config(c), t, c.from_logits, GemmDeviceLimits{}, 0, knobs);
}

TEST(MoePlan, ReproducesThePrePlanDecisions) {
  int checked = 0;
  for (const Expected& e : kExpected) {
    const Case& c = case_named(e.name);
    SCOPED_TRACE(std::string(e.name) + " T=" + std::to_string(e.t));
    const MoePlan p = plan_for(c, e.t);
    EXPECT_EQ(p.fused_layout, e.fused);
    EXPECT_EQ(p.route_sort, e.route_sort);
    EXPECT_EQ(p.from_logits, c.from_logits);
    if (!e.fused) continue;  // the unfused pipeline makes no further choice here
    EXPECT_EQ(p.quantize_in_sort, e.quantize_in_sort);
    EXPECT_EQ(p.sort_single_cta, e.sort_single_cta);
    EXPECT_EQ(p.gather, e.gather);
    EXPECT_EQ(p.permute_token_scales, e.permute_token_scales);
    EXPECT_EQ(p.gemm2.rows_then_combine, e.rows_then_combine);
    EXPECT_EQ(p.load.active, e.active);
    EXPECT_EQ(p.load.rows_per_active, e.rows_per_active);
    EXPECT_EQ(p.rows, e.rows);
    EXPECT_EQ(p.gemm1.config.str(), e.gemm1);
    EXPECT_EQ(p.gemm1.promote_k, e.promote_k);
    EXPECT_EQ(p.gemm1.pair_tail_split, e.tail_split);
    EXPECT_EQ(p.gemm1.dynamic, e.gemm1_dynamic);
    EXPECT_EQ(p.gemm1.one_pass, e.gemm1_one_pass);
    EXPECT_EQ(p.gemm1.a_box_rows, e.a_box_rows);
    EXPECT_EQ(p.gemm1.pdl_early, !e.quantize_in_sort);  // the sort right before GEMM1: wait first
    EXPECT_EQ(p.gemm2.config.str(), e.gemm2);
    EXPECT_EQ(p.gemm2.dynamic, e.gemm2_dynamic);
    if (!e.rows_then_combine) EXPECT_EQ(p.gemm2.a_box_rows, e.a_box_rows);
    // The pinned sizes predate the stream-K flags after the two tile counters (1032 bytes, 256-aligned).
    EXPECT_EQ(p.workspace.bytes, e.workspace_bytes + 1280 - 256);
    ++checked;
  }
  EXPECT_GT(checked, 250);
}

TEST(MoePlan, EveryCaseAndTokenCountIsPinned) {
  const int64_t sweep[] = {1, 2, 3, 8, 9, 17, 64, 100, 256, 585, 586, 1000, 1024, 2048, 4096, 5000, 8192, 16384};
  for (const Case& c : kCases)
    for (int64_t t : sweep) {
      bool found = false;
      for (const Expected& e : kExpected) found = found || (e.t == t && std::string(e.name) == c.name);
      EXPECT_TRUE(found) << c.name << " T=" << t;
    }
}

TEST(MoePlan, WorkspaceHoldsTheSortScratchAndMatchesTheLayersSize) {
  const Case& c = case_named("deepseek-v3");
  const MoeConfig m = layer_config(c);
  const MoePlan p0 = plan_moe_forward(m, 64, true, GemmDeviceLimits{}, 0, Knobs{});
  const MoePlan p1 = plan_moe_forward(m, 64, true, GemmDeviceLimits{}, 1000, Knobs{});
  EXPECT_EQ(p1.workspace.sort_scratch_bytes, 1000u);
  EXPECT_EQ(p1.workspace.a_perm, p0.workspace.a_perm + 1024) << "the scratch, 256-byte aligned, precedes a_perm";
  EXPECT_EQ(p1.workspace.bytes, p0.workspace.bytes + 1024);
  EXPECT_EQ(p1.workspace.bytes, moekit::detail::moe_workspace_plan(64, 8, 7168, 2048, 256, 1000).bytes);
}

// Pre-quantized tokens (the expert-parallel layer's received rows): nothing quantizes, at every T;
// FP8 weights: GEMM1 gathers the rows where they are; MXFP4: they are copied per slot. The other
// choices are the caller-ids plan's. Routing from logits and the unfused pipeline cannot take them.
TEST(MoePlan, PrequantizedTokensAreGatheredInPlace) {
  const Case& c = case_named("deepseek-v3");
  MoeConfig m = layer_config(c);
  m.local_count = 64;
  m.local_offset = 128;
  for (int64_t t : {1, 8, 64, 512, 4096, 16384}) {
    const MoePlan q = plan_moe_forward(m, t, false, GemmDeviceLimits{}, 0, Knobs{}, true);
    const MoePlan ids = plan_moe_forward(m, t, false, GemmDeviceLimits{}, 0, Knobs{});
    EXPECT_TRUE(q.prequantized && q.gather) << t;
    EXPECT_FALSE(q.quantize_in_sort || q.route_sort || q.from_logits) << t;
    EXPECT_EQ(q.gemm1.config.str(), ids.gemm1.config.str()) << t;
    EXPECT_EQ(q.gemm2.rows_then_combine, ids.gemm2.rows_then_combine) << t;
    EXPECT_EQ(q.workspace.bytes, ids.workspace.bytes) << t;
    EXPECT_FALSE(ids.prequantized);
  }
  MoeConfig mx = m;  // MXFP4: the rows are copied per slot (the expansion GEMMs read permuted rows)
  mx.weight_format = moekit::MoeWeightFormat::kMxfp4;
  for (int64_t t : {1, 64, 4096}) {
    const MoePlan q = plan_moe_forward(mx, t, false, GemmDeviceLimits{}, 0, Knobs{}, true);
    EXPECT_TRUE(q.prequantized && !q.gather && !q.permute_token_scales && !q.quantize_in_sort) << t;
    EXPECT_EQ(q.gemm1.config.str(), plan_moe_forward(mx, t, false, GemmDeviceLimits{}, 0, Knobs{}).gemm1.config.str());
  }
  EXPECT_THROW(plan_moe_forward(m, 8, true, GemmDeviceLimits{}, 0, Knobs{}, true), moekit::Error);
  MoeConfig unfused = m;
  unfused.inter = 2016;
  EXPECT_THROW(plan_moe_forward(unfused, 8, false, GemmDeviceLimits{}, 0, Knobs{}, true), moekit::Error);
}

// Tile configurations forced through the knobs (MOEKIT_MOE_GEMM1_CONFIG, ..._GEMM2_CONFIG,
// MOEKIT_GROUPED_CONFIG) replace the heuristic's picks; GEMM1 keeps its 64 x 256 tile.
TEST(MoePlan, ForcedConfigurationsFromTheKnobs) {
  const Case& c = case_named("deepseek-v3");
  Knobs k;
  k.moe_gemm1_config = "m128n128s4g4x66c1";
  k.moe_gemm2_config = "m64n64s6g2x100c1";
  k.grouped_config = "m128n64s6g8x120c1";
  const MoePlan small = plan_for(c, 64, k);
  EXPECT_EQ(small.gemm1.config.str(), "m64n256s4g4x66c1");
  EXPECT_EQ(small.gemm2.config.str(), "m64n64s6g2x100c1");
  const MoePlan large = plan_for(c, 4096, k);
  ASSERT_TRUE(large.gemm2.rows_then_combine);
  EXPECT_EQ(large.gemm2.config.block_n, 64);
  EXPECT_EQ(large.gemm2.config.num_sms, 120);
}

// MOEKIT_DIAG_SKIP (diagnostic builds) changes which launch quantizes, as it did in the forward.
TEST(MoePlan, DiagnosticSkipsOfTheFusedLaunches) {
  const Case& c = case_named("deepseek-v3");
  Knobs k;
  k.diag_skip = "route";
  EXPECT_FALSE(plan_for(c, 1, k).route_sort);
  k.diag_skip = "permute_quant";
  EXPECT_TRUE(plan_for(c, 1, k).route_sort);
  EXPECT_FALSE(plan_for(c, 1, k).quantize_in_sort);
  EXPECT_TRUE(moekit::detail::moe_diag_skip("sort,gemm2_rows", "gemm2_rows"));
  EXPECT_FALSE(moekit::detail::moe_diag_skip("sort,gemm2_rows", "gemm2"));
  EXPECT_FALSE(moekit::detail::moe_diag_skip(std::string(), "sort"));
}

TEST(MoePlan, GemmRequestsOfTheKernelTests) {
  moekit::detail::MoeLoadEstimate e;
  e.active = 8;
  e.rows_per_active = 300;
  moekit::detail::MoeGemmRequest r;
  r.tail_split = 0;
  r.force_dynamic = true;
  const auto g1 = moekit::detail::plan_moe_gemm1(8 * 384, 2048, e, GemmDeviceLimits{}, r);
  EXPECT_EQ(g1.config.multicast, 2);
  EXPECT_FALSE(g1.pair_tail_split);
  EXPECT_TRUE(g1.dynamic);
  EXPECT_TRUE(g1.one_pass);
  r.promote_k = 48;
  EXPECT_THROW(moekit::detail::plan_moe_gemm1(8 * 384, 2048, e, GemmDeviceLimits{}, r), moekit::Error);
}

TEST(MoePlan, DescriptionNamesEveryChoice) {
  const std::string text = moekit::detail::describe_moe_plan(plan_for(case_named("deepseek-v3"), 4096));
  for (const char* key : {"layout", "routing", "sort", "activations", "activation ", "load", "gemm1", "promote_k",
                          "tail_split",
                          "gemm2", "workspace", "m64n256s5g8x132c2", "m128n192s4g8x132c1"})
    EXPECT_NE(text.find(key), std::string::npos) << key << " missing in:\n" << text;
}

}  // namespace

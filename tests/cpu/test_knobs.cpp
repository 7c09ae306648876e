// The environment is read in one module (runtime/knobs.h); these tests pin how it is parsed and that
// the library users link ignores the diagnostic switches.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <utility>

#include "runtime/knobs.h"

namespace {

using moekit::detail::Knobs;
using moekit::detail::parse_knobs;

struct FakeEnv {
  std::map<std::string, std::string> vars;
  const char* operator()(const char* name) const {
    auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  }
};

TEST(Knobs, DefaultsWithNothingSet) {
  const Knobs k = parse_knobs(FakeEnv{}, true);
  EXPECT_EQ(k.cache_dir, "/tmp/moekit-cache");
  EXPECT_FALSE(k.jit_verbose);
  EXPECT_FALSE(k.log_config);
  EXPECT_TRUE(k.grouped_config.empty());
  EXPECT_TRUE(k.moe_gemm1_config.empty());
  EXPECT_TRUE(k.moe_gemm2_config.empty());
  EXPECT_TRUE(k.diag_skip.empty());
  EXPECT_TRUE(k.jit_defines.empty());
}

TEST(Knobs, CacheDirFallsBackInOrder) {
  FakeEnv env{{{"HOME", "/home/u"}}};
  EXPECT_EQ(parse_knobs(env, false).cache_dir, "/home/u/.cache/moekit");
  env.vars["XDG_CACHE_HOME"] = "/xdg";
  EXPECT_EQ(parse_knobs(env, false).cache_dir, "/xdg/moekit");
  env.vars["MOEKIT_CACHE_DIR"] = "/mine";
  EXPECT_EQ(parse_knobs(env, false).cache_dir, "/mine");
  env.vars["MOEKIT_CACHE_DIR"] = "";  // set but empty: as if unset
  EXPECT_EQ(parse_knobs(env, false).cache_dir, "/xdg/moekit");
}

TEST(Knobs, SwitchesAreOnUnlessZero) {
  FakeEnv env{{{"MOEKIT_LOG_CONFIG", "1"}, {"MOEKIT_JIT_VERBOSE", "yes"}}};
  Knobs k = parse_knobs(env, false);
  EXPECT_TRUE(k.log_config);
  EXPECT_TRUE(k.jit_verbose);
  env.vars["MOEKIT_LOG_CONFIG"] = "0";
  env.vars["MOEKIT_JIT_VERBOSE"] = "";
  k = parse_knobs(env, false);
  EXPECT_FALSE(k.log_config);
  EXPECT_FALSE(k.jit_verbose);
}

// MOEKIT_MXFP4_STREAM_K is a GEMM mask (bit 1 GEMM1, bit 2 GEMM2), -1 or unset the plan's choice.
TEST(Knobs, StreamKMaskIsANumberClampedToItsRange) {
  EXPECT_EQ(parse_knobs(FakeEnv{}, false).mxfp4_stream_k, -1);
  for (const auto& [text, mask] : {std::pair<const char*, int>{"2", 2}, {"3", 3}, {"0", 0}, {"-1", -1}, {"9", 3},
                                    {"-5", -1}, {"on", 0}}) {
    const FakeEnv env{{{"MOEKIT_MXFP4_STREAM_K", text}}};
    EXPECT_EQ(parse_knobs(env, false).mxfp4_stream_k, mask) << text;
  }
}

// MOEKIT_MXFP4_K_GROUPS is the same kind of mask (bit 1 GEMM1, bit 2 GEMM2: two K groups per tile).
TEST(Knobs, KGroupsMaskIsANumberClampedToItsRange) {
  EXPECT_EQ(parse_knobs(FakeEnv{}, false).mxfp4_k_groups, -1);
  for (const auto& [text, mask] : {std::pair<const char*, int>{"1", 1}, {"3", 3}, {"0", 0}, {"7", 3}, {"-2", -1}}) {
    const FakeEnv env{{{"MOEKIT_MXFP4_K_GROUPS", text}}};
    EXPECT_EQ(parse_knobs(env, false).mxfp4_k_groups, mask) << text;
  }
}

TEST(Knobs, ConfigOverridesInEveryBuild) {
  const FakeEnv env{{{"MOEKIT_GROUPED_CONFIG", "m128n128s5g8x132c1"},
                     {"MOEKIT_MOE_GEMM1_CONFIG", "m64n256s4g8x132c2"},
                     {"MOEKIT_MOE_GEMM2_CONFIG", "m64n128s6g8x132c1"}}};
  const Knobs k = parse_knobs(env, false);
  EXPECT_EQ(k.grouped_config, "m128n128s5g8x132c1");
  EXPECT_EQ(k.moe_gemm1_config, "m64n256s4g8x132c2");
  EXPECT_EQ(k.moe_gemm2_config, "m64n128s6g8x132c1");
}

TEST(Knobs, DiagnosticsOnlyInADiagnosticBuild) {
  const FakeEnv env{{{"MOEKIT_DIAG_SKIP", "gemm1_swiglu,combine"},
                     {"MOEKIT_JIT_DEFINES", "MOEKIT_DIAG_NO_LOADS=1"},
                     {"MOEKIT_TRACE_GEMM", "masked"},
                     {"MOEKIT_TRACE_DUMP", "/tmp/t.txt"}}};
  std::string ignored;
  const Knobs user = parse_knobs(env, false, &ignored);
  EXPECT_TRUE(user.diag_skip.empty());
  EXPECT_TRUE(user.jit_defines.empty());
  EXPECT_TRUE(user.trace_gemm.empty());
  EXPECT_TRUE(user.trace_dump.empty());
  EXPECT_EQ(ignored, "MOEKIT_DIAG_SKIP, MOEKIT_JIT_DEFINES, MOEKIT_TRACE_GEMM, MOEKIT_TRACE_DUMP");

  ignored.clear();
  const Knobs diag = parse_knobs(env, true, &ignored);
  EXPECT_EQ(diag.diag_skip, "gemm1_swiglu,combine");
  EXPECT_EQ(diag.jit_defines, "MOEKIT_DIAG_NO_LOADS=1");
  EXPECT_EQ(diag.trace_gemm, "masked");
  EXPECT_EQ(diag.trace_dump, "/tmp/t.txt");
  EXPECT_TRUE(ignored.empty());
}

TEST(Knobs, ScopedOverrideRestores) {
  const std::string before = moekit::detail::knobs().grouped_config;
  {
    Knobs k = moekit::detail::knobs();
    k.grouped_config = "m64n64s8g8x132c1";
    moekit::detail::ScopedKnobs scope(k);
    EXPECT_EQ(moekit::detail::knobs().grouped_config, "m64n64s8g8x132c1");
  }
  EXPECT_EQ(moekit::detail::knobs().grouped_config, before);
}

}  // namespace

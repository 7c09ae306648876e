// Compile-checks the run-time compiled kernels with NVRTC (no GPU needed), so CI catches a
// kernel that no longer compiles for sm_90a, and checks the disk cache.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <set>
#include <string>
#include <tuple>

#include "gemm/gemm_launch.h"
#include "moe/moe_gemm.h"
#include "moekit/error.h"
#include "moekit/moe_layer.h"
#include "planning/moe_plan.h"
#include "runtime/jit.h"
#include "runtime/knobs.h"

namespace {

// A fresh cache directory for this process, so every compile here really runs NVRTC.
class JitEnv : public ::testing::Environment {
 public:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("moekit-jit-test-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
    setenv("MOEKIT_CACHE_DIR", dir_.c_str(), 1);
  }
  void TearDown() override {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  std::filesystem::path dir_;
};
const auto* const kEnv = ::testing::AddGlobalTestEnvironment(new JitEnv);

bool has_elf_magic(const std::vector<char>& b) {
  return b.size() > 4 && b[0] == 0x7f && b[1] == 'E' && b[2] == 'L' && b[3] == 'F';
}

// The machine code of a cubin: its .text.* sections (ELF64), name and bytes, in section order. Two
// sources that compile to the same kernels give equal results even where data sections differ.
std::vector<std::pair<std::string, std::string>> cubin_code(const std::vector<char>& b) {
  auto rd = [&](size_t off, size_t n) {
    uint64_t v = 0;
    if (off + n > b.size()) throw std::runtime_error("truncated cubin");
    std::memcpy(&v, b.data() + off, n);  // little-endian, as the cubin
    return v;
  };
  const uint64_t shoff = rd(0x28, 8), shentsize = rd(0x3a, 2), shnum = rd(0x3c, 2), shstrndx = rd(0x3e, 2);
  auto field = [&](uint64_t i, size_t off, size_t n) { return rd(size_t(shoff + i * shentsize + off), n); };
  const uint64_t names = field(shstrndx, 0x18, 8);
  std::vector<std::pair<std::string, std::string>> out;
  for (uint64_t i = 0; i < shnum; ++i) {
    const std::string name(b.data() + names + field(i, 0x0, 4));
    if (name.rfind(".text.", 0) != 0) continue;
    const uint64_t off = field(i, 0x18, 8), size = field(i, 0x20, 8);
    if (off + size > b.size()) throw std::runtime_error("truncated cubin");
    out.emplace_back(name, std::string(b.data() + off, size));
  }
  return out;
}

// Compiles and checks the cubin and the compiler's messages: no ptxas wgmma advisory (C75xx:
// C7514 "wgmma.mma_async instructions are serialized", C7517 "warpgroup.wait is injected"), which
// would mean the mainloop's MMAs no longer overlap its FP32 work (docs/performance.md §Warp-uniform descriptors and the wgmma serialization guard).
void expect_compiles_clean(const std::string& src, const std::string& entry) {
  std::vector<char> cubin;
  ASSERT_NO_THROW(cubin = moekit::jit::compile_cubin(src, entry));
  EXPECT_TRUE(has_elf_magic(cubin));
  const std::string log = moekit::jit::compile_log(src, entry);
  EXPECT_EQ(log.find("(C75"), std::string::npos) << log;
}

}  // namespace

// One configuration per code path of the family: one or two math warpgroups, uniform or two B
// scales per tile, each D swizzle width (32/64/128 bytes).
TEST(Jit, DenseGemmFamilyCompilesForSm90a) {
  const moekit::GemmConfig configs[] = {
      {64, 16, 8, 1, 132, 1},    // 1 WG, 32-byte D swizzle
      {64, 56, 8, 1, 132, 1},    // 1 WG, unswizzled D (odd multiple of 8)
      {64, 96, 6, 1, 132, 2},    // 1 WG, 64-byte swizzle, two B scales, B multicast
      {128, 128, 5, 8, 132, 1},  // 2 WG, 128-byte swizzle
      {128, 160, 4, 8, 132, 2},  // 2 WG, tile wider than a scale block, B multicast
      {64, 64, 8, 1, 132, 1, 4},   // 1 WG, split-K over a cluster of 4 (DSMEM reduction)
      {128, 96, 5, 1, 128, 1, 2},  // 2 WG, two B scales, split-K over 2
  };
  for (const auto& c : configs) {
    std::string entry;
    const std::string src = moekit::detail::fp8_gemm_kernel_source(c, moekit::detail::Fp8GemmKernel::kDense, &entry);
    SCOPED_TRACE(entry);
    expect_compiles_clean(src, entry);
  }
}

// The grouped families: same mainloop, contiguous and masked schedulers, row-masked epilogue.
TEST(Jit, GroupedGemmFamiliesCompileForSm90a) {
  using moekit::detail::Fp8GemmKernel;
  for (Fp8GemmKernel body : {Fp8GemmKernel::kContiguous, Fp8GemmKernel::kMasked})
    for (const moekit::GemmConfig& c : {moekit::GemmConfig{128, 128, 5, 8, 132, 1}, moekit::GemmConfig{64, 48, 8, 1, 132, 1}}) {
      std::string entry;
      const std::string src = moekit::detail::fp8_gemm_kernel_source(c, body, &entry);
      SCOPED_TRACE(entry);
      expect_compiles_clean(src, entry);
    }
}

// The direct-store bf16 epilogue (GemmConfig::direct_store): quad groups of 8-column chunks, whole
// (n128: 16 chunks) and partial (n120: 15, n56: 7, n24: 3, n144: 18), two waves (256-row tiles),
// pairs sharing A, split-K, and both grouped schedulers.
TEST(Jit, DirectStoreCompilesForSm90a) {
  using moekit::detail::Fp8GemmKernel;
  struct Case {
    Fp8GemmKernel body;
    moekit::GemmConfig c;
  };
  const Case cases[] = {
      {Fp8GemmKernel::kDense, {256, 128, 4, 4, 132, 1}},  {Fp8GemmKernel::kDense, {128, 120, 6, 8, 132, 1}},
      {Fp8GemmKernel::kDense, {64, 56, 8, 1, 132, 1}},    {Fp8GemmKernel::kDense, {128, 144, 5, 8, 132, 1}},
      {Fp8GemmKernel::kDense, {256, 128, 4, 4, 132, 2}},  {Fp8GemmKernel::kDense, {64, 24, 8, 1, 132, 1, 4}},
      {Fp8GemmKernel::kMasked, {256, 128, 4, 4, 132, 1}}, {Fp8GemmKernel::kMasked, {128, 128, 6, 8, 132, 1}},
      {Fp8GemmKernel::kContiguous, {256, 128, 4, 8, 132, 1}},
  };
  for (Case x : cases) {
    x.c.direct_store = true;
    std::string entry;
    const std::string src = moekit::detail::fp8_gemm_kernel_source(x.c, x.body, &entry);
    SCOPED_TRACE(entry);
    EXPECT_EQ(entry.back(), 'r');  // its own kernel (and cache entry)
    expect_compiles_clean(src, entry);
  }
}

// The MoE layer's fused GEMMs: GEMM1 (two warpgroups along N, 64-row B scales, SwiGLU + FP8
// requant epilogue; A by TMA or gathered by token) and GEMM2 (scatter-add epilogue).
TEST(Jit, MoeGemmFamiliesCompileForSm90a) {
  using moekit::detail::Fp8GemmKernel;
  moekit::detail::Fp8GemmFamily family;
  struct Case {
    Fp8GemmKernel body;
    moekit::GemmConfig c;
    int wg_n;
    int promote_k;
  };
  const Case cases[] = {{Fp8GemmKernel::kMoeGemm1Swiglu, {64, 256, 5, 8, 132, 1}, 2, 128},
                        {Fp8GemmKernel::kMoeGemm1Swiglu, {64, 256, 5, 8, 132, 1}, 2, 64},  // chains of 64 of K
                        {Fp8GemmKernel::kMoeGemm1Swiglu, {64, 256, 4, 1, 132, 1}, 2, 32},  // chains of 32
                        {Fp8GemmKernel::kMoeGemm1Swiglu, {64, 256, 5, 8, 132, 2}, 2, 64},  // B multicast pairs
                        {Fp8GemmKernel::kMoeGemm1SwigluGather, {64, 256, 5, 8, 132, 1}, 2, 32},  // A by token
                        {Fp8GemmKernel::kMoeGemm1SwigluGather, {64, 256, 5, 8, 132, 2}, 2, 64},
                        {Fp8GemmKernel::kMoeGemm2Scatter, {128, 128, 6, 8, 132, 1}, 1, 128},
                        {Fp8GemmKernel::kMoeGemm2Scatter, {64, 160, 6, 1, 132, 1}, 1, 128}};
  for (const Case& k : cases) {
    family.wg_n = k.wg_n;
    family.promote_k = k.promote_k;
    std::string entry;
    const std::string src = moekit::detail::fp8_gemm_kernel_source(k.c, k.body, &entry, family);
    SCOPED_TRACE(entry);
    expect_compiles_clean(src, entry);
  }
}

// The MXFP4-weight bodies (kernels/sm90/mxfp4_loader.cuh: raw slots expanded into the B stages by
// a second producer warpgroup): GEMM1 with each accumulation chain and in B-sharing pairs, GEMM2
// scatter and the bf16 contiguous GEMM (the rows GEMM2), tiles of 64 to 256 rows and widths that
// straddle scale blocks.
TEST(Jit, Mxfp4BodiesCompileForSm90a) {
  using moekit::detail::Fp8GemmKernel;
  struct Case {
    Fp8GemmKernel body;
    moekit::GemmConfig c;
    int wg_n, promote_k, mx_stages;
  };
  const Case cases[] = {{Fp8GemmKernel::kMoeGemm1SwigluMxfp4, {64, 256, 2, 8, 132, 1}, 2, 32, 6},
                        {Fp8GemmKernel::kMoeGemm1SwigluMxfp4, {64, 256, 3, 8, 132, 1}, 2, 64, 4},
                        {Fp8GemmKernel::kMoeGemm1SwigluMxfp4, {64, 256, 3, 8, 132, 1}, 2, 128, 4},
                        {Fp8GemmKernel::kMoeGemm1SwigluMxfp4, {64, 256, 3, 8, 132, 2}, 2, 64, 11},
                        {Fp8GemmKernel::kMoeGemm2ScatterMxfp4, {64, 128, 3, 1, 132, 1}, 1, 128, 8},
                        {Fp8GemmKernel::kMoeGemm2ScatterMxfp4, {128, 160, 3, 8, 132, 1}, 1, 128, 4},
                        {Fp8GemmKernel::kContiguousMxfp4, {256, 128, 2, 8, 132, 1}, 1, 128, 4}};
  for (const Case& k : cases) {
    moekit::detail::Fp8GemmFamily family;
    family.wg_n = k.wg_n;
    family.promote_k = k.promote_k;
    family.mx_stages = k.mx_stages;
    std::string entry;
    const std::string src = moekit::detail::fp8_gemm_kernel_source(k.c, k.body, &entry, family);
    SCOPED_TRACE(entry);
    EXPECT_NE(entry.find("x" + std::to_string(k.mx_stages)), std::string::npos);
    expect_compiles_clean(src, entry);
  }
  // An MXFP4 body needs raw slots, and pairs only on GEMM1 (64-row tiles sharing B); the FP8 bodies
  // take none.
  moekit::detail::Fp8GemmFamily family;
  std::string entry;
  family.wg_n = 2;
  EXPECT_THROW(moekit::detail::fp8_gemm_kernel_source({64, 256, 3, 8, 132, 1}, Fp8GemmKernel::kMoeGemm1SwigluMxfp4,
                                                      &entry, family),
               moekit::Error);
  family.mx_stages = 4;
  family.wg_n = 1;
  EXPECT_THROW(moekit::detail::fp8_gemm_kernel_source({256, 128, 2, 8, 132, 2}, Fp8GemmKernel::kContiguousMxfp4,
                                                      &entry, family),
               moekit::Error);
  EXPECT_THROW(moekit::detail::fp8_gemm_kernel_source({64, 128, 3, 8, 132, 2}, Fp8GemmKernel::kContiguousMxfp4,
                                                      &entry, family),
               moekit::Error);
  family.wg_n = 2;
  EXPECT_THROW(moekit::detail::fp8_gemm_kernel_source({128, 256, 3, 8, 132, 2}, Fp8GemmKernel::kMoeGemm1SwigluMxfp4,
                                                      &entry, family),
               moekit::Error);
  EXPECT_THROW(
      moekit::detail::fp8_gemm_kernel_source({64, 256, 3, 8, 132, 1}, Fp8GemmKernel::kMoeGemm1Swiglu, &entry, family),
      moekit::Error);
}

// The MXFP4 decode bodies' variants (stream-K pieces, two K groups, gathered A) compile cleanly, and
// the combinations they cannot run are refused.
TEST(Jit, Mxfp4DecodeVariantsCompileForSm90a) {
  using moekit::detail::Fp8GemmKernel;
  struct Case {
    Fp8GemmKernel body;
    int tokens, rows, slots, k_groups;
    bool stream_k, gather;
  };
  const Case cases[] = {{Fp8GemmKernel::kMoeGemm1SwigluMxfp4Decode, 8, 256, 10, 2, false, false},
                        {Fp8GemmKernel::kMoeGemm1SwigluMxfp4Decode, 8, 256, 10, 2, false, true},
                        {Fp8GemmKernel::kMoeGemm1SwigluMxfp4Decode, 8, 256, 10, 1, false, true},
                        {Fp8GemmKernel::kMoeGemm1SwigluMxfp4Decode, 8, 256, 10, 2, true, false},
                        {Fp8GemmKernel::kMoeGemm2ScatterMxfp4Decode, 8, 256, 10, 2, true, false},
                        {Fp8GemmKernel::kMoeGemm2ScatterMxfp4Decode, 8, 128, 10, 2, false, false}};
  auto family_of = [](const Case& k) {
    moekit::detail::Fp8GemmFamily f;
    const bool g1 = k.body == Fp8GemmKernel::kMoeGemm1SwigluMxfp4Decode;
    f.wg_n = g1 ? 2 : 1;
    f.sb_rows = g1 ? 64 : 128;
    f.promote_k = g1 ? 64 : 128;
    f.epilogue_smem = g1 ? moekit::sm90::gemm_mx_decode_swiglu_smem(k.tokens) : 0u;
    f.mx_stages = k.slots;
    f.mx_decode = true;
    f.stream_k = k.stream_k;
    f.k_groups = k.k_groups;
    f.a_gather = k.gather;
    f.a_box_rows = k.gather ? 1 : 0;
    return f;
  };
  for (const Case& k : cases) {
    std::string entry;
    const std::string src = moekit::detail::fp8_gemm_kernel_source({k.tokens, k.rows, k.slots, 8, 132, 1}, k.body,
                                                                   &entry, family_of(k));
    SCOPED_TRACE(entry);
    EXPECT_EQ(entry.find("g2") != std::string::npos, k.k_groups == 2);
    EXPECT_EQ(entry.find("ga") != std::string::npos, k.gather);
    expect_compiles_clean(src, entry);
  }
  // Two K groups run 8-token tiles with an even ring, gathered A 8-token tiles of GEMM1 in whole
  // tiles.
  const Case refused[] = {{Fp8GemmKernel::kMoeGemm1SwigluMxfp4Decode, 16, 256, 10, 2, false, false},
                          {Fp8GemmKernel::kMoeGemm1SwigluMxfp4Decode, 16, 256, 10, 1, false, true},
                          {Fp8GemmKernel::kMoeGemm1SwigluMxfp4Decode, 8, 256, 10, 1, true, true},
                          {Fp8GemmKernel::kMoeGemm2ScatterMxfp4Decode, 8, 256, 10, 1, false, true},
                          {Fp8GemmKernel::kMoeGemm1SwigluMxfp4Decode, 8, 256, 11, 2, false, false},
                          {Fp8GemmKernel::kMoeGemm1SwigluMxfp4, 64, 256, 4, 2, false, false}};
  for (const Case& k : refused) {
    std::string entry;
    moekit::detail::Fp8GemmFamily f = family_of(k);
    if (k.body == Fp8GemmKernel::kMoeGemm1SwigluMxfp4) f.mx_decode = false;
    EXPECT_THROW(moekit::detail::fp8_gemm_kernel_source({k.tokens, k.rows, k.slots, 8, 132, 1}, k.body, &entry, f),
                 moekit::Error)
        << k.tokens << " tokens, " << k.k_groups << " K groups, gather " << k.gather;
  }
}

// The fused GEMMs the MoE layer's plans launch (moe_gemm_kernel_sources, what `moekit jit warm
// --moe` compiles), FP8 and MXFP4 weights, decode to prefill sizes: each compiles cleanly.
TEST(Jit, PlannedMoeGemmsCompileForSm90a) {
  std::set<std::string> entries;
  for (const bool mx : {false, true})
    for (const auto& [e, k, h, inter] : {std::tuple{256, 8, 7168L, 2048L}, std::tuple{128, 4, 2880L, 2880L}})
      for (const int64_t t : {1, 4096, 16384}) {
        moekit::MoeConfig c;
        c.num_experts = e;
        c.top_k = k;
        c.hidden = h;
        c.inter = inter;
        c.local_count = e;
        if (mx) c.weight_format = moekit::MoeWeightFormat::kMxfp4;
        const auto plan = moekit::detail::plan_moe_forward(c, t, false, moekit::detail::GemmDeviceLimits{}, 0,
                                                           moekit::detail::Knobs{});
        const auto sources = moekit::detail::moe_gemm_kernel_sources(plan);
        ASSERT_EQ(sources.size(), 2u);
        for (const auto& [entry, src] : sources) {
          EXPECT_EQ(entry.find("mxfp4") != std::string::npos, mx) << entry;
          if (!entries.insert(entry).second) continue;
          SCOPED_TRACE(entry);
          expect_compiles_clean(src, entry);
        }
      }
  EXPECT_GE(entries.size(), 8u);
}

// The K-loop experiments that diagnostic builds switch on through MOEKIT_JIT_DEFINES
// (docs/environment.md): each compiles cleanly on every schedule it touches and changes the code of
// those it applies to (the early wait: two waves, alone and in A-sharing pairs, the serial and the
// chained schedules; the K rotation: tiles without split-K, gathered A or MXFP4 B), and of no other.
TEST(Jit, KLoopExperimentsCompileForSm90a) {
  using moekit::detail::Fp8GemmKernel;
  struct Case {
    const char* define;
    Fp8GemmKernel body;
    moekit::GemmConfig c;
    int promote_k;  // the MoE GEMM1's chains (two warpgroups along N)
    bool changes;
  };
  constexpr const char* kWait = "MOEKIT_KLOOP_EARLY_WAIT";
  constexpr const char* kRotate = "MOEKIT_K_ROTATE";
  const Case cases[] = {
      {kWait, Fp8GemmKernel::kDense, {256, 128, 3, 8, 132, 1}, 0, true},
      {kWait, Fp8GemmKernel::kDense, {256, 128, 3, 8, 132, 2}, 0, true},
      {kWait, Fp8GemmKernel::kDense, {128, 192, 4, 8, 132, 1}, 0, true},
      {kWait, Fp8GemmKernel::kDense, {128, 128, 5, 8, 132, 1}, 0, false},  // pipelined: unchanged
      {kWait, Fp8GemmKernel::kMoeGemm1Swiglu, {64, 256, 5, 8, 132, 2}, 64, true},
      {kWait, Fp8GemmKernel::kMoeGemm1SwigluMxfp4, {64, 256, 3, 8, 132, 1}, 64, true},
      {kWait, Fp8GemmKernel::kMoeGemm1SwigluGather, {64, 256, 5, 8, 132, 1}, 32, true},  // A by token
      {kRotate, Fp8GemmKernel::kDense, {64, 32, 16, 1, 132, 1}, 0, true},
      {kRotate, Fp8GemmKernel::kDense, {256, 128, 3, 8, 132, 2}, 0, true},
      {kRotate, Fp8GemmKernel::kDense, {64, 64, 8, 1, 132, 1, 2}, 0, false},  // split-K: no rotation
      {kRotate, Fp8GemmKernel::kMoeGemm1SwigluGather, {64, 256, 5, 8, 132, 1}, 64, false},
  };
  for (const Case& k : cases) {
    moekit::detail::Fp8GemmFamily family;
    if (k.promote_k) {
      family.wg_n = 2;
      family.promote_k = k.promote_k;
    }
    if (k.body == Fp8GemmKernel::kMoeGemm1SwigluMxfp4) family.mx_stages = 4;
    std::string entry;
    const std::string base = moekit::detail::fp8_gemm_kernel_source(k.c, k.body, &entry, family);
    const std::string src = std::string("#define ") + k.define + " 1\n" + base;
    SCOPED_TRACE(std::string(k.define) + " " + entry);
    expect_compiles_clean(src, entry);
    const auto code = cubin_code(moekit::jit::compile_cubin(src, entry));
    ASSERT_FALSE(code.empty());
    EXPECT_EQ(code != cubin_code(moekit::jit::compile_cubin(base, entry)), k.changes);
  }
}

TEST(Jit, DiskCacheIsReused) {
  const moekit::GemmConfig c{64, 32, 4, 1, 132};
  std::string entry;
  const std::string src = moekit::detail::fp8_gemm_kernel_source(c, moekit::detail::Fp8GemmKernel::kDense, &entry);
  const auto first = moekit::jit::compile_cubin(src, entry);
  size_t files = 0;
  for (const auto& f : std::filesystem::directory_iterator(moekit::jit::cache_dir()))
    files += f.path().filename().string().rfind(entry, 0) == 0 && f.path().extension() == ".cubin";
  EXPECT_EQ(files, 1u);
  const auto second = moekit::jit::compile_cubin(src, entry);
  EXPECT_EQ(first, second);
}

TEST(Jit, CompileErrorsAreReported) {
  try {
    moekit::jit::compile_cubin("this is not C++", "broken_kernel");
    FAIL() << "expected a compile error";
  } catch (const moekit::Error& e) {
    EXPECT_EQ(e.code(), moekit::ErrorCode::kCompileError);
    EXPECT_NE(std::string(e.what()).find("broken_kernel"), std::string::npos);
  }
}

// The launch machinery shared by every FP8 GEMM family: the kernel table, the NVRTC source of a
// configuration, TMA descriptors, the launch itself and its diagnostic trace.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "common/check.h"
#include "gemm/gemm_launch.h"
#include "gemm/heuristic.h"
#include "kernels/sm90/fp8_gemm_layout.cuh"
#include "moekit/numerics.h"
#include "runtime/driver.h"
#include "runtime/jit.h"
#include "runtime/knobs.h"
#include "runtime/pdl.h"

namespace moekit::detail {

const Fp8GemmKernelInfo& fp8_gemm_kernel_info(Fp8GemmKernel kernel) {
  // Body, entry header, parameter struct (name, bytes), split-K, direct store, promote_k argument, MXFP4 B.
  static const Fp8GemmKernelInfo table[] = {
      {"fp8_gemm_dense", "kernels/sm90/gemm.cuh", "DenseGemmParams", sizeof(sm90::DenseGemmParams), true, true,
       false, false},
      {"fp8_gemm_contiguous", "kernels/sm90/grouped_gemm.cuh", "GroupedGemmParams", sizeof(sm90::GroupedGemmParams),
       false, true, false, false},
      {"fp8_gemm_masked", "kernels/sm90/grouped_gemm.cuh", "GroupedGemmParams", sizeof(sm90::GroupedGemmParams),
       false, true, false, false},
      {"moe_gemm1_swiglu_contiguous", "kernels/sm90/moe_gemm.cuh", "MoeGemm1Params", sizeof(sm90::MoeGemm1Params),
       false, false, true, false},
      {"moe_gemm1_swiglu_gather_contiguous", "kernels/sm90/moe_gemm.cuh", "MoeGemm1Params",
       sizeof(sm90::MoeGemm1Params), false, false, true, false},
      {"moe_gemm2_scatter_contiguous", "kernels/sm90/moe_gemm.cuh", "MoeGemm2Params", sizeof(sm90::MoeGemm2Params),
       false, false, false, false},
      {"fp8_gemm_contiguous_mxfp4", "kernels/sm90/grouped_gemm.cuh", "GroupedGemmParams",
       sizeof(sm90::GroupedGemmParams), false, true, false, true},
      {"moe_gemm1_swiglu_mxfp4", "kernels/sm90/moe_gemm.cuh", "MoeGemm1Params", sizeof(sm90::MoeGemm1Params), false,
       false, true, true},
      {"moe_gemm2_scatter_mxfp4", "kernels/sm90/moe_gemm.cuh", "MoeGemm2Params", sizeof(sm90::MoeGemm2Params),
       false, false, false, true},
      {"moe_gemm1_swiglu_mxfp4_decode", "kernels/sm90/moe_gemm.cuh", "MoeGemm1Params", sizeof(sm90::MoeGemm1Params),
       false, false, true, true, true},
      {"moe_gemm2_scatter_mxfp4_decode", "kernels/sm90/moe_gemm.cuh", "MoeGemm2Params", sizeof(sm90::MoeGemm2Params),
       false, false, false, true, true},
  };
  static_assert(sizeof(table) / sizeof(table[0]) == size_t(Fp8GemmKernel::kCount));
  const auto i = static_cast<size_t>(kernel);
  MOEKIT_REQUIRE(i < size_t(Fp8GemmKernel::kCount), ErrorCode::kInvalidArgument, "moekit: unknown GEMM kernel ", i);
  return table[i];
}

CUtensorMap make_tma_2d(CUtensorMapDataType dtype, size_t elem_bytes, const void* ptr, uint64_t inner,
                        uint64_t outer, uint64_t row_stride_elems, uint32_t box_inner, uint32_t box_outer,
                        CUtensorMapSwizzle swizzle) {
  CUtensorMap map;
  std::memset(&map, 0, sizeof map);
  const cuuint64_t dims[2] = {inner, outer};
  const cuuint64_t strides[1] = {row_stride_elems * elem_bytes};
  const cuuint32_t box[2] = {box_inner, box_outer};
  const cuuint32_t elem_strides[2] = {1, 1};
  check_cu(driver().tensorMapEncodeTiled(&map, dtype, 2, const_cast<void*>(ptr), dims, strides, box, elem_strides,
                                         CU_TENSOR_MAP_INTERLEAVE_NONE, swizzle, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                                         CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE),
           "cuTensorMapEncodeTiled");
  return map;
}

CUtensorMapSwizzle swizzle_for_bytes(unsigned bytes) {
  switch (bytes) {
    case 128: return CU_TENSOR_MAP_SWIZZLE_128B;
    case 64: return CU_TENSOR_MAP_SWIZZLE_64B;
    case 32: return CU_TENSOR_MAP_SWIZZLE_32B;
    default: return CU_TENSOR_MAP_SWIZZLE_NONE;
  }
}

namespace {

// knobs().jit_defines ("NAME=VALUE[,| ]..."; a diagnostic build only): one #define per item, and
// the suffix of the entry names, a hash of the list, so the in-process kernel table and the disk
// cache keep the variants apart.
std::pair<std::string, std::string> jit_defines() {
  std::pair<std::string, std::string> d;
  const std::string& v = knobs().jit_defines;
  if (v.empty()) return d;
  std::string item;
  for (const char* q = v.c_str();; ++q) {
    if (*q == ' ' || *q == ',' || *q == '\0') {
      if (const size_t eq = item.find('='); !item.empty()) {
        d.first += eq == std::string::npos ? concat("#define ", item, "\n")
                                           : concat("#define ", item.substr(0, eq), " ", item.substr(eq + 1), "\n");
      }
      item.clear();
      if (*q == '\0') break;
    } else {
      item += *q;
    }
  }
  d.second = concat("_d", std::hash<std::string>{}(d.first) % 1000000007u);
  return d;
}

}  // namespace

std::string fp8_gemm_kernel_source(const GemmConfig& c, Fp8GemmKernel kernel, std::string* entry,
                                   const Fp8GemmFamily& family) {
  const Fp8GemmKernelInfo& info = fp8_gemm_kernel_info(kernel);
  const char* body = info.body;
  const bool finer = family.promote_k != 128;
  const bool split = c.split_k > 1;
  const bool direct = c.direct_store;
  MOEKIT_REQUIRE(!split || (info.split_k && !finer), ErrorCode::kInvalidArgument, "moekit: configuration ", c.str(),
                 ": split-K runs only the dense GEMM");
  MOEKIT_REQUIRE(!direct || info.direct_store, ErrorCode::kInvalidArgument, "moekit: configuration ", c.str(),
                 ": direct stores (r) apply only to the bf16 GEMMs, not to ", body);
  MOEKIT_REQUIRE(!finer || info.promote_k, ErrorCode::kInvalidArgument, "moekit: ", body,
                 " runs tensor-core chains of 128 only, not ", family.promote_k);
  MOEKIT_REQUIRE(info.mx == (family.mx_stages > 0) && family.mx_stages <= 16 &&
                     (!info.mx || (c.block_n % 32 == 0 &&
                                   (c.multicast == 1 ||
                                    (kernel == Fp8GemmKernel::kMoeGemm1SwigluMxfp4 && mxfp4_pairs_fit(c))))),
                 ErrorCode::kInvalidArgument, "moekit: configuration ", c.str(), " with ", family.mx_stages,
                 " MXFP4 raw slots does not fit ", body,
                 " (MXFP4 bodies need 1..16 raw slots, BLOCK_N a multiple of 32, single CTAs or, for GEMM1, "
                 "B-sharing pairs of 64-row tiles; the others none)");
  MOEKIT_REQUIRE(info.mx_decode == family.mx_decode &&
                     (!info.mx_decode || sm90::gemm_mx_decode_supported(c.block_m, c.block_n)),
                 ErrorCode::kInvalidArgument, "moekit: configuration ", c.str(), " does not fit ", body,
                 " (the MXFP4 decode bodies run 8, 16 or 32 tokens x 128 or 256 weight rows; the others none)");
  MOEKIT_REQUIRE(!family.stream_k || info.mx_decode, ErrorCode::kInvalidArgument, "moekit: ", body,
                 " has no stream-K form (only the MXFP4 decode bodies)");
  MOEKIT_REQUIRE(family.k_groups == 1 ||
                     (info.mx_decode && sm90::gemm_mx_decode_k_groups_supported(c.block_m, family.k_groups) &&
                      c.stages % 2 == 0 && family.mx_stages == c.stages),
                 ErrorCode::kInvalidArgument, "moekit: ", family.k_groups, " K groups do not fit ", body, " on ",
                 c.str(), " (two K groups: the MXFP4 decode bodies on 8-token tiles with an even ring)");
  MOEKIT_REQUIRE(!family.a_gather || (kernel == Fp8GemmKernel::kMoeGemm1SwigluMxfp4Decode && c.block_m == 8 &&
                                       family.a_box_rows == 1 && !family.stream_k),
                 ErrorCode::kInvalidArgument, "moekit: configuration ", c.str(), " of ", body,
                 " cannot gather A (the MXFP4 decode GEMM1 on 8-token tiles, one-row A boxes, no stream-K)");
  // The decode bodies take kStreamK, kKGroups and kGatherA after the raw slots.
  const std::string mx = info.mx ? concat(", ", family.mx_stages,
                                          info.mx_decode ? concat(family.stream_k ? ", true, " : ", false, ",
                                                                  family.k_groups, family.a_gather ? ", true" : ", false")
                                                         : std::string())
                                 : std::string();
  // The bf16 bodies' last template argument (kDirectStore); the dense body's split-K count precedes it.
  const bool split_arg = info.split_k && (split || direct);
  const std::pair<std::string, std::string> defines = jit_defines();
  *entry = concat("moekit_", body, "_m", c.block_m, "n", c.block_n, "s", c.stages, "c", c.multicast,
                  info.mx ? concat("x", family.mx_stages) : std::string(), finer ? concat("p", family.promote_k) : std::string(), split ? concat("k", c.split_k) : std::string(),
                  family.stream_k ? "sk" : "", family.k_groups > 1 ? concat("g", family.k_groups) : std::string(),
                  family.a_gather ? "ga" : "",
                  direct ? "r" : "", defines.second);
  return concat(defines.first, "#include \"", info.header, "\"\n", "extern \"C\" __global__ void __launch_bounds__(",
                fp8_gemm_threads(c, family), ", 1)\n", *entry,
                "(const __grid_constant__ moekit::ptx::TmaDescriptor tma_a,\n"
                " const __grid_constant__ moekit::ptx::TmaDescriptor tma_b,\n"
                " const __grid_constant__ moekit::ptx::TmaDescriptor tma_sfa,\n"
                " const __grid_constant__ moekit::ptx::TmaDescriptor tma_d,\n"
                " const moekit::sm90::",
                info.params, " params) {\n  moekit::sm90::", body, "<", c.block_m, ", ", c.block_n, ", ", c.stages,
                ", ", c.multicast, mx, finer ? concat(", ", family.promote_k) : std::string(),
                split_arg ? concat(", ", c.split_k) : std::string(), direct ? ", true" : "",
                ">(tma_a, tma_b, tma_sfa, tma_d, params);\n}\n");
}

int fp8_gemm_threads(const GemmConfig& c, const Fp8GemmFamily& family) {
  return family.mx_decode ? sm90::gemm_mx_decode_threads(family.k_groups)
                          : sm90::gemm_num_threads(c.block_m, family.wg_n, family.mx_stages > 0);
}

unsigned fp8_gemm_smem_bytes(const GemmConfig& c, const Fp8GemmFamily& family) {
  if (family.mx_decode)
    return sm90::gemm_mx_decode_smem_bytes(family.epilogue_smem == ~0u ? 0u : family.epilogue_smem, c.block_m,
                                           c.block_n, family.sb_rows, c.stages, family.mx_stages, family.k_groups);
  const unsigned staging = family.epilogue_smem == ~0u
                              ? sm90::gemm_bf16_staging_bytes(c.block_m, c.block_n, c.direct_store)
                              : family.epilogue_smem;
  return sm90::gemm_smem_bytes_with(staging, c.block_m, c.block_n, c.stages, c.split_k, family.mx_stages,
                                    family.mx_stages ? c.multicast : 1);
}

namespace {
// Per-CTA timestamps of one launch (see GemmParams::trace): min / median / max over the CTAs of
// each event relative to the earliest entry, and of the gaps between consecutive events.
void print_gemm_trace(unsigned long long* trace, unsigned ctas, const char* body, const GemmConfig& c,
                      cudaStream_t stream) {
  constexpr unsigned kSlots = sm90::kGemmTraceSlots;
  std::vector<unsigned long long> h(size_t(ctas) * kSlots);
  MOEKIT_CUDA_CHECK(cudaMemcpyAsync(h.data(), trace, h.size() * sizeof(h[0]), cudaMemcpyDeviceToHost, stream));
  MOEKIT_CUDA_CHECK(cudaStreamSynchronize(stream));
  cudaFree(trace);
  unsigned long long t0 = ~0ull;
  for (unsigned i = 0; i < ctas; ++i) t0 = std::min(t0, h[kSlots * i]);
  constexpr unsigned kStamps = 6;
  const char* names[kStamps] = {"entry", "scheduled", "first_stage", "mma_done", "epi_issued", "exit"};
  auto summary = [](std::vector<double> v) {
    if (v.empty()) return std::string("-");
    std::sort(v.begin(), v.end());
    return concat(v.front(), "/", v[v.size() / 2], "/", v.back());
  };
  std::string at = "at", gap = "gaps";
  for (unsigned j = 0; j < kStamps; ++j) {
    std::vector<double> abs_us, gap_us;
    for (unsigned i = 0; i < ctas; ++i) {
      const unsigned long long* r = &h[size_t(kSlots) * i];
      if (!r[j]) continue;
      abs_us.push_back(double(r[j] - t0) * 1e-3);
      if (j && r[j - 1]) gap_us.push_back(double(r[j] - r[j - 1]) * 1e-3);
    }
    at += concat(" ", names[j], " ", summary(abs_us), ";");
    if (j) gap += concat(" ", names[j - 1], "->", names[j], " ", summary(gap_us), ";");
  }
  // Per tile position i (a CTA's i-th tile): the time from the previous tile's K loop end (the
  // first stage for i = 0) to this one's, over the CTAs that ran an i-th tile.
  std::string per_tile = "tile K-loop spans (from the previous end)";
  for (unsigned i = 0; i < sm90::kGemmTraceTiles; ++i) {
    std::vector<double> span;
    for (unsigned c = 0; c < ctas; ++c) {
      const unsigned long long* r = &h[size_t(kSlots) * c];
      if (r[sm90::kGemmTraceSlotTiles] <= i) continue;
      const unsigned long long from = i ? r[sm90::kGemmTraceSlotTile0 + i - 1] : r[2];
      if (from) span.push_back(double(r[sm90::kGemmTraceSlotTile0 + i] - from) * 1e-3);
    }
    if (span.empty()) break;
    per_tile += concat(" #", i, "(", span.size(), ") ", summary(span), ";");
  }
  // The SM clock from the first stage to the last K loop's end: cycles / nanoseconds.
  std::vector<double> mhz;
  for (unsigned i = 0; i < ctas; ++i) {
    const unsigned long long* r = &h[size_t(kSlots) * i];
    const unsigned long long clk0 = r[sm90::kGemmTraceSlotClock], clk1 = r[sm90::kGemmTraceSlotClock + 1];
    if (r[2] && r[3] > r[2] && clk1 > clk0) mhz.push_back(1e3 * double(clk1 - clk0) / double(r[3] - r[2]));
  }
  std::fprintf(stderr,
               "moekit trace %s %s (us, min/med/max over CTAs)\n  %s\n  %s\n  %s\n  SM clock over the K loops (MHz) %s\n",
               body, c.str().c_str(), at.c_str(), gap.c_str(), per_tile.c_str(), summary(mhz).c_str());
  // knobs().trace_dump: every CTA's row appended (us from the first entry; SM id; tile count).
  if (const std::string& path = knobs().trace_dump; !path.empty()) {
    if (FILE* f = std::fopen(path.c_str(), "a")) {
      std::fprintf(f, "# %s %s: cta sm tiles entry scheduled first_stage exit tile_ends...\n", body, c.str().c_str());
      for (unsigned i = 0; i < ctas; ++i) {
        const unsigned long long* r = &h[size_t(kSlots) * i];
        auto us = [&](unsigned long long v) { return v ? double(v - t0) * 1e-3 : -1.0; };
        std::fprintf(f, "%u %llu %llu %.3f %.3f %.3f %.3f", i, r[sm90::kGemmTraceSlotSm], r[sm90::kGemmTraceSlotTiles],
                     us(r[0]), us(r[1]), us(r[2]), us(r[5]));
        for (unsigned j = 0; j < sm90::kGemmTraceTiles && j < r[sm90::kGemmTraceSlotTiles]; ++j)
          std::fprintf(f, " %.3f", us(r[sm90::kGemmTraceSlotTile0 + j]));
        std::fprintf(f, "\n");
      }
      std::fclose(f);
    }
  }
}
}  // namespace

void launch_fp8_gemm_with(const GemmConfig& c, Fp8GemmKernel kernel, const Fp8GemmOperands& op,
                          sm90::GemmParams& params, void* family_params, size_t family_params_bytes,
                          cudaStream_t stream, const Fp8GemmFamily& family) {
  const Fp8GemmKernelInfo& info = fp8_gemm_kernel_info(kernel);
  const char* body = info.body;
  MOEKIT_REQUIRE(family_params_bytes == info.params_bytes, ErrorCode::kInvalidArgument, "moekit: ", body,
                 " takes sm90::", info.params, ", not a parameter struct of ", family_params_bytes, " bytes");
  MOEKIT_REQUIRE(!family.mx_stages || (op.b_rows % sm90::kMxfp4SubRows == 0 &&
                                       (family.b_chunk_rows == 0 || family.b_chunk_rows == c.block_n) &&
                                       family.b_chunk_rows % 128 == 0),
                 ErrorCode::kInvalidArgument, "moekit: ", body, ": MXFP4 B needs B rows (", op.b_rows,
                 ") in whole 32-row sub-chunks and K-block tiled chunks of BLOCK_N rows, a multiple of 128");
  const uint64_t num_kb = static_cast<uint64_t>(ceil_div(op.k, kQuantBlock));
  const unsigned d_swizzle = sm90::gemm_d_swizzle_bytes(c.block_n);
  // 256-row tiles load A in two 128-row boxes, so a tile with one wave of valid rows loads one.
  const unsigned a_box =
      family.a_box_rows ? static_cast<unsigned>(family.a_box_rows) : unsigned(sm90::gemm_wave_rows(c.block_m));
  const int64_t a_rows = op.a_rows ? op.a_rows : op.rows;
  const CUtensorMap tma_a = make_tma_2d(CU_TENSOR_MAP_DATA_TYPE_UINT8, 1, op.a, op.k, a_rows, op.lda, 128, a_box,
                                        CU_TENSOR_MAP_SWIZZLE_128B);
  // Row-major B: rows of k bytes; K-block tiled B: rows of 128 bytes, num_kb of them per B row.
  const unsigned b_box = unsigned(sm90::gemm_b_box_rows(c.block_m, c.block_n, c.multicast));
  // MXFP4 B: rows of kMxfp4TmaRowBytes, a sub-chunk of 34 per 32 B rows and K block; boxes of one
  // sub-chunk, or of four where W1's chunks of b_chunk_rows are contiguous (mxfp4_loader.cuh).
  const uint64_t mx_rows = static_cast<uint64_t>(op.b_rows) / sm90::kMxfp4SubRows * num_kb * sm90::kMxfp4SubTmaRows;
  const CUtensorMap tma_b =
      family.mx_stages
          ? make_tma_2d(CU_TENSOR_MAP_DATA_TYPE_UINT8, 1, op.b, sm90::kMxfp4TmaRowBytes, mx_rows,
                        sm90::kMxfp4TmaRowBytes, sm90::kMxfp4TmaRowBytes,
                        (family.b_chunk_rows ? 4u : 1u) * sm90::kMxfp4SubTmaRows, CU_TENSOR_MAP_SWIZZLE_NONE)
      : family.b_chunk_rows
          ? make_tma_2d(CU_TENSOR_MAP_DATA_TYPE_UINT8, 1, op.b, 128, static_cast<uint64_t>(op.b_rows) * num_kb, 128,
                        128, b_box, CU_TENSOR_MAP_SWIZZLE_128B)
          : make_tma_2d(CU_TENSOR_MAP_DATA_TYPE_UINT8, 1, op.b, op.k, op.b_rows, op.ldb, 128, b_box,
                        CU_TENSOR_MAP_SWIZZLE_128B);
  const CUtensorMap tma_sfa = make_tma_2d(CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 4, op.sa, a_rows, num_kb, sfa_ld(a_rows),
                                          sm90::gemm_sfa_box(c.block_m), 1, CU_TENSOR_MAP_SWIZZLE_NONE);
  const CUtensorMap tma_d = family.tma_d ? *family.tma_d
                                         : make_tma_2d(CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, op.d, op.n, op.rows, op.ldd,
                                                       sm90::gemm_d_box_cols(c.block_n), c.block_m,
                                                       swizzle_for_bytes(d_swizzle));
  params.m = static_cast<unsigned>(op.rows);
  params.n = static_cast<unsigned>(op.n);
  params.k = static_cast<unsigned>(op.k);
  params.num_kb = static_cast<unsigned>(num_kb);
  params.num_n_sb = static_cast<unsigned>(ceil_div(op.n, family.sb_rows));
  params.sb = op.sb;
  params.raster_group = static_cast<unsigned>(c.raster_group);
  params.b_chunk_rows = static_cast<unsigned>(family.b_chunk_rows);
  params.a_box_rows = a_box == unsigned(c.block_m) ? 0u : a_box;
  // The pre-wait reads only make sense (and are only safe) in the MoE layer's PDL chain.
  params.pdl_early = pdl_active() && family.pdl_early ? 1u : 0u;
  params.b_before_wait = params.pdl_early;
  params.pdl = pdl_active() ? 1u : 0u;
  // B read by at most two M blocks of its group (rows per group = rows / groups, groups = b_rows / n):
  // streamed with an L2 evict-first policy.
  const int64_t groups = std::max<int64_t>(1, op.b_rows / std::max<int64_t>(1, op.n));
  params.b_evict_first =
      family.b_evict_first && ceil_div(ceil_div(op.rows, groups), int64_t(c.block_m)) <= 2 ? 1u : 0u;

  if (knobs().log_config)
    std::fprintf(stderr, "moekit: %s %s rows=%lld n=%lld k=%lld\n", body, c.str().c_str(), (long long)op.rows,
                 (long long)op.n, (long long)op.k);

  std::string entry;
  const std::string source = fp8_gemm_kernel_source(c, kernel, &entry, family);
  const jit::Kernel fn = jit::get_kernel(source, entry);
  const unsigned smem = fp8_gemm_smem_bytes(c, family);

  CUlaunchConfig cfg;
  std::memset(&cfg, 0, sizeof cfg);
  cfg.gridDimX = static_cast<unsigned>(c.num_sms);
  cfg.gridDimY = cfg.gridDimZ = 1;
  cfg.blockDimX = static_cast<unsigned>(fp8_gemm_threads(c, family));
  cfg.blockDimY = cfg.blockDimZ = 1;
  cfg.sharedMemBytes = smem;
  cfg.hStream = reinterpret_cast<CUstream>(stream);
  CUlaunchAttribute attrs[2];
  std::memset(attrs, 0, sizeof attrs);
  unsigned num_attrs = 0;
  if (c.multicast * c.split_k > 1) {
    CUlaunchAttribute& cluster = attrs[num_attrs++];
    cluster.id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
    cluster.value.clusterDim.x = static_cast<unsigned>(c.multicast * c.split_k);
    cluster.value.clusterDim.y = cluster.value.clusterDim.z = 1;
  }
  if (pdl_active()) {  // the kernel waits (griddepcontrol.wait) before touching global memory
    CUlaunchAttribute& pdl = attrs[num_attrs++];
    pdl.id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
    pdl.value.programmaticStreamSerializationAllowed = 1;
  }
  cfg.attrs = num_attrs ? attrs : nullptr;
  cfg.numAttrs = num_attrs;
  void* args[] = {const_cast<CUtensorMap*>(&tma_a), const_cast<CUtensorMap*>(&tma_b),
                  const_cast<CUtensorMap*>(&tma_sfa), const_cast<CUtensorMap*>(&tma_d),
                  family_params};
  // Diagnostics (synchronizes): knobs().trace_gemm, a substring of the kernel body, records per-CTA
  // timestamps of matching launches and prints their spread.
  const std::string& trace_match = knobs().trace_gemm;
  constexpr unsigned kSlots = sm90::kGemmTraceSlots;
  unsigned long long* trace = nullptr;
  if (!trace_match.empty() && std::strstr(body, trace_match.c_str())) {
    const size_t bytes = size_t(cfg.gridDimX) * kSlots * sizeof(unsigned long long);
    MOEKIT_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&trace), bytes));
    MOEKIT_CUDA_CHECK(cudaMemsetAsync(trace, 0, bytes, stream));
    params.trace = trace;
  }
  check_cu(driver().launchKernelEx(&cfg, fn.fn, args, nullptr), "cuLaunchKernelEx(fp8 gemm)");
  if (trace) print_gemm_trace(trace, cfg.gridDimX, body, c, stream);
}

GemmConfig config_override(const std::string& text, const GemmConfig& c) {
  return text.empty() ? c : GemmConfig::parse(text);
}

}  // namespace moekit::detail

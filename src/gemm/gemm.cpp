// Host side of the dense FP8 block-scaled GEMM: validation, configuration, TMA descriptors,
// run-time compiled kernel and launch.
#include "moekit/gemm.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
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
#include "runtime/pdl.h"
#include "runtime/device.h"
#include "runtime/driver.h"
#include "runtime/jit.h"

namespace moekit {
namespace detail {
namespace {

bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; }

// Diagnostic on/off switches (not API): on unless the variable is set and starts with '0'.
bool env_switch_on(const char* name) {
  const char* v = std::getenv(name);
  return !(v && v[0] == '0');
}

void validate(const GemmFp8Args& a) {
  constexpr const char* fn = "moekit::gemm_fp8_nt";
  MOEKIT_REQUIRE(a.m >= 0, ErrorCode::kInvalidArgument, fn, ": m = ", a.m, " must be >= 0");
  MOEKIT_REQUIRE(a.m < (int64_t(1) << 31), ErrorCode::kInvalidArgument, fn, ": m = ", a.m, " must be < 2^31");
  validate_nk(fn, a.n, a.k);
  if (a.m == 0) return;
  validate_operands(fn, a.k, a.n, a.a, a.lda, a.sa, a.b, a.ldb, a.sb, a.d, a.ldd);
}

}  // namespace

void validate_nk(const char* fn, int64_t n, int64_t k) {
  MOEKIT_REQUIRE(n >= 8 && n % 8 == 0 && n < (int64_t(1) << 31), ErrorCode::kInvalidArgument, fn, ": n = ", n,
                 " must be a positive multiple of 8 (16-byte rows of bf16 D)");
  MOEKIT_REQUIRE(k >= 16 && k % 16 == 0 && k < (int64_t(1) << 31), ErrorCode::kInvalidArgument, fn, ": k = ", k,
                 " must be a positive multiple of 16 (16-byte rows of FP8 A and B)");
}

void validate_operands(const char* fn, int64_t k, int64_t n, const void* a, int64_t lda, const float* sa,
                       const void* b, int64_t ldb, const float* sb, const void* d, int64_t ldd) {
  MOEKIT_REQUIRE(a && sa && b && sb && d, ErrorCode::kInvalidArgument, fn,
                 ": a null pointer was passed (a, sa, b, sb and d are all required when there is work)");
  MOEKIT_REQUIRE(lda >= k && lda % 16 == 0, ErrorCode::kMisaligned, fn, ": lda = ", lda,
                 " must be >= k and a multiple of 16");
  MOEKIT_REQUIRE(ldb >= k && ldb % 16 == 0, ErrorCode::kMisaligned, fn, ": ldb = ", ldb,
                 " must be >= k and a multiple of 16");
  MOEKIT_REQUIRE(ldd >= n && ldd % 8 == 0, ErrorCode::kMisaligned, fn, ": ldd = ", ldd,
                 " must be >= n and a multiple of 8");
  MOEKIT_REQUIRE(aligned16(a) && aligned16(b) && aligned16(d) && aligned16(sa), ErrorCode::kMisaligned, fn,
                 ": a, b, d and sa must be 16-byte aligned");
  MOEKIT_REQUIRE((reinterpret_cast<uintptr_t>(sb) & 3u) == 0, ErrorCode::kMisaligned, fn,
                 ": sb must be 4-byte aligned");
}

GemmDeviceLimits device_limits() {
  const DeviceInfo& d = current_device();
  GemmDeviceLimits lim;
  lim.num_sms = d.num_sms;
  lim.smem_bytes = static_cast<unsigned>(d.smem_optin);
  for (int c = 1; c <= 8; ++c) lim.cluster_slots[c] = d.max_clusters[c];
  static const bool wide = env_switch_on("MOEKIT_WIDE_TILES");
  lim.wide_tiles = wide;
  static const bool direct = env_switch_on("MOEKIT_DIRECT_STORE");
  lim.direct_store = direct;
  return lim;
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

std::string fp8_gemm_kernel_source(const GemmConfig& c, const char* body, std::string* entry,
                                   const Fp8GemmFamily& family) {
  const bool finer = family.promote_k != 128;
  const bool split = c.split_k > 1;  // dense body only (launch_fp8_gemm checks)
  // The bf16 bodies' last template argument (kDirectStore); the dense body's split-K count precedes it.
  const bool direct = c.direct_store;  // bf16 bodies only (launch_fp8_gemm checks)
  const bool split_arg = split || (direct && std::strcmp(body, "fp8_gemm_dense") == 0);
  // Diagnostic knob (not API), for A/B runs of compile-time switches in the kernel headers:
  // MOEKIT_JIT_DEFINES="NAME=VALUE[,| ]..." prepends a #define per item to every GEMM kernel's
  // source (e.g. MOEKIT_WG_ORDER=0); the entry name gets a hash of the list, so the in-process
  // kernel table and the disk cache keep the variants apart.
  static const std::pair<std::string, std::string> defines = [] {
    std::pair<std::string, std::string> d;
    const char* v = std::getenv("MOEKIT_JIT_DEFINES");
    if (!v || !*v) return d;
    std::string item;
    for (const char* q = v;; ++q) {
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
  }();
  *entry = concat("moekit_", body, "_m", c.block_m, "n", c.block_n, "s", c.stages, "c", c.multicast,
                  finer ? concat("p", family.promote_k) : std::string(), split ? concat("k", c.split_k) : std::string(),
                  direct ? "r" : "", defines.second);
  return concat(defines.first, "#include \"", family.header, "\"\n", "extern \"C\" __global__ void __launch_bounds__(",
                sm90::gemm_num_threads(c.block_m, family.wg_n), ", 1)\n", *entry,
                "(const __grid_constant__ moekit::ptx::TmaDescriptor tma_a,\n"
                " const __grid_constant__ moekit::ptx::TmaDescriptor tma_b,\n"
                " const __grid_constant__ moekit::ptx::TmaDescriptor tma_sfa,\n"
                " const __grid_constant__ moekit::ptx::TmaDescriptor tma_d,\n"
                " const moekit::sm90::GemmParams params) {\n"
                "  moekit::sm90::",
                body, "<", c.block_m, ", ", c.block_n, ", ", c.stages, ", ", c.multicast,
                finer ? concat(", ", family.promote_k) : std::string(),
                split_arg ? concat(", ", c.split_k) : std::string(), direct ? ", true" : "",
                ">(tma_a, tma_b, tma_sfa, tma_d, params);\n}\n");
}

unsigned fp8_gemm_smem_bytes(const GemmConfig& c, const Fp8GemmFamily& family) {
  return family.epilogue_smem == ~0u
             ? sm90::gemm_smem_bytes(c.block_m, c.block_n, c.stages, c.split_k, c.direct_store)
             : sm90::gemm_smem_bytes_with(family.epilogue_smem, c.block_m, c.block_n, c.stages, c.split_k);
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
  // MOEKIT_TRACE_DUMP=<file>: every CTA's row appended (us from the first entry; SM id; tile count).
  if (const char* path = std::getenv("MOEKIT_TRACE_DUMP"); path && *path) {
    if (FILE* f = std::fopen(path, "a")) {
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

void launch_fp8_gemm(const GemmConfig& c, const char* body, const Fp8GemmOperands& op, sm90::GemmParams params,
                     cudaStream_t stream, const Fp8GemmFamily& family) {
  const uint64_t num_kb = static_cast<uint64_t>(ceil_div(op.k, kQuantBlock));
  MOEKIT_REQUIRE(c.split_k == 1 || (std::strcmp(body, "fp8_gemm_dense") == 0 && family.promote_k == 128),
                 ErrorCode::kInvalidArgument, "moekit: configuration ", c.str(), ": split-K runs only the dense GEMM");
  MOEKIT_REQUIRE(!c.direct_store || family.epilogue_smem == ~0u, ErrorCode::kInvalidArgument, "moekit: configuration ",
                 c.str(), ": direct stores (r) apply only to the bf16 GEMMs, not to ", body);
  const unsigned d_swizzle = sm90::gemm_d_swizzle_bytes(c.block_n);
  // 256-row tiles load A in two 128-row boxes, so a tile with one wave of valid rows loads one.
  const unsigned a_box =
      family.a_box_rows ? static_cast<unsigned>(family.a_box_rows) : unsigned(sm90::gemm_wave_rows(c.block_m));
  const int64_t a_rows = op.a_rows ? op.a_rows : op.rows;
  const CUtensorMap tma_a = make_tma_2d(CU_TENSOR_MAP_DATA_TYPE_UINT8, 1, op.a, op.k, a_rows, op.lda, 128, a_box,
                                        CU_TENSOR_MAP_SWIZZLE_128B);
  // Row-major B: rows of k bytes; K-block tiled B: rows of 128 bytes, num_kb of them per B row.
  const unsigned b_box = unsigned(sm90::gemm_b_box_rows(c.block_m, c.block_n, c.multicast));
  const CUtensorMap tma_b =
      family.b_chunk_rows
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
  // Tuning knob (not API): MOEKIT_PDL_B_EARLY=0 keeps the first tile's B loads after the PDL wait.
  static const bool b_early = env_switch_on("MOEKIT_PDL_B_EARLY");
  params.b_before_wait = params.pdl_early && b_early ? 1u : 0u;
  params.pdl = pdl_active() ? 1u : 0u;
  // B read by at most two M blocks of its group (rows per group = rows / groups, groups = b_rows / n):
  // streamed with an L2 evict-first policy. MOEKIT_B_EVICT_FIRST=0 (diagnostic): never.
  static const bool evict_first = env_switch_on("MOEKIT_B_EVICT_FIRST");
  const int64_t groups = std::max<int64_t>(1, op.b_rows / std::max<int64_t>(1, op.n));
  params.b_evict_first =
      family.b_evict_first && evict_first && ceil_div(ceil_div(op.rows, groups), int64_t(c.block_m)) <= 2 ? 1u : 0u;
  params.d = op.d;
  params.ldd = static_cast<unsigned>(op.ldd);

  // Diagnostics (not API): MOEKIT_LOG_CONFIG=1 prints every launch's kernel and configuration.
  static const bool log_config = [] {
    const char* v = std::getenv("MOEKIT_LOG_CONFIG");
    return v && *v && *v != '0';
  }();
  if (log_config)
    std::fprintf(stderr, "moekit: %s %s rows=%lld n=%lld k=%lld\n", body, c.str().c_str(), (long long)op.rows,
                 (long long)op.n, (long long)op.k);

  std::string entry;
  const std::string source = fp8_gemm_kernel_source(c, body, &entry, family);
  jit::Kernel kernel = jit::get_kernel(source, entry);
  const unsigned smem = fp8_gemm_smem_bytes(c, family);

  CUlaunchConfig cfg;
  std::memset(&cfg, 0, sizeof cfg);
  cfg.gridDimX = static_cast<unsigned>(c.num_sms);
  cfg.gridDimY = cfg.gridDimZ = 1;
  cfg.blockDimX = static_cast<unsigned>(sm90::gemm_num_threads(c.block_m, family.wg_n));
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
                  const_cast<sm90::GemmParams*>(&params)};
  // Diagnostics (not API; synchronizes): MOEKIT_TRACE_GEMM=<substring of the kernel body> records
  // per-CTA timestamps of matching launches and prints their spread.
  static const char* trace_match = std::getenv("MOEKIT_TRACE_GEMM");
  constexpr unsigned kSlots = sm90::kGemmTraceSlots;
  unsigned long long* trace = nullptr;
  if (trace_match && *trace_match && std::strstr(body, trace_match)) {
    const size_t bytes = size_t(cfg.gridDimX) * kSlots * sizeof(unsigned long long);
    MOEKIT_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&trace), bytes));
    MOEKIT_CUDA_CHECK(cudaMemsetAsync(trace, 0, bytes, stream));
    params.trace = trace;
  }
  check_cu(driver().launchKernelEx(&cfg, kernel.fn, args, nullptr), "cuLaunchKernelEx(fp8 gemm)");
  if (trace) print_gemm_trace(trace, cfg.gridDimX, body, c, stream);
}

GemmConfig config_from_env(const char* name, const GemmConfig& c) {
  const char* v = std::getenv(name);
  if (!v || !*v) return c;
  return GemmConfig::parse(v);
}

unsigned tail_halves_setting() {
  static const unsigned on = env_switch_on("MOEKIT_TAIL_HALVES") ? 1u : 0u;
  return on;
}

}  // namespace detail

std::string GemmConfig::str() const {
  return detail::concat("m", block_m, "n", block_n, "s", stages, "g", raster_group, "x", num_sms, "c", multicast,
                        split_k != 1 ? detail::concat("k", split_k) : std::string(), direct_store ? "r" : "");
}

GemmConfig GemmConfig::parse(const std::string& text) {
  GemmConfig c;
  int used = 0;
  const int got = std::sscanf(text.c_str(), "m%dn%ds%dg%dx%d%n", &c.block_m, &c.block_n, &c.stages, &c.raster_group,
                              &c.num_sms, &used);
  MOEKIT_REQUIRE(got == 5, ErrorCode::kInvalidArgument, "moekit::GemmConfig::parse: '", text,
                 "' is not of the form m<BM>n<BN>s<stages>g<group>x<ctas>[c<multicast>][k<split_k>][r]");
  std::string rest = text.substr(static_cast<size_t>(used));
  // Optional suffixes, in this order: c<multicast>, k<split_k>, r (direct_store).
  auto suffix = [&](char tag, int& value) {
    if (rest.empty() || rest[0] != tag) return;
    int consumed = 0;
    const char format[] = {tag, '%', 'd', '%', 'n', '\0'};
    MOEKIT_REQUIRE(std::sscanf(rest.c_str(), format, &value, &consumed) == 1, ErrorCode::kInvalidArgument,
                   "moekit::GemmConfig::parse: bad '", rest, "' in '", text, "'");
    rest = rest.substr(static_cast<size_t>(consumed));
  };
  suffix('c', c.multicast);
  suffix('k', c.split_k);
  if (rest == "r") {
    c.direct_store = true;
    rest.clear();
  }
  MOEKIT_REQUIRE(rest.empty(), ErrorCode::kInvalidArgument, "moekit::GemmConfig::parse: trailing '", rest, "' in '",
                 text, "'");
  return c;
}

GemmConfig gemm_fp8_select_config(int64_t m, int64_t n, int64_t k) {
  detail::require_sm90("moekit::gemm_fp8_select_config");
  return detail::select_gemm_config(m, n, k, detail::device_limits(), 1, true);
}

void gemm_fp8_nt(const GemmFp8Args& args, cudaStream_t stream) {
  detail::validate(args);
  if (args.m == 0) return;
  detail::require_sm90("moekit::gemm_fp8_nt");
  gemm_fp8_nt(args, detail::select_gemm_config(args.m, args.n, args.k, detail::device_limits(), 1, true), stream);
}

void gemm_fp8_nt(const GemmFp8Args& a, const GemmConfig& c, cudaStream_t stream) {
  using namespace detail;
  validate(a);
  if (a.m == 0) return;
  require_sm90("moekit::gemm_fp8_nt");
  const std::string problem = gemm_config_problem(c, device_limits());
  MOEKIT_REQUIRE(problem.empty(), ErrorCode::kInvalidArgument, "moekit::gemm_fp8_nt: configuration ", c.str(),
                 " cannot run: ", problem);
  MOEKIT_REQUIRE(c.split_k <= ceil_div(a.k, kQuantBlock), ErrorCode::kInvalidArgument,
                 "moekit::gemm_fp8_nt: configuration ", c.str(), " splits K ", c.split_k, " ways, but k = ", a.k,
                 " has only ", ceil_div(a.k, kQuantBlock), " blocks of 128");

  const Fp8GemmOperands op{a.a, a.lda, a.sa, a.b, a.ldb, a.sb, a.d, a.ldd, a.m, a.n, a.n, a.k};
  sm90::GemmParams p{};
  p.tail_halves = tail_halves_setting();
  launch_fp8_gemm(c, "fp8_gemm_dense", op, p, stream);
}

void gemm_fp8_prepare(int64_t m, int64_t n, int64_t k) {
  detail::require_sm90("moekit::gemm_fp8_prepare");
  const GemmConfig c = detail::select_gemm_config(m, n, k, detail::device_limits(), 1, true);
  std::string entry;
  const std::string source = detail::fp8_gemm_kernel_source(c, "fp8_gemm_dense", &entry);
  jit::get_kernel(source, entry);
}

}  // namespace moekit

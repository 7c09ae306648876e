// Host side of the dense FP8 block-scaled GEMM: validation, configuration and launch (the launch
// machinery shared with the grouped and MoE GEMMs is gemm/fp8_gemm_launch.cpp).
#include "moekit/gemm.h"

#include <cstdint>
#include <cstdio>
#include <string>

#include "common/check.h"
#include "gemm/gemm_launch.h"
#include "gemm/heuristic.h"
#include "kernels/sm90/fp8_gemm_layout.cuh"
#include "moekit/numerics.h"
#include "runtime/device.h"
#include "runtime/jit.h"

namespace moekit {
namespace detail {
namespace {

bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; }

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
  return lim;
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
  sm90::DenseGemmParams p{};
  p.tail_halves = 1;
  p.d = a.d;
  p.ldd = static_cast<unsigned>(a.ldd);
  launch_fp8_gemm(c, Fp8GemmKernel::kDense, op, p, stream);
}

void gemm_fp8_prepare(int64_t m, int64_t n, int64_t k) {
  detail::require_sm90("moekit::gemm_fp8_prepare");
  const GemmConfig c = detail::select_gemm_config(m, n, k, detail::device_limits(), 1, true);
  std::string entry;
  const std::string source = detail::fp8_gemm_kernel_source(c, detail::Fp8GemmKernel::kDense, &entry);
  jit::get_kernel(source, entry);
}

}  // namespace moekit

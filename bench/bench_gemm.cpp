// moekit bench gemm: the dense block-scaled FP8 GEMM (moekit::gemm_fp8_nt) against cuBLASLt's
// block-scaled FP8 GEMM (same function, see src/baseline/cublaslt.h) and cuBLASLt's BF16 GEMM of
// the same shape.
//
//   moekit bench gemm [--csv|--json] [--shapes M:N:K,...] [--reps R] [--no-baseline] [--config CFG]
//                     [--sweep] [--cooldown-ms MS] [--data uniform|normal] [--energy]
//
// Columns: us / TFLOPS / GB/s event-timed (kernel plus launch gap); kern_us and lt_kern_us the
// method of DeepGEMM's bench_kineto: the kernels' own durations (CUPTI) with a 256 MB L2-flushing
// memset before each call; pt_kTFLOPS cuBLASLt's FP8 GEMM with per-tensor instead of block scales,
// the same way: not this math (no per-128-K promotion), a ceiling for it. Each timed pass longer
// than 20 ms starts after --cooldown-ms of idle time (docs/performance.md §Timing method). --energy adds "# energy" lines:
// joules per call and average watts over >= 1.5 s of back-to-back calls (ours, cuBLASLt's FP8) after a
// cool-down, and the same for 1 GiB device copies (J per GB moved) with the idle power after them —
// at the power limit a long GEMM's time follows its energy (docs/performance.md §Energy and the power limit).
//
// Every timed call rotates among enough copies of its inputs that the working set does not sit
// in L2 (rotation_sets). In --csv / --json mode the table alone goes to stdout and the summary
// lines go to stderr, so stdout stays machine-readable.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <optional>
#include <string>
#include <vector>
#include <cuda_runtime_api.h>

#include "baseline/cublaslt.h"
#include "bench/bench.h"
#include "bench/bench_util.h"
#include "gemm/gemm_launch.h"
#include "gemm/heuristic.h"
#include "moekit/error.h"
#include "moekit/gemm.h"
#include "moekit/numerics.h"
#include "runtime/device.h"
#include "runtime/device_buffer.h"
#include "runtime/random.h"

namespace moekit::bench {
namespace {

using detail::DeviceBuffer;

struct GemmShape {
  int64_t m, n, k;
};

struct Options {
  enum class Format { kText, kCsv, kJson } format = Format::kText;
  std::vector<GemmShape> shapes;
  int reps = 30;
  bool baseline = true;
  std::string config;  // forced configuration for every shape (empty: the heuristic's)
  bool sweep = false;  // also time every candidate configuration (tuning)
  int cooldown_ms = 1500;  // idle time before each timed pass longer than 20 ms (cool_down)
  BenchData data = BenchData::kUniform;  // FP8 operand values (--data)
  bool energy = false;  // also joules per call over >= 1.5 s of back-to-back calls (--energy)
};

void usage(FILE* out) {
  std::fprintf(out,
               "usage: moekit bench gemm [--csv|--json] [--shapes M:N:K,...] [--reps R] [--no-baseline] [--config CFG]\n"
               "                         [--sweep] [--cooldown-ms MS] [--data uniform|normal] [--energy]\n"
               "  --config CFG  force a kernel configuration, e.g. m128n160s5g8x132c2 or m64n64s10g1x132c1k4\n"
               "                (split-K over 4 CTAs) (default: heuristic)\n"
               "  --sweep       also time every candidate configuration of each shape (tile, split-K) and\n"
               "                print one '# sweep' line each, fastest marked (tuning the heuristic)\n"
               "  --shapes      comma-separated M:N:K list (default: M in {64,128,4096} x 6 (N,K) pairs)\n"
               "  --reps R      timed repetitions per case, median reported (default 30)\n"
               "  --no-baseline skip the cuBLASLt FP8 and BF16 baselines\n"
               "  --cooldown-ms MS  idle time before each timed pass longer than 20 ms (default 1500, 0: none)\n"
               "  --data D      FP8 operand values: uniform (every E4M3 code equally likely; default) or normal\n"
               "                (codes of amax-scaled normal data, as DeepGEMM's tests make them)\n"
               "  --energy      joules per call and average watts over >= 1.5 s of back-to-back calls (NVML),\n"
               "                ours and cuBLASLt's FP8, and of 1 GiB device copies\n");
}

bool parse_int64(const std::string& s, int64_t* out) {
  if (s.empty()) return false;
  char* end = nullptr;
  const long long v = std::strtoll(s.c_str(), &end, 10);
  if (end != s.c_str() + s.size()) return false;
  *out = v;
  return true;
}

bool parse_shapes(const std::string& text, std::vector<GemmShape>* shapes) {
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t comma = text.find(',', pos);
    if (comma == std::string::npos) comma = text.size();
    const std::string item = text.substr(pos, comma - pos);
    if (!item.empty()) {
      const size_t c1 = item.find(':');
      const size_t c2 = c1 == std::string::npos ? std::string::npos : item.find(':', c1 + 1);
      GemmShape s{};
      if (c2 == std::string::npos || !parse_int64(item.substr(0, c1), &s.m) ||
          !parse_int64(item.substr(c1 + 1, c2 - c1 - 1), &s.n) || !parse_int64(item.substr(c2 + 1), &s.k) ||
          s.m < 0 || s.n <= 0 || s.k <= 0) {
        std::fprintf(stderr, "moekit bench gemm: bad shape '%s' (want M:N:K)\n", item.c_str());
        return false;
      }
      shapes->push_back(s);
    }
    pos = comma + 1;
  }
  return !shapes->empty();
}

std::vector<GemmShape> default_shapes() {
  const int64_t ms[] = {64, 128, 4096};
  const GemmShape nks[] = {{0, 2112, 7168}, {0, 24576, 1536}, {0, 32768, 512},
                           {0, 7168, 16384}, {0, 4096, 7168}, {0, 7168, 2048}};
  std::vector<GemmShape> out;
  for (int64_t m : ms)
    for (const auto& nk : nks) out.push_back({m, nk.n, nk.k});
  return out;
}

/// Relative L2 difference ‖out − ref‖ / ‖ref‖ of two bf16 arrays, in double (NaN propagates).
double bf16_relative_l2(const std::vector<uint16_t>& out, const std::vector<uint16_t>& ref) {
  double num = 0.0, den = 0.0;
  for (size_t i = 0; i < out.size(); ++i) {
    const double o = bf16_to_float(out[i]);
    const double r = bf16_to_float(ref[i]);
    num += (o - r) * (o - r);
    den += r * r;
  }
  if (std::isnan(num) || std::isnan(den)) return std::nan("");
  return den > 0.0 ? std::sqrt(num / den) : std::sqrt(num);
}

/// One rotating input set of the FP8 GEMM.
struct Fp8Set {
  DeviceBuffer a, b, sa, sb;
};
/// One rotating input set of the BF16 GEMM.
struct Bf16Set {
  DeviceBuffer a, b;
};


}  // namespace

int bench_gemm_main(int argc, char** argv) {
  Options opt;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--csv") {
      opt.format = Options::Format::kCsv;
    } else if (arg == "--json") {
      opt.format = Options::Format::kJson;
    } else if (arg == "--config" && i + 1 < argc) {
      opt.config = argv[++i];
    } else if (arg == "--no-baseline") {
      opt.baseline = false;
    } else if (arg == "--sweep") {
      opt.sweep = true;
    } else if (arg == "--energy") {
      opt.energy = true;
    } else if (arg == "--data" && i + 1 < argc) {
      if (!parse_bench_data(argv[++i], &opt.data)) {
        std::fprintf(stderr, "moekit bench gemm: bad --data '%s' (want uniform|normal)\n", argv[i]);
        return 2;
      }
    } else if ((arg == "--shapes" || arg == "--reps" || arg == "--cooldown-ms") && i + 1 < argc) {
      const std::string value = argv[++i];
      if (arg == "--shapes") {
        if (!parse_shapes(value, &opt.shapes)) return 2;
      } else if (arg == "--cooldown-ms") {
        int64_t ms = 0;
        if (!parse_int64(value, &ms) || ms < 0 || ms > 60000) {
          std::fprintf(stderr, "moekit bench gemm: bad --cooldown-ms '%s'\n", value.c_str());
          return 2;
        }
        opt.cooldown_ms = static_cast<int>(ms);
      } else {
        int64_t r = 0;
        if (!parse_int64(value, &r) || r < 1 || r > 100000) {
          std::fprintf(stderr, "moekit bench gemm: bad --reps '%s'\n", value.c_str());
          return 2;
        }
        opt.reps = static_cast<int>(r);
      }
    } else if (arg.rfind("--shapes=", 0) == 0) {
      if (!parse_shapes(arg.substr(9), &opt.shapes)) return 2;
    } else if (arg == "-h" || arg == "--help") {
      usage(stdout);
      return 0;
    } else {
      std::fprintf(stderr, "moekit bench gemm: unknown option '%s'\n", arg.c_str());
      usage(stderr);
      return 2;
    }
  }
  if (opt.shapes.empty()) opt.shapes = default_shapes();

  if (!detail::gpu_available()) {
    std::fprintf(stderr, "moekit bench gemm: no CUDA device visible\n");
    return 1;
  }
  const detail::DeviceInfo& dev = detail::current_device();
  cudaDeviceProp prop{};
  MOEKIT_CUDA_CHECK(cudaGetDeviceProperties(&prop, dev.device));
  const bool text = opt.format == Options::Format::kText;
  FILE* info = text ? stdout : stderr;
  std::fprintf(info, "# device %d: %s (sm_%d%d, %d SMs, L2 %zu MiB)%s%s\n", dev.device, prop.name, dev.cc_major,
               dev.cc_minor, dev.num_sms, dev.l2_bytes >> 20, opt.baseline ? ", baseline " : "",
               opt.baseline ? baseline::CublasLt::version().c_str() : "");
  std::fprintf(info, "# data: %s (--data)\n", bench_data_name(opt.data));
  if (opt.energy) std::fprintf(info, "# energy copy: %s\n", copy_energy_line(opt.cooldown_ms).c_str());
  std::fflush(info);
  std::vector<std::string> energy_lines;

  if (opt.sweep) {
    const detail::GemmDeviceLimits lim = detail::device_limits();
    std::fprintf(info, "# sweep: clusters of 2..8 CTAs running at once:");
    for (int c = 2; c <= 8; ++c) std::fprintf(info, " %d:%d", c, lim.cluster_slots[c]);
    std::fprintf(info, "\n");
  }
  const BenchStream bench_stream;
  const cudaStream_t stream = bench_stream.get();

  std::unique_ptr<baseline::CublasLt> lt;
  if (opt.baseline) lt = std::make_unique<baseline::CublasLt>();

  Table table({"M", "N", "K", "config", "us", "TFLOPS", "GB/s", "kern_us", "lt_fp8_us", "vs_lt_fp8", "lt_kern_us",
               "pt_kTFLOPS", "lt_bf16_us", "vs_lt_bf16", "rel_l2_vs_lt", "note"});
  std::vector<double> speedup_large, speedup_small;  // vs cuBLASLt FP8: M == 4096, M in {64, 128}

  for (size_t si = 0; si < opt.shapes.size(); ++si) {
    const int64_t m = opt.shapes[si].m, n = opt.shapes[si].n, k = opt.shapes[si].k;
    std::fprintf(stderr, "[%zu/%zu] %lldx%lldx%lld\n", si + 1, opt.shapes.size(), (long long)m, (long long)n,
                 (long long)k);
    std::vector<std::string> row = {std::to_string(m), std::to_string(n), std::to_string(k)};
    std::string ours_col[4] = {"-", "-", "-", "-"};  // config, us, TFLOPS, GB/s
    std::string lt8_us = "-", lt8_x = "-", lt16_us = "-", lt16_x = "-", rel = "-", kern = "-", lt8_kern = "-",
                pt_tf = "-";
    std::vector<std::string> notes;

    try {
      try {
        ours_col[0] = opt.config.empty() ? gemm_fp8_select_config(m, n, k).str() : opt.config;
      } catch (const std::exception& e) {
        ours_col[0] = "?";
        notes.push_back(std::string("config: ") + one_line(e.what()));
      }

      const int64_t kb = ceil_div(k, kQuantBlock);
      const int64_t nb = ceil_div(n, kQuantBlock);
      const int64_t sa_count = sfa_physical_size(m, k);
      const int64_t sb_count = nb * kb;
      // Bytes moved by one GEMM, each operand once: A + B + scales + D (bf16).
      const double io_bytes = double(m * k) + double(n * k) + 4.0 * double(kb * m + sb_count) + 2.0 * double(m * n);
      const double flops = 2.0 * double(m) * double(n) * double(k);

      const size_t fp8_set_bytes = size_t(m * k + n * k) + 4 * size_t(sa_count + sb_count);
      const int nsets = rotation_sets(fp8_set_bytes);
      std::vector<Fp8Set> sets(nsets);
      for (int s = 0; s < nsets; ++s) {
        Fp8Set& x = sets[s];
        x.a = DeviceBuffer(size_t(m * k));
        x.b = DeviceBuffer(size_t(n * k));
        x.sa = DeviceBuffer(size_t(sa_count) * sizeof(float));
        x.sb = DeviceBuffer(size_t(sb_count) * sizeof(float));
        const uint64_t seed = 1000003ull * (si + 1) + 97ull * s;
        fill_fp8_activations(x.a.get(), m * k, opt.data, seed + 1, stream);
        fill_fp8_weights(x.b.get(), n * k, opt.data, seed + 2, stream);
        detail::fill_random_f32(x.sa.as<float>(), sa_count, 0.5f, 2.0f, seed + 3, stream);
        detail::fill_random_f32(x.sb.as<float>(), sb_count, 0.5f, 2.0f, seed + 4, stream);
      }
      DeviceBuffer d_ours(size_t(m * n) * 2), d_lt(size_t(m * n) * 2);
      MOEKIT_CUDA_CHECK(cudaStreamSynchronize(stream));

      auto args_for = [&](int s, void* d) {
        GemmFp8Args a;
        a.m = m;
        a.n = n;
        a.k = k;
        a.a = sets[s].a.get();
        a.lda = k;
        a.sa = sets[s].sa.as<float>();
        a.b = sets[s].b.get();
        a.ldb = k;
        a.sb = sets[s].sb.as<float>();
        a.d = d;
        a.ldd = n;
        return a;
      };

      // --- ours -----------------------------------------------------------------------------
      double our_us = -1.0;
      double pass_us = 0.0;  // one timed pass of back-to-back calls, estimated from one call
      try {
        gemm_fp8_prepare(m, n, k);
        const bool forced = !opt.config.empty();
        const GemmConfig cfg = forced ? GemmConfig::parse(opt.config) : GemmConfig{};
        auto ours = [&](int s) {
          if (forced) gemm_fp8_nt(args_for(s, d_ours.get()), cfg, stream);
          else gemm_fp8_nt(args_for(s, d_ours.get()), stream);
        };
        ours(0);  // compile / first-use outside the timing
        MOEKIT_CUDA_CHECK(cudaStreamSynchronize(stream));
        pass_us = time_median_us([&](int it) { ours(it % nsets); }, stream, 0, 1) * (opt.reps + 5);
        cool_down(pass_us, opt.cooldown_ms);
        our_us = time_median_us([&](int it) { ours(it % nsets); }, stream, 5, opt.reps);
        std::string why;
        cool_down(pass_us, opt.cooldown_ms);
        const double kern_us = kernel_time_median_us([&](int it) { ours(it % nsets); }, stream, 2, opt.reps, &why,
                                                     kKinetoFlushBytes);
        kern = kern_us > 0.0 ? fmt("%.2f", kern_us) : "n/a";
        if (kern_us <= 0.0) notes.push_back("kern: " + why);
        if (opt.energy)
          energy_lines.push_back(fmt("# energy %lldx%lldx%lld ours: ", (long long)m, (long long)n, (long long)k) +
                                 energy_per_call([&](int it) { ours(it % nsets); }, stream, our_us, opt.reps, pass_us,
                                                 opt.cooldown_ms, "call"));
        // The correctness output: set 0.
        ours(0);
        MOEKIT_CUDA_CHECK(cudaStreamSynchronize(stream));
        ours_col[1] = fmt("%.2f", our_us);
        ours_col[2] = fmt("%.1f", flops / (our_us * 1e-6) / 1e12);
        ours_col[3] = fmt("%.0f", io_bytes / (our_us * 1e-6) / 1e9);
        if (opt.sweep) {
          std::string best;
          double best_us = 1e30;
          for (const GemmConfig& c : detail::gemm_sweep_candidates(m, n, k, detail::device_limits())) {
            gemm_fp8_nt(args_for(0, d_ours.get()), c, stream);
            MOEKIT_CUDA_CHECK(cudaStreamSynchronize(stream));
            const double us = time_median_us(
                [&](int it) { gemm_fp8_nt(args_for(it % nsets, d_ours.get()), c, stream); }, stream, 5, opt.reps);
            std::fprintf(info, "# sweep %lldx%lldx%lld %-22s %9.2f us %7.1f TFLOPS %6.0f GB/s\n", (long long)m,
                         (long long)n, (long long)k, c.str().c_str(), us, flops / (us * 1e-6) / 1e12,
                         io_bytes / (us * 1e-6) / 1e9);
            if (us < best_us) best_us = us, best = c.str();
          }
          std::fprintf(info, "# sweep %lldx%lldx%lld best %s %.2f us (heuristic %s %.2f us)\n", (long long)m,
                       (long long)n, (long long)k, best.c_str(), best_us, ours_col[0].c_str(), our_us);
          std::fflush(info);
        }
      } catch (const std::exception& e) {
        our_us = -1.0;
        ours_col[1] = "err";
        notes.push_back(std::string("ours: ") + one_line(e.what()));
        cudaGetLastError();  // a sticky error would stop everything anyway; clear a non-sticky one
      }

      // --- cuBLASLt block-scaled FP8 ------------------------------------------------------------
      if (lt) {
        double lt_us = -1.0;
        try {
          baseline::LtStatus st;
          for (int s = 0; s < nsets && st; ++s) st = lt->prepare_fp8(args_for(s, d_lt.get()), stream, s);
          if (st) st = lt->gemm_fp8(args_for(0, d_lt.get()), stream, 0);
          if (st) {
            MOEKIT_CUDA_CHECK(cudaStreamSynchronize(stream));
            auto lt_call = [&](int it) {
              const int s = it % nsets;
              const baseline::LtStatus r = lt->gemm_fp8(args_for(s, d_lt.get()), stream, s);
              if (!r) throw Error(ErrorCode::kInternal, r.message);
            };
            cool_down(pass_us, opt.cooldown_ms);
            lt_us = time_median_us(lt_call, stream, 5, opt.reps);
            std::string why;
            cool_down(pass_us, opt.cooldown_ms);
            const double lt_kern_us = kernel_time_median_us(lt_call, stream, 2, opt.reps, &why, kKinetoFlushBytes);
            lt8_kern = lt_kern_us > 0.0 ? fmt("%.2f", lt_kern_us) : "n/a";
            if (opt.energy)
              energy_lines.push_back(fmt("# energy %lldx%lldx%lld lt_fp8: ", (long long)m, (long long)n, (long long)k) +
                                     energy_per_call(lt_call, stream, lt_us, opt.reps, pass_us, opt.cooldown_ms, "call"));
            // The ceiling: the same GEMM with per-tensor scales (no per-128-K promotion).
            baseline::LtStatus pt = lt->gemm_fp8_tensor_scaled(args_for(0, d_lt.get()), stream);
            if (pt) {
              cool_down(pass_us, opt.cooldown_ms);
              const double us = kernel_time_median_us(
                  [&](int it) {
                    const baseline::LtStatus r = lt->gemm_fp8_tensor_scaled(args_for(it % nsets, d_lt.get()), stream);
                    if (!r) throw Error(ErrorCode::kInternal, r.message);
                  },
                  stream, 2, opt.reps, &why, kKinetoFlushBytes);
              pt_tf = us > 0.0 ? fmt("%.1f", flops / (us * 1e-6) / 1e12) : "n/a";
            } else {
              pt_tf = "n/a";
              notes.push_back("lt_pt: " + one_line(pt.message));
            }
            const baseline::LtStatus r = lt->gemm_fp8(args_for(0, d_lt.get()), stream, 0);
            if (!r) throw Error(ErrorCode::kInternal, r.message);
            MOEKIT_CUDA_CHECK(cudaStreamSynchronize(stream));
            lt8_us = fmt("%.2f", lt_us);
            if (our_us > 0.0) {
              const double x = lt_us / our_us;
              lt8_x = fmt("%.3f", x);
              if (m == 4096) speedup_large.push_back(x);
              if (m == 64 || m == 128) speedup_small.push_back(x);
              const auto ours = d_ours.download<uint16_t>(size_t(m * n));
              const auto theirs = d_lt.download<uint16_t>(size_t(m * n));
              rel = fmt("%.2e", bf16_relative_l2(ours, theirs));
            }
          } else {
            lt8_us = "n/a";
            notes.push_back("lt_fp8: " + one_line(st.message));
          }
        } catch (const std::exception& e) {
          lt8_us = "err";
          notes.push_back(std::string("lt_fp8: ") + one_line(e.what()));
        }
      }
      sets.clear();  // free the FP8 inputs before the (larger) BF16 ones

      // --- cuBLASLt BF16 ------------------------------------------------------------------------
      if (lt) {
        try {
          const size_t bf16_set_bytes = 2 * size_t(m * k + n * k);
          const int nb16 = rotation_sets(bf16_set_bytes);
          std::vector<Bf16Set> bsets(nb16);
          for (int s = 0; s < nb16; ++s) {
            bsets[s].a = DeviceBuffer(2 * size_t(m * k));
            bsets[s].b = DeviceBuffer(2 * size_t(n * k));
            const uint64_t seed = 7000003ull * (si + 1) + 131ull * s;
            detail::fill_random_bf16(bsets[s].a.get(), m * k, 1.0f, seed + 1, stream);
            detail::fill_random_bf16(bsets[s].b.get(), n * k, 1.0f, seed + 2, stream);
          }
          auto bargs = [&](int s) {
            baseline::GemmBf16Args a;
            a.m = m;
            a.n = n;
            a.k = k;
            a.a = bsets[s].a.get();
            a.lda = k;
            a.b = bsets[s].b.get();
            a.ldb = k;
            a.d = d_lt.get();
            a.ldd = n;
            return a;
          };
          baseline::LtStatus st = lt->gemm_bf16(bargs(0), stream);
          if (st) {
            MOEKIT_CUDA_CHECK(cudaStreamSynchronize(stream));
            cool_down(pass_us, opt.cooldown_ms);
            const double us = time_median_us(
                [&](int it) {
                  const baseline::LtStatus r = lt->gemm_bf16(bargs(it % nb16), stream);
                  if (!r) throw Error(ErrorCode::kInternal, r.message);
                },
                stream, 5, opt.reps);
            lt16_us = fmt("%.2f", us);
            if (our_us > 0.0) lt16_x = fmt("%.3f", us / our_us);
          } else {
            lt16_us = "n/a";
            notes.push_back("lt_bf16: " + one_line(st.message));
          }
        } catch (const std::exception& e) {
          lt16_us = "err";
          notes.push_back(std::string("lt_bf16: ") + one_line(e.what()));
        }
      }
    } catch (const std::exception& e) {  // allocation or fill failure for this shape
      notes.push_back(one_line(e.what()));
      cudaGetLastError();
    }

    for (const auto& c : ours_col) row.push_back(c);
    row.insert(row.end(), {kern, lt8_us, lt8_x, lt8_kern, pt_tf, lt16_us, lt16_x, rel});
    std::string note;
    for (const auto& s : notes) note += (note.empty() ? "" : "; ") + s;
    row.push_back(note);
    table.add_row(std::move(row));
  }

  switch (opt.format) {
    case Options::Format::kText: std::fputs(table.text().c_str(), stdout); break;
    case Options::Format::kCsv: std::fputs(table.csv().c_str(), stdout); break;
    case Options::Format::kJson: std::fputs(table.json().c_str(), stdout); break;
  }
  for (const auto& line : energy_lines) std::fprintf(info, "%s\n", line.c_str());
  auto geo = [](const std::vector<double>& v) {
    return v.empty() ? std::string("n/a") : fmt("%.3fx over %zu shapes", geomean(v), v.size());
  };
  if (opt.baseline) {
    std::fprintf(info, "geomean speedup vs cuBLASLt FP8 (lt_us / our_us), M = 4096:      %s\n",
                 geo(speedup_large).c_str());
    std::fprintf(info, "geomean speedup vs cuBLASLt FP8 (lt_us / our_us), M in {64,128}: %s\n",
                 geo(speedup_small).c_str());
  }
  try {
    std::fprintf(info, "measured device copy bandwidth (read + write): %.0f GB/s\n",
                 measured_copy_bandwidth() / 1e9);
  } catch (const std::exception& e) {
    std::fprintf(info, "measured device copy bandwidth: n/a (%s)\n", e.what());
  }
  return 0;
}

}  // namespace moekit::bench

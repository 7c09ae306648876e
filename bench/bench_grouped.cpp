// moekit bench grouped: the grouped FP8 block-scaled GEMMs (moekit/grouped_gemm.h) on DeepGEMM's
// published grouped cases and on a decode-like masked layout, against cuBLASLt's block-scaled FP8
// GEMM called once per non-empty expert on the same operands.
//
//   moekit bench grouped [--csv|--json] [--reps R] [--no-baseline] [--cooldown-ms MS] [--data uniform|normal]
//                        [--energy] [--case LAYOUT:E:M:N:K ...]
//
// Cases (--case replaces them: LAYOUT contiguous or masked, every one of the E experts M rows)
//   contiguous  E x m ∈ {4x8192, 8x4096}, every expert m rows        (DeepGEMM "grouped contiguous")
//   masked      E x m ∈ {1x1024, 2x512, 4x256}, max_m = m, counts = m (DeepGEMM "grouped masked")
//   decode      E ∈ {32, 256}, counts uniform in [1, 64] (fixed seed), max_m = 64
// each with (N, K) ∈ {(4096, 7168) (DeepSeek-V3 GEMM1: N = 2I, K = H), (7168, 2048) (GEMM2)}.
//
// Columns
//   rows      rows of A / D the call is given (contiguous: contiguous_rows_upper_bound(Σm, E), the
//             allocation a caller without host synchronization uses; masked: E · max_m)
//   sum_m     Σ counts (valid rows); TFLOPS = 2 · sum_m · N · K / t
//   GB/s      (weights of the experts with ≥ 1 row, each once, with their scales + A and its
//             scales over valid rows + D over valid rows) / t; %copy = that rate over the measured
//             device copy bandwidth (read + write)
//   dg_h800   DeepGEMM's published TFLOPS on H800 for the same case (its README), vs_dg = ours / it
//   lt_us     cuBLASLt block-scaled FP8, one cublasLtMatmul per non-empty expert on that expert's
//             rows of A (contiguous: from offsets[e]; masked: from e · max_m), its B and scales;
//             the whole per-expert sequence is captured once in a CUDA graph per input set and
//             the graph launch is timed, so the host's enqueue rate of many small calls is not
//             measured. cuBLASLt needs a multiple of 4 rows: an expert's row count is rounded up
//             to 4 (the extra rows are padding rows of the layout; noted when it happens).
//   vs_lt     lt_us / our us;  rel_l2_vs_lt  ‖ours − cuBLASLt‖ / ‖cuBLASLt‖ over the valid rows.
//   kern_us   the method of DeepGEMM's published tables (bench_kineto): kernel-only time (CUPTI:
//             the kernel's own duration, without the launch gap and the events that us includes)
//             with a 256 MB L2-flushing memset before each call; kTFLOPS and vs_dg_k from it.
//             lt_kern_us: the same for the cuBLASLt sequence (the sum of its kernels' durations).
//   pt_kTFLOPS  cuBLASLt's FP8 GEMM with per-tensor scales instead of block scales, once per
//             expert, kernel-only: not this math (no per-128-K promotion), a ceiling for it.
//             Skipped for the decode cases.
//
// Input sets rotate (rotation_sets) so timed runs do not find their operands in L2. Each timed pass
// longer than 20 ms starts after --cooldown-ms of idle time: back-to-back passes of long kernels
// otherwise run into the power limit the earlier ones built up (docs/performance.md §Timing method). --energy adds "# energy"
// lines per case: joules per call and average watts over >= 1.5 s of back-to-back calls after a
// cool-down, ours and cuBLASLt's sequence (docs/performance.md §Energy and the power limit: at the power limit time follows energy).
// In --csv / --json mode the table alone goes to stdout, the summary lines to stderr.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <vector>
#include <cuda_runtime_api.h>

#include "baseline/cublaslt.h"
#include "bench/bench.h"
#include "bench/bench_grouped_cases.h"
#include "bench/bench_util.h"
#include "common/check.h"
#include "moekit/error.h"
#include "moekit/gemm.h"
#include "moekit/grouped_gemm.h"
#include "moekit/numerics.h"
#include "runtime/device.h"
#include "runtime/device_buffer.h"
#include "runtime/random.h"

namespace moekit::bench {
namespace {

using detail::DeviceBuffer;
using grouped::Case;
using grouped::default_cases;
using grouped::parse_case;
using grouped::usage;

/// One rotating input set: A (all allocated rows), B of every expert, and their scales.
struct Set {
  DeviceBuffer a, b, sa, sb;
};

/// Owns the per-set CUDA graphs of the cuBLASLt per-expert sequence.
struct Graphs {
  std::vector<cudaGraph_t> graphs;
  std::vector<cudaGraphExec_t> execs;
  ~Graphs() {
    for (auto e : execs)
      if (e) cudaGraphExecDestroy(e);
    for (auto g : graphs)
      if (g) cudaGraphDestroy(g);
  }
};

}  // namespace

int bench_grouped_main(int argc, char** argv) {
  enum class Format { kText, kCsv, kJson } format = Format::kText;
  int reps = 30;
  int cooldown_ms = 1500;
  bool baseline = true, energy = false;
  BenchData data = BenchData::kUniform;
  std::vector<Case> custom;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--case" && i + 1 < argc) {
      Case c;
      if (!parse_case(argv[++i], c)) {
        std::fprintf(stderr, "moekit bench grouped: bad --case '%s' (want contiguous|masked:E:M:N:K)\n", argv[i]);
        return 2;
      }
      custom.push_back(std::move(c));
    } else if (arg == "--csv") {
      format = Format::kCsv;
    } else if (arg == "--json") {
      format = Format::kJson;
    } else if (arg == "--no-baseline") {
      baseline = false;
    } else if (arg == "--energy") {
      energy = true;
    } else if (arg == "--data" && i + 1 < argc) {
      if (!parse_bench_data(argv[++i], &data)) {
        std::fprintf(stderr, "moekit bench grouped: bad --data '%s' (want uniform|normal)\n", argv[i]);
        return 2;
      }
    } else if ((arg == "--reps" || arg == "--cooldown-ms") && i + 1 < argc) {
      const bool is_reps = arg == "--reps";
      const std::string v = argv[++i];
      char* end = nullptr;
      const long x = std::strtol(v.c_str(), &end, 10);
      if (v.empty() || end != v.c_str() + v.size() || x < (is_reps ? 1 : 0) || x > (is_reps ? 100000 : 60000)) {
        std::fprintf(stderr, "moekit bench grouped: bad %s '%s'\n", arg.c_str(), v.c_str());
        return 2;
      }
      (is_reps ? reps : cooldown_ms) = static_cast<int>(x);
    } else if (arg == "-h" || arg == "--help") {
      usage(stdout);
      return 0;
    } else {
      std::fprintf(stderr, "moekit bench grouped: unknown option '%s'\n", arg.c_str());
      usage(stderr);
      return 2;
    }
  }

  if (!detail::gpu_available()) {
    std::fprintf(stderr, "moekit bench grouped: no CUDA device visible\n");
    return 1;
  }
  const detail::DeviceInfo& dev = detail::current_device();
  cudaDeviceProp prop{};
  MOEKIT_CUDA_CHECK(cudaGetDeviceProperties(&prop, dev.device));
  const bool text = format == Format::kText;
  FILE* info = text ? stdout : stderr;
  std::fprintf(info, "# device %d: %s (sm_%d%d, %d SMs, L2 %zu MiB)%s%s\n", dev.device, prop.name, dev.cc_major,
               dev.cc_minor, dev.num_sms, dev.l2_bytes >> 20, baseline ? ", baseline " : "",
               baseline ? baseline::CublasLt::version().c_str() : "");
  double copy_bw = 0.0;  // bytes/s, read + write
  try {
    copy_bw = measured_copy_bandwidth();
    std::fprintf(info, "# measured device copy bandwidth (read + write): %.0f GB/s\n", copy_bw / 1e9);
  } catch (const std::exception& e) {
    std::fprintf(info, "# measured device copy bandwidth: n/a (%s)\n", one_line(e.what()).c_str());
  }
  std::fprintf(info, "# data: %s (--data)\n", bench_data_name(data));
  if (baseline)
    std::fprintf(info, "# cuBLASLt: one block-scaled FP8 GEMM per non-empty expert, replayed as one CUDA graph\n");
  std::fflush(info);

  const BenchStream bench_stream;
  const cudaStream_t stream = bench_stream.get();

  std::unique_ptr<baseline::CublasLt> lt;
  if (baseline) lt = std::make_unique<baseline::CublasLt>();

  Table table({"layout", "E", "m", "sum_m", "rows", "N", "K", "us", "TFLOPS", "GB/s", "%copy", "dg_h800",
               "vs_dg", "kern_us", "kTFLOPS", "vs_dg_k", "lt_us", "vs_lt", "lt_kern_us", "pt_kTFLOPS",
               "rel_l2_vs_lt", "note"});
  std::vector<double> vs_lt_contig, vs_lt_masked, vs_lt_decode, vs_dg, vs_dg_k;

  std::vector<Case> cases = default_cases();
  if (!custom.empty()) {  // a --case that is a published one keeps DeepGEMM's figure
    for (Case& x : custom)
      for (const Case& d : cases)
        if (d.layout == x.layout && d.counts == x.counts && d.max_m == x.max_m && d.n == x.n && d.k == x.k)
          x.published = d.published;
    cases = std::move(custom);
  }
  std::vector<std::string> energy_lines;
  for (size_t ci = 0; ci < cases.size(); ++ci) {
    const Case& c = cases[ci];
    const int64_t E = int64_t(c.counts.size()), n = c.n, k = c.k;
    const int64_t kb = ceil_div(k, kQuantBlock), nb = ceil_div(n, kQuantBlock);
    const int64_t total = std::accumulate(c.counts.begin(), c.counts.end(), int64_t(0));
    std::fprintf(stderr, "[%zu/%zu] %s E=%lld m=%s N=%lld K=%lld\n", ci + 1, cases.size(), c.layout.c_str(),
                 (long long)E, c.m_text.c_str(), (long long)n, (long long)k);

    // Row layout: each expert's first row and valid rows.
    int64_t rows = 0;
    std::vector<int32_t> offsets;
    std::vector<int64_t> start(static_cast<size_t>(E)), valid(static_cast<size_t>(E));
    if (c.masked) {
      rows = E * c.max_m;
      for (int64_t e = 0; e < E; ++e) {
        start[size_t(e)] = e * c.max_m;
        valid[size_t(e)] = std::clamp<int64_t>(c.counts[size_t(e)], 0, c.max_m);
      }
    } else {
      rows = contiguous_rows_upper_bound(total, E);
      offsets = contiguous_offsets(c.counts);
      for (int64_t e = 0; e < E; ++e) {
        start[size_t(e)] = offsets[size_t(e)];
        valid[size_t(e)] = c.counts[size_t(e)];
      }
    }
    std::vector<int64_t> active;  // experts with ≥ 1 row
    for (int64_t e = 0; e < E; ++e)
      if (valid[size_t(e)] > 0) active.push_back(e);
    const int64_t e_active = int64_t(active.size());

    const double flops = 2.0 * double(total) * double(n) * double(k);
    const double bytes = double(e_active) * (double(n * k) + 4.0 * double(nb * kb)) +  // weights, once
                         double(total) * (double(k) + 4.0 * double(kb)) +              // A and its scales
                         2.0 * double(total) * double(n);                              // D
    std::vector<std::string> row = {c.layout,
                                    std::to_string(E),
                                    c.m_text,
                                    std::to_string(total),
                                    std::to_string(rows),
                                    std::to_string(n),
                                    std::to_string(k)};
    std::string us_s = "-", tf_s = "-", gbs_s = "-", pct_s = "-", dg_s = "-", vsdg_s = "-";
    std::string lt_s = "-", vslt_s = "-", rel_s = "-", kern_s = "-", ktf_s = "-", vsdgk_s = "-", ltk_s = "-",
                ptk_s = "-";
    std::vector<std::string> notes;
    if (c.published > 0.0) dg_s = fmt("%.0f", c.published);

    try {
      const int64_t sa_count = sfa_physical_size(rows, k);
      const int64_t sb_count = E * nb * kb;
      const size_t set_bytes = size_t(rows * k + E * n * k) + 4 * size_t(sa_count + sb_count);
      const int nsets = rotation_sets(set_bytes);
      std::vector<Set> sets(static_cast<size_t>(nsets));
      for (int s = 0; s < nsets; ++s) {
        Set& x = sets[size_t(s)];
        x.a = DeviceBuffer(size_t(rows * k));
        x.b = DeviceBuffer(size_t(E * n * k));
        x.sa = DeviceBuffer(size_t(sa_count) * sizeof(float));
        x.sb = DeviceBuffer(size_t(sb_count) * sizeof(float));
        const uint64_t seed = 2000003ull * (ci + 1) + 101ull * uint64_t(s);
        fill_fp8_activations(x.a.get(), rows * k, data, seed + 1, stream);
        fill_fp8_weights(x.b.get(), E * n * k, data, seed + 2, stream);
        detail::fill_random_f32(x.sa.as<float>(), sa_count, 0.5f, 2.0f, seed + 3, stream);
        detail::fill_random_f32(x.sb.as<float>(), sb_count, 0.5f, 2.0f, seed + 4, stream);
      }
      DeviceBuffer counts_dev(size_t(E) * sizeof(int32_t)), offsets_dev(size_t(E + 1) * sizeof(int32_t));
      MOEKIT_CUDA_CHECK(cudaMemcpyAsync(counts_dev.get(), c.counts.data(), size_t(E) * sizeof(int32_t),
                                        cudaMemcpyHostToDevice, stream));
      if (!c.masked)
        MOEKIT_CUDA_CHECK(cudaMemcpyAsync(offsets_dev.get(), offsets.data(), size_t(E + 1) * sizeof(int32_t),
                                          cudaMemcpyHostToDevice, stream));
      DeviceBuffer d_ours(size_t(rows * n) * 2), d_lt(size_t(rows * n) * 2);
      MOEKIT_CUDA_CHECK(cudaMemsetAsync(d_ours.get(), 0xFF, d_ours.bytes(), stream));
      MOEKIT_CUDA_CHECK(cudaMemsetAsync(d_lt.get(), 0xFF, d_lt.bytes(), stream));
      MOEKIT_CUDA_CHECK(cudaStreamSynchronize(stream));

      // --- ours ---------------------------------------------------------------------------------
      double our_us = -1.0;
      double pass_us = 0.0;  // one timed pass of back-to-back calls, estimated from one call
      try {
        if (c.masked) grouped_gemm_fp8_prepare_masked(c.max_m, E, n, k);
        else grouped_gemm_fp8_prepare_contiguous(rows, E, n, k);
        auto ours = [&](int s) {
          GroupedGemmFp8Args a;
          a.num_groups = E;
          a.n = n;
          a.k = k;
          a.a = sets[size_t(s)].a.get();
          a.lda = k;
          a.sa = sets[size_t(s)].sa.as<float>();
          a.b = sets[size_t(s)].b.get();
          a.ldb = k;
          a.sb = sets[size_t(s)].sb.as<float>();
          a.d = d_ours.get();
          a.ldd = n;
          if (c.masked) grouped_gemm_fp8_masked(a, c.max_m, counts_dev.as<int32_t>(), stream);
          else grouped_gemm_fp8_contiguous(a, rows, offsets_dev.as<int32_t>(), counts_dev.as<int32_t>(), stream);
        };
        ours(0);  // first use outside the timing
        MOEKIT_CUDA_CHECK(cudaStreamSynchronize(stream));
        pass_us = time_median_us([&](int it) { ours(it % nsets); }, stream, 0, 1) * (reps + 5);
        cool_down(pass_us, cooldown_ms);
        our_us = time_median_us([&](int it) { ours(it % nsets); }, stream, 5, reps);
        us_s = fmt("%.2f", our_us);
        const double tflops = flops / (our_us * 1e-6) / 1e12;
        tf_s = fmt("%.1f", tflops);
        const double rate = bytes / (our_us * 1e-6);
        gbs_s = fmt("%.0f", rate / 1e9);
        if (copy_bw > 0.0) pct_s = fmt("%.1f", 100.0 * rate / copy_bw);
        if (c.published > 0.0) {
          vsdg_s = fmt("%.3f", tflops / c.published);
          vs_dg.push_back(tflops / c.published);
        }
        std::string why;
        cool_down(pass_us, cooldown_ms);
        const double kern_us =
            kernel_time_median_us([&](int it) { ours(it % nsets); }, stream, 2, reps, &why, kKinetoFlushBytes);
        if (energy)
          energy_lines.push_back(fmt("# energy %s %zux%s (%lld, %lld) ours: ", c.layout.c_str(), c.counts.size(),
                                     c.m_text.c_str(), (long long)n, (long long)k) +
                                 energy_per_call([&](int it) { ours(it % nsets); }, stream, our_us, reps, pass_us,
                                                 cooldown_ms, "call"));
        if (kern_us > 0.0) {
          kern_s = fmt("%.2f", kern_us);
          const double ktf = flops / (kern_us * 1e-6) / 1e12;
          ktf_s = fmt("%.1f", ktf);
          if (c.published > 0.0) {
            vsdgk_s = fmt("%.3f", ktf / c.published);
            vs_dg_k.push_back(ktf / c.published);
          }
        } else {
          notes.push_back("kern: " + why);
        }
        ours(0);  // the output compared with cuBLASLt: set 0
        MOEKIT_CUDA_CHECK(cudaStreamSynchronize(stream));
      } catch (const std::exception& e) {
        our_us = -1.0;
        us_s = "err";
        notes.push_back(std::string("ours: ") + one_line(e.what()));
        cudaGetLastError();
      }

      // --- cuBLASLt, one GEMM per non-empty expert ------------------------------------------------
      if (lt && e_active > 0) {
        try {
          // Rows per expert for cuBLASLt (a multiple of 4), which must stay inside the expert's
          // segment of the layout.
          std::vector<int64_t> m4(static_cast<size_t>(e_active));
          bool rounded = false, fits = true;
          for (int64_t i = 0; i < e_active; ++i) {
            const int64_t e = active[size_t(i)];
            m4[size_t(i)] = align_up(valid[size_t(e)], 4);
            rounded |= m4[size_t(i)] != valid[size_t(e)];
            const int64_t seg_end = c.masked ? start[size_t(e)] + c.max_m : int64_t(offsets[size_t(e + 1)]);
            fits &= start[size_t(e)] + m4[size_t(i)] <= seg_end;
          }
          if (!fits) throw Error(ErrorCode::kInvalidArgument, "an expert's rows rounded up to 4 leave its segment");
          if (rounded) notes.push_back("lt: expert rows rounded up to x4");

          // Per-expert A scales in moekit's physical layout for m4 rows (cuBLASLt's prepare step
          // converts them), copied out of the grouped layout [kb, sfa_ld(rows)].
          std::vector<DeviceBuffer> sa_e(static_cast<size_t>(nsets * e_active));
          auto lt_args = [&](int s, int64_t i) {
            const int64_t e = active[size_t(i)];
            GemmFp8Args a;
            a.m = m4[size_t(i)];
            a.n = n;
            a.k = k;
            a.a = sets[size_t(s)].a.as<uint8_t>() + start[size_t(e)] * k;
            a.lda = k;
            a.sa = sa_e[size_t(s * e_active + i)].as<float>();
            a.b = sets[size_t(s)].b.as<uint8_t>() + e * n * k;
            a.ldb = k;
            a.sb = sets[size_t(s)].sb.as<float>() + e * nb * kb;
            a.d = d_lt.as<uint16_t>() + start[size_t(e)] * n;
            a.ldd = n;
            return a;
          };
          baseline::LtStatus st;
          for (int s = 0; s < nsets && st; ++s)
            for (int64_t i = 0; i < e_active && st; ++i) {
              const int64_t e = active[size_t(i)], m = m4[size_t(i)];
              DeviceBuffer& buf = sa_e[size_t(s * e_active + i)];
              buf = DeviceBuffer(size_t(sfa_physical_size(m, k)) * sizeof(float));
              MOEKIT_CUDA_CHECK(cudaMemcpy2DAsync(buf.get(), size_t(sfa_ld(m)) * sizeof(float),
                                                  sets[size_t(s)].sa.as<float>() + start[size_t(e)],
                                                  size_t(sfa_ld(rows)) * sizeof(float), size_t(m) * sizeof(float),
                                                  size_t(kb), cudaMemcpyDeviceToDevice, stream));
              st = lt->prepare_fp8(lt_args(s, i), stream, int(s * e_active + i));
            }
          auto run_lt = [&](int s) -> baseline::LtStatus {
            for (int64_t i = 0; i < e_active; ++i) {
              const baseline::LtStatus r = lt->gemm_fp8(lt_args(s, i), stream, int(s * e_active + i));
              if (!r) return r;
            }
            return baseline::LtStatus::success();
          };
          for (int s = 0; s < nsets && st; ++s) st = run_lt(s);  // first use (and lazy init) outside capture
          if (st) {
            MOEKIT_CUDA_CHECK(cudaStreamSynchronize(stream));
            // Capture each set's sequence once; fall back to direct calls if capture fails.
            Graphs g;
            bool graphed = true;
            for (int s = 0; s < nsets && graphed; ++s) {
              cudaGraph_t graph = nullptr;
              cudaGraphExec_t exec = nullptr;
              if (cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal) != cudaSuccess) {
                graphed = false;
                break;
              }
              baseline::LtStatus r;
              try {
                r = run_lt(s);
              } catch (const std::exception&) {
                r = baseline::LtStatus::unsupported("capture");
              }
              const cudaError_t end = cudaStreamEndCapture(stream, &graph);
              if (graph) g.graphs.push_back(graph);
              if (!r || end != cudaSuccess || !graph || cudaGraphInstantiate(&exec, graph, 0) != cudaSuccess) {
                graphed = false;
                break;
              }
              g.execs.push_back(exec);
            }
            cudaGetLastError();  // a failed capture leaves a non-sticky error
            if (!graphed) notes.push_back("lt: graph capture failed, timed as direct calls");
            cool_down(pass_us, cooldown_ms);
            const double lt_us = time_median_us(
                [&](int it) {
                  const int s = it % nsets;
                  if (graphed) {
                    MOEKIT_CUDA_CHECK(cudaGraphLaunch(g.execs[size_t(s)], stream));
                  } else {
                    const baseline::LtStatus r = run_lt(s);
                    if (!r) throw Error(ErrorCode::kInternal, r.message);
                  }
                },
                stream, 5, reps);
            auto lt_call = [&](int it) {
              if (graphed) {
                MOEKIT_CUDA_CHECK(cudaGraphLaunch(g.execs[size_t(it % nsets)], stream));
              } else {
                const baseline::LtStatus r = run_lt(it % nsets);
                if (!r) throw Error(ErrorCode::kInternal, r.message);
              }
            };
            std::string why;
            cool_down(pass_us, cooldown_ms);
            const double ltk_us = kernel_time_median_us(lt_call, stream, 2, reps, &why, kKinetoFlushBytes);
            ltk_s = ltk_us > 0.0 ? fmt("%.2f", ltk_us) : "n/a";
            if (energy)
              energy_lines.push_back(fmt("# energy %s %zux%s (%lld, %lld) lt_fp8: ", c.layout.c_str(),
                                         c.counts.size(), c.m_text.c_str(), (long long)n, (long long)k) +
                                     energy_per_call(lt_call, stream, lt_us, reps, pass_us, cooldown_ms, "call"));
            if (c.layout != "decode") {  // the per-tensor-scaled ceiling, kernel-only
              baseline::LtStatus pt;
              auto run_pt = [&](int it) {
                for (int64_t i = 0; i < e_active && pt; ++i) pt = lt->gemm_fp8_tensor_scaled(lt_args(it % nsets, i), stream);
              };
              run_pt(0);
              cool_down(pass_us, cooldown_ms);
              const double pt_us = pt ? kernel_time_median_us(run_pt, stream, 2, reps, &why, kKinetoFlushBytes) : -1.0;
              if (!pt) notes.push_back("pt: " + one_line(pt.message));
              ptk_s = pt_us > 0.0 ? fmt("%.1f", flops / (pt_us * 1e-6) / 1e12) : "n/a";
            }
            const baseline::LtStatus r = run_lt(0);  // the output compared: set 0
            if (!r) throw Error(ErrorCode::kInternal, r.message);
            MOEKIT_CUDA_CHECK(cudaStreamSynchronize(stream));
            lt_s = fmt("%.2f", lt_us);
            if (our_us > 0.0) {
              const double x = lt_us / our_us;
              vslt_s = fmt("%.3f", x);
              (c.layout == "contiguous" ? vs_lt_contig : c.layout == "masked" ? vs_lt_masked : vs_lt_decode)
                  .push_back(x);
              // Relative L2 over the valid rows only.
              const auto ours = d_ours.download<uint16_t>(size_t(rows * n));
              const auto theirs = d_lt.download<uint16_t>(size_t(rows * n));
              double num = 0.0, den = 0.0;
              for (int64_t e : active)
                for (int64_t i = 0; i < valid[size_t(e)]; ++i) {
                  const size_t base = size_t((start[size_t(e)] + i) * n);
                  for (int64_t j = 0; j < n; ++j) {
                    const double o = bf16_to_float(ours[base + size_t(j)]);
                    const double t = bf16_to_float(theirs[base + size_t(j)]);
                    num += (o - t) * (o - t);
                    den += t * t;
                  }
                }
              const double rel = (std::isnan(num) || std::isnan(den)) ? std::nan("")
                                 : den > 0.0                          ? std::sqrt(num / den)
                                                                      : std::sqrt(num);
              rel_s = fmt("%.2e", rel);
            }
          } else {
            lt_s = "n/a";
            notes.push_back("lt: " + one_line(st.message));
          }
        } catch (const std::exception& e) {
          lt_s = "err";
          notes.push_back(std::string("lt: ") + one_line(e.what()));
          cudaGetLastError();
        }
      }
    } catch (const std::exception& e) {  // allocation or fill failure for this case
      notes.push_back(one_line(e.what()));
      cudaGetLastError();
    }

    row.insert(row.end(),
               {us_s, tf_s, gbs_s, pct_s, dg_s, vsdg_s, kern_s, ktf_s, vsdgk_s, lt_s, vslt_s, ltk_s, ptk_s, rel_s});
    std::string note;
    for (const auto& s : notes) note += (note.empty() ? "" : "; ") + s;
    row.push_back(note);
    table.add_row(std::move(row));
  }

  switch (format) {
    case Format::kText: std::fputs(table.text().c_str(), stdout); break;
    case Format::kCsv: std::fputs(table.csv().c_str(), stdout); break;
    case Format::kJson: std::fputs(table.json().c_str(), stdout); break;
  }
  for (const auto& line : energy_lines) std::fprintf(info, "%s\n", line.c_str());
  auto geo = [](const std::vector<double>& v) {
    return v.empty() ? std::string("n/a") : fmt("%.3fx over %zu cases", geomean(v), v.size());
  };
  if (baseline) {
    std::fprintf(info, "geomean speedup vs cuBLASLt per-expert FP8 (lt_us / our_us), contiguous: %s\n",
                 geo(vs_lt_contig).c_str());
    std::fprintf(info, "geomean speedup vs cuBLASLt per-expert FP8 (lt_us / our_us), masked:     %s\n",
                 geo(vs_lt_masked).c_str());
    std::fprintf(info, "geomean speedup vs cuBLASLt per-expert FP8 (lt_us / our_us), decode:     %s\n",
                 geo(vs_lt_decode).c_str());
  }
  std::fprintf(info, "geomean of our TFLOPS / DeepGEMM's published H800 TFLOPS: %s\n", geo(vs_dg).c_str());
  std::fprintf(info, "geomean of our kernel-only TFLOPS / DeepGEMM's (its own method): %s\n", geo(vs_dg_k).c_str());
  return 0;
}

}  // namespace moekit::bench

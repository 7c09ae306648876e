// moekit bench quant — the quantization kernels against the measured device copy bandwidth.
//
// For each activation shape (T tokens x H hidden) the 1x128 quantizer is timed with and without
// ue8m0 scales; the traffic counted is the bf16 input read plus the FP8 output and FP32 scales
// written. Input sets rotate so that repeated runs do not hit in L2. One row times the 128x128
// weight quantizer (one-time weight preparation) on a 7168 x 2048 matrix.
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include <cuda_runtime_api.h>

#include "bench/bench.h"
#include "bench/bench_util.h"
#include "common/check.h"
#include "moekit/numerics.h"
#include "moekit/quantize.h"
#include "runtime/device_buffer.h"
#include "runtime/random.h"

namespace moekit::bench {
namespace {

using detail::DeviceBuffer;

struct QuantSet {
  DeviceBuffer x, q, s;
};

// Allocates `sets` copies of (x, q, scales), fills x with random bf16, returns them.
std::vector<QuantSet> make_sets(int sets, int64_t rows, int64_t k, size_t scale_floats, cudaStream_t st) {
  std::vector<QuantSet> v;
  v.reserve(static_cast<size_t>(sets));
  for (int i = 0; i < sets; ++i) {
    QuantSet s{DeviceBuffer(static_cast<size_t>(rows * k) * 2), DeviceBuffer(static_cast<size_t>(rows * k)),
               DeviceBuffer(scale_floats * sizeof(float))};
    detail::fill_random_bf16(s.x.get(), rows * k, 4.0f, 1234 + static_cast<uint64_t>(i), st);
    v.push_back(std::move(s));
  }
  return v;
}

}  // namespace

int bench_quant_main(int argc, char** argv) {
  enum class Out { kText, kCsv, kJson } out = Out::kText;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--csv")) {
      out = Out::kCsv;
    } else if (!std::strcmp(argv[i], "--json")) {
      out = Out::kJson;
    } else if (!std::strcmp(argv[i], "-h") || !std::strcmp(argv[i], "--help")) {
      std::printf("usage: moekit bench quant [--csv|--json]\n");
      return 0;
    } else {
      std::fprintf(stderr, "moekit bench quant: unknown option '%s'\n", argv[i]);
      return 2;
    }
  }

  cudaStream_t st;
  MOEKIT_CUDA_CHECK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  const double copy_bw = measured_copy_bandwidth();  // bytes/s, read + write

  Table table({"kernel", "rows", "k", "ue8m0", "sets", "us", "GB/s", "%copy"});
  auto add = [&](const char* kernel, int64_t rows, int64_t k, bool ue8m0, int sets, double us, double bytes) {
    const double gbs = bytes / (us * 1e-6) / 1e9;
    table.add_row({kernel, fmt("%lld", static_cast<long long>(rows)), fmt("%lld", static_cast<long long>(k)),
                   ue8m0 ? "yes" : "no", fmt("%d", sets), fmt("%.2f", us), fmt("%.1f", gbs),
                   fmt("%.1f", 100.0 * gbs * 1e9 / copy_bw)});
  };

  const int64_t shapes[][2] = {{1, 7168},     {64, 7168},     {1024, 7168}, {4096, 7168},
                               {16384, 7168}, {16384, 2048},  {4096, 2880}};
  for (const auto& sh : shapes) {
    const int64_t t = sh[0], h = sh[1];
    const int64_t kb = ceil_div(h, kQuantBlock);
    const size_t scale_floats = static_cast<size_t>(sfa_physical_size(t, h));
    // Traffic: bf16 in, fp8 out, one fp32 scale per (row, 128-column group) out.
    const double bytes = double(t) * h * 2 + double(t) * h + double(t) * kb * 4;
    const size_t set_bytes = static_cast<size_t>(t * h * 3) + scale_floats * 4;
    const int sets = rotation_sets(set_bytes);
    auto data = make_sets(sets, t, h, scale_floats, st);
    for (bool ue8m0 : {false, true}) {
      const double us = time_median_us(
          [&](int it) {
            QuantSet& s = data[static_cast<size_t>(it % sets)];
            quantize_act_1x128(s.x.get(), h, t, h, s.q.get(), h, s.s.as<float>(), ue8m0, st);
          },
          st);
      add("act_1x128", t, h, ue8m0, sets, us, bytes);
    }
  }

  {
    const int64_t n = 7168, k = 2048;
    const size_t scale_floats = static_cast<size_t>(ceil_div(n, kQuantBlock) * ceil_div(k, kQuantBlock));
    const double bytes = double(n) * k * 3 + double(scale_floats) * 4;
    const int sets = rotation_sets(static_cast<size_t>(bytes));
    auto data = make_sets(sets, n, k, scale_floats, st);
    const double us = time_median_us(
        [&](int it) {
          QuantSet& s = data[static_cast<size_t>(it % sets)];
          quantize_weight_128x128(s.x.get(), k, n, k, s.q.get(), k, s.s.as<float>(), false, st);
        },
        st);
    add("weight_128x128", n, k, false, sets, us, bytes);
  }

  MOEKIT_CUDA_CHECK(cudaStreamSynchronize(st));
  MOEKIT_CUDA_CHECK(cudaStreamDestroy(st));

  if (out == Out::kCsv) {
    std::printf("%s", table.csv().c_str());
  } else if (out == Out::kJson) {
    std::printf("%s\n", table.json().c_str());
  } else {
    std::printf("quantization kernels; copy bandwidth %.1f GB/s (read + write)\n", copy_bw / 1e9);
    std::printf("%s", table.text().c_str());
  }
  return 0;
}

}  // namespace moekit::bench

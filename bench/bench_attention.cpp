// moekit bench attention — DeepSeek-V4's sparse MQA attention (moekit::sparse_attention): decode
// batches and a prefill over a mixed FP8/BF16 cache of 256 K entries (three arrays, or `--kv rows`:
// one 640-byte row per entry; or bf16 rows), each token with
// `topk` random entries plus a 128-entry window. Prints µs, TFLOPS (4 · T · heads · keys · dim),
// GB/s of gathered KV (T · keys · bytes per entry), its % of the measured copy bandwidth, and the
// unfused baseline in the same process (gather + cuBLASLt GEMMs + softmax,
// src/baseline/attention_unfused.h) with the rel L2 between the two outputs. Index sets rotate so
// repeated calls read fresh entries, not L2.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <cuda_runtime_api.h>

#include "baseline/attention_unfused.h"
#include "bench/bench.h"
#include "bench/bench_util.h"
#include "common/check.h"
#include "moekit/attention.h"
#include "moekit/numerics.h"
#include "runtime/device_buffer.h"

namespace moekit::bench {
namespace {

using detail::DeviceBuffer;

// The cache layouts `--kv` picks: mixed (three dense arrays), rows (the mixed entries as one
// 640-byte row each: nope | rope | scales | pad), bf16.
enum class Layout { kMixed, kRows, kBf16 };
constexpr int64_t kRowBytes = 640;

struct Cache {
  int64_t entries;
  bool mixed;
  DeviceBuffer nope, scales, rope, rows, bf16;
  AttentionKv kv;
  Cache(int64_t n, Layout layout, cudaStream_t st) : entries(n), mixed(layout != Layout::kBf16) {
    DeviceBuffer k(size_t(n) * 512 * 2);
    fill_bf16_activations(k.get(), n * 512, BenchData::kNormal, 77, st);
    if (mixed) {
      std::vector<int32_t> slots(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i) slots[size_t(i)] = int32_t(i);
      DeviceBuffer ds = DeviceBuffer::from(slots);
      kv.format = KvFormat::kMixedFp8;
      if (layout == Layout::kRows) {
        rows = DeviceBuffer(size_t(n) * kRowBytes);
        uint8_t* base = rows.as<uint8_t>();
        kv.mixed = MixedKvCache{base, reinterpret_cast<float*>(base + 576), base + 448, n, kRowBytes, kRowBytes,
                                kRowBytes};
      } else {
        nope = DeviceBuffer(size_t(n) * 448);
        scales = DeviceBuffer(size_t(n) * 7 * 4);
        rope = DeviceBuffer(size_t(n) * 64 * 2);
        kv.mixed = MixedKvCache{nope.as<uint8_t>(), scales.as<float>(), rope.get(), n};
      }
      mixed_kv_cache_write(k.get(), n, 512, ds.as<int32_t>(), kv.mixed, st);
      MOEKIT_CUDA_CHECK(cudaStreamSynchronize(st));
    } else {
      bf16 = std::move(k);
      kv.format = KvFormat::kBf16;
      kv.bf16 = bf16.get();
      kv.num_entries = n;
    }
  }
  double bytes_per_entry() const { return mixed ? 448 + 7 * 4 + 128 : 1024; }
};

struct Case {
  const char* phase;
  int64_t tokens;
  int heads, topk, window;
};

double rel_l2_bf16(const std::vector<uint16_t>& a, const std::vector<uint16_t>& b) {
  double e = 0, r = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const double x = bf16_to_float(a[i]), y = bf16_to_float(b[i]);
    e += (x - y) * (x - y);
    r += y * y;
  }
  return r > 0 ? std::sqrt(e / r) : std::sqrt(e);
}

}  // namespace

int bench_attention_main(int argc, char** argv) {
  enum class Out { kText, kCsv, kJson } out = Out::kText;
  std::vector<int64_t> tokens = {1, 16, 64, 128}, heads = {64, 128}, topks = {512, 2048};
  int window = 128, reps = 20;
  int64_t prefill = 4096, entries = 256 * 1024;
  Layout layout = Layout::kMixed;
  bool baseline = true;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const bool has = i + 1 < argc;
    if (a == "--csv") out = Out::kCsv;
    else if (a == "--json") out = Out::kJson;
    else if (a == "--tokens" && has) tokens = int_list(argv[++i]);
    else if (a == "--heads" && has) heads = int_list(argv[++i]);
    else if (a == "--topk" && has) topks = int_list(argv[++i]);
    else if (a == "--window" && has) window = std::atoi(argv[++i]);
    else if (a == "--prefill" && has) prefill = std::atoll(argv[++i]);
    else if (a == "--entries" && has) entries = std::atoll(argv[++i]);
    else if (a == "--reps" && has) reps = std::max(1, std::atoi(argv[++i]));
    else if (a == "--kv" && has) {
      const std::string v = argv[++i];
      if (v == "mixed") layout = Layout::kMixed;
      else if (v == "rows") layout = Layout::kRows;
      else if (v == "bf16") layout = Layout::kBf16;
      else {
        std::fprintf(stderr, "moekit bench attention: --kv takes mixed, rows or bf16, not '%s'\n", v.c_str());
        return 2;
      }
    }
    else if (a == "--no-baseline") baseline = false;
    else if (a == "-h" || a == "--help") {
      std::printf(
          "usage: moekit bench attention [--tokens 1,16,64,128] [--heads 64,128] [--topk 512,2048] [--window 128]\n"
          "                              [--prefill T (0: none)] [--kv mixed|rows|bf16] [--entries N] [--reps R]\n"
          "                              [--no-baseline] [--csv|--json]\n");
      return 0;
    } else {
      std::fprintf(stderr, "moekit bench attention: unknown option '%s'\n", argv[i]);
      return 2;
    }
  }
  BenchStream stream;
  cudaStream_t st = stream.get();
  const double copy_bw = measured_copy_bandwidth();
  Cache cache(entries, layout, st);
  const char* kv_name = layout == Layout::kMixed ? "mixed" : layout == Layout::kRows ? "rows" : "bf16";

  std::vector<Case> cases;
  for (int64_t h : heads)
    for (int64_t k : topks) {
      for (int64_t t : tokens) cases.push_back({"decode", t, int(h), int(k), window});
      if (prefill > 0) cases.push_back({"prefill", prefill, int(h), int(k), window});
    }

  Table table({"phase", "T", "heads", "topk", "window", "kv", "us", "TFLOPS", "KV GB/s", "%copy", "base us",
               "speedup", "rel L2 vs base"});
  std::mt19937 rng(1);
  for (const Case& c : cases) {
    const int keys = c.topk + c.window;
    const double kv_bytes = double(c.tokens) * keys * cache.bytes_per_entry();
    const int sets = std::max(1, std::min(rotation_sets(size_t(kv_bytes), 8), int(2e9 / std::max(kv_bytes, 1.0))));
    std::vector<DeviceBuffer> topk_sets, win_sets;
    for (int s = 0; s < sets; ++s) {
      std::vector<int32_t> ti(size_t(c.tokens * c.topk)), wi(size_t(c.tokens * c.window));
      for (auto& v : ti) v = int32_t(rng() % uint32_t(entries));
      for (auto& v : wi) v = int32_t(rng() % uint32_t(entries));
      topk_sets.push_back(DeviceBuffer::from(ti));
      win_sets.push_back(DeviceBuffer::from(wi));
    }
    DeviceBuffer q(size_t(c.tokens * c.heads) * 512 * 2), o(size_t(c.tokens * c.heads) * 512 * 2),
        lse(size_t(c.tokens * c.heads) * 4), sink(size_t(c.heads) * 4);
    fill_bf16_activations(q.get(), c.tokens * c.heads * 512, BenchData::kNormal, 5, st);
    std::vector<float> sinks(size_t(c.heads));
    for (auto& v : sinks) v = float(rng() % 100) / 25.0f - 2.0f;
    MOEKIT_CUDA_CHECK(cudaMemcpyAsync(sink.get(), sinks.data(), sinks.size() * 4, cudaMemcpyHostToDevice, st));
    SparseAttentionArgs args;
    args.q = q.get();
    args.num_tokens = c.tokens;
    args.heads = c.heads;
    args.dim = 512;
    args.softmax_scale = 1.0f / std::sqrt(512.0f);
    args.sink = sink.as<float>();
    args.topk = c.topk;
    args.window = c.window;
    args.num_requests = c.window > 0 ? c.tokens : 0;
    const auto with_set = [&](int s) {
      SparseAttentionArgs a = args;
      a.topk_indices = topk_sets[size_t(s)].as<int32_t>();
      a.window_indices = c.window > 0 ? win_sets[size_t(s)].as<int32_t>() : nullptr;
      return a;
    };
    const size_t ws_bytes = sparse_attention_workspace_bytes(with_set(0), AttentionOutput::kNormalized);
    DeviceBuffer ws(std::max<size_t>(ws_bytes, 16));
    SparseAttentionOut res;
    res.o = o.get();
    res.lse = lse.as<float>();
    const double us = time_median_us(
        [&](int i) {
          sparse_attention(with_set(i % sets), cache.kv, AttentionOutput::kNormalized, res, ws.get(), ws_bytes, st);
        },
        st, 3, reps);
    const double flops = 4.0 * double(c.tokens) * c.heads * keys * 512;
    const double gbs = kv_bytes / (us * 1e-6) / 1e9;
    std::string base_us = "-", speedup = "-", rel = "-";
    if (baseline) {
      baseline::UnfusedSparseAttention base(c.tokens, c.heads, 512, keys);
      DeviceBuffer ob(o.bytes());
      sparse_attention(with_set(0), cache.kv, AttentionOutput::kNormalized, res, ws.get(), ws_bytes, st);
      const baseline::LtStatus ok = base.run(with_set(0), cache.kv, ob.get(), nullptr, st);
      if (ok) {
        MOEKIT_CUDA_CHECK(cudaStreamSynchronize(st));
        const size_t n = size_t(c.tokens * c.heads) * 512;
        rel = fmt("%.1e", rel_l2_bf16(o.download<uint16_t>(n), ob.download<uint16_t>(n)));
        const double bus = time_median_us([&](int i) { base.run(with_set(i % sets), cache.kv, ob.get(), nullptr, st); },
                                          st, 2, std::max(3, reps / 4));
        base_us = fmt("%.1f", bus);
        speedup = fmt("%.2fx", bus / us);
      } else {
        base_us = "n/a";
      }
    }
    table.add_row({c.phase, fmt("%lld", static_cast<long long>(c.tokens)), fmt("%d", c.heads), fmt("%d", c.topk),
                   fmt("%d", c.window), kv_name, fmt("%.1f", us), fmt("%.1f", flops / (us * 1e-6) / 1e12),
                   fmt("%.0f", gbs), fmt("%.1f", 100.0 * gbs * 1e9 / copy_bw), base_us, speedup, rel});
  }
  if (out == Out::kCsv) std::printf("%s", table.csv().c_str());
  else if (out == Out::kJson) std::printf("%s\n", table.json().c_str());
  else {
    std::printf("# sparse MQA attention, dim 512, %lld cache entries (%s), sink on; measured copy bandwidth %.0f GB/s\n",
                static_cast<long long>(entries),
                layout == Layout::kMixed  ? "mixed FP8/BF16, 604 B each in 3 arrays"
                : layout == Layout::kRows ? "mixed FP8/BF16, 604 B each in one 640-byte row"
                                          : "bf16, 1024 B each",
                copy_bw / 1e9);
    std::printf("%s", table.text().c_str());
  }
  return 0;
}

}  // namespace moekit::bench

// `moekit bench grouped`'s cases (DeepGEMM's published grouped cases and a decode-like masked
// layout, or --case LAYOUT:E:M:N:K) and its usage text.
#pragma once
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "bench/bench_util.h"

namespace moekit::bench::grouped {

struct Case {
  std::string layout;  // "contiguous", "masked" or "decode" (masked)
  bool masked = false;
  std::vector<int32_t> counts;
  int64_t max_m = 0;  // masked layouts
  int64_t n = 0, k = 0;
  std::string m_text;      // rows per group, as printed
  double published = 0.0;  // DeepGEMM's H800 TFLOPS (0: none)
};

inline std::vector<Case> default_cases() {
  struct NK {
    int64_t n, k;
  };
  const NK nks[] = {{4096, 7168}, {7168, 2048}};
  std::vector<Case> out;
  // DeepGEMM README, grouped contiguous (H800): {E, m, TFLOPS for (4096,7168), for (7168,2048)}.
  const struct {
    int64_t e, m;
    double tf[2];
  } contiguous[] = {{4, 8192, {1297, 1099}}, {8, 4096, {1288, 1093}}};
  for (const auto& c : contiguous)
    for (int j = 0; j < 2; ++j) {
      Case x;
      x.layout = "contiguous";
      x.counts.assign(size_t(c.e), int32_t(c.m));
      x.n = nks[j].n;
      x.k = nks[j].k;
      x.m_text = std::to_string(c.m);
      x.published = c.tf[j];
      out.push_back(std::move(x));
    }
  // DeepGEMM README, grouped masked (H800): max_m = m, every count = m.
  const struct {
    int64_t e, m;
    double tf[2];
  } masked[] = {{1, 1024, {1233, 925}}, {2, 512, {1040, 916}}, {4, 256, {932, 815}}};
  for (const auto& c : masked)
    for (int j = 0; j < 2; ++j) {
      Case x;
      x.layout = "masked";
      x.masked = true;
      x.counts.assign(size_t(c.e), int32_t(c.m));
      x.max_m = c.m;
      x.n = nks[j].n;
      x.k = nks[j].k;
      x.m_text = std::to_string(c.m);
      x.published = c.tf[j];
      out.push_back(std::move(x));
    }
  // Decode-like masked layout: counts uniform in [1, 64], fixed seed per E.
  for (int64_t e : {32, 256})
    for (int j = 0; j < 2; ++j) {
      Case x;
      x.layout = "decode";
      x.masked = true;
      std::mt19937_64 rng(uint64_t(20250000 + e));
      std::uniform_int_distribution<int32_t> u(1, 64);
      x.counts.resize(size_t(e));
      for (auto& v : x.counts) v = u(rng);
      x.max_m = 64;
      x.n = nks[j].n;
      x.k = nks[j].k;
      const double avg = double(std::accumulate(x.counts.begin(), x.counts.end(), int64_t(0))) / double(e);
      x.m_text = fmt("1-64 (avg %.1f)", avg);
      out.push_back(std::move(x));
    }
  return out;
}

inline void usage(FILE* out) {
  std::fprintf(out,
               "usage: moekit bench grouped [--csv|--json] [--reps R] [--no-baseline] [--cooldown-ms MS]\n"
               "                            [--data uniform|normal] [--energy] [--case L:E:M:N:K]...\n"
               "  grouped FP8 GEMMs (contiguous and masked layouts) on DeepGEMM's published cases and a\n"
               "  decode-like masked layout, vs cuBLASLt block-scaled FP8 called once per expert\n"
               "  --reps R      timed repetitions per case, median reported (default 30)\n"
               "  --no-baseline skip cuBLASLt\n"
               "  --cooldown-ms MS  idle time before each timed pass longer than 20 ms (default 1500, 0: none)\n"
               "  --data D      operand values: uniform (every E4M3 code equally likely; default) or normal\n"
               "                (codes of amax-scaled normal data, as DeepGEMM's tests make them)\n"
               "  --energy      joules per call and average watts over >= 1.5 s of back-to-back calls (NVML)\n"
               "  --case L:E:M:N:K  instead of the default cases (repeatable): layout contiguous|masked,\n"
               "                E experts with M rows each (masked: max_m = M), N x K weights; a case that\n"
               "                is one of DeepGEMM's published ones keeps its dg_h800 column\n");
}

/// Parses --case LAYOUT:E:M:N:K; false if malformed or out of range.
inline bool parse_case(const std::string& text, Case& out) {
  std::vector<std::string> f;
  std::string cur;
  for (char ch : text + ":") {
    if (ch == ':') {
      f.push_back(cur);
      cur.clear();
    } else {
      cur += ch;
    }
  }
  if (f.size() != 5 || (f[0] != "contiguous" && f[0] != "masked")) return false;
  int64_t v[4];
  for (int i = 0; i < 4; ++i) {
    char* end = nullptr;
    const long long x = std::strtoll(f[size_t(i) + 1].c_str(), &end, 10);
    if (f[size_t(i) + 1].empty() || *end != '\0' || x < 1 || x > (int64_t(1) << 20)) return false;
    v[i] = x;
  }
  if (v[0] > 4096 || v[0] * v[1] > (int64_t(1) << 22)) return false;
  out = Case{};
  out.layout = f[0];
  out.masked = f[0] == "masked";
  out.counts.assign(size_t(v[0]), int32_t(v[1]));
  out.max_m = out.masked ? v[1] : 0;
  out.n = v[2];
  out.k = v[3];
  out.m_text = std::to_string(v[1]);
  return true;
}

}  // namespace moekit::bench::grouped

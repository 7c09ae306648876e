#include "runtime/knobs.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <mutex>

namespace moekit::detail {
namespace {

// A switch is on when set to anything that does not start with '0'.
bool on(const char* v) { return v && *v && *v != '0'; }
std::string str(const char* v) { return v ? std::string(v) : std::string(); }

Knobs& process_knobs() {
  static Knobs k;
  static std::once_flag once;
  std::call_once(once, [] {
    std::string ignored;
    k = parse_knobs([](const char* name) { return std::getenv(name); }, kDiagnosticsBuild, &ignored);
    if (!ignored.empty())
      std::fprintf(stderr,
                   "moekit: ignoring %s: diagnostic switches need a library configured with -DMOEKIT_DIAGNOSTICS=ON\n",
                   ignored.c_str());
  });
  return k;
}

}  // namespace

Knobs parse_knobs(const std::function<const char*(const char*)>& env, bool diagnostics, std::string* ignored) {
  Knobs k;
  if (const char* d = env("MOEKIT_CACHE_DIR"); d && *d) k.cache_dir = d;
  else if (const char* x = env("XDG_CACHE_HOME"); x && *x) k.cache_dir = std::string(x) + "/moekit";
  else if (const char* h = env("HOME"); h && *h) k.cache_dir = std::string(h) + "/.cache/moekit";
  else k.cache_dir = "/tmp/moekit-cache";
  k.jit_verbose = on(env("MOEKIT_JIT_VERBOSE"));
  k.log_config = on(env("MOEKIT_LOG_CONFIG"));
  k.grouped_config = str(env("MOEKIT_GROUPED_CONFIG"));
  k.moe_gemm1_config = str(env("MOEKIT_MOE_GEMM1_CONFIG"));
  k.moe_gemm2_config = str(env("MOEKIT_MOE_GEMM2_CONFIG"));
  if (const char* v = env("MOEKIT_MXFP4_DECODE"); v && *v) k.mxfp4_decode = on(v);
  if (const char* v = env("MOEKIT_MXFP4_STREAM_K"); v && *v) k.mxfp4_stream_k = std::clamp(std::atoi(v), -1, 3);
  if (const char* v = env("MOEKIT_MXFP4_K_GROUPS"); v && *v) k.mxfp4_k_groups = std::clamp(std::atoi(v), -1, 3);

  struct Diag {
    const char* name;
    std::string Knobs::*field;
  };
  const Diag diag[] = {{"MOEKIT_DIAG_SKIP", &Knobs::diag_skip},
                       {"MOEKIT_JIT_DEFINES", &Knobs::jit_defines},
                       {"MOEKIT_TRACE_GEMM", &Knobs::trace_gemm},
                       {"MOEKIT_TRACE_DUMP", &Knobs::trace_dump}};
  for (const Diag& d : diag) {
    const char* v = env(d.name);
    if (!v || !*v) continue;
    if (diagnostics) {
      k.*d.field = v;
    } else if (ignored) {
      if (!ignored->empty()) *ignored += ", ";
      *ignored += d.name;
    }
  }
  return k;
}

const Knobs& knobs() { return process_knobs(); }

ScopedKnobs::ScopedKnobs(const Knobs& k) : saved_(process_knobs()) { process_knobs() = k; }
ScopedKnobs::~ScopedKnobs() { process_knobs() = saved_; }

}  // namespace moekit::detail

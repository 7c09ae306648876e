// Every environment variable moekit reads, read once, in this module only (docs/environment.md is
// the table of them). Code elsewhere takes the parsed values from knobs() and passes them down;
// nothing else calls getenv.
//
// Two kinds of switch exist:
//  - settings and tuning overrides that never change results (cache folder, compiler log, config
//    log, forced tile configurations): read in every build;
//  - diagnostics that may produce wrong results or synchronize (stage skips, kernel #defines such
//    as MOEKIT_DIAG_NO_LOADS, per-CTA traces): read only by a library configured with
//    -DMOEKIT_DIAGNOSTICS=ON. The library users link ignores them (and says so once on stderr).
#pragma once
#include <functional>
#include <string>

namespace moekit::detail {

/// True in a library configured with -DMOEKIT_DIAGNOSTICS=ON.
#if defined(MOEKIT_DIAGNOSTICS) && MOEKIT_DIAGNOSTICS
inline constexpr bool kDiagnosticsBuild = true;
#else
inline constexpr bool kDiagnosticsBuild = false;
#endif

struct Knobs {
  // --- settings (every build) ---
  std::string cache_dir;       ///< MOEKIT_CACHE_DIR, else $XDG_CACHE_HOME/moekit, else $HOME/.cache/moekit, else /tmp/moekit-cache
  bool jit_verbose = false;    ///< MOEKIT_JIT_VERBOSE: print the compiler's messages of every kernel compiled
  bool log_config = false;     ///< MOEKIT_LOG_CONFIG: print every GEMM launch's kernel and configuration
  /// Tile configurations (GemmConfig strings, "m128n128s5g8x132c1") that replace the heuristic's pick;
  /// empty: the heuristic's. MOEKIT_GROUPED_CONFIG reaches every grouped GEMM launch (the MoE layer's
  /// rows GEMM2 at large T included), MOEKIT_MOE_GEMM1_CONFIG / MOEKIT_MOE_GEMM2_CONFIG the layer's
  /// fused GEMM1 / scatter-add GEMM2; those two with BLOCK_M < 64 ("m8n256s8g8x132c1": tokens x
  /// weight rows, A stages) reach only the MXFP4 decode GEMMs where the plan runs them.
  std::string grouped_config, moe_gemm1_config, moe_gemm2_config;
  /// MOEKIT_MXFP4_DECODE=0: MXFP4 layers run the expansion GEMMs at every T, never the decode GEMMs
  /// (kernels/sm90/mxfp4_decode_gemm.cuh), for A/B runs; the plan's choice otherwise.
  bool mxfp4_decode = true;
  /// MOEKIT_MXFP4_STREAM_K=M (a number, 0 … 3), for A/B runs: the decode GEMMs whose bit is set in
  /// M (1: GEMM1, 2: GEMM2) run stream-K pieces (kernels/sm90/scheduler_stream_k.cuh), the others
  /// whole tiles; -1 or unset: the plan's choice (text that is no number reads as 0).
  int mxfp4_stream_k = -1;
  /// MOEKIT_MXFP4_K_GROUPS=M (a number, 0 … 3), for A/B runs: the decode GEMMs whose bit is set in M
  /// (1: GEMM1, 2: GEMM2) split each 8-token tile's K blocks between two K groups of math warpgroups
  /// (MxDecodeTraits::kKGroups), the others one; -1 or unset: the plan's choice.
  int mxfp4_k_groups = -1;

  // --- diagnostics (only with kDiagnosticsBuild; empty otherwise) ---
  /// MOEKIT_DIAG_SKIP: comma-separated MoE stages the forward does not launch (wrong results).
  std::string diag_skip;
  /// MOEKIT_JIT_DEFINES: "NAME=VALUE[,| ]..." prepended as #defines to every GEMM kernel source
  /// (e.g. MOEKIT_DIAG_NO_LOADS=1); the kernel names get a hash of the list.
  std::string jit_defines;
  /// MOEKIT_TRACE_GEMM: substring of a kernel body's name whose launches record per-CTA timestamps
  /// (synchronizes; not graph-capturable). MOEKIT_TRACE_DUMP: file that every CTA's row is appended to.
  std::string trace_gemm, trace_dump;
};

/// The knobs of this process, read from the environment on first use (thread-safe).
const Knobs& knobs();

/// Parses knobs from `env` (a getenv-like lookup returning null for unset variables); `diagnostics`
/// says whether the diagnostic variables are honoured. `ignored` (optional) receives the names of
/// diagnostic variables that are set but not honoured. Pure: used by knobs() and by the CPU tests.
Knobs parse_knobs(const std::function<const char*(const char*)>& env, bool diagnostics,
                  std::string* ignored = nullptr);

/// Tests only: replaces the process's knobs while alive (not thread-safe against concurrent launches).
class ScopedKnobs {
 public:
  explicit ScopedKnobs(const Knobs& k);
  ~ScopedKnobs();
  ScopedKnobs(const ScopedKnobs&) = delete;
  ScopedKnobs& operator=(const ScopedKnobs&) = delete;

 private:
  Knobs saved_;
};

}  // namespace moekit::detail

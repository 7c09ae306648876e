// Benchmark helpers shared by the bench subcommands: timing with CUDA events, the measured copy
// bandwidth, and result tables (text, CSV, JSON).
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>
#include <cuda_runtime_api.h>

namespace moekit::bench {

/// "1,8,64" → {1, 8, 64} (each item as strtoll reads it).
std::vector<int64_t> int_list(const char* s);

/// Median of v (0 for an empty v).
double median_of(std::vector<double> v);

/// Median time in microseconds of fn(iteration) on `stream`, timed with CUDA events around each
/// call, after `warmup` untimed calls. fn receives the iteration index so the caller can rotate
/// among input sets (keep the working set out of L2).
double time_median_us(const std::function<void(int)>& fn, cudaStream_t stream, int warmup = 5,
                      int reps = 30);

/// Kernel-only time in microseconds, as nsys or DeepGEMM's bench_kineto report it: the median over
/// `reps` calls of the summed durations of the kernels one call of fn launched, from CUPTI's
/// activity records (libcupti is loaded at run time; bench/kernel_time.cpp). The calls run back to
/// back behind a spin kernel, as in time_median_us, but the launch gaps and the events' own cost
/// are left out. With `flush_bytes`, a memset of that many bytes (not timed) runs before each call,
/// as bench_kineto's L2 flush does. Returns -1 with the reason in *why where CUPTI is unavailable
/// or its records do not match the calls.
double kernel_time_median_us(const std::function<void(int)>& fn, cudaStream_t stream, int warmup, int reps,
                             std::string* why, size_t flush_bytes = 0);

/// What a serving loop sees of `calls` back-to-back calls of fn on `stream`, per call, in µs:
/// host_us, the host's enqueue time (timed behind a spin kernel, so the host never waits on the
/// GPU); loop_us, the stream's time of the eager loop (events around the whole loop, started on an
/// idle GPU, so launch gaps count when the host is the slower side); graph_us, the same loop as
/// replays of one captured call (negative where the capture fails). docs/python.md §Overhead
/// compares these with the Python layer's.
struct CallLoopTiming {
  double host_us = 0.0, loop_us = 0.0, graph_us = -1.0;
};
CallLoopTiming time_call_loop(const std::function<void()>& fn, cudaStream_t stream, int calls);

/// DeepGEMM's bench_kineto flushes L2 with a 256 MB memset before every timed call.
inline constexpr size_t kKinetoFlushBytes = size_t(256) << 20;

/// Sleeps `ms` milliseconds before a timed pass of `pass_us` microseconds of back-to-back work that
/// is long enough to heat the GPU into its power limit, so that each such pass (ours, cuBLASLt's)
/// starts from the same idle state whatever ran before it (docs/performance.md §Timing method).
void cool_down(double pass_us, int ms);

/// Energy the GPU `device` (CUDA ordinal) has used since its driver loaded, in joules (NVML's
/// total-energy counter, millijoule steps; libnvidia-ml is opened at run time), or a negative value
/// where NVML or the counter is missing.
double gpu_energy_joules(int device);

/// "N <what>s in MS ms: J per <what>, W" — the energy of one call of fn(i) (i = 0, 1, ...: rotate
/// inputs with it) and the average power, over at least 1.5 s and `reps` (at most 20000 calls) of
/// back-to-back calls of ~`us` each on `stream`, after a cool-down (cool_down(max(pass_us, 1.5 s),
/// cooldown_ms)) and two untimed calls; NVML's energy counter. At the GPU's power limit a long
/// kernel's time follows its energy (docs/performance.md §Energy and the power limit), which this measures. Returns a line saying so
/// where the counter is unavailable.
std::string energy_per_call(const std::function<void(int)>& fn, cudaStream_t stream, double us, int reps,
                            double pass_us, int cooldown_ms, const char* what);

/// The energy of moving device memory and of idling, as one line: back-to-back 1 GiB
/// device-to-device copies (energy_per_call; J per GB moved, read + write) and the average power
/// over 1 s of idle time after them.
std::string copy_energy_line(int cooldown_ms);

/// Device-to-device copy bandwidth in bytes/s (bytes read + bytes written), measured once per
/// process with a 1 GiB cudaMemcpyAsync and cached.
double measured_copy_bandwidth();

/// Streaming-read bandwidth in bytes/s (one pass of 16-byte loads over the same 1 GiB buffer),
/// measured together with the copy bandwidth: the ceiling of a weight-streaming kernel.
double measured_read_bandwidth();

/// How many rotating copies of a working set of `bytes` keep repeated runs out of L2
/// (≥ 3x the L2 size in total), capped by `max_sets`.
int rotation_sets(size_t bytes, int max_sets = 8);

/// The values the benchmarks run on (`--data`). On a power-limited GPU the time of a long FP8
/// GEMM depends on its operands' bits (docs/performance.md §Benchmark data), so this is part of every figure.
/// bench moe defaults to kCheckpoint (its correctness columns are bounded on such data); bench gemm
/// and bench grouped default to kUniform and take uniform or normal only.
///  * kUniform: every finite E4M3 code equally likely (magnitudes spread evenly over all 17
///    binades, 2^-9 … 448) and bf16 activations uniform in [-1, 1).
///  * kNormal: data as a block-quantized model holds it, and as DeepGEMM's tests make it
///    (torch.randn, then amax-scaled per 1x128 / 128x128 block): E4M3 codes of
///    N(0, σ²) with σ = 448 / 2.82 for activations and 448 / 4.15 for weights (the expected
///    maximum of |z| over 128 and over 16384 values), bf16 activations N(0, 1).
///  * kCheckpoint (bench moe only): weights made as a model checkpoint's: bf16 N(0, 0.02²)
///    quantized by the SPEC §1 128x128 quantizer, codes and scales together
///    (detail::fill_checkpoint_weights, src/runtime/random.h); bf16 activations N(0, 1). The
///    fill_fp8_* helpers below take it as kNormal (the codes such a quantizer makes); its scales
///    come only from fill_checkpoint_weights.
enum class BenchData { kUniform, kNormal, kCheckpoint };

/// σ of kCheckpoint's bf16 weights before quantization.
inline constexpr float kCheckpointWeightSigma = 0.02f;

/// "uniform" or "normal", and "checkpoint" where `allow_checkpoint`; false for anything else.
bool parse_bench_data(const std::string& name, BenchData* out, bool allow_checkpoint = false);
/// "uniform", "normal" or "checkpoint".
const char* bench_data_name(BenchData d);
/// FP8 activation codes (A of a GEMM, 1x128-block scaled).
void fill_fp8_activations(void* dst, int64_t n, BenchData d, uint64_t seed, cudaStream_t stream);
/// FP8 weight codes (B of a GEMM, 128x128-block scaled).
void fill_fp8_weights(void* dst, int64_t n, BenchData d, uint64_t seed, cudaStream_t stream);
/// bf16 activations (the MoE layer's x): uniform in [-1, 1) for kUniform, N(0, 1) otherwise.
void fill_bf16_activations(void* dst, int64_t n, BenchData d, uint64_t seed, cudaStream_t stream);

/// A result table: one row per case, printed as aligned text, CSV or JSON.
class Table {
 public:
  explicit Table(std::vector<std::string> columns) : columns_(std::move(columns)) {}
  void add_row(std::vector<std::string> row) { rows_.push_back(std::move(row)); }
  std::string text() const;
  std::string csv() const;
  std::string json() const;  ///< array of objects, one per row, values as strings or numbers

 private:
  std::vector<std::string> columns_;
  std::vector<std::vector<std::string>> rows_;
};

/// printf-style formatting into a std::string.
std::string fmt(const char* format, ...);

/// A non-blocking stream owned by a benchmark (created in the constructor, destroyed after).
class BenchStream {
 public:
  BenchStream();
  ~BenchStream();
  BenchStream(const BenchStream&) = delete;
  BenchStream& operator=(const BenchStream&) = delete;
  cudaStream_t get() const { return s_; }

 private:
  cudaStream_t s_ = nullptr;
};

/// The text with line breaks replaced by spaces (for error messages in table cells).
std::string one_line(std::string s);

/// Geometric mean of positive values (NaN for none).
double geomean(const std::vector<double>& v);

}  // namespace moekit::bench

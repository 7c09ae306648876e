// Benchmark helpers: CUDA-event timing, the measured device copy bandwidth, L2 rotation and the
// result table (text / CSV / JSON).
#include "bench/bench_util.h"
#include "runtime/random.h"

#include <algorithm>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <chrono>
#include <mutex>
#include <thread>
#include <sstream>

#include "common/check.h"
#include "runtime/device.h"
#include "runtime/device_buffer.h"

namespace moekit::bench {

std::vector<int64_t> int_list(const char* s) {
  std::vector<int64_t> v;
  for (const char* p = s; *p;) {
    v.push_back(std::strtoll(p, nullptr, 10));
    p = std::strchr(p, ',');
    if (!p) break;
    ++p;
  }
  return v;
}
namespace {

/// Owns a set of CUDA events; destroys them even when the timed function throws.
class EventSet {
 public:
  explicit EventSet(size_t n) : events_(n, nullptr) {
    for (auto& e : events_) MOEKIT_CUDA_CHECK(cudaEventCreate(&e));
  }
  ~EventSet() {
    for (auto e : events_)
      if (e) cudaEventDestroy(e);
  }
  EventSet(const EventSet&) = delete;
  EventSet& operator=(const EventSet&) = delete;
  cudaEvent_t operator[](size_t i) const { return events_[i]; }

 private:
  std::vector<cudaEvent_t> events_;
};

/// True when `s` is a complete, finite number (so JSON may print it unquoted).
bool is_number(const std::string& s) {
  if (s.empty()) return false;
  // JSON numbers have no leading '+', no leading '.', no hex and no inf/nan.
  const char c0 = s[0];
  if (!(c0 == '-' || (c0 >= '0' && c0 <= '9'))) return false;
  if (c0 == '-' && (s.size() < 2 || s[1] < '0' || s[1] > '9')) return false;
  for (char c : s)
    if (!((c >= '0' && c <= '9') || c == '-' || c == '+' || c == '.' || c == 'e' || c == 'E')) return false;
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  return end == s.c_str() + s.size() && std::isfinite(v);
}

std::string json_escape(const std::string& s) {
  std::string out;
  out.reserve(s.size() + 2);
  for (unsigned char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  return out;
}

std::string csv_escape(const std::string& s) {
  if (s.find_first_of(",\"\n\r") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) {
    if (c == '"') out += '"';
    out += c;
  }
  out += '"';
  return out;
}

/// Display width in terminal columns: counts UTF-8 code points, not bytes (µ, ×, ...).
size_t display_width(const std::string& s) {
  size_t w = 0;
  for (unsigned char c : s)
    if ((c & 0xC0) != 0x80) ++w;
  return w;
}

}  // namespace

double median_of(std::vector<double> v) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

double time_median_us(const std::function<void(int)>& fn, cudaStream_t stream, int warmup, int reps) {
  if (reps < 1) reps = 1;
  if (warmup < 0) warmup = 0;
  int iter = 0;
  for (int i = 0; i < warmup; ++i) fn(iter++);
  MOEKIT_CUDA_CHECK(cudaStreamSynchronize(stream));

  // Every call is bracketed by its own pair of events, and all calls are enqueued back to back
  // behind a spin kernel that holds the GPU until they are all queued: each event pair then
  // measures device time (kernel plus launch gap), never the host's enqueue speed.
  EventSet ev(2 * static_cast<size_t>(reps));
  moekit::detail::gpu_spin(stream, std::min(20000.0, 2000.0 + 100.0 * reps));
  for (int i = 0; i < reps; ++i) {
    MOEKIT_CUDA_CHECK(cudaEventRecord(ev[2 * i], stream));
    fn(iter++);
    MOEKIT_CUDA_CHECK(cudaEventRecord(ev[2 * i + 1], stream));
  }
  MOEKIT_CUDA_CHECK(cudaStreamSynchronize(stream));
  MOEKIT_CUDA_CHECK(cudaGetLastError());

  std::vector<double> us(reps);
  for (int i = 0; i < reps; ++i) {
    float ms = 0.f;
    MOEKIT_CUDA_CHECK(cudaEventElapsedTime(&ms, ev[2 * i], ev[2 * i + 1]));
    us[i] = 1000.0 * ms;
  }
  return median_of(std::move(us));
}

CallLoopTiming time_call_loop(const std::function<void()>& fn, cudaStream_t stream, int calls) {
  calls = std::max(calls, 1);
  CallLoopTiming r;
  fn();  // kernels compiled and caches warm before anything is timed
  MOEKIT_CUDA_CHECK(cudaStreamSynchronize(stream));

  // Host: at most 100 calls, so their launches fit the launch queue while the spin holds the GPU.
  const int host_calls = std::min(calls, 100);
  moekit::detail::gpu_spin(stream, 20000.0);
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < host_calls; ++i) fn();
  r.host_us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / host_calls;
  MOEKIT_CUDA_CHECK(cudaStreamSynchronize(stream));

  EventSet ev(2);
  auto per_call = [&](const std::function<void()>& one) {
    MOEKIT_CUDA_CHECK(cudaStreamSynchronize(stream));
    MOEKIT_CUDA_CHECK(cudaEventRecord(ev[0], stream));
    for (int i = 0; i < calls; ++i) one();
    MOEKIT_CUDA_CHECK(cudaEventRecord(ev[1], stream));
    MOEKIT_CUDA_CHECK(cudaStreamSynchronize(stream));
    float ms = 0.f;
    MOEKIT_CUDA_CHECK(cudaEventElapsedTime(&ms, ev[0], ev[1]));
    return 1000.0 * ms / calls;
  };
  r.loop_us = per_call(fn);

  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  if (cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal) == cudaSuccess) {
    bool ok = true;
    try {
      fn();
    } catch (const std::exception&) {
      ok = false;
    }
    ok = cudaStreamEndCapture(stream, &graph) == cudaSuccess && ok && graph &&
         cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess;
  }
  cudaGetLastError();  // a failed capture is reported as graph_us < 0, not as an error
  if (exec) {
    MOEKIT_CUDA_CHECK(cudaGraphLaunch(exec, stream));  // first replay uploads the graph
    r.graph_us = per_call([&] { MOEKIT_CUDA_CHECK(cudaGraphLaunch(exec, stream)); });
    cudaGraphExecDestroy(exec);
  }
  if (graph) cudaGraphDestroy(graph);
  return r;
}

void cool_down(double pass_us, int ms) {
  // Measured on the H100 (docs/performance.md §Timing method): a second timed pass right after ~50 ms of back-to-back
  // FP8 GEMMs ran 5-11% slower than the first; passes under ~10 ms showed no difference.
  constexpr double kHeatingPassUs = 20000.0;
  if (ms > 0 && pass_us > kHeatingPassUs) std::this_thread::sleep_for(std::chrono::milliseconds(ms));
}

namespace {

struct EnergyRun {
  int calls = 0;
  double secs = 0.0, joules = 0.0;
};

// The measurement behind energy_per_call; calls < 0 where NVML's counter is unavailable.
EnergyRun measure_energy(const std::function<void(int)>& fn, cudaStream_t stream, double us, int reps,
                         double pass_us, int cooldown_ms) {
  EnergyRun r;
  const int device = detail::current_device().device;
  if (gpu_energy_joules(device) < 0) {
    r.calls = -1;
    return r;
  }
  r.calls = std::max(reps, static_cast<int>(std::min(2e4, std::ceil(1.5e6 / std::max(us, 1.0)))));
  cool_down(std::max(pass_us, 1.5e6), cooldown_ms);
  fn(0);
  fn(1);
  MOEKIT_CUDA_CHECK(cudaStreamSynchronize(stream));
  const double e0 = gpu_energy_joules(device);
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < r.calls; ++i) fn(i);
  MOEKIT_CUDA_CHECK(cudaStreamSynchronize(stream));
  r.secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  r.joules = gpu_energy_joules(device) - e0;
  return r;
}

constexpr const char* kNoEnergyCounter = "NVML energy counter not available";

}  // namespace

std::string energy_per_call(const std::function<void(int)>& fn, cudaStream_t stream, double us, int reps,
                            double pass_us, int cooldown_ms, const char* what) {
  const EnergyRun r = measure_energy(fn, stream, us, reps, pass_us, cooldown_ms);
  if (r.calls < 0) return kNoEnergyCounter;
  return fmt("%d %ss in %.1f ms: %.4f J per %s, %.0f W", r.calls, what, r.secs * 1e3, r.joules / r.calls, what,
             r.joules / r.secs);
}

std::string copy_energy_line(int cooldown_ms) {
  const int device = detail::current_device().device;
  if (gpu_energy_joules(device) < 0) return kNoEnergyCounter;
  const size_t bytes = size_t(1) << 30;
  detail::DeviceBuffer src(bytes), dst(bytes);
  const BenchStream s;
  MOEKIT_CUDA_CHECK(cudaMemsetAsync(src.get(), 0x3C, bytes, s.get()));
  auto copy = [&](int) {
    MOEKIT_CUDA_CHECK(cudaMemcpyAsync(dst.get(), src.get(), bytes, cudaMemcpyDeviceToDevice, s.get()));
  };
  const double us = time_median_us(copy, s.get(), 2, 5);
  const EnergyRun r = measure_energy(copy, s.get(), us, 5, 0.0, cooldown_ms);
  const double moved_gb = 2.0 * double(bytes) * r.calls * 1e-9;  // read + written
  const double e_idle0 = gpu_energy_joules(device);
  const auto t0 = std::chrono::steady_clock::now();
  std::this_thread::sleep_for(std::chrono::seconds(1));
  const double idle_secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const double idle_w = (gpu_energy_joules(device) - e_idle0) / idle_secs;
  return fmt("%d copies of 1 GiB in %.1f ms: %.1f GB/s, %.4f J per GB moved (read + write), %.0f W; then idle %.0f W",
             r.calls, r.secs * 1e3, moved_gb / r.secs, r.joules / moved_gb, r.joules / r.secs, idle_w);
}

namespace {
double read_cached = 0.0;  // set together with the copy bandwidth
}  // namespace

double measured_copy_bandwidth() {
  static std::mutex mu;
  static double cached = 0.0;
  std::lock_guard<std::mutex> lock(mu);
  if (cached > 0.0) return cached;

  // 1 GiB source and destination; fall back to smaller sizes where memory is short.
  size_t bytes = size_t(1) << 30;
  void* src = nullptr;
  void* dst = nullptr;
  for (; bytes >= (size_t(64) << 20); bytes /= 2) {
    if (cudaMalloc(&src, bytes) == cudaSuccess) {
      if (cudaMalloc(&dst, bytes) == cudaSuccess) break;
      cudaFree(src);
      src = nullptr;
    }
    cudaGetLastError();  // clear the allocation failure
  }
  MOEKIT_REQUIRE(src && dst, ErrorCode::kCudaError,
                 "measured_copy_bandwidth: could not allocate two 64 MiB device buffers");

  struct Cleanup {
    void* a;
    void* b;
    cudaStream_t s = nullptr;
    ~Cleanup() {
      if (s) cudaStreamDestroy(s);
      cudaFree(a);
      cudaFree(b);
    }
  } cleanup{src, dst};
  MOEKIT_CUDA_CHECK(cudaStreamCreateWithFlags(&cleanup.s, cudaStreamNonBlocking));
  cudaStream_t stream = cleanup.s;

  MOEKIT_CUDA_CHECK(cudaMemsetAsync(src, 0x3C, bytes, stream));
  MOEKIT_CUDA_CHECK(cudaMemsetAsync(dst, 0, bytes, stream));
  const double us = time_median_us(
      [&](int) { MOEKIT_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream)); },
      stream, /*warmup=*/2, /*reps=*/7);
  MOEKIT_REQUIRE(us > 0.0, ErrorCode::kInternal, "measured_copy_bandwidth: zero elapsed time");
  cached = 2.0 * static_cast<double>(bytes) / (us * 1e-6);  // bytes read + bytes written
  // Streaming reads alone (what weight-bound GEMMs do), on the same 1 GiB source.
  const double read_us = time_median_us(
      [&](int) { moekit::detail::read_sweep(src, bytes, static_cast<unsigned*>(dst), stream); }, stream, 2, 7);
  read_cached = static_cast<double>(bytes) / (read_us * 1e-6);
  return cached;
}

double measured_read_bandwidth() {
  (void)measured_copy_bandwidth();
  return read_cached;
}

int rotation_sets(size_t bytes, int max_sets) {
  if (max_sets < 1) max_sets = 1;
  int dev = 0;
  MOEKIT_CUDA_CHECK(cudaGetDevice(&dev));
  int l2 = 0;
  MOEKIT_CUDA_CHECK(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, dev));
  if (bytes == 0) return max_sets;
  const size_t target = 3 * static_cast<size_t>(l2 > 0 ? l2 : 0);
  const size_t sets = (target + bytes - 1) / bytes;
  return static_cast<int>(std::clamp<size_t>(sets, 1, static_cast<size_t>(max_sets)));
}

std::string Table::text() const {
  const size_t ncol = columns_.size();
  std::vector<size_t> width(ncol, 0);
  std::vector<bool> numeric(ncol, true);  // right-align columns whose values are all numbers
  for (size_t c = 0; c < ncol; ++c) width[c] = display_width(columns_[c]);
  for (const auto& row : rows_) {
    for (size_t c = 0; c < ncol && c < row.size(); ++c) {
      width[c] = std::max(width[c], display_width(row[c]));
      if (!row[c].empty() && row[c] != "-" && row[c] != "n/a" && row[c] != "err" && !is_number(row[c]))
        numeric[c] = false;
    }
  }
  auto cell = [&](std::string& line, const std::string& s, size_t c) {
    const size_t pad = width[c] - std::min(width[c], display_width(s));
    const bool last = c + 1 == ncol;
    if (numeric[c]) line.append(pad, ' ');
    line += s;
    if (!numeric[c] && !last) line.append(pad, ' ');
    if (!last) line += "  ";
  };
  std::string out;
  std::string line;
  for (size_t c = 0; c < ncol; ++c) cell(line, columns_[c], c);
  out += line + "\n";
  line.clear();
  for (size_t c = 0; c < ncol; ++c) {
    line.append(width[c], '-');
    if (c + 1 < ncol) line += "  ";
  }
  out += line + "\n";
  for (const auto& row : rows_) {
    line.clear();
    for (size_t c = 0; c < ncol; ++c) cell(line, c < row.size() ? row[c] : std::string(), c);
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line + "\n";
  }
  return out;
}

std::string Table::csv() const {
  std::string out;
  for (size_t c = 0; c < columns_.size(); ++c) {
    if (c) out += ',';
    out += csv_escape(columns_[c]);
  }
  out += '\n';
  for (const auto& row : rows_) {
    for (size_t c = 0; c < columns_.size(); ++c) {
      if (c) out += ',';
      if (c < row.size()) out += csv_escape(row[c]);
    }
    out += '\n';
  }
  return out;
}

std::string Table::json() const {
  std::string out = "[";
  for (size_t r = 0; r < rows_.size(); ++r) {
    out += r ? ",\n  {" : "\n  {";
    for (size_t c = 0; c < columns_.size(); ++c) {
      if (c) out += ", ";
      out += '"' + json_escape(columns_[c]) + "\": ";
      const std::string v = c < rows_[r].size() ? rows_[r][c] : std::string();
      if (is_number(v))
        out += v;
      else if (v.empty() || v == "-" || v == "n/a")
        out += "null";
      else
        out += '"' + json_escape(v) + '"';
    }
    out += '}';
  }
  out += rows_.empty() ? "]\n" : "\n]\n";
  return out;
}

std::string fmt(const char* format, ...) {
  va_list args;
  va_start(args, format);
  va_list copy;
  va_copy(copy, args);
  const int n = std::vsnprintf(nullptr, 0, format, copy);
  va_end(copy);
  std::string out;
  if (n > 0) {
    out.resize(static_cast<size_t>(n) + 1);
    std::vsnprintf(out.data(), out.size(), format, args);
    out.resize(static_cast<size_t>(n));
  }
  va_end(args);
  return out;
}

std::string one_line(std::string s) {
  for (char& c : s)
    if (c == '\n' || c == '\r') c = ' ';
  return s;
}

double geomean(const std::vector<double>& v) {
  if (v.empty()) return std::nan("");
  double acc = 0.0;
  for (double x : v) acc += std::log(x);
  return std::exp(acc / static_cast<double>(v.size()));
}

BenchStream::BenchStream() { MOEKIT_CUDA_CHECK(cudaStreamCreateWithFlags(&s_, cudaStreamNonBlocking)); }
BenchStream::~BenchStream() {
  if (s_) cudaStreamDestroy(s_);
}

bool parse_bench_data(const std::string& name, BenchData* out, bool allow_checkpoint) {
  if (name == "uniform") *out = BenchData::kUniform;
  else if (name == "normal") *out = BenchData::kNormal;
  else if (name == "checkpoint" && allow_checkpoint) *out = BenchData::kCheckpoint;
  else return false;
  return true;
}

const char* bench_data_name(BenchData d) {
  switch (d) {
    case BenchData::kNormal: return "normal";
    case BenchData::kCheckpoint: return "checkpoint";
    case BenchData::kUniform: break;
  }
  return "uniform";
}

namespace {
// σ of the E4M3 codes = 448 / E[max |z|] over the quantization block (see BenchData).
constexpr float kActivationCodeSigma = 448.0f / 2.82f;  // 1x128 blocks
constexpr float kWeightCodeSigma = 448.0f / 4.15f;      // 128x128 blocks
}  // namespace

void fill_fp8_activations(void* dst, int64_t n, BenchData d, uint64_t seed, cudaStream_t stream) {
  if (d != BenchData::kUniform) detail::fill_random_e4m3_normal(dst, n, kActivationCodeSigma, seed, stream);
  else detail::fill_random_e4m3(dst, n, seed, stream);
}

void fill_fp8_weights(void* dst, int64_t n, BenchData d, uint64_t seed, cudaStream_t stream) {
  if (d != BenchData::kUniform) detail::fill_random_e4m3_normal(dst, n, kWeightCodeSigma, seed, stream);
  else detail::fill_random_e4m3(dst, n, seed, stream);
}

void fill_bf16_activations(void* dst, int64_t n, BenchData d, uint64_t seed, cudaStream_t stream) {
  if (d != BenchData::kUniform) detail::fill_random_bf16_normal(dst, n, 1.0f, seed, stream);
  else detail::fill_random_bf16(dst, n, 1.0f, seed, stream);
}

}  // namespace moekit::bench

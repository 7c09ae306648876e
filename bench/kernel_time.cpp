// Kernel-only timing through CUPTI's activity API (bench_util.h: kernel_time_median_us).
//
// libcupti is opened at run time (dlopen), so the tool builds and runs where it is missing; the
// header only provides the record layout. The kernels of each call are told apart by order: one
// untimed call counts the kernels a call launches, then the timed calls run back to back behind a
// spin kernel (whose record is dropped), and the records, sorted by start time, are cut into
// groups of that many.
#include <dlfcn.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include "bench/bench_util.h"
#include "common/check.h"
#include "runtime/device_buffer.h"
#include "runtime/random.h"

#if __has_include(<cupti.h>)
#include <cupti.h>
#define MOEKIT_BENCH_HAVE_CUPTI 1
#else
#define MOEKIT_BENCH_HAVE_CUPTI 0
#endif

namespace moekit::bench {

#if MOEKIT_BENCH_HAVE_CUPTI
namespace {

struct KernelRecord {
  uint64_t start = 0, end = 0;
};

struct Cupti {
  using RegisterFn = CUptiResult (*)(CUpti_BuffersCallbackRequestFunc, CUpti_BuffersCallbackCompleteFunc);
  using KindFn = CUptiResult (*)(CUpti_ActivityKind);
  using FlushFn = CUptiResult (*)(uint32_t);
  using NextFn = CUptiResult (*)(uint8_t*, size_t, CUpti_Activity**);
  RegisterFn register_callbacks = nullptr;
  KindFn enable = nullptr, disable = nullptr;
  FlushFn flush_all = nullptr;
  NextFn next_record = nullptr;
  std::string why;  // non-empty: unusable

  std::mutex mu;
  std::vector<KernelRecord> records;  // kernels other than the spin kernel, since the last clear

  static Cupti& get() {
    static Cupti c;
    return c;
  }

 private:
  Cupti() {
    void* lib = nullptr;
    for (const char* name : {"libcupti.so.13", "libcupti.so"})
      if ((lib = dlopen(name, RTLD_NOW | RTLD_LOCAL)) != nullptr) break;
    if (!lib) {
      why = "libcupti not found";
      return;
    }
    register_callbacks = reinterpret_cast<RegisterFn>(dlsym(lib, "cuptiActivityRegisterCallbacks"));
    enable = reinterpret_cast<KindFn>(dlsym(lib, "cuptiActivityEnable"));
    disable = reinterpret_cast<KindFn>(dlsym(lib, "cuptiActivityDisable"));
    flush_all = reinterpret_cast<FlushFn>(dlsym(lib, "cuptiActivityFlushAll"));
    next_record = reinterpret_cast<NextFn>(dlsym(lib, "cuptiActivityGetNextRecord"));
    if (!register_callbacks || !enable || !disable || !flush_all || !next_record) {
      why = "libcupti lacks the activity API";
      return;
    }
    if (register_callbacks(&request_buffer, &buffer_done) != CUPTI_SUCCESS) why = "cuptiActivityRegisterCallbacks failed";
  }

  static void CUPTIAPI request_buffer(uint8_t** buffer, size_t* size, size_t* max_records) {
    constexpr size_t kBytes = size_t(4) << 20;
    *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, kBytes));
    *size = *buffer ? kBytes : 0;
    *max_records = 0;
  }

  static void CUPTIAPI buffer_done(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
    Cupti& c = get();
    CUpti_Activity* rec = nullptr;
    {
      std::lock_guard<std::mutex> lock(c.mu);
      while (c.next_record(buffer, valid, &rec) == CUPTI_SUCCESS) {
        if (rec->kind != CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL && rec->kind != CUPTI_ACTIVITY_KIND_KERNEL) continue;
        const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(rec);
        if (k->name && std::strstr(k->name, "spin_kernel")) continue;
        c.records.push_back({k->start, k->end});
      }
    }
    std::free(buffer);
  }
};

}  // namespace

double kernel_time_median_us(const std::function<void(int)>& fn, cudaStream_t stream, int warmup, int reps,
                             std::string* why, size_t flush_bytes) {
  Cupti& c = Cupti::get();
  auto fail = [&](std::string reason) {
    if (why) *why = std::move(reason);
    return -1.0;
  };
  if (!c.why.empty()) return fail(c.why);
  if (reps < 1) reps = 1;
  int iter = 0;
  for (int i = 0; i < std::max(warmup, 0); ++i) fn(iter++);
  MOEKIT_CUDA_CHECK(cudaStreamSynchronize(stream));

  auto take = [&] {
    c.flush_all(1);  // CUPTI_ACTIVITY_FLAG_FLUSH_FORCED
    std::lock_guard<std::mutex> lock(c.mu);
    std::vector<KernelRecord> out;
    out.swap(c.records);
    return out;
  };
  if (c.enable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) != CUPTI_SUCCESS)
    return fail("cuptiActivityEnable(CONCURRENT_KERNEL) failed");
  std::vector<KernelRecord> probe, timed;
  try {
    (void)take();  // anything left from before
    fn(iter++);    // counts the kernels of one call
    MOEKIT_CUDA_CHECK(cudaStreamSynchronize(stream));
    probe = take();
    // The flush buffer: allocated once, grown on demand (memsets are not kernel records).
    static moekit::detail::DeviceBuffer flush;
    if (flush_bytes > flush.bytes()) flush = moekit::detail::DeviceBuffer(flush_bytes);
    moekit::detail::gpu_spin(stream, std::min(20000.0, 2000.0 + 100.0 * reps));
    for (int i = 0; i < reps; ++i) {
      if (flush_bytes) MOEKIT_CUDA_CHECK(cudaMemsetAsync(flush.get(), 0, flush_bytes, stream));
      fn(iter++);
    }
    MOEKIT_CUDA_CHECK(cudaStreamSynchronize(stream));
    timed = take();
  } catch (...) {
    c.disable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
    throw;
  }
  c.disable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
  const size_t per_call = probe.size();
  if (per_call == 0) return fail("CUPTI recorded no kernel for a call");
  if (timed.size() != per_call * size_t(reps))
    return fail(fmt("CUPTI recorded %zu kernels for %d calls of %zu each", timed.size(), reps, per_call));
  std::sort(timed.begin(), timed.end(), [](const KernelRecord& a, const KernelRecord& b) { return a.start < b.start; });
  std::vector<double> us(size_t(reps), 0.0);
  for (size_t i = 0; i < timed.size(); ++i) us[i / per_call] += double(timed[i].end - timed[i].start) * 1e-3;
  return median_of(std::move(us));
}

#else

double kernel_time_median_us(const std::function<void(int)>&, cudaStream_t, int, int, std::string* why, size_t) {
  if (why) *why = "built without cupti.h";
  return -1.0;
}

#endif

}  // namespace moekit::bench

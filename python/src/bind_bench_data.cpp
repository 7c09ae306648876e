// moekit._C.bench_fill_* — the deterministic data generators of moekit's own benches and tests
// (src/runtime/random.h: a counter-based hash, so a seed gives the same values on any GPU), so that
// a Python bench (bench/python_overhead.py) runs on exactly the data `moekit bench moe` runs on.
#include <nanobind/nanobind.h>

#include <cstdint>

#include "bindings.h"
#include "moekit/numerics.h"
#include "runtime/random.h"

namespace moekit::py {
namespace {

using namespace nb::literals;

Tensor dense(nb::handle obj, const char* name, std::initializer_list<nb::dlpack::dtype> dtypes, int ndim,
             DeviceScope& devices) {
  Tensor t = cuda_tensor(obj, name, dtypes, ndim, devices);
  expect_contiguous(t);
  return t;
}

void fill_uniform(nb::handle t_obj, float lo, float hi, uint64_t seed, std::uintptr_t stream) {
  DeviceScope devices;
  Tensor t = dense(t_obj, "t", {kFloat32}, -1, devices);
  if (!(lo < hi)) throw nb::value_error("bench_fill_uniform: needs lo < hi");
  devices.activate();
  nb::gil_scoped_release release;
  detail::fill_random_f32(static_cast<float*>(t.data()), t.numel(), lo, hi, seed,
                          static_cast<cudaStream_t>(stream_ptr(stream)));
}

void fill_normal_bf16(nb::handle t_obj, float sigma, uint64_t seed, std::uintptr_t stream) {
  DeviceScope devices;
  Tensor t = dense(t_obj, "t", {kBFloat16}, -1, devices);
  devices.activate();
  nb::gil_scoped_release release;
  detail::fill_random_bf16_normal(t.data(), t.numel(), sigma, seed, static_cast<cudaStream_t>(stream_ptr(stream)));
}

void fill_checkpoint_weights(nb::handle q_obj, nb::handle s_obj, float sigma, uint64_t seed, std::uintptr_t stream) {
  DeviceScope devices;
  Tensor q = dense(q_obj, "q", kFp8Types, 3, devices);
  const int64_t e = q.size(0), n = q.size(1), k = q.size(2);
  if (k % 16 != 0) throw nb::value_error("bench_fill_checkpoint_weights: q's last extent must be a multiple of 16");
  Tensor s = dense(s_obj, "scales", {kFloat32}, 3, devices);
  expect_shape(s, {e, ceil_div(n, kQuantBlock), ceil_div(k, kQuantBlock)});
  devices.activate();
  nb::gil_scoped_release release;
  detail::fill_checkpoint_weights(q.data(), static_cast<float*>(s.data()), e, n, k, sigma, seed,
                                  static_cast<cudaStream_t>(stream_ptr(stream)));
}

}  // namespace

void bind_bench_data(nb::module_& m) {
  m.def("bench_fill_uniform", &fill_uniform, "t"_a.none(), "lo"_a, "hi"_a, "seed"_a, "stream"_a = 0,
        "Fills a contiguous float32 CUDA tensor with uniform values in [lo, hi).");
  m.def("bench_fill_normal_bf16", &fill_normal_bf16, "t"_a.none(), "sigma"_a, "seed"_a, "stream"_a = 0,
        "Fills a contiguous bfloat16 CUDA tensor with N(0, sigma^2) values.");
  m.def("bench_fill_checkpoint_weights", &fill_checkpoint_weights, "q"_a.none(), "scales"_a.none(), "sigma"_a, "seed"_a,
        "stream"_a = 0,
        "Checkpoint-like expert weights: q [E, N, K] (FP8 codes, K % 16 == 0) and scales [E, ceil(N/128), "
        "ceil(K/128)] fp32, both contiguous: bf16 N(0, sigma^2) matrices quantized 128x128 (SPEC §1).");
}

}  // namespace moekit::py

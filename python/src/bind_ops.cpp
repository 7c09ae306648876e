// moekit._C — the low-level ops in moekit's own layouts (the Python layer converts DeepGEMM's).
// Each binding checks its tensors (tensor.h) and then calls the library with the GIL released.
#include <nanobind/nanobind.h>

#include <cstdint>

#include "bindings.h"
#include "moekit/gemm.h"
#include "moekit/grouped_gemm.h"
#include "moekit/numerics.h"
#include "moekit/quantize.h"
#include "moekit/routing.h"
#include "tensor.h"

namespace moekit::py {
namespace {

using namespace nb::literals;

cudaStream_t as_stream(std::uintptr_t s) { return static_cast<cudaStream_t>(stream_ptr(s)); }

/// Row stride of a group-major [G, R, C] tensor whose rows the library addresses as one
/// [G * R, C] matrix (row g * R + r at g * R * ld): the last dimension contiguous and the groups
/// packed back to back. `fallback` when every group has at most one row.
int64_t grouped_row_stride(const Tensor& t, int64_t fallback) {
  const int64_t ld = row_stride(t, 1, fallback);
  if (t.size(0) > 1 && t.stride(0) != t.size(1) * ld)
    throw nb::value_error((std::string(t.name) + ": expected groups packed back to back (stride of dimension 0 = " +
                           std::to_string(t.size(1)) + " * " + std::to_string(ld) + "), got strides " + t.strides_str())
                              .c_str());
  return ld;
}

/// B scales: fp32, contiguous, shape `dims`.
const float* b_scales(nb::handle obj, const char* name, std::initializer_list<int64_t> dims, DeviceScope& devices) {
  Tensor s = cuda_tensor(obj, name, {kFloat32}, static_cast<int>(dims.size()), devices);
  expect_shape(s, dims);
  expect_contiguous(s);
  return static_cast<const float*>(s.data());
}

/// int32, 1-D, contiguous, `n` entries.
const int32_t* int_vector(nb::handle obj, const char* name, int64_t n, DeviceScope& devices) {
  Tensor t = cuda_tensor(obj, name, {kInt32}, 1, devices);
  expect_shape(t, {n});
  expect_contiguous(t);
  return static_cast<const int32_t*>(t.data());
}

void gemm_fp8_nt(nb::handle a_obj, nb::handle sa_obj, nb::handle b_obj, nb::handle sb_obj, nb::handle d_obj,
                 std::uintptr_t stream) {
  DeviceScope devices;
  GemmFp8Args g;
  Tensor a = cuda_tensor(a_obj, "a", kFp8Types, 2, devices);
  g.m = a.size(0);
  g.k = a.size(1);
  g.lda = row_stride(a, 0, g.k);
  Tensor sa = cuda_tensor(sa_obj, "sa", {kFloat32}, 2, devices);
  g.sa = physical_sfa(sa, g.m, ceil_div(g.k, kQuantBlock));
  Tensor b = cuda_tensor(b_obj, "b", kFp8Types, 2, devices);
  g.n = b.size(0);
  expect_shape(b, {g.n, g.k});
  g.ldb = row_stride(b, 0, g.k);
  g.sb = b_scales(sb_obj, "sb", {ceil_div(g.n, kQuantBlock), ceil_div(g.k, kQuantBlock)}, devices);
  Tensor d = cuda_tensor(d_obj, "d", {kBFloat16}, 2, devices);
  expect_shape(d, {g.m, g.n});
  g.ldd = row_stride(d, 0, g.n);
  g.a = a.data();
  g.b = b.data();
  g.d = d.data();
  devices.activate();
  nb::gil_scoped_release release;
  moekit::gemm_fp8_nt(g, as_stream(stream));
}

/// B [E, N, K], its scales and the sizes they imply, shared by both grouped layouts.
void grouped_b(GroupedGemmFp8Args& g, nb::handle b_obj, nb::handle sb_obj, DeviceScope& devices) {
  Tensor b = cuda_tensor(b_obj, "b", kFp8Types, 3, devices);
  g.num_groups = b.size(0);
  g.n = b.size(1);
  expect_shape(b, {g.num_groups, g.n, g.k});
  g.ldb = grouped_row_stride(b, g.k);
  g.b = b.data();
  g.sb = b_scales(sb_obj, "sb", {g.num_groups, ceil_div(g.n, kQuantBlock), ceil_div(g.k, kQuantBlock)}, devices);
}

void grouped_contiguous(nb::handle a_obj, nb::handle sa_obj, nb::handle b_obj, nb::handle sb_obj, nb::handle d_obj,
                        nb::handle offsets_obj, nb::handle counts_obj, std::uintptr_t stream) {
  DeviceScope devices;
  GroupedGemmFp8Args g;
  Tensor a = cuda_tensor(a_obj, "a", kFp8Types, 2, devices);
  const int64_t rows = a.size(0);
  g.k = a.size(1);
  g.lda = row_stride(a, 0, g.k);
  g.a = a.data();
  Tensor sa = cuda_tensor(sa_obj, "sa", {kFloat32}, 2, devices);
  g.sa = physical_sfa(sa, rows, ceil_div(g.k, kQuantBlock));
  grouped_b(g, b_obj, sb_obj, devices);
  Tensor d = cuda_tensor(d_obj, "d", {kBFloat16}, 2, devices);
  expect_shape(d, {rows, g.n});
  g.ldd = row_stride(d, 0, g.n);
  g.d = d.data();
  const int32_t* offsets = int_vector(offsets_obj, "offsets", g.num_groups + 1, devices);
  const int32_t* counts = int_vector(counts_obj, "counts", g.num_groups, devices);
  devices.activate();
  nb::gil_scoped_release release;
  moekit::grouped_gemm_fp8_contiguous(g, rows, offsets, counts, as_stream(stream));
}

void grouped_masked(nb::handle a_obj, nb::handle sa_obj, nb::handle b_obj, nb::handle sb_obj, nb::handle d_obj,
                    nb::handle counts_obj, std::uintptr_t stream) {
  DeviceScope devices;
  GroupedGemmFp8Args g;
  Tensor a = cuda_tensor(a_obj, "a", kFp8Types, 3, devices);
  const int64_t groups = a.size(0), max_m = a.size(1);
  g.k = a.size(2);
  g.lda = grouped_row_stride(a, g.k);
  g.a = a.data();
  Tensor sa = cuda_tensor(sa_obj, "sa", {kFloat32}, -1, devices);
  g.sa = physical_sfa(sa, groups * max_m, ceil_div(g.k, kQuantBlock), groups);
  grouped_b(g, b_obj, sb_obj, devices);
  if (g.num_groups != groups)
    throw nb::value_error(
        ("b: has " + std::to_string(g.num_groups) + " groups but a has " + std::to_string(groups)).c_str());
  Tensor d = cuda_tensor(d_obj, "d", {kBFloat16}, 3, devices);
  expect_shape(d, {groups, max_m, g.n});
  g.ldd = grouped_row_stride(d, g.n);
  g.d = d.data();
  const int32_t* counts = int_vector(counts_obj, "counts", groups, devices);
  devices.activate();
  nb::gil_scoped_release release;
  moekit::grouped_gemm_fp8_masked(g, max_m, counts, as_stream(stream));
}

void contiguous_offsets(nb::handle counts_obj, nb::handle offsets_obj, std::uintptr_t stream) {
  DeviceScope devices;
  Tensor counts = cuda_tensor(counts_obj, "counts", {kInt32}, 1, devices);
  expect_contiguous(counts);
  const int64_t e = counts.size(0);
  Tensor offsets = cuda_tensor(offsets_obj, "offsets", {kInt32}, 1, devices);
  expect_shape(offsets, {e + 1});
  expect_contiguous(offsets);
  devices.activate();
  nb::gil_scoped_release release;
  moekit::contiguous_offsets_device(static_cast<const int32_t*>(counts.data()), e,
                                    static_cast<int32_t*>(offsets.data()), as_stream(stream));
}

/// A quantizer's bf16 input [rows, K] (`name`) and FP8 output q [rows, K], each with its own row
/// stride; shared by both quantizers.
struct QuantIO {
  Tensor in, q;
  int64_t rows = 0, k = 0, ld_in = 0, ldq = 0;
};

QuantIO quant_io(nb::handle in_obj, const char* name, nb::handle q_obj, DeviceScope& devices) {
  QuantIO io;
  io.in = cuda_tensor(in_obj, name, {kBFloat16}, 2, devices);
  io.rows = io.in.size(0);
  io.k = io.in.size(1);
  io.ld_in = row_stride(io.in, 0, io.k);
  io.q = cuda_tensor(q_obj, "q", kFp8Types, 2, devices);
  expect_shape(io.q, {io.rows, io.k});
  io.ldq = row_stride(io.q, 0, io.k);
  return io;
}

void quantize_act(nb::handle x_obj, nb::handle q_obj, nb::handle sa_obj, bool ue8m0, std::uintptr_t stream) {
  DeviceScope devices;
  QuantIO io = quant_io(x_obj, "x", q_obj, devices);
  Tensor sa = cuda_tensor(sa_obj, "sa", {kFloat32}, 2, devices);
  float* s = const_cast<float*>(physical_sfa(sa, io.rows, ceil_div(io.k, kQuantBlock)));
  devices.activate();
  nb::gil_scoped_release release;
  moekit::quantize_act_1x128(io.in.data(), io.ld_in, io.rows, io.k, io.q.data(), io.ldq, s, ue8m0, as_stream(stream));
}

void quantize_weight(nb::handle w_obj, nb::handle q_obj, nb::handle sb_obj, bool ue8m0, std::uintptr_t stream) {
  DeviceScope devices;
  QuantIO io = quant_io(w_obj, "w", q_obj, devices);
  float* sb = const_cast<float*>(
      b_scales(sb_obj, "sb", {ceil_div(io.rows, kQuantBlock), ceil_div(io.k, kQuantBlock)}, devices));
  devices.activate();
  nb::gil_scoped_release release;
  moekit::quantize_weight_128x128(io.in.data(), io.ld_in, io.rows, io.k, io.q.data(), io.ldq, sb, ue8m0,
                                  as_stream(stream));
}

void route(nb::handle routing, nb::handle logits_obj, nb::handle ids_obj, nb::handle weights_obj,
           std::uintptr_t stream) {
  DeviceScope devices;
  Tensor logits = cuda_tensor(logits_obj, "logits", {kFloat32, kBFloat16}, 2, devices);
  expect_contiguous(logits);
  const int64_t t = logits.size(0), e = logits.size(1);
  Tensor ids = cuda_tensor(ids_obj, "topk_ids", {kInt32}, 2, devices);
  const int64_t k = ids.size(1);
  expect_shape(ids, {t, k});
  expect_contiguous(ids);
  Tensor weights = cuda_tensor(weights_obj, "topk_weights", {kFloat32}, 2, devices);
  expect_shape(weights, {t, k});
  expect_contiguous(weights);
  const RoutingConfig config = routing_config(routing, e, k, devices);
  const LogitsType type = logits.is(kBFloat16) ? LogitsType::kBFloat16 : LogitsType::kFloat32;
  devices.activate();
  nb::gil_scoped_release release;
  moekit::route(config, logits.data(), type, t, static_cast<int32_t*>(ids.data()), static_cast<float*>(weights.data()),
                as_stream(stream));
}

}  // namespace

void bind_ops(nb::module_& m) {
  m.attr("group_align") = kGroupAlign;
  m.def(
      "sfa_ld", [](int64_t rows) { return moekit::sfa_ld(rows); }, "rows"_a,
      "Leading dimension of the physical A-scale layout [ceil(K/128), sfa_ld(rows)]: rows rounded up to 4.");
  m.def("contiguous_rows_upper_bound", &moekit::contiguous_rows_upper_bound, "total_rows"_a, "num_groups"_a,
        "Rows a contiguous grouped layout of total_rows real rows over num_groups experts can need at most.");

  m.def("gemm_fp8_nt", &gemm_fp8_nt, "a"_a.none(), "sa"_a.none(), "b"_a.none(), "sb"_a.none(), "d"_a.none(),
        "stream"_a = 0,
        "d (bf16 [M, N]) = a (fp8 [M, K]) . b (fp8 [N, K])^T with block scales: sa physical "
        "[ceil(K/128), sfa_ld(M)] (or its [M, ceil(K/128)] view), sb [ceil(N/128), ceil(K/128)].");
  m.def("grouped_gemm_fp8_contiguous", &grouped_contiguous, "a"_a.none(), "sa"_a.none(), "b"_a.none(), "sb"_a.none(),
        "d"_a.none(), "offsets"_a.none(), "counts"_a.none(), "stream"_a = 0,
        "Contiguous grouped GEMM: a [rows, K] sorted by expert (128-row segments), b [E, N, K], sb [E, "
        "ceil(N/128), ceil(K/128)], d [rows, N], offsets int32 [E+1], counts int32 [E].");
  m.def("grouped_gemm_fp8_masked", &grouped_masked, "a"_a.none(), "sa"_a.none(), "b"_a.none(), "sb"_a.none(),
        "d"_a.none(), "counts"_a.none(), "stream"_a = 0,
        "Masked grouped GEMM: a [E, max_m, K], sa physical over E*max_m rows, b [E, N, K], d [E, max_m, N], "
        "counts int32 [E].");
  m.def("contiguous_offsets", &contiguous_offsets, "counts"_a.none(), "offsets"_a.none(), "stream"_a = 0,
        "offsets int32 [E+1] of the contiguous layout from counts int32 [E], on the GPU.");
  m.def("quantize_act_1x128", &quantize_act, "x"_a.none(), "q"_a.none(), "sa"_a.none(), "ue8m0"_a = false,
        "stream"_a = 0, "x bf16 [M, K] -> q fp8 [M, K] and 1x128 scales sa in the physical layout.");
  m.def("quantize_weight_128x128", &quantize_weight, "w"_a.none(), "q"_a.none(), "sb"_a.none(), "ue8m0"_a = false,
        "stream"_a = 0, "w bf16 [N, K] -> q fp8 [N, K] and 128x128 scales sb [ceil(N/128), ceil(K/128)].");
  m.def("route", &route, "routing"_a, "logits"_a.none(), "topk_ids"_a.none(), "topk_weights"_a.none(), "stream"_a = 0,
        "Router logits fp32/bf16 [T, E] -> topk_ids int32 [T, k], topk_weights fp32 [T, k].");

  // Kernel compilation ahead of CUDA graph capture (NVRTC: may take seconds, so without the GIL).
  using release_gil = nb::call_guard<nb::gil_scoped_release>;
  m.def("prepare_gemm", &moekit::gemm_fp8_prepare, release_gil(), "m"_a, "n"_a, "k"_a);
  m.def("prepare_grouped_contiguous", &moekit::grouped_gemm_fp8_prepare_contiguous, release_gil(), "rows"_a,
        "num_groups"_a, "n"_a, "k"_a);
  m.def("prepare_grouped_masked", &moekit::grouped_gemm_fp8_prepare_masked, release_gil(), "max_m"_a,
        "num_groups"_a, "n"_a, "k"_a);
}

}  // namespace moekit::py

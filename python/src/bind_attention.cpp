// moekit._C — DeepSeek-V4 attention (include/moekit/attention.h): the mixed FP8/BF16 cache's
// writer, RoPE, the sparse MQA attention and the merge of per-source partials. Each binding checks
// its tensors (tensor.h), then calls the library with the GIL released. The library checks the
// scalars and pointers again (alignment, counts); it cannot see dtypes, shapes or devices.
#include <nanobind/nanobind.h>
#include <nanobind/stl/optional.h>

#include <climits>
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "bindings.h"
#include "moekit/attention.h"
#include "tensor.h"

namespace moekit::py {
namespace {

using namespace nb::literals;
using Mixed = MixedKvCache;

cudaStream_t as_stream(std::uintptr_t s) { return static_cast<cudaStream_t>(stream_ptr(s)); }

[[noreturn]] void fail(const char* name, const std::string& what) {
  throw nb::value_error((std::string(name) + ": " + what).c_str());
}

/// A contiguous tensor of one of `dtypes` with shape `dims` (-1: any extent).
Tensor dense(nb::handle obj, const char* name, std::initializer_list<nb::dlpack::dtype> dtypes,
             std::initializer_list<int64_t> dims, DeviceScope& devices) {
  Tensor t = cuda_tensor(obj, name, dtypes, static_cast<int>(dims.size()), devices);
  expect_shape(t, dims);
  expect_contiguous(t);
  return t;
}

std::optional<Tensor> optional_dense(nb::handle obj, const char* name, std::initializer_list<nb::dlpack::dtype> dtypes,
                                     std::initializer_list<int64_t> dims, DeviceScope& devices) {
  if (obj.is_none()) return std::nullopt;
  return dense(obj, name, dtypes, dims, devices);
}

template <typename T>
T* ptr(const std::optional<Tensor>& t) {
  return t ? static_cast<T*>(t->data()) : nullptr;
}

/// The library takes these extents as int: a larger one must not wrap into a valid-looking value.
int as_int(int64_t v, const Tensor& t, const char* what) {
  if (v > INT_MAX) fail(t.name, std::string(what) + " = " + std::to_string(v) + " is too large");
  return static_cast<int>(v);
}

/// The mixed cache's three arrays, their entry count taken from nope. Each may be strided (rows of
/// one buffer, a paged cache): its last dim contiguous, its row stride passed on in bytes; the
/// library checks the alignment.
struct MixedTensors {
  Tensor nope, scales, rope;
  int64_t nope_stride = 0, scales_stride = 0, rope_stride = 0;  // bytes
  MixedKvCache cache() const {
    MixedKvCache c;
    c.nope = static_cast<uint8_t*>(nope.data());
    c.scales = static_cast<float*>(scales.data());
    c.rope = rope.data();
    c.num_entries = nope.size(0);
    c.nope_stride = nope_stride;
    c.scales_stride = scales_stride;
    c.rope_stride = rope_stride;
    return c;
  }
};

/// One array of the mixed cache, shape [n, cols] (n = -1: any), its last dim contiguous; returns its
/// row stride in bytes, the dense one when n <= 1 (a single row's stride is never used, and torch's
/// may then be anything). The stride rules are the library's (validate_mixed_kv_strides), checked
/// here too: sparse_attention asks for its workspace size, which needs a GPU, before the library
/// sees the cache.
Tensor mixed_rows(nb::handle obj, const char* name, std::initializer_list<nb::dlpack::dtype> dtypes, int64_t n,
                  int64_t cols, int64_t elem_bytes, int64_t multiple, DeviceScope& devices, int64_t& stride_bytes) {
  Tensor t = cuda_tensor(obj, name, dtypes, 2, devices);
  expect_shape(t, {n, cols});
  stride_bytes = row_stride(t, 0, cols) * elem_bytes;
  if (stride_bytes < cols * elem_bytes || stride_bytes % multiple != 0)
    fail(name, "expected a row stride of at least " + std::to_string(cols * elem_bytes) + " bytes, a multiple of " +
                   std::to_string(multiple) + ", got " + std::to_string(stride_bytes) + " bytes (strides " +
                   t.strides_str() + ")");
  return t;
}

MixedTensors mixed_tensors(nb::handle nope_obj, nb::handle scales_obj, nb::handle rope_obj, DeviceScope& devices) {
  // A missing part is a ValueError like any other inconsistent combination (not "not a tensor").
  const std::pair<nb::handle, const char*> parts[] = {{nope_obj, "nope"}, {scales_obj, "scales"}, {rope_obj, "rope"}};
  for (const auto& [obj, name] : parts)
    if (obj.is_none()) fail(name, "the mixed FP8 cache needs nope, scales and rope together, got None");
  MixedTensors m;
  m.nope = mixed_rows(nope_obj, "nope", kFp8Types, -1, Mixed::kNope, 1, 16, devices, m.nope_stride);
  const int64_t n = m.nope.size(0);
  m.scales = mixed_rows(scales_obj, "scales", {kFloat32}, n, Mixed::kScales, 4, 4, devices, m.scales_stride);
  m.rope = mixed_rows(rope_obj, "rope", {kBFloat16}, n, Mixed::kRope, 2, 16, devices, m.rope_stride);
  return m;
}

/// One sparse_attention call's inputs, checked, as the library's structs. Holds the tensors (their
/// DLPack exports) for the call.
struct AttentionInputs {
  SparseAttentionArgs args;
  AttentionKv kv;
  std::vector<Tensor> held;
};

AttentionInputs attention_inputs(nb::handle q_obj, nb::handle kv_obj, nb::handle nope_obj, nb::handle scales_obj,
                                 nb::handle rope_obj, nb::handle topk_obj, nb::handle topk_lens_obj,
                                 nb::handle win_obj, nb::handle win_lens_obj, nb::handle req_obj,
                                 nb::handle win_pos_obj, nb::handle q_pos_obj, nb::handle sink_obj,
                                 std::optional<float> softmax_scale, DeviceScope& devices) {
  AttentionInputs in;
  SparseAttentionArgs& a = in.args;
  Tensor q = dense(q_obj, "q", {kBFloat16}, {-1, -1, -1}, devices);
  const int64_t t = q.size(0);
  a.q = q.data();
  a.num_tokens = t;
  a.heads = as_int(q.size(1), q, "heads");
  a.dim = as_int(q.size(2), q, "head dim");
  // DeepSeek-V4's scale by default.
  a.softmax_scale = softmax_scale ? *softmax_scale : static_cast<float>(1.0 / std::sqrt(double(q.size(2))));
  in.held.push_back(q);

  const bool has_kv = !kv_obj.is_none();
  const bool has_mixed = !nope_obj.is_none() || !scales_obj.is_none() || !rope_obj.is_none();
  if (has_kv && has_mixed)
    fail("kv", "give either kv (a bf16 cache) or nope, scales and rope (the mixed FP8 cache), not both");
  if (has_kv) {
    Tensor kv = dense(kv_obj, "kv", {kBFloat16}, {-1, q.size(2)}, devices);
    in.kv.format = KvFormat::kBf16;
    in.kv.bf16 = kv.data();
    in.kv.num_entries = kv.size(0);
    in.held.push_back(kv);
  } else {
    if (!has_mixed) fail("kv", "a cache is required: kv (bf16 [N, D]) or nope, scales and rope (the mixed FP8 cache)");
    MixedTensors m = mixed_tensors(nope_obj, scales_obj, rope_obj, devices);
    if (q.size(2) != Mixed::kNope + Mixed::kRope)
      fail("q", "expected shape [T, H, 512] with the mixed FP8 cache (head dim 512), got " + q.shape_str());
    in.kv.format = KvFormat::kMixedFp8;
    in.kv.mixed = m.cache();
    in.held.insert(in.held.end(), {m.nope, m.scales, m.rope});
  }

  // Source 0: the indexer's top-k.
  const std::optional<Tensor> topk = optional_dense(topk_obj, "topk_indices", {kInt32}, {t, -1}, devices);
  if (!topk && !topk_lens_obj.is_none()) fail("topk_lens", "given without topk_indices");
  const std::optional<Tensor> topk_lens = optional_dense(topk_lens_obj, "topk_lens", {kInt32}, {t}, devices);
  a.topk_indices = ptr<const int32_t>(topk);
  a.topk = topk ? as_int(topk->size(1), *topk, "topk") : 0;
  a.topk_lens = ptr<const int32_t>(topk_lens);

  // Source 1: each request's sliding window.
  const std::optional<Tensor> win = optional_dense(win_obj, "window_indices", {kInt32}, {-1, -1}, devices);
  if (!win) {
    const std::pair<nb::handle, const char*> parts[] = {
        {win_lens_obj, "window_lens"}, {req_obj, "token_request"}, {win_pos_obj, "window_positions"}};
    for (const auto& [obj, name] : parts)
      if (!obj.is_none()) fail(name, "given without window_indices");
  }
  const int64_t r = win ? win->size(0) : 0, w = win ? win->size(1) : 0;
  const std::optional<Tensor> req = optional_dense(req_obj, "token_request", {kInt32}, {t}, devices);
  if (win && !req && r != t)
    fail("window_indices", "expected shape [T, *] = [" + std::to_string(t) +
                               ", *] without token_request (one window per token), got " + win->shape_str());
  const std::optional<Tensor> win_lens = optional_dense(win_lens_obj, "window_lens", {kInt32}, {r}, devices);
  const std::optional<Tensor> win_pos = optional_dense(win_pos_obj, "window_positions", {kInt32}, {r, w}, devices);
  const std::optional<Tensor> q_pos = optional_dense(q_pos_obj, "query_positions", {kInt32}, {t}, devices);
  if (win_pos && !q_pos) fail("query_positions", "required with window_positions (the causal mask)");
  a.window_indices = ptr<const int32_t>(win);
  a.window = win ? as_int(w, *win, "window") : 0;
  a.window_lens = ptr<const int32_t>(win_lens);
  a.token_request = ptr<const int32_t>(req);
  a.num_requests = r;
  a.window_positions = ptr<const int32_t>(win_pos);
  a.query_positions = ptr<const int32_t>(q_pos);

  const std::optional<Tensor> sink = optional_dense(sink_obj, "sink", {kFloat32}, {q.size(1)}, devices);
  a.sink = ptr<const float>(sink);
  for (const std::optional<Tensor>* x : {&topk, &topk_lens, &win, &req, &win_lens, &win_pos, &q_pos, &sink})
    if (*x) in.held.push_back(**x);
  return in;
}

void sparse_attention(nb::handle q, nb::handle kv, nb::handle nope, nb::handle scales, nb::handle rope,
                      nb::handle topk_indices, nb::handle topk_lens, nb::handle window_indices, nb::handle window_lens,
                      nb::handle token_request, nb::handle window_positions, nb::handle query_positions,
                      nb::handle sink, std::optional<float> softmax_scale, nb::handle o_obj, nb::handle lse_obj,
                      nb::handle o_partial_obj, nb::handle lse_partial_obj, nb::handle ws_obj, std::uintptr_t stream) {
  DeviceScope devices;
  const AttentionInputs in = attention_inputs(q, kv, nope, scales, rope, topk_indices, topk_lens, window_indices,
                                              window_lens, token_request, window_positions, query_positions, sink,
                                              softmax_scale, devices);
  const SparseAttentionArgs& a = in.args;
  const int64_t t = a.num_tokens, h = a.heads, d = a.dim;

  // The mode follows from which outputs are given: exactly one of the two sets.
  const bool normalized = !o_obj.is_none();
  const bool partial = !o_partial_obj.is_none() || !lse_partial_obj.is_none();
  if (normalized && partial)
    fail("o", "give o (and lse) for the normalized output or o_partial and lse_partial for per-source partials, "
              "not both");
  if (!normalized && !lse_obj.is_none())
    fail("lse", partial ? "belongs to the normalized output (with o); the partials' is lse_partial"
                        : "given without o");
  if (!normalized && !partial) fail("o", "an output is required: o (and lse), or o_partial and lse_partial");
  if (partial && o_partial_obj.is_none()) fail("o_partial", "required with lse_partial");
  if (partial && lse_partial_obj.is_none()) fail("lse_partial", "required with o_partial");
  std::optional<Tensor> o, lse, o_part, lse_part;
  SparseAttentionOut out;
  if (normalized) {
    o = dense(o_obj, "o", {kBFloat16}, {t, h, d}, devices);
    lse = optional_dense(lse_obj, "lse", {kFloat32}, {t, h}, devices);
    out.o = o->data();
    out.lse = ptr<float>(lse);
  } else {
    o_part = dense(o_partial_obj, "o_partial", {kFloat32}, {2, t, h, d}, devices);
    lse_part = dense(lse_partial_obj, "lse_partial", {kFloat32}, {2, t, h}, devices);
    out.o_partial = ptr<float>(o_part);
    out.lse_partial = ptr<float>(lse_part);
  }
  const std::optional<Tensor> ws =
      ws_obj.is_none() ? std::nullopt : std::optional<Tensor>(cuda_tensor(ws_obj, "workspace", {kUInt8}, 1, devices));
  if (ws) expect_contiguous(*ws);
  const size_t ws_bytes = ws ? ws->nbytes() : 0;
  const AttentionOutput mode = normalized ? AttentionOutput::kNormalized : AttentionOutput::kPerSourcePartials;
  devices.activate();
  nb::gil_scoped_release release;
  // Asked here (a host query) so that a short workspace is reported under its own name; the
  // exception needs no GIL (nanobind translates it on the way out).
  const size_t needed = moekit::sparse_attention_workspace_bytes(a, mode);
  if (needed > ws_bytes)
    fail("workspace", "expected at least " + std::to_string(needed) + " bytes (sparse_attention_workspace_bytes), " +
                          (ws ? "got " + std::to_string(ws_bytes) : std::string("got None")));
  moekit::sparse_attention(a, in.kv, mode, out, ws ? ws->data() : nullptr, ws_bytes, as_stream(stream));
}

size_t workspace_bytes(nb::handle q, nb::handle kv, nb::handle nope, nb::handle scales, nb::handle rope,
                       nb::handle topk_indices, nb::handle topk_lens, nb::handle window_indices,
                       nb::handle window_lens, nb::handle token_request, nb::handle window_positions,
                       nb::handle query_positions, nb::handle sink, std::optional<float> softmax_scale, bool partial) {
  DeviceScope devices;
  const AttentionInputs in = attention_inputs(q, kv, nope, scales, rope, topk_indices, topk_lens, window_indices,
                                              window_lens, token_request, window_positions, query_positions, sink,
                                              softmax_scale, devices);
  devices.activate();  // the plan depends on the tensors' device (its SM count)
  nb::gil_scoped_release release;
  return moekit::sparse_attention_workspace_bytes(
      in.args, partial ? AttentionOutput::kPerSourcePartials : AttentionOutput::kNormalized);
}

void mixed_kv_cache_write(nb::handle k_obj, nb::handle slots_obj, nb::handle nope, nb::handle scales,
                          nb::handle rope, std::uintptr_t stream) {
  DeviceScope devices;
  constexpr int64_t kDim = Mixed::kNope + Mixed::kRope;
  Tensor k = cuda_tensor(k_obj, "k", {kBFloat16}, 2, devices);
  const int64_t t = k.size(0);
  expect_shape(k, {t, kDim});
  const int64_t ldk = row_stride(k, 0, kDim);
  Tensor slots = dense(slots_obj, "slots", {kInt32}, {t}, devices);
  const MixedTensors m = mixed_tensors(nope, scales, rope, devices);
  devices.activate();
  nb::gil_scoped_release release;
  moekit::mixed_kv_cache_write(k.data(), t, ldk, static_cast<const int32_t*>(slots.data()), m.cache(),
                               as_stream(stream));
}

void rope_(nb::handle x_obj, nb::handle pos_obj, nb::handle cos_obj, nb::handle sin_obj, bool inverse,
           std::uintptr_t stream) {
  DeviceScope devices;
  constexpr int64_t kPairs = Mixed::kRope / 2;
  Tensor x = dense(x_obj, "x", {kBFloat16}, {-1, -1, -1}, devices);
  const int64_t t = x.size(0);
  const int heads = as_int(x.size(1), x, "heads");
  Tensor pos = dense(pos_obj, "positions", {kInt32}, {t}, devices);
  Tensor cos = dense(cos_obj, "cos", {kFloat32}, {-1, kPairs}, devices);
  const int64_t max_positions = cos.size(0);
  Tensor sin = dense(sin_obj, "sin", {kFloat32}, {max_positions, kPairs}, devices);
  devices.activate();
  nb::gil_scoped_release release;
  moekit::rope_inplace(x.data(), t, heads, x.size(2), static_cast<const int32_t*>(pos.data()),
                       static_cast<const float*>(cos.data()), static_cast<const float*>(sin.data()), max_positions,
                       inverse, as_stream(stream));
}

void attention_merge(nb::handle o_parts_obj, nb::handle lse_parts_obj, nb::handle weights_obj, nb::handle sink_obj,
                     nb::handle o_obj, nb::handle lse_obj, std::uintptr_t stream) {
  DeviceScope devices;
  Tensor o_parts = dense(o_parts_obj, "o_partials", {kFloat32}, {-1, -1, -1, -1}, devices);
  const int64_t s = o_parts.size(0), t = o_parts.size(1), h = o_parts.size(2), d = o_parts.size(3);
  Tensor lse_parts = dense(lse_parts_obj, "lse_partials", {kFloat32}, {s, t, h}, devices);
  const std::optional<Tensor> weights = optional_dense(weights_obj, "weight_logits", {kFloat32}, {s, h}, devices);
  const std::optional<Tensor> sink = optional_dense(sink_obj, "sink", {kFloat32}, {h}, devices);
  Tensor o = dense(o_obj, "o", {kBFloat16}, {t, h, d}, devices);
  const std::optional<Tensor> lse = optional_dense(lse_obj, "lse", {kFloat32}, {t, h}, devices);
  const int sources = as_int(s, o_parts, "sources"), heads = as_int(h, o_parts, "heads");
  const int dim = as_int(d, o_parts, "dim");
  devices.activate();
  nb::gil_scoped_release release;
  moekit::attention_merge(static_cast<const float*>(o_parts.data()), static_cast<const float*>(lse_parts.data()),
                          sources, t, heads, dim, ptr<const float>(weights), ptr<const float>(sink), o.data(),
                          ptr<float>(lse), as_stream(stream));
}

}  // namespace

void bind_attention(nb::module_& m) {
  m.def("mixed_kv_cache_write", &mixed_kv_cache_write, "k"_a.none(), "slots"_a.none(), "nope"_a.none(),
        "scales"_a.none(), "rope"_a.none(), "stream"_a = 0,
        "Writes k (bf16 [T, 512], last dim contiguous) into the mixed FP8 cache (nope fp8/uint8 [N, 448], scales "
        "f32 [N, 7], rope bf16 [N, 64]; each last dim contiguous, rows strided as MixedKvCache allows) at entries "
        "slots (int32 [T]; < 0 or >= N: skipped).");
  m.def("rope_", &rope_, "x"_a.none(), "positions"_a.none(), "cos"_a.none(), "sin"_a.none(), "inverse"_a = false,
        "stream"_a = 0,
        "RoPE in place on the last 64 dims of x (bf16 [T, heads, dim]), interleaved pairs, angles of positions "
        "(int32 [T]) from cos / sin (f32 [P, 32]); inverse rotates back. Positions outside [0, P): untouched.");
  // The optional inputs of the two attention entry points, in the order of the signature.
  m.def("sparse_attention", &sparse_attention, "q"_a.none(), "kv"_a.none() = nb::none(),
        "nope"_a.none() = nb::none(), "scales"_a.none() = nb::none(), "rope"_a.none() = nb::none(),
        "topk_indices"_a.none() = nb::none(), "topk_lens"_a.none() = nb::none(),
        "window_indices"_a.none() = nb::none(), "window_lens"_a.none() = nb::none(),
        "token_request"_a.none() = nb::none(), "window_positions"_a.none() = nb::none(),
        "query_positions"_a.none() = nb::none(), "sink"_a.none() = nb::none(), "softmax_scale"_a.none() = nb::none(),
        "o"_a.none() = nb::none(), "lse"_a.none() = nb::none(), "o_partial"_a.none() = nb::none(),
        "lse_partial"_a.none() = nb::none(), "workspace"_a.none() = nb::none(), "stream"_a = 0,
        "Sparse MQA attention (include/moekit/attention.h): q bf16 [T, H, D] over kv (bf16 [N, D]) or the mixed "
        "cache (nope, scales, rope; D = 512; rows may be strided), sources top-k (topk_indices [T, topk], "
        "topk_lens [T]) and window (window_indices [R, W], window_lens [R], token_request [T], window_positions "
        "[R, W], query_positions [T]), sink f32 [H], softmax_scale (None: 1/sqrt(D)). Outputs: o bf16 [T, H, D] "
        "and lse f32 [T, H] (normalized), or o_partial f32 [2, T, H, D] and lse_partial f32 [2, T, H]; workspace "
        "uint8 of sparse_attention_workspace_bytes.");
  m.def("sparse_attention_workspace_bytes", &workspace_bytes, "q"_a.none(), "kv"_a.none() = nb::none(),
        "nope"_a.none() = nb::none(), "scales"_a.none() = nb::none(), "rope"_a.none() = nb::none(),
        "topk_indices"_a.none() = nb::none(), "topk_lens"_a.none() = nb::none(),
        "window_indices"_a.none() = nb::none(), "window_lens"_a.none() = nb::none(),
        "token_request"_a.none() = nb::none(), "window_positions"_a.none() = nb::none(),
        "query_positions"_a.none() = nb::none(), "sink"_a.none() = nb::none(), "softmax_scale"_a.none() = nb::none(),
        "partial"_a = false,
        "Bytes of workspace sparse_attention needs for these inputs (partial: per-source partial outputs) on the "
        "tensors' device; 0 when it needs none.");
  m.def("attention_merge", &attention_merge, "o_partials"_a.none(), "lse_partials"_a.none(),
        "weight_logits"_a.none(), "sink"_a.none(), "o"_a.none(),
        "lse"_a.none() = nb::none(), "stream"_a = 0,
        "Merges per-source partials o_partials f32 [S, T, H, D], lse_partials f32 [S, T, H], weighted by "
        "e^weight_logits (f32 [S, H]), sink f32 [H] in the denominator, into o bf16 [T, H, D] and lse f32 [T, H].");
}

}  // namespace moekit::py

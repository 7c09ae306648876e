// moekit._C — Routing (moekit::RoutingConfig) and Layer (moekit::MoeLayer).
#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>

#include <cstdint>
#include <optional>
#include <string>
#include <tuple>

#include "bindings.h"
#include "moekit/moe_layer.h"
#include "moekit/numerics.h"
#include "moekit/routing.h"
#include "tensor.h"

namespace moekit::py {
namespace {

using namespace nb::literals;

// ---------------------------------------------------------------------------------------------
// Routing: a RoutingConfig plus the correction-bias tensor its pointer refers to. E and k are
// not part of it: a Layer fills them from its own config, route() from the tensors' shapes.
// ---------------------------------------------------------------------------------------------
struct Routing {
  RoutingConfig config;
  std::string method;
  nb::object bias_obj;                ///< what the caller passed (None or a tensor), for the property
  std::optional<nb::ndarray<>> bias;  ///< its DLPack export: keeps the memory alive while we point at it
  int bias_device = -1;
};

RoutingMethod parse_method(const std::string& s) {
  if (s == "softmax_topk") return RoutingMethod::kSoftmaxTopk;
  if (s == "topk_softmax") return RoutingMethod::kTopkSoftmax;
  if (s == "sigmoid_grouped") return RoutingMethod::kSigmoidGrouped;
  throw nb::value_error(
      ("Routing: method must be 'softmax_topk', 'topk_softmax' or 'sigmoid_grouped', got '" + s + "'").c_str());
}

void make_routing(Routing* self, const std::string& method, bool renormalize, int num_groups, int topk_groups,
                  float routed_scaling_factor, nb::handle correction_bias) {
  Routing r;
  r.config.method = parse_method(method);
  r.method = method;
  r.config.renormalize = renormalize;
  r.config.num_groups = num_groups;
  r.config.topk_groups = topk_groups;
  r.config.routed_scaling_factor = routed_scaling_factor;
  r.bias_obj = nb::borrow(correction_bias);
  if (!correction_bias.is_none()) {
    DeviceScope devices;
    Tensor b = cuda_tensor(correction_bias, "correction_bias", {kFloat32}, 1, devices);
    expect_contiguous(b);
    r.config.correction_bias = static_cast<const float*>(b.data());
    r.bias_device = b.array.device_id();
    r.bias = b.array;
  }
  new (self) Routing(std::move(r));
}

/// The routing's bias must have E entries.
void check_bias(const Routing& r, int64_t num_experts, const char* who) {
  if (!r.bias) return;
  if (static_cast<int64_t>(r.bias->shape(0)) != num_experts)
    throw nb::value_error((std::string(who) + ": routing.correction_bias has " + std::to_string(r.bias->shape(0)) +
                           " entries, expected num_experts = " + std::to_string(num_experts))
                              .c_str());
}

// ---------------------------------------------------------------------------------------------
// Layer: the MoeLayer plus Python references to everything its pointers refer to (routing bias,
// W2 / sW2, the prepared buffer), so a caller that drops its own references cannot leave the
// layer pointing at freed memory. The buffers stay the caller's: they are never allocated here.
// ---------------------------------------------------------------------------------------------
struct Layer {
  MoeLayer layer;
  nb::object routing;  ///< the Routing passed in, or None
  std::optional<nb::ndarray<>> w2, w2_scale, prepared;
  int weights_device = -1;

  Layer(const MoeConfig& c, nb::object r) : layer(c), routing(std::move(r)) {}
};

MoeGemm1Input parse_gemm1_input(const std::string& s) {
  if (s == "auto") return MoeGemm1Input::kAuto;
  if (s == "permuted") return MoeGemm1Input::kPermuted;
  if (s == "gathered") return MoeGemm1Input::kGathered;
  throw nb::value_error(("Layer: gemm1_input must be 'auto', 'permuted' or 'gathered', got '" + s + "'").c_str());
}

const char* gemm1_input_name(MoeGemm1Input v) {
  switch (v) {
    case MoeGemm1Input::kPermuted:
      return "permuted";
    case MoeGemm1Input::kGathered:
      return "gathered";
    default:
      return "auto";
  }
}

MoeWeightFormat parse_weight_format(const std::string& s) {
  if (s == "fp8") return MoeWeightFormat::kFp8;
  if (s == "mxfp4") return MoeWeightFormat::kMxfp4;
  throw nb::value_error(("Layer: weight_format must be 'fp8' or 'mxfp4', got '" + s + "'").c_str());
}

MoeActivation parse_activation(const std::string& s) {
  if (s == "swiglu") return MoeActivation::kSwiglu;
  if (s == "gpt_oss") return MoeActivation::kGptOss;
  throw nb::value_error(("Layer: activation must be 'swiglu' or 'gpt_oss', got '" + s + "'").c_str());
}

void make_layer(Layer* self, int num_experts, int top_k, int64_t hidden, int64_t inter, const Routing* routing,
                float limit, int local_offset, int local_count, bool deterministic, int gemm1_promote_k,
                const std::string& gemm1_input, const std::string& weight_format, const std::string& activation,
                float activation_alpha) {
  MoeConfig c;
  c.num_experts = num_experts;
  c.top_k = top_k;
  c.hidden = hidden;
  c.inter = inter;
  if (routing) c.routing = routing->config;
  c.limit = limit;
  c.local_offset = local_offset;
  c.local_count = local_count;
  c.deterministic = deterministic;
  c.gemm1_promote_k = gemm1_promote_k;
  c.gemm1_input = parse_gemm1_input(gemm1_input);
  c.weight_format = parse_weight_format(weight_format);
  c.activation = parse_activation(activation);
  c.activation_alpha = activation_alpha;
  if (routing) check_bias(*routing, num_experts, "Layer");
  // MoeLayer validates the configuration (moekit::Error → ValueError with its message).
  new (self) Layer(c, routing ? nb::find(routing) : nb::none());
}

/// Device of the routing's correction bias, -1 without one.
int bias_device(const Layer& self) {
  if (self.routing.is_none()) return -1;
  return nb::cast<const Routing&>(self.routing).bias_device;
}

/// The prepared-weight buffer (uint8, 1-D, contiguous), on the routing bias's device.
Tensor prepared_arg(const Layer& self, nb::handle obj, DeviceScope& devices) {
  Tensor prep = cuda_tensor(obj, "prepared", {kUInt8}, 1, devices);
  expect_contiguous(prep);
  devices.expect_device(bias_device(self), "routing.correction_bias");
  return prep;
}

/// Runs MoeLayer::prepare_weights on the tensors' device without the GIL.
void run_prepare(Layer& self, const MoeWeights& w, const Tensor& prep, DeviceScope& devices, std::uintptr_t stream) {
  devices.activate();
  nb::gil_scoped_release release;
  self.layer.prepare_weights(w, prep.data(), prep.nbytes(), static_cast<cudaStream_t>(stream_ptr(stream)));
}

/// gpt-oss's optional biases (None, or fp32 / bf16 [E_local, rows], both of one dtype), into `w`.
void bias_args(nb::handle b1_obj, nb::handle b2_obj, int64_t el, int64_t rows1, int64_t rows2, DeviceScope& devices,
               std::optional<Tensor>& b1, std::optional<Tensor>& b2, MoeWeights& w) {
  if (!b1_obj.is_none()) {
    b1 = cuda_tensor(b1_obj, "b1", {kFloat32, kBFloat16}, 2, devices);
    expect_shape(*b1, {el, rows1});
    expect_contiguous(*b1);
    w.b1 = b1->data();
    w.bias_bf16 = b1->array.dtype() == kBFloat16;
  }
  if (!b2_obj.is_none()) {
    b2 = cuda_tensor(b2_obj, "b2", {kFloat32, kBFloat16}, 2, devices);
    expect_shape(*b2, {el, rows2});
    expect_contiguous(*b2);
    if (b1 && (b2->array.dtype() == kBFloat16) != w.bias_bf16)
      throw nb::type_error("b2: expected the dtype of b1");
    w.b2 = b2->data();
    w.bias_bf16 = b2->array.dtype() == kBFloat16;
  }
}

void prepare_weights(Layer& self, nb::handle w1_obj, nb::handle sw1_obj, nb::handle w2_obj, nb::handle sw2_obj,
                     nb::handle prepared_obj, std::uintptr_t stream, nb::handle b1_obj, nb::handle b2_obj) {
  const MoeConfig& c = self.layer.config();
  const int64_t el = c.local_count, h = c.hidden, i = c.inter;
  DeviceScope devices;
  const Fp8WeightTensors t = fp8_weight_tensors(w1_obj, sw1_obj, w2_obj, sw2_obj, el, h, i, devices);
  Tensor prep = prepared_arg(self, prepared_obj, devices);

  MoeWeights w;
  std::optional<Tensor> b1, b2;
  bias_args(b1_obj, b2_obj, el, 2 * i, h, devices, b1, b2, w);
  w.w1 = t.w1.data();
  w.sw1 = static_cast<const float*>(t.sw1.data());
  w.w2 = t.w2.data();
  w.sw2 = static_cast<const float*>(t.sw2.data());
  run_prepare(self, w, prep, devices, stream);
  self.w2 = t.w2.array;
  self.w2_scale = t.sw2.array;
  self.prepared = prep.array;
  self.weights_device = prep.array.device_id();
}

/// MXFP4 weights: codes and UE8M0 scales as uint8 (the codes [E_local, N, K/2]; callers reshape
/// gpt-oss's [E, N, K/32, 16] blocks), converted into `prepared`; nothing else is kept.
void prepare_weights_mxfp4(Layer& self, nb::handle w1_obj, nb::handle s1_obj, nb::handle w2_obj, nb::handle s2_obj,
                           nb::handle prepared_obj, std::uintptr_t stream, bool gate_up_interleaved, nb::handle b1_obj,
                           nb::handle b2_obj) {
  const MoeConfig& c = self.layer.config();
  if (c.weight_format != MoeWeightFormat::kMxfp4)
    throw nb::value_error("Layer.prepare_weights_mxfp4: the layer was made with weight_format='fp8'");
  const int64_t el = c.local_count, h = c.hidden, i = c.inter;
  DeviceScope devices;
  auto codes = [&](nb::handle obj, const char* name, int64_t n, int64_t k, int64_t per) {
    Tensor t = cuda_tensor(obj, name, {kUInt8}, 3, devices);
    expect_shape(t, {el, n, k / per});
    expect_contiguous(t);
    return t;
  };
  Tensor w1 = codes(w1_obj, "w1", 2 * i, h, 2), s1 = codes(s1_obj, "w1_scale", 2 * i, h, 32);
  Tensor w2 = codes(w2_obj, "w2", h, i, 2), s2 = codes(s2_obj, "w2_scale", h, i, 32);
  Tensor prep = prepared_arg(self, prepared_obj, devices);
  MoeWeights w;
  std::optional<Tensor> b1, b2;
  bias_args(b1_obj, b2_obj, el, 2 * i, h, devices, b1, b2, w);
  w.w1 = w1.data();
  w.w1_scales = static_cast<const uint8_t*>(s1.data());
  w.w2 = w2.data();
  w.w2_scales = static_cast<const uint8_t*>(s2.data());
  w.w1_gate_up_interleaved = gate_up_interleaved;
  run_prepare(self, w, prep, devices, stream);
  self.w2.reset();
  self.w2_scale.reset();
  self.prepared = prep.array;
  self.weights_device = prep.array.device_id();
}

/// Optional int32/fp32 [T, k] tensor, or nullptr for None.
template <typename T>
T* optional_tk(nb::handle obj, const char* name, nb::dlpack::dtype dt, int64_t tokens, int64_t k, DeviceScope& devices,
               std::optional<Tensor>& keep) {
  if (obj.is_none()) return nullptr;
  keep = cuda_tensor(obj, name, {dt}, 2, devices);
  expect_shape(*keep, {tokens, k});
  expect_contiguous(*keep);
  return static_cast<T*>(keep->data());
}

/// The workspace: uint8, 1-D, contiguous; None → (nullptr, 0) (valid for T = 0).
std::pair<void*, size_t> workspace_arg(nb::handle obj, DeviceScope& devices, std::optional<Tensor>& keep) {
  if (obj.is_none()) return {nullptr, 0};
  keep = cuda_tensor(obj, "workspace", {kUInt8}, 1, devices);
  expect_contiguous(*keep);
  return {keep->data(), keep->nbytes()};
}

void forward(const Layer& self, nb::handle x_obj, nb::handle y_obj, nb::handle ws_obj, std::uintptr_t stream,
             nb::handle topk_ids, nb::handle topk_weights, nb::handle logits_obj, nb::handle routed_ids,
             nb::handle routed_weights, nb::handle invalid_obj) {
  const MoeConfig& c = self.layer.config();
  const int64_t h = c.hidden, k = c.top_k, e = c.num_experts;
  DeviceScope devices;
  Tensor x = cuda_tensor(x_obj, "x", {kBFloat16}, 2, devices);
  const int64_t t = x.size(0);
  expect_shape(x, {t, h});
  expect_contiguous(x);
  devices.expect_device(self.weights_device, "the layer's prepared weights");
  Tensor y = cuda_tensor(y_obj, "y", {kBFloat16}, 2, devices);
  expect_shape(y, {t, h});
  expect_contiguous(y);

  MoeForwardArgs a;
  a.num_tokens = t;
  a.x = x.data();
  a.y = y.data();
  std::optional<Tensor> ws, ids, wts, lg, rids, rwts, inv;
  std::tie(a.workspace, a.workspace_bytes) = workspace_arg(ws_obj, devices, ws);

  // Which of logits / topk_* / routed_* may go together is the library's check (its messages
  // name them); here each given tensor is checked on its own.
  a.topk_ids = optional_tk<const int32_t>(topk_ids, "topk_ids", kInt32, t, k, devices, ids);
  a.topk_weights = optional_tk<const float>(topk_weights, "topk_weights", kFloat32, t, k, devices, wts);
  if (!logits_obj.is_none()) {
    lg = cuda_tensor(logits_obj, "logits", {kFloat32, kBFloat16}, 2, devices);
    expect_shape(*lg, {t, e});
    expect_contiguous(*lg);
    a.logits = lg->data();
    a.logits_type = lg->is(kBFloat16) ? LogitsType::kBFloat16 : LogitsType::kFloat32;
    devices.expect_device(bias_device(self), "routing.correction_bias");
  }
  a.routed_ids = optional_tk<int32_t>(routed_ids, "routed_ids", kInt32, t, k, devices, rids);
  a.routed_weights = optional_tk<float>(routed_weights, "routed_weights", kFloat32, t, k, devices, rwts);
  if (!invalid_obj.is_none()) {
    inv = cuda_tensor(invalid_obj, "invalid_count", {kInt32}, 1, devices);
    expect_shape(*inv, {1});
    a.invalid_count = static_cast<int32_t*>(inv->data());
  }
  devices.activate();
  nb::gil_scoped_release release;
  self.layer.forward(a, static_cast<cudaStream_t>(stream_ptr(stream)));
}

/// forward() from raw device addresses, for moekit's torch layer only: it has checked every tensor
/// (dtype, shape, contiguity, one device, that device current) before calling. Skipping the DLPack
/// round trip of four tensors saves ~35 µs per call (docs/python.md §Overhead); the library still
/// checks what it can (null pointers, workspace size, routing arguments).
void forward_ptrs(const Layer& self, int64_t num_tokens, std::uintptr_t x, std::uintptr_t y, std::uintptr_t ws,
                  size_t ws_bytes, std::uintptr_t stream, std::uintptr_t logits, bool logits_bf16,
                  std::uintptr_t topk_ids, std::uintptr_t topk_weights) {
  MoeForwardArgs a;
  a.num_tokens = num_tokens;
  a.x = reinterpret_cast<const void*>(x);
  a.y = reinterpret_cast<void*>(y);
  a.workspace = reinterpret_cast<void*>(ws);
  a.workspace_bytes = ws_bytes;
  a.logits = reinterpret_cast<const void*>(logits);
  a.logits_type = logits_bf16 ? LogitsType::kBFloat16 : LogitsType::kFloat32;
  a.topk_ids = reinterpret_cast<const int32_t*>(topk_ids);
  a.topk_weights = reinterpret_cast<const float*>(topk_weights);
  nb::gil_scoped_release release;
  self.layer.forward(a, static_cast<cudaStream_t>(stream_ptr(stream)));
}

void prepare_kernels(const Layer& self, int64_t num_tokens, nb::handle ws_obj, std::uintptr_t stream) {
  DeviceScope devices;
  std::optional<Tensor> ws;
  auto [ptr, bytes] = workspace_arg(ws_obj, devices, ws);
  devices.expect_device(self.weights_device, "the layer's prepared weights");
  devices.activate();
  nb::gil_scoped_release release;  // compiling kernels can take seconds
  self.layer.prepare_kernels(num_tokens, ptr, bytes, static_cast<cudaStream_t>(stream_ptr(stream)));
}

}  // namespace

void bind_layer(nb::module_& m) {
  nb::class_<Routing>(m, "Routing", "Routing configuration (moekit::RoutingConfig) for Layer and route().")
      .def("__init__", &make_routing, "method"_a, "renormalize"_a = false, "num_groups"_a = 1, "topk_groups"_a = 1,
           "routed_scaling_factor"_a = 1.0f, "correction_bias"_a.none() = nb::none(),
           "method: 'softmax_topk', 'topk_softmax' or 'sigmoid_grouped'; correction_bias: None or fp32 [E] on "
           "the GPU (kept alive by this object). E and k come from the Layer or the route() tensors.")
      .def_prop_ro("method", [](const Routing& r) { return r.method; })
      .def_prop_ro("renormalize", [](const Routing& r) { return r.config.renormalize; })
      .def_prop_ro("num_groups", [](const Routing& r) { return r.config.num_groups; })
      .def_prop_ro("topk_groups", [](const Routing& r) { return r.config.topk_groups; })
      .def_prop_ro("routed_scaling_factor", [](const Routing& r) { return r.config.routed_scaling_factor; })
      .def_prop_ro("correction_bias", [](const Routing& r) { return r.bias_obj; })
      .def("__repr__", [](const Routing& r) {
        return "Routing('" + r.method + "', renormalize=" + (r.config.renormalize ? "True" : "False") +
               ", num_groups=" + std::to_string(r.config.num_groups) +
               ", topk_groups=" + std::to_string(r.config.topk_groups) +
               ", routed_scaling_factor=" + std::to_string(r.config.routed_scaling_factor) +
               (r.bias ? ", correction_bias=<tensor>)" : ")");
      });

  nb::class_<Layer>(m, "Layer", "moekit::MoeLayer: the FP8 block-scaled MoE layer (see docs/api.md).")
      .def("__init__", &make_layer, "num_experts"_a, "top_k"_a, "hidden"_a, "inter"_a, nb::kw_only(),
           "routing"_a.none() = nb::none(), "limit"_a = 0.0f, "local_offset"_a = 0, "local_count"_a = 0,
           "deterministic"_a = false, "gemm1_promote_k"_a = 0, "gemm1_input"_a = "auto", "weight_format"_a = "fp8",
           "activation"_a = "swiglu", "activation_alpha"_a = 1.702f,
           "Validates the configuration (ValueError with moekit's message); needs no GPU.")
      .def_prop_ro("num_experts", [](const Layer& l) { return l.layer.config().num_experts; })
      .def_prop_ro("top_k", [](const Layer& l) { return l.layer.config().top_k; })
      .def_prop_ro("hidden", [](const Layer& l) { return l.layer.config().hidden; })
      .def_prop_ro("inter", [](const Layer& l) { return l.layer.config().inter; })
      .def_prop_ro("limit", [](const Layer& l) { return l.layer.config().limit; })
      .def_prop_ro("local_offset", [](const Layer& l) { return l.layer.config().local_offset; })
      .def_prop_ro(
          "local_count", [](const Layer& l) { return l.layer.config().local_count; },
          "Experts this layer computes (0 at construction resolves to num_experts).")
      .def_prop_ro("deterministic", [](const Layer& l) { return l.layer.config().deterministic; })
      .def_prop_ro("gemm1_promote_k", [](const Layer& l) { return l.layer.config().gemm1_promote_k; })
      .def_prop_ro("gemm1_input",
                   [](const Layer& l) { return std::string(gemm1_input_name(l.layer.config().gemm1_input)); })
      .def_prop_ro("weight_format",
                   [](const Layer& l) {
                     return std::string(l.layer.config().weight_format == MoeWeightFormat::kMxfp4 ? "mxfp4" : "fp8");
                   })
      .def_prop_ro("activation",
                   [](const Layer& l) {
                     return std::string(l.layer.config().activation == MoeActivation::kGptOss ? "gpt_oss" : "swiglu");
                   })
      .def_prop_ro("routing", [](const Layer& l) { return l.routing; })
      .def_prop_ro("weights_prepared", [](const Layer& l) { return l.layer.weights_prepared(); })
      .def(
          "prepared_weight_bytes", [](const Layer& l) { return l.layer.prepared_weight_bytes(); },
          "Bytes of the prepared-weight buffer (uint8, on the GPU) prepare_weights fills.")
      .def(
          "workspace_size",
          [](const Layer& l, int64_t num_tokens) {
            nb::gil_scoped_release release;
            return l.layer.workspace_size(num_tokens);
          },
          "num_tokens"_a, "Workspace bytes forward needs for T tokens; 0 for T = 0 (no GPU needed then).")
      .def("prepare_weights", &prepare_weights, "w1"_a.none(), "w1_scale"_a.none(), "w2"_a.none(), "w2_scale"_a.none(),
           "prepared"_a.none(), "stream"_a = 0, "b1"_a.none() = nb::none(), "b2"_a.none() = nb::none(),
           "One-time weight preparation into `prepared`. w1 fp8/uint8 [E_local, 2I, H], w1_scale fp32 "
           "[E_local, ceil(2I/128), ceil(H/128)], w2 [E_local, H, I], w2_scale [E_local, ceil(H/128), "
           "ceil(I/128)], all contiguous; optional biases b1 [E_local, 2I], b2 [E_local, H] (fp32 or bf16, "
           "copied). The layer keeps references to w2, w2_scale and prepared.")
      .def("prepare_weights_mxfp4", &prepare_weights_mxfp4, "w1"_a.none(), "w1_scale"_a.none(), "w2"_a.none(),
           "w2_scale"_a.none(), "prepared"_a.none(), "stream"_a = 0, "gate_up_interleaved"_a = false,
           "b1"_a.none() = nb::none(), "b2"_a.none() = nb::none(),
           "MXFP4 weights (weight_format='mxfp4'): uint8 codes w1 [E_local, 2I, H/2], w1_scale [E_local, 2I, "
           "H/32], w2 [E_local, H, I/2], w2_scale [E_local, H, I/32], contiguous; gate_up_interleaved: W1's rows "
           "in gpt-oss's order. Converted into `prepared`; only `prepared` is kept.")
      .def("forward", &forward, "x"_a.none(), "y"_a.none(), "workspace"_a.none(), "stream"_a = 0, nb::kw_only(),
           "topk_ids"_a.none() = nb::none(), "topk_weights"_a.none() = nb::none(), "logits"_a.none() = nb::none(),
           "routed_ids"_a.none() = nb::none(), "routed_weights"_a.none() = nb::none(),
           "invalid_count"_a.none() = nb::none(),
           "y = MoE(x) on `stream` (asynchronous). x, y bf16 [T, H]; workspace uint8 [>= workspace_size(T)]; "
           "either logits fp32/bf16 [T, E] or topk_ids int32 + topk_weights fp32 [T, k].")
      .def("forward_ptrs", &forward_ptrs, "num_tokens"_a, "x"_a, "y"_a, "workspace"_a, "workspace_bytes"_a,
           "stream"_a, "logits"_a = 0, "logits_bf16"_a = false, "topk_ids"_a = 0, "topk_weights"_a = 0,
           "forward() from device addresses (ints), unchecked: for moekit's torch layer, which checks the "
           "tensors itself. Use forward() anywhere else.")
      .def("prepare_kernels", &prepare_kernels, "num_tokens"_a, "workspace"_a.none(), "stream"_a = 0,
           "Compiles every kernel a forward with num_tokens uses (before CUDA graph capture); synchronizes stream.")
      .def("__repr__", [](const Layer& l) {
        const MoeConfig& c = l.layer.config();
        return "Layer(num_experts=" + std::to_string(c.num_experts) + ", top_k=" + std::to_string(c.top_k) +
               ", hidden=" + std::to_string(c.hidden) + ", inter=" + std::to_string(c.inter) +
               ", local_offset=" + std::to_string(c.local_offset) + ", local_count=" + std::to_string(c.local_count) +
               ")";
      });
}

/// Shared with bind_ops.cpp's route(): the RoutingConfig of a Routing for E experts and k slots.
RoutingConfig routing_config(nb::handle routing, int64_t num_experts, int64_t top_k, const DeviceScope& devices) {
  if (!nb::isinstance<Routing>(routing)) throw nb::type_error("route: routing must be a moekit._C.Routing");
  const Routing& r = nb::cast<const Routing&>(routing);
  check_bias(r, num_experts, "route");
  devices.expect_device(r.bias_device, "routing.correction_bias");
  RoutingConfig c = r.config;
  c.num_experts = static_cast<int>(num_experts);
  c.top_k = static_cast<int>(top_k);
  return c;
}

}  // namespace moekit::py

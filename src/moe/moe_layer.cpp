// The public MoE layer (include/moekit/moe_layer.h): configuration and argument validation, the
// workspace layout (routing output + the internal forward's scratch), routing from logits, and the
// call into the internal forward (moe_forward.h), whose kernels may change behind it.
#include "moekit/moe_layer.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>

#include "common/check.h"
#include "moe/moe_forward.h"
#include "moe/moe_gemm.h"
#include "moe/moe_layer_access.h"
#include "moe/moe_stage_trace.h"
#include "gemm/gemm_launch.h"
#include "planning/moe_plan.h"
#include "runtime/knobs.h"
#include "moekit/moe_sort.h"
#include "runtime/pdl.h"
#include "moekit/numerics.h"
#include "runtime/device_buffer.h"

namespace moekit {
namespace detail {
// routing_reference.cpp: the routing configuration check shared with route().
void validate_routing_config(const RoutingConfig& c, const char* fn);
}  // namespace detail

namespace {

constexpr size_t kAlign = 256;
constexpr int kMaxExperts = 65536;
constexpr int64_t kMaxDim = int64_t{1} << 20;
constexpr auto kInv = ErrorCode::kInvalidArgument;

size_t align256(size_t b) { return (b + kAlign - 1) / kAlign * kAlign; }
uintptr_t addr(const void* p) { return reinterpret_cast<uintptr_t>(p); }
bool aligned(const void* p, uintptr_t a) { return addr(p) % a == 0; }

// [a, a + na) and [b, b + nb) share a byte.
bool overlap(const void* a, size_t na, const void* b, size_t nb) {
  if (!a || !b || na == 0 || nb == 0) return false;
  return addr(a) < addr(b) + nb && addr(b) < addr(a) + na;
}

// The config with local_count and routing resolved (after validation).
MoeConfig resolved(const MoeConfig& c) {
  MoeConfig r = c;
  if (r.local_count == 0) r.local_count = r.num_experts;
  if (r.routing) {
    if (r.routing->num_experts == 0) r.routing->num_experts = r.num_experts;
    if (r.routing->top_k == 0) r.routing->top_k = r.top_k;
  }
  return r;
}

// Workspace regions, offsets from the (256-byte aligned) base.
struct WsLayout {
  size_t ids = 0, weights = 0, invalid = 0, inner = 0;
  size_t inner_bytes = 0;
  size_t total = 0;
};

WsLayout ws_layout(const MoeConfig& c, int64_t t) {
  WsLayout w;
  size_t at = 0;
  const size_t slots = static_cast<size_t>(t) * static_cast<size_t>(c.top_k);
  if (c.routing) {
    w.ids = at;
    at = align256(at + slots * sizeof(int32_t));
    w.weights = at;
    at = align256(at + slots * sizeof(float));
  }
  w.invalid = at;
  at = align256(at + sizeof(int32_t));
  w.inner = at;
  w.inner_bytes = detail::moe_forward_workspace_size(t, c.top_k, c.hidden, c.inter, c.local_count,
                                                     c.weight_format == MoeWeightFormat::kMxfp4);
  w.total = at + w.inner_bytes;
  return w;
}

// The plan of a forward over t > 0 tokens of the resolved config `c` on the current device.
detail::MoePlan plan_forward(const MoeConfig& c, int64_t t, bool from_logits) {
  const size_t sort_scratch =
      detail::moe_fused_layout(c.inter) ? moe_sort_workspace_size(t, c.top_k, c.local_count) : 0;
  return detail::plan_moe_forward(c, t, from_logits, detail::device_limits(), sort_scratch, detail::knobs());
}

void check_tokens(const MoeConfig& c, int64_t t, const char* fn) {
  MOEKIT_REQUIRE(t >= 0, kInv, fn, ": num_tokens = ", t, " must be >= 0");
  MOEKIT_REQUIRE(t <= INT32_MAX / c.top_k, kInv, fn, ": num_tokens * top_k = ", t, " * ", c.top_k,
                 " must be < 2^31");
}

}  // namespace

void MoeLayer::validate(const MoeConfig& c) {
  const char* fn = "moekit::MoeLayer";
  MOEKIT_REQUIRE(c.num_experts >= 1 && c.num_experts <= kMaxExperts, kInv, fn, ": num_experts = ", c.num_experts,
                 " must be in [1, ", kMaxExperts, "]");
  MOEKIT_REQUIRE(c.top_k >= 1 && c.top_k <= c.num_experts, kInv, fn, ": top_k = ", c.top_k,
                 " must be in [1, num_experts = ", c.num_experts, "]");
  MOEKIT_REQUIRE(c.hidden >= 16 && c.hidden <= kMaxDim && c.hidden % 16 == 0, kInv, fn, ": hidden = ", c.hidden,
                 " must be a multiple of 16 in [16, 2^20] (16-byte rows for TMA)");
  MOEKIT_REQUIRE(c.inter >= 16 && c.inter <= kMaxDim && c.inter % 16 == 0, kInv, fn, ": inter = ", c.inter,
                 " must be a multiple of 16 in [16, 2^20] (16-byte rows for TMA)");
  MOEKIT_REQUIRE(c.gemm1_promote_k == 0 || c.gemm1_promote_k == 32 || c.gemm1_promote_k == 64 ||
                     c.gemm1_promote_k == 128,
                 kInv, fn, ": gemm1_promote_k = ", c.gemm1_promote_k, " must be 0 (automatic), 32, 64 or 128");
  MOEKIT_REQUIRE(c.gemm1_input == MoeGemm1Input::kAuto || c.gemm1_input == MoeGemm1Input::kPermuted ||
                     c.gemm1_input == MoeGemm1Input::kGathered,
                 kInv, fn, ": gemm1_input = ", static_cast<int>(c.gemm1_input),
                 " must be MoeGemm1Input::kAuto, kPermuted or kGathered");
  MOEKIT_REQUIRE(!std::isnan(c.limit) && c.limit != INFINITY, kInv, fn, ": limit = ", c.limit,
                 " must be finite (use 0 for no clamp)");
  MOEKIT_REQUIRE(c.weight_format == MoeWeightFormat::kFp8 || c.weight_format == MoeWeightFormat::kMxfp4, kInv, fn,
                 ": weight_format = ", static_cast<int>(c.weight_format),
                 " must be MoeWeightFormat::kFp8 or kMxfp4");
  MOEKIT_REQUIRE(c.weight_format != MoeWeightFormat::kMxfp4 || (c.hidden % 32 == 0 && c.inter % 64 == 0), kInv, fn,
                 ": MXFP4 weights need hidden (", c.hidden, ") a multiple of 32 and inter (", c.inter,
                 ") a multiple of 64");
  MOEKIT_REQUIRE(c.activation == MoeActivation::kSwiglu || c.activation == MoeActivation::kGptOss, kInv, fn,
                 ": activation = ", static_cast<int>(c.activation), " must be MoeActivation::kSwiglu or kGptOss");
  MOEKIT_REQUIRE(c.activation != MoeActivation::kGptOss || (c.inter % 64 == 0 && std::isfinite(c.activation_alpha) &&
                                                            c.activation_alpha > 0.0f),
                 kInv, fn, ": the gpt-oss activation needs inter (", c.inter,
                 ") a multiple of 64 and activation_alpha (", c.activation_alpha, ") finite and > 0");
  if (c.local_count == 0) {
    MOEKIT_REQUIRE(c.local_offset == 0, kInv, fn, ": local_count = 0 means all experts, so local_offset (",
                   c.local_offset, ") must be 0; give local_count for an expert-parallel slice");
  } else {
    MOEKIT_REQUIRE(c.local_count >= 1 && c.local_offset >= 0 &&
                       int64_t(c.local_offset) + int64_t(c.local_count) <= int64_t(c.num_experts),
                   kInv, fn, ": the expert-parallel slice [local_offset, local_offset + local_count) = [",
                   c.local_offset, ", ", int64_t(c.local_offset) + c.local_count,
                   ") must be non-empty and inside [0, num_experts = ", c.num_experts, ")");
  }
  if (c.routing) {
    const RoutingConfig& r = *c.routing;
    MOEKIT_REQUIRE(r.num_experts == 0 || r.num_experts == c.num_experts, kInv, fn, ": routing.num_experts = ",
                   r.num_experts, " differs from num_experts = ", c.num_experts, " (0 inherits it)");
    MOEKIT_REQUIRE(r.top_k == 0 || r.top_k == c.top_k, kInv, fn, ": routing.top_k = ", r.top_k,
                   " differs from top_k = ", c.top_k, " (0 inherits it)");
    detail::validate_routing_config(*resolved(c).routing, "moekit::MoeLayer: routing");
    MOEKIT_REQUIRE(aligned(r.correction_bias, 4), ErrorCode::kMisaligned, fn,
                   ": routing.correction_bias must be 4-byte aligned");
  }
}

MoeLayer::MoeLayer(const MoeConfig& config) {
  validate(config);
  config_ = resolved(config);
}

namespace {
// Offsets of the prepared buffer's parts (MoePreparedSizes in order, each 256-byte aligned).
struct PreparedLayout {
  size_t sw1 = 0, sw1_blocks = 0, w2 = 0, sw2 = 0, b1 = 0, b2 = 0, total = 0;
};
PreparedLayout prepared_layout(const detail::MoePreparedSizes& s) {
  PreparedLayout l;
  l.sw1 = align256(s.w1_bytes);
  l.sw1_blocks = align256(l.sw1 + s.sw1_bytes);
  l.w2 = align256(l.sw1_blocks + s.sw1_blocks_bytes);
  l.sw2 = align256(l.w2 + s.w2_bytes);
  l.b1 = align256(l.sw2 + s.sw2_bytes);
  l.b2 = align256(l.b1 + s.b1_bytes);
  l.total = l.b2 + s.b2_bytes;
  return l;
}
}  // namespace

size_t MoeLayer::prepared_weight_bytes() const {
  return prepared_layout(
             detail::moe_prepared_sizes(config_.local_count, config_.hidden, config_.inter, config_.weight_format))
      .total;
}

void MoeLayer::prepare_weights(const MoeWeights& w, void* prepared, size_t prepared_bytes, cudaStream_t stream) {
  const char* fn = "moekit::MoeLayer::prepare_weights";
  const bool mx = config_.weight_format == MoeWeightFormat::kMxfp4;
  if (mx) {
    MOEKIT_REQUIRE(w.w1 && w.w1_scales && w.w2 && w.w2_scales, kInv, fn,
                   ": MXFP4 weights need w1, w1_scales, w2 and w2_scales");
  } else {
    MOEKIT_REQUIRE(!w.w1_gate_up_interleaved, kInv, fn,
                   ": w1_gate_up_interleaved (gpt-oss's row order) is taken with MXFP4 weights only");
    MOEKIT_REQUIRE(w.w1 && w.sw1 && w.w2 && w.sw2, kInv, fn, ": w1, sw1, w2 and sw2 are all required");
    MOEKIT_REQUIRE(aligned(w.sw1, 4) && aligned(w.sw2, 4), ErrorCode::kMisaligned, fn,
                   ": sw1 and sw2 must be 4-byte aligned");
  }
  MOEKIT_REQUIRE(aligned(w.w1, 16) && aligned(w.w2, 16), ErrorCode::kMisaligned, fn,
                 ": w1 and w2 must be 16-byte aligned");
  MOEKIT_REQUIRE(!(w.b1 || w.b2) || detail::moe_fused_layout(config_.inter), kInv, fn,
                 ": biases need inter (", config_.inter, ") a multiple of 64");
  MOEKIT_REQUIRE(aligned(w.b1, w.bias_bf16 ? 2 : 4) && aligned(w.b2, w.bias_bf16 ? 2 : 4), ErrorCode::kMisaligned, fn,
                 ": b1 and b2 must be aligned to their element size");
  MOEKIT_REQUIRE(prepared != nullptr, kInv, fn, ": the prepared-weight buffer is null");
  MOEKIT_REQUIRE(aligned(prepared, kAlign), ErrorCode::kMisaligned, fn, ": the prepared-weight buffer (", prepared,
                 ") must be 256-byte aligned");
  const size_t need = prepared_weight_bytes();
  MOEKIT_REQUIRE(prepared_bytes >= need, kInv, fn, ": prepared_bytes = ", prepared_bytes,
                 " is too small; prepared_weight_bytes() = ", need);
  const auto s = detail::moe_prepared_sizes(config_.local_count, config_.hidden, config_.inter, config_.weight_format);
  const PreparedLayout l = prepared_layout(s);
  char* base = static_cast<char*>(prepared);
  float* sw1p = reinterpret_cast<float*>(base + l.sw1);
  if (mx) {
    float* sw2p = reinterpret_cast<float*>(base + l.sw2);
    detail::moe_prepare_w1_mxfp4(w.w1, w.w1_scales, w.w1_gate_up_interleaved, config_.local_count, config_.hidden,
                                 config_.inter, reinterpret_cast<float*>(base + l.sw1_blocks), base, sw1p, stream);
    detail::moe_prepare_w2_mxfp4(w.w2, w.w2_scales, config_.local_count, config_.hidden, config_.inter, base + l.w2,
                                 sw2p, stream);
    w2_ = base + l.w2;
    sw2_ = sw2p;
  } else {
    detail::moe_prepare_w1(w.w1, w.sw1, config_.local_count, config_.hidden, config_.inter, base, sw1p, stream);
    w2_ = w.w2;
    sw2_ = w.sw2;
  }
  const int64_t il = w.w1_gate_up_interleaved ? config_.inter : 0;
  float* b1p = reinterpret_cast<float*>(base + l.b1);
  float* b2p = reinterpret_cast<float*>(base + l.b2);
  if (w.b1) detail::moe_prepare_bias(w.b1, w.bias_bf16, config_.local_count, 2 * config_.inter, il, b1p, stream);
  if (w.b2) detail::moe_prepare_bias(w.b2, w.bias_bf16, config_.local_count, config_.hidden, 0, b2p, stream);
  b1p_ = w.b1 ? b1p : nullptr;
  b2p_ = w.b2 ? b2p : nullptr;
  w1p_ = base;
  sw1p_ = sw1p;
  prepared_ = true;
}

size_t MoeLayer::workspace_size(int64_t num_tokens) const {
  check_tokens(config_, num_tokens, "moekit::MoeLayer::workspace_size");
  if (num_tokens == 0) return 0;
  return ws_layout(config_, num_tokens).total;
}

void MoeLayer::forward(const MoeForwardArgs& a, cudaStream_t stream) const {
  const char* fn = "moekit::MoeLayer::forward";
  const int64_t t = a.num_tokens;
  check_tokens(config_, t, fn);
  const bool from_logits = a.logits != nullptr;
  const bool from_ids = a.topk_ids != nullptr || a.topk_weights != nullptr;
  MOEKIT_REQUIRE(!(from_logits && from_ids), kInv, fn,
                 ": give either logits or topk_ids/topk_weights, not both");
  MOEKIT_REQUIRE(!from_logits || config_.routing, kInv, fn,
                 ": logits given but the layer has no routing configuration (MoeConfig::routing)");
  MOEKIT_REQUIRE(!(a.routed_ids || a.routed_weights) || (a.routed_ids && a.routed_weights && !from_ids), kInv, fn,
                 ": routed_ids and routed_weights go together and only with logits");
  MOEKIT_REQUIRE(aligned(a.invalid_count, 4), ErrorCode::kMisaligned, fn, ": invalid_count must be 4-byte aligned");
  if (t == 0) {
    if (a.invalid_count) MOEKIT_CUDA_CHECK(cudaMemsetAsync(a.invalid_count, 0, sizeof(int32_t), stream));
    return;
  }
  MOEKIT_REQUIRE(prepared_, kInv, fn, ": weights not prepared (call prepare_weights first)");
  MOEKIT_REQUIRE(from_logits || from_ids, kInv, fn, ": routing input missing: give logits or topk_ids/topk_weights");
  MOEKIT_REQUIRE(!from_ids || (a.topk_ids && a.topk_weights), kInv, fn,
                 ": topk_ids and topk_weights must both be given");
  MOEKIT_REQUIRE(a.x && a.y, kInv, fn, ": x and y are required with num_tokens = ", t);
  MOEKIT_REQUIRE(aligned(a.x, 16) && aligned(a.y, 16), ErrorCode::kMisaligned, fn,
                 ": x and y must be 16-byte aligned");
  MOEKIT_REQUIRE(aligned(a.topk_ids, 4) && aligned(a.topk_weights, 4) && aligned(a.routed_ids, 4) &&
                     aligned(a.routed_weights, 4),
                 ErrorCode::kMisaligned, fn, ": topk / routed ids and weights must be 4-byte aligned");
  MOEKIT_REQUIRE(a.workspace != nullptr, kInv, fn, ": workspace is null with num_tokens = ", t);
  MOEKIT_REQUIRE(aligned(a.workspace, kAlign), ErrorCode::kMisaligned, fn, ": workspace (", a.workspace,
                 ") must be 256-byte aligned");
  const WsLayout ws = ws_layout(config_, t);
  MOEKIT_REQUIRE(a.workspace_bytes >= ws.total, kInv, fn, ": workspace too small: workspace_bytes = ",
                 a.workspace_bytes, ", workspace_size(", t, ") = ", ws.total);
  const size_t xy_bytes = static_cast<size_t>(t) * static_cast<size_t>(config_.hidden) * 2;
  MOEKIT_REQUIRE(!overlap(a.y, xy_bytes, a.x, xy_bytes) && !overlap(a.y, xy_bytes, a.workspace, ws.total), kInv,
                 fn, ": y overlaps x or the workspace");

  char* base = static_cast<char*>(a.workspace);
  const detail::MoePlan plan = plan_forward(config_, t, from_logits);
  // Programmatic dependent launch for the whole chain (runtime/pdl.h): each kernel's launch and
  // prologue overlap the previous kernel's tail.
  const detail::PdlScope pdl(true);
  detail::moe_stage_begin(stream);

  detail::MoeForwardRequest f = detail::MoeLayerAccess::weights(*this, fn);
  f.x = a.x;
  f.topk_ids = a.topk_ids;
  f.topk_weights = a.topk_weights;
  if (plan.from_logits) {  // routed inside the forward (fused with the sort for small T)
    f.logits = a.logits;
    f.logits_type = a.logits_type;
    f.routed_ids = a.routed_ids ? a.routed_ids : reinterpret_cast<int32_t*>(base + ws.ids);
    f.routed_weights = a.routed_weights ? a.routed_weights : reinterpret_cast<float*>(base + ws.weights);
  }
  f.y = a.y;
  f.invalid_count = a.invalid_count ? a.invalid_count : reinterpret_cast<int32_t*>(base + ws.invalid);
  detail::moe_forward(plan, f, base + ws.inner, ws.inner_bytes, stream);
}

void MoeLayer::prepare_kernels(int64_t num_tokens, void* workspace, size_t workspace_bytes,
                               cudaStream_t stream) const {
  const char* fn = "moekit::MoeLayer::prepare_kernels";
  check_tokens(config_, num_tokens, fn);
  if (num_tokens == 0) return;
  MOEKIT_REQUIRE(prepared_, kInv, fn, ": weights not prepared (call prepare_weights first)");
  const int64_t t = num_tokens;
  const size_t xy = static_cast<size_t>(t * config_.hidden) * 2;
  const size_t slots = static_cast<size_t>(t) * size_t(config_.top_k);
  detail::DeviceBuffer x(xy), y(xy), logits, ids, weights;
  MOEKIT_CUDA_CHECK(cudaMemsetAsync(x.get(), 0, xy, stream));
  MoeForwardArgs a;
  a.num_tokens = t;
  a.x = x.get();
  a.y = y.get();
  a.workspace = workspace;
  a.workspace_bytes = workspace_bytes;
  if (config_.routing) {
    // The logits path runs route() too, so its module is loaded before any capture.
    logits = detail::DeviceBuffer(static_cast<size_t>(t) * size_t(config_.num_experts) * sizeof(float));
    MOEKIT_CUDA_CHECK(cudaMemsetAsync(logits.get(), 0, logits.bytes(), stream));
    a.logits = logits.get();
    a.logits_type = LogitsType::kFloat32;
  } else {
    ids = detail::DeviceBuffer(slots * sizeof(int32_t));
    weights = detail::DeviceBuffer(slots * sizeof(float));
    MOEKIT_CUDA_CHECK(cudaMemsetAsync(ids.get(), 0, ids.bytes(), stream));
    MOEKIT_CUDA_CHECK(cudaMemsetAsync(weights.get(), 0, weights.bytes(), stream));
    a.topk_ids = ids.as<int32_t>();
    a.topk_weights = weights.as<float>();
  }
  // The forward's plan for T, run on zero inputs: exactly the kernels a forward of T launches.
  forward(a, stream);
  if (config_.routing) {
    // Also load the bf16-logits routing kernels (zero bytes are bf16 zeros; same plan).
    a.logits_type = LogitsType::kBFloat16;
    forward(a, stream);
  }
  MOEKIT_CUDA_CHECK(cudaStreamSynchronize(stream));
}

}  // namespace moekit

namespace moekit::detail {

MoeForwardRequest MoeLayerAccess::weights(const MoeLayer& layer, const char* fn) {
  MOEKIT_REQUIRE(layer.prepared_, kInv, fn, ": weights not prepared (call prepare_weights first)");
  MoeForwardRequest f;
  f.w1p = layer.w1p_;
  f.sw1p = layer.sw1p_;
  f.w2 = layer.w2_;
  f.sw2 = layer.sw2_;
  f.b1 = layer.b1p_;
  f.b2 = layer.b2p_;
  return f;
}

MoePlan MoeLayerAccess::prequantized_plan(const MoeLayer& layer, int64_t num_tokens) {
  const MoeConfig& c = layer.config_;
  const size_t sort_scratch = moe_sort_workspace_size(num_tokens, c.top_k, c.local_count);
  return plan_moe_forward(c, num_tokens, false, device_limits(), sort_scratch, knobs(), true);
}

}  // namespace moekit::detail

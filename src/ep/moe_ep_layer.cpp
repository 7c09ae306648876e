// The expert-parallel MoE layer (include/moekit/moe_ep_layer.h): validation, the workspace
// layout, and the forward — quantize at the source, route (ep_kernels), NCCL dispatch, the local
// experts through the MoE layer's own forward on the received FP8 rows, NCCL return, and the
// final sums by moekit::moe_combine on the token's rank.
#include "moekit/moe_ep_layer.h"

#include <algorithm>
#include <vector>

#include "common/check.h"
#include "ep/ep_kernels.h"
#include "ep/nccl_group.h"
#include "moe/moe_forward.h"
#include "moe/moe_layer_access.h"
#include "moe/moe_stage_trace.h"
#include "planning/ep_plan.h"
#include "moekit/moe_ops.h"
#include "moekit/numerics.h"
#include "moekit/routing.h"
#include "runtime/pdl.h"

namespace moekit {
namespace {

constexpr auto kInv = ErrorCode::kInvalidArgument;

struct CommFacts {
  int rank = 0, world = 1, device = 0;
};

CommFacts comm_facts(ncclComm_t comm) {
  MOEKIT_REQUIRE(comm != nullptr, kInv, "moekit::MoeEpLayer: the NCCL communicator is null");
  CommFacts f;
  detail::check_nccl(ncclCommCount(comm, &f.world), "ncclCommCount");
  detail::check_nccl(ncclCommUserRank(comm, &f.rank), "ncclCommUserRank");
  detail::check_nccl(ncclCommCuDevice(comm, &f.device), "ncclCommCuDevice");
  return f;
}

MoeConfig local_layer_config(const MoeEpConfig& c, ncclComm_t comm) {
  const CommFacts f = comm_facts(comm);
  return detail::ep_local_config(c, f.rank, f.world);
}

bool aligned(const void* p, uintptr_t a) { return reinterpret_cast<uintptr_t>(p) % a == 0; }

bool overlap(const void* a, size_t na, const void* b, size_t nb) {
  if (!a || !b || na == 0 || nb == 0) return false;
  const auto x = reinterpret_cast<uintptr_t>(a), y = reinterpret_cast<uintptr_t>(b);
  return x < y + nb && y < x + na;
}

// The workspace regions at the plan's offsets (planning/ep_plan.h has their shapes).
struct EpRegions {
  int32_t* ids;
  float* weights;
  int32_t* invalid;
  uint8_t* send_x;
  float* send_meta;
  int32_t* pos;
  int32_t* counts;
  int32_t* map;
  float* ones;
  uint8_t* recv_x;
  float* recv_meta;
  int32_t* recv_ids;
  float* recv_w;
  float* recv_sx;
  int32_t* local_invalid;
  uint16_t* y_local;
  uint16_t* back;
  void* local_ws;
  size_t local_ws_bytes;
};

detail::EpWorkspacePlan workspace_plan(const MoeEpConfig& c, const MoeConfig& local, int world) {
  const int64_t rows = c.max_tokens_per_rank * world;
  return detail::ep_workspace_plan(
      c, world, detail::moe_forward_workspace_size(rows, local.top_k, local.hidden, local.inter, local.local_count,
                                                        local.weight_format == MoeWeightFormat::kMxfp4));
}

EpRegions regions(const detail::EpWorkspacePlan& p, char* base) {
  const auto at = [base](size_t off) { return static_cast<void*>(base + off); };
  EpRegions r;
  r.ids = static_cast<int32_t*>(at(p.ids));
  r.weights = static_cast<float*>(at(p.weights));
  r.invalid = static_cast<int32_t*>(at(p.invalid));
  r.send_x = static_cast<uint8_t*>(at(p.send_x));
  r.send_meta = static_cast<float*>(at(p.send_meta));
  r.pos = static_cast<int32_t*>(at(p.pos));
  r.counts = static_cast<int32_t*>(at(p.counts));
  r.map = static_cast<int32_t*>(at(p.map));
  r.ones = static_cast<float*>(at(p.ones));
  r.recv_x = static_cast<uint8_t*>(at(p.recv_x));
  r.recv_meta = static_cast<float*>(at(p.recv_meta));
  r.recv_ids = static_cast<int32_t*>(at(p.recv_ids));
  r.recv_w = static_cast<float*>(at(p.recv_w));
  r.recv_sx = static_cast<float*>(at(p.recv_sx));
  r.local_invalid = static_cast<int32_t*>(at(p.local_invalid));
  r.y_local = static_cast<uint16_t*>(at(p.y_local));
  r.back = static_cast<uint16_t*>(at(p.back));
  r.local_ws = at(p.local_ws);
  r.local_ws_bytes = p.local_ws_bytes;
  return r;
}

void nccl_group_start() { detail::check_nccl(ncclGroupStart(), "ncclGroupStart"); }
void nccl_group_end() { detail::check_nccl(ncclGroupEnd(), "ncclGroupEnd"); }

void send_recv(const void* send, size_t send_bytes, void* recv, size_t recv_bytes, int peer, ncclComm_t comm,
               cudaStream_t stream) {
  if (send_bytes) detail::check_nccl(ncclSend(send, send_bytes, ncclUint8, peer, comm, stream), "ncclSend");
  if (recv_bytes) detail::check_nccl(ncclRecv(recv, recv_bytes, ncclUint8, peer, comm, stream), "ncclRecv");
}

}  // namespace

MoeEpLayer::MoeEpLayer(const MoeEpConfig& config, ncclComm_t comm)
    : config_(config), comm_(comm), local_(local_layer_config(config, comm)) {
  const CommFacts f = comm_facts(comm);
  rank_ = f.rank;
  world_ = f.world;
  device_ = f.device;
  if (config_.mode == MoeEpMode::kHighThroughput) {
    int current = 0;
    MOEKIT_CUDA_CHECK(cudaGetDevice(&current));
    MOEKIT_CUDA_CHECK(cudaSetDevice(device_));
    try {
      MOEKIT_CUDA_CHECK(cudaStreamCreateWithFlags(&side_, cudaStreamNonBlocking));
      MOEKIT_CUDA_CHECK(cudaEventCreateWithFlags(&routed_, cudaEventDisableTiming));
      MOEKIT_CUDA_CHECK(cudaMallocHost(&host_counts_, size_t(2 * world_) * sizeof(int32_t)));
    } catch (...) {  // the destructor does not run for a constructor that throws
      release_ht_resources();
      cudaSetDevice(current);
      throw;
    }
    MOEKIT_CUDA_CHECK(cudaSetDevice(current));
  }
}

void MoeEpLayer::release_ht_resources() noexcept {
  if (host_counts_) cudaFreeHost(host_counts_);
  if (routed_) cudaEventDestroy(routed_);
  if (side_) cudaStreamDestroy(side_);
  host_counts_ = nullptr;
  routed_ = nullptr;
  side_ = nullptr;
}

MoeEpLayer::~MoeEpLayer() { release_ht_resources(); }

void MoeEpLayer::prepare_weights(const MoeWeights& w, void* prepared, size_t prepared_bytes, cudaStream_t stream) {
  // Deterministic mode sums the slots' rows on the token's rank, which holds no other rank's b2.
  MOEKIT_REQUIRE(!config_.layer.deterministic || (w.b1 == nullptr && w.b2 == nullptr), kInv,
                 "moekit::MoeEpLayer::prepare_weights: per-expert biases need deterministic = false with expert "
                 "parallelism in this version");
  local_.prepare_weights(w, prepared, prepared_bytes, stream);
}

size_t MoeEpLayer::workspace_size() const { return workspace_plan(config_, local_.config(), world_).bytes; }

void MoeEpLayer::forward(const MoeEpForwardArgs& a, cudaStream_t stream) const {
  const char* fn = "moekit::MoeEpLayer::forward";
  const MoeConfig& c = config_.layer;
  const int64_t t = a.num_tokens, cap = config_.max_tokens_per_rank, h = c.hidden;
  const int k = c.top_k, g = world_;
  MOEKIT_REQUIRE(t >= 0 && t <= cap, kInv, fn, ": num_tokens = ", t, " must be in [0, max_tokens_per_rank = ", cap,
                 "]");
  int dev = -1;
  MOEKIT_CUDA_CHECK(cudaGetDevice(&dev));
  MOEKIT_REQUIRE(dev == device_, kInv, fn, ": the current device ", dev, " is not the communicator's (", device_, ")");
  MOEKIT_REQUIRE(local_.weights_prepared(), kInv, fn, ": weights not prepared (call prepare_weights first)");
  if (config_.mode == MoeEpMode::kHighThroughput) {  // it waits on the host for the counts
    cudaStreamCaptureStatus capturing = cudaStreamCaptureStatusNone;
    MOEKIT_CUDA_CHECK(cudaStreamIsCapturing(stream, &capturing));
    MOEKIT_REQUIRE(capturing == cudaStreamCaptureStatusNone, kInv, fn,
                   ": MoeEpMode::kHighThroughput cannot be captured in a CUDA graph (use kLowLatency)");
  }
  const bool from_logits = a.logits != nullptr;
  const bool from_ids = a.topk_ids != nullptr || a.topk_weights != nullptr;
  MOEKIT_REQUIRE(!(from_logits && from_ids), kInv, fn, ": give either logits or topk_ids/topk_weights, not both");
  MOEKIT_REQUIRE(!from_logits || c.routing, kInv, fn, ": logits given but the layer has no routing configuration");
  if (t > 0) {
    MOEKIT_REQUIRE(from_logits || (a.topk_ids && a.topk_weights), kInv, fn,
                   ": routing input missing: give logits or both topk_ids and topk_weights");
    MOEKIT_REQUIRE(a.x && a.y, kInv, fn, ": x and y are required with num_tokens = ", t);
    MOEKIT_REQUIRE(aligned(a.x, 16) && aligned(a.y, 16), ErrorCode::kMisaligned, fn, ": x and y must be 16-byte aligned");
    MOEKIT_REQUIRE(aligned(a.topk_ids, 4) && aligned(a.topk_weights, 4), ErrorCode::kMisaligned, fn,
                   ": topk_ids and topk_weights must be 4-byte aligned");
  }
  MOEKIT_REQUIRE(aligned(a.invalid_count, 4), ErrorCode::kMisaligned, fn, ": invalid_count must be 4-byte aligned");
  const detail::EpWorkspacePlan plan = workspace_plan(config_, local_.config(), g);
  const size_t need = plan.bytes;
  MOEKIT_REQUIRE(a.workspace != nullptr && a.workspace_bytes >= need, kInv, fn, ": workspace too small: ",
                 a.workspace_bytes, " bytes, workspace_size() = ", need);
  MOEKIT_REQUIRE(aligned(a.workspace, 256), ErrorCode::kMisaligned, fn, ": workspace must be 256-byte aligned");
  const size_t xy = size_t(t) * size_t(h) * 2, slots = size_t(t) * size_t(k) * 4;
  const size_t logit_bytes = size_t(t) * size_t(c.num_experts) * (a.logits_type == LogitsType::kFloat32 ? 4 : 2);
  MOEKIT_REQUIRE(!overlap(a.y, xy, a.x, xy) && !overlap(a.y, xy, a.workspace, need), kInv, fn,
                 ": y overlaps x or the workspace");
  MOEKIT_REQUIRE(!overlap(a.x, xy, a.workspace, need) && !overlap(a.topk_ids, slots, a.workspace, need) &&
                     !overlap(a.topk_weights, slots, a.workspace, need) &&
                     !overlap(a.logits, logit_bytes, a.workspace, need),
                 kInv, fn, ": an input (x, topk_ids, topk_weights or logits) overlaps the workspace");

  const EpRegions r = regions(plan, static_cast<char*>(a.workspace));
  detail::moe_stage_begin(stream);  // `moekit bench ep`'s stage times
  const bool ht = config_.mode == MoeEpMode::kHighThroughput;
  const bool det = c.deterministic;
  const int64_t kb = ceil_div(h, kQuantBlock);
  const int32_t* ids = a.topk_ids;
  const float* weights = a.topk_weights;
  if (from_logits && t > 0) {
    route(*c.routing, a.logits, a.logits_type, t, r.ids, r.weights, stream);
    ids = r.ids;
    weights = r.weights;
  }

  // 1. Find each token's ranks and rows there; quantize it once into them.
  const detail::EpMeta meta{int(kb), k};
  const int64_t mw = meta.words();
  detail::EpSourceArgs src;
  src.x = a.x;
  src.ids = ids;
  src.weights = weights;
  src.num_tokens = t;
  src.hidden = h;
  src.top_k = k;
  src.num_experts = c.num_experts;
  src.world = g;
  src.capacity = cap;
  src.compact = ht;
  src.pos = r.pos;
  src.send_counts = r.counts;
  src.send_x = r.send_x;
  src.send_meta = r.send_meta;
  src.deterministic = det;
  src.combine_map = r.map;
  src.ones = r.ones;
  src.invalid_count = a.invalid_count ? a.invalid_count : r.invalid;
  detail::ep_route(src, stream);
  if (ht) MOEKIT_CUDA_CHECK(cudaEventRecord(routed_, stream));
  detail::ep_quantize_pack(src, stream);
  detail::moe_stage_mark("ep_quantize_route", stream);

  // 2. Dispatch.
  int64_t received = g * cap;
  // High throughput: rows sent to rank p, rows received from p (the exchanged counts).
  const auto sent_to = [&](int p) { return int64_t(host_counts_[size_t(p)]); };
  const auto received_from = [&](int p) { return int64_t(host_counts_[size_t(g + p)]); };
  std::vector<int64_t> offset(size_t(g) + 1, 0);
  if (ht) {
    // The counts travel while the tokens are packed; the host waits for them only.
    MOEKIT_CUDA_CHECK(cudaStreamWaitEvent(side_, routed_, 0));
    nccl_group_start();
    for (int p = 0; p < g; ++p) send_recv(r.counts + p, 4, r.counts + g + p, 4, p, comm_, side_);
    nccl_group_end();
    MOEKIT_CUDA_CHECK(cudaMemcpyAsync(host_counts_, r.counts, size_t(2 * g) * 4, cudaMemcpyDeviceToHost, side_));
    MOEKIT_CUDA_CHECK(cudaStreamSynchronize(side_));
    for (int p = 0; p < g; ++p) offset[size_t(p) + 1] = offset[size_t(p)] + received_from(p);
    received = offset[size_t(g)];
    nccl_group_start();
    for (int p = 0; p < g; ++p) {
      const size_t ns = size_t(sent_to(p)), nr = size_t(received_from(p));
      const int64_t sb = int64_t(p) * cap, rb = offset[size_t(p)];
      send_recv(r.send_x + sb * h, ns * h, r.recv_x + rb * h, nr * h, p, comm_, stream);
      send_recv(r.send_meta + sb * mw, ns * mw * 4, r.recv_meta + rb * mw, nr * mw * 4, p, comm_, stream);
    }
    nccl_group_end();
  } else {
    nccl_group_start();
    detail::check_nccl(ncclAllGather(r.send_x, r.recv_x, size_t(cap * h), ncclUint8, comm_, stream), "ncclAllGather");
    detail::check_nccl(ncclAllGather(r.send_meta, r.recv_meta, size_t(cap * mw), ncclFloat32, comm_, stream),
                       "ncclAllGather");
    nccl_group_end();
  }

  detail::moe_stage_mark("ep_dispatch", stream);

  // 3. The local experts on the received rows: the MoE layer's forward, its choices for R rows.
  if (received > 0) {
    const detail::MoePlan local_plan = detail::MoeLayerAccess::prequantized_plan(local_, received);
    detail::ep_unpack_meta(r.recv_meta, meta, received, local_plan.gather, r.recv_sx, r.recv_ids, r.recv_w, stream);
    detail::MoeForwardRequest f = detail::MoeLayerAccess::weights(local_, fn);
    f.xq = r.recv_x;
    f.sxq = r.recv_sx;
    f.topk_ids = r.recv_ids;
    f.topk_weights = r.recv_w;
    (det ? f.slot_rows : f.y) = r.y_local;
    f.invalid_count = r.local_invalid;
    const detail::PdlScope pdl(true);
    detail::moe_forward(local_plan, f, r.local_ws, r.local_ws_bytes, stream);
  }

  // 4. Combine: every owner returns its rows for the token's rank, which sums them.
  const int64_t cols = det ? int64_t(k) * h : h;  // bf16 elements per returned row
  nccl_group_start();
  for (int p = 0; p < g; ++p) {
    const int64_t n_back = ht ? sent_to(p) : cap;        // rows p returns to us
    const int64_t n_out = ht ? received_from(p) : cap;   // rows we return to p
    const int64_t out_at = ht ? offset[size_t(p)] : int64_t(p) * cap;
    send_recv(r.y_local + out_at * cols, size_t(n_out * cols) * 2, r.back + int64_t(p) * cap * cols,
              size_t(n_back * cols) * 2, p, comm_, stream);
  }
  nccl_group_end();
  if (t > 0) {
    if (det)
      moe_combine(r.back, h, r.map, weights, t, k, h, a.y, h, stream);
    else
      moe_combine(r.back, h, r.map, r.ones, t, g, h, a.y, h, stream);
  }
  detail::moe_stage_mark("ep_combine", stream);
}

void MoeEpLayer::prepare_kernels(void* workspace, size_t workspace_bytes, cudaStream_t stream) const {
  MoeEpForwardArgs a;
  a.workspace = workspace;
  a.workspace_bytes = workspace_bytes;
  forward(a, stream);
  MOEKIT_CUDA_CHECK(cudaStreamSynchronize(stream));
}

}  // namespace moekit

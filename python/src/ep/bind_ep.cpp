// moekit._ep — the expert-parallel layer (moekit::MoeEpLayer) and the NCCL communicator it runs
// on, built when NCCL is found (cmake/nccl.cmake). moekit.MoeEpLayer (python/moekit/_ep_layer.py) is
// the torch API over it: it makes the communicator from a torch.distributed process group.
#include <cuda_runtime_api.h>
#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>

#include <cstdint>
#include <cstring>
#include <optional>
#include <string>

#include <nccl.h>

#include "../errors.h"
#include "../tensor.h"
#include "ep/nccl_group.h"
#include "moekit/moe_ep_layer.h"
#include "moekit/numerics.h"

namespace moekit::py {
namespace {

using namespace nb::literals;

/// One rank's NCCL communicator on the device that was current when it was made.
struct Comm {
  ncclComm_t comm = nullptr;
  int device = -1;
  Comm(nb::bytes unique_id, int world, int rank) {
    if (unique_id.size() != sizeof(ncclUniqueId))
      throw nb::value_error(("Comm: unique_id must be " + std::to_string(sizeof(ncclUniqueId)) + " bytes (nccl_unique_id())").c_str());
    if (world < 1 || rank < 0 || rank >= world)
      throw nb::value_error(("Comm: rank " + std::to_string(rank) + " of " + std::to_string(world)).c_str());
    ncclUniqueId id;
    std::memcpy(&id, unique_id.c_str(), sizeof id);
    if (cudaGetDevice(&device) != cudaSuccess) throw nb::value_error("Comm: no current CUDA device");
    nb::gil_scoped_release release;  // collective: waits for every rank
    detail::check_nccl(ncclCommInitRank(&comm, world, id, rank), "ncclCommInitRank");
  }
  ~Comm() {
    if (comm) ncclCommDestroy(comm);
  }
  Comm(const Comm&) = delete;
  Comm& operator=(const Comm&) = delete;
};

nb::bytes nccl_unique_id() {
  ncclUniqueId id;
  detail::check_nccl(ncclGetUniqueId(&id), "ncclGetUniqueId");
  return nb::bytes(id.internal, sizeof id);
}

MoeEpMode parse_mode(const std::string& s) {
  if (s == "low_latency") return MoeEpMode::kLowLatency;
  if (s == "high_throughput") return MoeEpMode::kHighThroughput;
  throw nb::value_error(("EpLayer: mode must be 'low_latency' or 'high_throughput', got '" + s + "'").c_str());
}

/// The layer plus the Python objects its pointers refer to (the communicator, W2 / sW2, the
/// prepared buffer).
struct EpLayer {
  MoeEpLayer layer;
  nb::object comm;
  std::optional<nb::ndarray<>> w2, w2_scale, prepared;
  EpLayer(const MoeEpConfig& c, nb::handle comm_obj)
      : layer(c, nb::cast<Comm&>(comm_obj).comm), comm(nb::borrow(comm_obj)) {}
};

void make_layer(EpLayer* self, int num_experts, int top_k, int64_t hidden, int64_t inter, nb::handle comm,
                const std::string& mode, int64_t max_tokens_per_rank, bool deterministic, int gemm1_promote_k) {
  MoeEpConfig c;
  c.layer.num_experts = num_experts;
  c.layer.top_k = top_k;
  c.layer.hidden = hidden;
  c.layer.inter = inter;
  c.layer.deterministic = deterministic;
  c.layer.gemm1_promote_k = gemm1_promote_k;
  c.mode = parse_mode(mode);
  c.max_tokens_per_rank = max_tokens_per_rank;
  new (self) EpLayer(c, comm);
}

void prepare_weights(EpLayer& self, nb::handle w1_obj, nb::handle sw1_obj, nb::handle w2_obj, nb::handle sw2_obj,
                     nb::handle prepared_obj, std::uintptr_t stream) {
  const MoeConfig& c = self.layer.local_config();
  const int64_t el = c.local_count, h = c.hidden, i = c.inter;
  DeviceScope devices;
  const Fp8WeightTensors t = fp8_weight_tensors(w1_obj, sw1_obj, w2_obj, sw2_obj, el, h, i, devices);
  Tensor prep = cuda_tensor(prepared_obj, "prepared", {kUInt8}, 1, devices);
  expect_contiguous(prep);
  devices.expect_device(nb::cast<Comm&>(self.comm).device, "the communicator");
  MoeWeights w{t.w1.data(), static_cast<const float*>(t.sw1.data()), t.w2.data(),
               static_cast<const float*>(t.sw2.data())};
  devices.activate();
  {
    nb::gil_scoped_release release;
    self.layer.prepare_weights(w, prep.data(), prep.nbytes(), static_cast<cudaStream_t>(stream_ptr(stream)));
  }
  self.w2 = t.w2.array;
  self.w2_scale = t.sw2.array;
  self.prepared = prep.array;
}

/// A forward's tensors, checked: x [T, H] bf16, ids / weights [T, k], y [T, H] bf16, workspace.
MoeEpForwardArgs forward_args(const EpLayer& self, nb::handle x_obj, nb::handle ids_obj, nb::handle w_obj,
                              nb::handle y_obj, nb::handle ws_obj, DeviceScope& devices,
                              std::optional<Tensor> (&keep)[5]) {
  const MoeConfig& c = self.layer.local_config();
  keep[0] = cuda_tensor(x_obj, "x", {kBFloat16}, 2, devices);
  const int64_t t = keep[0]->size(0);
  expect_shape(*keep[0], {t, c.hidden});
  keep[1] = cuda_tensor(ids_obj, "topk_ids", {kInt32}, 2, devices);
  expect_shape(*keep[1], {t, c.top_k});
  keep[2] = cuda_tensor(w_obj, "topk_weights", {kFloat32}, 2, devices);
  expect_shape(*keep[2], {t, c.top_k});
  keep[3] = cuda_tensor(y_obj, "y", {kBFloat16}, 2, devices);
  expect_shape(*keep[3], {t, c.hidden});
  keep[4] = cuda_tensor(ws_obj, "workspace", {kUInt8}, 1, devices);
  for (auto& k : keep) expect_contiguous(*k);
  devices.expect_device(nb::cast<Comm&>(self.comm).device, "the communicator");
  MoeEpForwardArgs a;
  a.num_tokens = t;
  a.x = keep[0]->data();
  a.topk_ids = static_cast<const int32_t*>(keep[1]->data());
  a.topk_weights = static_cast<const float*>(keep[2]->data());
  a.y = keep[3]->data();
  a.workspace = keep[4]->data();
  a.workspace_bytes = keep[4]->nbytes();
  return a;
}

void forward(const EpLayer& self, nb::handle x, nb::handle ids, nb::handle w, nb::handle y, nb::handle ws,
             std::uintptr_t stream) {
  DeviceScope devices;
  std::optional<Tensor> keep[5];
  const MoeEpForwardArgs a = forward_args(self, x, ids, w, y, ws, devices, keep);
  devices.activate();
  nb::gil_scoped_release release;  // collective (high throughput: waits on the host for the counts)
  self.layer.forward(a, static_cast<cudaStream_t>(stream_ptr(stream)));
}

void prepare_kernels(const EpLayer& self, nb::handle ws_obj, std::uintptr_t stream) {
  DeviceScope devices;
  Tensor ws = cuda_tensor(ws_obj, "workspace", {kUInt8}, 1, devices);
  expect_contiguous(ws);
  devices.expect_device(nb::cast<Comm&>(self.comm).device, "the communicator");
  devices.activate();
  nb::gil_scoped_release release;
  self.layer.prepare_kernels(ws.data(), ws.nbytes(), static_cast<cudaStream_t>(stream_ptr(stream)));
}

}  // namespace
}  // namespace moekit::py

NB_MODULE(_ep, m) {
  using namespace moekit::py;
  m.doc() = "moekit's expert-parallel MoE layer over NCCL (moekit::MoeEpLayer)";
  register_error_translator();
  m.def("nccl_unique_id", &nccl_unique_id, "A new ncclUniqueId (bytes) for rank 0 to share with its peers.");
  m.def(
      "nccl_version",
      [] {
        int v = 0;
        moekit::detail::check_nccl(ncclGetVersion(&v), "ncclGetVersion");
        return v;
      },
      "The loaded NCCL's version code (e.g. 22809 for 2.28.9).");
  nb::class_<Comm>(m, "Comm", "One rank's NCCL communicator (ncclCommInitRank, collective) on the current device.")
      .def(nb::init<nb::bytes, int, int>(), "unique_id"_a, "world"_a, "rank"_a)
      .def_ro("device", &Comm::device);
  nb::class_<EpLayer>(m, "EpLayer", "moekit::MoeEpLayer of one rank (FP8 weights, caller top-k ids).")
      .def("__init__", &make_layer, "num_experts"_a, "top_k"_a, "hidden"_a, "inter"_a, "comm"_a, "mode"_a,
           "max_tokens_per_rank"_a, "deterministic"_a = false, "gemm1_promote_k"_a = 0)
      .def_prop_ro("rank", [](const EpLayer& s) { return s.layer.rank(); })
      .def_prop_ro("world_size", [](const EpLayer& s) { return s.layer.world_size(); })
      .def_prop_ro("local_offset", [](const EpLayer& s) { return s.layer.local_config().local_offset; })
      .def_prop_ro("local_count", [](const EpLayer& s) { return s.layer.local_config().local_count; })
      .def("prepared_weight_bytes", [](const EpLayer& s) { return s.layer.prepared_weight_bytes(); })
      .def("workspace_size", [](const EpLayer& s) { return s.layer.workspace_size(); })
      .def("prepare_weights", &prepare_weights, "w1"_a, "w1_scale"_a, "w2"_a, "w2_scale"_a, "prepared"_a, "stream"_a)
      .def("forward", &forward, "x"_a, "topk_ids"_a, "topk_weights"_a, "y"_a, "workspace"_a, "stream"_a)
      .def("prepare_kernels", &prepare_kernels, "workspace"_a, "stream"_a);
}

#include "tensor.h"

#include <cuda_runtime_api.h>

#include <stdexcept>

#include "moekit/numerics.h"

namespace moekit::py {
namespace {

// DLPack device types (dlpack.h). Managed memory is device-accessible, so it is accepted too.
constexpr int kDLCPU = 1;
constexpr int kDLCUDA = 2;
constexpr int kDLCUDAHost = 3;
constexpr int kDLCUDAManaged = 13;

std::string device_name(int type) {
  switch (type) {
    case kDLCPU:
      return "CPU";
    case kDLCUDA:
      return "CUDA";
    case kDLCUDAHost:
      return "CUDA pinned host memory";
    case kDLCUDAManaged:
      return "CUDA managed memory";
    default:
      return "DLPack device type " + std::to_string(type);
  }
}

std::string join(const Tensor& t, bool strides) {
  std::string s = "[";
  for (int i = 0; i < t.ndim(); ++i) {
    if (i) s += ", ";
    s += std::to_string(strides ? t.stride(i) : t.size(i));
  }
  return s + "]";
}

[[noreturn]] void value_error(const Tensor& t, const std::string& what) {
  throw nb::value_error((std::string(t.name) + ": " + what).c_str());
}

// The DLPack export of `obj`. CUDA producers are asked for stream = -1 ("the consumer
// synchronizes", DLPack / array API): with no stream argument torch makes its default stream
// wait on the current one at every export — one event per tensor per call, and an error inside
// CUDA graph capture. The moekit call itself is stream-ordered on the caller's stream, which is
// all the ordering needed. Producers that reject the argument get the plain call.
nb::object dlpack_source(nb::handle obj, const char* name) {
  if (!nb::hasattr(obj, "__dlpack__") || !nb::hasattr(obj, "__dlpack_device__")) return nb::borrow(obj);
  int type = 0;
  try {
    nb::tuple dev = nb::cast<nb::tuple>(obj.attr("__dlpack_device__")());
    type = nb::cast<int>(dev[0]);
  } catch (const std::exception&) {
    return nb::borrow(obj);  // nanobind's own import reports what is wrong
  }
  if (type != kDLCUDA && type != kDLCUDAManaged) return nb::borrow(obj);
  // moekit computes no gradients: a tensor that requires grad (a parameter, or logits computed
  // from one) is read as its data, which torch exports only after detach().
  nb::object src = nb::borrow(obj);
  if (nb::hasattr(obj, "requires_grad") && nb::hasattr(obj, "detach") && nb::cast<bool>(obj.attr("requires_grad")))
    src = obj.attr("detach")();
  try {
    return src.attr("__dlpack__")(nb::arg("stream") = -1);
  } catch (nb::python_error& e) {
    // torch raises BufferError for tensors on a non-current device, for example: pass its reason
    // on (its message, not the traceback) rather than a generic "not a tensor".
    if (!e.matches(PyExc_TypeError))
      throw nb::value_error((std::string(name) + ": cannot be exported through DLPack: " +
                             nb::cast<std::string>(nb::str(e.value())))
                                .c_str());
  }
  return src;
}

}  // namespace

std::string dtype_name(nb::dlpack::dtype t) {
  std::string base;
  switch (t.code) {
    case 0:
      base = "int";
      break;
    case 1:
      base = "uint";
      break;
    case 2:
      base = "float";
      break;
    case 4:
      base = "bfloat";
      break;
    case 5:
      base = "complex";
      break;
    case 6:
      return t.lanes == 1 ? "bool" : "bool x" + std::to_string(t.lanes);
    case 10:
      return "float8_e4m3fn";
    case 12:
      return "float8_e5m2";
    default:
      base = "dtype(code=" + std::to_string(t.code) + ")";
      break;
  }
  std::string s = base + std::to_string(t.bits);
  if (t.lanes != 1) s += " x" + std::to_string(t.lanes);
  return s;
}

int64_t Tensor::numel() const {
  int64_t n = 1;
  for (int i = 0; i < ndim(); ++i) n *= size(i);
  return n;
}

std::string Tensor::shape_str() const { return join(*this, false); }
std::string Tensor::strides_str() const { return join(*this, true); }

DeviceScope::~DeviceScope() {
  if (previous_ >= 0) {
    cudaSetDevice(previous_);
    cudaGetLastError();  // a destructor must not throw; the call's own result stands
  }
}

void DeviceScope::add(const Tensor& t) {
  const int id = t.array.device_id();
  if (!first_) {
    device_ = id;
    first_ = t.name;
  } else if (id != device_) {
    value_error(t, "is on CUDA device " + std::to_string(id) + " but " + first_ + " is on CUDA device " +
                       std::to_string(device_) + "; all tensors of one call must be on the same device");
  }
}

void DeviceScope::expect_device(int device, const char* what) const {
  if (device < 0 || !first_ || device == device_) return;
  throw nb::value_error((std::string(first_) + " is on CUDA device " + std::to_string(device_) + " but " + what +
                         " is on CUDA device " + std::to_string(device))
                            .c_str());
}

void DeviceScope::activate() {
  if (!first_) return;
  int current = -1;
  cudaError_t e = cudaGetDevice(&current);
  if (e != cudaSuccess) {
    // No usable device at all: the library reports that itself (after its own argument checks).
    cudaGetLastError();
    return;
  }
  if (current == device_) return;
  e = cudaSetDevice(device_);
  if (e != cudaSuccess) {
    cudaGetLastError();
    throw std::runtime_error(std::string("moekit: cannot make CUDA device ") + std::to_string(device_) + " current (" +
                             cudaGetErrorString(e) + ")");
  }
  previous_ = current;
}

Tensor cuda_tensor(nb::handle obj, const char* name, std::initializer_list<nb::dlpack::dtype> dtypes, int ndim,
                   DeviceScope& devices) {
  if (obj.is_none()) throw nb::type_error((std::string(name) + ": expected a tensor, got None").c_str());
  Tensor t;
  t.name = name;
  nb::object src = dlpack_source(obj, name);
  if (!nb::try_cast(src, t.array)) {
    throw nb::type_error((std::string(name) + ": expected a DLPack tensor (torch, CuPy, JAX, numpy), got " +
                          nb::type_name(obj.type()).c_str())
                             .c_str());
  }
  // dtype before device, so a wrong dtype reads as such even on the host (numpy).
  bool dtype_ok = false;
  std::string expected;
  for (const auto& d : dtypes) {
    dtype_ok = dtype_ok || t.is(d);
    expected += (expected.empty() ? "" : " or ") + dtype_name(d);
  }
  if (!dtype_ok)
    throw nb::type_error(
        (std::string(name) + ": expected dtype " + expected + ", got " + dtype_name(t.array.dtype())).c_str());
  const int type = t.array.device_type();
  if (type != kDLCUDA && type != kDLCUDAManaged)
    value_error(t, "expected a tensor on a CUDA device, got one in " + device_name(type) + " memory");
  if (ndim >= 0 && t.ndim() != ndim)
    value_error(t, "expected " + std::to_string(ndim) + " dimension" + (ndim == 1 ? "" : "s") + ", got " +
                       std::to_string(t.ndim()) + " (shape " + t.shape_str() + ")");
  devices.add(t);
  return t;
}

void expect_shape(const Tensor& t, std::initializer_list<int64_t> dims) {
  bool ok = static_cast<int>(dims.size()) == t.ndim();
  std::string want = "[";
  int i = 0;
  for (int64_t d : dims) {
    if (i) want += ", ";
    want += d < 0 ? std::string("*") : std::to_string(d);
    if (ok && d >= 0 && t.size(i) != d) ok = false;
    ++i;
  }
  want += "]";
  if (!ok) value_error(t, "expected shape " + want + ", got " + t.shape_str());
}

void expect_contiguous(const Tensor& t) {
  int64_t expected = 1;
  for (int i = t.ndim() - 1; i >= 0; --i) {
    if (t.size(i) != 1 && t.stride(i) != expected)
      value_error(t, "expected a contiguous (row-major) tensor, got shape " + t.shape_str() + " with strides " +
                         t.strides_str());
    expected *= t.size(i);
  }
}

int64_t row_stride(const Tensor& t, int dim, int64_t fallback) {
  const int last = t.ndim() - 1;
  if (t.size(last) > 1 && t.stride(last) != 1)
    value_error(t, "expected its last dimension contiguous (stride 1), got strides " + t.strides_str());
  if (t.size(dim) <= 1) return fallback;
  if (t.stride(dim) < 1) value_error(t, "expected positive strides, got " + t.strides_str());
  return t.stride(dim);
}

const float* physical_sfa(const Tensor& sa, int64_t rows, int64_t kblocks, int64_t groups) {
  const int64_t ld = moekit::sfa_ld(rows);
  // A stride only matters where its dimension has more than one index.
  auto stride_ok = [&](int i, int64_t want) { return sa.size(i) <= 1 || sa.stride(i) == want; };
  const bool ok =
      // the storage: [kblocks, sfa_ld(rows)], contiguous
      (sa.ndim() == 2 && sa.size(0) == kblocks && sa.size(1) == ld && stride_ok(0, ld) && stride_ok(1, 1)) ||
      // its logical view [rows, kblocks], strides (1, sfa_ld(rows))
      (sa.ndim() == 2 && sa.size(0) == rows && sa.size(1) == kblocks && stride_ok(0, 1) && stride_ok(1, ld)) ||
      // masked GEMM: [groups, max_m, kblocks] view, strides (max_m, 1, sfa_ld(rows))
      (groups > 0 && sa.ndim() == 3 && sa.size(0) == groups && sa.size(0) * sa.size(1) == rows &&
       sa.size(2) == kblocks && stride_ok(0, sa.size(1)) && stride_ok(1, 1) && stride_ok(2, ld));
  if (!ok) {
    std::string forms = "[" + std::to_string(kblocks) + ", " + std::to_string(ld) + "] contiguous, or [" +
                        std::to_string(rows) + ", " + std::to_string(kblocks) + "] with strides (1, " +
                        std::to_string(ld) + ")";
    if (groups > 0)
      forms += ", or [" + std::to_string(groups) + ", " + std::to_string(rows / groups) + ", " +
               std::to_string(kblocks) + "] with strides (" + std::to_string(rows / groups) + ", 1, " +
               std::to_string(ld) + ")";
    value_error(sa, "expected FP32 scales in moekit's physical layout for " + std::to_string(rows) + " rows (" + forms +
                        "), got shape " + sa.shape_str() + " with strides " + sa.strides_str());
  }
  return static_cast<const float*>(sa.data());
}

Fp8WeightTensors fp8_weight_tensors(nb::handle w1_obj, nb::handle sw1_obj, nb::handle w2_obj, nb::handle sw2_obj,
                                    int64_t el, int64_t h, int64_t i, DeviceScope& devices) {
  Fp8WeightTensors t{cuda_tensor(w1_obj, "w1", kFp8Types, 3, devices),
                     cuda_tensor(sw1_obj, "w1_scale", {kFloat32}, 3, devices),
                     cuda_tensor(w2_obj, "w2", kFp8Types, 3, devices),
                     cuda_tensor(sw2_obj, "w2_scale", {kFloat32}, 3, devices)};
  expect_shape(t.w1, {el, 2 * i, h});
  expect_shape(t.sw1, {el, ceil_div(2 * i, kQuantBlock), ceil_div(h, kQuantBlock)});
  expect_shape(t.w2, {el, h, i});
  expect_shape(t.sw2, {el, ceil_div(h, kQuantBlock), ceil_div(i, kQuantBlock)});
  for (const Tensor* x : {&t.w1, &t.sw1, &t.w2, &t.sw2}) expect_contiguous(*x);
  return t;
}

}  // namespace moekit::py

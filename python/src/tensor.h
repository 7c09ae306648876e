// moekit._C — tensor arguments: DLPack import and the checks every binding runs before it calls
// the library.
//
// Every pointer argument of the Python API is a DLPack tensor (torch, CuPy, JAX, numpy: any
// object with __dlpack__). The library validates pointers, alignment and sizes itself but cannot
// see dtypes, devices, shapes or strides; those are checked here, with the argument's name in the
// message: wrong dtype → TypeError, anything else → ValueError. Nothing reaches the GPU unchecked.
#pragma once
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>

#include <cstdint>
#include <initializer_list>
#include <string>

namespace moekit::py {

namespace nb = nanobind;

// DLPack dtypes the API uses, by their DLPack codes (dlpack.h: kDLInt 0, kDLUInt 1, kDLFloat 2,
// kDLBfloat 4, kDLFloat8_e4m3fn 10 — DLPack 1.1). Raw codes rather than nb::dlpack::dtype_code
// names: nanobind 2.x, which some build machines have, does not name the float8 codes.
inline constexpr nb::dlpack::dtype kUInt8{1, 8, 1};
inline constexpr nb::dlpack::dtype kFloat8E4M3{10, 8, 1};
inline constexpr nb::dlpack::dtype kBFloat16{4, 16, 1};
inline constexpr nb::dlpack::dtype kFloat32{2, 32, 1};
inline constexpr nb::dlpack::dtype kInt32{0, 32, 1};
/// FP8 E4M3 data: torch.float8_e4m3fn, or its raw codes as uint8 (numpy, older producers).
inline constexpr std::initializer_list<nb::dlpack::dtype> kFp8Types = {kFloat8E4M3, kUInt8};

/// "bfloat16", "float8_e4m3fn", ... (DLPack dtype as its usual Python name).
std::string dtype_name(nb::dlpack::dtype t);

/// One imported tensor argument. Holds the producer's DLPack export alive for the call.
struct Tensor {
  nb::ndarray<> array;
  const char* name = "";

  int ndim() const { return static_cast<int>(array.ndim()); }
  int64_t size(int i) const { return static_cast<int64_t>(array.shape(static_cast<size_t>(i))); }
  int64_t stride(int i) const { return array.stride(static_cast<size_t>(i)); }
  int64_t numel() const;
  size_t nbytes() const { return array.nbytes(); }
  void* data() const { return array.data(); }
  bool is(nb::dlpack::dtype t) const { return array.dtype() == t; }
  std::string shape_str() const;
  std::string strides_str() const;
};

/// All tensors of one call must live on the same CUDA device; the call then runs with that
/// device current (restored afterwards), as the library launches on the current device.
class DeviceScope {
 public:
  DeviceScope() = default;
  DeviceScope(const DeviceScope&) = delete;
  DeviceScope& operator=(const DeviceScope&) = delete;
  ~DeviceScope();
  /// Records t's device; ValueError if an earlier argument is on another device.
  void add(const Tensor& t);
  /// Makes the recorded device current (no-op without tensors or when it already is).
  void activate();
  /// The recorded device id, -1 before the first tensor.
  int device() const { return device_; }
  /// ValueError unless `device` (an id the callee keeps pointers on, e.g. the prepared weights)
  /// is the recorded device; `what` names it in the message.
  void expect_device(int device, const char* what) const;

 private:
  int device_ = -1;
  const char* first_ = nullptr;
  int previous_ = -1;  ///< device to restore, -1: nothing to restore
};

/// Imports `obj` as a CUDA tensor named `name`: TypeError unless its dtype is one of `dtypes`,
/// ValueError unless it lives on a CUDA device (checked in that order) or has `ndim` dimensions
/// (-1: any; the caller checks).
/// Records its device in `devices`.
Tensor cuda_tensor(nb::handle obj, const char* name, std::initializer_list<nb::dlpack::dtype> dtypes, int ndim,
                   DeviceScope& devices);

/// ValueError unless t's shape is `dims` (-1: any extent).
void expect_shape(const Tensor& t, std::initializer_list<int64_t> dims);
/// ValueError unless t is dense row-major (strides of extent-1 dimensions are ignored).
void expect_contiguous(const Tensor& t);
/// ValueError unless t's last dimension is contiguous; returns the stride of dimension
/// `dim` (elements), or `fallback` when that dimension has extent ≤ 1 (any stride is then valid).
int64_t row_stride(const Tensor& t, int dim, int64_t fallback);

/// A-scale tensor `sa` for `rows` rows and `kblocks` K blocks in the library's physical layout
/// (numerics.h: sa[kb * sfa_ld(rows) + row]). Accepted forms: the storage itself, contiguous
/// [kblocks, sfa_ld(rows)]; a logical [rows, kblocks] view of it with strides (1, sfa_ld(rows));
/// with `groups` > 0 (masked GEMM, rows = groups * max_m) also the [groups, max_m, kblocks]
/// view with strides (max_m, 1, sfa_ld(rows)). ValueError otherwise, naming the layout found.
const float* physical_sfa(const Tensor& sa, int64_t rows, int64_t kblocks, int64_t groups = 0);

/// FP8 expert weights of E_local experts of shape H x I in the SPEC convention, checked: w1
/// [el, 2I, H] and w2 [el, H, I] (float8_e4m3fn or uint8), their FP32 128x128 block scales
/// w1_scale / w2_scale, all contiguous; devices recorded.
struct Fp8WeightTensors {
  Tensor w1, sw1, w2, sw2;
};
Fp8WeightTensors fp8_weight_tensors(nb::handle w1, nb::handle sw1, nb::handle w2, nb::handle sw2, int64_t el,
                                    int64_t hidden, int64_t inter, DeviceScope& devices);

/// The cudaStream_t a Python int stands for.
inline void* stream_ptr(std::uintptr_t s) { return reinterpret_cast<void*>(s); }

}  // namespace moekit::py

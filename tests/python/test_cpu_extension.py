"""moekit._C without a GPU: import, queries, config validation, and the tensor checks that run
before any library call (dtype -> TypeError; device, ndim, shape, strides -> ValueError naming the
argument).

Host arrays come from numpy. Device-side checks (shape, strides, same device) need tensors that
claim to live on a CUDA device: `FakeCuda` builds DLPack capsules by hand (ctypes) with a made-up
data pointer. Those tests run only where no GPU is visible, so a check that regressed can never
hand a fake pointer to a real GPU; there, a well-formed call reaches the library and fails with
RuntimeError (no device) instead of the ValueError the test expects.
"""
import ctypes
import pathlib
import re

import pytest

np = pytest.importorskip("numpy")

import moekit  # noqa: E402
from moekit import _C  # noqa: E402

REPO = pathlib.Path(__file__).resolve().parents[2]
NO_GPU = _C.cuda_device_count() == 0
needs_no_gpu = pytest.mark.skipif(not NO_GPU, reason="fake device pointers must never reach a real GPU")


# ---------------------------------------------------------------------------------------------
# Module-level functions
# ---------------------------------------------------------------------------------------------
def test_version_matches_cmake_project_version():
    m = re.search(r"project\(moekit VERSION ([0-9.]+)", (REPO / "CMakeLists.txt").read_text())
    assert m, "CMakeLists.txt has no project(moekit VERSION ...)"
    assert _C.version() == m.group(1)
    assert moekit.__version__ == m.group(1)


@needs_no_gpu
def test_device_queries_without_gpu():
    assert _C.cuda_device_count() == 0
    assert _C.device_supported() is False
    assert _C.device_supported(0) is False


def test_cache_dir_is_a_directory():
    assert pathlib.Path(_C.cache_dir()).is_dir()


def test_sfa_ld_and_group_align():
    assert [_C.sfa_ld(m) for m in (0, 1, 4, 5, 130)] == [0, 4, 4, 8, 132]
    assert _C.group_align == 128
    assert _C.contiguous_rows_upper_bound(1, 2) == 256


# ---------------------------------------------------------------------------------------------
# Layer / Routing configuration (validated by the library, translated to ValueError)
# ---------------------------------------------------------------------------------------------
def test_layer_config_roundtrip():
    layer = _C.Layer(8, 2, 256, 128, gemm1_input="gathered", limit=7.0, deterministic=True)
    assert (layer.num_experts, layer.top_k, layer.hidden, layer.inter) == (8, 2, 256, 128)
    assert layer.local_offset == 0 and layer.local_count == 8  # 0 resolves to all experts
    assert layer.gemm1_input == "gathered" and layer.deterministic and layer.limit == 7.0
    assert layer.routing is None and not layer.weights_prepared
    assert layer.prepared_weight_bytes() > 0
    ep = _C.Layer(8, 2, 256, 128, local_offset=4, local_count=4)
    assert ep.prepared_weight_bytes() < layer.prepared_weight_bytes()


@pytest.mark.parametrize(
    "args, kwargs, message",
    [
        ((4, 5, 256, 128), {}, r"top_k = 5 must be in \[1, num_experts = 4\]"),
        ((8, 2, 100, 128), {}, r"hidden = 100 must be a multiple of 16"),
        ((8, 2, 256, 40), {}, r"inter = 40 must be a multiple of 16"),
        ((8, 2, 256, 128), {"local_offset": 6, "local_count": 4}, r"expert-parallel slice"),
        ((8, 2, 256, 128), {"gemm1_promote_k": 48}, r"gemm1_promote_k = 48"),
        ((8, 2, 256, 128), {"limit": float("nan")}, r"limit = nan must be finite"),
        ((8, 2, 256, 128), {"gemm1_input": "sideways"}, r"gemm1_input must be 'auto'"),
        ((8, 2, 256, 128), {"weight_format": "fp4"}, r"weight_format must be 'fp8' or 'mxfp4'"),
        ((8, 2, 272, 128), {"weight_format": "mxfp4"}, r"MXFP4 weights need hidden \(272\) a multiple of 32"),
        ((8, 2, 256, 96), {"weight_format": "mxfp4"}, r"inter \(96\) a multiple of 64"),
        ((8, 2, 256, 128), {"activation": "gelu"}, r"activation must be 'swiglu' or 'gpt_oss'"),
        ((8, 2, 256, 96), {"activation": "gpt_oss"}, r"gpt-oss activation needs inter \(96\)"),
        ((8, 2, 256, 128), {"activation": "gpt_oss", "activation_alpha": -1.0}, r"activation_alpha"),
    ],
)
def test_layer_rejects_bad_config(args, kwargs, message):
    with pytest.raises(ValueError, match=message):
        _C.Layer(*args, **kwargs)


def test_routing_validation():
    with pytest.raises(ValueError, match=r"method must be"):
        _C.Routing("softmax")
    r = _C.Routing("sigmoid_grouped", renormalize=True, num_groups=4, topk_groups=2, routed_scaling_factor=2.5)
    assert (r.method, r.renormalize, r.num_groups, r.topk_groups, r.routed_scaling_factor) == (
        "sigmoid_grouped", True, 4, 2, 2.5)
    layer = _C.Layer(8, 2, 256, 128, routing=r)
    assert layer.routing is r
    # The library validates the routing against the layer: 8 experts do not split into 3 groups.
    with pytest.raises(ValueError, match=r"routing"):
        _C.Layer(8, 2, 256, 128, routing=_C.Routing("sigmoid_grouped", num_groups=3, topk_groups=1))
    # The softmax methods reject grouped options rather than ignore them.
    with pytest.raises(ValueError, match=r"routing"):
        _C.Layer(8, 2, 256, 128, routing=_C.Routing("softmax_topk", num_groups=2))


def test_workspace_size():
    layer = _C.Layer(8, 2, 256, 128)
    assert layer.workspace_size(0) == 0
    with pytest.raises(ValueError, match=r"num_tokens = -1 must be >= 0"):
        layer.workspace_size(-1)


@needs_no_gpu
def test_library_device_error_is_runtime_error():
    # kUnsupportedDevice → RuntimeError, with moekit's message.
    with pytest.raises(RuntimeError, match=r"moekit"):
        _C.Layer(8, 2, 256, 128).workspace_size(1)


# ---------------------------------------------------------------------------------------------
# Host (numpy) tensors: dtype is checked first (TypeError), then the device (ValueError)
# ---------------------------------------------------------------------------------------------
def u8(*shape):
    return np.zeros(shape, np.uint8)


def f32(*shape):
    return np.zeros(shape, np.float32)


def i32(*shape):
    return np.zeros(shape, np.int32)


def test_host_arrays_are_rejected_naming_the_argument():
    with pytest.raises(ValueError, match=r"^a: expected a tensor on a CUDA device, got one in CPU memory"):
        _C.gemm_fp8_nt(u8(128, 128), f32(1, 128), u8(128, 128), f32(1, 1), u8(128, 128), 0)
    layer = _C.Layer(8, 2, 256, 128)
    with pytest.raises(ValueError, match=r"^w1: .*CUDA"):
        layer.prepare_weights(u8(8, 256, 256), f32(8, 2, 2), u8(8, 256, 128), f32(8, 2, 1), u8(16), 0)
    with pytest.raises(ValueError, match=r"^logits: .*CUDA"):
        _C.route(_C.Routing("softmax_topk"), f32(4, 8), i32(4, 2), f32(4, 2), 0)
    with pytest.raises(ValueError, match=r"^counts: .*CUDA"):
        _C.contiguous_offsets(i32(8), i32(9), 0)
    with pytest.raises(ValueError, match=r"^workspace: .*CUDA"):
        layer.prepare_kernels(1, u8(1024), 0)


def test_wrong_dtype_is_type_error():
    with pytest.raises(TypeError, match=r"^a: expected dtype float8_e4m3fn or uint8, got float32"):
        _C.gemm_fp8_nt(f32(128, 128), f32(1, 128), u8(128, 128), f32(1, 1), u8(128, 128), 0)
    layer = _C.Layer(8, 2, 256, 128)
    with pytest.raises(TypeError, match=r"^x: expected dtype bfloat16, got float32"):
        layer.forward(f32(4, 256), f32(4, 256), u8(1024), 0)
    with pytest.raises(TypeError, match=r"^logits: expected dtype float32 or bfloat16, got int64"):
        _C.route(_C.Routing("softmax_topk"), np.zeros((4, 8), np.int64), i32(4, 2), f32(4, 2), 0)
    with pytest.raises(TypeError, match=r"^correction_bias: expected dtype float32, got float64"):
        _C.Routing("sigmoid_grouped", correction_bias=np.zeros(8))
    with pytest.raises(TypeError, match=r"^w1: expected dtype float8_e4m3fn or uint8, got int8"):
        layer.prepare_weights(np.zeros((8, 256, 256), np.int8), f32(8, 2, 2), u8(8, 256, 128), f32(8, 2, 1), u8(16))


def test_non_tensors_are_type_errors():
    with pytest.raises(TypeError, match=r"^a: expected a DLPack tensor .*got str"):
        _C.gemm_fp8_nt("a", f32(1, 128), u8(128, 128), f32(1, 1), u8(128, 128), 0)
    with pytest.raises(TypeError, match=r"^x: expected a tensor, got None"):
        _C.quantize_act_1x128(None, u8(128, 128), f32(1, 128))
    # The stream is an integer (cudaStream_t); nanobind rejects anything else.
    with pytest.raises(TypeError):
        _C.contiguous_offsets(i32(8), i32(9), "stream")


# ---------------------------------------------------------------------------------------------
# Hand-made DLPack capsules that claim a CUDA device (the data pointer is made up: 256-byte
# aligned and non-null so the library's own pointer checks pass; nothing dereferences it)
# ---------------------------------------------------------------------------------------------
class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", _DLDevice), ("ndim", ctypes.c_int32),
                ("dtype", _DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


class _DLManagedTensor(ctypes.Structure):
    pass


_DELETER = ctypes.CFUNCTYPE(None, ctypes.POINTER(_DLManagedTensor))
_DLManagedTensor._fields_ = [("dl_tensor", _DLTensor), ("manager_ctx", ctypes.c_void_p), ("deleter", _DELETER)]
_noop_deleter = _DELETER(lambda p: None)
_keep = []  # the structs live for the test session: a capsule may be released after the test
_capsule_new = ctypes.pythonapi.PyCapsule_New
_capsule_new.restype = ctypes.py_object
_capsule_new.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
_DTYPES = {"uint8": (1, 8), "float8_e4m3fn": (10, 8), "bfloat16": (4, 16), "float32": (2, 32), "int32": (0, 32)}


class FakeCuda:
    """A DLPack producer for a tensor on CUDA device `device` with the given shape and strides."""

    def __init__(self, dtype, shape, strides=None, device=0):
        if strides is None:
            strides, s = [], 1
            for n in reversed(shape):
                strides.insert(0, s)
                s *= n
        self.dtype, self.shape, self.strides, self.device = dtype, tuple(shape), tuple(strides), device

    def __dlpack_device__(self):
        return (2, self.device)

    def __dlpack__(self, stream=None, **kwargs):
        # A CUDA consumer must ask for no synchronization (stream=-1), see tensor.cpp.
        assert stream == -1, f"expected stream=-1, got {stream!r}"
        nd = len(self.shape)
        shape = (ctypes.c_int64 * max(nd, 1))(*self.shape)
        strides = (ctypes.c_int64 * max(nd, 1))(*self.strides)
        mt = _DLManagedTensor()
        mt.dl_tensor.data = 1 << 40
        mt.dl_tensor.device = _DLDevice(2, self.device)
        mt.dl_tensor.ndim = nd
        mt.dl_tensor.dtype = _DLDataType(*_DTYPES[self.dtype], 1)
        mt.dl_tensor.shape = shape
        mt.dl_tensor.strides = strides
        mt.deleter = _noop_deleter
        _keep.append((mt, shape, strides))
        return _capsule_new(ctypes.addressof(mt), b"dltensor", None)


def cu(dtype, *shape, strides=None, device=0):
    return FakeCuda(dtype, shape, strides, device)


def gemm_args(m=256, n=128, k=256):
    """Well-formed gemm_fp8_nt arguments (fake CUDA tensors)."""
    return dict(a=cu("float8_e4m3fn", m, k), sa=cu("float32", (k + 127) // 128, _C.sfa_ld(m)),
                b=cu("uint8", n, k), sb=cu("float32", (n + 127) // 128, (k + 127) // 128),
                d=cu("bfloat16", m, n))


@needs_no_gpu
def test_well_formed_fake_call_reaches_the_library():
    # Every check passes, so the call gets as far as the device: RuntimeError without a GPU. This
    # is what the ValueError tests below would see if their check were missing.
    with pytest.raises(RuntimeError):
        _C.gemm_fp8_nt(**gemm_args(), stream=0)


@needs_no_gpu
@pytest.mark.parametrize(
    "arg, value, message",
    [
        ("b", cu("uint8", 128, 384), r"^b: expected shape \[128, 256\], got \[128, 384\]"),
        ("a", cu("uint8", 256, 256, 1), r"^a: expected 2 dimensions, got 3"),
        ("a", cu("uint8", 256, 256, strides=(1, 256)), r"^a: expected its last dimension contiguous"),
        ("d", cu("bfloat16", 256, 128, strides=(256, 2)), r"^d: expected its last dimension contiguous"),
        ("sb", cu("float32", 2, 2), r"^sb: expected shape \[1, 2\], got \[2, 2\]"),
        ("sb", cu("float32", 1, 2, strides=(7, 1)), None),  # extent-1 dims: strides ignored, accepted
        ("sa", cu("float32", 256, 2), r"^sa: expected FP32 scales in moekit's physical layout"),
        ("sa", cu("float32", 256, 2, strides=(1, 256)), None),  # the [M, K/128] view of the storage
        ("sa", cu("float32", 2, 257), r"^sa: expected FP32 scales"),
        ("d", cu("bfloat16", 256, 128, device=1), r"^d: is on CUDA device 1 but a is on CUDA device 0"),
    ],
)
def test_gemm_checks(arg, value, message):
    args = gemm_args()
    args[arg] = value
    if message is None:
        with pytest.raises(RuntimeError):  # accepted: reaches the library, which finds no GPU
            _C.gemm_fp8_nt(**args, stream=0)
    else:
        with pytest.raises(ValueError, match=message):
            _C.gemm_fp8_nt(**args, stream=0)


@needs_no_gpu
def test_grouped_checks():
    e, n, k, rows = 4, 128, 256, 512
    ok = dict(a=cu("uint8", rows, k), sa=cu("float32", 2, rows), b=cu("uint8", e, n, k), sb=cu("float32", e, 1, 2),
              d=cu("bfloat16", rows, n), offsets=cu("int32", e + 1), counts=cu("int32", e))
    with pytest.raises(RuntimeError):
        _C.grouped_gemm_fp8_contiguous(**ok)
    with pytest.raises(ValueError, match=r"^offsets: expected shape \[5\], got \[4\]"):
        _C.grouped_gemm_fp8_contiguous(**{**ok, "offsets": cu("int32", e)})
    with pytest.raises(ValueError, match=r"^b: expected groups packed back to back"):
        _C.grouped_gemm_fp8_contiguous(**{**ok, "b": cu("uint8", e, n, k, strides=(2 * n * k, k, 1))})
    max_m = 64
    masked = dict(a=cu("uint8", e, max_m, k), sa=cu("float32", e, max_m, 2, strides=(max_m, 1, e * max_m)),
                  b=cu("uint8", e, n, k), sb=cu("float32", e, 1, 2), d=cu("bfloat16", e, max_m, n),
                  counts=cu("int32", e))
    with pytest.raises(RuntimeError):
        _C.grouped_gemm_fp8_masked(**masked)
    with pytest.raises(ValueError, match=r"^b: has 3 groups but a has 4"):
        _C.grouped_gemm_fp8_masked(**{**masked, "b": cu("uint8", 3, n, k), "sb": cu("float32", 3, 1, 2)})
    with pytest.raises(ValueError, match=r"^sa: expected FP32 scales"):
        _C.grouped_gemm_fp8_masked(**{**masked, "sa": cu("float32", e, max_m, 2)})


@needs_no_gpu
def test_layer_tensor_checks():
    e, k, h, i = 8, 2, 256, 128
    layer = _C.Layer(e, k, h, i)
    w = dict(w1=cu("float8_e4m3fn", e, 2 * i, h), w1_scale=cu("float32", e, 2, 2), w2=cu("uint8", e, h, i),
             w2_scale=cu("float32", e, 2, 1), prepared=cu("uint8", layer.prepared_weight_bytes()))
    with pytest.raises(RuntimeError):
        layer.prepare_weights(**w)
    with pytest.raises(ValueError, match=r"^w1: expected shape \[8, 256, 256\], got \[8, 128, 256\]"):
        layer.prepare_weights(**{**w, "w1": cu("uint8", e, i, h)})
    with pytest.raises(ValueError, match=r"^w2: expected a contiguous \(row-major\) tensor"):
        layer.prepare_weights(**{**w, "w2": cu("uint8", e, h, i, strides=(h * i, 1, h))})
    with pytest.raises(ValueError, match=r"^w2_scale: expected shape \[8, 2, 1\]"):
        layer.prepare_weights(**{**w, "w2_scale": cu("float32", e, 1, 2)})

    t = 16
    fwd = dict(x=cu("bfloat16", t, h), y=cu("bfloat16", t, h), workspace=cu("uint8", 1 << 20),
               topk_ids=cu("int32", t, k), topk_weights=cu("float32", t, k))
    with pytest.raises(ValueError, match=r"^y: expected shape \[16, 256\], got \[16, 128\]"):
        layer.forward(**{**fwd, "y": cu("bfloat16", t, 128)})
    with pytest.raises(ValueError, match=r"^topk_ids: expected shape \[16, 2\], got \[16, 3\]"):
        layer.forward(**{**fwd, "topk_ids": cu("int32", t, 3)})
    with pytest.raises(ValueError, match=r"^invalid_count: expected shape \[1\]"):
        layer.forward(**fwd, invalid_count=cu("int32", 2))
    with pytest.raises(ValueError, match=r"^x: expected a contiguous"):
        layer.forward(**{**fwd, "x": cu("bfloat16", t, h, strides=(2 * h, 1))})
    # Routing combinations are the library's check (ValueError with its message).
    with pytest.raises(ValueError, match=r"logits given but the layer has no routing"):
        layer.forward(fwd["x"], fwd["y"], fwd["workspace"], logits=cu("float32", t, e))


@needs_no_gpu
def test_layer_mxfp4_tensor_checks():
    e, k, h, i = 8, 2, 256, 128
    layer = _C.Layer(e, k, h, i, weight_format="mxfp4")
    assert layer.weight_format == "mxfp4" and _C.Layer(e, k, h, i).weight_format == "fp8"
    assert layer.prepared_weight_bytes() >= e * 3 * h * i * 17 // 32  # both matrices, 4.25 bits a weight
    w = dict(w1=cu("uint8", e, 2 * i, h // 2), w1_scale=cu("uint8", e, 2 * i, h // 32), w2=cu("uint8", e, h, i // 2),
             w2_scale=cu("uint8", e, h, i // 32), prepared=cu("uint8", layer.prepared_weight_bytes()))
    with pytest.raises(RuntimeError):
        layer.prepare_weights_mxfp4(**w, gate_up_interleaved=True)
    with pytest.raises(ValueError, match=r"^w1: expected shape \[8, 256, 128\], got \[8, 256, 256\]"):
        layer.prepare_weights_mxfp4(**{**w, "w1": cu("uint8", e, 2 * i, h)})
    with pytest.raises(ValueError, match=r"^w2_scale: expected shape \[8, 256, 4\]"):
        layer.prepare_weights_mxfp4(**{**w, "w2_scale": cu("uint8", e, h, i // 16)})
    with pytest.raises(TypeError, match=r"w1_scale"):
        layer.prepare_weights_mxfp4(**{**w, "w1_scale": cu("float32", e, 2 * i, h // 32)})
    with pytest.raises(ValueError, match=r"weight_format='fp8'"):
        _C.Layer(e, k, h, i).prepare_weights_mxfp4(**w)
    # gpt-oss's biases: fp32 or bf16 [E_local, 2I] / [E_local, H], one dtype.
    with pytest.raises(RuntimeError):
        layer.prepare_weights_mxfp4(**w, b1=cu("bfloat16", e, 2 * i), b2=cu("bfloat16", e, h))
    with pytest.raises(ValueError, match=r"^b1: expected shape \[8, 256\], got \[8, 128\]"):
        layer.prepare_weights_mxfp4(**w, b1=cu("float32", e, i))
    with pytest.raises(TypeError, match=r"b2: expected the dtype of b1"):
        layer.prepare_weights_mxfp4(**w, b1=cu("float32", e, 2 * i), b2=cu("bfloat16", e, h))
    assert _C.Layer(e, k, h, i, activation="gpt_oss").activation == "gpt_oss"


@needs_no_gpu
def test_route_checks():
    bias = cu("float32", 8)
    r = _C.Routing("sigmoid_grouped", num_groups=4, topk_groups=2, correction_bias=bias)
    assert r.correction_bias is bias
    with pytest.raises(ValueError, match=r"^route: routing.correction_bias has 8 entries, expected num_experts = 16"):
        _C.route(r, cu("float32", 4, 16), cu("int32", 4, 2), cu("float32", 4, 2))
    with pytest.raises(ValueError, match=r"^topk_weights: expected shape \[4, 2\]"):
        _C.route(r, cu("float32", 4, 8), cu("int32", 4, 2), cu("float32", 4, 3))
    with pytest.raises(ValueError, match=r"routing.correction_bias is on CUDA device 0"):
        _C.route(r, cu("float32", 4, 8, device=1), cu("int32", 4, 2, device=1), cu("float32", 4, 2, device=1))
    with pytest.raises(ValueError, match=r"^Layer: routing.correction_bias has 8 entries"):
        _C.Layer(16, 2, 256, 128, routing=r)


def test_bench_fill_checks():
    with pytest.raises(ValueError, match=r"^t: .*CUDA"):
        _C.bench_fill_uniform(f32(16), -1.0, 1.0, 3)
    with pytest.raises(TypeError, match=r"^t: expected dtype bfloat16, got float32"):
        _C.bench_fill_normal_bf16(f32(16), 1.0, 3)
    with pytest.raises(TypeError, match=r"^q: expected dtype float8_e4m3fn or uint8"):
        _C.bench_fill_checkpoint_weights(f32(2, 128, 128), f32(2, 1, 1), 0.02, 3)

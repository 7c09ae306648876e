"""DeepSeek-V4 attention's Python API without a GPU: moekit._C's tensor checks (TypeError for a
wrong dtype, ValueError naming the argument for anything else, before the library is called), the
library's own argument checks surfacing as ValueError, the torch API's checks on CPU tensors, the
custom ops' fakes, and a fullgraph Dynamo trace on fake CUDA tensors.

The device-side checks use test_cpu_extension's hand-made DLPack capsules (FakeCuda: a made-up
data pointer on "CUDA device 0"); those tests run only where no GPU is visible, so a check that
regressed never hands a fake pointer to a real GPU. A well-formed fake call reaches the library and
fails there with RuntimeError (no device): that is what the ValueError cases would see if their
check were missing.
"""
import math

import pytest

np = pytest.importorskip("numpy")

import moekit  # noqa: E402
from moekit import _C  # noqa: E402
from test_cpu_extension import cu, needs_no_gpu  # noqa: E402

try:
    import torch
except ImportError:  # the _C tests above need no torch
    torch = None
needs_torch = pytest.mark.skipif(torch is None, reason="the torch API needs torch")

T, H, D, N = 3, 64, 512, 100


def mixed_cache(n=N):
    return dict(nope=cu("float8_e4m3fn", n, 448), scales=cu("float32", n, 7), rope=cu("bfloat16", n, 64))


def attn_args(**changes):
    """Well-formed _C.sparse_attention arguments (mixed cache, both sources, causal, sink,
    normalized output), with `changes` applied (a value of None removes the argument)."""
    args = dict(q=cu("bfloat16", T, H, D), **mixed_cache(), topk_indices=cu("int32", T, 32),
                topk_lens=cu("int32", T), window_indices=cu("int32", T, 16), window_lens=cu("int32", T),
                window_positions=cu("int32", T, 16), query_positions=cu("int32", T), sink=cu("float32", H),
                o=cu("bfloat16", T, H, D), lse=cu("float32", T, H))
    args.update(changes)
    return {k: v for k, v in args.items() if v is not None}


# ---------------------------------------------------------------------------------------------
# moekit._C: host arrays and dtypes (no fake capsules needed)
# ---------------------------------------------------------------------------------------------
def test_c_functions_exist():
    for name in ("sparse_attention", "sparse_attention_workspace_bytes", "attention_merge", "mixed_kv_cache_write",
                 "rope_"):
        assert callable(getattr(_C, name)), name


def test_host_arrays_and_dtypes():
    f32 = lambda *s: np.zeros(s, np.float32)  # noqa: E731
    i32 = lambda *s: np.zeros(s, np.int32)  # noqa: E731
    with pytest.raises(TypeError, match=r"^q: expected dtype bfloat16, got float32"):
        _C.sparse_attention(f32(T, H, D), kv=f32(N, D), o=f32(T, H, D))
    with pytest.raises(TypeError, match=r"^q: expected a tensor, got None"):
        _C.sparse_attention(None)
    with pytest.raises(ValueError, match=r"^o_partials: expected a tensor on a CUDA device, got one in CPU memory"):
        _C.attention_merge(f32(2, T, H, D), f32(2, T, H), None, None, f32(T, H, D))
    with pytest.raises(TypeError, match=r"^o_partials: expected dtype float32, got int32"):
        _C.attention_merge(i32(2, T, H, D), f32(2, T, H), None, None, f32(T, H, D))
    with pytest.raises(TypeError, match=r"^k: expected dtype bfloat16, got float32"):
        _C.mixed_kv_cache_write(f32(T, 512), i32(T), None, None, None)
    with pytest.raises(TypeError, match=r"^x: expected dtype bfloat16, got float32"):
        _C.rope_(f32(T, H, 128), i32(T), f32(4, 32), f32(4, 32))
    with pytest.raises(TypeError):
        _C.rope_(f32(T, H, 128), i32(T), f32(4, 32), f32(4, 32), False, "stream")


# ---------------------------------------------------------------------------------------------
# moekit._C on fake CUDA tensors: shapes, strides, combinations, devices
# ---------------------------------------------------------------------------------------------
@needs_no_gpu
def test_well_formed_attention_calls_reach_the_library():
    with pytest.raises(RuntimeError, match=r"moekit"):
        _C.sparse_attention(**attn_args())
    with pytest.raises(RuntimeError):  # bf16 cache, per-source partials, workspace, requests
        _C.sparse_attention(**attn_args(
            nope=None, scales=None, rope=None, kv=cu("bfloat16", N, D), o=None, lse=None,
            o_partial=cu("float32", 2, T, H, D), lse_partial=cu("float32", 2, T, H),
            window_indices=cu("int32", 2, 16), window_lens=cu("int32", 2), window_positions=cu("int32", 2, 16),
            token_request=cu("int32", T), workspace=cu("uint8", 4096)))
    with pytest.raises(RuntimeError):  # the smallest call: q, a cache, o
        _C.sparse_attention(cu("bfloat16", T, H, 64), kv=cu("bfloat16", N, 64), o=cu("bfloat16", T, H, 64))
    with pytest.raises(RuntimeError):
        _C.sparse_attention_workspace_bytes(**{k: v for k, v in attn_args(o=None, lse=None).items()}, partial=True)


@needs_no_gpu
@pytest.mark.parametrize(
    "changes, error, message",
    [
        ({"q": cu("bfloat16", T, H, D, strides=(2 * H * D, D, 1))}, ValueError, r"^q: expected a contiguous"),
        ({"q": cu("bfloat16", T * H, D)}, ValueError, r"^q: expected 3 dimensions, got 2"),
        ({"kv": cu("bfloat16", N, D)}, ValueError, r"^kv: give either kv .* not both"),
        ({"nope": None, "scales": None, "rope": None}, ValueError, r"^kv: a cache is required"),
        ({"nope": None, "scales": None, "rope": None, "kv": cu("bfloat16", N, 256)}, ValueError,
         r"^kv: expected shape \[\*, 512\], got \[100, 256\]"),
        ({"scales": None}, ValueError, r"^scales: the mixed FP8 cache needs nope, scales and rope together"),
        ({"nope": cu("uint8", N, 512)}, ValueError, r"^nope: expected shape \[\*, 448\]"),
        ({"scales": cu("float32", N + 1, 7)}, ValueError, r"^scales: expected shape \[100, 7\], got \[101, 7\]"),
        ({"rope": cu("float32", N, 64)}, TypeError, r"^rope: expected dtype bfloat16, got float32"),
        ({"nope": cu("float32", N, 448)}, TypeError, r"^nope: expected dtype float8_e4m3fn or uint8"),
        ({"q": cu("bfloat16", T, H, 128), "o": cu("bfloat16", T, H, 128)}, ValueError,
         r"^q: expected shape \[T, H, 512\] with the mixed FP8 cache"),
        ({"topk_indices": cu("int32", T + 1, 32)}, ValueError, r"^topk_indices: expected shape \[3, \*\]"),
        ({"topk_indices": cu("int32", T, 32, strides=(64, 1))}, ValueError, r"^topk_indices: expected a contiguous"),
        ({"topk_indices": None}, ValueError, r"^topk_lens: given without topk_indices"),
        ({"topk_lens": cu("float32", T)}, TypeError, r"^topk_lens: expected dtype int32, got float32"),
        ({"window_indices": cu("int32", 2, 16)}, ValueError,
         r"^window_indices: expected shape \[T, \*\] = \[3, \*\] without token_request"),
        ({"window_lens": cu("int32", T + 1)}, ValueError, r"^window_lens: expected shape \[3\]"),
        ({"window_positions": cu("int32", T, 8)}, ValueError, r"^window_positions: expected shape \[3, 16\]"),
        ({"window_indices": None, "window_positions": None}, ValueError, r"^window_lens: given without window_indices"),
        ({"window_indices": None, "window_lens": None}, ValueError,
         r"^window_positions: given without window_indices"),
        ({"token_request": cu("int32", T + 2)}, ValueError, r"^token_request: expected shape \[3\]"),
        ({"query_positions": None}, ValueError, r"^query_positions: required with window_positions"),
        ({"sink": cu("float32", H + 1)}, ValueError, r"^sink: expected shape \[64\], got \[65\]"),
        ({"o": cu("bfloat16", T, H, 256)}, ValueError, r"^o: expected shape \[3, 64, 512\]"),
        ({"o": cu("float32", T, H, D)}, TypeError, r"^o: expected dtype bfloat16, got float32"),
        ({"lse": cu("float32", T, H + 1)}, ValueError, r"^lse: expected shape \[3, 64\]"),
        ({"o_partial": cu("float32", 2, T, H, D)}, ValueError, r"^o: give o .* not both"),
        ({"o": None, "lse": None}, ValueError, r"^o: an output is required"),
        ({"o": None}, ValueError, r"^lse: given without o"),
        ({"o": None, "o_partial": cu("float32", 2, T, H, D), "lse_partial": cu("float32", 2, T, H)}, ValueError,
         r"^lse: belongs to the normalized output"),
        ({"o": None, "lse": None, "o_partial": cu("float32", 2, T, H, D)}, ValueError,
         r"^lse_partial: required with o_partial"),
        ({"o": None, "lse": None, "lse_partial": cu("float32", 2, T, H)}, ValueError,
         r"^o_partial: required with lse_partial"),
        ({"o": None, "lse": None, "o_partial": cu("float32", 1, T, H, D), "lse_partial": cu("float32", 2, T, H)},
         ValueError, r"^o_partial: expected shape \[2, 3, 64, 512\]"),
        ({"workspace": cu("float32", 1024)}, TypeError, r"^workspace: expected dtype uint8, got float32"),
        ({"workspace": cu("uint8", 32, 32)}, ValueError, r"^workspace: expected 1 dimension, got 2"),
        ({"o": cu("bfloat16", T, H, D, device=1)}, ValueError, r"^o: is on CUDA device 1 but q is on CUDA device 0"),
        # The library's own checks, before it looks for a device.
        ({"window_indices": cu("int32", T, 200), "window_positions": cu("int32", T, 200)}, ValueError,
         r"window = 200 in \[0, 128\]"),
        ({"softmax_scale": -1.0}, ValueError, r"softmax_scale = -1 must be in \(0, 1e\+?0?6\]"),
        ({"softmax_scale": float("nan")}, ValueError, r"softmax_scale = nan must be in"),
        ({"softmax_scale": 2e6}, ValueError, r"softmax_scale = 2e\+?0?6 must be in"),
    ],
)
def test_sparse_attention_checks(changes, error, message):
    with pytest.raises(error, match=message):
        _C.sparse_attention(**attn_args(**changes))


@needs_no_gpu
def test_sparse_attention_library_checks():
    bf16 = dict(kv=cu("bfloat16", N, 96))
    with pytest.raises(ValueError, match=r"dim = 96 \(supported: 64, 128, 256, 512\)"):
        _C.sparse_attention(cu("bfloat16", T, H, 96), **bf16, o=cu("bfloat16", T, H, 96))
    # No requests at all: every token's window is empty, which is valid (the call then needs a GPU).
    with pytest.raises(RuntimeError, match=r"no usable CUDA device"):
        _C.sparse_attention(**attn_args(window_indices=cu("int32", 0, 16), window_lens=cu("int32", 0),
                                        window_positions=cu("int32", 0, 16), token_request=cu("int32", T)))
    with pytest.raises(ValueError, match=r"softmax_scale = 2e\+?0?6 must be in"):
        _C.sparse_attention(**attn_args(softmax_scale=2e6))


@needs_no_gpu
def test_workspace_bytes_query():
    args = attn_args(o=None, lse=None)
    # Nothing to do for T = 0: no device needed, no workspace.
    empty = dict(args, q=cu("bfloat16", 0, H, D), topk_indices=cu("int32", 0, 32), topk_lens=cu("int32", 0),
                 window_indices=cu("int32", 0, 16), window_lens=cu("int32", 0), window_positions=cu("int32", 0, 16),
                 query_positions=cu("int32", 0))
    assert _C.sparse_attention_workspace_bytes(**empty) == 0
    assert _C.sparse_attention_workspace_bytes(**empty, partial=True) == 0
    with pytest.raises(ValueError, match=r"^topk_indices: expected shape \[3, \*\]"):
        _C.sparse_attention_workspace_bytes(**dict(args, topk_indices=cu("int32", 2, 32)))
    with pytest.raises(ValueError, match=r"window = 129"):
        _C.sparse_attention_workspace_bytes(**dict(args, window_indices=cu("int32", T, 129),
                                                   window_positions=cu("int32", T, 129)))


@needs_no_gpu
def test_mixed_kv_cache_write_checks():
    ok = dict(k=cu("bfloat16", T, 512), slots=cu("int32", T), **mixed_cache())
    with pytest.raises(RuntimeError):
        _C.mixed_kv_cache_write(**ok)
    with pytest.raises(RuntimeError):  # rows of a wider tensor: a row stride is fine
        _C.mixed_kv_cache_write(**dict(ok, k=cu("bfloat16", T, 512, strides=(1024, 1))))
    cases = [
        (dict(k=cu("bfloat16", T, 256)), ValueError, r"^k: expected shape \[3, 512\]"),
        (dict(k=cu("bfloat16", T, 512, strides=(1, T))), ValueError, r"^k: expected its last dimension contiguous"),
        (dict(slots=cu("int32", T + 1)), ValueError, r"^slots: expected shape \[3\]"),
        (dict(slots=cu("float32", T)), TypeError, r"^slots: expected dtype int32"),
        (dict(rope=cu("bfloat16", N, 32)), ValueError, r"^rope: expected shape \[100, 64\]"),
        (dict(scales=None), ValueError, r"^scales: the mixed FP8 cache needs"),
        (dict(rope=cu("bfloat16", N, 64, device=1)), ValueError, r"^rope: is on CUDA device 1"),
        # The library's check: the row stride must be a multiple of 8 elements.
        (dict(k=cu("bfloat16", T, 512, strides=(516, 1))), ValueError, r"ldk = 516 must be >= 512 and a multiple"),
    ]
    for change, error, message in cases:
        with pytest.raises(error, match=message):
            _C.mixed_kv_cache_write(**dict(ok, **change))


@needs_no_gpu
def test_rope_checks():
    ok = dict(x=cu("bfloat16", T, H, 128), positions=cu("int32", T), cos=cu("float32", 50, 32),
              sin=cu("float32", 50, 32))
    with pytest.raises(RuntimeError):
        _C.rope_(**ok, inverse=True)
    cases = [
        (dict(x=cu("bfloat16", T, 128)), ValueError, r"^x: expected 3 dimensions, got 2"),
        (dict(x=cu("bfloat16", T, H, 128, strides=(256 * H, 256, 1))), ValueError, r"^x: expected a contiguous"),
        (dict(positions=cu("int32", T + 1)), ValueError, r"^positions: expected shape \[3\]"),
        (dict(cos=cu("float32", 50, 64)), ValueError, r"^cos: expected shape \[\*, 32\]"),
        (dict(sin=cu("float32", 40, 32)), ValueError, r"^sin: expected shape \[50, 32\], got \[40, 32\]"),
        (dict(sin=cu("bfloat16", 50, 32)), TypeError, r"^sin: expected dtype float32"),
        (dict(x=cu("bfloat16", T, H, 60)), ValueError, r"dim = 60"),  # the library's check
    ]
    for change, error, message in cases:
        with pytest.raises(error, match=message):
            _C.rope_(**dict(ok, **change))


@needs_no_gpu
def test_attention_merge_checks():
    ok = dict(o_partials=cu("float32", 2, T, H, D), lse_partials=cu("float32", 2, T, H),
              weight_logits=cu("float32", 2, H), sink=cu("float32", H), o=cu("bfloat16", T, H, D),
              lse=cu("float32", T, H))
    with pytest.raises(RuntimeError):
        _C.attention_merge(**ok)
    with pytest.raises(RuntimeError):
        _C.attention_merge(**dict(ok, weight_logits=None, sink=None, lse=None))
    cases = [
        (dict(lse_partials=cu("float32", 3, T, H)), ValueError, r"^lse_partials: expected shape \[2, 3, 64\]"),
        (dict(weight_logits=cu("float32", 2, H + 1)), ValueError, r"^weight_logits: expected shape \[2, 64\]"),
        (dict(sink=cu("float32", 1, H)), ValueError, r"^sink: expected 1 dimension, got 2"),
        (dict(o=cu("float32", T, H, D)), TypeError, r"^o: expected dtype bfloat16"),
        (dict(o=cu("bfloat16", T, H, 256)), ValueError, r"^o: expected shape \[3, 64, 512\]"),
        (dict(lse=cu("float32", T, 1)), ValueError, r"^lse: expected shape \[3, 64\]"),
        (dict(o_partials=cu("float32", 2, T, H, D, strides=(T * H * 1024, H * 1024, 1024, 1))), ValueError,
         r"^o_partials: expected a contiguous"),
        (dict(o_partials=cu("float32", 2, T, H, 6), o=cu("bfloat16", T, H, 6)), ValueError,
         r"dim = 6 must be a positive multiple of 4"),  # the library's check
    ]
    for change, error, message in cases:
        with pytest.raises(error, match=message):
            _C.attention_merge(**dict(ok, **change))


# ---------------------------------------------------------------------------------------------
# The torch API on CPU tensors (everything right but the device: "CUDA")
# ---------------------------------------------------------------------------------------------
BF = torch.bfloat16 if torch is not None else None


def _i32(*shape):
    return torch.zeros(shape, dtype=torch.int32)


@needs_torch
def test_public_api_is_exported():
    for name in ("sparse_attention", "attention_merge", "mixed_kv_cache_write", "rope_", "mixed_kv_cache",
                 "MixedKvCache"):
        assert name in moekit.__all__ and hasattr(moekit, name), name
    for name in ("sparse_attention", "attention_merge", "mixed_kv_cache_write", "rope_inplace"):
        assert hasattr(torch.ops.moekit, name), name
    for f in (moekit.sparse_attention, moekit.attention_merge, moekit.mixed_kv_cache_write, moekit.rope_,
              moekit.mixed_kv_cache, moekit.MixedKvCache.from_rows, moekit.MixedKvCache):
        assert f.__doc__ and len(f.__doc__) > 100, f.__name__


@needs_torch
def test_mixed_kv_cache_allocation_and_dequantize():
    c = moekit.mixed_kv_cache(5, "cpu")
    assert isinstance(c, moekit.MixedKvCache) and isinstance(c, tuple) and c.num_entries == 5
    assert (c.nope.shape, c.nope.dtype) == ((5, 448), torch.float8_e4m3fn)
    assert (c.scales.shape, c.scales.dtype) == ((5, 7), torch.float32)
    assert (c.rope.shape, c.rope.dtype) == ((5, 64), BF)
    assert torch.equal(c.dequantize(), torch.zeros(5, 512))
    c.nope.view(torch.uint8)[1, 64:128] = 0x38  # E4M3 1.0
    c.scales[1, 1] = 0.25
    c.rope[1] = 3.0
    deq = c.dequantize(torch.float64)
    assert deq.dtype == torch.float64
    assert torch.all(deq[1, 64:128] == 0.25) and torch.all(deq[1, 448:] == 3.0)
    assert deq[1, :64].abs().sum() == 0 and deq[1, 128:448].abs().sum() == 0 and deq[0].abs().sum() == 0
    assert moekit.mixed_kv_cache(0, "cpu").num_entries == 0
    with pytest.raises(ValueError, match="num_entries"):
        moekit.mixed_kv_cache(-1, "cpu")


def _attn_inputs(t=3, h=64, d=512, mixed=True):
    q = torch.zeros((t, h, d), dtype=BF)
    kv = moekit.mixed_kv_cache(N, "cpu") if mixed else torch.zeros((N, d), dtype=BF)
    return q, kv, dict(topk_indices=_i32(t, 32), topk_lens=_i32(t), window_indices=_i32(t, 16),
                       window_lens=_i32(t), window_positions=_i32(t, 16), query_positions=_i32(t),
                       sink=torch.zeros(h))


@needs_torch
def test_sparse_attention_validation_on_cpu():
    q, kv, kw = _attn_inputs()
    with pytest.raises(ValueError, match="CUDA"):
        moekit.sparse_attention(q, kv, **kw)  # everything right but the device
    with pytest.raises(ValueError, match="CUDA"):
        moekit.sparse_attention(q, tuple(kv), **kw, return_partials=True)
    with pytest.raises(ValueError, match="CUDA"):
        moekit.sparse_attention(q[:, :, :64].contiguous(), torch.zeros((N, 64), dtype=BF),
                                topk_indices=kw["topk_indices"])
    cases = [
        ((q.float(), kv), {}, TypeError, r"q must have dtype torch.bfloat16"),
        ((q[0], kv), {}, ValueError, r"q must be 3-D"),
        ((q.transpose(0, 1), kv), {}, ValueError, r"q must be contiguous"),
        ((torch.zeros((3, 64, 96), dtype=BF), kv), {}, ValueError, r"head dim D = 96 is not supported"),
        ((torch.zeros((3, 64, 128), dtype=BF), kv), {}, ValueError, r"mixed FP8 cache has head dim 512"),
        ((q, torch.zeros((N, 256), dtype=BF)), {}, ValueError, r"kv must have shape \[N, D\] with D = 512"),
        ((q, torch.zeros((N, 512))), {}, TypeError, r"kv must have dtype torch.bfloat16"),
        ((q, 3), {}, TypeError, r"kv must be a bf16 tensor \[N, D\] or a MixedKvCache \(nope, scales, rope\), got int"),
        ((q, kv[:2]), {}, TypeError, r"kv must be a bf16 tensor"),
        ((q, (kv.nope, kv.scales[:5], kv.rope)), {}, ValueError, r"scales must have shape \[N, 7\] = \[100, 7\]"),
        ((q, (kv.nope.float(), kv.scales, kv.rope)), {}, TypeError, r"nope must have dtype"),
        ((q, kv), dict(topk_indices=_i32(4, 32)), ValueError, r"topk_indices must have shape \[T, topk\]"),
        ((q, kv), dict(topk_indices=torch.zeros((3, 32), dtype=torch.int64)), TypeError,
         r"topk_indices must have dtype"),
        ((q, kv), dict(topk_indices=None), ValueError, r"topk_lens given without topk_indices"),
        ((q, kv), dict(window_indices=None, window_positions=None), ValueError,
         r"window_lens given without window_indices"),
        ((q, kv), dict(window_indices=_i32(2, 16)), ValueError, r"window_indices must have shape \[T, W\] with T = 3"),
        ((q, kv), dict(window_indices=_i32(3, 129), window_positions=_i32(3, 129)), ValueError,
         r"W = 129 columns; a window holds at most 128"),
        ((q, kv), dict(window_lens=_i32(2)), ValueError, r"window_lens must have shape \[R\] = \[3\]"),
        ((q, kv), dict(window_positions=_i32(3, 8)), ValueError, r"window_positions must have shape \[R, W\]"),
        ((q, kv), dict(query_positions=None), ValueError,
         r"window_positions \(the causal mask\) needs query_positions"),
        ((q, kv), dict(token_request=_i32(5)), ValueError, r"token_request must have shape \[T\] = \[3\]"),
        ((q, kv), dict(sink=torch.zeros(63)), ValueError, r"sink must have shape \[H\] = \[64\]"),
        ((q, kv), dict(sink=torch.zeros(64, dtype=torch.float64)), TypeError, r"sink must have dtype torch.float32"),
        ((q, kv), dict(softmax_scale=0.0), ValueError, r"softmax_scale = 0.0 must be in \(0, 1e6\]"),
        ((q, kv), dict(softmax_scale=2e6), ValueError, r"softmax_scale = 2000000.0 must be in"),
        ((q, kv), dict(softmax_scale=math.inf), ValueError, r"softmax_scale = inf"),
        ((q, kv), dict(out=torch.zeros((3, 64, 512), dtype=BF)), TypeError, r"out must be a pair"),
        ((q, kv), dict(out=(torch.zeros((3, 64, 512)), None)), TypeError, r"o must have dtype torch.bfloat16"),
        ((q, kv), dict(out=(torch.zeros((3, 64, 512), dtype=BF), torch.zeros(3, 63))), ValueError,
         r"lse must have shape \[T, H\]"),
        ((q, kv), dict(out=(torch.zeros((3, 64, 512), dtype=BF), None), return_partials=True), TypeError,
         r"o_partial must have dtype torch.float32"),
        ((q, kv), dict(out=(torch.zeros((3, 64, 512)), None), return_partials=True), ValueError,
         r"o_partial must be 4-D"),
        ((q, kv), dict(out=(torch.zeros((2, 3, 64, 512)), None), return_partials=True), TypeError,
         r"lse_partial must be a torch.Tensor"),
    ]
    for args, change, error, message in cases:
        with pytest.raises(error, match=message):
            moekit.sparse_attention(*args, **{**kw, **change})
    # With token_request, R is free (requests share windows).
    with pytest.raises(ValueError, match="CUDA"):
        moekit.sparse_attention(q, kv, **{**kw, "window_indices": _i32(2, 16), "window_lens": _i32(2),
                                          "window_positions": _i32(2, 16), "token_request": _i32(3)})


@needs_torch
def test_attention_merge_validation_on_cpu():
    op, lp = torch.zeros((2, 3, 64, 512)), torch.zeros((2, 3, 64))
    with pytest.raises(ValueError, match="CUDA"):
        moekit.attention_merge(op, lp, torch.zeros(2, 64), torch.zeros(64))
    cases = [
        ((op.double(), lp), TypeError, r"o_partials must have dtype torch.float32"),
        ((op[0], lp), ValueError, r"o_partials must be 4-D"),
        ((op[:0], lp[:0]), ValueError, r"at least one source"),
        ((torch.zeros((2, 3, 64, 6)), lp), ValueError, r"D = 6 must be a positive multiple of 4"),
        ((op, lp[:1]), ValueError, r"lse_partials must have shape \[S, T, H\] = \[2, 3, 64\]"),
        ((op, lp, torch.zeros(3, 64)), ValueError, r"weight_logits must have shape \[S, H\] = \[2, 64\]"),
        ((op, lp, None, torch.zeros(64, dtype=BF)), TypeError, r"sink must have dtype torch.float32"),
    ]
    for args, error, message in cases:
        with pytest.raises(error, match=message):
            moekit.attention_merge(*args)


@needs_torch
def test_cache_write_and_rope_validation_on_cpu():
    cache = moekit.mixed_kv_cache(N, "cpu")
    k = torch.zeros((3, 512), dtype=BF)
    with pytest.raises(ValueError, match="CUDA"):
        moekit.mixed_kv_cache_write(k, _i32(3), cache)
    with pytest.raises(TypeError, match="k must have dtype"):
        moekit.mixed_kv_cache_write(k.float(), _i32(3), cache)
    with pytest.raises(ValueError, match=r"k must have shape \[T, 512\]"):
        moekit.mixed_kv_cache_write(k[:, :448], _i32(3), cache)
    with pytest.raises(ValueError, match=r"slots must have shape \[T\] = \[3\]"):
        moekit.mixed_kv_cache_write(k, _i32(4), cache)
    with pytest.raises(TypeError, match=r"cache must be a MixedKvCache \(nope, scales, rope\), got Tensor"):
        moekit.mixed_kv_cache_write(k, _i32(3), cache.nope)
    with pytest.raises(ValueError, match=r"rope must have shape \[N, 64\]"):
        moekit.mixed_kv_cache_write(k, _i32(3), (cache.nope, cache.scales, cache.rope[:, :32]))

    x, pos, cos = torch.zeros((3, 4, 128), dtype=BF), _i32(3), torch.zeros((10, 32))
    with pytest.raises(ValueError, match="CUDA"):
        moekit.rope_(x, pos, cos, cos.clone())
    with pytest.raises(ValueError, match="CUDA"):
        moekit.rope_(x[:, 0].contiguous(), pos, cos, cos.clone(), inverse=True)  # [T, dim]: one head
    with pytest.raises(TypeError, match="x must have dtype"):
        moekit.rope_(x.float(), pos, cos, cos)
    with pytest.raises(ValueError, match=r"x must be \[T, heads, dim\] or \[T, dim\]"):
        moekit.rope_(x[None], pos, cos, cos)
    with pytest.raises(ValueError, match="last dim = 60 must be >= 64"):
        moekit.rope_(torch.zeros((3, 60), dtype=BF), pos, cos, cos)
    with pytest.raises(ValueError, match=r"positions must have shape \[T\] = \[3\]"):
        moekit.rope_(x, _i32(2), cos, cos)
    with pytest.raises(ValueError, match=r"sin must have shape \[P, 32\] = \[10, 32\]"):
        moekit.rope_(x, pos, cos, torch.zeros((9, 32)))


# ---------------------------------------------------------------------------------------------
# Fakes and tracing (fake CUDA tensors: nothing runs)
# ---------------------------------------------------------------------------------------------
def _fake_inputs(mode, t=3, h=64, layout="dense"):
    with mode:
        dev = "cuda"
        return dict(
            q=torch.empty((t, h, 512), dtype=BF, device=dev), cache=moekit.mixed_kv_cache(N, dev, layout=layout),
            k=torch.empty((t, 512), dtype=BF, device=dev), slots=torch.empty(t, dtype=torch.int32, device=dev),
            ti=torch.empty((t, 32), dtype=torch.int32, device=dev),
            wi=torch.empty((t, 16), dtype=torch.int32, device=dev),
            pos=torch.empty(t, dtype=torch.int32, device=dev), cos=torch.empty((64, 32), device=dev),
            sink=torch.empty(h, device=dev), w=torch.empty((2, h), device=dev))


@needs_torch
@pytest.mark.parametrize("layout", ["dense", "rows"])
def test_fakes_give_the_output_shapes(layout):
    from torch._subclasses.fake_tensor import FakeTensorMode

    mode = FakeTensorMode()
    x = _fake_inputs(mode, layout=layout)
    with mode:
        o, lse = moekit.sparse_attention(x["q"], x["cache"], topk_indices=x["ti"], window_indices=x["wi"])
        assert (o.shape, o.dtype, lse.shape, lse.dtype) == ((3, 64, 512), BF, (3, 64), torch.float32)
        op, lp = moekit.sparse_attention(x["q"], x["cache"], topk_indices=x["ti"], return_partials=True)
        assert (op.shape, op.dtype, lp.shape) == ((2, 3, 64, 512), torch.float32, (2, 3, 64))
        mo, ml = torch.ops.moekit.attention_merge(op, lp, x["w"], x["sink"])
        assert (mo.shape, mo.dtype, ml.shape, ml.dtype) == ((3, 64, 512), BF, (3, 64), torch.float32)
        assert moekit.rope_(x["q"], x["pos"], x["cos"], x["cos"]) is x["q"]
        assert moekit.mixed_kv_cache_write(x["k"], x["slots"], x["cache"]) is None


@needs_torch
@pytest.mark.parametrize("layout", ["dense", "rows"])
def test_fullgraph_trace_without_a_gpu(layout):
    """Dynamo traces a function of all four ops into one graph (fullgraph: no break)."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    graphs = []

    def backend(gm, example_inputs):
        graphs.append(gm)
        return gm.forward  # runs on the fake tensors: the ops' fakes

    def step(q, cache, k, slots, ti, wi, pos, cos, sink, w):
        moekit.mixed_kv_cache_write(k, slots, cache)
        moekit.rope_(q, pos, cos, cos)
        o, lse = moekit.sparse_attention(q, cache, topk_indices=ti, window_indices=wi, sink=sink)
        op, lp = moekit.sparse_attention(q, cache, topk_indices=ti, window_indices=wi, return_partials=True)
        mo, _ = moekit.attention_merge(op, lp, w, sink)
        return o + mo, lse

    mode = FakeTensorMode()
    x = _fake_inputs(mode, layout=layout)
    torch._dynamo.reset()
    with mode:
        o, lse = torch.compile(step, backend=backend, fullgraph=True)(
            x["q"], x["cache"], x["k"], x["slots"], x["ti"], x["wi"], x["pos"], x["cos"], x["sink"], x["w"])
    assert o.shape == (3, 64, 512) and lse.shape == (3, 64)
    assert len(graphs) == 1
    code = graphs[0].code
    for op in ("moekit.mixed_kv_cache_write", "moekit.rope_inplace", "moekit.sparse_attention",
               "moekit.attention_merge"):
        assert op in code, op
    torch._dynamo.reset()

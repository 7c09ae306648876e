"""The mixed cache's strided arrays without a GPU: the row layout (one 640-byte row per entry,
MixedKvCache.from_rows, mixed_kv_cache(layout="rows")), its dequantization, the stride and alignment
checks of moekit._C (fake CUDA tensors) and of the torch API (CPU tensors), and AOTAutograd's view of
a rows cache (fake CUDA tensors). test_gpu_attention.py runs the kernels on it.
"""
import pytest

import moekit
from moekit import _C
from test_cpu_attention import BF, N, T, _attn_inputs, _fake_inputs, _i32, attn_args, mixed_cache
from test_cpu_extension import cu, needs_no_gpu

try:
    import torch
except ImportError:  # the _C tests need no torch
    torch = None
needs_torch = pytest.mark.skipif(torch is None, reason="the torch API needs torch")


# ---------------------------------------------------------------------------------------------
# moekit._C on fake CUDA tensors
# ---------------------------------------------------------------------------------------------
def rows_cache(n=N, row=640):
    """The mixed cache as fake views of one buffer of `row`-byte rows (nope | rope | scales)."""
    return dict(nope=cu("float8_e4m3fn", n, 448, strides=(row, 1)), scales=cu("float32", n, 7, strides=(row // 4, 1)),
                rope=cu("bfloat16", n, 64, strides=(row // 2, 1)))


@needs_no_gpu
def test_strided_mixed_cache_checks():
    """Strided arrays pass with their row strides in bytes (the library's rules, checked here too:
    the workspace query, which needs a GPU, comes before the library's own check of the cache)."""
    write = dict(k=cu("bfloat16", T, 512), slots=cu("int32", T))
    accepted = [
        rows_cache(), rows_cache(row=656), rows_cache(row=1024),
        dict(mixed_cache(), rope=cu("bfloat16", N, 64, strides=(72, 1))),  # one strided array
        # One entry: its row stride is never used, whatever it is.
        dict(nope=cu("uint8", 1, 448, strides=(3, 1)), scales=cu("float32", 1, 7, strides=(1, 1)),
             rope=cu("bfloat16", 1, 64, strides=(5, 1))),
    ]
    for cache in accepted:
        with pytest.raises(RuntimeError):  # the library finds no GPU
            _C.sparse_attention(**attn_args(**cache))
        with pytest.raises(RuntimeError):
            _C.mixed_kv_cache_write(**write, **cache)
    cases = [
        (dict(nope=cu("uint8", N, 448, strides=(456, 1))),
         r"^nope: expected a row stride of at least 448 bytes, a multiple of 16, got 456 bytes \(strides \[456, 1\]"),
        (dict(nope=cu("uint8", N, 448, strides=(16, 1))), r"^nope: expected a row stride of at least 448 .* got 16"),
        (dict(scales=cu("float32", N, 7, strides=(5, 1))),
         r"^scales: expected a row stride of at least 28 bytes, a multiple of 4, got 20 bytes"),
        (dict(rope=cu("bfloat16", N, 64, strides=(68, 1))),
         r"^rope: expected a row stride of at least 128 bytes, a multiple of 16, got 136 bytes"),
        (dict(rope=cu("bfloat16", N, 64, strides=(1, N))), r"^rope: expected its last dimension contiguous"),
        (dict(nope=cu("uint8", N, 448, strides=(0, 1))), r"^nope: expected positive strides"),
    ]
    for change, message in cases:
        with pytest.raises(ValueError, match=message):
            _C.sparse_attention(**attn_args(**dict(rows_cache(), **change)))
        with pytest.raises(ValueError, match=message):
            _C.mixed_kv_cache_write(**write, **dict(rows_cache(), **change))


# ---------------------------------------------------------------------------------------------
# The torch API on CPU tensors
# ---------------------------------------------------------------------------------------------
@needs_torch
def test_rows_layout():
    """layout="rows": views of one uint8 [N, 640] buffer, entry e in row e (nope | rope | scales | pad)."""
    c = moekit.mixed_kv_cache(5, "cpu", layout="rows")
    assert isinstance(c, moekit.MixedKvCache) and c.num_entries == 5
    assert (c.nope.shape, c.nope.dtype, c.nope.stride()) == ((5, 448), torch.float8_e4m3fn, (640, 1))
    assert (c.scales.shape, c.scales.dtype, c.scales.stride()) == ((5, 7), torch.float32, (160, 1))
    assert (c.rope.shape, c.rope.dtype, c.rope.stride()) == ((5, 64), BF, (320, 1))
    base = c.nope.data_ptr()
    assert (c.rope.data_ptr() - base, c.scales.data_ptr() - base) == (448, 576)
    storage = c.nope.untyped_storage()
    assert storage.nbytes() == 5 * 640
    assert all(t.untyped_storage().data_ptr() == storage.data_ptr() for t in c)
    assert torch.equal(c.dequantize(), torch.zeros(5, 512))
    c.rope[2] = 1.0
    c.scales[2, 6] = 2.0
    c.nope.view(torch.uint8)[2, 447] = 0x38
    row = torch.frombuffer(bytearray(bytes(storage)), dtype=torch.uint8).view(5, 640)[2]
    assert torch.equal(row[448:576], torch.full((64,), 1.0, dtype=BF).view(torch.uint8))
    assert torch.equal(row[576:604].view(torch.float32)[6:], torch.tensor([2.0]))
    assert row[447] == 0x38 and row[604:].sum() == 0 and row[:447].sum() == 0
    assert moekit.mixed_kv_cache(0, "cpu", layout="rows").nope.shape == (0, 448)
    with pytest.raises(ValueError, match=r"layout must be 'dense' or 'rows', got 'paged'"):
        moekit.mixed_kv_cache(5, "cpu", layout="paged")

    # A paged buffer [pages, page_size, 640] and rows in a wider buffer (stride 656 bytes).
    pages = torch.zeros((3, 4, 640), dtype=torch.uint8)
    p = moekit.MixedKvCache.from_rows(pages.view(-1, 640))
    p.rope[1 * 4 + 2] = 5.0
    assert torch.all(pages[1, 2, 448:576].view(BF) == 5.0) and pages[0].sum() == 0 and pages[2].sum() == 0
    w = moekit.MixedKvCache.from_rows(torch.zeros((6, 656), dtype=torch.uint8)[:, :640])
    assert (w.nope.stride(0), w.scales.stride(0), w.rope.stride(0)) == (656, 164, 328)
    cases = [
        (torch.zeros((4, 640), dtype=torch.int8), TypeError, r"rows must have dtype torch.uint8"),
        (torch.zeros((4, 604), dtype=torch.uint8), ValueError, r"rows must have shape \[N, 640\]"),
        (torch.zeros((640, 4), dtype=torch.uint8).t(), ValueError, r"rows must have a contiguous last dimension"),
        (torch.zeros((4, 648), dtype=torch.uint8)[:, :640], ValueError,
         r"the row stride of rows = 648 bytes must be a multiple of 16"),
        (torch.zeros((4, 656), dtype=torch.uint8)[:, 2:642], ValueError,
         r"rows must be 16-byte aligned, its data starts 2 bytes past a multiple of 16"),
    ]
    for rows, error, message in cases:
        with pytest.raises(error, match=message):
            moekit.MixedKvCache.from_rows(rows)


def _same_values(n, g):
    """A dense and a rows cache of n entries holding the same random values (no NaN codes)."""
    codes = torch.randint(0, 256, (n, 448), generator=g, dtype=torch.uint8)
    codes[(codes & 0x7F) == 0x7F] = 0x38
    scales = torch.ldexp(torch.ones(n, 7), torch.randint(-20, 20, (n, 7), generator=g))
    rope = torch.randn((n, 64), generator=g).to(BF)
    caches = moekit.mixed_kv_cache(n, "cpu"), moekit.mixed_kv_cache(n, "cpu", layout="rows")
    for c in caches:
        c.nope.view(torch.uint8).copy_(codes)
        c.scales.copy_(scales)
        c.rope.copy_(rope)
    return caches


@needs_torch
@pytest.mark.parametrize("n", [0, 1, 37])
def test_dequantize_dense_equals_rows(n):
    dense, rows = _same_values(n, torch.Generator().manual_seed(n))
    for dtype in (torch.float32, torch.float64):
        a, b = dense.dequantize(dtype), rows.dequantize(dtype)
        assert a.shape == (n, 512) and a.dtype == dtype and torch.equal(a, b)
    # uint8 codes instead of float8: the same values.
    codes = moekit.MixedKvCache(rows.nope.view(torch.uint8), rows.scales, rows.rope)
    assert torch.equal(codes.dequantize(), dense.dequantize())
    if n:
        assert dense.dequantize().abs().sum() > 0


def _strided(shape, dtype, row_elems, offset=0):
    """A [n, cols] view of rows of `row_elems` elements, starting `offset` elements in."""
    n, cols = shape
    return torch.zeros((n, row_elems), dtype=dtype)[:, offset:offset + cols]


@needs_torch
def test_strided_cache_validation_on_cpu():
    rows = moekit.mixed_kv_cache(N, "cpu", layout="rows")
    q, _, kw = _attn_inputs()
    k, slots = torch.zeros((3, 512), dtype=BF), _i32(3)
    one = (torch.zeros((1, 448), dtype=torch.uint8).as_strided((1, 448), (3, 1)), torch.zeros(1, 7),
           torch.zeros((1, 64), dtype=BF).as_strided((1, 64), (5, 1)))  # one entry: any row stride
    wide = (_strided((N, 448), torch.uint8, 1024), _strided((N, 7), torch.float32, 8),
            _strided((N, 64), BF, 72))  # each array its own strided buffer
    for cache in (rows, tuple(rows), wide, one):
        with pytest.raises(ValueError, match="CUDA"):  # everything right but the device
            moekit.sparse_attention(q, cache, **kw)
        with pytest.raises(ValueError, match="CUDA"):
            moekit.mixed_kv_cache_write(k, slots, cache)
    raw = bytearray(4 * 7 * N + 8)
    shift = (2 - torch.frombuffer(raw, dtype=torch.uint8).data_ptr()) % 4  # to 2 bytes past a multiple of 4
    misaligned_scales = torch.frombuffer(raw, dtype=torch.float32, count=7 * N, offset=shift)
    cases = [
        (dict(nope=_strided((N, 448), torch.uint8, 456)),
         r"the row stride of nope = 456 bytes must be >= 448 and a multiple of 16 \(strides \(456, 1\) in 1-byte"),
        (dict(nope=torch.zeros(N * 16 + 448, dtype=torch.uint8).as_strided((N, 448), (16, 1))),
         r"the row stride of nope = 16 bytes must be >= 448"),
        (dict(nope=torch.zeros((1, 448), dtype=torch.float8_e4m3fn).expand(N, 448)),
         r"the row stride of nope = 0 bytes must be >= 448"),
        (dict(scales=torch.zeros(N * 4 + 8).as_strided((N, 7), (4, 1))),
         r"the row stride of scales = 16 bytes must be >= 28 and a multiple of 4"),
        (dict(rope=_strided((N, 64), BF, 68)),
         r"the row stride of rope = 136 bytes must be >= 128 and a multiple of 16"),
        (dict(rope=torch.zeros((64, N), dtype=BF).t()), r"rope must have a contiguous last dimension"),
        (dict(nope=_strided((N, 448), torch.uint8, 640, offset=8)),
         r"nope must be 16-byte aligned, its data starts 8 bytes past a multiple of 16"),
        (dict(rope=_strided((N, 64), BF, 320, offset=228)),
         r"rope must be 16-byte aligned, its data starts 8 bytes past a multiple of 16"),
        (dict(scales=misaligned_scales.view(N, 7)),
         r"scales must be 4-byte aligned, its data starts 2 bytes past a multiple of 4"),
    ]
    for change, message in cases:
        cache = rows._replace(**change)
        with pytest.raises(ValueError, match=message):
            moekit.sparse_attention(q, cache, **kw)
        with pytest.raises(ValueError, match=message):
            moekit.mixed_kv_cache_write(k, slots, cache)


# ---------------------------------------------------------------------------------------------
# Tracing (fake CUDA tensors: nothing runs)
# ---------------------------------------------------------------------------------------------
@needs_torch
def test_rows_cache_through_aot_autograd():
    """What the inductor backend sees (AOTAutograd functionalizes mutations), on fake tensors. A
    rows cache passed in as its three views is read as they are; one written inside the compiled
    region comes in as its uint8 buffer (MixedKvCache.from_rows inside): AOTAutograd cannot
    functionalize a write to inputs that alias each other with different dtypes."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    def attend(q, cache, ti, wi):
        return moekit.sparse_attention(q, cache, topk_indices=ti, window_indices=wi)

    def write_and_attend(q, rows, k, slots, ti, wi):
        cache = moekit.MixedKvCache.from_rows(rows)
        moekit.mixed_kv_cache_write(k, slots, cache)
        return attend(q, cache, ti, wi)

    mode = FakeTensorMode()
    x = _fake_inputs(mode, layout="rows")
    with mode:
        rows = torch.zeros((N, 640), dtype=torch.uint8, device="cuda")
        for f, args in ((attend, (x["q"], x["cache"], x["ti"], x["wi"])),
                        (write_and_attend, (x["q"], rows, x["k"], x["slots"], x["ti"], x["wi"]))):
            torch._dynamo.reset()
            o, lse = torch.compile(f, backend="aot_eager", fullgraph=True)(*args)
            assert (o.shape, lse.shape) == ((3, 64, 512), (3, 64)), f.__name__
    torch._dynamo.reset()


@needs_torch
def test_writer_op_takes_strided_arrays_as_bytes():
    """The writer op gets a dense cache's arrays as they are (written in place under inductor) and
    a strided cache's as uint8 views of the same bytes: torch 2.11's functionalization regenerates a
    mutated view of another dtype than its base in the wrong units, which corrupts a rows cache
    built inside a compiled region (seen with inductor on CPU)."""
    from moekit._attention import _write_args

    dense = moekit.mixed_kv_cache(4, "cpu")
    assert all(a is b for a, b in zip(_write_args(*dense), dense))
    for rows in (moekit.mixed_kv_cache(4, "cpu", layout="rows"), moekit.mixed_kv_cache(1, "cpu", layout="rows")):
        args = _write_args(*rows)
        for a, b in zip(args, rows):
            assert a.dtype == torch.uint8 and a.data_ptr() == b.data_ptr() and a.stride() == (640, 1)
            assert a.shape == (b.shape[0], b.shape[1] * b.element_size())

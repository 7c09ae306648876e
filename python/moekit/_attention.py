"""DeepSeek-V4 attention on torch tensors: sparse MQA attention over a KV cache (bf16 rows, or the
mixed FP8/BF16 cache), the mixed cache's writer, RoPE, and the merge of per-source partials
(C++: include/moekit/attention.h).

Every public function validates its arguments on the host (TypeError for a wrong dtype, ValueError
for a wrong shape, stride, device or combination) before anything launches, then calls a torch
custom op (``torch.ops.moekit.*``, registered below with a shape-only fake), so it works under
``torch.compile(fullgraph=True)`` and CUDA graph capture: everything runs on the current stream of
the tensors' device, allocates only through torch's caching allocator and never synchronizes.
Inference only (no autograd).

This module is imported by ``moekit/__init__.py`` only when torch is importable.
"""
# No `from __future__ import annotations`: torch.library infers the op schemas from the
# annotations, which must be real objects.
import math
from typing import Dict, NamedTuple, Optional, Tuple, Union

import torch
from torch._subclasses.fake_tensor import is_fake

from . import _C
from ._check import BF16, F32, FP8, I32, U8, check_devices, check_tensor
from ._torch import _u8, current_stream, device_guard

__all__ = ["MixedKvCache", "mixed_kv_cache", "mixed_kv_cache_write", "rope_", "sparse_attention", "attention_merge"]

NOPE_DIMS = 448     # FP8 dims of a mixed cache entry
ROPE_DIMS = 64      # bf16 dims (the RoPE dims), after the FP8 ones
SCALE_GROUP = 64    # FP8 dims per power-of-two scale
NUM_SCALES = NOPE_DIMS // SCALE_GROUP
MIXED_DIM = NOPE_DIMS + ROPE_DIMS
HEAD_DIMS = (64, 128, 256, 512)
MAX_WINDOW = 128
# The row layout of a cache entry (include/moekit/attention.h): nope | rope | scales | pad.
ROW_BYTES = 640
ROPE_OFFSET = NOPE_DIMS
SCALES_OFFSET = ROPE_OFFSET + 2 * ROPE_DIMS


class MixedKvCache(NamedTuple):
    """DeepSeek-V4's mixed FP8/BF16 KV cache (head dim 512, K = V), one entry per cached token.

    Entry e's dims [0, 448) are ``nope[e, d] * scales[e, d // 64]`` (E4M3 codes times a power of
    two), dims [448, 512) are ``rope[e, d - 448]``. Any (nope, scales, rope) tuple of these
    shapes is accepted where a MixedKvCache is.

    The three arrays may be strided (row strides in bytes: nope and rope multiples of 16, scales
    of 4, each at least its row; last dim contiguous; nope and rope 16-byte aligned, scales
    4-byte), e.g. views of one buffer of 640-byte rows ``[nope 448 B | rope 128 B | scales 28 B |
    pad 36 B]`` (``mixed_kv_cache(n, layout="rows")``, ``MixedKvCache.from_rows(buf)``), so that
    an entry sits in one place in memory (a paged cache). Overlapping arrays are not detected.
    """

    nope: torch.Tensor    #: float8_e4m3fn (or uint8 codes) [N, 448]
    scales: torch.Tensor  #: float32 [N, 7]
    rope: torch.Tensor    #: bfloat16 [N, 64]

    @property
    def num_entries(self) -> int:
        return self.nope.shape[0]

    def dequantize(self, dtype: torch.dtype = torch.float32) -> torch.Tensor:
        """The entries' values [N, 512] in `dtype` (exact in float32 and float64), dense."""
        nope = self.nope.view(torch.float8_e4m3fn).to(dtype)
        scales = self.scales.to(dtype).repeat_interleave(SCALE_GROUP, dim=1)
        return torch.cat([nope * scales, self.rope.to(dtype)], dim=1)

    @classmethod
    def from_rows(cls, rows: torch.Tensor) -> "MixedKvCache":
        """The cache whose entry e is row e of `rows`, uint8 [N, 640] (last dim contiguous, row
        stride a multiple of 16 bytes, 16-byte aligned): views, nothing is copied. Bytes [0, 448)
        hold the E4M3 codes, [448, 576) the bf16 rope dims, [576, 604) the 7 float32 scales,
        [604, 640) are never read or written. E.g. a paged cache [pages, page_size, 640] passes
        ``rows = pages_buf.view(-1, 640)`` and entry index ``page * page_size + slot``."""
        check_tensor(rows, "rows", U8, shape=(None, ROW_BYTES), desc="[N, 640]", last_dim_contiguous=True)
        # Before the views: torch refuses a float32 view of a row stride or offset not divisible by 4.
        if rows.shape[0] > 1 and rows.stride(0) % 16 != 0:
            raise ValueError(f"moekit: the row stride of rows = {rows.stride(0)} bytes must be a multiple of 16")
        if rows.shape[0] > 0 and _misalignment(rows, 16) != 0:
            raise ValueError(f"moekit: rows must be 16-byte aligned, its data starts {_misalignment(rows, 16)} "
                             "bytes past a multiple of 16")
        cache = cls(
            rows[:, :NOPE_DIMS].view(torch.float8_e4m3fn),
            rows[:, SCALES_OFFSET:SCALES_OFFSET + 4 * NUM_SCALES].view(torch.float32),
            rows[:, ROPE_OFFSET:SCALES_OFFSET].view(torch.bfloat16),
        )
        _check_mixed(cache, "rows")
        return cache


def mixed_kv_cache(
    num_entries: int, device: Union[torch.device, str, None] = None, layout: str = "dense"
) -> MixedKvCache:
    """A zeroed MixedKvCache of `num_entries` entries on `device` (default: the current CUDA
    device). An entry never written reads as all zeros.

    layout="dense": three contiguous arrays. layout="rows": one uint8 buffer [N, 640] whose row e
    holds entry e (see MixedKvCache.from_rows), the arrays views of it with a row stride of 640
    bytes. Both give the same results everywhere a MixedKvCache is taken.
    """
    n = int(num_entries)
    if n < 0:
        raise ValueError(f"moekit: num_entries must be >= 0, got {num_entries}")
    if layout not in ("dense", "rows"):
        raise ValueError(f"moekit: layout must be 'dense' or 'rows', got {layout!r}")
    device = torch.device("cuda") if device is None else torch.device(device)
    if layout == "rows":
        return MixedKvCache.from_rows(torch.zeros((n, ROW_BYTES), dtype=torch.uint8, device=device))
    return MixedKvCache(
        torch.zeros((n, NOPE_DIMS), dtype=torch.float8_e4m3fn, device=device),
        torch.zeros((n, NUM_SCALES), dtype=torch.float32, device=device),
        torch.zeros((n, ROPE_DIMS), dtype=torch.bfloat16, device=device),
    )


# C++'s rules for each array (validate_mixed_kv_strides; the kernels' 16-byte loads of nope and
# rope): (name, row bytes = the least row stride, row stride multiple, address alignment).
_MIXED_ROWS = (("nope", NOPE_DIMS, 16, 16), ("scales", 4 * NUM_SCALES, 4, 4), ("rope", 2 * ROPE_DIMS, 16, 16))


def _misalignment(t: torch.Tensor, align: int) -> int:
    # Dynamo cannot trace a tensor's address nor its storage offset: there the library's checks of
    # the alignment its kernels need raise ValueError when the op runs. Fake and meta tensors have
    # no memory: the offset into the storage stands in (exact where torch allocated the storage, at
    # least 64-byte aligned).
    if torch.compiler.is_compiling():
        return 0
    if t.is_meta or is_fake(t):
        return t.storage_offset() * t.element_size() % align
    return t.data_ptr() % align


def _check_mixed(cache, name: str, alternative: str = "") -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    if not isinstance(cache, (tuple, list)) or len(cache) != 3:
        raise TypeError(
            f"moekit: {name} must be {alternative}a MixedKvCache (nope, scales, rope), got {type(cache).__name__}"
        )
    nope, scales, rope = cache
    check_tensor(nope, "nope", FP8, shape=(None, NOPE_DIMS), desc="[N, 448]", last_dim_contiguous=True)
    n = nope.shape[0]
    check_tensor(scales, "scales", F32, shape=(n, NUM_SCALES), desc=f"[N, 7] = [{n}, 7]", last_dim_contiguous=True)
    check_tensor(rope, "rope", BF16, shape=(n, ROPE_DIMS), desc=f"[N, 64] = [{n}, 64]", last_dim_contiguous=True)
    for t, (part, row, multiple, align) in zip((nope, scales, rope), _MIXED_ROWS):
        # With one entry or none the row stride is never used (the binding passes the dense one).
        stride = t.stride(0) * t.element_size()
        if n > 1 and (stride < row or stride % multiple != 0):
            raise ValueError(f"moekit: the row stride of {part} = {stride} bytes must be >= {row} and a multiple of "
                             f"{multiple} (strides {tuple(t.stride())} in {t.element_size()}-byte elements)")
        if n > 0 and _misalignment(t, align) != 0:
            raise ValueError(f"moekit: {part} must be {align}-byte aligned, its data starts "
                             f"{_misalignment(t, align)} bytes past a multiple of {align}")
    return nope, scales, rope


# ---------------------------------------------------------------------------------------------
# The custom ops (they take moekit._C's arguments; the public functions below check them first)
# ---------------------------------------------------------------------------------------------
# sparse_attention_workspace_bytes costs a DLPack export per tensor; its answer depends on the
# shapes, the mode and the device only, so it is asked once per such key. A server sees many token
# counts: the table is emptied when it grows past _WORKSPACE_KEYS (an answer is cheap to ask again).
_workspace_sizes: Dict[tuple, int] = {}
_WORKSPACE_KEYS = 256


@torch.library.custom_op("moekit::sparse_attention", mutates_args=("o", "lse", "o_partial", "lse_partial"))
def _sparse_attention_op(
    q: torch.Tensor,
    kv: Optional[torch.Tensor],
    nope: Optional[torch.Tensor],
    scales: Optional[torch.Tensor],
    rope: Optional[torch.Tensor],
    topk_indices: Optional[torch.Tensor],
    topk_lens: Optional[torch.Tensor],
    window_indices: Optional[torch.Tensor],
    window_lens: Optional[torch.Tensor],
    token_request: Optional[torch.Tensor],
    window_positions: Optional[torch.Tensor],
    query_positions: Optional[torch.Tensor],
    sink: Optional[torch.Tensor],
    softmax_scale: float,
    o: Optional[torch.Tensor],
    lse: Optional[torch.Tensor],
    o_partial: Optional[torch.Tensor],
    lse_partial: Optional[torch.Tensor],
) -> None:
    """Writes o (and lse) or o_partial and lse_partial; see moekit.sparse_attention."""
    inputs = (q, kv, _u8(nope), scales, rope, topk_indices, topk_lens, window_indices, window_lens, token_request,
              window_positions, query_positions, sink, softmax_scale)
    partial = o is None
    key = (q.device.index, tuple(q.shape), kv is None, None if topk_indices is None else topk_indices.shape[1],
           None if window_indices is None else tuple(window_indices.shape), partial)
    with device_guard(q.device):
        n = _workspace_sizes.get(key)
        if n is None:
            n = int(_C.sparse_attention_workspace_bytes(*inputs, partial=partial))
            if len(_workspace_sizes) >= _WORKSPACE_KEYS:
                _workspace_sizes.clear()
            _workspace_sizes[key] = n
        # The caching allocator: stream-ordered, and the graph's private pool during a capture.
        ws = torch.empty(n, dtype=torch.uint8, device=q.device) if n > 0 else None
        _C.sparse_attention(*inputs, o, lse, o_partial, lse_partial, ws, current_stream(q.device))


@_sparse_attention_op.register_fake
def _sparse_attention_fake(q, kv, nope, scales, rope, topk_indices, topk_lens, window_indices, window_lens,
                           token_request, window_positions, query_positions, sink, softmax_scale, o, lse, o_partial,
                           lse_partial) -> None:
    return None


@torch.library.custom_op("moekit::attention_merge", mutates_args=())
def _attention_merge_op(
    o_partials: torch.Tensor,
    lse_partials: torch.Tensor,
    weight_logits: Optional[torch.Tensor],
    sink: Optional[torch.Tensor],
) -> Tuple[torch.Tensor, torch.Tensor]:
    """(o bf16 [T, H, D], lse f32 [T, H]) from o_partials [S, T, H, D], lse_partials [S, T, H]."""
    _, t, h, d = o_partials.shape
    o = torch.empty((t, h, d), dtype=torch.bfloat16, device=o_partials.device)
    lse = torch.empty((t, h), dtype=torch.float32, device=o_partials.device)
    if t > 0:
        with device_guard(o_partials.device):
            _C.attention_merge(o_partials, lse_partials, weight_logits, sink, o, lse,
                               current_stream(o_partials.device))
    return o, lse


@_attention_merge_op.register_fake
def _attention_merge_fake(o_partials, lse_partials, weight_logits, sink):
    _, t, h, d = o_partials.shape
    return o_partials.new_empty((t, h, d), dtype=torch.bfloat16), o_partials.new_empty((t, h), dtype=torch.float32)


@torch.library.custom_op("moekit::mixed_kv_cache_write", mutates_args=("nope", "scales", "rope"))
def _mixed_kv_cache_write_op(
    k: torch.Tensor, slots: torch.Tensor, nope: torch.Tensor, scales: torch.Tensor, rope: torch.Tensor
) -> None:
    """Writes k's rows into the cache; scales and rope come as float32 / bfloat16 or as uint8 views
    of their bytes (see _write_args)."""
    if scales.dtype == torch.uint8:
        scales, rope = scales.view(torch.float32), rope.view(torch.bfloat16)
    with device_guard(k.device):
        _C.mixed_kv_cache_write(k, slots, _u8(nope), scales, rope, current_stream(k.device))


@_mixed_kv_cache_write_op.register_fake
def _mixed_kv_cache_write_fake(k, slots, nope, scales, rope) -> None:
    return None


def _write_args(nope: torch.Tensor, scales: torch.Tensor, rope: torch.Tensor) -> Tuple[torch.Tensor, ...]:
    """The cache arrays as the writer op takes them. Dense arrays as they are: under torch.compile
    they are the graph's inputs, written in place. Strided ones as uint8 views: a rows cache built
    in a compiled region (MixedKvCache.from_rows) holds views of another dtype than their buffer,
    and torch 2.11's functionalization regenerates a mutated view of another dtype than its base in
    the wrong units (inductor then corrupts the buffer); uint8 views of a uint8 buffer regenerate
    right (inductor copies the buffer around the op instead of writing it in place)."""
    if (nope.stride(0), scales.stride(0), rope.stride(0)) == (NOPE_DIMS, NUM_SCALES, ROPE_DIMS):
        return nope, scales, rope
    return nope.view(torch.uint8), scales.view(torch.uint8), rope.view(torch.uint8)


# Not "rope_": torch reserves a trailing underscore for its own in-place overloads.
@torch.library.custom_op("moekit::rope_inplace", mutates_args=("x",))
def _rope_op(x: torch.Tensor, positions: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, inverse: bool) -> None:
    x3 = x if x.dim() == 3 else x.unsqueeze(1)  # [T, dim] is one head
    with device_guard(x.device):
        _C.rope_(x3, positions, cos, sin, inverse, current_stream(x.device))


@_rope_op.register_fake
def _rope_fake(x, positions, cos, sin, inverse) -> None:
    return None


# ---------------------------------------------------------------------------------------------
# Public API
# ---------------------------------------------------------------------------------------------
def _optional_i32(t, name: str, shape, desc: str):
    if t is not None:
        check_tensor(t, name, I32, shape=shape, desc=desc, contiguous=True)


def sparse_attention(
    q: torch.Tensor,
    kv: Union[torch.Tensor, MixedKvCache, Tuple[torch.Tensor, torch.Tensor, torch.Tensor]],
    *,
    topk_indices: Optional[torch.Tensor] = None,
    topk_lens: Optional[torch.Tensor] = None,
    window_indices: Optional[torch.Tensor] = None,
    window_lens: Optional[torch.Tensor] = None,
    token_request: Optional[torch.Tensor] = None,
    window_positions: Optional[torch.Tensor] = None,
    query_positions: Optional[torch.Tensor] = None,
    sink: Optional[torch.Tensor] = None,
    softmax_scale: Optional[float] = None,
    return_partials: bool = False,
    out: Optional[Tuple[torch.Tensor, Optional[torch.Tensor]]] = None,
) -> Tuple[torch.Tensor, Optional[torch.Tensor]]:
    """Sparse multi-query attention (DeepSeek-V4): every query head of a token attends to the same
    K = V cache entries, picked by two sources under one softmax.

    q: bfloat16 [T, H, D], contiguous; D in (64, 128, 256, 512).
    kv: the cache, either bfloat16 rows [N, D] (contiguous) or a MixedKvCache / (nope, scales,
        rope) tuple (D must be 512), dense or strided, e.g. 640-byte rows (see moekit.MixedKvCache).
    Source 0, the indexer's top-k: token t attends to ``topk_indices[t, j]`` for
        ``j < topk_lens[t]``. topk_indices int32 [T, topk]; topk_lens int32 [T] (None: all topk).
    Source 1, the sliding window of token t's request ``r = token_request[t]`` (token_request
        int32 [T]; None: r = t, one window per token): ``window_indices[r, j]`` for
        ``j < window_lens[r]``. window_indices int32 [R, W] (W <= 128; R = T without
        token_request); window_lens int32 [R] (None: all W). With window_positions int32 [R, W]
        (the causal mask of prefill), entry j is attended only if ``window_positions[r, j] <=
        query_positions[t]`` (query_positions int32 [T], required then).
    An index < 0 or >= N is no entry (skipped, never read), as is the window of a request outside
    [0, R). An entry listed twice counts twice.
    Scores ``s_j = softmax_scale * q·k_j`` (softmax_scale: None = 1/sqrt(D); in (0, 1e6]).
    sink: float32 [H] or None, a natural-log logit per head that joins the softmax's denominator
        and attends nothing: ``o = Σ_j e^{s_j} v_j / (Σ_j e^{s_j} + e^{sink})``.
    Returns (normalized, the default) ``(o bfloat16 [T, H, D], lse float32 [T, H])`` with
    ``lse = ln Σ_j e^{s_j}`` (the sink left out). A query with nothing to attend gets o = 0 and
    lse = -inf.
    return_partials=True returns each source's own softmax instead, without the sink:
    ``(o_partial float32 [2, T, H, D], lse_partial float32 [2, T, H])``, index 0 the top-k, 1 the
    window (an empty source: o 0, lse -inf) -- what moekit.attention_merge combines.
    out: optional output pair of the mode's shapes, written and returned: (o, lse) -- lse may be
        None (then not computed) -- or (o_partial, lse_partial); contiguous.
    All tensors on one CUDA device (sm_90). No host synchronization; a workspace, when the keys
    are split over several CTAs, comes from torch's caching allocator.
    """
    check_tensor(q, "q", BF16, shape=(None, None, None), desc="[T, H, D]", contiguous=True)
    t, h, d = q.shape
    if d not in HEAD_DIMS:
        raise ValueError(f"moekit: q's head dim D = {d} is not supported (64, 128, 256 or 512)")
    if isinstance(kv, torch.Tensor):
        check_tensor(kv, "kv", BF16, shape=(None, d), desc=f"[N, D] with D = {d}", contiguous=True)
        bf16_kv, mixed = kv, (None, None, None)
    else:
        mixed = _check_mixed(kv, "kv", "a bf16 tensor [N, D] or ")
        bf16_kv = None
        if d != MIXED_DIM:
            raise ValueError(f"moekit: the mixed FP8 cache has head dim 512, q has D = {d}")

    _optional_i32(topk_indices, "topk_indices", (t, None), f"[T, topk] with T = {t}")
    if topk_lens is not None and topk_indices is None:
        raise ValueError("moekit: topk_lens given without topk_indices")
    _optional_i32(topk_lens, "topk_lens", (t,), f"[T] = [{t}]")
    if window_indices is None:
        for name, v in (("window_lens", window_lens), ("token_request", token_request),
                        ("window_positions", window_positions)):
            if v is not None:
                raise ValueError(f"moekit: {name} given without window_indices")
        r = w = 0
    else:
        rows = t if token_request is None else None
        _optional_i32(window_indices, "window_indices", (rows, None),
                      f"[T, W] with T = {t} (one window per token without token_request)" if rows is not None
                      else "[R, W]")
        r, w = window_indices.shape
        if w > MAX_WINDOW:
            raise ValueError(f"moekit: window_indices has W = {w} columns; a window holds at most {MAX_WINDOW}")
    _optional_i32(token_request, "token_request", (t,), f"[T] = [{t}]")
    _optional_i32(window_lens, "window_lens", (r,), f"[R] = [{r}]")
    _optional_i32(window_positions, "window_positions", (r, w), f"[R, W] = [{r}, {w}]")
    _optional_i32(query_positions, "query_positions", (t,), f"[T] = [{t}]")
    if window_positions is not None and query_positions is None:
        raise ValueError("moekit: window_positions (the causal mask) needs query_positions")
    if sink is not None:
        check_tensor(sink, "sink", F32, shape=(h,), desc=f"[H] = [{h}]", contiguous=True)
    scale = 1.0 / math.sqrt(d) if softmax_scale is None else float(softmax_scale)
    if not (math.isfinite(scale) and 0.0 < scale <= 1e6):
        raise ValueError(f"moekit: softmax_scale = {softmax_scale} must be in (0, 1e6]")

    o = lse = o_part = lse_part = None
    if out is not None:
        if not isinstance(out, (tuple, list)) or len(out) != 2:
            raise TypeError(f"moekit: out must be a pair of tensors, got {type(out).__name__}")
        if return_partials:
            o_part, lse_part = out
        else:
            o, lse = out
    if return_partials:
        if out is None:
            o_part = torch.empty((2, t, h, d), dtype=torch.float32, device=q.device)
            lse_part = torch.empty((2, t, h), dtype=torch.float32, device=q.device)
        check_tensor(o_part, "o_partial", F32, shape=(2, t, h, d), desc=f"[2, T, H, D] = [2, {t}, {h}, {d}]",
                     contiguous=True)
        check_tensor(lse_part, "lse_partial", F32, shape=(2, t, h), desc=f"[2, T, H] = [2, {t}, {h}]",
                     contiguous=True)
        result = (o_part, lse_part)
    else:
        if out is None:
            o = torch.empty((t, h, d), dtype=torch.bfloat16, device=q.device)
            lse = torch.empty((t, h), dtype=torch.float32, device=q.device)
        check_tensor(o, "o", BF16, shape=(t, h, d), desc=f"[T, H, D] = [{t}, {h}, {d}]", contiguous=True)
        if lse is not None:
            check_tensor(lse, "lse", F32, shape=(t, h), desc=f"[T, H] = [{t}, {h}]", contiguous=True)
        result = (o, lse)
    check_devices([
        ("q", q), ("kv", bf16_kv), ("nope", mixed[0]), ("scales", mixed[1]), ("rope", mixed[2]),
        ("topk_indices", topk_indices), ("topk_lens", topk_lens), ("window_indices", window_indices),
        ("window_lens", window_lens), ("token_request", token_request), ("window_positions", window_positions),
        ("query_positions", query_positions), ("sink", sink), ("o", o), ("lse", lse), ("o_partial", o_part),
        ("lse_partial", lse_part),
    ])
    if t == 0:
        return result
    torch.ops.moekit.sparse_attention(
        q, bf16_kv, mixed[0], mixed[1], mixed[2], topk_indices, topk_lens, window_indices, window_lens,
        token_request, window_positions, query_positions, sink, scale, o, lse, o_part, lse_part,
    )
    return result


def attention_merge(
    o_partials: torch.Tensor,
    lse_partials: torch.Tensor,
    weight_logits: Optional[torch.Tensor] = None,
    sink: Optional[torch.Tensor] = None,
) -> Tuple[torch.Tensor, torch.Tensor]:
    """Merges S per-source attention partials into one normalized output.

    o_partials: float32 [S, T, H, D], each source's own softmax-weighted values; lse_partials:
        float32 [S, T, H], their natural-log sums (-inf: an empty source, its o never read).
        sparse_attention(..., return_partials=True) returns both (S = 2). D a multiple of 4.
    weight_logits: float32 [S, H] or None (all 0): source i's weight is e^{weight_logits[i, h]}
        (DeepSeek-V4's sink-weighted window merge).
    sink: float32 [H] or None, joins the denominator.
    Returns ``o = Σ_i e^{lse_i + w_i} o_i / (Σ_i e^{lse_i + w_i} + e^{sink})`` as bfloat16
    [T, H, D] and ``lse = ln Σ_i e^{lse_i + w_i}`` float32 [T, H]; with every source empty, o = 0
    and lse = -inf. Without weights this equals sparse_attention over the union of the sources.
    """
    check_tensor(o_partials, "o_partials", F32, shape=(None, None, None, None), desc="[S, T, H, D]", contiguous=True)
    s, t, h, d = o_partials.shape
    if s < 1:
        raise ValueError("moekit: o_partials must hold at least one source (S >= 1)")
    if d % 4 != 0 or d == 0:
        raise ValueError(f"moekit: o_partials' D = {d} must be a positive multiple of 4")
    check_tensor(lse_partials, "lse_partials", F32, shape=(s, t, h), desc=f"[S, T, H] = [{s}, {t}, {h}]",
                 contiguous=True)
    if weight_logits is not None:
        check_tensor(weight_logits, "weight_logits", F32, shape=(s, h), desc=f"[S, H] = [{s}, {h}]", contiguous=True)
    if sink is not None:
        check_tensor(sink, "sink", F32, shape=(h,), desc=f"[H] = [{h}]", contiguous=True)
    check_devices([("o_partials", o_partials), ("lse_partials", lse_partials), ("weight_logits", weight_logits),
                   ("sink", sink)])
    return torch.ops.moekit.attention_merge(o_partials, lse_partials, weight_logits, sink)


def mixed_kv_cache_write(
    k: torch.Tensor, slots: torch.Tensor, cache: Union[MixedKvCache, Tuple[torch.Tensor, torch.Tensor, torch.Tensor]]
) -> None:
    """Quantizes T new K rows into the mixed cache, in place: row t goes to entry slots[t].

    k: bfloat16 [T, 512], last dim contiguous (row stride a multiple of 8).
    slots: int32 [T]; a slot < 0 or >= N is skipped (nothing written); slots must be distinct.
    cache: a MixedKvCache (or (nope, scales, rope)) of N entries, dense or strided (e.g. 640-byte
        rows; see moekit.MixedKvCache); only the written entries' bytes change, a row's pad never.
    Each group of 64 of the first 448 dims gets the smallest power-of-two scale s with
    amax / s <= 448 (1 for an all-zero group) and codes e4m3(x / s) (round to nearest, saturating);
    the last 64 dims are copied as they are.
    """
    check_tensor(k, "k", BF16, shape=(None, MIXED_DIM), desc="[T, 512]", last_dim_contiguous=True)
    t = k.shape[0]
    check_tensor(slots, "slots", I32, shape=(t,), desc=f"[T] = [{t}]", contiguous=True)
    nope, scales, rope = _check_mixed(cache, "cache")
    check_devices([("k", k), ("slots", slots), ("nope", nope), ("scales", scales), ("rope", rope)])
    if t == 0 or nope.shape[0] == 0:
        return
    torch.ops.moekit.mixed_kv_cache_write(k, slots, *_write_args(nope, scales, rope))


def rope_(
    x: torch.Tensor, positions: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, inverse: bool = False
) -> torch.Tensor:
    """RoPE in place on the last 64 dims of x, DeepSeek-V4's interleaved form; returns x.

    x: bfloat16 [T, heads, dim] or [T, dim] (one head), contiguous; dim >= 64, a multiple of 8.
    positions: int32 [T]; cos, sin: float32 [P, 32], the angle tables (row p: cos / sin of
    p · θ_i for the 32 pairs).
    Pair i of the last 64 dims, (a, b) = (x[..., dim-64+2i], x[..., dim-64+2i+1]), becomes
    (a cos θ - b sin θ, a sin θ + b cos θ) with θ of positions[t]; inverse=True rotates by -θ
    (the inverse RoPE on the attention output). Math in float32, one bf16 rounding. Tokens whose
    position is outside [0, P) and the other dims are left untouched.
    """
    check_tensor(x, "x", BF16, contiguous=True)
    if x.dim() not in (2, 3):
        raise ValueError(f"moekit: x must be [T, heads, dim] or [T, dim], got shape {list(x.shape)}")
    t, dim = x.shape[0], x.shape[-1]
    if dim < ROPE_DIMS or dim % 8 != 0:
        raise ValueError(f"moekit: x's last dim = {dim} must be >= 64 and a multiple of 8")
    check_tensor(positions, "positions", I32, shape=(t,), desc=f"[T] = [{t}]", contiguous=True)
    check_tensor(cos, "cos", F32, shape=(None, ROPE_DIMS // 2), desc="[P, 32]", contiguous=True)
    p = cos.shape[0]
    check_tensor(sin, "sin", F32, shape=(p, ROPE_DIMS // 2), desc=f"[P, 32] = [{p}, 32]", contiguous=True)
    check_devices([("x", x), ("positions", positions), ("cos", cos), ("sin", sin)])
    if x.numel() > 0:
        torch.ops.moekit.rope_inplace(x, positions, cos, sin, bool(inverse))
    return x

"""torch integration: moekit's kernels as torch custom ops (``torch.ops.moekit.*``).

Every op is registered with :func:`torch.library.custom_op` plus a shape-only fake
(``register_fake``), so ``torch.compile(fullgraph=True)`` traces through them without running
them, and ``torch.cuda.graph`` captures them (they launch on the current stream, allocate only
through torch's caching allocator and never synchronize).

The ops take moekit's *own* layouts (the activation scales in the physical, K-block-major layout
``[ceil(K/128), sfa_ld(M)]``); the DeepGEMM-named functions in ``moekit._ops`` convert to these.
They do not validate beyond what ``moekit._C`` checks: call the public functions instead.

The MoE layer cannot be passed to a custom op (ops take tensors and scalars only), so every
``moekit.MoeLayer`` registers its state here under an integer handle and the forward op takes that
handle. The entry is removed when the layer is garbage-collected.

This module is imported by ``moekit/__init__.py`` only when torch is importable.
"""
# No `from __future__ import annotations`: torch.library infers the op schemas from the
# annotations, which must be real objects.
import contextlib
import itertools
import threading
from typing import Dict, Optional, Tuple

import torch

from . import _C

__all__ = ["register_layer", "unregister_layer", "layer_state", "sfa_ld", "current_stream"]


def sfa_ld(m):
    """Leading dimension (floats) of moekit's physical activation-scale layout: align_up(m, 4).

    Works on ints and on torch.SymInt (for the fakes); equal to ``_C.sfa_ld`` for ints.
    """
    return ((m + 3) // 4) * 4


def _ceil128(n):
    return (n + 127) // 128


def _u8(t):
    """fp8 tensors go to _C as uint8 views (raw E4M3 codes, which the contract accepts), so the
    call does not depend on DLPack float8 support; other tensors pass unchanged. Free (a view)."""
    if t is not None and t.dtype == torch.float8_e4m3fn:
        return t.view(torch.uint8)
    return t


def current_stream(device: torch.device) -> int:
    """The current torch CUDA stream of `device` as the integer moekit._C takes."""
    return torch.cuda.current_stream(device).cuda_stream


# ---------------------------------------------------------------------------------------------
# Layer registry
# ---------------------------------------------------------------------------------------------
class _LayerState:
    """What a forward needs at run time: the _C.Layer and the tensors it points into."""

    __slots__ = ("layer", "device", "keep", "ws_sizes")

    def __init__(self, layer, device):
        self.layer = layer            # moekit._C.Layer
        self.device = device          # torch.device of the weights (None before load_weights)
        self.keep = ()                # tensors the C++ layer holds pointers to (w2, w2_scale, prepared, bias)
        self.ws_sizes: Dict[int, int] = {}

    def workspace_size(self, num_tokens: int) -> int:
        n = self.ws_sizes.get(num_tokens)
        if n is None:
            n = int(self.layer.workspace_size(num_tokens))
            self.ws_sizes[num_tokens] = n
        return n

    def workspace(self, num_tokens: int, device: torch.device) -> torch.Tensor:
        # From torch's caching allocator: stream-ordered, and from the graph's private pool while
        # a CUDA graph is being captured, so this is graph-safe and never synchronizes.
        return torch.empty(self.workspace_size(num_tokens), dtype=torch.uint8, device=device)


_layers: Dict[int, _LayerState] = {}
_next_handle = itertools.count(1)
_lock = threading.Lock()


def register_layer(state: _LayerState) -> int:
    with _lock:
        handle = next(_next_handle)
        _layers[handle] = state
    return handle


def unregister_layer(handle: int) -> None:
    with _lock:
        _layers.pop(handle, None)


def layer_state(handle: int) -> _LayerState:
    try:
        return _layers[handle]
    except KeyError:
        raise RuntimeError(f"moekit: no MoE layer with handle {handle} (the layer was deleted)") from None


# ---------------------------------------------------------------------------------------------
# MoE layer forward
# ---------------------------------------------------------------------------------------------
def device_guard(device: torch.device):
    """torch.cuda.device(device), or nothing when it already is the current device (the common
    case: entering the context costs more than the check)."""
    if device.index is None or device.index == torch.cuda.current_device():
        return contextlib.nullcontext()
    return torch.cuda.device(device)


def run_moe_forward(
    state: "_LayerState",
    x: torch.Tensor,
    logits: Optional[torch.Tensor],
    topk_ids: Optional[torch.Tensor],
    topk_weights: Optional[torch.Tensor],
    y: torch.Tensor,
    checked: bool = False,
) -> None:
    """The forward itself: the op below (checked = False: _C checks every tensor again), and
    MoeLayer's eager calls, which skip the dispatcher and, having checked the tensors themselves
    (checked = True: dtype, shape, contiguity, the weights' device), pass raw addresses instead of
    four DLPack round trips (docs/python.md §Overhead)."""
    num_tokens = x.shape[0]
    if num_tokens == 0:
        return
    with device_guard(x.device):
        ws = state.workspace(num_tokens, x.device)
        stream = current_stream(x.device)
        if not checked:
            state.layer.forward(x, y, ws, stream, logits=logits, topk_ids=topk_ids, topk_weights=topk_weights)
        elif logits is not None:
            state.layer.forward_ptrs(num_tokens, x.data_ptr(), y.data_ptr(), ws.data_ptr(), ws.numel(), stream,
                                     logits=logits.data_ptr(), logits_bf16=logits.dtype == torch.bfloat16)
        else:
            state.layer.forward_ptrs(num_tokens, x.data_ptr(), y.data_ptr(), ws.data_ptr(), ws.numel(), stream,
                                     topk_ids=topk_ids.data_ptr(), topk_weights=topk_weights.data_ptr())


@torch.library.custom_op("moekit::moe_forward", mutates_args=("y",))
def moe_forward(
    handle: int,
    x: torch.Tensor,
    logits: Optional[torch.Tensor],
    topk_ids: Optional[torch.Tensor],
    topk_weights: Optional[torch.Tensor],
    y: torch.Tensor,
) -> None:
    """y = MoE(x) with the layer registered under `handle`; either logits or topk_ids/weights."""
    run_moe_forward(layer_state(handle), x, logits, topk_ids, topk_weights, y)


@moe_forward.register_fake
def _moe_forward_fake(handle, x, logits, topk_ids, topk_weights, y) -> None:
    return None


# ---------------------------------------------------------------------------------------------
# GEMMs (moekit layouts: sa physical [ceil(K/128), sfa_ld(rows)] contiguous)
# ---------------------------------------------------------------------------------------------
@torch.library.custom_op("moekit::gemm_fp8_nt", mutates_args=("d",))
def gemm_fp8_nt(a: torch.Tensor, sa: torch.Tensor, b: torch.Tensor, sb: torch.Tensor, d: torch.Tensor) -> None:
    if a.shape[0] == 0:
        return
    with torch.cuda.device(a.device):
        _C.gemm_fp8_nt(_u8(a), sa, _u8(b), sb, d, current_stream(a.device))


@gemm_fp8_nt.register_fake
def _gemm_fp8_nt_fake(a, sa, b, sb, d) -> None:
    return None


@torch.library.custom_op("moekit::grouped_gemm_fp8_contiguous", mutates_args=("d",))
def grouped_gemm_fp8_contiguous(
    a: torch.Tensor,
    sa: torch.Tensor,
    b: torch.Tensor,
    sb: torch.Tensor,
    d: torch.Tensor,
    offsets: torch.Tensor,
    counts: torch.Tensor,
) -> None:
    with torch.cuda.device(a.device):
        _C.grouped_gemm_fp8_contiguous(_u8(a), sa, _u8(b), sb, d, offsets, counts, current_stream(a.device))


@grouped_gemm_fp8_contiguous.register_fake
def _grouped_gemm_fp8_contiguous_fake(a, sa, b, sb, d, offsets, counts) -> None:
    return None


@torch.library.custom_op("moekit::grouped_gemm_fp8_masked", mutates_args=("d",))
def grouped_gemm_fp8_masked(
    a: torch.Tensor, sa: torch.Tensor, b: torch.Tensor, sb: torch.Tensor, d: torch.Tensor, counts: torch.Tensor
) -> None:
    with torch.cuda.device(a.device):
        _C.grouped_gemm_fp8_masked(_u8(a), sa, _u8(b), sb, d, counts, current_stream(a.device))


@grouped_gemm_fp8_masked.register_fake
def _grouped_gemm_fp8_masked_fake(a, sa, b, sb, d, counts) -> None:
    return None


@torch.library.custom_op("moekit::contiguous_offsets", mutates_args=())
def contiguous_offsets(counts: torch.Tensor) -> torch.Tensor:
    """offsets[0] = 0, offsets[e+1] = offsets[e] + align_up(counts[e], 128), on the device."""
    offsets = torch.empty(counts.shape[0] + 1, dtype=torch.int32, device=counts.device)
    with torch.cuda.device(counts.device):
        _C.contiguous_offsets(counts, offsets, current_stream(counts.device))
    return offsets


@contiguous_offsets.register_fake
def _contiguous_offsets_fake(counts):
    return counts.new_empty((counts.shape[0] + 1,), dtype=torch.int32)


# ---------------------------------------------------------------------------------------------
# Quantizers
# ---------------------------------------------------------------------------------------------
@torch.library.custom_op("moekit::quantize_act_1x128", mutates_args=())
def quantize_act_1x128(x: torch.Tensor, ue8m0: bool) -> Tuple[torch.Tensor, torch.Tensor]:
    """x bf16 [M, K] → (q fp8 [M, K], sa fp32 physical [ceil(K/128), sfa_ld(M)])."""
    m, k = x.shape
    q = torch.empty((m, k), dtype=torch.float8_e4m3fn, device=x.device)
    sa = torch.empty((_ceil128(k), sfa_ld(m)), dtype=torch.float32, device=x.device)  # padding never read
    if m > 0:
        with torch.cuda.device(x.device):
            _C.quantize_act_1x128(x, _u8(q), sa, ue8m0, current_stream(x.device))
    return q, sa


@quantize_act_1x128.register_fake
def _quantize_act_1x128_fake(x, ue8m0):
    m, k = x.shape
    q = x.new_empty((m, k), dtype=torch.float8_e4m3fn)
    sa = x.new_empty((_ceil128(k), sfa_ld(m)), dtype=torch.float32)
    return q, sa


@torch.library.custom_op("moekit::quantize_weight_128x128", mutates_args=())
def quantize_weight_128x128(w: torch.Tensor, ue8m0: bool) -> Tuple[torch.Tensor, torch.Tensor]:
    """w bf16 [N, K] → (q fp8 [N, K], sb fp32 [ceil(N/128), ceil(K/128)])."""
    n, k = w.shape
    q = torch.empty((n, k), dtype=torch.float8_e4m3fn, device=w.device)
    sb = torch.empty((_ceil128(n), _ceil128(k)), dtype=torch.float32, device=w.device)
    if n > 0:
        with torch.cuda.device(w.device):
            _C.quantize_weight_128x128(w, _u8(q), sb, ue8m0, current_stream(w.device))
    return q, sb


@quantize_weight_128x128.register_fake
def _quantize_weight_128x128_fake(w, ue8m0):
    n, k = w.shape
    return w.new_empty((n, k), dtype=torch.float8_e4m3fn), w.new_empty((_ceil128(n), _ceil128(k)), dtype=torch.float32)


# ---------------------------------------------------------------------------------------------
# Routing
# ---------------------------------------------------------------------------------------------
def make_c_routing(
    method: str,
    renormalize: bool,
    num_groups: int,
    topk_groups: int,
    routed_scaling_factor: float,
    correction_bias: Optional[torch.Tensor],
):
    """A moekit._C.Routing from plain values (the contract's keyword arguments)."""
    return _C.Routing(
        method,
        renormalize=renormalize,
        num_groups=num_groups,
        topk_groups=topk_groups,
        routed_scaling_factor=routed_scaling_factor,
        correction_bias=correction_bias,
    )


@torch.library.custom_op("moekit::route", mutates_args=())
def route(
    logits: torch.Tensor,
    top_k: int,
    method: str,
    renormalize: bool,
    num_groups: int,
    topk_groups: int,
    routed_scaling_factor: float,
    correction_bias: Optional[torch.Tensor],
) -> Tuple[torch.Tensor, torch.Tensor]:
    t = logits.shape[0]
    ids = torch.empty((t, top_k), dtype=torch.int32, device=logits.device)
    weights = torch.empty((t, top_k), dtype=torch.float32, device=logits.device)
    if t == 0:
        return ids, weights
    routing = make_c_routing(method, renormalize, num_groups, topk_groups, routed_scaling_factor, correction_bias)
    with torch.cuda.device(logits.device):
        _C.route(routing, logits, ids, weights, current_stream(logits.device))
    return ids, weights


@route.register_fake
def _route_fake(logits, top_k, method, renormalize, num_groups, topk_groups, routed_scaling_factor, correction_bias):
    t = logits.shape[0]
    return (
        logits.new_empty((t, top_k), dtype=torch.int32),
        logits.new_empty((t, top_k), dtype=torch.float32),
    )

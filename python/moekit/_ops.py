"""DeepGEMM-named FP8 ops on torch tensors: GEMMs, quantizers and routing.

Every function validates its arguments on the host (TypeError for a wrong dtype, ValueError for a
wrong shape, stride or device) before anything launches, converts DeepGEMM's layouts to moekit's
with torch ops that never synchronize, and calls the registered custom ops (torch.ops.moekit.*,
see _torch.py), so it works under torch.compile(fullgraph=True) and CUDA graph capture. Everything
runs on torch.cuda.current_stream() of the tensors' device.

Scale layouts
-------------
A (activation) scales, logical: ``sfa[m, kb]`` fp32, shape ``[M, ceil(K/128)]``.
moekit's physical layout is K-block-major: ``storage[kb * sfa_ld(M) + m]`` with
``sfa_ld(M) = align_up(M, 4)`` -- the same as DeepGEMM's "MN-major, TMA-aligned" sfa
(``get_mn_major_tma_aligned_tensor``) for the dense and contiguous-grouped GEMMs. An sfa that is
already such a view (strides ``(1, sfa_ld(M))``, storage of at least ``ceil(K/128) * sfa_ld(M)``
floats from its offset) is used in place; any other sfa is copied into that layout first (one
small extra kernel, ``4 * M * ceil(K/128)`` bytes). ``per_token_group_quant_fp8`` returns its
scales in the physical layout, so its output never needs the copy.
B (weight) scales: ``sfb[(E,) ceil(N/128), ceil(K/128)]`` fp32 row-major (logical = physical);
a non-contiguous sfb is made contiguous (a copy).
"""
from __future__ import annotations

from typing import Optional, Tuple, Union

import torch

from . import _C
from ._check import BF16, F32, FP8, I32, LOGITS, ceil128, check_devices, check_tensor, sfa_ld
from ._routing import Routing

__all__ = [
    "fp8_gemm_nt",
    "m_grouped_fp8_gemm_nt_contiguous",
    "m_grouped_fp8_gemm_nt_masked",
    "per_token_group_quant_fp8",
    "per_block_quant_fp8",
    "route",
    "check_m_indices",
    "sfa_to_physical",
    "prepare_fp8_gemm_nt",
    "prepare_m_grouped_contiguous",
    "prepare_m_grouped_masked",
]

_ops = torch.ops.moekit
GROUP_ALIGN = 128  # moekit::kGroupAlign: every expert's segment of the contiguous layout


def _pair(p, name: str) -> Tuple[torch.Tensor, torch.Tensor]:
    if not isinstance(p, (tuple, list)) or len(p) != 2:
        raise TypeError(f"moekit: {name} must be a pair (tensor, scales), got {type(p).__name__}")
    return p[0], p[1]


def _storage_holds(t: torch.Tensor, numel: int) -> bool:
    if torch.compiler.is_compiling():
        return True  # traced: the as_strided below checks the bound when it runs
    try:
        return t.storage_offset() + numel <= t.untyped_storage().nbytes() // t.element_size()
    except Exception:  # noqa: BLE001 - tensors without a plain storage: copy instead
        return False


def sfa_to_physical(sfa: torch.Tensor, rows: int, k: int, name: str = "sfa") -> torch.Tensor:
    """DeepGEMM-style A scales [rows, ceil(k/128)] fp32 (any strides) → moekit's physical layout.

    Returns a contiguous fp32 tensor [ceil(k/128), sfa_ld(rows)] (element [kb, m] = sfa[m, kb];
    the padding columns are never read). No copy when sfa already is a [rows, kb] view of such
    storage (strides (1, sfa_ld(rows))); otherwise one copy. Never synchronizes.
    """
    kb, ld = ceil128(k), sfa_ld(rows)
    check_tensor(sfa, name, F32, shape=(rows, kb), desc=f"[M, ceil(K/128)] = [{rows}, {kb}]")
    if rows == 0:
        return sfa.new_empty((kb, 0))
    if sfa.stride(0) == 1 and (kb == 1 or sfa.stride(1) == ld) and _storage_holds(sfa, kb * ld):
        return sfa.as_strided((kb, ld), (ld, 1))
    phys = torch.empty((kb, ld), dtype=torch.float32, device=sfa.device)
    phys[:, :rows].copy_(sfa.t())
    return phys


# ---------------------------------------------------------------------------------------------
# GEMMs
# ---------------------------------------------------------------------------------------------
def fp8_gemm_nt(a: Tuple[torch.Tensor, torch.Tensor], b: Tuple[torch.Tensor, torch.Tensor], out: torch.Tensor) -> None:
    """out[m, n] = Σ_kb sfa[m, kb] · sfb[n/128, kb] · Σ_{k∈kb} a[m, k] · b[n, k]   (bf16 out).

    a: (a, sfa): a float8_e4m3fn (or uint8 codes) [M, K], last dim contiguous, row stride a
       multiple of 16; sfa float32 [M, ceil(K/128)], any strides (see the module doc: copied
       unless in moekit's physical layout).
    b: (b, sfb): b float8_e4m3fn [N, K], last dim contiguous; sfb float32 [ceil(N/128), ceil(K/128)].
    out: bfloat16 [M, N], last dim contiguous; overwritten.
    K % 16 == 0, N % 8 == 0 (checked by moekit). M = 0 does nothing. All on one CUDA device.
    Kernels compile on first use per shape class: call prepare_fp8_gemm_nt(M, N, K) (or one
    eager call) before capturing a CUDA graph.
    """
    a_, sfa = _pair(a, "a")
    b_, sfb = _pair(b, "b")
    check_tensor(a_, "a", FP8, shape=(None, None), desc="[M, K]", last_dim_contiguous=True)
    m, k = a_.shape
    check_tensor(b_, "b", FP8, shape=(None, k), desc=f"[N, K] with K = {k}", last_dim_contiguous=True)
    n = b_.shape[0]
    check_tensor(sfb, "sfb", F32, shape=(ceil128(n), ceil128(k)), desc="[ceil(N/128), ceil(K/128)]")
    check_tensor(out, "out", BF16, shape=(m, n), desc=f"[M, N] = [{m}, {n}]", last_dim_contiguous=True)
    check_tensor(sfa, "sfa", F32, shape=(m, ceil128(k)), desc=f"[M, ceil(K/128)] = [{m}, {ceil128(k)}]")
    check_devices([("a", a_), ("sfa", sfa), ("b", b_), ("sfb", sfb), ("out", out)])
    sa = sfa_to_physical(sfa, m, k)
    if m == 0:
        return
    _ops.gemm_fp8_nt(a_, sa, b_, sfb.contiguous(), out)


def _grouped_b(b_, sfb, k: int):
    check_tensor(b_, "b", FP8, shape=(None, None, k), desc=f"[E, N, K] with K = {k}", contiguous=True)
    e, n = b_.shape[0], b_.shape[1]
    check_tensor(sfb, "sfb", F32, shape=(e, ceil128(n), ceil128(k)), desc="[E, ceil(N/128), ceil(K/128)]")
    return e, n


def m_grouped_fp8_gemm_nt_contiguous(
    a: Tuple[torch.Tensor, torch.Tensor],
    b: Tuple[torch.Tensor, torch.Tensor],
    out: torch.Tensor,
    m_indices: torch.Tensor,
    check_layout: bool = True,
) -> None:
    """Grouped GEMM, contiguous layout: out[r] = a[r] · b[m_indices[r]]ᵀ for every row r with
    m_indices[r] >= 0 (block-scaled as fp8_gemm_nt).

    a: (a float8_e4m3fn [M_sum, K], sfa float32 [M_sum, ceil(K/128)] any strides).
    b: (b float8_e4m3fn [E, N, K] contiguous, sfb float32 [E, ceil(N/128), ceil(K/128)]).
    out: bfloat16 [M_sum, N]; rows with m_indices = -1 are NOT written (left as they were).
    m_indices: int32 [M_sum] (DeepGEMM's): the group of each row, -1 for padding rows.

    Layout required (moekit's, a special case of DeepGEMM's): M_sum % 128 == 0; groups appear in
    increasing order 0, 1, ..., E-1; group e's rows form one segment that starts at a multiple of
    128, holds its count_e valid rows first, then -1 rows up to the next multiple of 128; empty
    groups take no rows; every row after the last segment is -1. I.e. with
    offsets[0] = 0, offsets[e+1] = offsets[e] + align_up(count_e, 128): rows
    [offsets[e], offsets[e] + count_e) are e and all others -1.

    moekit derives counts and offsets from m_indices on the device (scatter_add + a tiny kernel,
    no host sync). check_layout=True (default) also compares m_indices with the layout those
    counts imply, on the device: if they differ (or an index is >= E or < -1), ``out`` is filled
    entirely with NaN -- a loud result without a host synchronization. Use
    moekit.check_m_indices(m_indices, E) to get a ValueError naming the first bad row instead
    (it synchronizes).
    Before capturing a CUDA graph call prepare_m_grouped_contiguous(M_sum, E, N, K).
    """
    a_, sfa = _pair(a, "a")
    b_, sfb = _pair(b, "b")
    check_tensor(a_, "a", FP8, shape=(None, None), desc="[M_sum, K]", last_dim_contiguous=True)
    rows, k = a_.shape
    e, n = _grouped_b(b_, sfb, k)
    check_tensor(out, "out", BF16, shape=(rows, n), desc=f"[M_sum, N] = [{rows}, {n}]", last_dim_contiguous=True)
    check_tensor(m_indices, "m_indices", I32, shape=(rows,), desc=f"[M_sum] = [{rows}]", contiguous=True)
    if rows % GROUP_ALIGN != 0:
        raise ValueError(f"moekit: M_sum (rows of a) must be a multiple of {GROUP_ALIGN}, got {rows}")
    check_tensor(sfa, "sfa", F32, shape=(rows, ceil128(k)), desc=f"[M_sum, ceil(K/128)] = [{rows}, {ceil128(k)}]")
    check_devices([("a", a_), ("sfa", sfa), ("b", b_), ("sfb", sfb), ("out", out), ("m_indices", m_indices)])
    sa = sfa_to_physical(sfa, rows, k)
    if rows == 0:
        return
    valid = (m_indices >= 0) & (m_indices < e)
    idx = torch.where(valid, m_indices, 0).long()
    counts = torch.zeros(e, dtype=torch.int32, device=a_.device).scatter_add_(0, idx, valid.to(torch.int32))
    offsets = _ops.contiguous_offsets(counts)
    _ops.grouped_gemm_fp8_contiguous(a_, sa, b_, sfb.contiguous(), out, offsets, counts)
    if check_layout:
        bad = _contiguous_layout_mismatch(m_indices, counts, offsets)
        out.masked_fill_(bad, float("nan"))


def _expected_m_indices(counts: torch.Tensor, offsets: torch.Tensor, rows: int) -> torch.Tensor:
    """The m_indices of moekit's contiguous layout for these counts/offsets (device, no sync)."""
    e = counts.shape[0]
    r = torch.arange(rows, dtype=torch.int32, device=counts.device)
    grp = torch.searchsorted(offsets[1:].contiguous(), r, right=True).clamp_(max=e - 1)
    start = offsets[:-1][grp]
    inside = (r >= start) & (r < start + counts[grp]) & (r < offsets[e])
    return torch.where(inside, grp.to(torch.int32), torch.full_like(r, -1))


def _contiguous_layout_mismatch(m_indices, counts, offsets) -> torch.Tensor:
    return (_expected_m_indices(counts, offsets, m_indices.shape[0]) != m_indices).any()


def check_m_indices(m_indices: torch.Tensor, num_groups: int) -> None:
    """Raises ValueError unless m_indices (int32 [M_sum], CUDA) is moekit's contiguous layout for
    num_groups groups (see m_grouped_fp8_gemm_nt_contiguous). SYNCHRONIZES (reads the result on
    the host): for debugging and tests, not for the hot path or inside graph capture."""
    check_tensor(m_indices, "m_indices", I32, shape=(None,), desc="[M_sum]", contiguous=True)
    check_devices([("m_indices", m_indices)])
    rows = m_indices.shape[0]
    if rows % GROUP_ALIGN != 0:
        raise ValueError(f"moekit: M_sum must be a multiple of {GROUP_ALIGN}, got {rows}")
    if rows == 0:
        return
    out_of_range = (m_indices < -1) | (m_indices >= num_groups)
    if bool(out_of_range.any()):
        r = int(out_of_range.nonzero()[0, 0])
        raise ValueError(f"moekit: m_indices[{r}] = {int(m_indices[r])} is outside [-1, {num_groups})")
    valid = m_indices >= 0
    idx = torch.where(valid, m_indices, 0).long()
    counts = torch.zeros(num_groups, dtype=torch.int32, device=m_indices.device).scatter_add_(0, idx, valid.to(torch.int32))
    offsets = _ops.contiguous_offsets(counts)
    expected = _expected_m_indices(counts, offsets, rows)
    diff = (expected != m_indices).nonzero()
    if diff.numel():
        r = int(diff[0, 0])
        raise ValueError(
            f"moekit: m_indices is not moekit's 128-aligned contiguous layout: row {r} holds "
            f"{int(m_indices[r])}, the layout of these group counts has {int(expected[r])} there "
            "(groups must appear in increasing order, each starting at a multiple of 128 with its "
            "valid rows first)"
        )


def m_grouped_fp8_gemm_nt_masked(
    a: Tuple[torch.Tensor, torch.Tensor],
    b: Tuple[torch.Tensor, torch.Tensor],
    out: torch.Tensor,
    masked_m: torch.Tensor,
    expected_m: Optional[int] = None,
) -> None:
    """Grouped GEMM, masked layout: out[e, i] = a[e, i] · b[e]ᵀ for i < masked_m[e].

    a: (a float8_e4m3fn [E, max_m, K] contiguous, sfa float32 [E, max_m, ceil(K/128)]).
       moekit's physical layout for sfa spans all E * max_m rows: element (e, i, kb) at
       storage[kb * sfa_ld(E * max_m) + e * max_m + i], i.e. strides (max_m, 1, sfa_ld(E*max_m)).
       An sfa in that layout is used in place; any other (including DeepGEMM's per-group
       TMA-aligned one) is copied into it first.
    b: (b float8_e4m3fn [E, N, K] contiguous, sfb float32 [E, ceil(N/128), ceil(K/128)]).
    out: bfloat16 [E, max_m, N] contiguous; rows at or past masked_m[e] are not written.
    masked_m: int32 [E] on the device, valid rows per group (clamped to [0, max_m]); read by the
       kernel at run time (so a captured graph follows new counts on replay).
    expected_m: DeepGEMM's hint of the typical masked_m; accepted for compatibility and IGNORED
       (moekit's tile configuration depends only on max_m, E, N, K).
    Before capturing a CUDA graph call prepare_m_grouped_masked(max_m, E, N, K).
    """
    del expected_m  # ignored (see the docstring)
    a_, sfa = _pair(a, "a")
    b_, sfb = _pair(b, "b")
    check_tensor(a_, "a", FP8, shape=(None, None, None), desc="[E, max_m, K]", contiguous=True)
    e, max_m, k = a_.shape
    e_b, n = _grouped_b(b_, sfb, k)
    if e_b != e:
        raise ValueError(f"moekit: a has {e} groups, b has {e_b}")
    check_tensor(out, "out", BF16, shape=(e, max_m, n), desc=f"[E, max_m, N] = [{e}, {max_m}, {n}]", contiguous=True)
    check_tensor(masked_m, "masked_m", I32, shape=(e,), desc=f"[E] = [{e}]", contiguous=True)
    kb = ceil128(k)
    check_tensor(sfa, "sfa", F32, shape=(e, max_m, kb), desc=f"[E, max_m, ceil(K/128)] = [{e}, {max_m}, {kb}]")
    check_devices([("a", a_), ("sfa", sfa), ("b", b_), ("sfb", sfb), ("out", out), ("masked_m", masked_m)])
    rows = e * max_m
    if rows == 0:
        return
    ld = sfa_ld(rows)
    if (
        sfa.stride(1) == 1
        and (e == 1 or sfa.stride(0) == max_m)
        and (kb == 1 or sfa.stride(2) == ld)
        and _storage_holds(sfa, kb * ld)
    ):
        sa = sfa.as_strided((kb, ld), (ld, 1))
    else:
        sa = torch.empty((kb, ld), dtype=torch.float32, device=sfa.device)
        sa[:, :rows].view(kb, e, max_m).copy_(sfa.permute(2, 0, 1))
    _ops.grouped_gemm_fp8_masked(a_, sa, b_, sfb.contiguous(), out, masked_m)


# ---------------------------------------------------------------------------------------------
# Quantizers
# ---------------------------------------------------------------------------------------------
def per_token_group_quant_fp8(
    x: torch.Tensor, group_size: int = 128, ue8m0: bool = False
) -> Tuple[torch.Tensor, torch.Tensor]:
    """1x128 activation quantization (SPEC §1): for each row and 128-column group,
    s = max(amax, 1e-4) / 448 (ue8m0=True: rounded up to a power of two), q = e4m3(x / s)
    (round to nearest even, saturating). A last partial group has its own scale.

    x: bfloat16 [M, K], K % 16 == 0 (copied first if not contiguous).
    group_size: must be 128 (ValueError otherwise).
    Returns (q float8_e4m3fn [M, K] contiguous, s float32 [M, ceil(K/128)]); s is a view of
    moekit's physical layout (strides (1, sfa_ld(M))), which the GEMMs take without a copy.
    Call s.contiguous() for a row-major copy.
    """
    if group_size != 128:
        raise ValueError(f"moekit: per_token_group_quant_fp8 supports group_size=128 only, got {group_size}")
    check_tensor(x, "x", BF16, shape=(None, None), desc="[M, K]")
    check_devices([("x", x)])
    m = x.shape[0]
    q, sa = _ops.quantize_act_1x128(x.contiguous(), bool(ue8m0))
    return q, sa[:, :m].t()


def per_block_quant_fp8(w: torch.Tensor, ue8m0: bool = False) -> Tuple[torch.Tensor, torch.Tensor]:
    """128x128 block quantization of weights (SPEC §1), e.g. a bf16 checkpoint into moekit's W1/W2.

    w: bfloat16 [N, K] or [E, N, K] (per expert: blocks never cross experts), K % 16 == 0 (copied
       first if not contiguous).
    Returns (q float8_e4m3fn, same shape as w, s float32 [(E,) ceil(N/128), ceil(K/128)]).
    """
    check_tensor(w, "w", BF16)
    if w.dim() not in (2, 3):
        raise ValueError(f"moekit: w must be 2-D [N, K] or 3-D [E, N, K], got shape {list(w.shape)}")
    check_devices([("w", w)])
    w = w.contiguous()
    if w.dim() == 2:
        return _ops.quantize_weight_128x128(w, bool(ue8m0))
    e, n, k = w.shape
    if n % 128 == 0:  # no block crosses an expert: one launch over [E*N, K]
        q, s = _ops.quantize_weight_128x128(w.reshape(e * n, k), bool(ue8m0))
        return q.view(e, n, k), s.view(e, n // 128, ceil128(k))
    parts = [_ops.quantize_weight_128x128(w[i], bool(ue8m0)) for i in range(e)]
    return torch.stack([p[0] for p in parts]), torch.stack([p[1] for p in parts])


# ---------------------------------------------------------------------------------------------
# Routing
# ---------------------------------------------------------------------------------------------
def route(
    logits: torch.Tensor, routing: Union[Routing, dict, str, None], top_k: int
) -> Tuple[torch.Tensor, torch.Tensor]:
    """Router logits → (topk_ids int32 [T, k], topk_weights float32 [T, k]), slots in decreasing
    selection score; ties to the lower expert index. Same kernel as a layer's logits path.

    logits: float32 or bfloat16 [T, E], contiguous, CUDA (1 <= E <= 1024, 1 <= top_k <= min(E, 32)).
    routing: moekit.Routing / dict / method name (None = Routing("softmax_topk")).
    """
    r = Routing.coerce(routing) or Routing()
    check_tensor(logits, "logits", LOGITS, shape=(None, None), desc="[T, E]", contiguous=True)
    if not isinstance(top_k, int) or isinstance(top_k, bool) or top_k < 1:
        raise ValueError(f"moekit: top_k must be an int >= 1, got {top_k!r}")
    e = logits.shape[1]
    if r.correction_bias is not None:
        check_tensor(r.correction_bias, "correction_bias", F32, shape=(e,), desc=f"[E] = [{e}]", contiguous=True)
    check_devices([("logits", logits), ("correction_bias", r.correction_bias)])
    return _ops.route(
        logits, top_k, r.method, bool(r.renormalize), int(r.num_groups), int(r.topk_groups),
        float(r.routed_scaling_factor), r.correction_bias,
    )


# ---------------------------------------------------------------------------------------------
# Ahead-of-capture compilation (current CUDA device)
# ---------------------------------------------------------------------------------------------
def prepare_fp8_gemm_nt(m: int, n: int, k: int) -> None:
    """Compile (or load from the disk cache) the kernel fp8_gemm_nt uses for this shape."""
    _C.prepare_gemm(int(m), int(n), int(k))


def prepare_m_grouped_contiguous(m_sum: int, num_groups: int, n: int, k: int) -> None:
    """Compile the kernel m_grouped_fp8_gemm_nt_contiguous uses for M_sum rows, E groups, N, K."""
    _C.prepare_grouped_contiguous(int(m_sum), int(num_groups), int(n), int(k))


def prepare_m_grouped_masked(max_m: int, num_groups: int, n: int, k: int) -> None:
    """Compile the kernel m_grouped_fp8_gemm_nt_masked uses for [E, max_m] rows, N, K."""
    _C.prepare_grouped_masked(int(max_m), int(num_groups), int(n), int(k))

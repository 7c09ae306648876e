"""Pieces the peer side-by-side scripts share (bench/peers/*_side_by_side.py)."""
from __future__ import annotations

import torch


def rel_l2(out: torch.Tensor, ref: torch.Tensor) -> float:
    """‖out − ref‖ / ‖ref‖ in float32; NaN when out has a non-finite value."""
    out = out.float()
    if not torch.isfinite(out).all():
        return float("nan")
    return ((out - ref).norm() / ref.norm()).item()


class Case:
    """One compared case: `mk` and `peer` each run one call of their library (operands made beforehand),
    `check()` returns both outputs' rel_l2 against the reference, `flops` counts one call's work."""

    def __init__(self, group, label, flops, mk, peer, check):
        self.group, self.label, self.flops = group, label, flops
        self.mk, self.peer, self.check = mk, peer, check


def profile_interleaved(case: Case, reps: int):
    """The CUDA kernels (start µs, end µs, name) of `reps` calls of each side, interleaved call by
    call with a 256 MB L2-flushing memset before each (its kernels are in the list too), recorded by
    the CUDA profiler (CUPTI via torch.profiler) after two untimed calls of each side."""
    flush = torch.empty(int(256e6 // 4), dtype=torch.int32, device="cuda")
    for _ in range(2):
        case.mk()
        case.peer()
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        for _ in range(reps):
            flush.zero_()
            case.peer()
            flush.zero_()
            case.mk()
        torch.cuda.synchronize()
    return [(e.time_range.start, e.time_range.end, e.name) for e in prof.events()
            if e.device_type == torch.autograd.DeviceType.CUDA]

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

"""Argument checks shared by moekit's torch API. They run on the host, before anything launches.

Order: Python type, dtype (TypeError), rank and shape, strides (ValueError), then the device
(ValueError), so that shape errors are reported the same way on CPU tensors.
"""
from __future__ import annotations

from typing import Iterable, Optional, Sequence, Tuple

import torch

FP8 = (torch.float8_e4m3fn, torch.uint8)  # uint8 = raw E4M3 codes
F32 = (torch.float32,)
BF16 = (torch.bfloat16,)
I32 = (torch.int32,)
U8 = (torch.uint8,)  # MXFP4 codes and UE8M0 scales
BIAS = (torch.float32, torch.bfloat16)  # gpt-oss's biases
LOGITS = (torch.float32, torch.bfloat16)


def _dtypes(dtypes: Sequence[torch.dtype]) -> str:
    return " or ".join(str(d) for d in dtypes)


def check_tensor(
    t,
    name: str,
    dtypes: Sequence[torch.dtype],
    shape: Optional[Sequence[Optional[int]]] = None,
    desc: str = "",
    contiguous: bool = False,
    last_dim_contiguous: bool = False,
) -> None:
    """Type, dtype, shape (None entries = any size) and contiguity of one tensor argument."""
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"moekit: {name} must be a torch.Tensor, got {type(t).__name__}")
    if t.dtype not in dtypes:
        raise TypeError(f"moekit: {name} must have dtype {_dtypes(dtypes)}, got {t.dtype}")
    if shape is not None:
        want = desc or "[" + ", ".join("*" if s is None else str(s) for s in shape) + "]"
        if t.dim() != len(shape):
            raise ValueError(f"moekit: {name} must be {len(shape)}-D {want}, got shape {list(t.shape)}")
        for i, s in enumerate(shape):
            if s is not None and t.shape[i] != s:
                raise ValueError(f"moekit: {name} must have shape {want}, got {list(t.shape)} (dim {i}: expected {s})")
    if contiguous and not t.is_contiguous():
        raise ValueError(f"moekit: {name} must be contiguous (row-major), got strides {tuple(t.stride())}; call .contiguous()")
    if last_dim_contiguous and t.dim() > 0 and t.shape[-1] > 1 and t.stride(-1) != 1:
        raise ValueError(f"moekit: {name} must have a contiguous last dimension, got strides {tuple(t.stride())}")


def check_devices(named: Iterable[Tuple[str, Optional[torch.Tensor]]], device: Optional[torch.device] = None) -> torch.device:
    """All given tensors (None entries skipped) on one CUDA device (or on `device`); returns it."""
    for name, t in named:
        if t is None:
            continue
        if t.device.type != "cuda":
            raise ValueError(f"moekit: {name} must be a CUDA tensor, got device {t.device}")
        if device is None:
            device = t.device
        elif t.device != device:
            raise ValueError(f"moekit: {name} is on {t.device}, expected {device} (all tensors on one GPU)")
    if device is None:
        raise ValueError("moekit: no tensor argument given")
    return device


def ceil128(n):
    return (n + 127) // 128


def sfa_ld(m):
    """align_up(m, 4): leading dimension of moekit's physical activation-scale layout."""
    return ((m + 3) // 4) * 4


def check_fp8_weights(e: int, h: int, i: int, w1, w1_scale, w2, w2_scale) -> None:
    """FP8 expert weights of e experts (SPEC convention): w1 [e, 2I, H], w1_scale [e, ceil(2I/128),
    ceil(H/128)], w2 [e, H, I], w2_scale [e, ceil(H/128), ceil(I/128)], all contiguous."""
    check_tensor(w1, "w1", FP8, shape=(e, 2 * i, h), desc=f"[E_local, 2I, H] = [{e}, {2 * i}, {h}]", contiguous=True)
    check_tensor(w1_scale, "w1_scale", F32, shape=(e, ceil128(2 * i), ceil128(h)),
                 desc=f"[E_local, ceil(2I/128), ceil(H/128)] = [{e}, {ceil128(2 * i)}, {ceil128(h)}]", contiguous=True)
    check_tensor(w2, "w2", FP8, shape=(e, h, i), desc=f"[E_local, H, I] = [{e}, {h}, {i}]", contiguous=True)
    check_tensor(w2_scale, "w2_scale", F32, shape=(e, ceil128(h), ceil128(i)),
                 desc=f"[E_local, ceil(H/128), ceil(I/128)] = [{e}, {ceil128(h)}, {ceil128(i)}]", contiguous=True)

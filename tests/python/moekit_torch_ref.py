"""torch re-implementations of SPEC §1-§3 for moekit's Python GPU tests (not a test module).

quant_1x128 / quant_128x128 follow SPEC §1 exactly (float32 scale arithmetic, IEEE division,
round-to-nearest-even with saturation to ±448), so the GPU quantizers must match them bit for bit.
The GEMM and MoE references compute in float64 from the dequantized FP8 operands.
"""
import torch

FP8 = torch.float8_e4m3fn


def quant_scale(amax: torch.Tensor, ue8m0: bool) -> torch.Tensor:
    """SPEC §1: s = max(amax, 1e-4) / 448 in float32; ue8m0: rounded up to a power of two."""
    # float64 division rounded to float32 is float32's correctly rounded division; a float32
    # tensor divided by a Python scalar is not (torch's CUDA kernel multiplies by 1/448).
    s = (torch.clamp(amax.float(), min=1e-4).double() / 448.0).float()
    if ue8m0:
        mant, exp = torch.frexp(s)  # s = mant * 2^exp, mant in [0.5, 1)
        exp = torch.where(mant == 0.5, exp - 1, exp)
        s = torch.ldexp(torch.ones_like(s), exp)
    return s


def _e4m3(v: torch.Tensor) -> torch.Tensor:
    # torch's float32 -> e4m3fn conversion rounds to nearest even; it does not saturate, so clamp.
    return v.clamp(-448.0, 448.0).to(FP8)


def quant_1x128(x: torch.Tensor, ue8m0: bool = False):
    """x [M, K] (bf16 or float32) → (q fp8 [M, K], s float32 [M, ceil(K/128)] row-major)."""
    x = x.float()
    m, k = x.shape
    kb = (k + 127) // 128
    pad = torch.zeros((m, kb * 128), dtype=torch.float32, device=x.device)
    pad[:, :k] = x
    amax = pad.abs().view(m, kb, 128).amax(dim=2)
    s = quant_scale(amax, ue8m0)
    q = _e4m3(x / s.repeat_interleave(128, dim=1)[:, :k])
    return q, s


def quant_128x128(w: torch.Tensor, ue8m0: bool = False):
    """w [N, K] → (q fp8 [N, K], s float32 [ceil(N/128), ceil(K/128)])."""
    w = w.float()
    n, k = w.shape
    nb, kb = (n + 127) // 128, (k + 127) // 128
    pad = torch.zeros((nb * 128, kb * 128), dtype=torch.float32, device=w.device)
    pad[:n, :k] = w
    amax = pad.abs().view(nb, 128, kb, 128).amax(dim=(1, 3))
    s = quant_scale(amax, ue8m0)
    full = s.repeat_interleave(128, dim=0).repeat_interleave(128, dim=1)[:n, :k]
    return _e4m3(w / full), s


def dequant_act(q: torch.Tensor, s: torch.Tensor, dtype=torch.float64) -> torch.Tensor:
    k = q.shape[-1]
    return q.to(dtype) * s.to(dtype).repeat_interleave(128, dim=-1)[..., :k]


def dequant_w(q: torch.Tensor, s: torch.Tensor, dtype=torch.float64) -> torch.Tensor:
    """q [..., N, K], s [..., ceil(N/128), ceil(K/128)] → dequantized [..., N, K]."""
    n, k = q.shape[-2], q.shape[-1]
    full = s.to(dtype).repeat_interleave(128, dim=-2).repeat_interleave(128, dim=-1)[..., :n, :k]
    return q.to(dtype) * full


def rel_l2(out: torch.Tensor, ref: torch.Tensor) -> float:
    out, ref = out.double(), ref.double()
    return float((out - ref).norm() / ref.norm())


def moe_spec_ref(x, topk_ids, topk_weights, w1q, w1s, w2q, w2s, limit=0.0, local_offset=0):
    """SPEC §3 in float64 from the quantized weights: x and h quantized 1x128 as the layer does.

    x bf16 [T, H]; topk_ids [T, k] (global ids; -1 / outside the local slice skipped);
    w1q [E_local, 2I, H] fp8 + w1s; w2q [E_local, H, I] fp8 + w2s. Returns float64 [T, H].
    """
    t, h = x.shape
    e_local, two_i, _ = w1q.shape
    inter = two_i // 2
    qx, sx = quant_1x128(x)
    a = dequant_act(qx, sx)
    w1 = dequant_w(w1q, w1s)
    w2 = dequant_w(w2q, w2s)
    y = torch.zeros((t, h), dtype=torch.float64, device=x.device)
    ids = topk_ids.long()
    for el in range(e_local):
        tok, slot = torch.where(ids == el + local_offset)
        if tok.numel() == 0:
            continue
        gu = a[tok] @ w1[el].T
        g, u = gu[:, :inter], gu[:, inter:]
        if limit > 0:
            g = g.clamp(max=limit)
            u = u.clamp(-limit, limit)
        hh = g / (1 + torch.exp(-g)) * u
        qh, sh = quant_1x128(hh.float())
        o = dequant_act(qh, sh) @ w2[el].T
        y.index_add_(0, tok, topk_weights[tok, slot].double()[:, None] * o)
    return y


def checkpoint_weights(e, n, k, device, gen=None, std=0.02):
    """Checkpoint-like FP8 weights: bf16 N(0, std²) quantized 128x128 per expert (SPEC §7)."""
    w = (torch.randn((e, n, k), generator=gen, device=device) * std).to(torch.bfloat16)
    qs = [quant_128x128(w[i]) for i in range(e)]
    return torch.stack([q for q, _ in qs]), torch.stack([s for _, s in qs])

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


# ---------------------------------------------------------------------------------------------
# MXFP4 (OCP MX, SPEC §6) and its FP8 block-scaled form (docs/design.md §MXFP4 weights)
# ---------------------------------------------------------------------------------------------
_E2M1 = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0)


def _e2m1_codes(v: torch.Tensor) -> torch.Tensor:
    """Nearest E2M1 code (ties to the even code), saturating at 6; v already divided by the scale."""
    mags = torch.tensor(_E2M1, device=v.device)
    d = (v.abs().unsqueeze(-1) - mags).abs()
    # Ties: the even code wins; a tiny penalty on the odd codes breaks them (distances are exact).
    d = d + torch.tensor([0.0, 1e-7] * 4, device=v.device)
    code = d.argmin(dim=-1).to(torch.uint8)
    return code | torch.where(torch.signbit(v), 8, 0).to(torch.uint8)


def checkpoint_mxfp4(e, n, k, device, gen=None, std=0.02):
    """bf16 N(0, std²) weights quantized by the OCP MX rule: codes uint8 [e, n, k/2] (low nibble the
    even element) and UE8M0 scales uint8 [e, n, k/32]."""
    w = (torch.randn((e, n, k), generator=gen, device=device) * std).to(torch.bfloat16).float()
    blocks = w.view(e, n, k // 32, 32)
    amax = blocks.abs().amax(dim=-1)
    _, exp = torch.frexp(amax)  # amax = mant * 2^exp, mant in [0.5, 1): floor(log2 amax) = exp - 1
    s = torch.where(amax > 0, (exp - 1 - 2 + 127).clamp(0, 254), torch.full_like(exp, 0))
    codes = _e2m1_codes(blocks / torch.ldexp(torch.ones_like(amax), s - 127).unsqueeze(-1)).view(e, n, k)
    packed = codes[..., 0::2] | (codes[..., 1::2] << 4)
    return packed.contiguous(), s.to(torch.uint8).contiguous()


def mxfp4_fp8_form(codes: torch.Tensor, scales: torch.Tensor):
    """moekit::mxfp4_to_fp8 in torch: (q float8_e4m3fn [e, n, k], sb float32 [e, ceil(n/128), ceil(k/128)])."""
    e, n, k2 = codes.shape
    k = 2 * k2
    mags = torch.tensor(_E2M1, device=codes.device)
    nib = torch.stack([codes & 15, codes >> 4], dim=-1).view(e, n, k).long()
    val = torch.where(nib >= 8, -mags[nib & 7], mags[nib & 7])
    s = scales.long()
    nb, kb = (n + 127) // 128, (k + 127) // 128
    pad = torch.full((e, nb * 128, kb * 4), -1, dtype=torch.long, device=codes.device)
    pad[:, :n, : k // 32] = torch.where(s == 255, -1, s)
    m = pad.view(e, nb, 128, kb, 4).amax(dim=(2, 4)).clamp(min=0)  # largest finite byte per block
    nan = (s == 255).float()
    nanb = torch.zeros((e, nb * 128, kb * 4), device=codes.device)
    nanb[:, :n, : k // 32] = nan
    nan_block = nanb.view(e, nb, 128, kb, 4).amax(dim=(2, 4)) > 0
    sb = torch.where(nan_block, float("nan"), torch.ldexp(torch.ones_like(m, dtype=torch.float32), m - 133))
    m_el = m.repeat_interleave(128, dim=1)[:, :n].repeat_interleave(4, dim=2)[:, :, : k // 32]
    shift = (s - m_el + 6).clamp(-13, 6)
    q = (val * torch.ldexp(torch.ones_like(val), shift.repeat_interleave(32, dim=2))).to(FP8)
    return q.contiguous(), sb.contiguous()


def mxfp4_dequant(codes: torch.Tensor, scales: torch.Tensor, dtype=torch.float32) -> torch.Tensor:
    """Exact MXFP4 values [e, n, k] (bf16 holds them exactly, as gpt-oss's loader computes them)."""
    e, n, k2 = codes.shape
    mags = torch.tensor(_E2M1, device=codes.device, dtype=dtype)
    nib = torch.stack([codes & 15, codes >> 4], dim=-1).view(e, n, 2 * k2).long()
    val = torch.where(nib >= 8, -mags[nib & 7], mags[nib & 7])
    return val * torch.ldexp(torch.ones((), device=codes.device, dtype=dtype),
                             scales.long() - 127).repeat_interleave(32, dim=2)


def gpt_oss_mlp_block(x, logits, k, w1, b1, w2, b2, alpha=1.702, limit=7.0):
    """gpt-oss's torch MLPBlock (gpt_oss/torch/model.py) after its gate linear: top-k of the logits,
    softmax over the k, mlp1 with gate/up interleaved rows, its swiglu, mlp2, weighted sum — in
    float32 on the dequantized weights (w1 [E, 2I, H] in gpt-oss's row order, w2 [E, H, I]), one
    expert at a time."""
    top = torch.topk(logits.float(), k=k, dim=-1, sorted=True)
    weights = torch.softmax(top.values, dim=1)
    out = torch.zeros((x.shape[0], w2.shape[1]), dtype=torch.float32, device=x.device)
    for j in range(k):
        for ex in top.indices[:, j].unique().tolist():
            rows = (top.indices[:, j] == ex).nonzero().squeeze(1)
            t = x[rows].float() @ w1[ex].T + b1[ex]
            x_glu, x_linear = t[..., ::2], t[..., 1::2]
            x_glu = x_glu.clamp(min=None, max=limit)
            x_linear = x_linear.clamp(min=-limit, max=limit)
            h = x_glu * torch.sigmoid(alpha * x_glu) * (x_linear + 1)
            out[rows] += (h @ w2[ex].T + b2[ex]) * weights[rows, j : j + 1]
    return out, top.indices

"""moekit vs OpenAI's triton_kernels on gpt-oss-120b's MoE layer, side by side in one process (issue 37).

Both sides get the same MXFP4 experts: bf16 N(0, 0.02²) weights in gpt-oss's checkpoint layout (W1
[E, 2I, H] with gate and up rows interleaved, W2 [E, H, I]) quantized once by triton_kernels'
`downcast_to_mxfp` along K (E2M1 codes two per byte, one UE8M0 scale per 32), biases uniform in
[-0.5, 0.5); the same router logits and activations. moekit loads the codes and scales as gpt-oss
stores them (`load_mxfp4_weights(..., gate_up_interleaved=True)`) and runs its FP8-activation layer
(W4A8); triton_kernels runs gpt-oss's own path (routing by `topk`, `matmul_ogs` with the gather, the
fused SwiGLU and the scatter, bf16 activations: W4A16), with the weights in its Hopper layouts as
gpt-oss's `gpt_oss/triton/moe.py` and vLLM build them.

Checked: both outputs against a float32 torch layer on the dequantized weights (`upcast_from_mxfp`),
gpt-oss's activation (clamp 7, alpha 1.702, (u + 1)), at --check-tokens. Timed: each layer call,
routing included, eager, interleaved call by call, a 256 MB L2 flush before each, CUDA events
around the call, median of --reps; then the same as CUDA-graph replays where both capture.

triton_kernels is not on PyPI and its code stays out of this repository: pass the folder that
holds the `triton_kernels` package (`python/triton_kernels` of a triton checkout whose
triton_kernels still has `matmul_ogs`, the API of triton 3.6) with --tk-path.

    python3 bench/peers/triton_kernels_side_by_side.py --tk-path DIR [--tokens 1,64,1024,8192]
"""
from __future__ import annotations

import argparse
import statistics
import sys

import torch

E, TOPK, H, I = 128, 4, 2880, 2880  # gpt-oss-120b
ALPHA, LIMIT = 1.702, 7.0


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tk-path", required=True, help="folder containing the triton_kernels package")
    ap.add_argument("--tokens", default="1,64,1024,8192")
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--check-tokens", type=int, default=64)
    ap.add_argument("--num-warps", type=int, default=8, help="triton_kernels' Hopper scale layout (vLLM: 8)")
    return ap.parse_args()


args = parse_args()
sys.path.insert(0, args.tk_path)

import moekit  # noqa: E402
from side_by_side_common import rel_l2  # noqa: E402
import triton_kernels.swiglu  # noqa: E402
from triton_kernels.matmul_ogs import (FlexCtx, FnSpecs, FusedActivation, GatherIndx, PrecisionConfig,  # noqa: E402
                                       RoutingData, ScatterIndx, matmul_ogs)
from triton_kernels.numerics import InFlexData  # noqa: E402
from triton_kernels.numerics_details.mxfp import downcast_to_mxfp, upcast_from_mxfp  # noqa: E402
from triton_kernels.tensor import FP4, convert_layout, make_ragged_tensor_metadata, wrap_torch_tensor  # noqa: E402
from triton_kernels.tensor_details import layout  # noqa: E402
from triton_kernels.topk import topk  # noqa: E402


def quantize(w_nk):
    """[E, N, K] bf16 → (codes [E, N, K/2] uint8, scales [E, N, K/32] uint8) as gpt-oss stores them,
    triton_kernels' weight and scale in its Hopper layouts, and the dequantized [E, K, N] weight."""
    codes, scales = downcast_to_mxfp(w_nk, torch.uint8, axis=-1)
    ct, st = codes.transpose(-2, -1), scales.transpose(-2, -1)  # K on dim 1, as matmul_ogs takes W [E, K, N]
    w_deq = upcast_from_mxfp(ct, st, torch.bfloat16, axis=1)
    v_layout, v_opts = layout.make_default_matmul_mxfp4_w_layout(mx_axis=1)
    s_layout, s_opts = layout.make_default_matmul_mxfp4_w_scale_layout(mx_axis=1, num_warps=args.num_warps)
    w_tk = convert_layout(wrap_torch_tensor(ct, dtype=FP4), v_layout, **v_opts)
    s_tk = convert_layout(wrap_torch_tensor(st), s_layout, **s_opts)
    return codes.contiguous(), scales.contiguous(), w_tk, s_tk, w_deq


def tk_layer(x, logits, W):
    """gpt-oss's MoE through triton_kernels (gpt_oss/triton/moe.py; routing as triton's bench/distributed.py)."""
    sp = topk(logits, TOPK, apply_softmax=True)
    dispatch, combine = sp.mask_metadata.row_sorted_indx, sp.mask_metadata.col_sorted_indx
    meta = make_ragged_tensor_metadata(sp.mask_metadata.col_sum, dispatch.shape[0])
    rdata = RoutingData(sp.vals.flatten()[combine], meta.slice_sizes, E, TOPK, meta)
    h = matmul_ogs(x, W["w1"], W["b1"], rdata, gather_indx=GatherIndx(combine, dispatch),
                   precision_config=W["pc1"], fused_activation=W["act"])
    return matmul_ogs(h, W["w2"], W["b2"], rdata, scatter_indx=ScatterIndx(dispatch, combine),
                      precision_config=W["pc2"], gammas=rdata.gate_scal)


def reference(x, logits, w1d, b1, w2d, b2):
    """float32 gpt-oss layer on the dequantized weights (W1 rows interleaved: gate even, up odd)."""
    wts, idx = torch.topk(logits.float(), TOPK, dim=-1)
    wts = torch.softmax(wts, dim=-1)
    out = torch.zeros(x.shape[0], H, dtype=torch.float32, device=x.device)
    for e in idx.unique().tolist():
        tok, slot = (idx == e).nonzero(as_tuple=True)
        hh = x[tok].float() @ w1d[e].float() + b1[e]
        g, u = hh[:, ::2].clamp(max=LIMIT), hh[:, 1::2].clamp(min=-LIMIT, max=LIMIT)
        y = (g * torch.sigmoid(ALPHA * g) * (u + 1)) @ w2d[e].float() + b2[e]
        out.index_add_(0, tok, y * wts[tok, slot, None])
    return out


def distinct_logits(t):
    """[t, E] bf16 router logits, each row a permutation of k/16 - 4 (k < E): exact in bf16 and free of
    ties, so that every side picks the same four experts."""
    return (torch.argsort(torch.rand((t, E), device="cuda"), dim=1).float() / 16 - 4).to(torch.bfloat16)


def time_interleaved(calls, reps):
    """Median µs of each call, interleaved call by call, L2 flushed before each."""
    flush = torch.empty(256 * 1024 * 1024, dtype=torch.uint8, device="cuda")
    for f in calls:
        f()
    torch.cuda.synchronize()
    times = [[] for _ in calls]
    for _ in range(reps):
        for i, f in enumerate(calls):
            flush.zero_()
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            f()
            b.record()
            b.synchronize()
            times[i].append(a.elapsed_time(b) * 1e3)
    return [statistics.median(t) for t in times]


def graphed(f):
    """f captured in a CUDA graph (its replay), or None if it does not capture."""
    try:
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            f()
        torch.cuda.current_stream().wait_stream(s)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            f()
        return g.replay
    except Exception as e:  # a side that does not capture is reported as n/a
        print(f"# graph capture failed: {type(e).__name__}: {str(e)[:120]}", file=sys.stderr)
        return None


@torch.no_grad()
def main() -> int:
    torch.manual_seed(0)
    dev = "cuda"
    print(f"# {torch.cuda.get_device_name()}, torch {torch.__version__}, moekit {moekit.__version__}, "
          f"triton_kernels from {args.tk_path}")
    w1 = torch.randn((E, 2 * I, H), dtype=torch.bfloat16, device=dev) * 0.02
    w1_codes, w1_scales, w1_tk, s1_tk, w1d = quantize(w1)
    del w1
    w2 = torch.randn((E, H, I), dtype=torch.bfloat16, device=dev) * 0.02
    w2_codes, w2_scales, w2_tk, s2_tk, w2d = quantize(w2)
    del w2
    b1 = torch.rand((E, 2 * I), dtype=torch.float32, device=dev) - 0.5
    b2 = torch.rand((E, H), dtype=torch.float32, device=dev) - 0.5

    layer = moekit.MoeLayer(E, TOPK, H, I, routing="topk_softmax", limit=LIMIT, weight_format="mxfp4",
                            activation="gpt_oss")
    layer.load_mxfp4_weights(w1_codes, w1_scales, w2_codes, w2_scales, gate_up_interleaved=True, b1=b1, b2=b2)
    W = dict(w1=w1_tk, b1=b1, w2=w2_tk, b2=b2,
             pc1=PrecisionConfig(weight_scale=s1_tk, flex_ctx=FlexCtx(rhs_data=InFlexData())),
             pc2=PrecisionConfig(weight_scale=s2_tk, flex_ctx=FlexCtx(rhs_data=InFlexData())),
             act=FusedActivation(FnSpecs("swiglu", triton_kernels.swiglu.swiglu_fn, ("alpha", "limit"),
                                         reduction_n=2), (ALPHA, LIMIT)))

    t = args.check_tokens
    x = torch.randn((t, H), dtype=torch.bfloat16, device=dev)
    logits = distinct_logits(t)
    ref = reference(x, logits, w1d, b1, w2d, b2)
    e_mk = rel_l2(layer(x, router_logits=logits), ref)
    e_tk = rel_l2(tk_layer(x, logits, W), ref)
    print(f"check T={t}: rel_l2 vs float32 reference moekit {e_mk:.3e}, triton_kernels {e_tk:.3e}")
    del w1d, w2d, ref
    torch.cuda.empty_cache()
    wrong = not (e_mk < 2e-2 and e_tk < 2e-2)

    print(f"{'T':>6} {'tk us':>9} {'moekit us':>10} {'tk/moekit':>9} {'tk graph':>9} {'mk graph':>9} {'ratio':>6}")
    for t in [int(v) for v in args.tokens.split(",")]:
        x = torch.randn((t, H), dtype=torch.bfloat16, device=dev)
        logits = distinct_logits(t)
        y_mk = torch.empty((t, H), dtype=torch.bfloat16, device=dev)
        mk = lambda: layer(x, router_logits=logits, out=y_mk)  # noqa: E731
        tk = lambda: tk_layer(x, logits, W)  # noqa: E731
        t_tk, t_mk = time_interleaved([tk, mk], args.reps)
        g_tk, g_mk = graphed(tk), graphed(mk)
        gt = time_interleaved([g_tk, g_mk], args.reps) if g_tk and g_mk else None
        g_cols = f"{gt[0]:9.1f} {gt[1]:9.1f} {gt[0] / gt[1]:6.2f}" if gt else f"{'n/a':>9} {'n/a':>9} {'':>6}"
        print(f"{t:6d} {t_tk:9.1f} {t_mk:10.1f} {t_tk / t_mk:9.2f} {g_cols}", flush=True)
    if wrong:
        print("WRONG RESULT: a relative L2 error above 2e-2")
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())

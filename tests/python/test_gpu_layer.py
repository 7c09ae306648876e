"""moekit.MoeLayer on an sm_90 GPU: against Hugging Face transformers' MoE blocks (small random
configs, no download), against the float64 SPEC §3 reference, under torch.compile and CUDA graphs,
and its argument errors."""
import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available() or torch.cuda.get_device_capability() != (9, 0):
    pytest.skip("needs a CUDA sm_90 (Hopper) GPU", allow_module_level=True)

import moekit  # noqa: E402
from moekit_torch_ref import (  # noqa: E402
    checkpoint_mxfp4,
    checkpoint_weights,
    dequant_w,
    gpt_oss_mlp_block,
    moe_spec_ref,
    mxfp4_dequant,
    mxfp4_fp8_form,
    rel_l2,
)

DEV = "cuda"
SPEC_TOL = 6e-3  # docs/accuracy.md: ≤ 3.4e-3 measured vs the float64 SPEC reference (≥ 16 rows)
HF_TOL = 8e-2    # vs the unquantized float32 layer: 6.1e-2 … 6.5e-2 measured (the FP8 format itself)


def _gen(seed):
    return torch.Generator(device=DEV).manual_seed(seed)


def _make_layer(e, k, h, i, routing=None, seed=0, **kw):
    g = _gen(seed)
    w1, s1 = checkpoint_weights(e, 2 * i, h, DEV, g)
    w2, s2 = checkpoint_weights(e, h, i, DEV, g)
    layer = moekit.MoeLayer(e, k, h, i, routing=routing, **kw)
    layer.load_weights(w1, s1, w2, s2)
    return layer, (w1, s1, w2, s2)


# ---------------------------------------------------------------------------------------------
# Hugging Face blocks
# ---------------------------------------------------------------------------------------------
def _hf_force_eager_experts(cfg):
    for attr in ("_experts_implementation", "experts_implementation"):
        if hasattr(cfg, attr):
            try:
                setattr(cfg, attr, "eager")
            except Exception:  # noqa: BLE001
                pass


def _hf_load_experts(experts, w1d, w2d):
    """Copy dequantized W1 [E, 2I, H] (gate rows, then up) and W2 [E, H, I] into HF experts."""
    gu, dn = getattr(experts, "gate_up_proj", None), getattr(experts, "down_proj", None)
    if not isinstance(gu, torch.nn.Parameter) or not isinstance(dn, torch.nn.Parameter):
        pytest.fail(f"unexpected HF experts module {type(experts).__name__}: no fused gate_up_proj/down_proj "
                    "parameters (transformers < 5?); adapt _hf_load_experts")
    e, two_i, h = w1d.shape
    with torch.no_grad():
        if tuple(gu.shape) == (e, two_i, h):
            gu.copy_(w1d)
        elif tuple(gu.shape) == (e, h, two_i):
            gu.copy_(w1d.transpose(1, 2))
        else:
            pytest.fail(f"HF gate_up_proj has shape {tuple(gu.shape)}, expected [E, 2I, H] or [E, H, 2I]")
        if tuple(dn.shape) == tuple(w2d.shape):
            dn.copy_(w2d)
        else:
            dn.copy_(w2d.transpose(1, 2))


def _capture_hf_routing(moe):
    """Forward pre-hook on moe.experts capturing (top_k_index, top_k_weights) HF routed with."""
    seen = {}

    def hook(mod, args, kwargs):
        vals = list(args[1:]) + [kwargs[n] for n in ("top_k_index", "top_k_weights") if n in kwargs]
        if len(vals) < 2:
            raise AssertionError("could not capture HF's routing from the experts call")
        seen["ids"], seen["weights"] = vals[0], vals[1]

    moe.experts.register_forward_pre_hook(hook, with_kwargs=True)
    return seen


class _Zero(torch.nn.Module):
    def forward(self, x):
        return torch.zeros_like(x)


def _compare_routing(hf_ids, hf_w, ids, w, ok_rows):
    """Same expert sets (HF's topk is unsorted) and weights on the tie-free rows."""
    hi, order_h = hf_ids[ok_rows].long().sort(dim=1)
    mi, order_m = ids[ok_rows].long().sort(dim=1)
    assert torch.equal(hi, mi), "routed expert ids differ from HF's router"
    hw = hf_w[ok_rows].double().gather(1, order_h)
    mw = w[ok_rows].double().gather(1, order_m)
    assert torch.allclose(hw, mw, rtol=1e-5, atol=1e-6), f"routed weights differ: {(hw - mw).abs().max().item():.3e}"


def _check_layer_against(moe_hf, layer, weights, x, logits, seen, ok_rows, limit=0.0):
    w1, s1, w2, s2 = weights
    with torch.no_grad():
        y_hf = moe_hf(x.float()[None])
    if isinstance(y_hf, tuple):  # some versions also return the router logits
        y_hf = y_hf[0]
    y_hf = y_hf.reshape(x.shape).float()
    y = layer(x, router_logits=logits)
    torch.cuda.synchronize()
    ids, w = moekit.route(logits, layer.routing, layer.top_k)
    assert ok_rows.sum() >= 0.9 * x.shape[0], "too many near-tied rows to compare routing"
    _compare_routing(seen["ids"], seen["weights"], ids, w, ok_rows)
    err_hf = rel_l2(y, y_hf)
    err_spec = rel_l2(y, moe_spec_ref(x, ids, w, w1, s1, w2, s2, limit=limit))
    print(f"rel L2: vs HF (unquantized float32) {err_hf:.3e}, vs SPEC float64 reference {err_spec:.3e}")
    assert err_spec < SPEC_TOL, f"vs SPEC reference: {err_spec:.3e}"
    assert err_hf < HF_TOL, f"vs HF: {err_hf:.3e}"
    # Routing inside the layer equals routing outside + the ids path.
    y_ids = layer(x, topk_ids=ids, topk_weights=w)
    assert rel_l2(y_ids, y) < 1e-3


@pytest.mark.parametrize("t", [64, 200])
def test_layer_vs_hf_deepseek_v3(t):
    dsv3 = pytest.importorskip("transformers.models.deepseek_v3.modeling_deepseek_v3")
    from transformers import DeepseekV3Config

    e, k, h, i, n_group, topk_group, scale = 16, 4, 512, 256, 4, 2, 2.5
    cfg = DeepseekV3Config(
        hidden_size=h, intermediate_size=1024, moe_intermediate_size=i, n_routed_experts=e,
        num_experts_per_tok=k, n_group=n_group, topk_group=topk_group, routed_scaling_factor=scale,
        norm_topk_prob=True, n_shared_experts=1, hidden_act="silu", num_hidden_layers=1,
    )
    _hf_force_eager_experts(cfg)
    moe = dsv3.DeepseekV3MoE(cfg).to(DEV).float().eval()
    moe.shared_experts = _Zero()  # moekit computes the routed experts only
    g = _gen(100 + t)
    bias = torch.rand((e,), generator=g, device=DEV) * 0.1  # positive: HF masks dropped groups with 0.0
    with torch.no_grad():
        moe.gate.weight.copy_(torch.randn((e, h), generator=g, device=DEV) * 0.05)
        moe.gate.e_score_correction_bias.copy_(bias)
    routing = moekit.Routing("sigmoid_grouped", renormalize=True, num_groups=n_group, topk_groups=topk_group,
                             routed_scaling_factor=scale, correction_bias=bias)
    layer, weights = _make_layer(e, k, h, i, routing=routing, seed=t)
    _hf_load_experts(moe.experts, dequant_w(weights[0], weights[1]).float(), dequant_w(weights[2], weights[3]).float())
    seen = _capture_hf_routing(moe)
    x = torch.randn((t, h), generator=g, device=DEV).to(torch.bfloat16)
    logits = torch.nn.functional.linear(x.float(), moe.gate.weight.float())
    # Tie-free rows: group margin and expert margin (in the kept groups), float64.
    b = logits.double().sigmoid() + bias.double()
    gs = b.view(t, n_group, e // n_group).topk(2, dim=2).values.sum(dim=2)
    gtop = gs.topk(topk_group + 1, dim=1).values
    gmask = torch.zeros_like(gs).scatter_(1, gs.topk(topk_group, dim=1).indices, 1.0).repeat_interleave(e // n_group, dim=1)
    btop = b.masked_fill(gmask == 0, -1.0).topk(k + 1, dim=1).values
    ok = (gtop[:, topk_group - 1] - gtop[:, topk_group] > 1e-5) & (btop[:, k - 1] - btop[:, k] > 1e-5)
    _check_layer_against(moe, layer, weights, x, logits, seen, ok)


@pytest.mark.parametrize("t,h,i", [(64, 512, 256), (200, 384, 192)])
def test_layer_vs_hf_qwen3_moe(t, h, i):
    q3 = pytest.importorskip("transformers.models.qwen3_moe.modeling_qwen3_moe")
    from transformers import Qwen3MoeConfig

    e, k = 32, 4
    cfg = Qwen3MoeConfig(
        hidden_size=h, intermediate_size=1024, moe_intermediate_size=i, num_experts=e,
        num_experts_per_tok=k, norm_topk_prob=True, hidden_act="silu", num_hidden_layers=1,
    )
    _hf_force_eager_experts(cfg)
    moe = q3.Qwen3MoeSparseMoeBlock(cfg).to(DEV).float().eval()
    g = _gen(200 + t)
    gate_w = torch.randn((e, h), generator=g, device=DEV) * 0.05
    with torch.no_grad():
        moe.gate.weight.copy_(gate_w)
    layer, weights = _make_layer(e, k, h, i, routing=moekit.Routing("softmax_topk", renormalize=True), seed=t)
    _hf_load_experts(moe.experts, dequant_w(weights[0], weights[1]).float(), dequant_w(weights[2], weights[3]).float())
    seen = _capture_hf_routing(moe)
    x = torch.randn((t, h), generator=g, device=DEV).to(torch.bfloat16)
    logits = torch.nn.functional.linear(x.float(), gate_w)
    top = logits.double().topk(k + 1, dim=1).values
    ok = (top[:, k - 1] - top[:, k]) > 1e-5
    _check_layer_against(moe, layer, weights, x, logits, seen, ok)


# ---------------------------------------------------------------------------------------------
# SPEC reference on moekit's own paths
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("limit", [0.0, 0.05])
def test_layer_ids_vs_spec_reference(limit):
    e, k, h, i, t = 8, 2, 384, 320, 96
    layer, (w1, s1, w2, s2) = _make_layer(e, k, h, i, limit=limit, seed=5)
    g = _gen(6)
    x = torch.randn((t, h), generator=g, device=DEV).to(torch.bfloat16)
    ids = torch.stack([torch.randperm(e, generator=g, device=DEV)[:k] for _ in range(t)]).int()
    ids[3, 1] = -1  # "no expert"
    w = (torch.rand((t, k), generator=g, device=DEV) + 0.1).requires_grad_()  # read as data (inference only)
    out = torch.full((t, h), 5.0, dtype=torch.bfloat16, device=DEV)
    y = layer(x, topk_ids=ids, topk_weights=w, out=out)
    assert y is out
    err = rel_l2(y, moe_spec_ref(x, ids, w, w1, s1, w2, s2, limit=limit))
    print(f"rel L2 vs SPEC float64 reference (limit {limit}): {err:.3e}")
    assert err < SPEC_TOL


def test_mxfp4_layer_is_the_fp8_layer_on_its_fp8_form():
    """MXFP4 experts (weight_format="mxfp4") compute exactly the FP8 layer on moekit's FP8 form of
    them (deterministic mode, same chains), and gpt-oss's interleaved W1 rows load to the same layer."""
    e, k, h, i, t = 8, 2, 512, 192, 70
    g = _gen(9)
    c1, s1 = checkpoint_mxfp4(e, 2 * i, h, DEV, g)
    c2, s2 = checkpoint_mxfp4(e, h, i, DEV, g)
    kw = dict(deterministic=True, gemm1_promote_k=64)
    mx = moekit.MoeLayer(e, k, h, i, weight_format="mxfp4", **kw)
    mx.load_mxfp4_weights(c1, s1, w2=c2.view(e, h, i // 32, 16), w2_scale=s2)  # gpt-oss's blocks shape too
    fp8 = moekit.MoeLayer(e, k, h, i, **kw)
    q1, sb1 = mxfp4_fp8_form(c1, s1)
    q2, sb2 = mxfp4_fp8_form(c2, s2)
    fp8.load_weights(q1, sb1, q2, sb2)
    order = torch.tensor([2 * r if r < i else 2 * (r - i) + 1 for r in range(2 * i)], device=DEV)
    gpt_c1, gpt_s1 = torch.empty_like(c1), torch.empty_like(s1)
    gpt_c1[:, order], gpt_s1[:, order] = c1, s1  # stored row 2r: gate row r; 2r + 1: up row r
    gpt = moekit.MoeLayer(e, k, h, i, weight_format="mxfp4", **kw)
    gpt.load_mxfp4_weights(gpt_c1, gpt_s1, c2, s2, gate_up_interleaved=True)
    x = torch.randn((t, h), generator=g, device=DEV).to(torch.bfloat16)
    ids = torch.stack([torch.randperm(e, generator=g, device=DEV)[:k] for _ in range(t)]).int()
    w = torch.rand((t, k), generator=g, device=DEV) + 0.1
    y = mx(x, topk_ids=ids, topk_weights=w)
    assert torch.equal(y, fp8(x, topk_ids=ids, topk_weights=w))
    assert torch.equal(y, gpt(x, topk_ids=ids, topk_weights=w))
    err = rel_l2(y, moe_spec_ref(x, ids, w, q1, sb1, q2, sb2))
    print(f"mxfp4 rel L2 vs SPEC float64 reference of its FP8 form: {err:.3e}")
    assert err < SPEC_TOL


def test_gpt_oss_layer_vs_its_mlp_block():
    """gpt-oss's layer (MXFP4 experts as its checkpoints store them, biases, clamp 7, its swiglu,
    topk_softmax routing) against gpt-oss's MLPBlock computed in float32 on the same (exact) weights:
    the distance is the FP8 activations' noise; the routed ids must be identical."""
    e, k, h, i, t = 32, 4, 2880, 2880, 64
    g = _gen(31)
    c1, s1 = checkpoint_mxfp4(e, 2 * i, h, DEV, g)  # rows in gpt-oss's order (gate 2r, up 2r + 1)
    c2, s2 = checkpoint_mxfp4(e, h, i, DEV, g)
    b1 = (torch.randn((e, 2 * i), generator=g, device=DEV) * 0.5).to(torch.bfloat16)
    b2 = (torch.randn((e, h), generator=g, device=DEV) * 0.5).to(torch.bfloat16)
    layer = moekit.MoeLayer(e, k, h, i, routing="topk_softmax", limit=7.0, weight_format="mxfp4",
                            activation="gpt_oss")
    layer.load_mxfp4_weights(c1.view(e, 2 * i, h // 32, 16), s1, c2.view(e, h, i // 32, 16), s2,
                             gate_up_interleaved=True, b1=b1, b2=b2)
    x = torch.randn((t, h), generator=g, device=DEV).to(torch.bfloat16)
    gate_w = torch.randn((e, h), generator=g, device=DEV) * 0.05
    gate_b = torch.randn((e,), generator=g, device=DEV) * 0.1
    logits = torch.nn.functional.linear(x.float(), gate_w, gate_b)
    y = layer(x, router_logits=logits)
    ref, ref_ids = gpt_oss_mlp_block(x, logits, k, mxfp4_dequant(c1, s1), b1.float(), mxfp4_dequant(c2, s2),
                                     b2.float())
    ids, _ = moekit.route(logits, layer.routing, k)
    top = logits.double().topk(k + 1, dim=1).values
    ok = (top[:, k - 1] - top[:, k]) > 1e-5
    assert torch.equal(ids[ok].long().sort(dim=1).values, ref_ids[ok].long().sort(dim=1).values)
    err = rel_l2(y, ref)
    print(f"gpt-oss layer (MXFP4, FP8 activations) vs its float32 MLPBlock: rel L2 {err:.3e}")
    assert err < HF_TOL


def test_layer_expert_parallel_slice():
    e, k, h, i, t = 8, 2, 256, 256, 64
    g = _gen(8)
    w1, s1 = checkpoint_weights(4, 2 * i, h, DEV, g)
    w2, s2 = checkpoint_weights(4, h, i, DEV, g)
    layer = moekit.MoeLayer(e, k, h, i, expert_parallel=(4, 4))
    layer.load_weights(w1, s1, w2, s2)
    x = torch.randn((t, h), generator=g, device=DEV).to(torch.bfloat16)
    ids = torch.stack([torch.randperm(e, generator=g, device=DEV)[:k] for _ in range(t)]).int()
    w = torch.rand((t, k), generator=g, device=DEV) + 0.1
    y = layer(x, topk_ids=ids, topk_weights=w)
    ref = moe_spec_ref(x, ids, w, w1, s1, w2, s2, local_offset=4)
    assert rel_l2(y, ref) < SPEC_TOL
    no_local = ~((ids >= 4).any(dim=1))
    assert no_local.any() and torch.all(y[no_local] == 0), "tokens without a local expert get y = 0"


def test_layer_zero_tokens():
    layer, _ = _make_layer(8, 2, 256, 128, routing="softmax_topk")
    y = layer(torch.empty((0, 256), dtype=torch.bfloat16, device=DEV), router_logits=torch.empty((0, 8), device=DEV))
    assert y.shape == (0, 256) and y.dtype == torch.bfloat16


# ---------------------------------------------------------------------------------------------
# torch.compile and CUDA graphs
# ---------------------------------------------------------------------------------------------
class _Block(torch.nn.Module):
    def __init__(self, layer, h):
        super().__init__()
        self.moe = layer
        self.norm = torch.nn.LayerNorm(h, device=DEV, dtype=torch.bfloat16)

    def forward(self, x, logits):
        return x + self.moe(self.norm(x), router_logits=logits)


def test_layer_torch_compile_fullgraph_equals_eager():
    e, k, h, i, t = 16, 4, 512, 256, 48
    layer, _ = _make_layer(e, k, h, i, routing=moekit.Routing("softmax_topk", renormalize=True), deterministic=True)
    block = _Block(layer, h)
    g = _gen(21)
    x = torch.randn((t, h), generator=g, device=DEV).to(torch.bfloat16)
    logits = torch.randn((t, e), generator=g, device=DEV)
    eager = block(x, logits)
    compiled = torch.compile(block, fullgraph=True)(x, logits)
    assert torch.equal(eager, compiled)
    assert eager.abs().sum() > 0


def test_layer_cuda_graph_replay_with_new_logits():
    e, k, h, i, t = 16, 4, 512, 256, 8
    routing = moekit.Routing("sigmoid_grouped", renormalize=True, num_groups=4, topk_groups=2,
                             routed_scaling_factor=2.5, correction_bias=torch.zeros(e, device=DEV))
    layer, _ = _make_layer(e, k, h, i, routing=routing, deterministic=True)
    g = _gen(22)
    x_s = torch.randn((t, h), generator=g, device=DEV).to(torch.bfloat16)
    logits_s = torch.randn((t, e), generator=g, device=DEV)
    layer.prepare(t)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        y_s = layer(x_s, router_logits=logits_s)
    for seed in (23, 24):
        x_new = torch.randn((t, h), generator=_gen(seed), device=DEV).to(torch.bfloat16)
        logits_new = torch.randn((t, e), generator=_gen(seed + 100), device=DEV)
        x_s.copy_(x_new)
        logits_s.copy_(logits_new)
        graph.replay()
        eager = layer(x_new, router_logits=logits_new)
        torch.cuda.synchronize()
        assert torch.equal(y_s, eager), f"replay {seed} differs from eager"
    with pytest.raises(RuntimeError, match="before"):
        with torch.cuda.graph(torch.cuda.CUDAGraph()):
            layer.prepare(t)


# ---------------------------------------------------------------------------------------------
# Errors: raised before anything launches
# ---------------------------------------------------------------------------------------------
def test_layer_errors_before_launch():
    e, k, h, i, t = 8, 2, 256, 128, 4
    layer, _ = _make_layer(e, k, h, i, routing="softmax_topk")
    x = torch.randn((t, h), device=DEV).to(torch.bfloat16)
    ids = torch.zeros((t, k), dtype=torch.int32, device=DEV)
    w = torch.ones((t, k), device=DEV)
    logits = torch.randn((t, e), device=DEV)
    out = torch.full((t, h), 9.0, dtype=torch.bfloat16, device=DEV)
    cases = [
        (TypeError, "x", dict(x=x.float(), router_logits=logits)),
        (ValueError, "CUDA", dict(x=x.cpu(), router_logits=logits)),
        (ValueError, "x", dict(x=x[:, :128], router_logits=logits)),
        (ValueError, "contiguous", dict(x=x.t().contiguous().t(), router_logits=logits)),
        (TypeError, "topk_ids", dict(x=x, topk_ids=ids.long(), topk_weights=w)),
        (TypeError, "topk_weights", dict(x=x, topk_ids=ids, topk_weights=w.half())),
        (ValueError, "topk_ids", dict(x=x, topk_ids=ids[:, :1].contiguous(), topk_weights=w)),
        (ValueError, "not both", dict(x=x, router_logits=logits, topk_ids=ids, topk_weights=w)),
        (ValueError, "router_logits", dict(x=x, router_logits=logits[:, :4].contiguous())),
        (ValueError, "both", dict(x=x, topk_ids=ids)),
        (TypeError, "router_logits", dict(x=x, router_logits=logits.half())),
    ]
    for exc, match, kw in cases:
        with pytest.raises(exc, match=match):
            layer(out=out, **kw)
    with pytest.raises(TypeError, match="out"):
        layer(x, router_logits=logits, out=out.float())
    torch.cuda.synchronize()
    assert torch.all(out == 9.0), "a failed call wrote y"
    no_routing, _ = _make_layer(e, k, h, i)
    with pytest.raises(ValueError, match="no routing"):
        no_routing(x, router_logits=logits)
    fresh = moekit.MoeLayer(e, k, h, i)
    with pytest.raises(RuntimeError, match="load_weights"):
        fresh(x, topk_ids=ids, topk_weights=w)


def test_op_path_equals_eager_fast_path_and_checks_its_tensors():
    # MoeLayer's eager call passes raw addresses after its own checks; the registered op (what
    # torch.compile runs) goes through _C's DLPack checks. Same result; the op still rejects bad input.
    e, k, h, i, t = 8, 2, 256, 128, 16
    layer, _ = _make_layer(e, k, h, i, routing="softmax_topk", deterministic=True)
    g = _gen(31)
    x = torch.randn((t, h), generator=g, device=DEV).to(torch.bfloat16)
    logits = torch.randn((t, e), generator=g, device=DEV).to(torch.bfloat16)
    eager = layer(x, router_logits=logits)
    y = torch.empty_like(eager)
    torch.ops.moekit.moe_forward(layer._handle, x, logits, None, None, y)
    assert torch.equal(y, eager)
    with pytest.raises(ValueError, match="x"):
        torch.ops.moekit.moe_forward(layer._handle, x[:, :128].contiguous(), logits, None, None, y)

"""moekit's DeepGEMM-named torch ops on an sm_90 GPU, against torch references (SPEC §1-2)."""
import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available() or torch.cuda.get_device_capability() != (9, 0):
    pytest.skip("needs a CUDA sm_90 (Hopper) GPU", allow_module_level=True)

import moekit  # noqa: E402
from moekit_torch_ref import dequant_act, dequant_w, quant_1x128, quant_128x128, rel_l2  # noqa: E402

DEV = "cuda"
GEMM_TOL = 2e-3  # SPEC §2: BF16 output rounding dominates


def _gen(seed):
    return torch.Generator(device=DEV).manual_seed(seed)


def _codes_equal(a, b):
    return torch.equal(a.view(torch.uint8), b.view(torch.uint8))


@pytest.mark.parametrize("m,k", [(1, 128), (37, 320), (128, 512), (300, 2880)])
@pytest.mark.parametrize("ue8m0", [False, True])
def test_per_token_group_quant_exact(m, k, ue8m0):
    x = (torch.randn((m, k), generator=_gen(m + k), device=DEV) * 3).to(torch.bfloat16)
    x[0, :5] = 0  # a partly zero group
    q, s = moekit.per_token_group_quant_fp8(x, 128, ue8m0=ue8m0)
    qr, sr = quant_1x128(x, ue8m0)
    assert q.dtype == torch.float8_e4m3fn and q.shape == (m, k)
    assert s.dtype == torch.float32 and s.shape == (m, (k + 127) // 128)
    assert s.stride() == (1, moekit.sfa_ld(m)), "scales must be a view of the physical layout"
    assert torch.equal(s, sr), f"scales differ: max |d| = {(s - sr).abs().max().item()}"
    assert _codes_equal(q, qr), f"{(q.view(torch.uint8) != qr.view(torch.uint8)).sum().item()} codes differ"


@pytest.mark.parametrize("n,k", [(256, 512), (200, 320), (64, 2880)])
@pytest.mark.parametrize("ue8m0", [False, True])
def test_per_block_quant_exact(n, k, ue8m0):
    w = (torch.randn((n, k), generator=_gen(n * k), device=DEV) * 0.02).to(torch.bfloat16)
    q, s = moekit.per_block_quant_fp8(w, ue8m0=ue8m0)
    qr, sr = quant_128x128(w, ue8m0)
    assert torch.equal(s, sr)
    assert _codes_equal(q, qr)


@pytest.mark.parametrize("n", [256, 192])  # 192: blocks per expert not a multiple of 128 rows -> per-expert path
def test_per_block_quant_3d(n):
    w = (torch.randn((3, n, 256), generator=_gen(n), device=DEV) * 0.02).to(torch.bfloat16)
    q, s = moekit.per_block_quant_fp8(w)
    assert q.shape == (3, n, 256) and s.shape == (3, (n + 127) // 128, 2)
    for e in range(3):
        qr, sr = quant_128x128(w[e])
        assert torch.equal(s[e], sr) and _codes_equal(q[e], qr), f"expert {e}"


def _operands(m, n, k, seed):
    g = _gen(seed)
    a, sa = moekit.per_token_group_quant_fp8(torch.randn((m, k), generator=g, device=DEV).to(torch.bfloat16))
    b, sb = moekit.per_block_quant_fp8((torch.randn((n, k), generator=g, device=DEV) * 0.02).to(torch.bfloat16))
    return a, sa, b, sb


@pytest.mark.parametrize("m,n,k", [(1, 256, 512), (100, 384, 320), (512, 256, 1024)])
def test_fp8_gemm_nt(m, n, k):
    a, sa, b, sb = _operands(m, n, k, m + n + k)
    out = torch.empty((m, n), dtype=torch.bfloat16, device=DEV)
    moekit.fp8_gemm_nt((a, sa), (b, sb), out)
    ref = dequant_act(a, sa) @ dequant_w(b, sb).T
    err = rel_l2(out, ref)
    assert err < GEMM_TOL, f"rel L2 {err:.3e}"
    # DeepGEMM-style row-major sfa (copied into the physical layout) gives the same bits.
    out2 = torch.empty_like(out)
    moekit.fp8_gemm_nt((a, sa.contiguous()), (b, sb), out2)
    assert torch.equal(out, out2)


def test_sfa_to_physical_no_copy_for_physical_view():
    a, sa, _, _ = _operands(37, 128, 320, 1)
    phys = moekit.sfa_to_physical(sa, 37, 320)
    assert phys.data_ptr() == sa.data_ptr() and phys.shape == (3, moekit.sfa_ld(37))
    phys2 = moekit.sfa_to_physical(sa.contiguous(), 37, 320)
    assert phys2.data_ptr() != sa.data_ptr()
    assert torch.equal(phys2[:, :37], phys[:, :37])


def _contiguous_layout(counts):
    rows, idx = 0, []
    for e, c in enumerate(counts):
        seg = (c + 127) // 128 * 128
        idx += [e] * c + [-1] * (seg - c)
        rows += seg
    return torch.tensor(idx, dtype=torch.int32, device=DEV)


def test_m_grouped_contiguous():
    counts, n, k = [5, 0, 130, 17], 256, 384
    m_indices = _contiguous_layout(counts)
    rows, e = m_indices.numel(), len(counts)
    g = _gen(7)
    a, sa = moekit.per_token_group_quant_fp8(torch.randn((rows, k), generator=g, device=DEV).to(torch.bfloat16))
    b, sb = moekit.per_block_quant_fp8((torch.randn((e, n, k), generator=g, device=DEV) * 0.02).to(torch.bfloat16))
    out = torch.full((rows, n), 7.0, dtype=torch.bfloat16, device=DEV)
    moekit.check_m_indices(m_indices, e)  # must not raise
    moekit.m_grouped_fp8_gemm_nt_contiguous((a, sa), (b, sb), out, m_indices)
    ad, bd = dequant_act(a, sa), dequant_w(b, sb)
    valid = m_indices >= 0
    for grp in range(e):
        r = (m_indices == grp).nonzero().flatten()
        if r.numel():
            err = rel_l2(out[r], ad[r] @ bd[grp].T)
            assert err < GEMM_TOL, f"group {grp}: rel L2 {err:.3e}"
    assert torch.all(out[~valid] == 7.0), "padding rows must not be written"


def test_m_grouped_contiguous_bad_layout():
    good = _contiguous_layout([5, 0, 130, 17])
    bad = good.clone()
    bad[:5] = 2  # group 2 first: not moekit's order
    bad[128:133] = 0
    with pytest.raises(ValueError, match="contiguous layout"):
        moekit.check_m_indices(bad, 4)
    with pytest.raises(ValueError, match="outside"):
        moekit.check_m_indices(torch.where(good == 3, 4, good).int(), 4)
    rows, n, k = bad.numel(), 128, 128
    a, sa = moekit.per_token_group_quant_fp8(torch.randn((rows, k), device=DEV).to(torch.bfloat16))
    b, sb = moekit.per_block_quant_fp8((torch.randn((4, n, k), device=DEV) * 0.02).to(torch.bfloat16))
    out = torch.zeros((rows, n), dtype=torch.bfloat16, device=DEV)
    moekit.m_grouped_fp8_gemm_nt_contiguous((a, sa), (b, sb), out, bad)
    assert torch.isnan(out).all(), "a mismatching layout must poison out with NaN"
    with pytest.raises(ValueError, match="multiple of 128"):
        moekit.m_grouped_fp8_gemm_nt_contiguous((a[:100], sa[:100]), (b, sb), out[:100], bad[:100])


@pytest.mark.parametrize("physical_sfa", [True, False])
def test_m_grouped_masked(physical_sfa):
    e, max_m, n, k = 3, 64, 256, 384
    g = _gen(11)
    x = torch.randn((e * max_m, k), generator=g, device=DEV).to(torch.bfloat16)
    a2, sa2 = moekit.per_token_group_quant_fp8(x)  # physical over E*max_m rows
    a = a2.view(e, max_m, k)
    if physical_sfa:
        sfa = sa2.as_strided((e, max_m, (k + 127) // 128), (max_m, 1, moekit.sfa_ld(e * max_m)))
    else:
        sfa = sa2.contiguous().view(e, max_m, -1)  # row-major: copied
    b, sb = moekit.per_block_quant_fp8((torch.randn((e, n, k), generator=g, device=DEV) * 0.02).to(torch.bfloat16))
    masked_m = torch.tensor([0, 7, 64], dtype=torch.int32, device=DEV)
    out = torch.full((e, max_m, n), 7.0, dtype=torch.bfloat16, device=DEV)
    moekit.m_grouped_fp8_gemm_nt_masked((a, sfa), (b, sb), out, masked_m, expected_m=8)
    ad, bd = dequant_act(a2, sa2).view(e, max_m, k), dequant_w(b, sb)
    for grp, cnt in enumerate([0, 7, 64]):
        if cnt:
            err = rel_l2(out[grp, :cnt], ad[grp, :cnt] @ bd[grp].T)
            assert err < GEMM_TOL, f"group {grp}: rel L2 {err:.3e}"
        assert torch.all(out[grp, cnt:] == 7.0), f"group {grp}: rows past masked_m were written"


def _margin_rows(score, k, min_gap=1e-5):
    """Rows whose k-th and (k+1)-th best scores differ by more than min_gap (no near-ties)."""
    top = score.double().topk(k + 1, dim=1).values
    return (top[:, k - 1] - top[:, k]) > min_gap


@pytest.mark.parametrize("renormalize", [False, True])
def test_route_softmax_topk(renormalize):
    t, e, k = 200, 64, 6
    logits = torch.randn((t, e), generator=_gen(3), device=DEV)
    ids, w = moekit.route(logits, moekit.Routing("softmax_topk", renormalize=renormalize), k)
    p = logits.double().softmax(dim=1)
    ref_w, ref_ids = p.topk(k, dim=1)
    if renormalize:
        ref_w = ref_w / ref_w.sum(dim=1, keepdim=True)
    ok = _margin_rows(logits, k)
    assert ok.sum() > 0.9 * t
    assert torch.equal(ids[ok].long(), ref_ids[ok]), "ids (slots in decreasing score)"
    assert torch.allclose(w[ok].double(), ref_w[ok], rtol=1e-5, atol=1e-7)


def test_route_bf16_logits_and_zero_tokens():
    logits = torch.randn((100, 16), generator=_gen(4), device=DEV).to(torch.bfloat16)
    ids, w = moekit.route(logits, "topk_softmax", 2)
    ref = logits.float().topk(3, dim=1)
    tie_free = (ref.values[:, 0] > ref.values[:, 1]) & (ref.values[:, 1] > ref.values[:, 2])
    assert tie_free.sum() > 30
    assert torch.equal(ids[tie_free].long(), ref.indices[tie_free, :2])
    ref_w = ref.values[:, :2].double().softmax(dim=1)
    assert torch.allclose(w[tie_free].double(), ref_w[tie_free], rtol=1e-5, atol=1e-7)
    ids0, w0 = moekit.route(torch.empty((0, 16), device=DEV), "softmax_topk", 2)
    assert ids0.shape == (0, 2) and w0.shape == (0, 2)


def test_op_errors_before_launch():
    a, sa, b, sb = _operands(16, 128, 256, 5)
    out = torch.full((16, 128), 3.0, dtype=torch.bfloat16, device=DEV)
    with pytest.raises(TypeError, match="out"):
        moekit.fp8_gemm_nt((a, sa), (b, sb), out.float())
    with pytest.raises(ValueError, match="b"):
        moekit.fp8_gemm_nt((a, sa), (b[:, :128], sb), out)
    with pytest.raises(ValueError, match="CUDA"):
        moekit.fp8_gemm_nt((a, sa), (b, sb.cpu()), out)
    with pytest.raises(TypeError, match="pair"):
        moekit.fp8_gemm_nt(a, (b, sb), out)
    with pytest.raises(ValueError, match="group_size"):
        moekit.per_token_group_quant_fp8(torch.zeros((4, 128), dtype=torch.bfloat16, device=DEV), 64)
    with pytest.raises(TypeError, match="x"):
        moekit.per_token_group_quant_fp8(torch.zeros((4, 128), device=DEV))
    torch.cuda.synchronize()
    assert torch.all(out == 3.0)


def test_ops_under_torch_compile():
    a, sa, b, sb = _operands(64, 256, 384, 9)

    def f(x, b, sb):
        q, s = moekit.per_token_group_quant_fp8(x)
        out = torch.empty((x.shape[0], b.shape[0]), dtype=torch.bfloat16, device=x.device)
        moekit.fp8_gemm_nt((q, s), (b, sb), out)
        return out

    x = torch.randn((64, 384), generator=_gen(9), device=DEV).to(torch.bfloat16)
    eager = f(x, b, sb)
    compiled = torch.compile(f, fullgraph=True)(x, b, sb)
    assert torch.equal(eager, compiled)


def test_bench_fills_are_deterministic_and_well_formed():
    from moekit import _C

    q = torch.empty((3, 200, 256), dtype=torch.float8_e4m3fn, device=DEV)
    s = torch.empty((3, 2, 2), dtype=torch.float32, device=DEV)
    _C.bench_fill_checkpoint_weights(q, s, 0.02, 7)
    # 128x128 quantization of N(0, 0.02^2): every block's largest |code| is 448, scales ~ amax / 448.
    a = q.float().abs()
    for e in range(3):
        for nb in range(2):
            for kb in range(2):
                assert a[e, nb * 128:(nb + 1) * 128, kb * 128:(kb + 1) * 128].max().item() == 448.0
    assert torch.all((s > 0.02 * 2.5 / 448) & (s < 0.02 * 6.5 / 448))
    u1, u2 = torch.empty(1000, device=DEV), torch.empty(1000, device=DEV)
    _C.bench_fill_uniform(u1, -2.0, 2.0, 31)
    _C.bench_fill_uniform(u2, -2.0, 2.0, 31)
    torch.cuda.synchronize()
    assert torch.equal(u1, u2) and u1.min() >= -2.0 and u1.max() < 2.0 and u1.std() > 1.0
    x = torch.empty(4096, dtype=torch.bfloat16, device=DEV)
    _C.bench_fill_normal_bf16(x, 1.0, 5)
    assert 0.9 < x.float().std().item() < 1.1

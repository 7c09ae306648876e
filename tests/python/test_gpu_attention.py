"""DeepSeek-V4 attention's torch API on an sm_90 GPU against float64 torch references written here:
the mixed cache's writer (bit exact), RoPE, sparse attention over bf16 and mixed caches (−1 and
out-of-range indices, ragged lengths, the causal window of prefill, shared request windows, sink on
and off, a token with nothing to attend), per-source partials and attention_merge with weight
logits, CUDA graph capture and torch.compile(fullgraph=True); the mixed cache as views of one
buffer of rows bit for bit the same as the dense cache, eager and compiled.

The references attend to the cache's values as the kernel reads them: a bf16 cache as is, a mixed
cache dequantized (E4M3 code × power-of-two scale, rope dims as stored), so o's error is the
kernel's own (bf16 P·V); lse, a sum of exact products in FP32, is far tighter than its bound.
"""
import math

import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available() or torch.cuda.get_device_capability() != (9, 0):
    pytest.skip("needs a CUDA sm_90 (Hopper) GPU", allow_module_level=True)

import moekit  # noqa: E402

DEV = "cuda"
O_TOL = 1e-2    # rel L2 of o
LSE_TOL = 1e-3  # max |lse error| (natural log)
NEG_INF = float("-inf")


def _gen(seed):
    return torch.Generator(device=DEV).manual_seed(seed)


def _randint(lo, hi, shape, g):
    return torch.randint(lo, hi, shape, generator=g, device=DEV)


def _indices(rows, cols, n, g):
    """int32 [rows, cols] of entries in [0, n), about 4 % -1 and 2 % out of range (n, n + 1)."""
    idx = _randint(0, n, (rows, cols), g)
    r = _randint(0, 100, (rows, cols), g)
    idx = torch.where(r < 4, torch.full_like(idx, -1), idx)
    idx = torch.where((r >= 4) & (r < 6), n + r - 4, idx)
    return idx.to(torch.int32)


def _dequantize(cache):
    """The mixed cache's values [N, 512] in float64: E4M3 codes × their group's scale, then rope."""
    nope = cache.nope.view(torch.float8_e4m3fn).double()
    scales = cache.scales.double().repeat_interleave(64, dim=1)
    return torch.cat([nope * scales, cache.rope.double()], dim=1)


class Problem:
    """One attention call's inputs on the device, and each token's attended entries per source."""

    def __init__(self, t, h, d, mixed, topk, window, requests=0, causal=False, sink=False, ragged=True,
                 entries=1000, seed=0):
        g = _gen(seed)
        self.t, self.h, self.d, self.n = t, h, d, entries
        self.q = torch.randn((t, h, d), generator=g, device=DEV).to(torch.bfloat16)
        # Rows of different magnitudes (2^-2 .. 2^2), so the scores spread over the softmax.
        row_scale = torch.pow(2.0, _randint(-2, 3, (entries, 1), g).float())
        keys = (torch.randn((entries, d), generator=g, device=DEV) * row_scale).to(torch.bfloat16)
        if mixed:
            self.kv = moekit.mixed_kv_cache(entries, DEV)
            moekit.mixed_kv_cache_write(keys, torch.arange(entries, dtype=torch.int32, device=DEV), self.kv)
            self.kv_ref = _dequantize(self.kv)
        else:
            self.kv, self.kv_ref = keys, keys.double()
        r = requests if requests > 0 else t
        self.topk_indices = _indices(t, topk, entries, g) if topk > 0 else None
        self.topk_lens = _randint(0, topk + 1, (t,), g).to(torch.int32) if topk > 0 and ragged else None
        self.window_indices = _indices(r, window, entries, g) if window > 0 else None
        self.window_lens = _randint(0, window + 1, (r,), g).to(torch.int32) if window > 0 and ragged else None
        if self.topk_lens is not None:
            self.topk_lens[0] = topk  # one full list
        if self.window_lens is not None:
            self.window_lens[0] = window
        if ragged and requests == 0 and t >= 3:  # the last token has nothing to attend
            if self.topk_lens is not None:
                self.topk_lens[t - 1] = 0
            if self.window_lens is not None:
                self.window_lens[t - 1] = 0
        tok = torch.arange(t, device=DEV)
        self.token_request = (tok % r).to(torch.int32) if requests > 0 and window > 0 else None
        # Later tokens of a request sit later; window entries straddle them, so the mask bites.
        self.query_positions = (1000 + (tok // r) * 3).to(torch.int32) if causal else None
        self.window_positions = (
            (1000 + _randint(0, 3 * (t // r) + 3, (r, window), g) - 2).to(torch.int32)
            if causal and window > 0 else None
        )
        # Sinks of the size of the heads' lse (up to ~13 here), so that the sink visibly scales o.
        self.sink = (3.0 * torch.randn(h, generator=g, device=DEV) + 8.0) if sink else None
        self.softmax_scale = 1.0 / math.sqrt(d)
        self.keys = [self._sources(i) for i in range(t)]

    def kwargs(self):
        return dict(topk_indices=self.topk_indices, topk_lens=self.topk_lens, window_indices=self.window_indices,
                    window_lens=self.window_lens, token_request=self.token_request,
                    window_positions=self.window_positions, query_positions=self.query_positions, sink=self.sink)

    def _sources(self, t):
        """Token t's attended entries: (top-k's, window's), as the API's docstring defines them."""
        def cpu(x):
            return None if x is None else x.cpu().tolist()

        valid = lambda e: 0 <= e < self.n  # noqa: E731
        top, win = [], []
        if self.topk_indices is not None:
            row = cpu(self.topk_indices[t])
            n = len(row) if self.topk_lens is None else int(self.topk_lens[t])
            top = [e for e in row[:n] if valid(e)]
        if self.window_indices is not None:
            r = t if self.token_request is None else int(self.token_request[t])
            if 0 <= r < self.window_indices.shape[0]:
                row = cpu(self.window_indices[r])
                n = len(row) if self.window_lens is None else int(self.window_lens[r])
                pos = cpu(self.window_positions[r]) if self.window_positions is not None else None
                qpos = int(self.query_positions[t]) if self.query_positions is not None else None
                win = [e for j, e in enumerate(row[:n]) if valid(e) and (pos is None or pos[j] <= qpos)]
        return top, win


def reference(pb, sources=(0, 1), sink=None, softmax_scale=None):
    """float64 (o [T, H, D], lse [T, H]) over the union of `sources` of each token, the sink (if
    any) in the denominator only; nothing to attend: o = 0, lse = -inf."""
    scale = pb.softmax_scale if softmax_scale is None else softmax_scale
    q = pb.q.double()
    o = torch.zeros((pb.t, pb.h, pb.d), dtype=torch.float64, device=DEV)
    lse = torch.full((pb.t, pb.h), NEG_INF, dtype=torch.float64, device=DEV)
    for t in range(pb.t):
        keys = [e for i in sources for e in pb.keys[t][i]]
        if not keys:
            continue
        kv = pb.kv_ref[torch.tensor(keys, device=DEV)]  # [n, D], K = V
        s = scale * (q[t] @ kv.T)                       # [H, n]
        m = s.amax(dim=1, keepdim=True)
        p = torch.exp(s - m)
        denom = p.sum(dim=1, keepdim=True)
        if sink is not None:
            denom = denom + torch.exp(sink.double()[:, None] - m)
        o[t] = (p @ kv) / denom
        lse[t] = m[:, 0] + torch.log(p.sum(dim=1))
    return o, lse


def merge_reference(parts, weight_logits=None, sink=None):
    """float64 merge of [(o_i, lse_i)]: o = Σ e^{lse_i + w_i} o_i / (Σ e^{lse_i + w_i} + e^{sink})."""
    logits = torch.stack([lse + (0.0 if weight_logits is None else weight_logits[i].double())
                          for i, (_, lse) in enumerate(parts)])                       # [S, T, H]
    m = logits.amax(dim=0)
    empty = torch.isneginf(m)
    m = torch.where(empty, torch.zeros_like(m), m)
    a = torch.exp(logits - m)                                                         # e^{-inf} = 0
    denom = a.sum(dim=0)
    if sink is not None:
        denom = denom + torch.exp(sink.double() - m)
    o = sum(a[i][..., None] * parts[i][0] for i in range(len(parts))) / denom[..., None]
    o = torch.where(empty[..., None], torch.zeros_like(o), o)
    lse = torch.where(empty, torch.full_like(m, NEG_INF), m + torch.log(a.sum(dim=0)))
    return o, lse


def check(o, lse, ref_o, ref_lse, what):
    o, lse = o.double(), lse.double()
    assert not torch.isnan(o).any() and not torch.isnan(lse).any(), f"{what}: an unwritten (NaN) output"
    empty = torch.isneginf(ref_lse)
    assert torch.isneginf(lse[empty]).all(), f"{what}: nothing to attend must give lse = -inf"
    assert (o[empty] == 0).all(), f"{what}: nothing to attend must give o = 0"
    assert torch.isfinite(lse[~empty]).all(), f"{what}: a non-finite lse where keys were attended"
    ref_norm = ref_o.norm().item()
    err = (o - ref_o).norm().item() / ref_norm if ref_norm > 0 else (o - ref_o).norm().item()
    assert err <= O_TOL, f"{what}: rel L2 of o {err:.3e}"
    if (~empty).any():
        lse_err = (lse[~empty] - ref_lse[~empty]).abs().max().item()
        assert lse_err <= LSE_TOL, f"{what}: |lse error| {lse_err:.3e}"


# (T, H, D, mixed cache, topk, window, requests (0: one window per token), causal, sink)
CASES = [
    pytest.param(1, 128, 512, True, 512, 128, 0, False, True, id="decode-mixed-split-sink"),
    pytest.param(3, 64, 512, True, 200, 100, 0, True, False, id="decode3-mixed-causal-empty-token"),
    pytest.param(40, 128, 512, True, 256, 128, 2, True, True, id="prefill40-mixed-2req-causal-sink"),
    pytest.param(1, 64, 64, False, 300, 64, 0, False, True, id="decode-bf16-d64-sink"),
    pytest.param(3, 128, 64, False, 64, 128, 1, True, False, id="prefill3-bf16-d64-1req-causal"),
    pytest.param(40, 64, 64, False, 128, 32, 4, True, True, id="prefill40-bf16-d64-4req-causal-sink"),
    pytest.param(3, 128, 512, False, 0, 128, 0, False, True, id="window-only-bf16-d512"),
    pytest.param(3, 64, 512, True, 96, 0, 0, False, False, id="topk-only-mixed"),
]


@pytest.mark.parametrize("t,h,d,mixed,topk,window,requests,causal,sink", CASES)
def test_sparse_attention_normalized(t, h, d, mixed, topk, window, requests, causal, sink):
    pb = Problem(t, h, d, mixed, topk, window, requests, causal, sink, seed=t * 7 + h + d + topk)
    # Outputs start as NaN: a row the kernel does not write fails.
    o = torch.full((t, h, d), float("nan"), dtype=torch.bfloat16, device=DEV)
    lse = torch.full((t, h), float("nan"), device=DEV)
    got = moekit.sparse_attention(pb.q, pb.kv, **pb.kwargs(), out=(o, lse))
    assert got[0] is o and got[1] is lse
    ref_o, ref_lse = reference(pb, sink=pb.sink)
    check(o, lse, ref_o, ref_lse, "normalized")
    # The default allocation, without lse, gives the same bits.
    o2, none = moekit.sparse_attention(pb.q, pb.kv, **pb.kwargs(), out=(torch.empty_like(o), None))
    assert none is None and torch.equal(o2, o)
    o3, lse3 = moekit.sparse_attention(pb.q, pb.kv, **pb.kwargs())
    assert torch.equal(o3, o) and torch.equal(lse3, lse)


@pytest.mark.parametrize("t,h,d,mixed,topk,window,requests,causal,sink", CASES)
def test_partials_and_merge(t, h, d, mixed, topk, window, requests, causal, sink):
    pb = Problem(t, h, d, mixed, topk, window, requests, causal, sink, seed=t * 5 + h + d + window)
    op = torch.full((2, t, h, d), float("nan"), device=DEV)
    lp = torch.full((2, t, h), float("nan"), device=DEV)
    got = moekit.sparse_attention(pb.q, pb.kv, **pb.kwargs(), return_partials=True, out=(op, lp))
    assert got[0] is op and got[1] is lp
    parts = [reference(pb, sources=(i,)) for i in range(2)]  # no sink in partials
    check(op[0], lp[0], *parts[0], "top-k partial")
    check(op[1], lp[1], *parts[1], "window partial")
    # DeepSeek-V4's merge: the window weighted by a per-head logit, the sink in the denominator.
    w = torch.zeros((2, h), device=DEV)
    w[1] = torch.randn(h, generator=_gen(d + h), device=DEV)
    sink_t = pb.sink if pb.sink is not None else torch.randn(h, generator=_gen(h), device=DEV)
    mo, ml = moekit.attention_merge(op, lp, w, sink_t)
    assert mo.dtype == torch.bfloat16 and mo.shape == (t, h, d) and ml.shape == (t, h)
    check(mo, ml, *merge_reference(parts, w, sink_t), "merged, weighted, sink")
    # Unweighted, the merge is the attention over both sources.
    mo, ml = moekit.attention_merge(op, lp, sink=pb.sink)
    check(mo, ml, *reference(pb, sink=pb.sink), "merged = normalized")


def test_softmax_scale_and_empty_batch():
    pb = Problem(3, 64, 128, False, 100, 50, 0, False, True, seed=3)
    o, lse = moekit.sparse_attention(pb.q, pb.kv, **pb.kwargs(), softmax_scale=0.03)
    check(o, lse, *reference(pb, sink=pb.sink, softmax_scale=0.03), "softmax_scale 0.03")
    q0 = pb.q[:0]
    o0, lse0 = moekit.sparse_attention(q0, pb.kv, topk_indices=pb.topk_indices[:0])
    assert o0.shape == (0, 64, 128) and lse0.shape == (0, 64)
    om, lm = moekit.attention_merge(torch.zeros((2, 0, 64, 128), device=DEV), torch.zeros((2, 0, 64), device=DEV))
    assert om.shape == (0, 64, 128) and lm.shape == (0, 64)


def test_errors_before_launch():
    pb = Problem(3, 64, 64, False, 32, 16, 0, False, False, seed=4)
    o = torch.full((3, 64, 64), 5.0, dtype=torch.bfloat16, device=DEV)
    with pytest.raises(ValueError, match="at most 128"):
        moekit.sparse_attention(pb.q, pb.kv, window_indices=torch.zeros((3, 129), dtype=torch.int32, device=DEV),
                                out=(o, None))
    with pytest.raises(TypeError, match="topk_indices"):
        moekit.sparse_attention(pb.q, pb.kv, topk_indices=pb.topk_indices.long(), out=(o, None))
    with pytest.raises(ValueError, match="CUDA"):
        moekit.sparse_attention(pb.q, pb.kv.cpu(), out=(o, None))
    with pytest.raises(ValueError, match="mixed FP8 cache has head dim 512"):
        moekit.sparse_attention(pb.q, moekit.mixed_kv_cache(10, DEV), out=(o, None))
    # The library's own check, raised inside the op: q contiguous but not 16-byte aligned.
    shifted = torch.empty(pb.q.numel() + 8, dtype=torch.bfloat16, device=DEV)[1:1 + pb.q.numel()].view(pb.q.shape)
    shifted.copy_(pb.q)
    with pytest.raises(ValueError, match="q must be 16-byte aligned"):
        moekit.sparse_attention(shifted, pb.kv, topk_indices=pb.topk_indices, out=(o, None))
    torch.cuda.synchronize()
    assert torch.all(o == 5.0)


def test_mixed_kv_cache_write_is_exact():
    t, n = 50, 80
    g = _gen(9)
    k = (torch.randn((t, 512), generator=g, device=DEV) * torch.pow(2.0, _randint(-6, 7, (t, 1), g).float()))
    k = k.to(torch.bfloat16)
    k[3, 64:128] = 0  # an all-zero group: scale 1
    slots = torch.randperm(n, generator=g, device=DEV)[:t].to(torch.int32)
    slots[5], slots[6] = -1, n + 3  # skipped
    cache = moekit.mixed_kv_cache(n, DEV)
    moekit.mixed_kv_cache_write(k, slots, cache)
    # Reference: the smallest power of two s >= amax / 448 per group of 64, codes e4m3(x / s).
    x = k.float()[:, :448].view(t, 7, 64)
    amax = x.abs().amax(dim=2)
    ratio = (amax.double() / 448.0).float()  # float32's correctly rounded division
    mant, exp = torch.frexp(ratio)
    one = torch.ones_like(ratio)
    s = torch.where(mant == 0.5, torch.ldexp(one, exp - 1), torch.ldexp(one, exp))
    s = torch.where(amax > 0, s, one)
    codes = (x / s[..., None]).clamp(-448.0, 448.0).to(torch.float8_e4m3fn).view(t, 448)
    written = (slots >= 0) & (slots < n)
    rows, dest = written.nonzero().flatten(), slots[written].long()
    assert torch.equal(cache.scales[dest], s[rows])
    assert torch.equal(cache.nope.view(torch.uint8)[dest], codes.view(torch.uint8)[rows])
    assert torch.equal(cache.rope[dest], k[rows, 448:])
    untouched = torch.ones(n, dtype=torch.bool, device=DEV)
    untouched[dest] = False
    assert (cache.nope.view(torch.uint8)[untouched] == 0).all() and (cache.scales[untouched] == 0).all()
    assert (cache.rope[untouched] == 0).all()
    assert cache.scales[int(slots[3]), 1].item() == 1.0  # the all-zero group


@pytest.mark.parametrize("two_d", [False, True])
def test_rope(two_d):
    t, h, d, p = 7, 4, 192, 64
    g = _gen(21)
    x = torch.randn((t, d) if two_d else (t, h, d), generator=g, device=DEV).to(torch.bfloat16)
    positions = torch.tensor([0, 5, -1, 63, 64, 17, 2], dtype=torch.int32, device=DEV)  # -1, 64: untouched
    inv_freq = 10000.0 ** (-torch.arange(32, dtype=torch.float64, device=DEV) / 32)
    ang = torch.arange(p, dtype=torch.float64, device=DEV)[:, None] * inv_freq
    cos, sin = ang.cos().float(), ang.sin().float()

    def rotate(v, sign):
        """float64 reference of the last 64 dims of v rotated by sign·θ (valid positions only)."""
        v = v.double().clone()
        ok = (positions >= 0) & (positions < p)
        c = cos.double()[positions.clamp(0, p - 1).long()]
        s = sign * sin.double()[positions.clamp(0, p - 1).long()]
        if not two_d:
            c, s = c[:, None], s[:, None]
        a, b = v[..., d - 64::2].clone(), v[..., d - 63::2].clone()
        ra, rb = a * c - b * s, a * s + b * c
        mask = ok.view(-1, *([1] * (v.dim() - 1)))
        v[..., d - 64::2] = torch.where(mask, ra, a)
        v[..., d - 63::2] = torch.where(mask, rb, b)
        return v

    def close(got, ref):
        # FP32 math, one bf16 rounding: half an ulp of bf16 (2^-8 relative) plus FP32 noise.
        return bool(((got.double() - ref).abs() <= ref.abs() * 2.0 ** -8 + 1e-5).all())

    y = x.clone()
    assert moekit.rope_(y, positions, cos, sin) is y
    assert close(y, rotate(x, 1.0)), "forward RoPE"
    assert torch.equal(y[..., : d - 64], x[..., : d - 64]), "the non-rope dims must not change"
    assert torch.equal(y[2], x[2]) and torch.equal(y[4], x[4]), "tokens outside [0, P) must not change"
    z = y.clone()
    moekit.rope_(z, positions, cos, sin, inverse=True)
    assert close(z, rotate(y, -1.0)), "inverse RoPE"


def _graph_case():
    # T = 1 with 640 keys: split over several CTAs, so a workspace is allocated inside the capture.
    return Problem(1, 128, 512, True, 512, 128, 0, False, True, seed=31)


def test_cuda_graph_equals_eager():
    pb = _graph_case()
    kw = pb.kwargs()

    def step():
        o, lse = moekit.sparse_attention(pb.q, pb.kv, **kw)
        op, lp = moekit.sparse_attention(pb.q, pb.kv, **kw, return_partials=True)
        mo, ml = moekit.attention_merge(op, lp, sink=pb.sink)
        return o, lse, mo, ml

    eager = step()
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm-up off the capture stream, as torch recommends
        step()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        captured = step()
    graph.replay()
    torch.cuda.synchronize()
    for a, b, name in zip(captured, eager, ("o", "lse", "merged o", "merged lse")):
        assert torch.equal(a, b), f"{name}: graph replay differs from eager"
    # Replays read the inputs anew.
    pb.q.copy_(torch.randn(pb.q.shape, generator=_gen(32), device=DEV).to(torch.bfloat16))
    graph.replay()
    torch.cuda.synchronize()
    for a, b, name in zip(captured, step(), ("o", "lse", "merged o", "merged lse")):
        assert torch.equal(a, b), f"{name}: replay with a new q differs from eager"
    check(captured[0], captured[1], *reference(pb, sink=pb.sink), "graph, new q")
    del graph


def test_torch_compile_fullgraph():
    pb = Problem(3, 64, 512, True, 200, 100, 0, True, True, seed=41)

    def attend(q, cache, topk_indices, window_indices, window_positions, query_positions, sink):
        kw = dict(topk_indices=topk_indices, window_indices=window_indices, window_positions=window_positions,
                  query_positions=query_positions)
        o, lse = moekit.sparse_attention(q, cache, sink=sink, **kw)
        op, lp = moekit.sparse_attention(q, cache, return_partials=True, **kw)
        mo, ml = moekit.attention_merge(op, lp, sink=sink)
        return o, lse, mo, ml

    args = (pb.q, pb.kv, pb.topk_indices, pb.window_indices, pb.window_positions, pb.query_positions, pb.sink)
    torch._dynamo.reset()
    compiled = torch.compile(attend, fullgraph=True)(*args)
    eager = attend(*args)
    for a, b, name in zip(compiled, eager, ("o", "lse", "merged o", "merged lse")):
        assert torch.equal(a, b), f"{name}: compiled differs from eager"
    # This Problem has ragged lengths that the compiled call did not see: compare with the
    # reference over full lists instead.
    pb.topk_lens = pb.window_lens = None
    pb.keys = [pb._sources(i) for i in range(pb.t)]
    check(compiled[0], compiled[1], *reference(pb, sink=pb.sink), "compiled")
    torch._dynamo.reset()


# ---------------------------------------------------------------------------------------------
# The mixed cache as views of one buffer of rows (MixedKvCache.from_rows)
# ---------------------------------------------------------------------------------------------
PAD = 0xA5  # a row's bytes past its entry, which no kernel may touch


def _rows_copy(cache, row=640):
    """(rows cache, its buffer): MixedKvCache.from_rows of a uint8 [N, row] buffer (row >= 640, a
    multiple of 16) holding the bytes of `cache`; every other byte of the buffer is PAD."""
    buf = torch.full((cache.num_entries, row), PAD, dtype=torch.uint8, device=DEV)
    rows = moekit.MixedKvCache.from_rows(buf[:, :640])
    rows.nope.view(torch.uint8).copy_(cache.nope.view(torch.uint8))
    rows.scales.copy_(cache.scales)
    rows.rope.copy_(cache.rope)
    assert rows.nope.stride(0) == row and torch.equal(rows.dequantize(), cache.dequantize())
    return rows, buf


# (T, H, topk, window, requests (0: one window per token), causal, sink); all over the mixed cache.
ROWS_CASES = [
    pytest.param(1, 128, 512, 128, 0, False, True, id="decode-split-sink"),
    pytest.param(3, 64, 200, 100, 0, True, False, id="decode3-causal-empty-token"),
    pytest.param(40, 128, 256, 128, 2, True, True, id="prefill40-2req-causal-sink"),
]


@pytest.mark.parametrize("row", [640, 656])
@pytest.mark.parametrize("t,h,topk,window,requests,causal,sink", ROWS_CASES)
def test_rows_cache_attention_equals_dense(t, h, topk, window, requests, causal, sink, row):
    pb = Problem(t, h, 512, True, topk, window, requests, causal, sink, seed=t * 11 + h + topk)
    rows, buf = _rows_copy(pb.kv, row)
    for partials in (False, True):
        dense_out = moekit.sparse_attention(pb.q, pb.kv, **pb.kwargs(), return_partials=partials)
        rows_out = moekit.sparse_attention(pb.q, rows, **pb.kwargs(), return_partials=partials)
        for a, b, name in zip(dense_out, rows_out, ("o", "lse")):
            assert torch.equal(a, b), f"{name} over {row}-byte rows (partials {partials}) differs from the dense one"
    o, lse = moekit.sparse_attention(pb.q, tuple(rows), **pb.kwargs())  # a plain tuple of the views
    check(o, lse, *reference(pb, sink=pb.sink), f"{row}-byte rows")
    torch.cuda.synchronize()
    assert (buf[:, 604:] == PAD).all()


@pytest.mark.parametrize("row", [640, 656])
def test_rows_cache_write_equals_dense(row):
    t, n = 50, 80
    g = _gen(19)
    k = (torch.randn((t, 512), generator=g, device=DEV) * torch.pow(2.0, _randint(-6, 7, (t, 1), g).float()))
    k = k.to(torch.bfloat16)
    k[3, 64:128] = 0  # an all-zero group
    slots = torch.randperm(n, generator=g, device=DEV)[:t].to(torch.int32)
    slots[5], slots[6] = -1, n + 3  # skipped
    dense = moekit.mixed_kv_cache(n, DEV)
    rows, buf = _rows_copy(dense, row)
    moekit.mixed_kv_cache_write(k, slots, dense)
    moekit.mixed_kv_cache_write(k, slots, rows)
    # Rows of a wider k (row stride 520 elements) into a second rows cache: the same bytes again.
    wide = torch.zeros((t, 520), dtype=torch.bfloat16, device=DEV)[:, :512]
    wide.copy_(k)
    rows2, buf2 = _rows_copy(moekit.mixed_kv_cache(n, DEV), row)
    moekit.mixed_kv_cache_write(wide, slots, rows2)
    for r, b in ((rows, buf), (rows2, buf2)):
        assert torch.equal(r.nope.view(torch.uint8), dense.nope.view(torch.uint8))
        assert torch.equal(r.scales.view(torch.int32), dense.scales.view(torch.int32))
        assert torch.equal(r.rope.view(torch.int16), dense.rope.view(torch.int16))
        assert (b[:, 604:] == PAD).all(), "the writer touched bytes past an entry"
    assert dense.scales.abs().sum() > 0


def _attend(q, cache, topk_indices, window_indices, window_positions, query_positions, sink):
    return moekit.sparse_attention(q, cache, topk_indices=topk_indices, window_indices=window_indices,
                                   window_positions=window_positions, query_positions=query_positions, sink=sink)


def _write_and_attend(q, rows_buf, k, slots, *inputs):
    # The buffer comes in, the views are made here: see docs/python.md §Attention.
    cache = moekit.MixedKvCache.from_rows(rows_buf)
    moekit.mixed_kv_cache_write(k, slots, cache)
    return _attend(q, cache, *inputs)


def test_torch_compile_rows_cache():
    pb = Problem(3, 64, 512, True, 200, 100, 0, True, True, seed=43)
    inputs = (pb.topk_indices, pb.window_indices, pb.window_positions, pb.query_positions, pb.sink)
    rows, buf = _rows_copy(pb.kv)
    torch._dynamo.reset()
    compiled = torch.compile(_attend, fullgraph=True)(pb.q, rows, *inputs)
    eager = _attend(pb.q, pb.kv, *inputs)
    for a, b, name in zip(compiled, eager, ("o", "lse")):
        assert torch.equal(a, b), f"{name}: compiled over the rows cache differs from eager over the dense one"

    # New keys into three entries that token 0 attends (its lists are full).
    slots = torch.tensor(sorted(set(pb.keys[0][0]))[:3], dtype=torch.int32, device=DEV)
    k = torch.randn((3, 512), generator=_gen(44), device=DEV).to(torch.bfloat16)
    dense = moekit.MixedKvCache(*(x.clone() for x in pb.kv))
    moekit.mixed_kv_cache_write(k, slots, dense)
    eager = _attend(pb.q, dense, *inputs)
    torch._dynamo.reset()
    compiled = torch.compile(_write_and_attend, fullgraph=True)(pb.q, buf, k, slots, *inputs)
    for a, b, name in zip(compiled, eager, ("o", "lse")):
        assert torch.equal(a, b), f"{name}: compiled write + attention over the rows buffer differs from eager"
    assert torch.equal(rows.nope.view(torch.uint8), dense.nope.view(torch.uint8))
    assert torch.equal(rows.scales, dense.scales) and torch.equal(rows.rope, dense.rope)
    assert (buf[:, 604:] == PAD).all()
    torch._dynamo.reset()

"""moekit vs FlashMLA (DeepSeek), sparse MQA attention side by side in one process on one GPU.

Run through bench/peers/flashmla_side_by_side.sh, which builds FlashMLA outside this tree (pinned
commit 9241ae3e, for sm_90a only) and puts it on PYTHONPATH.

What both sides compute (head dim 512, K = V, one KV head shared by h = 64 or 128 query heads):
per token t, o = sum_j e^{s_j} v_j / (sum_j e^{s_j} [+ e^{sink}]), s_j = q.k_j / sqrt(512), over
the cache entries idx[t, 0..topk) (and, with --window 128, 128 more entries per token). FLOPs
counted: 2 * T * h * keys * (dk + dv) with dk = dv = 512 (keys = topk + window), the count of
`moekit bench attention`.

Groups of cases (--kv):
- fp8: one FP8 entry format on both sides. moekit: its DeepSeek-V4 mixed cache
  (moekit.mixed_kv_cache + moekit.mixed_kv_cache_write: 448 E4M3 dims, one power-of-two float32
  scale per 64 of them, 64 bf16 RoPE dims) through moekit.sparse_attention. FlashMLA: its "MODEL1" FP8 sparse cache
  (d_qk = 512: 448 E4M3 dims, one UE8M0 scale per 64, 64 bf16 RoPE dims; README/docstring of
  flash_mla_with_kvcache, tests/quant.py) through flash_mla_with_kvcache(..., is_fp8_kvcache=True,
  indices=...), FlashMLA's SM90 sparse FP8 decode kernel + its combine kernel. The two formats
  hold the same values: both quantize each group of 64 with the smallest power of two s such that
  amax / s <= 448 (FlashMLA's rule clamps amax / 448 at 1e-4 from below, moekit takes s = 1 for an
  all-zero group: the same values either way) and round x / s to E4M3; both kernels dequantize
  exactly to bf16 (code x power-of-two scale) and run bf16 MMAs with a bf16 Q.
  FlashMLA's cache is written here with FlashMLA's rule (tests/quant.py's MODEL1 branch, redone in
  torch), moekit's with moekit's writer; the script counts the values in which the two
  dequantized caches differ (expected: none) and checks each side against the reference of its
  own cache. Cases: decode T = --tokens (1, 16, 64, 128), and T = --prefill (4096) through the
  same kernels (FlashMLA: batch T of one query token each; it has no FP8 prefill kernel).
- bf16: a plain bf16 cache [N, 512] on both sides: moekit.sparse_attention on bf16 rows vs
  flash_mla_sparse_fwd (FlashMLA's SM90 sparse prefill kernel, d_qk = 512, the only FlashMLA
  kernel that reads a bf16 cache sparsely). Cases: T = --prefill, plus --bf16-tokens (none by
  default: that kernel has no split over the keys, it is not a decode kernel).

What does not map 1:1 (and what this script does about it):
- Not FlashMLA's V3.2 format (d_qk 576 = 512 FP8 nope + 64 bf16 rope, V = the first 512 dims,
  656 bytes a token, four float32 scales per 128 dims): other math than moekit's (dk != dv);
  FlashMLA's MODEL1 format is the one that matches moekit's entries exactly.
- Byte layout. FlashMLA MODEL1: per page block of P entries (P = 64 here), P x 576 bytes
  (448 codes | 128 bytes rope) then P x 8 bytes (7 UE8M0 scales + 1 pad), the block padded to a
  multiple of 576 bytes (k_cache [blocks, P, 1, 584] uint8, row stride 584); entry e is block
  e // P, slot e % P, so FlashMLA's index of entry e is e, the same index tensor as moekit's.
  moekit: three dense arrays (nope [N, 448] E4M3, scales [N, 7] float32, rope [N, 64] bf16).
- Indices: all valid here. FlashMLA's decode treats only -1 as "no entry" (an index >= N reads out
  of bounds); moekit skips any index < 0 or >= N.
- The window (--window 128, off by default): moekit's second source window_indices [T, 128];
  FlashMLA decode's extra_k_cache (the same cache tensor) + extra_indices_in_kvcache [T, 1, 128];
  FlashMLA's sparse prefill has no second source: it gets one list idx ++ window [T, 1, topk+128]
  (the same softmax over the union). No causal positions (moekit's window_positions) are used.
- The sink (--sink, off by default): the same definition on both sides (float32 [h], natural log,
  in the denominator only); drawn as 3 N(0, 1) + 8, about the size of the heads' lse.
- Shapes: FlashMLA needs h in {64, 128}, topk a multiple of 64 (decode) / of 128 (sparse prefill,
  topk + window), d_v = 512. moekit's top-k lengths (topk_lens) and FlashMLA's topk_length are not
  passed (all lists full). lse is returned by both but not compared.

Checked: both outputs (bf16 o) against a float32 torch reference of softmax(q k^T / sqrt(512)) v
over the selected entries of that side's dequantized cache (relative L2 over all of o; no TF32).
Timed: both sides interleaved call by call, a 256 MB L2-flushing memset before every call,
kernel-only durations from the CUDA profiler (CUPTI via torch.profiler), median of --reps calls.
A call's time is the span from its first kernel's start to its last kernel's end (moekit:
sparse_mqa_kernel and, when the keys are split, its merge_kernel; FlashMLA decode:
flash_fwd_splitkv_mla_fp8_sparse_kernel and flash_fwd_mla_combine_kernel; FlashMLA prefill:
sparse_attn_fwd_kernel): both sides launch their merge/combine as a PDL dependent, so the span,
not the sum of kernel durations, is what a caller waits for. Host-side work (FlashMLA's output
and split buffers, moekit's workspace, both from torch's caching allocator) is not counted.
FlashMLA's scheduling metadata is made once per case (get_mla_metadata, first call) and reused.

Prints one row per case (µs, TFLOPS, FlashMLA µs / moekit µs: > 1 means moekit is faster, both
relative L2 errors) and the geomean of the ratio per group.
"""
from __future__ import annotations

import argparse
import math
import os
import statistics
import sys

import torch

import flash_mla
import moekit
from side_by_side_common import Case, profile_interleaved, rel_l2

D = 512            # head dim of q, k and v on both sides
NOPE = 448         # E4M3 dims of an FP8 entry
ROPE = 64          # bf16 dims of an FP8 entry, after the E4M3 ones
GROUP = 64         # E4M3 dims per scale
NUM_SCALES = NOPE // GROUP
FM_PAGE = 64                          # FlashMLA page block size used here (entries per block)
FM_BODY = NOPE + 2 * ROPE             # 576: a MODEL1 entry's codes + rope bytes, at slot * 576 in its block
FM_TOKEN_BYTES = FM_BODY + NUM_SCALES + 1  # 584: FlashMLA's bytes_per_token for MODEL1 (7 UE8M0 + 1 pad)
FM_SCALE_BYTES = 8                    # a MODEL1 entry's scale bytes, at P * 576 + slot * 8 in its block
O_TOL = 1e-2                          # rel L2 of o above which a result is flagged (moekit's tests' bound)

MK_KERNELS = ("sparse_mqa_kernel", "merge_kernel")
FM_KERNELS = ("flash_fwd_splitkv_mla_fp8_sparse_kernel", "flash_fwd_mla_combine_kernel", "sparse_attn_fwd_kernel",
              "get_mla_metadata_kernel")


def int_list(s: str) -> list[int]:
    return [int(x) for x in s.split(",") if x.strip()]


# ---------------------------------------------------------------------------------------------
# The caches
# ---------------------------------------------------------------------------------------------
def pow2_from_exponent(e: torch.Tensor) -> torch.Tensor:
    """2^e as float32, exactly (e int32 in [-126, 127]), from the bits."""
    return ((e + 127).to(torch.int32) << 23).view(torch.float32)


def flashmla_model1_cache(k: torch.Tensor) -> torch.Tensor:
    """FlashMLA's MODEL1 FP8 sparse KV cache of the rows of k (bf16 [N, 512], N a multiple of
    FM_PAGE), entry e at page block e // FM_PAGE, slot e % FM_PAGE. FlashMLA's quantization rule
    (its tests/quant.py, MODEL1 branch): per group of 64 of the first 448 dims, the scale
    s = 2^ceil(log2(max(amax / 448, 1e-4))) stored as UE8M0, codes E4M3(x / s); the last 64 dims
    copied as bf16. Returns k_cache uint8 [blocks, FM_PAGE, 1, 584] (row stride 584, block stride
    the block's bytes padded to a multiple of 576), as flash_mla_with_kvcache takes it."""
    n = k.shape[0]
    blocks = n // FM_PAGE
    x = k[:, :NOPE].float().view(n, NUM_SCALES, GROUP)
    amax = x.abs().amax(dim=2)
    e = torch.clamp_min(amax / 448.0, 1e-4).log2().ceil().to(torch.int32)  # [N, 7]
    codes = (x / pow2_from_exponent(e).unsqueeze(2)).to(torch.float8_e4m3fn).view(n, NOPE)
    block_bytes = FM_PAGE * FM_TOKEN_BYTES
    block_stride = (block_bytes + 575) // 576 * 576
    buf = torch.zeros((blocks, block_stride), dtype=torch.uint8, device=k.device)
    body = buf[:, :FM_PAGE * FM_BODY].view(blocks, FM_PAGE, FM_BODY)
    body[:, :, :NOPE] = codes.view(torch.uint8).view(blocks, FM_PAGE, NOPE)
    body[:, :, NOPE:] = k[:, NOPE:].contiguous().view(torch.uint8).view(blocks, FM_PAGE, 2 * ROPE)
    sc = buf[:, FM_PAGE * FM_BODY:FM_PAGE * (FM_BODY + FM_SCALE_BYTES)].view(blocks, FM_PAGE, FM_SCALE_BYTES)
    sc[:, :, :NUM_SCALES] = (e + 127).to(torch.uint8).view(blocks, FM_PAGE, NUM_SCALES)
    return buf[:, :block_bytes].view(blocks, FM_PAGE, 1, FM_TOKEN_BYTES)


def flashmla_model1_dequantize(k_cache: torch.Tensor) -> torch.Tensor:
    """The values [N, 512] float32 of a MODEL1 cache made by flashmla_model1_cache (exact)."""
    blocks = k_cache.shape[0]
    n = blocks * FM_PAGE
    base = k_cache.as_strided((blocks, k_cache.stride(0)), (k_cache.stride(0), 1))
    body = base[:, :FM_PAGE * FM_BODY].reshape(n, FM_BODY)
    nope = body[:, :NOPE].contiguous().view(torch.float8_e4m3fn).float()
    rope = body[:, NOPE:].contiguous().view(torch.bfloat16).float()
    sc = base[:, FM_PAGE * FM_BODY:FM_PAGE * (FM_BODY + FM_SCALE_BYTES)].reshape(n, FM_SCALE_BYTES)
    scales = pow2_from_exponent(sc[:, :NUM_SCALES].to(torch.int32) - 127)
    return torch.cat([nope * scales.repeat_interleave(GROUP, dim=1), rope], dim=1)


class Caches:
    """The same N(0, 1) bf16 rows in each side's caches, made once."""

    def __init__(self, n: int, kinds: list[str], seed: int):
        g = torch.Generator(device="cuda").manual_seed(seed)
        self.n = n
        self.k = torch.randn((n, D), generator=g, device="cuda").to(torch.bfloat16)
        self.diff = 0
        if "fp8" in kinds:
            self.mk_fp8 = moekit.mixed_kv_cache(n, "cuda")
            moekit.mixed_kv_cache_write(self.k, torch.arange(n, dtype=torch.int32, device="cuda"), self.mk_fp8)
            self.fm_fp8 = flashmla_model1_cache(self.k)
            self.ref_mk_fp8 = self.mk_fp8.dequantize(torch.float32)
            ref_fm = flashmla_model1_dequantize(self.fm_fp8)
            self.diff = int((ref_fm != self.ref_mk_fp8).sum().item())
            # Identical caches (the expected case) share one reference.
            self.ref_fm_fp8 = self.ref_mk_fp8 if self.diff == 0 else ref_fm
            del ref_fm
        if "bf16" in kinds:
            self.ref_bf16 = self.k.float()


# ---------------------------------------------------------------------------------------------
# Reference and cases
# ---------------------------------------------------------------------------------------------
def reference(q: torch.Tensor, kv32: torch.Tensor, keys: torch.Tensor, sink, scale: float) -> torch.Tensor:
    """float32 o [T, h, 512] = softmax(q k^T * scale [, sink]) v over kv32[keys[t]] (K = V)."""
    t, h, d = q.shape
    k = keys.shape[1]
    out = torch.empty((t, h, d), dtype=torch.float32, device=q.device)
    step = max(1, (1 << 28) // (k * d * 4))  # ~256 MB of gathered rows per chunk
    for a in range(0, t, step):
        b = min(t, a + step)
        kk = kv32.index_select(0, keys[a:b].reshape(-1).long()).view(b - a, k, d)
        s = torch.bmm(q[a:b].float(), kk.transpose(1, 2)) * scale
        if sink is not None:
            s = torch.cat([s, sink.view(1, h, 1).expand(b - a, h, 1)], dim=2)
        p = torch.softmax(s, dim=2)
        if sink is not None:
            p = p[:, :, :k]
        out[a:b] = torch.bmm(p, kk)
    return out






def make_case(caches: Caches, kv: str, phase: str, t: int, h: int, topk: int, window: int, sink: bool, seed: int):
    g = torch.Generator(device="cuda").manual_seed(seed)
    n = caches.n
    q = torch.randn((t, h, D), generator=g, device="cuda").to(torch.bfloat16)
    idx = torch.randint(0, n, (t, topk), generator=g, device="cuda").to(torch.int32)
    win = torch.randint(0, n, (t, window), generator=g, device="cuda").to(torch.int32) if window else None
    sink_t = (3.0 * torch.randn(h, generator=g, device="cuda") + 8.0) if sink else None
    keys = idx if win is None else torch.cat([idx, win], dim=1).contiguous()
    scale = 1.0 / math.sqrt(D)
    o_mk = torch.empty((t, h, D), dtype=torch.bfloat16, device="cuda")
    lse_mk = torch.empty((t, h), dtype=torch.float32, device="cuda")
    res = {}

    if kv == "fp8":
        mk_kv, fm_cache = caches.mk_fp8, caches.fm_fp8
        ref_mk_kv, ref_fm_kv = caches.ref_mk_fp8, caches.ref_fm_fp8
        sched_meta, _ = flash_mla.get_mla_metadata()
        q4 = q.view(t, 1, h, D)
        idx3 = idx.view(t, 1, topk)
        win3 = win.view(t, 1, window) if win is not None else None

        def fm():
            res["o"] = flash_mla.flash_mla_with_kvcache(
                q4, fm_cache, None, None, D, sched_meta, None,
                softmax_scale=scale, causal=False, is_fp8_kvcache=True, indices=idx3, attn_sink=sink_t,
                extra_k_cache=fm_cache if win3 is not None else None, extra_indices_in_kvcache=win3)[0]
    else:
        mk_kv = caches.k
        ref_mk_kv = ref_fm_kv = caches.ref_bf16
        kv3 = caches.k.view(n, 1, D)
        keys3 = keys.view(t, 1, keys.shape[1])

        def fm():
            res["o"] = flash_mla.flash_mla_sparse_fwd(q, kv3, keys3, scale, D, attn_sink=sink_t)[0]

    def mk():
        moekit.sparse_attention(q, mk_kv, topk_indices=idx, window_indices=win, sink=sink_t, softmax_scale=scale,
                                out=(o_mk, lse_mk))

    def check():
        ref = reference(q, ref_mk_kv, keys, sink_t, scale)
        e_mk = rel_l2(o_mk, ref)
        if ref_fm_kv is not ref_mk_kv:
            ref = reference(q, ref_fm_kv, keys, sink_t, scale)
        e_fm = rel_l2(res["o"].view(t, h, D), ref)
        return e_mk, e_fm

    nkeys = topk + window
    label = f"T={t} h={h} k={topk}" + (f"+{window}" if window else "")
    return Case(f"{kv} {phase}", label, 2.0 * t * h * nkeys * (D + D), mk, fm, check)


# ---------------------------------------------------------------------------------------------
# Timing
# ---------------------------------------------------------------------------------------------
def side_of(name: str):
    if any(k in name for k in MK_KERNELS):
        return "mk"
    if any(k in name for k in FM_KERNELS):
        return "fm"
    return None


def call_spans(events) -> dict[str, list[float]]:
    """Each call's span (µs) per side from the GPU activities (start, end, name): a call is a run of
    consecutive kernels of one side (by start time), cut at any other activity (the flush)."""
    spans: dict[str, list[float]] = {"mk": [], "fm": []}
    cur, lo, hi = None, 0.0, 0.0
    for start, end, name in sorted(events, key=lambda x: x[0]) + [(math.inf, math.inf, "")]:
        side = side_of(name)
        if side is not None and side == cur:
            lo, hi = min(lo, start), max(hi, end)
            continue
        if cur is not None:
            spans[cur].append(hi - lo)
        cur, lo, hi = side, start, end
    return spans


def kernel_times(case: Case, reps: int):
    """Median kernel-only µs of each side's call (first kernel's start to last kernel's end), calls
    interleaved, an L2 flush before each."""
    events = profile_interleaved(case, reps)
    spans = call_spans(events)
    if len(spans["mk"]) != reps or len(spans["fm"]) != reps:
        names = sorted({n[:90] for _, _, n in events})
        raise RuntimeError(f"{case.label}: found {len(spans['mk'])} moekit / {len(spans['fm'])} FlashMLA calls, "
                           f"want {reps}: {names}")
    return statistics.median(spans["mk"]), statistics.median(spans["fm"])


def report_wrong(e_mk: float, e_fm: float) -> None:
    if not (e_mk < O_TOL) or not (e_fm < O_TOL):
        print(f"  WRONG RESULT: relative L2 vs the FP32 reference moekit {e_mk:.3g}, FlashMLA {e_fm:.3g}")


def build_cases(args):
    """(kv, phase, T, h, topk) per case, in print order."""
    cases = []
    for kv in args.kv:
        tokens = args.tokens if kv == "fp8" else args.bf16_tokens
        for h in args.heads:
            for t in tokens:
                for k in args.topk:
                    cases.append((kv, "decode", t, h, k))
            if args.prefill > 0:
                cases.append((kv, "prefill", args.prefill, h, args.prefill_topk))
    return cases


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kv", default="fp8,bf16", help="case groups: fp8 (FP8 caches), bf16 (bf16 caches)")
    ap.add_argument("--tokens", default="1,16,64,128", help="decode batches T of the fp8 group")
    ap.add_argument("--bf16-tokens", default="", help="decode batches T of the bf16 group (default none)")
    ap.add_argument("--heads", default="64,128", help="query heads (FlashMLA: 64 or 128)")
    ap.add_argument("--topk", default="512,1024,2048", help="top-k of the decode cases (multiples of 128)")
    ap.add_argument("--prefill", type=int, default=4096, help="T of the prefill case of each group (0: none)")
    ap.add_argument("--prefill-topk", type=int, default=2048)
    ap.add_argument("--window", type=int, default=0, choices=(0, 128),
                    help="a second source of 128 entries per token (moekit's window, FlashMLA's extra cache)")
    ap.add_argument("--sink", action="store_true", help="a per-head sink on both sides")
    ap.add_argument("--entries", type=int, default=256 * 1024, help="cache entries N (a multiple of 64)")
    ap.add_argument("--reps", type=int, default=30,
                    help="timed calls per side and case (median); 0: run each side once, untimed (under ncu)")
    ap.add_argument("--only", default=None, help="run only cases whose 'group case' text contains this")
    args = ap.parse_args()
    args.kv = [k for k in args.kv.split(",") if k]
    args.tokens, args.bf16_tokens = int_list(args.tokens), int_list(args.bf16_tokens)
    args.heads, args.topk = int_list(args.heads), int_list(args.topk)
    if any(k not in ("fp8", "bf16") for k in args.kv):
        ap.error("--kv takes fp8 and/or bf16")
    if any(h not in (64, 128) for h in args.heads):
        ap.error("FlashMLA's sparse kernels take 64 or 128 query heads")
    if any(k <= 0 or k % 128 for k in args.topk + [args.prefill_topk]):
        ap.error("top-k must be a positive multiple of 128 (FlashMLA: 64 for decode, 128 for sparse prefill)")
    if args.entries <= 0 or args.entries % FM_PAGE:
        ap.error(f"--entries must be a positive multiple of {FM_PAGE}")
    if args.entries >= 2**31:
        ap.error("--entries must fit int32 indices")

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")
    torch.manual_seed(0)
    print(f"device: {torch.cuda.get_device_name()}, torch {torch.__version__}, "
          f"FlashMLA {getattr(flash_mla, '__version__', '?')} ({os.environ.get('FLASHMLA_COMMIT', 'commit unknown')}), "
          f"moekit {getattr(moekit, '__version__', '?')}")
    caches = Caches(args.entries, args.kv, seed=1)
    print(f"# head dim 512 (dk = dv = 512, K = V), {args.entries} cache entries, FlashMLA page block {FM_PAGE}, "
          f"window {args.window}, sink {'on' if args.sink else 'off'}, softmax scale 1/sqrt(512); "
          f"TFLOPS = 2*T*h*keys*(512+512) / time")
    if "fp8" in args.kv:
        print(f"# fp8 caches: moekit's writer vs FlashMLA's MODEL1 rule: {caches.diff} of {args.entries * D} "
              f"dequantized values differ" + ("" if caches.diff == 0 else " (each side checked against its own)"))
    print(f"{'group':<12} {'case':<22} {'FM us':>8} {'mk us':>8} {'FM/mk':>6} {'FM TF':>6} {'mk TF':>6} "
          f"{'FM err':>8} {'mk err':>8}")
    ratios: dict[str, list[float]] = {}
    wrong = 0
    with torch.no_grad():
        for i, (kv, phase, t, h, k) in enumerate(build_cases(args)):
            text = f"{kv} {phase} T={t} h={h} k={k}"
            if args.only and args.only not in text:
                continue
            case = make_case(caches, kv, phase, t, h, k, args.window, args.sink, seed=100 + i)
            if args.reps == 0:
                case.peer()
                case.mk()
                torch.cuda.synchronize()
                e_mk, e_fm = case.check()
                print(f"{case.group:<12} {case.label:<22} {'-':>8} {'-':>8} {'-':>6} {'-':>6} {'-':>6} "
                      f"{e_fm:8.1e} {e_mk:8.1e}", flush=True)
            else:
                t_mk, t_fm = kernel_times(case, args.reps)
                e_mk, e_fm = case.check()
                r = t_fm / t_mk
                ratios.setdefault(case.group, []).append(r)
                print(f"{case.group:<12} {case.label:<22} {t_fm:8.1f} {t_mk:8.1f} {r:6.3f} "
                      f"{case.flops / t_fm * 1e-6:6.1f} {case.flops / t_mk * 1e-6:6.1f} {e_fm:8.1e} {e_mk:8.1e}",
                      flush=True)
            if not (e_mk < O_TOL) or not (e_fm < O_TOL):
                wrong += 1
            report_wrong(e_mk, e_fm)
            del case
            torch.cuda.empty_cache()
    if ratios:
        print("geomean FlashMLA time / moekit time (> 1: moekit faster):")
        for g, rs in ratios.items():
            gm = math.exp(sum(math.log(x) for x in rs) / len(rs))
            print(f"  {g:<12} {gm:.3f} over {len(rs)} rows (min {min(rs):.3f}, max {max(rs):.3f})")
    if wrong:
        print(f"{wrong} case(s) with a WRONG RESULT")
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())

"""What the Python layer costs over the C++ one: moekit.MoeLayer (DeepSeek-V3 shape, routing from
logits) called from Python, beside `moekit bench moe --loop` in the same run on the same GPU.

    python bench/python_overhead.py [--moekit build/moekit] [--tokens 1,8] [--calls 1000]

Per T it prints, for Python and for C++ (µs per call):
  host   the host's enqueue time of one forward (timed behind a GPU spin, so it never waits on the GPU)
  loop   the stream's time per call of `calls` back-to-back eager forwards, GPU idle at the start
  graph  the same for replays of one CUDA graph holding one forward
and the ratios Python / C++ for loop and graph. Needs torch, moekit installed (pip install .) and the
CLI built by the README's first command. Both sides run on the same data: bench moe's generators
and seeds (moekit._C.bench_fill_*): checkpoint-like weights, x ~ N(0, 1) bf16, logits U[-2, 2),
correction bias U[-0.01, 0.01), so they route every token to the same experts.
"""
import argparse
import re
import subprocess
import sys
import time

import torch

import moekit
from moekit import _C

E, K, H, I = 256, 8, 7168, 2048  # deepseek-v3 (SPEC §5), as `bench moe --preset deepseek-v3`
N_GROUP, TOPK_GROUP, SCALE = 8, 4, 2.5
HOST_CALLS = 100  # their launches fit the launch queue while the spin holds the GPU
WEIGHT_SIGMA = 0.02  # bench moe's kCheckpointWeightSigma
SPIN_CYCLES = 60_000_000  # ~30 ms at the H100's clock: longer than 100 enqueues


def stream():
    return torch.cuda.current_stream().cuda_stream


def checkpoint_weights(n, k, seed, dev):
    """[E, n, k] FP8 + [E, n/128, k/128] fp32: bench moe's checkpoint weights for this seed."""
    q = torch.empty((E, n, k), dtype=torch.float8_e4m3fn, device=dev)
    s = torch.empty((E, (n + 127) // 128, (k + 127) // 128), dtype=torch.float32, device=dev)
    _C.bench_fill_checkpoint_weights(q.view(torch.uint8), s, WEIGHT_SIGMA, seed, stream())
    return q, s


def time_python(layer, t, calls, dev):
    x = torch.empty((t, H), dtype=torch.bfloat16, device=dev)
    logits = torch.empty((t, E), dtype=torch.float32, device=dev)
    _C.bench_fill_normal_bf16(x, 1.0, 21 + t, stream())  # bench moe's seeds: the same x, logits, routing
    _C.bench_fill_uniform(logits, -2.0, 2.0, 31 + t, stream())
    layer.prepare(t)
    layer(x, router_logits=logits)
    torch.cuda.synchronize()

    torch.cuda._sleep(SPIN_CYCLES)
    t0 = time.perf_counter()
    for _ in range(HOST_CALLS):
        layer(x, router_logits=logits)
    host_us = (time.perf_counter() - t0) * 1e6 / HOST_CALLS
    torch.cuda.synchronize()

    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)

    def per_call(fn):
        torch.cuda.synchronize()
        start.record()
        for _ in range(calls):
            fn()
        end.record()
        torch.cuda.synchronize()
        return start.elapsed_time(end) * 1e3 / calls

    loop_us = per_call(lambda: layer(x, router_logits=logits))
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        layer(x, router_logits=logits)
    graph.replay()
    graph_us = per_call(graph.replay)
    return host_us, loop_us, graph_us


def time_cpp(moekit_bin, tokens, calls):
    cmd = [moekit_bin, "bench", "moe", "--preset", "deepseek-v3", "--tokens", ",".join(map(str, tokens)),
           "--no-check", "--no-baseline", "--reps", "3", "--loop", str(calls)]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    found = {}
    pat = (r"# loop deepseek-v3 T=(\d+), \d+ calls: host ([\d.]+) us/call, back-to-back ([\d.]+) us/call, "
           r"graph replay ([-\d.]+) us/call")
    for m in re.finditer(pat, out):
        found[int(m.group(1))] = tuple(float(v) for v in m.groups()[1:])
    missing = [t for t in tokens if t not in found]
    if missing:
        sys.exit(f"no '# loop' line for T = {missing} in the output of: {' '.join(cmd)}\n{out}")
    return found


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--moekit", default="build/moekit", help="the CLI (README's first command builds it)")
    ap.add_argument("--tokens", default="1,8", help="comma-separated T")
    ap.add_argument("--calls", type=int, default=1000, help="back-to-back calls per loop")
    args = ap.parse_args()
    tokens = [int(v) for v in args.tokens.split(",")]
    dev = "cuda"
    w1, s1 = checkpoint_weights(2 * I, H, 11, dev)
    w2, s2 = checkpoint_weights(H, I, 12, dev)
    bias = torch.empty(E, device=dev)
    _C.bench_fill_uniform(bias, -0.01, 0.01, 15, stream())
    layer = moekit.MoeLayer(E, K, H, I, routing=moekit.Routing(
        "sigmoid_grouped", renormalize=True, num_groups=N_GROUP, topk_groups=TOPK_GROUP,
        routed_scaling_factor=SCALE, correction_bias=bias))
    layer.load_weights(w1, s1, w2, s2)
    del w1, s1, w2, s2
    py = {t: time_python(layer, t, args.calls, dev) for t in tokens}
    del layer
    torch.cuda.empty_cache()
    cpp = time_cpp(args.moekit, tokens, args.calls)

    print(f"# {torch.cuda.get_device_name()}, torch {torch.__version__}, moekit {moekit.__version__}; "
          f"deepseek-v3 layer from logits, {args.calls} calls per loop; us per call")
    print(f"{'T':>6} {'py_host':>8} {'cpp_host':>8} {'py_loop':>8} {'cpp_loop':>8} {'loop_ratio':>10} "
          f"{'py_graph':>8} {'cpp_graph':>9} {'graph_ratio':>11}")
    for t in tokens:
        ph, pl, pg = py[t]
        ch, cl, cg = cpp[t]
        print(f"{t:>6} {ph:8.1f} {ch:8.1f} {pl:8.1f} {cl:8.1f} {pl / cl:10.3f} {pg:8.1f} {cg:9.1f} "
              f"{(pg / cg if cg > 0 else float('nan')):11.3f}")


if __name__ == "__main__":
    main()

"""moekit.MoeEpLayer over torch.distributed (NCCL), one process per GPU, on 2 and 4 GPUs (as many
as are visible): each rank's y equals moekit.MoeLayer's on the same tokens with all experts
(bit for bit when deterministic, else within 5e-3 relative L2), in both modes, with a rank that
has no tokens and one at max_tokens_per_rank, from top-k ids and from router logits; a captured
low-latency call replayed with new routing equals the eager call; and the layer's argument errors."""
import pytest

torch = pytest.importorskip("torch")
if torch.cuda.device_count() < 2 or torch.cuda.get_device_capability() != (9, 0):
    pytest.skip("needs two or more CUDA sm_90 (Hopper) GPUs", allow_module_level=True)
pytest.importorskip("moekit._ep", reason="moekit built without NCCL")

import os  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402

import torch.multiprocessing as mp  # noqa: E402

E, K, H, I, CAP = 32, 4, 640, 320, 48


def _tokens(rank, world, dev, seed):
    """This rank's tokens: rank 0 full, the last of 3+ ranks empty, the others in between; some
    -1 and out-of-range ids."""
    t = CAP if rank == 0 else (0 if world > 2 and rank == world - 1 else 11 + 7 * rank)
    g = torch.Generator(device=dev).manual_seed(seed + rank)
    x = torch.randn(t, H, device=dev, generator=g).to(torch.bfloat16)
    ids = torch.randint(0, E, (t, K), device=dev, generator=g, dtype=torch.int32)
    ids[::5, 1] = -1
    ids[::7, 2] = E + 3
    w = torch.rand(t, K, device=dev, generator=g)
    return x, ids, w


# A run that never finishes fails after this many seconds, with each rank's log and stack.
DEADLINE_S = float(os.environ.get("MOEKIT_TEST_EP_DEADLINE_S", "300"))
_LOG = {}


def _log(rank, what, t0=time.monotonic()):
    # Each rank's progress, to stderr and to its log file, so a run that stops shows where.
    line = f"[rank {rank} {time.monotonic() - t0:7.1f} s] {what}"
    print(line, file=sys.stderr, flush=True)
    if "file" in _LOG:
        _LOG["file"].write(line + "\n")
        _LOG["file"].flush()


def _graph_replay_equals_eager(moekit, rank, world, dev, local, x, ids, w):
    """Low latency in a CUDA graph: replayed with new ids and weights, equals the eager call. The
    graph goes before the layer: destroying a communicator waits for the graphs that captured its
    operations (NCCL), so the other order never returns."""
    layer = moekit.MoeEpLayer(E, K, H, I, max_tokens_per_rank=CAP, deterministic=True, gemm1_promote_k=64)
    layer.load_weights(*local)
    layer.prepare()
    _log(rank, "graph: prepared")
    graph = torch.cuda.CUDAGraph()
    try:
        # thread_local: NCCL's own threads may call CUDA while this one captures.
        with torch.cuda.graph(graph, capture_error_mode="thread_local"):
            y_graph = layer(x, topk_ids=ids, topk_weights=w)
        _, ids2, w2 = _tokens(rank, world, dev, 200)
        ids.copy_(ids2)
        w.copy_(w2)
        graph.replay()
        torch.cuda.synchronize()
        _log(rank, "graph: replayed")
        same = torch.equal(y_graph, layer(x, topk_ids=ids, topk_weights=w))
    finally:
        y_graph = None
        graph = None
        torch.cuda.synchronize()
    assert same, f"rank {rank}: replay differs from eager"
    return layer


def _worker(rank, world, init_file, log_dir):
    import faulthandler

    import torch.distributed as dist

    _LOG["file"] = open(os.path.join(log_dir, f"rank{rank}.log"), "w")
    faulthandler.dump_traceback_later(max(DEADLINE_S - 20, 10), exit=True, file=_LOG["file"])

    import moekit
    from moekit_torch_ref import checkpoint_weights, rel_l2

    dev = torch.device("cuda", rank)
    torch.cuda.set_device(dev)
    dist.init_process_group("nccl", init_method=f"file://{init_file}", rank=rank, world_size=world, device_id=dev)
    try:
        g = torch.Generator(device=dev).manual_seed(7)  # the same weights on every rank
        w1, s1 = checkpoint_weights(E, 2 * I, H, dev, g)
        w2, s2 = checkpoint_weights(E, H, I, dev, g)
        n = E // world
        local = [t[rank * n:(rank + 1) * n].contiguous() for t in (w1, s1, w2, s2)]
        x, ids, w = _tokens(rank, world, dev, 100)
        _log(rank, f"initialized, {x.shape[0]} tokens")
        for det in (True, False):
            ref = moekit.MoeLayer(E, K, H, I, deterministic=det, gemm1_promote_k=64)
            ref.load_weights(w1, s1, w2, s2)
            y_ref = ref(x, topk_ids=ids, topk_weights=w)
            for mode in ("low_latency", "high_throughput"):
                layer = moekit.MoeEpLayer(E, K, H, I, max_tokens_per_rank=CAP, mode=mode, deterministic=det,
                                          gemm1_promote_k=64)
                assert (layer.local_offset, layer.local_count) == (rank * n, n)
                layer.load_weights(*local)
                _log(rank, f"{mode} deterministic={det}: layer ready")
                y = layer(x, topk_ids=ids, topk_weights=w)
                torch.cuda.synchronize()
                _log(rank, f"{mode} deterministic={det}: forward done")
                assert y.shape == (x.shape[0], H)
                if det:
                    assert torch.equal(y, y_ref), f"rank {rank} {mode}: not bit-identical"
                elif x.shape[0]:
                    err = rel_l2(y, y_ref)
                    assert err <= 5e-3, f"rank {rank} {mode}: rel L2 {err}"
        # Routing from router logits on the token's rank: the single-GPU layer's logits path.
        logits = torch.randn(x.shape[0], E, device=dev, generator=torch.Generator(device=dev).manual_seed(rank))
        ref = moekit.MoeLayer(E, K, H, I, routing="softmax_topk", deterministic=True, gemm1_promote_k=64)
        ref.load_weights(w1, s1, w2, s2)
        layer = moekit.MoeEpLayer(E, K, H, I, max_tokens_per_rank=CAP, mode="high_throughput", deterministic=True,
                                  gemm1_promote_k=64, routing="softmax_topk")
        layer.load_weights(*local)
        assert torch.equal(layer(x, router_logits=logits), ref(x, router_logits=logits)), f"rank {rank}: logits"
        _log(rank, "logits path done")
        layer = _graph_replay_equals_eager(moekit, rank, world, dev, local, x, ids, w)
        # Argument errors, raised before any collective (on every rank alike).
        import pytest as _pytest

        with _pytest.raises(ValueError, match="max_tokens_per_rank"):
            layer(torch.zeros(CAP + 1, H, dtype=torch.bfloat16, device=dev),
                  topk_ids=torch.zeros(CAP + 1, K, dtype=torch.int32, device=dev),
                  topk_weights=torch.zeros(CAP + 1, K, device=dev))
        with _pytest.raises(TypeError):
            layer(x.float(), topk_ids=ids, topk_weights=w)
        with _pytest.raises(ValueError, match="no routing"):
            layer(x, router_logits=torch.zeros(x.shape[0], E, device=dev))
        with _pytest.raises(ValueError, match="mode"):
            moekit.MoeEpLayer(E, K, H, I, max_tokens_per_rank=CAP, mode="fast")
        dist.barrier()
        _log(rank, "done")
    finally:
        dist.destroy_process_group()


@pytest.mark.parametrize("world", [2, 4])
def test_ep_layer_matches_the_single_gpu_layer(world, tmp_path):
    if torch.cuda.device_count() < world:
        pytest.skip(f"needs {world} GPUs")
    def logs():
        return "".join(f"--- rank {r}\n" + (tmp_path / f"rank{r}.log").read_text() for r in range(world)
                       if (tmp_path / f"rank{r}.log").exists())

    ctx = mp.spawn(_worker, args=(world, str(tmp_path / "init"), str(tmp_path)), nprocs=world, join=False)
    deadline = time.monotonic() + DEADLINE_S
    try:
        while not ctx.join(timeout=5):  # raises as soon as a rank fails (and ends the others)
            if time.monotonic() > deadline:
                for p in ctx.processes:
                    p.kill()
                pytest.fail(f"{world} ranks did not finish within {DEADLINE_S} s:\n{logs()}")
    except mp.ProcessRaisedException as e:
        pytest.fail(f"a rank failed: {e}\n{logs()}")
    except mp.ProcessExitedException as e:  # e.g. faulthandler's deadline: the stacks are in the logs
        pytest.fail(f"a rank exited: {e}\n{logs()}")


def test_ep_layer_needs_torch_distributed():
    import moekit

    with pytest.raises(RuntimeError, match="torch.distributed"):
        moekit.MoeEpLayer(E, K, H, I, max_tokens_per_rank=CAP)

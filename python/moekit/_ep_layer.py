"""moekit.MoeEpLayer: the MoE layer with expert parallelism over NCCL, one process per GPU."""
from __future__ import annotations

from typing import Any, Mapping, Optional, Union

import torch

from . import _torch
from ._check import BF16, F32, I32, LOGITS, check_devices, check_fp8_weights, check_tensor
from ._ops import route
from ._routing import Routing

__all__ = ["MoeEpLayer"]

_MODES = ("low_latency", "high_throughput")


def _ep_module():
    try:
        from . import _ep
    except ImportError as e:  # built without NCCL (cmake/nccl.cmake), or libnccl.so.2 not loadable
        raise RuntimeError(
            "moekit: expert parallelism needs moekit built with NCCL (pip install nvidia-nccl-cu13, then "
            f"rebuild moekit): {e}"
        ) from e
    return _ep


class MoeEpLayer(torch.nn.Module):
    """One rank's part of an FP8 MoE layer whose E experts are split evenly over the ranks of a
    torch.distributed process group (one GPU per rank): rank r holds experts
    [r·E/G, (r+1)·E/G) and passes its own tokens; y[t] is the whole layer's output for them, as
    moekit.MoeLayer computes it (SPEC §3; docs/python.md §Expert parallelism).

    Args:
      num_experts, top_k, hidden, inter: the model's layer (E a multiple of the group's size).
      max_tokens_per_rank: the most tokens any rank passes in one call (sizes the buffers; with
        mode "low_latency" every call moves this many rows per rank).
      mode: "low_latency" (decode: fixed sizes, no host sync, CUDA-graph capturable) or
        "high_throughput" (prefill: only the routed rows travel; waits on the host for the counts).
      process_group: the torch.distributed group (default: the world). Its size and rank place
        the experts; the layer makes its own NCCL communicator on the current CUDA device from it
        (rank 0's NCCL id, broadcast over the group), so it runs beside torch's collectives.
      deterministic: y bit-identical to moekit.MoeLayer(deterministic=True) with the same
        gemm1_promote_k (pass it explicitly); k times the combine's bytes.
      gemm1_promote_k: as moekit.MoeLayer.
      routing: as moekit.MoeLayer's (None: the caller passes top-k ids and weights); the token's
        rank routes its router_logits with moekit.route, the layer's own routing kernel.

    Constructing it is collective (every rank of the group, each with its GPU current), as are
    prepare() and every call. FP8 weights, no biases, in this version.
    """

    def __init__(
        self,
        num_experts: int,
        top_k: int,
        hidden: int,
        inter: int,
        max_tokens_per_rank: int,
        mode: str = "low_latency",
        process_group=None,
        deterministic: bool = False,
        gemm1_promote_k: int = 0,
        routing: Union[Routing, Mapping[str, Any], str, None] = None,
    ) -> None:
        super().__init__()
        self.routing = Routing.coerce(routing)
        if mode not in _MODES:
            raise ValueError(f"moekit: mode must be one of {_MODES}, got {mode!r}")
        if int(max_tokens_per_rank) < 1:
            raise ValueError(f"moekit: max_tokens_per_rank must be >= 1, got {max_tokens_per_rank}")
        import torch.distributed as dist

        if not dist.is_available() or not dist.is_initialized():
            raise RuntimeError("moekit: MoeEpLayer needs torch.distributed initialized (init_process_group)")
        _ep = _ep_module()
        group = process_group if process_group is not None else dist.group.WORLD
        rank, world = dist.get_rank(group), dist.get_world_size(group)
        device = torch.device("cuda", torch.cuda.current_device())
        uid = [_ep.nccl_unique_id() if rank == 0 else None]
        dist.broadcast_object_list(uid, src=dist.get_global_rank(group, 0), group=group, device=device)
        with torch.cuda.device(device):
            self._comm = _ep.Comm(uid[0], world, rank)
            self._layer = _ep.EpLayer(
                int(num_experts), int(top_k), int(hidden), int(inter), self._comm, mode, int(max_tokens_per_rank),
                deterministic=bool(deterministic), gemm1_promote_k=int(gemm1_promote_k),
            )
        self.num_experts, self.top_k, self.hidden, self.inter = int(num_experts), int(top_k), int(hidden), int(inter)
        self.mode = mode
        self.max_tokens_per_rank = int(max_tokens_per_rank)
        self.rank, self.world_size = rank, world
        self.local_offset, self.local_count = int(self._layer.local_offset), int(self._layer.local_count)
        self._device = device
        self._keep: tuple = ()
        self._workspace: Optional[torch.Tensor] = None

    def extra_repr(self) -> str:
        return (f"E={self.num_experts}, k={self.top_k}, H={self.hidden}, I={self.inter}, rank {self.rank} of "
                f"{self.world_size}, experts [{self.local_offset}, {self.local_offset + self.local_count}), {self.mode}")

    @property
    def device(self) -> torch.device:
        return self._device

    def load_weights(self, w1: torch.Tensor, w1_scale: torch.Tensor, w2: torch.Tensor, w2_scale: torch.Tensor) -> None:
        """The local experts' weights (E/G of them), as moekit.MoeLayer.load_weights takes them:
        w1 float8_e4m3fn [E_local, 2I, H], w1_scale float32 [E_local, ceil(2I/128), ceil(H/128)],
        w2 [E_local, H, I], w2_scale [E_local, ceil(H/128), ceil(I/128)], contiguous, on this rank's
        GPU. w2 / w2_scale are used in place (kept referenced); w1 / w1_scale may be dropped. Also
        allocates the layer's workspace (fixed: a function of the configuration and the group)."""
        e, h, i = self.local_count, self.hidden, self.inter
        check_fp8_weights(e, h, i, w1, w1_scale, w2, w2_scale)
        check_devices([("w1", w1), ("w1_scale", w1_scale), ("w2", w2), ("w2_scale", w2_scale)], self._device)
        if torch.cuda.is_current_stream_capturing():
            raise RuntimeError("moekit: load_weights cannot run during CUDA graph capture")
        with torch.cuda.device(self._device):
            prepared = torch.empty(self._layer.prepared_weight_bytes(), dtype=torch.uint8, device=self._device)
            self._layer.prepare_weights(_torch._u8(w1), w1_scale, _torch._u8(w2), w2_scale, prepared,
                                        _torch.current_stream(self._device))
            self._workspace = torch.empty(self._layer.workspace_size(), dtype=torch.uint8, device=self._device)
        self._keep = (w2, w2_scale, prepared)

    def _require_weights(self) -> None:
        if self._workspace is None:
            raise RuntimeError("moekit: call MoeEpLayer.load_weights(...) before using the layer")

    def prepare(self) -> None:
        """Collective: loads every kernel (one forward without tokens) and synchronizes the current
        stream. Call it after load_weights and before capturing a "low_latency" call in a CUDA graph."""
        self._require_weights()
        if torch.cuda.is_current_stream_capturing():
            raise RuntimeError("moekit: prepare() must run before CUDA graph capture, not during it")
        with torch.cuda.device(self._device):
            self._layer.prepare_kernels(self._workspace, _torch.current_stream(self._device))

    def forward(self, x: torch.Tensor, router_logits: Optional[torch.Tensor] = None,
                topk_ids: Optional[torch.Tensor] = None, topk_weights: Optional[torch.Tensor] = None,
                out: Optional[torch.Tensor] = None) -> torch.Tensor:
        """Collective: y bfloat16 [T, H] for this rank's tokens, on torch.cuda.current_stream().

        x: bfloat16 [T, H] contiguous, T <= max_tokens_per_rank (ranks may pass different T, also 0).
        Routing, exactly one of: router_logits float32 / bfloat16 [T, E] (needs the layer's
        routing), or topk_ids int32 [T, k] (global expert ids; -1 = none; others outside [0, E)
        are dropped) with topk_weights float32 [T, k]. out: optional bfloat16 [T, H], fully
        overwritten. One call at a time per layer (its workspace is the layer's own)."""
        self._require_weights()
        h, k, e = self.hidden, self.top_k, self.num_experts
        check_tensor(x, "x", BF16, shape=(None, h), desc=f"[T, H] with H = {h}", contiguous=True)
        t = x.shape[0]
        if t > self.max_tokens_per_rank:
            raise ValueError(f"moekit: T = {t} tokens > max_tokens_per_rank = {self.max_tokens_per_rank}")
        if router_logits is not None:
            if topk_ids is not None or topk_weights is not None:
                raise ValueError("moekit: pass either router_logits or topk_ids + topk_weights, not both")
            if self.routing is None:
                raise ValueError("moekit: this layer has no routing configured; pass topk_ids + topk_weights "
                                 "or construct it with routing=moekit.Routing(...)")
            check_tensor(router_logits, "router_logits", LOGITS, shape=(t, e), desc=f"[T, E] = [{t}, {e}]",
                         contiguous=True)
            if t:
                topk_ids, topk_weights = route(router_logits, self.routing, k)
            else:
                topk_ids = torch.empty((0, k), dtype=torch.int32, device=x.device)
                topk_weights = torch.empty((0, k), dtype=torch.float32, device=x.device)
        elif topk_ids is None or topk_weights is None:
            raise ValueError("moekit: pass router_logits, or both topk_ids and topk_weights")
        check_tensor(topk_ids, "topk_ids", I32, shape=(t, k), desc=f"[T, k] = [{t}, {k}]", contiguous=True)
        check_tensor(topk_weights, "topk_weights", F32, shape=(t, k), desc=f"[T, k] = [{t}, {k}]", contiguous=True)
        if out is not None:
            check_tensor(out, "out", BF16, shape=(t, h), desc=f"[T, H] = [{t}, {h}]", contiguous=True)
        check_devices([("x", x), ("topk_ids", topk_ids), ("topk_weights", topk_weights), ("out", out)], self._device)
        y = torch.empty((t, h), dtype=torch.bfloat16, device=x.device) if out is None else out
        self._layer.forward(x, topk_ids, topk_weights, y, self._workspace, _torch.current_stream(self._device))
        return y

"""moekit.MoeLayer: the FP8 block-scaled MoE layer (SPEC §3) as a torch.nn.Module."""
from __future__ import annotations

import weakref
from typing import Any, Mapping, Optional, Tuple, Union

import torch

from . import _C, _torch
from ._check import BF16, BIAS, F32, I32, LOGITS, U8, check_devices, check_fp8_weights, check_tensor
from ._routing import Routing

__all__ = ["MoeLayer"]

_GEMM1_INPUTS = ("auto", "permuted", "gathered")
_WEIGHT_FORMATS = ("fp8", "mxfp4")
_ACTIVATIONS = ("swiglu", "gpt_oss")


class MoeLayer(torch.nn.Module):
    """One FP8 MoE layer: y[t] = Σ_j w[t, j] · W2[e] · quant(silu(g) · u), (g, u) = W1[e] · quant(x[t]).

    Args:
      num_experts: E, experts of the whole model (ids are in [0, E)).
      top_k: k, slots per token.
      hidden: H (multiple of 16). inter: I, the expert's intermediate width (multiple of 16).
      routing: None (the caller always passes topk_ids / topk_weights), or a moekit.Routing (or a
        dict of its fields, or a method name) so the layer can route router_logits itself.
      limit: SwiGLU clamp (gpt-oss: 7.0); <= 0 means none.
      expert_parallel: (offset, count): this layer holds and computes only experts
        [offset, offset + count); y then holds only their contributions. None = all experts.
      deterministic: True gives bit-identical y run to run (and between eager and graph replay),
        slightly slower. False (default) sums the k slots with FP32 atomics.
      gemm1_promote_k: GEMM1's FP32 promotion interval (0 = automatic, or 32 / 64 / 128).
      gemm1_input: "auto", "permuted" or "gathered" (bit-identical results, speed only).
      weight_format: "fp8" (default: E4M3 with 128x128 FP32 block scales) or "mxfp4" (E2M1 codes
        with a UE8M0 scale per 32 of K, gpt-oss's checkpoints; needs H % 32 == 0 and I % 64 == 0).
      activation: "swiglu" (silu(g) * u) or "gpt_oss" (g * sigmoid(activation_alpha * g) * (u + 1),
        gpt-oss's layer with limit=7.0 and the biases of load_*weights; needs I % 64 == 0).

    The configuration is validated here (ValueError naming the field; no GPU needed). Then call
    load_weights(...) once, optionally prepare(T) for each token count you will capture in a CUDA
    graph, and call the layer.

    This is a torch.nn.Module so it composes into models (as a submodule, under torch.compile),
    but its tensors are deliberately NOT parameters or buffers: the C++ layer holds raw pointers
    into them, so .to() / .cuda() / .half() / load_state_dict must not replace them. Load the
    weights on the GPU that will run the layer; state_dict() is empty. Inference only (no autograd).
    """

    def __init__(
        self,
        num_experts: int,
        top_k: int,
        hidden: int,
        inter: int,
        routing: Union[Routing, Mapping[str, Any], str, None] = None,
        limit: float = 0.0,
        expert_parallel: Optional[Tuple[int, int]] = None,
        deterministic: bool = False,
        gemm1_promote_k: int = 0,
        gemm1_input: str = "auto",
        weight_format: str = "fp8",
        activation: str = "swiglu",
        activation_alpha: float = 1.702,
    ) -> None:
        super().__init__()
        routing = Routing.coerce(routing)
        if gemm1_input not in _GEMM1_INPUTS:
            raise ValueError(f"moekit: gemm1_input must be one of {_GEMM1_INPUTS}, got {gemm1_input!r}")
        if weight_format not in _WEIGHT_FORMATS:
            raise ValueError(f"moekit: weight_format must be one of {_WEIGHT_FORMATS}, got {weight_format!r}")
        if activation not in _ACTIVATIONS:
            raise ValueError(f"moekit: activation must be one of {_ACTIVATIONS}, got {activation!r}")
        if expert_parallel is None:
            local_offset, local_count = 0, 0
        else:
            if not isinstance(expert_parallel, (tuple, list)) or len(expert_parallel) != 2:
                raise ValueError(f"moekit: expert_parallel must be (offset, count) or None, got {expert_parallel!r}")
            local_offset, local_count = int(expert_parallel[0]), int(expert_parallel[1])
        c_routing = None
        if routing is not None:
            bias = routing.correction_bias
            if bias is not None:
                check_tensor(bias, "routing.correction_bias", F32, shape=(num_experts,), desc=f"[E] = [{num_experts}]", contiguous=True)
                check_devices([("routing.correction_bias", bias)])
            c_routing = _torch.make_c_routing(
                routing.method, bool(routing.renormalize), int(routing.num_groups), int(routing.topk_groups),
                float(routing.routed_scaling_factor), bias,
            )
        layer = _C.Layer(
            int(num_experts), int(top_k), int(hidden), int(inter),
            routing=c_routing, limit=float(limit), local_offset=local_offset, local_count=local_count,
            deterministic=bool(deterministic), gemm1_promote_k=int(gemm1_promote_k), gemm1_input=gemm1_input,
            weight_format=weight_format, activation=activation, activation_alpha=float(activation_alpha),
        )
        self.weight_format = weight_format
        self.activation = activation
        self.num_experts = int(num_experts)
        self.top_k = int(top_k)
        self.hidden = int(hidden)
        self.inter = int(inter)
        self.routing = routing
        self.limit = float(limit)
        self.local_offset = local_offset
        self.local_count = local_count if local_count > 0 else self.num_experts
        self.deterministic = bool(deterministic)
        self.weights_loaded = False
        self._device: Optional[torch.device] = None
        state = _torch._LayerState(layer, None)
        state.keep = (routing.correction_bias,) if routing is not None and routing.correction_bias is not None else ()
        self._state = state
        self._handle = _torch.register_layer(state)
        # Drop the registry entry (and with it the weights) when this module is collected.
        weakref.finalize(self, _torch.unregister_layer, self._handle)

    def extra_repr(self) -> str:
        r = self.routing.method if self.routing is not None else "caller top-k"
        ep = f", experts [{self.local_offset}, {self.local_offset + self.local_count})" if self.local_count != self.num_experts else ""
        fmt = ", mxfp4" if self.weight_format == "mxfp4" else ""
        return f"E={self.num_experts}, k={self.top_k}, H={self.hidden}, I={self.inter}, routing={r}{ep}{fmt}"

    @property
    def device(self) -> Optional[torch.device]:
        """The GPU of the loaded weights (None before load_weights)."""
        return self._device

    def prepared_weight_bytes(self) -> int:
        return int(self._state.layer.prepared_weight_bytes())

    def workspace_size(self, num_tokens: int) -> int:
        """Bytes of the per-call workspace for T tokens (allocated by each call from torch's cache)."""
        return self._state.workspace_size(int(num_tokens))

    # -----------------------------------------------------------------------------------------
    def _check_biases(self, b1, b2):
        """gpt-oss's optional biases: fp32 or bf16 (one dtype) b1 [E_local, 2I], b2 [E_local, H]."""
        e, h, i = self.local_count, self.hidden, self.inter
        if b1 is not None:
            check_tensor(b1, "b1", BIAS, shape=(e, 2 * i), desc=f"[E_local, 2I] = [{e}, {2 * i}]", contiguous=True)
        if b2 is not None:
            check_tensor(b2, "b2", BIAS, shape=(e, h), desc=f"[E_local, H] = [{e}, {h}]", contiguous=True)
        if b1 is not None and b2 is not None and b1.dtype != b2.dtype:
            raise TypeError(f"moekit: b1 and b2 must have one dtype, got {b1.dtype} and {b2.dtype}")

    def _prepare(self, who, weights, b1, b2, prepare):
        """The common part of load_weights / load_mxfp4_weights: biases checked, every tensor on one
        GPU, not under capture; prepare(prepared, stream) fills a new prepared buffer there.
        Returns (routing bias or None, device, prepared)."""
        self._check_biases(b1, b2)
        bias = self.routing.correction_bias if self.routing is not None else None
        names = ("w1", "w1_scale", "w2", "w2_scale")
        device = check_devices(list(zip(names, weights)) + [("b1", b1), ("b2", b2), ("routing.correction_bias", bias)])
        if torch.cuda.is_current_stream_capturing():
            raise RuntimeError(f"moekit: {who} cannot run during CUDA graph capture")
        prepared = torch.empty(self._state.layer.prepared_weight_bytes(), dtype=torch.uint8, device=device)
        with torch.cuda.device(device):
            prepare(prepared, _torch.current_stream(device))
        self._state.device = device
        self._device = device
        return bias, device, prepared

    def load_weights(
        self, w1: torch.Tensor, w1_scale: torch.Tensor, w2: torch.Tensor, w2_scale: torch.Tensor,
        b1: Optional[torch.Tensor] = None, b2: Optional[torch.Tensor] = None,
    ) -> None:
        """One-time weight preparation (SPEC §3 convention), on the current stream of the weights' GPU.

        w1: float8_e4m3fn (or uint8 codes) [E_local, 2I, H] contiguous; rows [0, I) gate, [I, 2I) up.
        w1_scale: float32 [E_local, ceil(2I/128), ceil(H/128)] contiguous (128x128 block scales).
        w2: float8_e4m3fn [E_local, H, I] contiguous. w2_scale: float32 [E_local, ceil(H/128), ceil(I/128)].
        b1 / b2 (optional, gpt-oss): fp32 or bf16 biases [E_local, 2I] (added to g and u) and
        [E_local, H] (added to W2 · h before the router weight); copied.
        E_local = the expert_parallel count (or E). All on one CUDA device.
        W1 is converted into a prepared buffer the layer allocates (torch, on that device); W2 and
        its scales are used in place: the layer keeps references to w2, w2_scale and the prepared
        buffer -- do not modify w2/w2_scale in place afterwards (call load_weights again instead).
        w1 / w1_scale may be dropped after this call. Must not run while a forward is in flight
        on another stream.
        """
        if self.weight_format == "mxfp4":
            raise ValueError("moekit: this layer takes MXFP4 weights: call load_mxfp4_weights(...)")
        e, h, i = self.local_count, self.hidden, self.inter
        check_fp8_weights(e, h, i, w1, w1_scale, w2, w2_scale)

        def prepare(prepared, stream):
            self._state.layer.prepare_weights(_torch._u8(w1), w1_scale, _torch._u8(w2), w2_scale, prepared, stream,
                                              b1=b1, b2=b2)

        bias, _, prepared = self._prepare("load_weights", (w1, w1_scale, w2, w2_scale), b1, b2, prepare)
        state = self._state
        state.keep = (w2, w2_scale, prepared) + ((bias,) if bias is not None else ())
        state.ws_sizes.clear()
        self.weights_loaded = True

    def load_mxfp4_weights(
        self,
        w1: torch.Tensor,
        w1_scale: torch.Tensor,
        w2: torch.Tensor,
        w2_scale: torch.Tensor,
        gate_up_interleaved: bool = False,
        b1: Optional[torch.Tensor] = None,
        b2: Optional[torch.Tensor] = None,
    ) -> None:
        """One-time preparation of MXFP4 expert weights (weight_format="mxfp4"), on the current
        stream of the weights' GPU; every input may be dropped afterwards (the layer keeps only its
        prepared buffer: the codes stay 4-bit).

        w1: uint8 codes [E_local, 2I, H/2] (two E2M1 values per byte along K, the low nibble the even
          one), or gpt-oss's blocks [E_local, 2I, H/32, 16]; w1_scale: uint8 UE8M0 [E_local, 2I, H/32].
        w2 / w2_scale: likewise [E_local, H, I/2] (or [E_local, H, I/32, 16]) and [E_local, H, I/32].
        gate_up_interleaved: W1's rows in gpt-oss's order (row 2i gate row i, 2i + 1 up row i), as its
          checkpoints store mlp1_weight; False: rows [0, I) gate, [I, 2I) up. b1 follows W1's order.
        b1 / b2: optional biases as load_weights takes them (gpt-oss's mlp1_bias / mlp2_bias).
        All contiguous, on one CUDA device.
        """
        if self.weight_format != "mxfp4":
            raise ValueError("moekit: this layer takes FP8 weights (weight_format='fp8'): call load_weights(...)")
        e, h, i = self.local_count, self.hidden, self.inter
        if w1.dim() == 4:
            w1 = w1.reshape(w1.shape[0], w1.shape[1], -1)
        if w2.dim() == 4:
            w2 = w2.reshape(w2.shape[0], w2.shape[1], -1)
        check_tensor(w1, "w1", U8, shape=(e, 2 * i, h // 2), desc=f"[E_local, 2I, H/2] = [{e}, {2 * i}, {h // 2}]", contiguous=True)
        check_tensor(w1_scale, "w1_scale", U8, shape=(e, 2 * i, h // 32),
                     desc=f"[E_local, 2I, H/32] = [{e}, {2 * i}, {h // 32}]", contiguous=True)
        check_tensor(w2, "w2", U8, shape=(e, h, i // 2), desc=f"[E_local, H, I/2] = [{e}, {h}, {i // 2}]", contiguous=True)
        check_tensor(w2_scale, "w2_scale", U8, shape=(e, h, i // 32),
                     desc=f"[E_local, H, I/32] = [{e}, {h}, {i // 32}]", contiguous=True)

        def prepare(prepared, stream):
            self._state.layer.prepare_weights_mxfp4(w1, w1_scale, w2, w2_scale, prepared, stream,
                                                    bool(gate_up_interleaved), b1=b1, b2=b2)

        bias, _, prepared = self._prepare("load_mxfp4_weights", (w1, w1_scale, w2, w2_scale), b1, b2, prepare)
        state = self._state
        state.keep = (prepared,) + ((bias,) if bias is not None else ())
        state.ws_sizes.clear()
        self.weights_loaded = True

    def prepare(self, num_tokens: int) -> None:
        """Compile (NVRTC, cached in memory and on disk) every kernel a forward with num_tokens
        tokens launches, by running one forward on zeros; synchronizes the current stream. Call it
        after load_weights and BEFORE capturing a CUDA graph, once per token count you capture
        (which kernels run depends only on T and the configuration, never on the routing)."""
        self._require_weights()
        t = int(num_tokens)
        if t < 0:
            raise ValueError(f"moekit: num_tokens must be >= 0, got {t}")
        if torch.cuda.is_current_stream_capturing():
            raise RuntimeError("moekit: prepare() must run before CUDA graph capture, not during it")
        if t == 0:
            return
        device = self._device
        with torch.cuda.device(device):
            ws = self._state.workspace(t, device)
            self._state.layer.prepare_kernels(t, ws, _torch.current_stream(device))

    def _require_weights(self) -> None:
        if not self.weights_loaded:
            raise RuntimeError("moekit: call MoeLayer.load_weights(...) before using the layer")

    # -----------------------------------------------------------------------------------------
    def forward(
        self,
        x: torch.Tensor,
        router_logits: Optional[torch.Tensor] = None,
        topk_ids: Optional[torch.Tensor] = None,
        topk_weights: Optional[torch.Tensor] = None,
        out: Optional[torch.Tensor] = None,
    ) -> torch.Tensor:
        """y = MoE(x), bfloat16 [T, H], on torch.cuda.current_stream(); asynchronous, no host sync.

        x: bfloat16 [T, H] contiguous, on the weights' GPU.
        Routing, exactly one of:
          router_logits: float32 or bfloat16 [T, E] contiguous (needs the layer's routing), or
          topk_ids: int32 [T, k] contiguous (-1 = no expert; ids outside [-1, E) are skipped)
            together with topk_weights: float32 [T, k] contiguous.
        out: optional bfloat16 [T, H] contiguous, fully overwritten and returned (must not overlap x).
        T = 0 returns an empty y (nothing launches). The workspace comes from torch's caching
        allocator each call. Raises TypeError / ValueError / RuntimeError before launching.
        """
        self._require_weights()
        h, k, e = self.hidden, self.top_k, self.num_experts
        check_tensor(x, "x", BF16, shape=(None, h), desc=f"[T, H] with H = {h}", contiguous=True)
        t = x.shape[0]
        if router_logits is not None:
            if topk_ids is not None or topk_weights is not None:
                raise ValueError("moekit: pass either router_logits or topk_ids + topk_weights, not both")
            if self.routing is None:
                raise ValueError("moekit: this layer has no routing configured; pass topk_ids + topk_weights "
                                 "or construct it with routing=moekit.Routing(...)")
            check_tensor(router_logits, "router_logits", LOGITS, shape=(t, e), desc=f"[T, E] = [{t}, {e}]", contiguous=True)
        else:
            if topk_ids is None or topk_weights is None:
                raise ValueError("moekit: pass router_logits, or both topk_ids and topk_weights")
            check_tensor(topk_ids, "topk_ids", I32, shape=(t, k), desc=f"[T, k] = [{t}, {k}]", contiguous=True)
            check_tensor(topk_weights, "topk_weights", F32, shape=(t, k), desc=f"[T, k] = [{t}, {k}]", contiguous=True)
        if out is not None:
            check_tensor(out, "out", BF16, shape=(t, h), desc=f"[T, H] = [{t}, {h}]", contiguous=True)
        check_devices([("x", x), ("router_logits", router_logits), ("topk_ids", topk_ids),
                       ("topk_weights", topk_weights), ("out", out)], self._device)
        y = torch.empty((t, h), dtype=torch.bfloat16, device=x.device) if out is None else out
        if t == 0:
            return y
        if torch.compiler.is_compiling():
            torch.ops.moekit.moe_forward(self._handle, x, router_logits, topk_ids, topk_weights, y)
        else:  # eager (and CUDA graph capture): the same function without the dispatcher's ~tens of µs
            _torch.run_moe_forward(self._state, x, router_logits, topk_ids, topk_weights, y, checked=True)
        return y

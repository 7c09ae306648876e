"""moekit.Routing: how a layer (or moekit.route) turns router logits into top-k ids and weights.

Pure Python (no torch needed to construct one); mirrors moekit::RoutingConfig (routing.h) without
num_experts / top_k, which come from the layer or from the call.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Optional

METHODS = ("softmax_topk", "topk_softmax", "sigmoid_grouped")


@dataclass(frozen=True)
class Routing:
    """Routing method and options (SPEC §3).

    method:
      - ``"softmax_topk"``: p = softmax(logits); top-k of p; weights p, renormalized to sum 1 if
        ``renormalize`` (Qwen3-MoE with ``norm_topk_prob``, Mixtral, DeepSeek-V2).
      - ``"topk_softmax"``: top-k of the logits; weights = softmax over the k picked (gpt-oss).
      - ``"sigmoid_grouped"``: DeepSeek-V3: s = sigmoid(logits), b = s + correction_bias, experts
        in ``num_groups`` groups scored by the sum of their top-2 b, keep ``topk_groups`` groups,
        top-k of b among them; weights = s of those, normalized if ``renormalize``, times
        ``routed_scaling_factor``.
    num_groups / topk_groups / routed_scaling_factor / correction_bias: sigmoid_grouped only (the
    softmax methods reject non-default values). correction_bias: a CUDA float32 tensor [E]
    (DeepSeek's ``e_score_correction_bias``), or None for zeros; a layer keeps a reference to it
    and reads it at every forward (so updating it in place takes effect).
    Ties go to the lower expert index (and the lower group index).
    """

    method: str = "softmax_topk"
    renormalize: bool = False
    num_groups: int = 1
    topk_groups: int = 1
    routed_scaling_factor: float = 1.0
    correction_bias: Optional[Any] = None  # torch.Tensor | None

    def __post_init__(self) -> None:
        if self.method not in METHODS:
            raise ValueError(f"moekit.Routing: method must be one of {METHODS}, got {self.method!r}")
        for name in ("num_groups", "topk_groups"):
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool) or v < 1:
                raise ValueError(f"moekit.Routing: {name} must be an int >= 1, got {v!r}")
        if self.topk_groups > self.num_groups:
            raise ValueError(
                f"moekit.Routing: topk_groups ({self.topk_groups}) must be <= num_groups ({self.num_groups})"
            )

    @staticmethod
    def coerce(value: "Routing | Mapping[str, Any] | str | None") -> "Optional[Routing]":
        """None → None; a Routing as is; a dict → Routing(**dict); a str → Routing(method=str)."""
        if value is None or isinstance(value, Routing):
            return value
        if isinstance(value, str):
            return Routing(method=value)
        if isinstance(value, Mapping):
            return Routing(**value)
        raise TypeError(f"moekit: routing must be None, a moekit.Routing, a dict or a method name, got {type(value).__name__}")

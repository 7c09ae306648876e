from typing import Any, Literal, Mapping, NamedTuple, Optional, Tuple, Union

import torch

from . import _C as _C

__version__: str

def cuda_device_count() -> int: ...
def device_supported(device: int = -1) -> bool: ...
def cache_dir() -> str: ...
def sfa_ld(m: int) -> int: ...

class Routing:
    method: str
    renormalize: bool
    num_groups: int
    topk_groups: int
    routed_scaling_factor: float
    correction_bias: Optional[torch.Tensor]
    def __init__(
        self,
        method: str = "softmax_topk",
        renormalize: bool = False,
        num_groups: int = 1,
        topk_groups: int = 1,
        routed_scaling_factor: float = 1.0,
        correction_bias: Optional[torch.Tensor] = None,
    ) -> None: ...
    @staticmethod
    def coerce(value: Union["Routing", Mapping[str, Any], str, None]) -> Optional["Routing"]: ...

_RoutingLike = Union[Routing, Mapping[str, Any], str, None]
_Pair = Tuple[torch.Tensor, torch.Tensor]

class MoeLayer(torch.nn.Module):
    num_experts: int
    top_k: int
    hidden: int
    inter: int
    routing: Optional[Routing]
    limit: float
    local_offset: int
    local_count: int
    deterministic: bool
    weights_loaded: bool
    def __init__(
        self,
        num_experts: int,
        top_k: int,
        hidden: int,
        inter: int,
        routing: _RoutingLike = None,
        limit: float = 0.0,
        expert_parallel: Optional[Tuple[int, int]] = None,
        deterministic: bool = False,
        gemm1_promote_k: int = 0,
        gemm1_input: str = "auto",
    ) -> None: ...
    @property
    def device(self) -> Optional[torch.device]: ...
    def prepared_weight_bytes(self) -> int: ...
    def workspace_size(self, num_tokens: int) -> int: ...
    def load_weights(self, w1: torch.Tensor, w1_scale: torch.Tensor, w2: torch.Tensor, w2_scale: torch.Tensor) -> None: ...
    def prepare(self, num_tokens: int) -> None: ...
    def forward(
        self,
        x: torch.Tensor,
        router_logits: Optional[torch.Tensor] = None,
        topk_ids: Optional[torch.Tensor] = None,
        topk_weights: Optional[torch.Tensor] = None,
        out: Optional[torch.Tensor] = None,
    ) -> torch.Tensor: ...
    def __call__(
        self,
        x: torch.Tensor,
        router_logits: Optional[torch.Tensor] = None,
        topk_ids: Optional[torch.Tensor] = None,
        topk_weights: Optional[torch.Tensor] = None,
        out: Optional[torch.Tensor] = None,
    ) -> torch.Tensor: ...

class MoeEpLayer(torch.nn.Module):
    num_experts: int
    top_k: int
    hidden: int
    inter: int
    mode: str
    max_tokens_per_rank: int
    rank: int
    world_size: int
    routing: Optional[Routing]
    local_offset: int
    local_count: int
    def __init__(
        self,
        num_experts: int,
        top_k: int,
        hidden: int,
        inter: int,
        max_tokens_per_rank: int,
        mode: str = "low_latency",
        process_group: Any = None,
        deterministic: bool = False,
        gemm1_promote_k: int = 0,
        routing: _RoutingLike = None,
    ) -> None: ...
    @property
    def device(self) -> torch.device: ...
    def load_weights(self, w1: torch.Tensor, w1_scale: torch.Tensor, w2: torch.Tensor, w2_scale: torch.Tensor) -> None: ...
    def prepare(self) -> None: ...
    def forward(self, x: torch.Tensor, router_logits: Optional[torch.Tensor] = None,
                topk_ids: Optional[torch.Tensor] = None, topk_weights: Optional[torch.Tensor] = None,
                out: Optional[torch.Tensor] = None) -> torch.Tensor: ...

def fp8_gemm_nt(a: _Pair, b: _Pair, out: torch.Tensor) -> None: ...
def m_grouped_fp8_gemm_nt_contiguous(a: _Pair, b: _Pair, out: torch.Tensor, m_indices: torch.Tensor, check_layout: bool = True) -> None: ...
def m_grouped_fp8_gemm_nt_masked(a: _Pair, b: _Pair, out: torch.Tensor, masked_m: torch.Tensor, expected_m: Optional[int] = None) -> None: ...
def per_token_group_quant_fp8(x: torch.Tensor, group_size: int = 128, ue8m0: bool = False) -> Tuple[torch.Tensor, torch.Tensor]: ...
def per_block_quant_fp8(w: torch.Tensor, ue8m0: bool = False) -> Tuple[torch.Tensor, torch.Tensor]: ...
def route(logits: torch.Tensor, routing: _RoutingLike, top_k: int) -> Tuple[torch.Tensor, torch.Tensor]: ...
def check_m_indices(m_indices: torch.Tensor, num_groups: int) -> None: ...
def sfa_to_physical(sfa: torch.Tensor, rows: int, k: int, name: str = "sfa") -> torch.Tensor: ...
def prepare_fp8_gemm_nt(m: int, n: int, k: int) -> None: ...
def prepare_m_grouped_contiguous(m_sum: int, num_groups: int, n: int, k: int) -> None: ...
def prepare_m_grouped_masked(max_m: int, num_groups: int, n: int, k: int) -> None: ...

# DeepSeek-V4 attention (_attention.py)
class MixedKvCache(NamedTuple):
    nope: torch.Tensor
    scales: torch.Tensor
    rope: torch.Tensor
    @property
    def num_entries(self) -> int: ...
    def dequantize(self, dtype: torch.dtype = ...) -> torch.Tensor: ...
    @classmethod
    def from_rows(cls, rows: torch.Tensor) -> MixedKvCache: ...

_MixedLike = Union[MixedKvCache, Tuple[torch.Tensor, torch.Tensor, torch.Tensor]]

def mixed_kv_cache(
    num_entries: int, device: Union[torch.device, str, None] = None, layout: Literal["dense", "rows"] = "dense"
) -> MixedKvCache: ...
def mixed_kv_cache_write(k: torch.Tensor, slots: torch.Tensor, cache: _MixedLike) -> None: ...
def rope_(
    x: torch.Tensor, positions: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, inverse: bool = False
) -> torch.Tensor: ...
def sparse_attention(
    q: torch.Tensor,
    kv: Union[torch.Tensor, _MixedLike],
    *,
    topk_indices: Optional[torch.Tensor] = None,
    topk_lens: Optional[torch.Tensor] = None,
    window_indices: Optional[torch.Tensor] = None,
    window_lens: Optional[torch.Tensor] = None,
    token_request: Optional[torch.Tensor] = None,
    window_positions: Optional[torch.Tensor] = None,
    query_positions: Optional[torch.Tensor] = None,
    sink: Optional[torch.Tensor] = None,
    softmax_scale: Optional[float] = None,
    return_partials: bool = False,
    out: Optional[Tuple[torch.Tensor, Optional[torch.Tensor]]] = None,
) -> Tuple[torch.Tensor, Optional[torch.Tensor]]: ...
def attention_merge(
    o_partials: torch.Tensor,
    lse_partials: torch.Tensor,
    weight_logits: Optional[torch.Tensor] = None,
    sink: Optional[torch.Tensor] = None,
) -> Tuple[torch.Tensor, torch.Tensor]: ...

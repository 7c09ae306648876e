"""moekit._C: the nanobind extension (contract: SPEC_PY.md). Tensors are any DLPack tensors
(torch, CuPy, JAX, numpy); `stream` is a cudaStream_t as an int (0 = default stream). Every call
is asynchronous on `stream` and never synchronizes (prepare_* / prepare_kernels excepted)."""
from typing import Any, Optional

Tensor = Any  # a DLPack-capable array

def version() -> str: ...
def cuda_device_count() -> int: ...
def device_supported(device: int = -1) -> bool: ...
def cache_dir() -> str: ...
def sfa_ld(m: int) -> int: ...

class Routing:
    def __init__(
        self,
        method: str,
        renormalize: bool = False,
        num_groups: int = 1,
        topk_groups: int = 1,
        routed_scaling_factor: float = 1.0,
        correction_bias: Optional[Tensor] = None,
    ) -> None: ...

class Layer:
    def __init__(
        self,
        num_experts: int,
        top_k: int,
        hidden: int,
        inter: int,
        *,
        routing: Optional[Routing] = None,
        limit: float = 0.0,
        local_offset: int = 0,
        local_count: int = 0,
        deterministic: bool = False,
        gemm1_promote_k: int = 0,
        gemm1_input: str = "auto",
        weight_format: str = "fp8",
        activation: str = "swiglu",
        activation_alpha: float = 1.702,
    ) -> None: ...
    num_experts: int
    weight_format: str
    activation: str
    top_k: int
    hidden: int
    inter: int
    local_offset: int
    local_count: int
    def prepared_weight_bytes(self) -> int: ...
    def workspace_size(self, num_tokens: int) -> int: ...
    def prepare_weights(
        self, w1: Tensor, w1_scale: Tensor, w2: Tensor, w2_scale: Tensor, prepared: Tensor, stream: int,
        b1: Optional[Tensor] = None, b2: Optional[Tensor] = None,
    ) -> None: ...
    def prepare_weights_mxfp4(
        self, w1: Tensor, w1_scale: Tensor, w2: Tensor, w2_scale: Tensor, prepared: Tensor, stream: int,
        gate_up_interleaved: bool = False, b1: Optional[Tensor] = None, b2: Optional[Tensor] = None,
    ) -> None: ...
    def forward(
        self,
        x: Tensor,
        y: Tensor,
        workspace: Tensor,
        stream: int,
        *,
        topk_ids: Optional[Tensor] = None,
        topk_weights: Optional[Tensor] = None,
        logits: Optional[Tensor] = None,
        routed_ids: Optional[Tensor] = None,
        routed_weights: Optional[Tensor] = None,
        invalid_count: Optional[Tensor] = None,
    ) -> None: ...
    def forward_ptrs(
        self, num_tokens: int, x: int, y: int, workspace: int, workspace_bytes: int, stream: int,
        logits: int = 0, logits_bf16: bool = False, topk_ids: int = 0, topk_weights: int = 0,
    ) -> None: ...
    def prepare_kernels(self, num_tokens: int, workspace: Tensor, stream: int) -> None: ...

def gemm_fp8_nt(a: Tensor, sa: Tensor, b: Tensor, sb: Tensor, d: Tensor, stream: int) -> None: ...
def grouped_gemm_fp8_contiguous(a: Tensor, sa: Tensor, b: Tensor, sb: Tensor, d: Tensor, offsets: Tensor, counts: Tensor, stream: int) -> None: ...
def grouped_gemm_fp8_masked(a: Tensor, sa: Tensor, b: Tensor, sb: Tensor, d: Tensor, counts: Tensor, stream: int) -> None: ...
def contiguous_offsets(counts: Tensor, offsets: Tensor, stream: int) -> None: ...
def quantize_act_1x128(x: Tensor, q: Tensor, sa: Tensor, ue8m0: bool, stream: int) -> None: ...
def quantize_weight_128x128(w: Tensor, q: Tensor, sb: Tensor, ue8m0: bool, stream: int) -> None: ...
def route(routing: Routing, logits: Tensor, topk_ids: Tensor, topk_weights: Tensor, stream: int) -> None: ...
def prepare_gemm(m: int, n: int, k: int) -> None: ...
def prepare_grouped_contiguous(rows: int, num_experts: int, n: int, k: int) -> None: ...
def prepare_grouped_masked(max_m: int, num_experts: int, n: int, k: int) -> None: ...

# DeepSeek-V4 attention (bind_attention.cpp; include/moekit/attention.h). The attention's mode
# follows from its outputs: o (and lse) normalized, or o_partial and lse_partial per source.
def mixed_kv_cache_write(
    k: Tensor, slots: Tensor, nope: Tensor, scales: Tensor, rope: Tensor, stream: int = 0
) -> None: ...
def rope_(
    x: Tensor, positions: Tensor, cos: Tensor, sin: Tensor, inverse: bool = False, stream: int = 0
) -> None: ...
def sparse_attention(
    q: Tensor,
    kv: Optional[Tensor] = None,
    nope: Optional[Tensor] = None,
    scales: Optional[Tensor] = None,
    rope: Optional[Tensor] = None,
    topk_indices: Optional[Tensor] = None,
    topk_lens: Optional[Tensor] = None,
    window_indices: Optional[Tensor] = None,
    window_lens: Optional[Tensor] = None,
    token_request: Optional[Tensor] = None,
    window_positions: Optional[Tensor] = None,
    query_positions: Optional[Tensor] = None,
    sink: Optional[Tensor] = None,
    softmax_scale: Optional[float] = None,
    o: Optional[Tensor] = None,
    lse: Optional[Tensor] = None,
    o_partial: Optional[Tensor] = None,
    lse_partial: Optional[Tensor] = None,
    workspace: Optional[Tensor] = None,
    stream: int = 0,
) -> None: ...
def sparse_attention_workspace_bytes(
    q: Tensor,
    kv: Optional[Tensor] = None,
    nope: Optional[Tensor] = None,
    scales: Optional[Tensor] = None,
    rope: Optional[Tensor] = None,
    topk_indices: Optional[Tensor] = None,
    topk_lens: Optional[Tensor] = None,
    window_indices: Optional[Tensor] = None,
    window_lens: Optional[Tensor] = None,
    token_request: Optional[Tensor] = None,
    window_positions: Optional[Tensor] = None,
    query_positions: Optional[Tensor] = None,
    sink: Optional[Tensor] = None,
    softmax_scale: Optional[float] = None,
    partial: bool = False,
) -> int: ...
def attention_merge(
    o_partials: Tensor, lse_partials: Tensor, weight_logits: Optional[Tensor], sink: Optional[Tensor], o: Tensor,
    lse: Optional[Tensor] = None, stream: int = 0,
) -> None: ...

# The benches' deterministic data generators (src/runtime/random.h; bench/python_overhead.py).
def bench_fill_uniform(t: Tensor, lo: float, hi: float, seed: int, stream: int = 0) -> None: ...
def bench_fill_normal_bf16(t: Tensor, sigma: float, seed: int, stream: int = 0) -> None: ...
def bench_fill_checkpoint_weights(q: Tensor, scales: Tensor, sigma: float, seed: int, stream: int = 0) -> None: ...

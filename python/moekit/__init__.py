"""moekit: FP8 block-scaled Mixture-of-Experts kernels for Hopper (sm_90) GPUs.

``moekit._C`` is the compiled extension (DLPack tensors, integer CUDA streams). With torch
installed, this package adds the torch API: ``moekit.MoeLayer`` and the DeepGEMM-named ops
(``fp8_gemm_nt``, ``m_grouped_fp8_gemm_nt_contiguous``, ``m_grouped_fp8_gemm_nt_masked``,
``per_token_group_quant_fp8``, ``per_block_quant_fp8``, ``route``), registered as torch custom ops
(``torch.ops.moekit.*``) so they work under ``torch.compile`` and CUDA graphs. See docs/python.md.
"""
from . import _C
from ._routing import Routing

__version__: str = _C.version()

cuda_device_count = _C.cuda_device_count
device_supported = _C.device_supported
cache_dir = _C.cache_dir
sfa_ld = _C.sfa_ld

_TORCH_API = (
    "MoeLayer",
    "MoeEpLayer",
    "fp8_gemm_nt",
    "m_grouped_fp8_gemm_nt_contiguous",
    "m_grouped_fp8_gemm_nt_masked",
    "per_token_group_quant_fp8",
    "per_block_quant_fp8",
    "route",
    "check_m_indices",
    "sfa_to_physical",
    "prepare_fp8_gemm_nt",
    "prepare_m_grouped_contiguous",
    "prepare_m_grouped_masked",
    "MixedKvCache",
    "mixed_kv_cache",
    "mixed_kv_cache_write",
    "rope_",
    "sparse_attention",
    "attention_merge",
)

try:
    import torch as _torch_mod  # noqa: F401
except ImportError:  # torch is optional: only moekit._C (DLPack) is available then
    _torch_import_error: "ImportError | None" = ImportError("torch is not installed")
else:
    _torch_import_error = None
    from . import _torch  # noqa: F401  (registers torch.ops.moekit.*)
    from ._attention import (
        MixedKvCache,
        attention_merge,
        mixed_kv_cache,
        mixed_kv_cache_write,
        rope_,
        sparse_attention,
    )
    from ._ep_layer import MoeEpLayer
    from ._layer import MoeLayer
    from ._ops import (
        check_m_indices,
        fp8_gemm_nt,
        m_grouped_fp8_gemm_nt_contiguous,
        m_grouped_fp8_gemm_nt_masked,
        per_block_quant_fp8,
        per_token_group_quant_fp8,
        prepare_fp8_gemm_nt,
        prepare_m_grouped_contiguous,
        prepare_m_grouped_masked,
        route,
        sfa_to_physical,
    )


def __getattr__(name: str):
    if name in _TORCH_API and _torch_import_error is not None:
        raise ImportError(
            f"moekit.{name} needs torch ({_torch_import_error}); install torch, or use moekit._C "
            "with any DLPack tensors"
        )
    raise AttributeError(f"module 'moekit' has no attribute {name!r}")


__all__ = [
    "__version__",
    "Routing",
    "cuda_device_count",
    "device_supported",
    "cache_dir",
    "sfa_ld",
    *_TORCH_API,
]

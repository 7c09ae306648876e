"""moekit: FP8 block-scaled Mixture-of-Experts kernels for Hopper GPUs (sm_90a)."""
from . import _C

__version__ = _C.version()

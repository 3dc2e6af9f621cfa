"""flashjit: FlashAttention forward kernels generated, compiled and cached at run time.

Configs, source generation, builds, precompiling and the kernel cache need neither torch nor a
GPU. ``flashjit.attention`` runs on torch tensors and loads when torch is importable::

    import torch, flashjit
    q = torch.randn(2, 1024, 16, 128, device="cuda", dtype=torch.bfloat16)   # [B, S, H, D]
    k = torch.randn(2, 1024, 4, 128, device="cuda", dtype=torch.bfloat16)    # GQA: 4 KV heads
    v = torch.randn_like(k)
    o = flashjit.attention(q, k, v, causal=True)                             # [B, S, H, D]

The first call for a config compiles its kernel (about a second) or reads it from the disk
cache (milliseconds); later calls with the same shapes cost a dictionary lookup and a launch.
``flashjit.decode`` runs decode steps (1-64 query tokens per sequence) against a contiguous or
paged KV cache; ``flashjit.mla_decode`` against a shared K/V latent cache (MLA).
"""

from . import _libstdcxx  # noqa: F401  (first: before flashjit._core loads)
from . import cache
from ._configs import load_config
from ._core import (
    ArgumentError,
    CacheMissError,
    CompileError,
    Config,
    ConfigError,
    ConfigIssue,
    DriverError,
    Error,
    LockTimeout,
    NoDeviceError,
    UsageError,
    gpu_available,
    nvrtc_identity,
)
from ._core import version as _version
from ._generate import generate
from ._kernels import Kernel, build, get_kernel
from ._precompile import PrecompileError, precompile

__version__: str = _version()

try:
    import torch as _torch_module  # noqa: F401
except ImportError:
    torch_available = False
    _torch_import_error = "flashjit.attention needs torch (pip install torch); it could not be imported"

    def attention(*args, **kwargs):  # type: ignore[no-redef]
        """Attention on torch tensors (needs torch, which is not importable here)."""
        raise ImportError(_torch_import_error)

    def decode(*args, **kwargs):  # type: ignore[no-redef]
        """Decode attention against a KV cache on torch tensors (needs torch, not importable here)."""
        raise ImportError(_torch_import_error)

    def mla_decode(*args, **kwargs):  # type: ignore[no-redef]
        """Decode attention against a latent (MLA) cache on torch tensors (needs torch, not importable here)."""
        raise ImportError(_torch_import_error)
else:
    torch_available = True
    from ._decode import decode, mla_decode  # registers the flashjit::decode custom op
    from ._torch import attention  # registers the flashjit::attention custom op

__all__ = [
    "ArgumentError",
    "CacheMissError",
    "CompileError",
    "Config",
    "ConfigError",
    "ConfigIssue",
    "DriverError",
    "Error",
    "Kernel",
    "LockTimeout",
    "NoDeviceError",
    "PrecompileError",
    "UsageError",
    "attention",
    "build",
    "cache",
    "decode",
    "generate",
    "get_kernel",
    "mla_decode",
    "gpu_available",
    "load_config",
    "nvrtc_identity",
    "precompile",
    "torch_available",
]

"""Kernels: built for a target without a GPU, or loaded on the current GPU, with their facts."""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field
from typing import Any, Mapping

from . import _core
from ._configs import ConfigLike, load_config
from ._core import Config


@dataclass(frozen=True)
class Kernel:
    """What flashjit knows of a built kernel: identity, resources and how it is launched."""

    name: str
    """Readable name, e.g. ``fwd_sm90a_bf16_d128_causal_bm128_bn128``."""
    key: str
    """SHA-256 (hex) of everything that determines the binary; names its cache entry."""
    arch: str
    family: str
    """``sm90``, ``sm80`` or ``reference``."""
    registers: int
    """Registers per thread (ptxas)."""
    spill_stores: int
    """Bytes spilled to local memory (ptxas); 0 for a healthy kernel."""
    spill_loads: int
    stack_frame: int
    threads: int
    """Threads per CTA."""
    smem_bytes: int
    """Dynamic shared memory per CTA."""
    static_smem: int
    block_m: int
    """Query rows per tile."""
    block_n: int
    """Key rows per tile."""
    cluster_m: int
    """CTAs per cluster (2 with ``tuning.pair_cta``)."""
    persistent: bool
    tile_counter: bool
    """Draws tiles from a zeroed device counter (the dynamic scheduler)."""
    uses_tma: bool
    advisories: tuple[str, ...]
    """ptxas advisories (C75xx lines); empty for a healthy kernel."""
    compiled: bool
    """This process compiled it (a cache miss); False: read from the cache or memoised."""
    compile_ms: float
    """NVRTC time of the build that produced it (also for cache hits)."""
    load_ms: float
    file: str | None
    """Its cache entry, or None when the cache directory is not writable."""
    cubin_bytes: int
    loaded: bool
    """Loaded in a GPU context (``get_kernel`` with arch ``"native"``)."""
    config: Config = field(repr=False)
    """The resolved config."""
    launch: Mapping[str, Any] = field(repr=False)
    """Every launch fact, as stored in the cache entry."""

    @classmethod
    def _from_json(cls, text: str) -> Kernel:
        d = json.loads(text)
        launch = d["launch"]
        return cls(
            name=d["name"],
            key=d["key"],
            arch=d["arch"],
            family=d["family"],
            registers=d["registers"],
            spill_stores=d["spill_stores"],
            spill_loads=d["spill_loads"],
            stack_frame=d["stack_frame"],
            threads=d["threads"],
            smem_bytes=d["dynamic_smem"],
            static_smem=d["static_smem"],
            block_m=launch["block_m"],
            block_n=launch["block_n"],
            cluster_m=launch["cluster_m"],
            persistent=launch["persistent"],
            tile_counter=launch["tile_counter"],
            uses_tma=launch["uses_tma"],
            advisories=tuple(d["advisories"]),
            compiled=d["status"] == "compiled",
            compile_ms=d["compile_ms"],
            load_ms=d["load_ms"],
            file=d["file"],
            cubin_bytes=d["cubin_bytes"],
            loaded=d["loaded"],
            config=Config.from_dict(d["config"]),
            launch=launch,
        )


def build(
    config: ConfigLike, *, arch: str | None = None, seqlen_k: int | None = None, reference: bool = False
) -> Kernel:
    """Compiles ``config``'s kernel, or reads it from the cache, without a GPU.

    Args:
        config: a :class:`Config`, a dict or a path to a JSON config; its ``arch`` names the
            target (``"native"``: this machine's GPU, which then must exist).
        arch: replaces the config's target.
        seqlen_k: choose tiles for this key length (``tuning.seqlen_hint``), as
            ``flashjit.attention`` does for its calls.
        reference: the fp32 reference kernel of the same problem.

    Raises :class:`ConfigError`, :class:`CompileError`, :class:`CacheMissError` (offline mode),
    :class:`NoDeviceError` (``"native"`` without a GPU).
    """
    cfg = load_config(config)
    if arch is not None:
        cfg = cfg.with_arch(arch)
    return Kernel._from_json(_core.build(cfg, seqlen_k, reference))


def _torch_device() -> int:
    """torch's current CUDA device when torch has initialised CUDA, else -1 (the runtime's default)."""
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_initialized():
        return torch.cuda.current_device()
    return -1


def get_kernel(
    config: ConfigLike, *, seqlen_k: int | None = None, arch: str | None = None, device: int | None = None
) -> Kernel:
    """The kernel for ``config``: loaded on a GPU for arch ``"native"``, else built for the target.

    With arch ``"native"`` the kernel is built for the GPU (or read from the cache) and loaded in
    the primary context of ``device`` (default: torch's current device, else the current CUDA
    context, else ``$FLASHJIT_DEVICE`` or 0), once per process: ``flashjit.attention`` then
    finds it loaded. Calling this before capturing a CUDA graph keeps module loading out of the
    capture. With a named arch it needs no GPU and loads nothing (``loaded`` is False), as
    :func:`build`.

    Args:
        seqlen_k: choose tiles for this key length (rounded up to a power of two).
        arch: replaces the config's target.
        device: the CUDA device ordinal for ``"native"``.

    Raises :class:`ConfigError`, :class:`CompileError`, :class:`NoDeviceError` (``"native"``
    without a GPU), :class:`DriverError`.
    """
    cfg = load_config(config)
    if (cfg.arch if arch is None else arch) != "native":
        return build(cfg, arch=arch, seqlen_k=seqlen_k)
    if cfg.arch != "native":
        cfg = Config.from_dict({**cfg.to_dict(), "arch": "native"})
    loaded = _core.load_kernel(cfg, seqlen_k, _torch_device() if device is None else device)
    return Kernel._from_json(loaded.describe())

"""The CUDA source of a config's kernel."""

from __future__ import annotations

from . import _core
from ._configs import ConfigLike, load_config, with_arch


def generate(config: ConfigLike, flat: bool = False, *, arch: str | None = None, reference: bool = False) -> str:
    """The generated CUDA source of ``config``'s kernel, as ``flashjit generate`` prints it.

    Args:
        config: a :class:`Config`, a dict or a path to a JSON config.
        flat: the self-contained source (every template inlined): what NVRTC compiles and the
            cache key hashes; ``nvcc`` compiles it on its own. Otherwise the short instantiation
            unit that includes the templates.
        arch: replaces the config's target (``"native"``: this machine's GPU).
        reference: the fp32 reference kernel of the same problem instead of the fast one.

    Raises :class:`ConfigError` (every broken rule, each with its JSON path).
    """
    return _core.generate(with_arch(load_config(config), arch), flat, reference)

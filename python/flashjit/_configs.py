"""Turning what a caller passes as a config (a Config, a dict, a path) into a Config."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any, Union

from ._core import Config, load_config_file

ConfigLike = Union[Config, Mapping[str, Any], str, "os.PathLike[str]"]


def load_config(source: ConfigLike) -> Config:
    """The Config that ``source`` describes.

    ``source`` is a :class:`Config` (returned as is), a dict in the JSON form of
    docs/config.md, or the path of a JSON file. Raises :class:`ConfigError` naming the path and
    field of every problem the parser finds; the rules themselves are checked by
    :meth:`Config.resolve` and :meth:`Config.check`.
    """
    if isinstance(source, Config):
        return source
    if isinstance(source, Mapping):
        return Config(dict(source))
    if isinstance(source, (str, os.PathLike)):
        return load_config_file(os.fspath(source))
    raise TypeError(
        f"flashjit: a config is a flashjit.Config, a dict or a path to a JSON file, not {type(source).__name__}"
    )


def with_arch(config: Config, arch: str | None) -> Config:
    """``config`` for ``arch`` when one is given ("native": this machine's GPU)."""
    return config if arch is None else config.with_arch(arch)

"""The on-disk kernel cache this process uses (docs/cache.md).

Its directories come from the environment when flashjit first touches the cache:
``$FLASHJIT_CACHE_DIR`` (writable; default ``$XDG_CACHE_HOME/flashjit`` or
``~/.cache/flashjit``), read-only layers in ``$FLASHJIT_CACHE_PATH`` (searched first),
``$FLASHJIT_OFFLINE=1`` (a miss is an error) and ``$FLASHJIT_CACHE_MAX_BYTES``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from . import _core


def dir() -> Path:  # noqa: A001 (the cache's own vocabulary)
    """The writable cache directory."""
    return Path(_core.cache_dir())


def layers() -> list[Path]:
    """The read-only layers, in lookup order."""
    return [Path(p) for p in _core.cache_layers()]


def offline() -> bool:
    """True when a miss is an error instead of a compile."""
    return _core.cache_offline()


def list() -> list[dict[str, Any]]:  # noqa: A001
    """Every entry of every layer and the writable directory, checked, as
    ``flashjit cache list --json`` prints them: name, key, path, bytes, last_used (Unix time),
    read_only, layer (``"writable"``, ``"layer 1"``, ...), valid, and arch, family and compile_ms
    for a valid entry or ``problem`` for an invalid one."""
    return json.loads(_core.cache_list())


def verify(remove: bool = False) -> list[dict[str, Any]]:
    """Checks every entry (magic, format, sizes, key, checksum, manifest) and returns the invalid
    ones (path, key, name, bytes, read_only, problem, removed, remove_error). With ``remove`` those
    of the writable directory are deleted (``remove_error`` says why one could not be); read-only
    layers are never touched."""
    return _core.cache_verify(remove)


def _raise_failures(what: str, failures: list[str]) -> None:
    if failures:
        raise _core.Error(f"flashjit.cache.{what}: " + "; ".join(failures))


def prune(max_bytes: int | str) -> int:
    """Evicts least recently used entries of the writable directory until it holds at most
    ``max_bytes`` (an int, or a size such as ``"512M"``); returns the bytes freed. Raises
    ``flashjit.Error`` naming every file that could not be removed."""
    if isinstance(max_bytes, str):
        max_bytes = _core.parse_byte_size("max_bytes", max_bytes)
    if max_bytes < 0:
        raise ValueError(f"flashjit.cache.prune: max_bytes = {max_bytes}: must not be negative")
    freed, failures = _core.cache_prune(max_bytes)
    _raise_failures("prune", failures)
    return freed


def clear() -> int:
    """Deletes every entry of the writable directory; returns how many. Raises ``flashjit.Error``
    naming every file that could not be removed."""
    removed, failures = _core.cache_clear()
    _raise_failures("clear", failures)
    return removed


def export_to(directory: str | os.PathLike[str]) -> int:
    """Copies every valid entry to ``directory`` (created if needed), ready to ship as a read-only
    layer (``FLASHJIT_CACHE_PATH``); returns how many."""
    return _core.cache_export(os.fspath(directory))


def import_from(directory: str | os.PathLike[str]) -> int:
    """Copies every valid entry of ``directory`` into the writable directory, each named from its
    verified contents; returns how many. Raises ``flashjit.Error`` naming every file that was not
    imported (and why) after importing the others."""
    imported, skipped = _core.cache_import(os.fspath(directory))
    _raise_failures("import_from", skipped)
    return imported

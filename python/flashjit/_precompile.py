"""Precompiling a manifest's kernels into the cache, as ``flashjit precompile`` does."""

from __future__ import annotations

import json
import os
import sys
import tempfile
from collections.abc import Mapping, Sequence
from typing import Any, Callable, Union

from . import _core

ManifestLike = Union[Mapping[str, Any], str, "os.PathLike[str]"]


class PrecompileError(_core.Error, RuntimeError):
    """Some kernels of a manifest failed (or were skipped after a failure).

    ``summary`` is the full summary (as :func:`precompile` returns it); the message lists every
    failed kernel with its reason.
    """

    def __init__(self, message: str, summary: dict[str, Any]):
        super().__init__(message)
        self.summary = summary


def _anchored(manifest: Mapping[str, Any], base: str) -> dict[str, Any]:
    """A manifest dict whose relative config paths are relative to ``base``, made absolute
    (it is handed over as a temporary file, whose own directory would otherwise anchor them)."""

    def anchor(entry: Any) -> Any:
        return os.path.join(base, entry) if isinstance(entry, str) and not os.path.isabs(entry) else entry

    m = dict(manifest)
    if isinstance(m.get("configs"), list):
        m["configs"] = [anchor(c) for c in m["configs"]]
    if isinstance(m.get("matrix"), list):
        m["matrix"] = [{**x, "base": anchor(x["base"])} if isinstance(x, Mapping) and "base" in x else x
                       for x in m["matrix"]]
    return m


def _failure_message(summary: dict[str, Any]) -> str:
    lines = [f"precompile: {summary['failed']} of {summary['total']} kernels failed"
             + (f", {summary['skipped']} skipped after a failure (keep_going=True builds the rest)"
                if summary["skipped"] else "")]
    for item in summary["items"]:
        if item["status"] == "failed":
            lines.append(f"  {item['name']} ({item['arch']}) [{item['origin']}]: {item.get('error', '')}")
    return "\n".join(lines)


def precompile(
    manifest: ManifestLike,
    *,
    jobs: int | None = None,
    archs: str | Sequence[str] | None = None,
    shard: str | tuple[int, int] | None = None,
    keep_going: bool = False,
    progress: bool | Callable[[str], Any] | None = None,
) -> dict[str, Any]:
    """Builds every kernel a manifest lists into the cache (no GPU needed), in parallel.

    Args:
        manifest: a manifest (schema ``flashjit.manifest.v1``, docs/cli.md) as a path or a dict;
            a dict's relative config paths are relative to the current directory.
        jobs: parallel compiles (default: the hardware threads).
        archs: targets that replace the manifest's ``archs``.
        shard: ``"I/N"`` or ``(I, N)``: only the items whose index % N == I.
        keep_going: compile the rest after a failure.
        progress: a callable that gets each line of the progress log as it happens
            (``"[3/12] compiled fwd_sm90a_bf16_d128_none_bm128_bn176 (sm_90a) 812 ms"``), or True
            to print those lines on stderr.

    Returns the summary (schema ``flashjit.precompile-summary.v1``): counts (``compiled``,
    ``hits``, ``failed``, ``skipped``, ``total``), ``wall_s``, ``cache_dir`` and one entry per
    kernel in ``items`` (name, arch, status, key, file, compile_ms, config).

    Raises :class:`UsageError` for a bad manifest or shard (every problem, each naming its place),
    :class:`PrecompileError` when a kernel failed.
    """
    if progress is True:
        progress = lambda line: print(line, file=sys.stderr, flush=True)  # noqa: E731
    elif progress is False:
        progress = None
    if isinstance(archs, str):
        archs = [archs]
    if isinstance(shard, tuple):
        shard = f"{shard[0]}/{shard[1]}"
    with tempfile.TemporaryDirectory(prefix="flashjit-precompile-") as tmp:
        if isinstance(manifest, Mapping):
            path = os.path.join(tmp, "manifest.json")
            with open(path, "w") as f:
                json.dump(_anchored(manifest, os.getcwd()), f)
        else:
            path = os.fspath(manifest)
        summary_path = os.path.join(tmp, "summary.json")
        try:
            rc, _ = _core.precompile(path, jobs or 0, list(archs or []), shard or "", keep_going, summary_path,
                                     progress)
        except _core.UsageError as e:
            if not isinstance(manifest, Mapping):
                raise
            # The temporary file is no name a caller knows.
            lines = [line.replace(path, "manifest") for line in e.lines]
            error = _core.UsageError("\n".join(lines))
            error.lines = lines
            raise error from None
        with open(summary_path) as f:
            summary = json.load(f)
        if isinstance(manifest, Mapping):
            summary["manifest"] = None
    if rc != 0:
        raise PrecompileError(_failure_message(summary), summary)
    return summary

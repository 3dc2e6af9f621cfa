"""Shared set-up: a private kernel cache for the whole session (the process-wide store reads the
environment when flashjit first touches it), quiet logs, and helpers to run code in a fresh
interpreter with another environment."""

from __future__ import annotations

import atexit
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

_SESSION_CACHE = tempfile.mkdtemp(prefix="flashjit-pytest-cache-")
atexit.register(shutil.rmtree, _SESSION_CACHE, ignore_errors=True)  # the session's kernels go with it
os.environ["FLASHJIT_CACHE_DIR"] = _SESSION_CACHE
os.environ.setdefault("FLASHJIT_LOG_LEVEL", "warn")
for variable in ("FLASHJIT_CACHE_PATH", "FLASHJIT_OFFLINE", "FLASHJIT_CACHE_MAX_BYTES"):
    os.environ.pop(variable, None)

import flashjit  # noqa: E402  (after the environment is set)

SOURCE_DIR = Path(__file__).resolve().parents[2]
EXAMPLES = SOURCE_DIR / "examples"

# A small config that compiles in well under a second on NVRTC (sm80 family, d64).
SMALL = {"schema": "flashjit.attention.v1", "arch": "sm_80", "head_dim": {"qk": 64, "v": 64}, "mask": "causal"}


def run_python(code: str, env: dict | None = None, check: bool = True) -> subprocess.CompletedProcess:
    """Runs `code` in a fresh interpreter that imports the same flashjit, with `env` added."""
    full = dict(os.environ)
    full.update(env or {})
    result = subprocess.run([sys.executable, "-c", code], env=full, capture_output=True, text=True, timeout=300)
    if check and result.returncode != 0:
        raise AssertionError(f"subprocess failed ({result.returncode}):\n{result.stdout}\n{result.stderr}")
    return result


def run_json(code: str, env: dict | None = None):
    """Runs `code`, which prints one JSON document last, and returns it."""
    return json.loads(run_python(code, env).stdout.strip().splitlines()[-1])


@pytest.fixture(scope="session")
def session_cache() -> Path:
    return Path(_SESSION_CACHE)


@pytest.fixture(scope="session")
def small_kernel() -> "flashjit.Kernel":
    """SMALL, built once into the session cache."""
    return flashjit.build(SMALL)


@pytest.fixture
def seed() -> int:
    """A fresh random seed for torch's generator (the GPU suites name it in every failure)."""
    torch = pytest.importorskip("torch")
    s = random.randrange(1 << 30)
    torch.manual_seed(s)
    return s


@pytest.fixture
def cli() -> str:
    """The flashjit command of the same build (ctest passes it), for cross-checks."""
    path = os.environ.get("FLASHJIT_CLI", "")
    if not path or not os.access(path, os.X_OK):
        pytest.skip("FLASHJIT_CLI does not name the flashjit command (ctest sets it)")
    return path

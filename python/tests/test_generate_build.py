"""generate, build and get_kernel without a GPU: source text, and a built kernel's name, key,
registers and launch facts (cross-checked against the flashjit command of the same build)."""

import json
import re
import subprocess

import pytest

import flashjit

from conftest import SMALL


def test_generate_unit_and_flat_source():
    unit = flashjit.generate(SMALL)
    flat = flashjit.generate(SMALL, flat=True)
    assert '#include "' in unit
    assert len(flat) > len(unit)
    # The flat source is self-contained: it includes none of the templates.
    assert not re.search(r'^\s*#include\s+"', flat, re.MULTILINE)
    assert flashjit.generate(SMALL, flat=True) == flat  # deterministic


def test_generate_follows_arch_and_reference():
    sm80 = flashjit.generate(SMALL, flat=True)
    sm90 = flashjit.generate(SMALL, flat=True, arch="sm_90a")
    assert sm80 != sm90
    assert flashjit.generate(SMALL, reference=True) != flashjit.generate(SMALL)


def test_generate_matches_the_command(cli, tmp_path):
    path = tmp_path / "small.json"
    path.write_text(json.dumps(SMALL))
    text = subprocess.run([cli, "generate", str(path), "--flat"], capture_output=True, text=True, check=True).stdout
    assert flashjit.generate(path, flat=True) == text


def test_generate_rejects_a_broken_config():
    with pytest.raises(flashjit.ConfigError) as info:
        flashjit.generate({**SMALL, "group": 0})
    assert [i.path for i in info.value.issues] == ["group"]


def test_build_describes_the_kernel(small_kernel):
    k = small_kernel
    assert k.name.startswith("fwd_sm80_bf16_d64_causal")
    assert re.fullmatch(r"[0-9a-f]{64}", k.key)
    assert k.arch == "sm_80"
    assert k.family == "sm80"
    assert k.registers > 0
    assert k.spill_stores >= 0 and k.spill_loads >= 0
    assert k.threads > 0 and k.threads % 32 == 0
    assert k.smem_bytes > 0
    tuning = k.config.to_dict()["tuning"]
    assert (k.block_m, k.block_n) == (tuning["BM"], tuning["BN"])
    assert k.cluster_m == 1 and not k.uses_tma and not k.loaded
    assert k.launch["entry"]
    assert k.cubin_bytes > 0
    assert k.file and k.file.endswith(f".{k.key}.fjc")


def test_second_build_is_a_cache_hit_with_the_same_key(small_kernel):
    again = flashjit.build(SMALL)
    assert not again.compiled
    assert again.key == small_kernel.key
    assert again.compile_ms == small_kernel.compile_ms  # the stored build's time


def test_build_key_matches_the_command(cli, small_kernel, tmp_path):
    path = tmp_path / "small.json"
    path.write_text(json.dumps(SMALL))
    out = subprocess.run([cli, "compile", str(path), "--json"], capture_output=True, text=True, check=True).stdout
    described = json.loads(out)
    entry = described[0] if isinstance(described, list) else described
    assert entry["key"] == small_kernel.key
    assert entry["registers"] == small_kernel.registers


def test_get_kernel_for_a_named_arch_builds_without_loading(small_kernel):
    k = flashjit.get_kernel(SMALL)
    assert k.key == small_kernel.key
    assert not k.loaded


def test_sm90_launch_facts():
    k = flashjit.build({"arch": "sm_90a", "head_dim": {"qk": 128, "v": 128}, "mask": "causal"})
    assert k.family == "sm90"
    assert k.uses_tma
    assert k.persistent
    assert k.tile_counter  # masks take the dynamic scheduler by default
    assert k.advisories == ()


def test_seqlen_k_picks_tiles_for_that_length():
    short = flashjit.build(SMALL, seqlen_k=64)
    assert "seqlen_hint" not in short.config.to_dict()["tuning"]
    with pytest.raises(flashjit.ArgumentError, match="seqlen_k = 0"):
        flashjit.build(SMALL, seqlen_k=0)


def test_build_for_native_needs_a_gpu():
    if flashjit.gpu_available():
        assert flashjit.build({**SMALL, "arch": "native"}).arch not in ("", "native")
    else:
        with pytest.raises(flashjit.NoDeviceError, match="no GPU"):
            flashjit.build({**SMALL, "arch": "native"})


def test_reference_kernel():
    k = flashjit.build(SMALL, reference=True)
    assert k.family == "reference"

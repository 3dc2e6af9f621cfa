"""flashjit.precompile: a manifest built into the cache in parallel, with progress lines, a
summary, and errors that name the failing kernel or the broken manifest field."""

import json

import pytest

import flashjit

from conftest import run_json

BASE = {"schema": "flashjit.attention.v1", "head_dim": {"qk": 64, "v": 64}}


def manifest(*configs, **extra):
    return {"schema": "flashjit.manifest.v1", "archs": ["sm_80"], "configs": list(configs), **extra}


def three_kernels():
    return manifest({**BASE, "mask": "none"}, {**BASE, "mask": "causal"}, {**BASE, "group": 4})


def test_precompile_builds_every_kernel_with_progress(tmp_path):
    lines = []
    env_cache = tmp_path / "cache"
    summary = run_json(
        "import json, flashjit\n"
        f"m = {three_kernels()!r}\n"
        "lines = []\n"
        "first = flashjit.precompile(m, jobs=2, progress=lines.append)\n"
        "second = flashjit.precompile(m, jobs=2)\n"
        "print(json.dumps({'first': first, 'second': second, 'lines': lines,"
        " 'listed': sorted(e['key'] for e in flashjit.cache.list())}))",
        env={"FLASHJIT_CACHE_DIR": str(env_cache)},
    )
    first, second, lines = summary["first"], summary["second"], summary["lines"]
    assert (first["total"], first["compiled"], first["hits"], first["failed"]) == (3, 3, 0, 0)
    assert first["jobs"] == 2
    assert first["cache_dir"] == str(env_cache)
    assert (second["compiled"], second["hits"]) == (0, 3)
    # One line per kernel, counted, after the header.
    assert lines[0].startswith("precompile: 3 kernels on 2 workers")
    item_lines = sorted(line for line in lines if line.startswith("["))
    assert len(item_lines) == 3
    assert {line.split("]")[0] for line in item_lines} == {"[1/3", "[2/3", "[3/3"}
    assert all(" compiled fwd_sm80_bf16_d64" in line for line in item_lines)
    keys = sorted(item["key"] for item in first["items"])
    assert keys == summary["listed"]
    assert all(item["file"].startswith(str(env_cache)) for item in first["items"])


def test_a_failing_kernel_raises_with_its_reason(tmp_path):
    m = manifest({**BASE}, {**BASE, "tuning": {"family": "sm90"}})
    with pytest.raises(flashjit.PrecompileError) as info:
        flashjit.precompile(m, keep_going=True)
    e = info.value
    assert "1 of 2 kernels failed" in str(e)
    assert "[configs[1]]" in str(e) and "sm90 family needs the sm_90a target" in str(e)
    statuses = sorted(item["status"] for item in e.summary["items"])
    assert statuses[0] == "failed" and statuses[1] in ("compiled", "hit")


def test_without_keep_going_the_rest_is_skipped():
    bad = {**BASE, "tuning": {"family": "sm90"}}
    with pytest.raises(flashjit.PrecompileError) as info:
        flashjit.precompile(manifest(bad, {**BASE, "mask": "causal"}, {**BASE, "group": 2}), jobs=1)
    assert info.value.summary["skipped"] == 2
    assert "skipped after a failure" in str(info.value)


def test_shards_split_the_plan():
    m = three_kernels()
    a = flashjit.precompile(m, shard="0/2")
    b = flashjit.precompile(m, shard=(1, 2))
    assert (a["total"], b["total"]) == (2, 1)
    assert {i["name"] for i in a["items"]}.isdisjoint(i["name"] for i in b["items"])


def test_archs_replace_the_manifests():
    s = flashjit.precompile(manifest({**BASE}), archs=["sm_80", "sm_86"])
    assert sorted(i["arch"] for i in s["items"]) == ["sm_80", "sm_86"]


def test_a_manifest_file_with_relative_config_paths(tmp_path):
    (tmp_path / "configs").mkdir()
    (tmp_path / "configs" / "a.json").write_text(json.dumps({**BASE, "mask": "causal"}))
    path = tmp_path / "m.json"
    path.write_text(json.dumps(manifest("configs/a.json")))
    s = flashjit.precompile(path)
    assert s["total"] == 1 and s["failed"] == 0
    assert s["manifest"] == str(path)


def test_a_dict_manifests_paths_are_relative_to_the_current_directory(tmp_path, monkeypatch):
    (tmp_path / "a.json").write_text(json.dumps({**BASE, "group": 8}))
    monkeypatch.chdir(tmp_path)
    s = flashjit.precompile(manifest("a.json"))
    assert s["total"] == 1 and s["items"][0]["config"]["group"] == 8


def test_manifest_errors_list_every_problem_by_place():
    with pytest.raises(flashjit.UsageError) as info:
        flashjit.precompile({"schema": "flashjit.manifest.v1", "colour": 1, "configs": [{**BASE, "group": 0},
                                                                                      "missing.json"]})
    e = info.value
    assert len(e.lines) >= 2
    text = str(e)
    assert "colour" in text and "missing.json" in text
    assert all(line.startswith("manifest") for line in e.lines)  # not the temporary file's name


def test_a_bad_shard_is_a_usage_error():
    with pytest.raises(flashjit.UsageError, match="3/2"):
        flashjit.precompile(three_kernels(), shard="3/2")


def test_an_exception_in_progress_propagates():
    def progress(line):
        raise KeyError("stop")

    with pytest.raises(KeyError, match="stop"):
        flashjit.precompile(three_kernels(), progress=progress)

"""flashjit.cache: the directories from the environment, listing, verification with fault
injection, prune/clear/export/import, layers and offline mode (in fresh interpreters, since the
store reads the environment once per process)."""

import os

import pytest

import flashjit

from conftest import SMALL, run_json


def test_dir_is_the_environments(session_cache):
    assert flashjit.cache.dir() == session_cache
    assert flashjit.cache.layers() == []
    assert flashjit.cache.offline() is False


def test_list_shows_a_built_kernel(small_kernel):
    entries = {e["key"]: e for e in flashjit.cache.list()}
    e = entries[small_kernel.key]
    assert e["valid"] and not e["read_only"]
    assert e["name"] == small_kernel.name
    assert e["arch"] == "sm_80" and e["family"] == "sm80"
    assert e["layer"] == "writable"
    assert e["path"] == small_kernel.file
    assert e["bytes"] == os.path.getsize(small_kernel.file)


def test_verify_finds_and_removes_a_corrupt_entry(small_kernel, session_cache):
    assert flashjit.cache.verify() == []
    bogus = session_cache / f"{small_kernel.name}.{'0' * 64}.fjc"
    bogus.write_bytes(b"not a cache entry")
    bad = flashjit.cache.verify()
    assert [b["path"] for b in bad] == [str(bogus)]
    assert bad[0]["problem"] and not bad[0]["removed"]
    assert bogus.exists()
    removed = flashjit.cache.verify(remove=True)
    assert removed[0]["removed"] and not bogus.exists()
    assert flashjit.cache.verify() == []


def test_prune_clear_export_import(tmp_path):
    out = run_json(
        "import json, flashjit\n"
        f"k = flashjit.build({SMALL!r})\n"
        f"exported = flashjit.cache.export_to({str(tmp_path / 'ship')!r})\n"
        "size = sum(e['bytes'] for e in flashjit.cache.list())\n"
        "kept = flashjit.cache.prune(size)\n"
        "freed = flashjit.cache.prune('0')\n"
        "after_prune = len(flashjit.cache.list())\n"
        f"imported = flashjit.cache.import_from({str(tmp_path / 'ship')!r})\n"
        "cleared = flashjit.cache.clear()\n"
        "print(json.dumps({'exported': exported, 'kept': kept, 'freed': freed, 'size': size,"
        " 'after_prune': after_prune, 'imported': imported, 'cleared': cleared,"
        " 'left': len(flashjit.cache.list())}))",
        env={"FLASHJIT_CACHE_DIR": str(tmp_path / "cache")},
    )
    assert out["exported"] == 1
    assert out["kept"] == 0 and out["freed"] == out["size"] and out["after_prune"] == 0
    assert out["imported"] == 1 and out["cleared"] == 1 and out["left"] == 0
    assert len(list((tmp_path / "ship").glob("*.fjc"))) == 1


def test_prune_rejects_bad_sizes():
    with pytest.raises(ValueError):
        flashjit.cache.prune("lots")
    with pytest.raises(ValueError):
        flashjit.cache.prune(-1)


def test_layers_are_searched_and_offline_misses_name_the_config(tmp_path):
    ship = tmp_path / "ship"
    run_json(
        "import json, flashjit\n"
        f"flashjit.build({SMALL!r})\n"
        f"print(json.dumps(flashjit.cache.export_to({str(ship)!r})))",
        env={"FLASHJIT_CACHE_DIR": str(tmp_path / "build-cache")},
    )
    out = run_json(
        "import json, flashjit\n"
        f"hit = flashjit.build({SMALL!r})\n"
        "try:\n"
        f"    flashjit.build({{**{SMALL!r}, 'mask': 'none'}})\n"
        "    miss = None\n"
        "except flashjit.CacheMissError as e:\n"
        "    miss = str(e)\n"
        "entries = flashjit.cache.list()\n"
        "print(json.dumps({'layers': [str(p) for p in flashjit.cache.layers()], 'offline': flashjit.cache.offline(),"
        " 'hit_file': hit.file, 'compiled': hit.compiled, 'miss': miss,"
        " 'layer': [e['layer'] for e in entries]}))",
        env={"FLASHJIT_CACHE_DIR": str(tmp_path / "server-cache"), "FLASHJIT_CACHE_PATH": str(ship),
             "FLASHJIT_OFFLINE": "1"},
    )
    assert out["layers"] == [str(ship)] and out["offline"] is True
    assert out["hit_file"].startswith(str(ship)) and out["compiled"] is False
    assert out["miss"] and '"mask":"none"' in out["miss"]
    assert out["layer"] == ["layer 1"]

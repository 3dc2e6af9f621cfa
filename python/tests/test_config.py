"""flashjit.Config and load_config: conversions, resolve/check, and errors that keep the C++ text
and the JSON path of every issue."""

import json
import pickle

import pytest

import flashjit

from conftest import EXAMPLES, SMALL


def test_dict_round_trip_keeps_every_field():
    c = flashjit.Config(SMALL)
    d = c.to_dict()
    assert d["arch"] == "sm_80"
    assert d["head_dim"] == {"qk": 64, "v": 64, "rope": 0}
    assert d["mask"] == "causal"
    assert flashjit.Config(d) == c
    assert flashjit.Config.from_json(c.to_json()) == c
    assert json.loads(c.to_json(indent=2)) == d


def test_canonical_json_is_sorted_and_compact():
    text = flashjit.Config(SMALL).to_json()
    assert " " not in text and "\n" not in text
    assert list(json.loads(text)) == sorted(json.loads(text))


def test_equal_configs_hash_equally_and_differ_by_field():
    a = flashjit.Config(SMALL)
    b = flashjit.Config(dict(SMALL))
    c = flashjit.Config({**SMALL, "mask": "none"})
    assert a == b and hash(a) == hash(b)
    assert a != c
    assert len({a, b, c}) == 2


def test_defaults_and_pickle():
    d = flashjit.Config().to_dict()
    assert d["head_dim"]["qk"] == 128 and d["mask"] == "none" and d["arch"] == "sm_90a"
    c = flashjit.Config(SMALL)
    assert pickle.loads(pickle.dumps(c)) == c


def test_resolve_fills_the_tuning_for_the_target():
    c = flashjit.Config({**SMALL, "arch": "sm_90a", "head_dim": {"qk": 128, "v": 128}})
    assert c.to_dict()["tuning"] == {}
    sm90 = c.resolve().to_dict()["tuning"]
    assert sm90["family"] == "sm90"
    assert sm90["BM"] > 0 and sm90["BN"] > 0
    # The same problem on sm_80 takes the portable family.
    sm80 = c.resolve("sm_80")
    assert sm80.arch == "sm_80"
    assert sm80.to_dict()["tuning"]["family"] == "sm80"
    # Resolving is idempotent.
    assert c.resolve().resolve() == c.resolve()


def test_with_arch_replaces_only_the_target():
    c = flashjit.Config(SMALL)
    other = c.with_arch("sm_90a")
    assert other.arch == "sm_90a"
    assert {k: v for k, v in other.to_dict().items() if k != "arch"} == {
        k: v for k, v in c.to_dict().items() if k != "arch"}


def test_check_lists_every_broken_rule_without_raising():
    issues = flashjit.Config({"arch": "sm_80", "head_dim": {"qk": 100, "v": 64}, "group": 0}).check()
    paths = sorted(i.path for i in issues)
    assert paths == ["group", "head_dim.qk"]
    qk = next(i for i in issues if i.path == "head_dim.qk")
    assert qk.value == "100"
    assert "multiple of 16" in qk.rule
    assert qk.message == f"head_dim.qk = 100: {qk.rule}"
    assert flashjit.Config(SMALL).check() == []


def test_config_error_carries_the_cpp_text_and_each_issue():
    with pytest.raises(flashjit.ConfigError) as info:
        flashjit.Config({"arch": "sm_80", "head_dim": {"qk": 100, "v": 64}, "group": 0}).resolve()
    e = info.value
    assert isinstance(e, ValueError)
    text = str(e)
    assert text.startswith("invalid config (2 errors):")
    assert "head_dim.qk = 100: must be a multiple of 16" in text
    assert "group = 0" in text
    assert sorted(i.path for i in e.issues) == ["group", "head_dim.qk"]


def test_parse_errors_name_the_json_path():
    with pytest.raises(flashjit.ConfigError) as info:
        flashjit.Config({"head_dim": {"qk": "wide"}, "tuning": {"BM": 64, "colour": 1}, "bogus": True})
    paths = {i.path for i in info.value.issues}
    assert {"head_dim.qk", "tuning.colour", "bogus"} <= paths


def test_unsupported_features_are_rejected_by_name():
    # Paged caches are the sm80 and decode families'; the sm90 family names the field.
    with pytest.raises(flashjit.ConfigError) as info:
        flashjit.Config({"arch": "sm_90a", "kv_layout": {"paged": True, "page_size": 64},
                         "tuning": {"family": "sm90"}}).resolve()
    assert "kv_layout.paged" in {i.path for i in info.value.issues}
    with pytest.raises(flashjit.ConfigError) as info:
        flashjit.Config({"arch": "sm_90a", "scales": {"q": "per_tensor"}, "tuning": {"family": "sm90"}}).resolve()
    assert "scales.q" in {i.path for i in info.value.issues}


def test_config_takes_only_dicts():
    with pytest.raises(TypeError, match="expected a dict"):
        flashjit.Config("examples/configs/default.json")


def test_load_config_from_a_path_a_dict_or_a_config(tmp_path):
    path = EXAMPLES / "configs" / "causal_d128.json"
    from_path = flashjit.load_config(path)
    assert from_path == flashjit.load_config(str(path))
    assert from_path == flashjit.Config(json.loads(path.read_text()))
    assert flashjit.load_config(from_path) is from_path
    assert flashjit.load_config(SMALL) == flashjit.Config(SMALL)
    with pytest.raises(TypeError):
        flashjit.load_config(42)


def test_load_config_errors_name_the_file(tmp_path):
    missing = tmp_path / "missing.json"
    with pytest.raises(flashjit.ConfigError) as info:
        flashjit.load_config(missing)
    assert str(missing) in str(info.value)
    broken = tmp_path / "broken.json"
    broken.write_text('{"arch": ')
    with pytest.raises(flashjit.ConfigError) as info:
        flashjit.load_config(broken)
    assert str(broken) in str(info.value)
    assert "not valid JSON" in str(info.value)


def test_native_without_a_gpu_says_so():
    if flashjit.gpu_available():
        pytest.skip("a GPU is present: native resolves to it")
    with pytest.raises(flashjit.NoDeviceError, match="no GPU"):
        flashjit.Config({"arch": "native"}).resolve()

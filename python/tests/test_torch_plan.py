"""What the torch layer derives from a call before it launches, checked without a GPU on meta
tensors: element strides per layout, the output's layout, the config (dtype, head dims, group,
mask, varlen, LSE) and how a pinned config merges with it."""

import pytest

torch = pytest.importorskip("torch", reason="torch is not installed (the torch layer loads only with torch)")

import flashjit  # noqa: E402
from flashjit import _torch as layer  # noqa: E402

BF16, FP16 = torch.bfloat16, torch.float16


def meta(*shape, dtype=BF16):
    return torch.empty(*shape, device="meta", dtype=dtype)


def derived(q, k, v, causal=False, window=None, return_lse=False, q_rope=None, k_rope=None, **ragged):
    lay = layer._layout(q, k, v, ragged.get("cu_q"), ragged.get("cu_k"), ragged.get("max_q"), ragged.get("max_k"),
                        q_rope, k_rope)
    mask, left, right = layer._mask(causal, window)
    problem = layer._problem(lay, q.dtype, q.dtype, None if q_rope is None else q_rope.dtype, mask, return_lse)
    return lay, problem, (left, right)


def test_strides_of_each_layout():
    b, s, h, d = 2, 10, 4, 64
    lay, _, _ = derived(meta(b, s, h, d), meta(b, s, h, d), meta(b, s, h, d))
    assert lay.q == (s * h * d, h * d, d)
    assert lay.o_stride == (s * h * d, h * d, d, 1)
    t = meta(b, h, s, d).transpose(1, 2)
    lay, _, _ = derived(t, t, t)
    assert lay.q == (h * s * d, d, s * d)
    assert lay.o_stride == (h * s * d, d, s * d, 1)  # BHSD memory order, like q
    qkv = meta(b, s, 3, h, d)
    lay, _, _ = derived(qkv[:, :, 0], qkv[:, :, 1], qkv[:, :, 2])
    assert lay.k == (s * 3 * h * d, 3 * h * d, d)
    assert lay.o_stride == (s * h * d, h * d, d, 1)


def test_the_derived_config():
    _, problem, window = derived(meta(2, 7, 8, 128), meta(2, 9, 2, 128), meta(2, 9, 2, 64), causal=True,
                                 return_lse=True)
    assert problem == {"dtype": {"qkv": "bf16", "out": "bf16", "rope": None, "scale": None},
                       "scales": {"q": "none", "k": "none", "v": "none"},
                       "head_dim": {"qk": 128, "v": 64, "rope": 0}, "group": 4, "mask": "causal",
                       "varlen": False, "outputs": {"lse": True}}
    assert window == (-1, -1)
    assert flashjit.Config({**problem, "arch": "sm_90a"}).check() == []


def test_windows_and_causal_windows():
    t = meta(1, 8, 2, 64)
    assert derived(t, t, t, window=(16, 4))[1]["mask"] == "sliding_window"
    assert derived(t, t, t, window=(16, 4))[2] == (16, 4)
    assert derived(t, t, t, window=(16, -1), causal=True)[2] == (16, 0)
    assert derived(t, t, t, window=(-1, -1), causal=True)[1]["mask"] == "causal"
    assert derived(t, t, t, window=(-1, -1))[1]["mask"] == "none"


def test_ragged_batches():
    cu = meta(4, dtype=torch.int32)
    lay, problem, _ = derived(meta(50, 8, 64), meta(70, 4, 64), meta(70, 4, 64), cu_q=cu, cu_k=cu, max_q=20,
                              max_k=40)
    assert problem["varlen"] is True and problem["group"] == 2
    assert (lay.batch, lay.seqlen_q, lay.seqlen_k, lay.total_q, lay.total_k) == (3, 20, 40, 50, 70)
    assert lay.q == (0, 8 * 64, 64)
    assert lay.lse_shape == (8, 50)


def test_rope_columns_and_their_dtype():
    q, k = meta(1, 16, 4, 128), meta(1, 16, 4, 128)
    _, problem, _ = derived(q, k, k, q_rope=meta(1, 16, 4, 64), k_rope=meta(1, 16, 4, 64))
    assert problem["head_dim"] == {"qk": 192, "v": 128, "rope": 64}
    assert problem["dtype"]["rope"] is None
    _, problem, _ = derived(q, k, k, q_rope=meta(1, 16, 4, 64, dtype=FP16), k_rope=meta(1, 16, 4, 64, dtype=FP16))
    assert problem["dtype"]["rope"] == "fp16"


def problem_d128():
    return derived(meta(1, 8, 4, 128), meta(1, 8, 4, 128), meta(1, 8, 4, 128), causal=True)[1]


def test_a_tuning_only_pin_keeps_the_problem():
    merged = layer._merged(problem_d128(), {"tuning": {"family": "sm80", "BN": 64}}, "sm_90a").to_dict()
    assert merged["tuning"] == {"family": "sm80", "BN": 64}
    assert merged["head_dim"]["qk"] == 128 and merged["mask"] == "causal" and merged["arch"] == "native"


def test_a_full_config_pin_must_agree():
    pin = flashjit.Config({"arch": "sm_90a", "head_dim": {"qk": 128, "v": 128}, "mask": "causal",
                           "tuning": {"BN": 64}}).to_dict()
    assert layer._merged(problem_d128(), pin, "sm_90a").to_dict()["tuning"] == {"BN": 64}
    with pytest.raises(flashjit.ArgumentError) as info:
        layer._merged(problem_d128(), pin, "sm_80")
    assert 'arch = "sm_90a" but the call gives "sm_80"' in str(info.value)
    with pytest.raises(flashjit.ArgumentError) as info:
        layer._merged(problem_d128(), {**pin, "group": 2, "mask": "none"}, "sm_90a")
    assert "group = 2 but the call gives 1" in str(info.value)
    assert 'mask = "none" but the call gives "causal"' in str(info.value)
    native = {**pin, "arch": "native"}
    assert layer._merged(problem_d128(), native, "sm_90a").to_dict()["tuning"] == {"BN": 64}


def test_config_keys_and_what_they_pin(tmp_path):
    path = tmp_path / "pin.json"
    path.write_text('{"tuning": {"BN": 64}}')
    cfg = flashjit.Config({"tuning": {"BN": 64}})
    assert layer._config_key(cfg) is cfg
    assert layer._config_key(str(path)) == ("path", str(path))
    assert layer._config_key(path) == ("path", str(path))
    assert layer._config_key({"tuning": {"BN": 64}}) == layer._config_key('{"tuning": {"BN": 64}}')
    for key in (layer._config_key(str(path)), layer._config_key({"tuning": {"BN": 64}})):
        assert layer._pinned(key) == {"tuning": {"BN": 64}}
    with pytest.raises(flashjit.ConfigError):
        layer._pinned(("path", str(tmp_path / "missing.json")))
    with pytest.raises(TypeError):
        layer._config_key(64)


def test_fp8_inputs_and_their_scales():
    e4m3, f32 = torch.float8_e4m3fn, torch.float32
    b, sq, sk, hq, hk, d = 2, 7, 9, 8, 2, 128
    q, k, v = meta(b, sq, hq, d, dtype=e4m3), meta(b, sk, hk, d, dtype=e4m3), meta(b, sk, hk, d, dtype=e4m3)
    lay = layer._layout(q, k, v, None, None, None, None, None, None)
    scales = layer._scales(lay, meta(b, hq, sq, dtype=torch.bfloat16), meta(b, hk, sk, dtype=torch.bfloat16),
                           meta(1, dtype=f32), q.device)
    assert scales[0] == {"q": "per_token", "k": "per_token", "v": "per_tensor"} and scales[1] == "bf16"
    assert scales[2] == (hq * sq, sq) and scales[3] == (hk * sk, sk)
    problem = layer._problem(lay, e4m3, layer._out_dtype(e4m3), None, "causal", False, scales)
    assert problem["dtype"] == {"qkv": "e4m3", "out": "bf16", "rope": None, "scale": "bf16"}
    assert flashjit.Config({**problem, "arch": "sm_90a"}).check() == []  # the sm80 family takes it
    per_head = layer._scales(lay, meta(hq, dtype=f32), meta(hk, dtype=f32), meta(hk, dtype=f32), q.device)
    assert per_head[0] == {"q": "per_head", "k": "per_head", "v": "per_head"} and per_head[1] is None
    per_token_v = layer._scales(lay, None, None, meta(b, hk, sk, dtype=f32), q.device)  # V per token, as K
    assert per_token_v[0] == {"q": "none", "k": "none", "v": "per_token"} and per_token_v[1] == "fp32"
    assert per_token_v[4] == (hk * sk, sk)
    with pytest.raises(flashjit.ArgumentError, match="v_scale"):
        layer._scales(lay, None, None, meta(b, hk, sk + 1, dtype=f32), q.device)  # not V's shape
    with pytest.raises(flashjit.ArgumentError, match="share one dtype"):
        layer._scales(lay, meta(b, hq, sq, dtype=f32), meta(b, hk, sk, dtype=torch.bfloat16), None, q.device)
    o = flashjit.attention(q, k, v, causal=True, q_scale=meta(1, dtype=f32), k_scale=meta(1, dtype=f32))
    assert o.dtype == torch.bfloat16 and o.shape == (b, sq, hq, d)

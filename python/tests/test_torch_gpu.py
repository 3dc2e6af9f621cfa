"""flashjit.attention on a GPU: results against torch's SDPA in float64 (dense cases) and an fp64
reference (ragged batches, sliding windows, rope columns, the LSE), both paths (direct and the
custom op), torch.compile(fullgraph=True), CUDA graph capture and replay with changing data,
streams, threads, and the forward-only autograd error. Skipped without torch or a GPU.

Inputs are fresh random data each run (the seed is in every failure message); the error measure
is ||out - ref|| / ||ref||, with the C++ harness's tolerances (bf16 1e-2, fp16 3e-3, LSE 1e-2)."""

import math
import threading

import pytest

from gpu_support import dequantised, quantised, rel_error, require_torch_gpu

torch = require_torch_gpu()

import torch.nn.functional as F  # noqa: E402

import flashjit  # noqa: E402

DEV = "cuda"
BF16, FP16 = torch.bfloat16, torch.float16
TOLERANCE = {BF16: 1e-2, FP16: 3e-3}
LSE_TOLERANCE = 1e-2


def rand(*shape, dtype=BF16):
    return torch.randn(*shape, device=DEV, dtype=dtype)


def allowed_mask(sq, sk, causal, window, device=DEV):
    """Keys each query row sees, aligned to the bottom right (row i stands at i + sk - sq)."""
    i = torch.arange(sq, device=device)[:, None] + (sk - sq)
    j = torch.arange(sk, device=device)[None, :]
    allowed = torch.ones(sq, sk, dtype=torch.bool, device=device)
    if causal:
        allowed &= j <= i
    if window is not None:
        left, right = window
        if causal:
            right = 0
        if left >= 0:
            allowed &= j >= i - left
        if right >= 0:
            allowed &= j <= i + right
    return allowed


def heads_expanded(q, k, v):
    """fp64 BHSD tensors with K/V heads repeated for GQA."""
    qd, kd, vd = (t.double().transpose(1, 2) for t in (q, k, v))
    group = qd.shape[1] // kd.shape[1]
    return qd, kd.repeat_interleave(group, 1), vd.repeat_interleave(group, 1)


def sdpa_reference(q, k, v, causal=False, scale=None):
    """torch SDPA in float64 on [B, S, H, D] inputs, causal aligned to the bottom right."""
    qd, kd, vd = heads_expanded(q, k, v)
    sq, sk = q.shape[1], k.shape[1]
    mask = allowed_mask(sq, sk, causal, None) if causal else None
    if mask is not None and not bool(mask.any(dim=1).all()):
        pytest.fail("SDPA reference asked for rows without keys")  # the test chose a bad shape
    o = F.scaled_dot_product_attention(qd, kd, vd, attn_mask=mask, scale=scale)
    return o.transpose(1, 2)


def reference(q, k, v, causal=False, window=None, scale=None, q_rope=None, k_rope=None):
    """fp64 attention of [B, S, H, D] inputs: (out [B, Sq, Hq, Dv], lse [B, Hq, Sq]). Rows that
    see no key give zeros and an LSE of -inf."""
    if q_rope is not None:
        q, k = torch.cat([q, q_rope], -1), torch.cat([k, k_rope], -1)
    qd, kd, vd = heads_expanded(q, k, v)
    scale = scale if scale is not None else 1 / math.sqrt(q.shape[-1])
    s = (qd @ kd.transpose(-1, -2)) * scale
    s = s.masked_fill(~allowed_mask(q.shape[1], k.shape[1], causal, window), float("-inf"))
    lse = torch.logsumexp(s, -1)
    p = torch.nan_to_num(torch.exp(s - lse[..., None]), nan=0.0)
    return (p @ vd).transpose(1, 2), lse


def assert_close(out, ref, dtype, seed, what=""):
    err = rel_error(out, ref)
    assert err <= TOLERANCE[dtype], f"{what} rel error {err:.3e} > {TOLERANCE[dtype]} (seed {seed})"


def assert_lse_close(lse, ref, seed):
    finite = torch.isfinite(ref)
    assert torch.equal(torch.isfinite(lse), finite), f"LSE finiteness differs (seed {seed})"
    if finite.any():
        err = (lse.double()[finite] - ref[finite]).abs().max().item()
        assert err <= LSE_TOLERANCE, f"LSE max error {err:.3e} (seed {seed})"


# ---- dense --------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [BF16, FP16], ids=["bf16", "fp16"])
@pytest.mark.parametrize("dim", [64, 128])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("group", [1, 4])
def test_dense_matches_sdpa_fp64(dtype, dim, causal, group, seed):
    b, s, hk = 2, 256, 2
    q, k, v = rand(b, s, hk * group, dim, dtype=dtype), rand(b, s, hk, dim, dtype=dtype), rand(b, s, hk, dim, dtype=dtype)
    with torch.no_grad():
        o = flashjit.attention(q, k, v, causal=causal)
    assert o.shape == q.shape and o.dtype == dtype
    assert_close(o, sdpa_reference(q, k, v, causal), dtype, seed)


@pytest.mark.parametrize("sq, sk", [(100, 300), (1, 513), (257, 64), (64, 1)])
def test_causal_lengths_align_bottom_right(sq, sk, seed):
    q, k, v = rand(2, sq, 4, 128), rand(2, sk, 4, 128), rand(2, sk, 4, 128)
    o, lse = flashjit.attention(q, k, v, causal=True, return_lse=True)
    ref, ref_lse = reference(q, k, v, causal=True)
    assert_close(o, ref, BF16, seed, f"sq={sq} sk={sk}")
    assert_lse_close(lse, ref_lse, seed)


def test_rows_without_keys_are_zero_with_lse_minus_infinity(seed):
    q, k, v = rand(1, 300, 2, 64), rand(1, 100, 2, 64), rand(1, 100, 2, 64)
    o, lse = flashjit.attention(q, k, v, causal=True, return_lse=True)
    assert torch.equal(o[:, :200], torch.zeros_like(o[:, :200]))
    assert bool(torch.isneginf(lse[:, :, :200]).all())
    assert_close(o, reference(q, k, v, causal=True)[0], BF16, seed)


def test_layouts_bshd_bhsd_and_packed_qkv(seed):
    b, s, h, d = 2, 192, 4, 128
    bshd = [rand(b, s, h, d) for _ in range(3)]
    bhsd = [t.transpose(1, 2).contiguous().transpose(1, 2) for t in bshd]  # same values, BHSD memory
    qkv = torch.stack(bshd, dim=2)  # [B, S, 3, H, D]: strides no layout helper names
    ref = sdpa_reference(*bshd, causal=True)
    for name, (q, k, v) in {"bshd": bshd, "bhsd": bhsd, "packed": (qkv[:, :, 0], qkv[:, :, 1], qkv[:, :, 2])}.items():
        o = flashjit.attention(q, k, v, causal=True)
        assert_close(o, ref, BF16, seed, name)
    assert flashjit.attention(*bhsd).transpose(1, 2).is_contiguous()  # O follows q's memory order


def test_value_dim_differs_from_qk_dim(seed):
    q, k, v = rand(2, 128, 4, 128), rand(2, 128, 4, 128), rand(2, 128, 4, 64)
    o = flashjit.attention(q, k, v)
    assert o.shape == (2, 128, 4, 64)
    assert_close(o, sdpa_reference(q, k, v), BF16, seed)


def test_softmax_scale_and_lse(seed):
    q, k, v = rand(2, 130, 8, 64), rand(2, 200, 2, 64), rand(2, 200, 2, 64)
    o, lse = flashjit.attention(q, k, v, softmax_scale=0.3, return_lse=True)
    ref, ref_lse = reference(q, k, v, scale=0.3)
    assert lse.shape == (2, 8, 130) and lse.dtype == torch.float32
    assert_close(o, ref, BF16, seed)
    assert_close(o, sdpa_reference(q, k, v, scale=0.3), BF16, seed, "sdpa")
    assert_lse_close(lse, ref_lse, seed)


def test_out_is_written_entirely(seed):
    q, k, v = rand(2, 160, 4, 64, dtype=FP16), rand(2, 160, 4, 64, dtype=FP16), rand(2, 160, 4, 64, dtype=FP16)
    out = torch.full_like(q, float("nan"))
    assert flashjit.attention(q, k, v, causal=True, out=out) is out
    assert_close(out, sdpa_reference(q, k, v, causal=True), FP16, seed)


def test_direct_path_and_custom_op_agree(seed):
    q, k, v = rand(1, 128, 4, 128), rand(1, 128, 4, 128), rand(1, 128, 4, 128)
    direct, lse = flashjit.attention(q, k, v, causal=True, return_lse=True)
    op_o, op_lse = torch.ops.flashjit.attention(q, k, v, None, None, -1, -1, True, -1, -1, 0.0, True, None, None, None)
    assert torch.equal(direct, op_o) and torch.equal(lse, op_lse)


# ---- ragged batches, windows, rope ----------------------------------------------------------------


def packed(lengths, heads, dim, dtype=BF16):
    return rand(sum(lengths), heads, dim, dtype=dtype)


def offsets(lengths):
    return torch.tensor([0] + list(torch.tensor(lengths).cumsum(0)), dtype=torch.int32, device=DEV)


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_varlen_matches_per_sequence_fp64(causal, seed):
    lq, lk = [3, 100, 7, 64], [5, 100, 130, 64]
    hq, hk, d = 8, 2, 128
    q, k, v = packed(lq, hq, d), packed(lk, hk, d), packed(lk, hk, d)
    o, lse = flashjit.attention(q, k, v, causal=causal, cu_seqlens_q=offsets(lq), cu_seqlens_k=offsets(lk),
                                max_seqlen_q=max(lq), max_seqlen_k=max(lk), return_lse=True)
    assert o.shape == (sum(lq), hq, d) and lse.shape == (hq, sum(lq))
    rq = rk = 0
    for i, (a, b) in enumerate(zip(lq, lk)):
        ref, ref_lse = reference(q[None, rq:rq + a], k[None, rk:rk + b], v[None, rk:rk + b], causal=causal)
        assert_close(o[rq:rq + a], ref[0], BF16, seed, f"sequence {i}")
        assert_lse_close(lse[:, rq:rq + a], ref_lse[0], seed)
        rq, rk = rq + a, rk + b


@pytest.mark.parametrize("window, causal", [((32, 32), False), ((64, 0), False), ((-1, 16), False),
                                            ((48, -1), True), ((16, 0), True)])
def test_sliding_window_matches_fp64(window, causal, seed):
    q, k, v = rand(2, 200, 4, 64), rand(2, 260, 4, 64), rand(2, 260, 4, 64)
    o, lse = flashjit.attention(q, k, v, window=window, causal=causal, return_lse=True)
    ref, ref_lse = reference(q, k, v, causal=causal, window=window)
    assert_close(o, ref, BF16, seed, f"window {window}")
    assert_lse_close(lse, ref_lse, seed)


def test_rope_columns_match_the_concatenated_fp64(seed):
    # MLA's shape: 128 nope + 64 rope columns of Q/K, V of 128.
    q, k, v = rand(2, 96, 8, 128), rand(2, 96, 8, 128), rand(2, 96, 8, 128)
    q_rope, k_rope = rand(2, 96, 8, 64), rand(2, 96, 8, 64)
    o = flashjit.attention(q, k, v, causal=True, q_rope=q_rope, k_rope=k_rope)
    ref, _ = reference(q, k, v, causal=True, q_rope=q_rope, k_rope=k_rope)
    assert_close(o, ref, BF16, seed)


FP8_TOLERANCE = {torch.float8_e4m3fn: 3e-2, torch.float8_e5m2: 6e-2}


@pytest.mark.parametrize("dtype", [torch.float8_e4m3fn, torch.float8_e5m2], ids=["e4m3", "e5m2"])
@pytest.mark.parametrize("per_token", [False, True], ids=["per_tensor", "per_token"])
def test_fp8_inputs_with_scales_match_the_dequantised_fp64(dtype, per_token, seed):
    q, k, v = rand(2, 128, 8, 128), rand(2, 160, 2, 128), rand(2, 160, 2, 128)
    (q8, qs), (k8, ks), (v8, vs) = quantised(q, dtype, per_token), quantised(k, dtype, per_token), quantised(v, dtype)
    o = flashjit.attention(q8, k8, v8, causal=True, q_scale=qs, k_scale=ks, v_scale=vs)
    assert o.dtype == BF16 and o.shape == q.shape
    ref, _ = reference(dequantised(q8, qs), dequantised(k8, ks), dequantised(v8, vs), causal=True)
    err = rel_error(o, ref)
    assert err <= FP8_TOLERANCE[dtype], f"rel error {err:.3e} > {FP8_TOLERANCE[dtype]} (seed {seed})"


def test_rope_on_a_ragged_batch(seed):
    lengths = [17, 80]
    q, k, v = packed(lengths, 4, 128), packed(lengths, 4, 128), packed(lengths, 4, 128)
    q_rope, k_rope = packed(lengths, 4, 64), packed(lengths, 4, 64)
    cu = offsets(lengths)
    o = flashjit.attention(q, k, v, causal=True, cu_seqlens_q=cu, cu_seqlens_k=cu, max_seqlen_q=80,
                           max_seqlen_k=80, q_rope=q_rope, k_rope=k_rope)
    r = 0
    for a in lengths:
        s = slice(r, r + a)
        ref, _ = reference(q[None, s], k[None, s], v[None, s], causal=True, q_rope=q_rope[None, s], k_rope=k_rope[None, s])
        assert_close(o[s], ref[0], BF16, seed)
        r += a


# ---- pinned configs ---------------------------------------------------------------------------------


def test_pinned_tuning_is_used_and_checked(seed, tmp_path):
    q, k, v = rand(1, 256, 4, 128), rand(1, 256, 4, 128), rand(1, 256, 4, 128)
    ref = sdpa_reference(q, k, v, causal=True)
    pins = {"dict": {"tuning": {"family": "sm80"}}, "config": flashjit.Config({"head_dim": {"qk": 128, "v": 128},
                                                                               "mask": "causal", "arch": "native",
                                                                               "tuning": {"family": "sm80"}})}
    path = tmp_path / "pin.json"
    path.write_text('{"tuning": {"family": "sm80"}}')
    pins["path"] = str(path)
    for name, pin in pins.items():
        assert_close(flashjit.attention(q, k, v, causal=True, config=pin), ref, BF16, seed, name)
    kernel = flashjit.get_kernel({"arch": "native", "head_dim": {"qk": 128, "v": 128}, "mask": "causal",
                                  "tuning": {"family": "sm80"}})
    assert kernel.loaded and kernel.family == "sm80"
    with pytest.raises(flashjit.ArgumentError, match="head_dim.qk = 64 but the call gives 128"):
        flashjit.attention(q, k, v, causal=True, config={"head_dim": {"qk": 64, "v": 64}})
    with pytest.raises(flashjit.ArgumentError, match="mask"):
        flashjit.attention(q, k, v, config={"mask": "causal"})


# ---- torch.compile, CUDA graphs, streams, threads ----------------------------------------------------


def block(q, k, v):
    return flashjit.attention(q * 0.5, k, v, causal=True).float().sum(dim=-1)


def test_torch_compile_fullgraph_matches_eager(seed):
    q, k, v = rand(2, 128, 4, 64), rand(2, 128, 4, 64), rand(2, 128, 4, 64)
    eager = block(q, k, v)
    compiled = torch.compile(block, fullgraph=True)
    assert torch.allclose(compiled(q, k, v), eager, rtol=1e-2, atol=1e-2)
    q2 = rand(2, 128, 4, 64)
    assert torch.allclose(compiled(q2, k, v), block(q2, k, v), rtol=1e-2, atol=1e-2)


def test_torch_compile_reduce_overhead_replays_changing_data(seed):
    compiled = torch.compile(block, fullgraph=True, mode="reduce-overhead")
    for _ in range(4):
        q, k, v = rand(2, 128, 4, 64), rand(2, 128, 4, 64), rand(2, 128, 4, 64)
        assert torch.allclose(compiled(q, k, v).clone(), block(q, k, v), rtol=1e-2, atol=1e-2)


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_cuda_graph_capture_and_replay_with_changing_data(causal, seed):
    q, k, v = rand(2, 256, 8, 128), rand(2, 256, 2, 128), rand(2, 256, 2, 128)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm-up: the same call, so the capture finds its plan
        flashjit.attention(q, k, v, causal=causal, return_lse=True)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out, lse = flashjit.attention(q, k, v, causal=causal, return_lse=True)
    for step in range(3):
        for t in (q, k, v):
            t.copy_(torch.randn_like(t))
        graph.replay()
        ref, ref_lse = reference(q, k, v, causal=causal)
        assert_close(out, ref, BF16, seed, f"replay {step}")
        assert_lse_close(lse, ref_lse, seed)


def test_first_use_inside_a_capture(seed):
    # A call signature first seen while capturing builds its plan there: the kernel is built and
    # loaded (no stream work), and only the launch is captured.
    q, k, v = rand(1, 96, 4, 64), rand(1, 96, 4, 64), rand(1, 96, 4, 64)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = flashjit.attention(q, k, v, window=(8, 8))
    q.copy_(torch.randn_like(q))
    graph.replay()
    assert_close(out, reference(q, k, v, window=(8, 8))[0], BF16, seed)


def test_two_graphs_of_one_kernel_replay_concurrently(seed):
    # Each capture gets its own tile counter, so replays on two streams at once do not share one.
    inputs = [[rand(1, 512, 8, 128) for _ in range(3)] for _ in range(2)]
    for q, k, v in inputs:
        flashjit.attention(q, k, v, causal=True)
    graphs, outs = [], []
    for q, k, v in inputs:
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            outs.append(flashjit.attention(q, k, v, causal=True))
        graphs.append(g)
    streams = [torch.cuda.Stream(), torch.cuda.Stream()]
    for _ in range(3):
        for s, g in zip(streams, graphs):
            s.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(s):
                g.replay()
        for s in streams:
            torch.cuda.current_stream().wait_stream(s)
        for o, (q, k, v) in zip(outs, inputs):
            assert_close(o, sdpa_reference(q, k, v, causal=True), BF16, seed)


def test_a_varlen_graph_replays(seed):
    lengths = [33, 200, 64]
    q, k, v = packed(lengths, 4, 64), packed(lengths, 4, 64), packed(lengths, 4, 64)
    cu = offsets(lengths)
    kwargs = dict(causal=True, cu_seqlens_q=cu, cu_seqlens_k=cu, max_seqlen_q=200, max_seqlen_k=200)
    flashjit.attention(q, k, v, **kwargs)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = flashjit.attention(q, k, v, **kwargs)
    q.copy_(torch.randn_like(q))
    graph.replay()
    r = 0
    for a in lengths:
        s = slice(r, r + a)
        assert_close(out[s], reference(q[None, s], k[None, s], v[None, s], causal=True)[0][0], BF16, seed)
        r += a


def test_runs_on_torchs_current_stream(seed):
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        q = rand(2, 256, 4, 128)  # produced on s: only a launch on s sees the data
        k, v = rand(2, 256, 4, 128), rand(2, 256, 4, 128)
        o = flashjit.attention(q, k, v)
    s.synchronize()
    assert_close(o, sdpa_reference(q, k, v), BF16, seed)


def test_works_from_a_new_thread(seed):
    q, k, v = rand(1, 128, 4, 64), rand(1, 128, 4, 64), rand(1, 128, 4, 64)
    torch.cuda.synchronize()
    result = {}

    def work():
        try:
            result["o"] = flashjit.attention(q, k, v, causal=True)
            torch.cuda.synchronize()
        except Exception as e:  # reported by the main thread
            result["error"] = e

    t = threading.Thread(target=work)
    t.start()
    t.join()
    assert "error" not in result, result.get("error")
    assert_close(result["o"], sdpa_reference(q, k, v, causal=True), BF16, seed)


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two GPUs")
def test_tensors_on_another_device_leave_the_current_device_alone(seed):
    q, k, v = (rand(1, 128, 4, 64).to("cuda:1") for _ in range(3))
    assert torch.cuda.current_device() == 0
    o = flashjit.attention(q, k, v)
    assert o.device == q.device and torch.cuda.current_device() == 0
    assert_close(o, sdpa_reference(q, k, v), BF16, seed)


# ---- autograd, op checks, kernels ---------------------------------------------------------------------


def test_backward_raises_forward_only():
    q = rand(1, 64, 2, 64).requires_grad_()
    k, v = rand(1, 64, 2, 64), rand(1, 64, 2, 64)
    o = flashjit.attention(q, k, v)
    assert o.requires_grad
    with pytest.raises(RuntimeError, match="forward only"):
        o.float().sum().backward()


@pytest.mark.parametrize("case", ["dense", "lse_window", "varlen"])
def test_opcheck(case):
    q, k, v = rand(2, 64, 4, 64), rand(2, 80, 2, 64), rand(2, 80, 2, 64)
    args = [q, k, v, None, None, -1, -1, True, -1, -1, 0.0, False, None, None, None]
    if case == "lse_window":
        args[7:12] = [False, 16, 16, 0.2, True]
    if case == "varlen":
        cu = offsets([30, 34])
        args[:7] = [q[0], k[0, :64], v[0, :64], cu, cu, 34, 34]
    torch.library.opcheck(torch.ops.flashjit.attention.default, tuple(args))


def test_get_kernel_native_is_loaded():
    k = flashjit.get_kernel({"arch": "native", "head_dim": {"qk": 64, "v": 64}})
    major, minor = torch.cuda.get_device_capability()
    assert k.loaded and k.arch == flashjit._core.arch_for_compute_capability(major, minor)
    assert k.registers > 0

"""flashjit.decode on a GPU against an fp64 reference that gathers the cache's pages: contiguous
and paged caches at several page sizes, cache lengths including empty ones, multi-token causal
steps, GQA, windows, forced split counts, ragged steps, the LSE, fp8 caches with their scales,
and a CUDA graph replayed on fresh data. Skipped without torch or a GPU."""

import pytest

from gpu_support import dequantised, quantised, rel_error, require_torch_gpu

torch = require_torch_gpu()

import flashjit  # noqa: E402

DEV = "cuda"
TOLERANCE = {torch.bfloat16: 1e-2, torch.float16: 3e-3}


def paged_cache(k, v, lens, page):
    """The [B, S, Hk, D] cache k, v as shuffled pages: (k_pages, v_pages, page_table). Rows no
    sequence owns hold NaN (fp8: the bytes 0x7f, NaN in both fp8 types)."""
    if k.element_size() == 1 and k.dtype != torch.uint8:
        kp, vp, table = paged_cache(k.view(torch.uint8), v.view(torch.uint8), lens, page)
        return kp.view(k.dtype), vp.view(v.dtype), table
    batch, _, hk, d = k.shape
    need = [(n + page - 1) // page for n in lens]
    max_pages = max(1, max(need))
    total = sum(need) + 1
    order = torch.randperm(total).tolist()
    fill = 0x7F if k.dtype == torch.uint8 else float("nan")
    kp = torch.full((total, page, hk, d), fill, dtype=k.dtype, device=DEV)
    vp = torch.full((total, page, hk, v.shape[-1]), fill, dtype=v.dtype, device=DEV)
    table = torch.full((batch, max_pages), -1, dtype=torch.int32)
    for b in range(batch):
        for i in range(need[b]):
            p = order.pop()
            table[b, i] = p
            rows = slice(i * page, min((i + 1) * page, lens[b]))
            n = rows.stop - rows.start
            kp[p, :n] = k[b, rows]
            vp[p, :n] = v[b, rows]
    return kp, vp, table.to(DEV)


def reference(q, k, v, lens, causal, window, scale=None):
    """fp64: q [B, Sq, Hq, D] against the first lens[b] keys of k, v [B, S, Hk, D]."""
    b_, sq, hq, d = q.shape
    hk = k.shape[2]
    scale = scale or d ** -0.5
    out = torch.zeros(b_, sq, hq, v.shape[-1], dtype=torch.float64, device=DEV)
    lse = torch.full((b_, hq, sq), float("-inf"), dtype=torch.float64, device=DEV)
    for b in range(b_):
        n = lens[b]
        if n == 0:
            continue
        qd = q[b].double().transpose(0, 1)                                        # [Hq, Sq, D]
        kd = k[b, :n].double().transpose(0, 1).repeat_interleave(hq // hk, 0)     # [Hq, n, D]
        vd = v[b, :n].double().transpose(0, 1).repeat_interleave(hq // hk, 0)
        s = qd @ kd.transpose(1, 2) * scale                                       # [Hq, Sq, n]
        i = torch.arange(sq, device=DEV)[:, None] + (n - sq)
        j = torch.arange(n, device=DEV)[None, :]
        allowed = torch.ones(sq, n, dtype=torch.bool, device=DEV)
        if causal:
            allowed &= j <= i
        if window is not None:
            left, right = window
            if left >= 0:
                allowed &= j >= i - left
            if right >= 0 and not causal:
                allowed &= j <= i + right
        s = s.masked_fill(~allowed, float("-inf"))
        m = s.amax(-1, keepdim=True)
        has = torch.isfinite(m)
        p = torch.where(has, torch.exp(s - torch.where(has, m, 0)), 0)
        l = p.sum(-1, keepdim=True)
        out[b] = torch.where(l > 0, (p @ vd) / torch.where(l > 0, l, 1), 0).transpose(0, 1)
        lse[b] = torch.where(l[..., 0] > 0, (m + torch.log(l))[..., 0], float("-inf"))
    return out, lse


CASES = [
    # dtype, dim, heads, kv_heads, tokens, page (0: contiguous), causal, window, splits
    (torch.bfloat16, 128, 32, 8, 1, 16, False, None, 0),
    (torch.bfloat16, 128, 64, 8, 4, 64, True, None, 0),
    (torch.float16, 64, 8, 1, 2, 1, True, None, 0),
    (torch.bfloat16, 256, 16, 4, 1, 256, False, None, 5),
    (torch.bfloat16, 128, 32, 8, 16, 0, True, None, 0),
    (torch.bfloat16, 128, 8, 8, 1, 32, False, (300, 0), 0),
]


@pytest.mark.parametrize("dtype, dim, hq, hk, tokens, page, causal, window, splits", CASES)
def test_matches_fp64(seed, dtype, dim, hq, hk, tokens, page, causal, window, splits):
    lens = [0, 1, 17, 4095, 20000]
    batch, longest = len(lens), max(lens)
    q = torch.randn(batch, tokens, hq, dim, dtype=dtype, device=DEV)
    k = torch.randn(batch, longest, hk, dim, dtype=dtype, device=DEV)
    v = torch.randn(batch, longest, hk, dim, dtype=dtype, device=DEV)
    seqlens = torch.tensor(lens, dtype=torch.int32, device=DEV)
    if page:
        kp, vp, table = paged_cache(k, v, lens, page)
        o, lse = flashjit.decode(q, kp, vp, page_table=table, cache_seqlens=seqlens, causal=causal, window=window,
                                 num_splits=splits, return_lse=True)
    else:
        o, lse = flashjit.decode(q, k, v, cache_seqlens=seqlens, causal=causal, window=window, num_splits=splits,
                                 return_lse=True)
    want_o, want_lse = reference(q, k, v, lens, causal, window)
    assert torch.isfinite(o).all(), f"seed {seed}"
    assert rel_error(o, want_o) < TOLERANCE[dtype], f"seed {seed}: {rel_error(o, want_o):.3e}"
    finite = torch.isfinite(want_lse)
    assert torch.equal(torch.isfinite(lse), finite), f"seed {seed}"
    assert (lse[finite].double() - want_lse[finite]).abs().max().item() < 1e-2, f"seed {seed}"


def test_ragged_steps(seed):
    lens, tokens = [100, 5000, 0], [3, 1, 2]
    page, hq, hk, dim = 16, 16, 4, 128
    k = torch.randn(3, max(lens), hk, dim, dtype=torch.bfloat16, device=DEV)
    v = torch.randn_like(k)
    kp, vp, table = paged_cache(k, v, lens, page)
    qs = [torch.randn(1, t, hq, dim, dtype=torch.bfloat16, device=DEV) for t in tokens]
    packed = torch.cat([x[0] for x in qs])
    cu = torch.tensor([0, 3, 4, 6], dtype=torch.int32, device=DEV)
    o = flashjit.decode(packed, kp, vp, page_table=table, cache_seqlens=torch.tensor(lens, dtype=torch.int32,
                        device=DEV), cu_seqlens_q=cu, max_seqlen_q=3, causal=True)
    for b, x in enumerate(qs):
        want, _ = reference(x, k[b:b + 1], v[b:b + 1], [lens[b]], True, None)
        got = o[cu[b]:cu[b + 1]][None]
        assert rel_error(got, want) < 1e-2 or lens[b] == 0, f"seed {seed}, sequence {b}"


FP8_TOLERANCE = {torch.float8_e4m3fn: 2e-2, torch.float8_e5m2: 2e-2}


@pytest.mark.parametrize("dtype", [torch.float8_e4m3fn, torch.float8_e5m2], ids=["e4m3", "e5m2"])
@pytest.mark.parametrize("per_token", [False, True], ids=["per_tensor", "per_token"])
def test_fp8_cache_matches_the_dequantised_fp64(seed, dtype, per_token):
    lens, tokens, hq, hk, dim, page = [0, 33, 5000], 4, 32, 8, 128, 16
    batch, longest = len(lens), max(lens)
    q8, qs = quantised(torch.randn(batch, tokens, hq, dim, device=DEV), dtype, per_token)
    k8, ks = quantised(torch.randn(batch, longest, hk, dim, device=DEV), dtype, per_token)
    v8, vs = quantised(torch.randn(batch, longest, hk, dim, device=DEV), dtype)
    qd, kd, vd = dequantised(q8, qs), dequantised(k8, ks), dequantised(v8, vs)
    kp, vp, table = paged_cache(k8, v8, lens, page)
    seqlens = torch.tensor(lens, dtype=torch.int32, device=DEV)
    o, lse = flashjit.decode(q8, kp, vp, page_table=table, cache_seqlens=seqlens, causal=True, return_lse=True,
                             q_scale=qs, k_scale=ks, v_scale=vs)
    assert o.dtype == torch.bfloat16
    want_o, want_lse = reference(qd, kd, vd, lens, True, None)
    err = rel_error(o, want_o)
    assert err < FP8_TOLERANCE[dtype], f"seed {seed}: {err:.3e}"
    finite = torch.isfinite(want_lse)
    assert torch.equal(torch.isfinite(lse), finite), f"seed {seed}"
    assert (lse[finite].double() - want_lse[finite]).abs().max().item() < 1e-2, f"seed {seed}"


@pytest.mark.parametrize("q_dtype", [torch.bfloat16, torch.float16], ids=["bf16_q", "fp16_q"])
def test_sixteen_bit_q_beside_an_fp8_cache(seed, q_dtype):
    """vLLM's and FlashInfer's fp8 decode: q unquantised, the cache e4m3 with per-tensor scales."""
    lens, tokens, hq, hk, dim, page = [0, 33, 5000], 2, 32, 8, 128, 16
    batch, longest = len(lens), max(lens)
    q = torch.randn(batch, tokens, hq, dim, dtype=q_dtype, device=DEV)
    k8, ks = quantised(torch.randn(batch, longest, hk, dim, device=DEV), torch.float8_e4m3fn)
    v8, vs = quantised(torch.randn(batch, longest, hk, dim, device=DEV), torch.float8_e4m3fn)
    kp, vp, table = paged_cache(k8, v8, lens, page)
    seqlens = torch.tensor(lens, dtype=torch.int32, device=DEV)
    o = flashjit.decode(q, kp, vp, page_table=table, cache_seqlens=seqlens, causal=True, k_scale=ks, v_scale=vs)
    assert o.dtype == q_dtype
    want, _ = reference(q, dequantised(k8, ks), dequantised(v8, vs), lens, True, None)
    assert rel_error(o, want) < 2e-2, f"seed {seed}: {rel_error(o, want):.3e}"
    with pytest.raises(flashjit.ConfigError, match="scales.q"):
        flashjit.decode(q, kp, vp, page_table=table, cache_seqlens=seqlens, q_scale=torch.ones(1, device=DEV),
                        k_scale=ks, v_scale=vs)


def test_per_token_kv_scales_beside_the_pages(seed):
    """scale_layout="cache": per-token K and V scales [num_pages, page_size, heads_k], as engines
    keep them with their pages (vLLM's per-token-head fp8 cache; here with a bf16 q)."""
    lens, tokens, hq, hk, dim, page = [0, 33, 5000], 2, 32, 8, 128, 16
    batch, longest = len(lens), max(lens)
    q = torch.randn(batch, tokens, hq, dim, dtype=torch.bfloat16, device=DEV)
    k8, ks = quantised(torch.randn(batch, longest, hk, dim, device=DEV), torch.float8_e4m3fn, per_token=True)
    v8, vs = quantised(torch.randn(batch, longest, hk, dim, device=DEV), torch.float8_e4m3fn, per_token=True)
    kp, vp, table = paged_cache(k8, v8, lens, page)

    def beside_the_pages(scale):  # [B, Hk, S] -> each key's scale at its row of the cache
        pages = torch.full(kp.shape[:3], float("nan"), device=DEV)
        by_row = scale.permute(0, 2, 1)
        for b, n in enumerate(lens):
            for i in range((n + page - 1) // page):
                rows = slice(i * page, min((i + 1) * page, n))
                pages[int(table[b, i]), :rows.stop - rows.start] = by_row[b, rows]
        return pages

    seqlens = torch.tensor(lens, dtype=torch.int32, device=DEV)
    o = flashjit.decode(q, kp, vp, page_table=table, cache_seqlens=seqlens, causal=True,
                        k_scale=beside_the_pages(ks), v_scale=beside_the_pages(vs), scale_layout="cache")
    want, _ = reference(q, dequantised(k8, ks), dequantised(v8, vs), lens, True, None)
    assert rel_error(o, want) < 2e-2, f"seed {seed}: {rel_error(o, want):.3e}"
    # By position ([batch, heads_k, positions]) the same scales give the same output.
    o2 = flashjit.decode(q, kp, vp, page_table=table, cache_seqlens=seqlens, causal=True, k_scale=ks, v_scale=vs)
    assert rel_error(o2, want) < 2e-2, f"seed {seed}: {rel_error(o2, want):.3e}"
    with pytest.raises(flashjit.ArgumentError, match="shaped like the cache's rows"):
        flashjit.decode(q, kp, vp, page_table=table, cache_seqlens=seqlens, k_scale=ks, v_scale=vs,
                        scale_layout="cache")


def test_graph_replays_on_fresh_data(seed):
    lens = [30000]
    q = torch.randn(1, 1, 64, 128, dtype=torch.bfloat16, device=DEV)
    k = torch.randn(1, lens[0], 8, 128, dtype=torch.bfloat16, device=DEV)
    v = torch.randn_like(k)
    kp, vp, table = paged_cache(k, v, lens, 64)
    seqlens = torch.tensor(lens, dtype=torch.int32, device=DEV)
    flashjit.decode(q, kp, vp, page_table=table, cache_seqlens=seqlens)  # plan and build outside the capture
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        o = flashjit.decode(q, kp, vp, page_table=table, cache_seqlens=seqlens)
    for _ in range(3):
        q.copy_(torch.randn_like(q))
        graph.replay()
        torch.cuda.synchronize()
        want, _ = reference(q, k, v, lens, False, None)
        assert rel_error(o, want) < 1e-2, f"seed {seed}"

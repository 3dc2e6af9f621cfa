"""flashjit.decode without a GPU: the custom op's schema, its fake implementation's shapes for
contiguous, paged and ragged calls, torch.compile(fullgraph=True) tracing, and argument errors
naming the tensor. Meta tensors stand in for CUDA tensors."""

import re

import pytest

torch = pytest.importorskip("torch", reason="torch is not installed (the torch layer loads only with torch)")

import flashjit  # noqa: E402

BF16, I32 = torch.bfloat16, torch.int32


def meta(*shape, dtype=BF16):
    return torch.empty(*shape, device="meta", dtype=dtype)


def paged_call(batch=4, tokens=1, heads=32, kv_heads=8, dim=128, pages=100, page=16, max_pages=20, **kwargs):
    q = meta(batch, tokens, heads, dim)
    k = meta(pages, page, kv_heads, dim)
    v = meta(pages, page, kv_heads, dim)
    return q, k, v, dict(page_table=meta(batch, max_pages, dtype=I32), cache_seqlens=meta(batch, dtype=I32), **kwargs)


def test_the_op_is_registered_with_its_schema():
    schema = str(torch.ops.flashjit.decode.default._schema)
    for arg in ("Tensor q", "Tensor k_cache", r"Tensor\? cache_seqlens", r"Tensor\? page_table",
                r"Tensor\? cu_seqlens_q", "(Sym)?Int num_splits", "bool return_lse", r"str\? config"):
        assert re.search(arg, schema), arg
    assert schema.endswith("-> (Tensor, Tensor)")


def test_paged_and_contiguous_shapes():
    q, k, v, kw = paged_call(tokens=4)
    o = flashjit.decode(q, k, v, causal=True, **kw)
    assert o.shape == (4, 4, 32, 128) and o.dtype == BF16
    o, lse = flashjit.decode(q, k, v, return_lse=True, **kw)
    assert lse.shape == (4, 32, 4) and lse.dtype == torch.float32
    dense_k, dense_v = meta(4, 4096, 8, 128), meta(4, 4096, 8, 64)
    assert flashjit.decode(meta(4, 1, 32, 128), dense_k, dense_v).shape == (4, 1, 32, 64)


def test_fp8_caches_write_bfloat16_and_take_scales():
    q, k, v, kw = paged_call()
    f8 = torch.float8_e4m3fn
    q, k, v = q.to(f8), k.to(f8), v.to(f8)
    o, lse = torch.ops.flashjit.decode(q, k, v, kw["cache_seqlens"], kw["page_table"], None, -1, -1, False, -1, -1,
                                       0.0, 0, False, None, meta(1, dtype=torch.float32), meta(8, dtype=torch.float32),
                                       meta(1, dtype=torch.float32))
    assert o.dtype == BF16 and tuple(o.shape) == (4, 1, 32, 128)
    with pytest.raises(flashjit.ArgumentError, match="flashjit.decode: k_scale of shape"):
        torch.ops.flashjit.decode(q, k, v, kw["cache_seqlens"], kw["page_table"], None, -1, -1, False, -1, -1,
                                  0.0, 0, False, None, None, meta(3, dtype=torch.float32), None)


def test_ragged_steps_against_a_paged_cache():
    q, k, v, kw = paged_call()
    o, lse = flashjit.decode(meta(10, 32, 128), k, v, cu_seqlens_q=meta(5, dtype=I32), max_seqlen_q=4,
                             return_lse=True, **kw)
    assert o.shape == (10, 32, 128) and lse.shape == (32, 10)


def test_compile_traces_one_graph():
    q, k, v, kw = paged_call()
    graphs = []

    def backend(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    fn = torch.compile(lambda q, k, v, t, s: flashjit.decode(q, k, v, page_table=t, cache_seqlens=s),
                       backend=backend, fullgraph=True)
    assert fn(q, k, v, kw["page_table"], kw["cache_seqlens"]).shape == (4, 1, 32, 128)
    assert len(graphs) == 1
    assert "flashjit.decode" in str(graphs[0].graph)


@pytest.mark.parametrize("change, needle", [
    (lambda a: a[3].update(page_table=meta(4, 20, dtype=torch.int64)), "page_table must be int32"),
    (lambda a: a[3].pop("cache_seqlens"), "needs cache_seqlens"),
    (lambda a: a[3].update(cache_seqlens=meta(3, dtype=I32)), "cache_seqlens must be"),
    (lambda a: a[3].update(max_seqlen_k=10**6), "more than the page table holds"),
])
def test_bad_arguments_are_named(change, needle):
    args = list(paged_call())
    change(args)
    q, k, v, kw = args
    with pytest.raises(flashjit.ArgumentError, match=needle):
        flashjit.decode(q, k, v, **kw)


def test_pages_must_be_powers_of_two_and_steps_short():
    q, _, _, kw = paged_call()
    with pytest.raises(flashjit.ArgumentError, match="powers of two"):
        flashjit.decode(q, meta(10, 24, 8, 128), meta(10, 24, 8, 128), **kw)
    with pytest.raises(flashjit.ArgumentError, match="flashjit.attention"):
        flashjit.decode(meta(4, 100, 32, 128), meta(4, 200, 8, 128), meta(4, 200, 8, 128))
    with pytest.raises(flashjit.ArgumentError, match="need a paged cache"):
        flashjit.decode(meta(10, 32, 128), meta(4, 200, 8, 128), meta(4, 200, 8, 128),
                        cu_seqlens_q=meta(5, dtype=I32), max_seqlen_q=4)


def test_backward_raises():
    q, k, v, kw = paged_call()
    q = q.requires_grad_()
    o = flashjit.decode(q, k, v, **kw)
    with pytest.raises(RuntimeError, match="forward only"):
        o.sum().backward()


def test_mla_decode_shapes_and_rope_checks():
    q, q_pe = meta(4, 2, 128, 512), meta(4, 2, 128, 64)
    ckv, kpe = meta(100, 64, 1, 512), meta(100, 64, 1, 64)
    kw = dict(page_table=meta(4, 20, dtype=I32), cache_seqlens=meta(4, dtype=I32))
    o, lse = flashjit.mla_decode(q, q_pe, ckv, kpe, causal=True, return_lse=True, **kw)
    assert o.shape == (4, 2, 128, 512) and lse.shape == (4, 128, 2)
    # FlashMLA's one buffer: the whole rows, V their first 512 columns.
    assert flashjit.mla_decode(meta(4, 1, 16, 576), None, meta(100, 64, 1, 576), None, head_dim_v=512,
                               **kw).shape == (4, 1, 16, 512)
    with pytest.raises(flashjit.ArgumentError, match="q_rope has shape"):
        flashjit.mla_decode(q, meta(4, 1, 128, 64), ckv, kpe, **kw)
    with pytest.raises(flashjit.ArgumentError, match="q_rope and k_rope_cache come together"):
        flashjit.mla_decode(q, q_pe, ckv, None, **kw)


def test_sixteen_bit_q_beside_an_fp8_cache_and_mla_prefill_chunks():
    f8 = torch.float8_e4m3fn
    q, _, _, kw = paged_call(tokens=2)
    k, v = meta(100, 16, 8, 128, dtype=f8), meta(100, 16, 8, 128, dtype=f8)
    o = flashjit.decode(q, k, v, k_scale=meta(1, dtype=torch.float32), v_scale=meta(1, dtype=torch.float32), **kw)
    assert o.dtype == BF16 and tuple(o.shape) == (4, 2, 32, 128)
    with pytest.raises(flashjit.ArgumentError, match="share one dtype"):
        flashjit.decode(meta(4, 2, 32, 128, dtype=torch.float16), meta(100, 16, 8, 128), meta(100, 16, 8, 128), **kw)
    # An fp8 latent cache beside a bf16 rope part; a prefill chunk of 300 tokens; more than 16384 refused.
    mkw = dict(page_table=meta(4, 20, dtype=I32), cache_seqlens=meta(4, dtype=I32))
    o = flashjit.mla_decode(meta(4, 300, 16, 512, dtype=f8), meta(4, 300, 16, 64), meta(100, 64, 1, 512, dtype=f8),
                            meta(100, 64, 1, 64), causal=True, q_scale=meta(1, dtype=torch.float32),
                            k_scale=meta(1, dtype=torch.float32), **mkw)
    assert o.dtype == BF16 and tuple(o.shape) == (4, 300, 16, 512)
    with pytest.raises(flashjit.ArgumentError, match="chunks of 0 to 16384"):
        flashjit.mla_decode(meta(1, 16385, 16, 512), meta(1, 16385, 16, 64), meta(100, 64, 1, 512),
                            meta(100, 64, 1, 64), page_table=meta(1, 20, dtype=I32), cache_seqlens=meta(1, dtype=I32))
    with pytest.raises(flashjit.ArgumentError, match="rope part is bfloat16 or float16"):
        flashjit.mla_decode(meta(4, 1, 16, 512, dtype=f8), meta(4, 1, 16, 64, dtype=f8),
                            meta(100, 64, 1, 512, dtype=f8), meta(100, 64, 1, 64, dtype=f8), **mkw)


def test_k_scales_laid_out_like_the_cache():
    f8, f32 = torch.float8_e4m3fn, torch.float32
    q, _, _, kw = paged_call()
    k, v = meta(100, 16, 8, 128, dtype=f8), meta(100, 16, 8, 128, dtype=f8)
    o = flashjit.decode(q, k, v, k_scale=meta(100, 16, 8, dtype=f32), v_scale=meta(1, dtype=f32),
                        scale_layout="cache", **kw)
    assert o.dtype == BF16 and tuple(o.shape) == (4, 1, 32, 128)
    with pytest.raises(flashjit.ArgumentError, match="shaped like the cache's rows"):
        flashjit.decode(q, k, v, k_scale=meta(4, 8, 320, dtype=f32), v_scale=meta(1, dtype=f32),
                        scale_layout="cache", **kw)
    with pytest.raises(flashjit.ArgumentError, match="'positions' or 'cache'"):
        flashjit.decode(q, k, v, k_scale=meta(100, 16, 8, dtype=f32), v_scale=meta(1, dtype=f32),
                        scale_layout="pages", **kw)


def test_per_block_k_scales_of_an_fp8_latent_cache():
    """FlashMLA's fp8 rows: k_scale [pages, page_size, 1, blocks], one scale per 128 columns."""
    f8, f32 = torch.float8_e4m3fn, torch.float32
    kw = dict(page_table=meta(4, 20, dtype=I32), cache_seqlens=meta(4, dtype=I32), scale_layout="cache")
    q, q_pe = meta(4, 1, 16, 512), meta(4, 1, 16, 64)
    ckv, kpe = meta(100, 64, 1, 512, dtype=f8), meta(100, 64, 1, 64)
    o = flashjit.mla_decode(q, q_pe, ckv, kpe, k_scale=meta(100, 64, 1, 4, dtype=f32), **kw)
    assert o.dtype == BF16 and tuple(o.shape) == (4, 1, 16, 512)
    with pytest.raises(flashjit.ArgumentError, match="k_scale has 8 scales per key row"):
        flashjit.mla_decode(q, q_pe, ckv, kpe, k_scale=meta(100, 64, 1, 8, dtype=f32), **kw)
    with pytest.raises(flashjit.ArgumentError, match="shaped like the cache's rows"):
        flashjit.mla_decode(q, q_pe, ckv, kpe, k_scale=meta(100, 32, 1, 4, dtype=f32), **kw)


def test_per_token_q_scales_of_one_token_take_any_last_stride():
    """q_scale [batch, heads, 1] from q's [batch, 1, heads] by permute(0, 2, 1).contiguous():
    torch keeps the size-one axis's stride (heads), which is no layout problem."""
    f8, f32 = torch.float8_e4m3fn, torch.float32
    q_scale = torch.empty(4, 1, 32, device="meta", dtype=f32).permute(0, 2, 1).contiguous()
    assert q_scale.stride(-1) != 1
    q, _, _, kw = paged_call()
    k, v = meta(100, 16, 8, 128, dtype=f8), meta(100, 16, 8, 128, dtype=f8)
    o = flashjit.decode(q.to(f8), k, v, q_scale=q_scale, k_scale=meta(1, dtype=f32), v_scale=meta(1, dtype=f32), **kw)
    assert tuple(o.shape) == (4, 1, 32, 128)

"""flashjit.mla_decode on a GPU against an fp64 reference: DeepSeek's latent cache (512 nope + 64
rope columns, V the first 512) paged as FlashInfer keeps it (ckv and kpe apart) and as FlashMLA
does (one 576-column buffer), 16 and 128 heads, causal steps of two tokens, the LSE, an fp8 (e4m3)
cache with per-token scales beside a bf16 rope part, FlashMLA's fp8 rows (per-block scales inside
each row), prefill chunks against the cache (40 to 200 causal tokens), and the errors for
mismatched rope parts.
Skipped without torch or a GPU."""

import pytest

from gpu_support import rel_error, require_torch_gpu
from test_decode_gpu import paged_cache, reference

torch = require_torch_gpu()

import flashjit  # noqa: E402

DEV = "cuda"


@pytest.mark.parametrize("heads, tokens, page, causal", [(16, 1, 64, False), (128, 1, 64, False), (16, 2, 16, True),
                                                        (64, 1, 1, False)])
def test_separate_rope_cache_matches_fp64(seed, heads, tokens, page, causal):
    lens = [0, 17, 4095, 9000]
    batch, longest = len(lens), max(lens)
    q = torch.randn(batch, tokens, heads, 512, dtype=torch.bfloat16, device=DEV)
    q_pe = torch.randn(batch, tokens, heads, 64, dtype=torch.bfloat16, device=DEV)
    ckv = torch.randn(batch, longest, 1, 512, dtype=torch.bfloat16, device=DEV)
    kpe = torch.randn(batch, longest, 1, 64, dtype=torch.bfloat16, device=DEV)
    ckv_pages, kpe_pages, table = paged_cache(ckv, kpe, lens, page)
    seqlens = torch.tensor(lens, dtype=torch.int32, device=DEV)
    o, lse = flashjit.mla_decode(q, q_pe, ckv_pages, kpe_pages, page_table=table, cache_seqlens=seqlens,
                                 causal=causal, return_lse=True)
    assert o.shape == (batch, tokens, heads, 512)
    want_o, want_lse = reference(torch.cat([q, q_pe], -1), torch.cat([ckv, kpe], -1), ckv, lens, causal, None)
    assert rel_error(o, want_o) < 1e-2, f"seed {seed}: {rel_error(o, want_o):.3e}"
    finite = torch.isfinite(want_lse)
    assert torch.equal(torch.isfinite(lse), finite), f"seed {seed}"
    assert (lse[finite].double() - want_lse[finite]).abs().max().item() < 1e-2, f"seed {seed}"


def test_one_buffer_layout_matches_fp64(seed):
    lens = [3000, 64]
    q = torch.randn(2, 1, 32, 576, dtype=torch.bfloat16, device=DEV)
    kv = torch.randn(2, max(lens), 1, 576, dtype=torch.bfloat16, device=DEV)
    pages, _, table = paged_cache(kv, kv[..., :8], lens, 64)
    seqlens = torch.tensor(lens, dtype=torch.int32, device=DEV)
    want, _ = reference(q, kv, kv[..., :512], lens, False, None)
    # The whole rows, values their first 512 columns ...
    whole = flashjit.mla_decode(q, None, pages, None, head_dim_v=512, page_table=table, cache_seqlens=seqlens)
    assert rel_error(whole, want) < 1e-2, f"seed {seed}"
    # ... or views of the one buffer as nope and rope parts.
    views = flashjit.mla_decode(q[..., :512], q[..., 512:], pages[..., :512], pages[..., 512:], page_table=table,
                                cache_seqlens=seqlens)
    assert rel_error(views, want) < 1e-2, f"seed {seed}"


@pytest.mark.parametrize("heads, tokens, causal", [(16, 1, False), (128, 2, True)])
def test_fp8_cache_with_per_token_scales_matches_fp64(seed, heads, tokens, causal):
    """e4m3 nope columns with one fp32 scale per cached token (k_scale [batch, 1, positions]),
    q quantised per (token, head), the rope parts bf16: against fp64 on the dequantised values."""
    lens = [0, 33, 5000]
    batch, longest = len(lens), max(lens)
    f8 = torch.float8_e4m3fn
    ckv = torch.randn(batch, longest, 1, 512, device=DEV) * 3
    k_scale = ckv.abs().amax(-1).clamp(min=1e-6) / 448                          # [B, S, 1]
    ckv8 = (ckv / k_scale[..., None]).to(f8)
    q = torch.randn(batch, tokens, heads, 512, device=DEV)
    q_scale = q.abs().amax(-1).clamp(min=1e-6) / 448                            # [B, T, H]
    q8 = (q / q_scale[..., None]).to(f8)
    q_pe = torch.randn(batch, tokens, heads, 64, dtype=torch.bfloat16, device=DEV)
    kpe = torch.randn(batch, longest, 1, 64, dtype=torch.bfloat16, device=DEV)
    ckv_pages, kpe_pages, table = paged_cache(ckv8, kpe, lens, 64)
    seqlens = torch.tensor(lens, dtype=torch.int32, device=DEV)
    o, lse = flashjit.mla_decode(q8, q_pe, ckv_pages, kpe_pages, page_table=table, cache_seqlens=seqlens,
                                 causal=causal, return_lse=True, q_scale=q_scale.permute(0, 2, 1).contiguous(),
                                 k_scale=k_scale.permute(0, 2, 1).contiguous())
    assert o.dtype == torch.bfloat16 and o.shape == (batch, tokens, heads, 512)
    ckv_deq = ckv8.double() * k_scale[..., None].double()
    q_deq = q8.double() * q_scale[..., None].double()
    want_o, want_lse = reference(torch.cat([q_deq, q_pe.double()], -1), torch.cat([ckv_deq, kpe.double()], -1),
                                 ckv_deq, lens, causal, None, scale=576 ** -0.5)
    assert rel_error(o, want_o) < 3e-2, f"seed {seed}: {rel_error(o, want_o):.3e}"
    finite = torch.isfinite(want_lse)
    assert torch.equal(torch.isfinite(lse), finite), f"seed {seed}"
    assert (lse[finite].double() - want_lse[finite]).abs().max().item() < 1e-2, f"seed {seed}"


@pytest.mark.parametrize("heads, tokens, page, fp8", [(16, 200, 64, False), (128, 40, 16, False), (16, 96, 64, True)])
def test_prefill_chunk_against_the_cache_matches_fp64(seed, heads, tokens, page, fp8):
    """Absorbed MLA prefill: a chunk of `tokens` queries whose keys are already the last ones of
    the cache, causal (bottom-right), and a sequence whose cache is shorter than the chunk."""
    lens = [tokens + 700, 3 * tokens, tokens // 2]
    batch, longest = len(lens), max(lens)
    q = torch.randn(batch, tokens, heads, 512, device=DEV)
    q_pe = torch.randn(batch, tokens, heads, 64, dtype=torch.bfloat16, device=DEV)
    ckv = torch.randn(batch, longest, 1, 512, device=DEV)
    kpe = torch.randn(batch, longest, 1, 64, dtype=torch.bfloat16, device=DEV)
    kwargs = {}
    if fp8:
        f8 = torch.float8_e4m3fn
        k_scale = ckv.abs().amax(-1).clamp(min=1e-6) / 448
        q_scale = q.abs().amax(-1).clamp(min=1e-6) / 448
        ckv, q = (ckv / k_scale[..., None]).to(f8), (q / q_scale[..., None]).to(f8)
        kwargs = {"q_scale": q_scale.permute(0, 2, 1).contiguous(), "k_scale": k_scale.permute(0, 2, 1).contiguous()}
        ckv_ref, q_ref = ckv.double() * k_scale[..., None].double(), q.double() * q_scale[..., None].double()
    else:
        ckv, q = ckv.to(torch.bfloat16), q.to(torch.bfloat16)
        ckv_ref, q_ref = ckv.double(), q.double()
    ckv_pages, kpe_pages, table = paged_cache(ckv, kpe, lens, page)
    seqlens = torch.tensor(lens, dtype=torch.int32, device=DEV)
    o, lse = flashjit.mla_decode(q, q_pe, ckv_pages, kpe_pages, page_table=table, cache_seqlens=seqlens, causal=True,
                                 return_lse=True, **kwargs)
    assert o.shape == (batch, tokens, heads, 512)
    want_o, want_lse = reference(torch.cat([q_ref, q_pe.double()], -1), torch.cat([ckv_ref, kpe.double()], -1),
                                 ckv_ref, lens, True, None, scale=576 ** -0.5)
    assert rel_error(o, want_o) < (3e-2 if fp8 else 1e-2), f"seed {seed}: {rel_error(o, want_o):.3e}"
    finite = torch.isfinite(want_lse)
    assert torch.equal(torch.isfinite(lse), finite), f"seed {seed}"
    assert (lse[finite].double() - want_lse[finite]).abs().max().item() < 1e-2, f"seed {seed}"


def test_bf16_q_beside_an_fp8_cache_matches_fp64(seed):
    """FlashMLA's fp8 decode: q bf16 (not quantised), the cache e4m3 with per-token scales."""
    lens = [4000, 70]
    batch, longest, heads = len(lens), max(lens), 64
    ckv = torch.randn(batch, longest, 1, 512, device=DEV)
    k_scale = ckv.abs().amax(-1).clamp(min=1e-6) / 448
    ckv8 = (ckv / k_scale[..., None]).to(torch.float8_e4m3fn)
    q = torch.randn(batch, 1, heads, 512, dtype=torch.bfloat16, device=DEV)
    q_pe = torch.randn(batch, 1, heads, 64, dtype=torch.bfloat16, device=DEV)
    kpe = torch.randn(batch, longest, 1, 64, dtype=torch.bfloat16, device=DEV)
    ckv_pages, kpe_pages, table = paged_cache(ckv8, kpe, lens, 64)
    seqlens = torch.tensor(lens, dtype=torch.int32, device=DEV)
    o = flashjit.mla_decode(q, q_pe, ckv_pages, kpe_pages, page_table=table, cache_seqlens=seqlens,
                            k_scale=k_scale.permute(0, 2, 1).contiguous())
    assert o.dtype == torch.bfloat16
    ckv_deq = ckv8.double() * k_scale[..., None].double()
    want, _ = reference(torch.cat([q, q_pe], -1), torch.cat([ckv_deq, kpe.double()], -1), ckv_deq, lens, False, None,
                        scale=576 ** -0.5)
    assert rel_error(o, want) < 3e-2, f"seed {seed}: {rel_error(o, want):.3e}"


@pytest.mark.parametrize("heads, tokens, causal", [(16, 1, False), (128, 2, True)])
def test_flashmla_fp8_rows_as_views_match_fp64(seed, heads, tokens, causal):
    """FlashMLA's fp8 latent cache: each 656-byte row holds 512 e4m3 nope values, four fp32 scales
    (one per 128 columns) and 64 bf16 rope values, read through three views of the one buffer
    (scale_layout "cache", k_scale [pages, page_size, 1, 4]); q bf16."""
    lens = [3000, 1, 700]
    batch, longest = len(lens), max(lens)
    # Blocks of very different magnitudes, so one scale per row would not reproduce them.
    spread = torch.rand(batch, longest, 1, 4, 1, device=DEV) * 8 + 0.01
    blocks = torch.randn(batch, longest, 1, 4, 128, device=DEV) * spread
    scale = blocks.abs().amax(-1).clamp(min=1e-6) / 448                        # [B, S, 1, 4]
    nope8 = (blocks / scale[..., None]).to(torch.float8_e4m3fn).flatten(-2)    # [B, S, 1, 512]
    kpe = torch.randn(batch, longest, 1, 64, dtype=torch.bfloat16, device=DEV)
    rows = torch.cat([nope8.view(torch.uint8), scale.contiguous().view(torch.uint8), kpe.view(torch.uint8)], -1)
    assert rows.shape[-1] == 656
    pages, _, table = paged_cache(rows, rows[..., :8], lens, 64)
    nope_pages = pages[..., :512].view(torch.float8_e4m3fn)
    scale_pages = pages[..., 512:528].view(torch.float32)
    rope_pages = pages[..., 528:].view(torch.bfloat16)
    q = torch.randn(batch, tokens, heads, 512, dtype=torch.bfloat16, device=DEV)
    q_pe = torch.randn(batch, tokens, heads, 64, dtype=torch.bfloat16, device=DEV)
    seqlens = torch.tensor(lens, dtype=torch.int32, device=DEV)
    o, lse = flashjit.mla_decode(q, q_pe, nope_pages, rope_pages, page_table=table, cache_seqlens=seqlens,
                                 causal=causal, return_lse=True, k_scale=scale_pages, scale_layout="cache")
    assert o.dtype == torch.bfloat16 and o.shape == (batch, tokens, heads, 512)
    ckv_deq = (nope8.double().unflatten(-1, (4, 128)) * scale[..., None].double()).flatten(-2)
    want_o, want_lse = reference(torch.cat([q, q_pe], -1), torch.cat([ckv_deq, kpe.double()], -1), ckv_deq, lens,
                                 causal, None, scale=576 ** -0.5)
    assert rel_error(o, want_o) < 3e-2, f"seed {seed}: {rel_error(o, want_o):.3e}"
    finite = torch.isfinite(want_lse)
    assert torch.equal(torch.isfinite(lse), finite), f"seed {seed}"
    assert (lse[finite].double() - want_lse[finite]).abs().max().item() < 1e-2, f"seed {seed}"
    # A block count that leaves a block of fewer than 128 columns is named.
    with pytest.raises(flashjit.ArgumentError, match="scales per key row"):
        flashjit.mla_decode(q, q_pe, nope_pages, rope_pages, page_table=table, cache_seqlens=seqlens,
                            k_scale=pages[..., 512:544].view(torch.float32), scale_layout="cache")


def test_fp8_cache_rope_parts_are_16_bit():
    f8 = torch.float8_e4m3fn
    q = torch.randn(1, 1, 16, 512, device=DEV).to(f8)
    kv = torch.randn(1, 128, 1, 512, device=DEV).to(f8)
    with pytest.raises(flashjit.ArgumentError, match="rope part is bfloat16 or float16"):
        flashjit.mla_decode(q, torch.randn(1, 1, 16, 64, device=DEV).to(f8), kv,
                            torch.randn(1, 128, 1, 64, device=DEV).to(f8))
    with pytest.raises(flashjit.ArgumentError, match="the rope parts have one dtype"):
        flashjit.mla_decode(q, torch.randn(1, 1, 16, 64, dtype=torch.float16, device=DEV), kv,
                            torch.randn(1, 128, 1, 64, dtype=torch.bfloat16, device=DEV))


def test_mismatched_rope_parts_are_named():
    q = torch.randn(1, 1, 16, 512, dtype=torch.bfloat16, device=DEV)
    kv = torch.randn(1, 128, 1, 512, dtype=torch.bfloat16, device=DEV)
    with pytest.raises(flashjit.ArgumentError, match="q_rope and k_rope_cache come together"):
        flashjit.mla_decode(q, torch.randn(1, 1, 16, 64, dtype=torch.bfloat16, device=DEV), kv, None)
    with pytest.raises(flashjit.ArgumentError, match="k_rope_cache has shape"):
        flashjit.mla_decode(q, torch.randn(1, 1, 16, 64, dtype=torch.bfloat16, device=DEV), kv,
                            torch.randn(1, 64, 1, 64, dtype=torch.bfloat16, device=DEV))
    with pytest.raises(flashjit.ArgumentError, match="head_dim_v = 600"):
        flashjit.mla_decode(q, None, kv, None, head_dim_v=600)

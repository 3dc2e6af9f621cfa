"""flashjit.mla_decode on a GPU against an fp64 reference: DeepSeek's latent cache (512 nope + 64
rope columns, V the first 512) paged as FlashInfer keeps it (ckv and kpe apart) and as FlashMLA
does (one 576-column buffer), 16 and 128 heads, causal steps of two tokens, the LSE, and the
errors for mismatched rope parts. Skipped without torch or a GPU."""

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

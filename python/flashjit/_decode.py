"""flashjit.decode on torch tensors, and the flashjit::decode custom op: a few query tokens per
sequence against a KV cache, contiguous or paged (the decode family, docs/decode.md);
flashjit.mla_decode against a shared K/V latent cache (MLA) through the same op.

As flashjit.attention: a direct path keyed on the call's signature, and a custom op with a fake
implementation for torch.compile. The splits' workspace comes from torch's allocator (on the
current stream, so it is reused only by later work there; inside a CUDA-graph capture it comes
from the graph's pool and lives as long as the output).
"""

import os
from collections.abc import Mapping
from typing import Any, Optional, Tuple, Union

import torch

from . import _core, _ops
from ._core import ArgumentError, Config
from ._torch import (
    _DTYPE_NAMES,
    _FLOAT32,
    _INT32,
    _NO_SCALES,
    _config_key,
    _config_text,
    _device_arch,
    _dtypes,
    _dtypes_fit,
    _empty,
    _grad_enabled,
    _is_compiling,
    _length,
    _mask,
    _merged,
    _pinned,
    _raw_stream,
    _scales_of_shapes,
    _signature,
)

_UINT8 = torch.uint8
_MAX_PLANS = 4096
_plans: dict = {}
_MAX_TOKENS = 64  # tuning.max_seqlen_q the decode family takes
_MAX_LATENT_TOKENS = 16384  # with a latent cache (shared K/V): whole chunks of a prefill


def _fail(message: str):
    raise ArgumentError("flashjit.decode: " + message)


def _tokens_bound(seqlen_q: int, most: int = _MAX_TOKENS) -> int:
    """The kernel's max_seqlen_q for a call: the next power of two, so steps of 3 and 4 tokens
    share one kernel."""
    bound = 1
    while bound < seqlen_q:
        bound *= 2
    return min(bound, most)


class _Layout:
    __slots__ = ("varlen", "paged", "batch", "seqlen_q", "seqlen_k", "heads_q", "heads_k", "total_q", "dim",
                 "dim_v", "page_size", "num_pages", "max_pages", "page_stride", "q", "k", "v", "o_shape",
                 "lse_shape")


def _int32_vector(name, t, length, device):
    if t.dim() != 1 or t.dtype != _INT32 or t.stride(0) != 1 or t.shape[0] != length:
        _fail(f"{name} must be a contiguous 1-D int32 tensor of {length} entries (got shape {tuple(t.shape)}, "
              f"{t.dtype})")
    if t.device != device:
        _fail(f"{name} is on {t.device}, q on {device}")


def _layout(q, k, v, cache_seqlens, page_table, cu_seqlens_q, max_seqlen_q, max_seqlen_k,
            max_tokens=_MAX_TOKENS) -> _Layout:
    """Checks the tensors against each other from their metadata alone (so fake tensors do too)."""
    lay = _Layout()
    lay.varlen = cu_seqlens_q is not None
    lay.paged = page_table is not None
    for name, t in (("k_cache", k), ("v_cache", v)):
        if t.dim() != 4:
            _fail(f"{name} has shape {tuple(t.shape)}: expected [num_pages, page_size, heads_k, dim] (paged) "
                  "or [batch, seqlen_k, heads_k, dim]")
        if t.stride(-1) != 1:
            _fail(f"{name}'s last (head-dim) axis must be contiguous; its strides are {tuple(t.stride())}")
        if t.device != q.device:
            _fail(f"{name} is on {t.device}, q on {q.device}")
    if q.stride(-1) != 1:
        _fail(f"q's last (head-dim) axis must be contiguous; its strides are {tuple(q.stride())}")
    if not _dtypes_fit(q, k, v):
        _fail(f"q, k_cache and v_cache must share one dtype: bfloat16, float16, float8_e4m3fn or float8_e5m2, "
              f"or q bfloat16 / float16 beside an fp8 cache (got {q.dtype}, {k.dtype}, {v.dtype})")
    if tuple(v.shape[:3]) != tuple(k.shape[:3]):
        _fail(f"v_cache {tuple(v.shape)} must match k_cache {tuple(k.shape)} in every axis but the last")
    if lay.varlen:
        if q.dim() != 3:
            _fail(f"q has shape {tuple(q.shape)}: ragged queries (cu_seqlens_q) are packed [total_q, heads_q, dim]")
        if not lay.paged:
            _fail("ragged queries (cu_seqlens_q) need a paged cache (page_table): a contiguous cache holds one "
                  "row of keys per batch entry (use flashjit.attention for ragged keys)")
        if max_seqlen_q is None:
            _fail("ragged queries need max_seqlen_q, the most tokens of a sequence (reading it from cu_seqlens_q "
                  "would synchronise with the GPU)")
        lay.batch = cu_seqlens_q.shape[0] - 1
        _int32_vector("cu_seqlens_q", cu_seqlens_q, lay.batch + 1, q.device)
        lay.total_q, lay.heads_q, lay.dim = q.shape
        lay.seqlen_q = int(max_seqlen_q)
        lay.q = (0, q.stride(0), q.stride(1))
    else:
        if q.dim() != 4:
            _fail(f"q has shape {tuple(q.shape)}: expected [batch, seqlen_q, heads_q, dim]")
        lay.batch, lay.seqlen_q, lay.heads_q, lay.dim = q.shape
        lay.total_q = 0
        lay.q = tuple(q.stride()[:3])
    if lay.batch < 1:
        _fail("the batch is empty")
    lay.heads_k, lay.dim_v = k.shape[2], v.shape[3]
    if k.shape[3] != lay.dim:
        _fail(f"q and k_cache head dims differ: {lay.dim} and {k.shape[3]}")
    if lay.heads_k < 1 or lay.heads_q % lay.heads_k:
        _fail(f"q has {lay.heads_q} heads, the cache {lay.heads_k}: the query heads must be a multiple of the KV heads")
    if lay.paged:
        lay.num_pages, lay.page_size = k.shape[0], k.shape[1]
        if lay.page_size < 1 or lay.page_size > 256 or lay.page_size & (lay.page_size - 1):
            _fail(f"k_cache pages hold {lay.page_size} rows: page sizes are powers of two from 1 to 256")
        if page_table.dim() != 2 or page_table.dtype != _INT32 or page_table.shape[0] != lay.batch:
            _fail(f"page_table must be int32 [batch = {lay.batch}, max_pages] (got shape {tuple(page_table.shape)}, "
                  f"{page_table.dtype})")
        if page_table.stride(1) != 1:
            _fail(f"page_table's rows must be contiguous; its strides are {tuple(page_table.stride())}")
        if page_table.device != q.device:
            _fail(f"page_table is on {page_table.device}, q on {q.device}")
        if cache_seqlens is None:
            _fail("a paged cache needs cache_seqlens, each sequence's number of cached keys")
        lay.max_pages, lay.page_stride = page_table.shape[1], page_table.stride(0)
        lay.seqlen_k = lay.max_pages * lay.page_size if max_seqlen_k is None else int(max_seqlen_k)
        if lay.seqlen_k > lay.max_pages * lay.page_size:
            _fail(f"max_seqlen_k = {lay.seqlen_k} is more than the page table holds ({lay.max_pages} pages of "
                  f"{lay.page_size})")
    else:
        if k.shape[0] != lay.batch:
            _fail(f"k_cache holds {k.shape[0]} sequences, q {lay.batch}")
        lay.page_size = lay.num_pages = lay.max_pages = 0
        lay.page_stride = -1
        lay.seqlen_k = k.shape[1] if max_seqlen_k is None else int(max_seqlen_k)
        if lay.seqlen_k > k.shape[1]:
            _fail(f"max_seqlen_k = {lay.seqlen_k} is more than the cache holds ({k.shape[1]})")
    if cache_seqlens is not None:
        _int32_vector("cache_seqlens", cache_seqlens, lay.batch, q.device)
    if lay.seqlen_q < 0 or lay.seqlen_q > max_tokens:
        _fail(f"{lay.seqlen_q} query tokens per sequence: decode takes 0 to {_MAX_TOKENS} (use flashjit.attention "
              f"for prefill; mla_decode takes chunks of 0 to {_MAX_LATENT_TOKENS})")
    lay.k, lay.v = tuple(k.stride()[:3]), tuple(v.stride()[:3])
    hq, dv = lay.heads_q, lay.dim_v
    if lay.varlen:
        lay.o_shape, lay.lse_shape = (lay.total_q, hq, dv), (hq, lay.total_q)
    else:
        lay.o_shape, lay.lse_shape = (lay.batch, lay.seqlen_q, hq, dv), (lay.batch, hq, lay.seqlen_q)
    return lay


def _scales(lay: _Layout, q_scale, k_scale, v_scale, device, token_layout="positions", k=None):
    """The config's scales, dtype.scale, the per-token scales' strides, and (token_layout "cache")
    K's and V's row strides and K's block stride: (names, dtype, q strides, k strides, v strides,
    k row, v row, k block).
    Per-token Q scales follow q ([batch, heads_q, seqlen_q], ragged [heads_q, total_q]); per-token
    K and V scales are indexed by each key's position in its sequence: [batch, heads_k, positions],
    positions covering every sequence's cached keys (the kernel reads positions below each cache
    length), or with token_layout "cache" lie like the cache's rows: k_cache.shape[:3]
    ([num_pages, page_size, heads_k] or [batch, seqlen_k, heads_k]); K's may add a last dimension
    of blocks, one scale per k_cache.shape[-1] / blocks columns (scales.k_block)."""
    if token_layout not in ("positions", "cache"):
        _fail(f"scale_layout = {token_layout!r}: 'positions' or 'cache'")
    q_shape = (lay.heads_q, lay.total_q) if lay.varlen else (lay.batch, lay.heads_q, lay.seqlen_q)
    if token_layout == "positions":
        per_key = next((t for t in (k_scale, v_scale) if t is not None and t.dim() == 3), None)
        positions = per_key.shape[-1] if per_key is not None else lay.seqlen_k
        return _scales_of_shapes((q_scale, k_scale, v_scale), (lay.heads_q, lay.heads_k),
                                 (q_shape, (lay.batch, lay.heads_k, positions)), (lay.varlen, False), device,
                                 fail=_fail) + (None, None, None)
    rows = tuple(k.shape[:3])
    blocked = k_scale is not None and k_scale.dim() == 4  # per-block K scales: a last dimension of blocks
    if blocked:
        blocks = k_scale.shape[3]
        if blocks < 1 or k.shape[-1] % blocks or (k.shape[-1] // blocks) % 128:
            _fail(f"k_scale has {blocks} scales per key row: each must cover a multiple of 128 of "
                  f"kv_cache's {k.shape[-1]} columns")
        k_block, block_stride = k.shape[-1] // blocks, k_scale.stride(3)
        k_scale = k_scale.select(3, 0)  # its rows, checked like per-token scales
    in_cache = [t is not None and t.dim() == 3 for t in (k_scale, v_scale)]
    if not any(in_cache):
        _fail(f"scale_layout 'cache' takes a per-token k_scale or v_scale shaped like the cache's rows {rows}")
    for name, t, cached in (("k_scale", k_scale, in_cache[0]), ("v_scale", v_scale, in_cache[1])):
        if cached and (tuple(t.shape) != rows or t.dtype not in (_FLOAT32, torch.bfloat16) or t.device != device
                       or t.stride(2) < 0):
            _fail(f"scale_layout 'cache' takes per-token {name} shaped like the cache's rows {rows}, float32 or "
                  f"bfloat16, on {device} (got {tuple(t.shape)}, {t.dtype}, on {t.device})")
    names, dtype, q_strides, _, _ = _scales_of_shapes(
        (q_scale, None if in_cache[0] else k_scale, None if in_cache[1] else v_scale), (lay.heads_q, lay.heads_k),
        (q_shape, ()), (lay.varlen, False), device, fail=_fail)
    kinds = {dtype} if dtype else set()
    for t in (t for t, cached in zip((k_scale, v_scale), in_cache) if cached):
        kinds.add("fp32" if t.dtype == _FLOAT32 else "bf16")
    if len(kinds) > 1:
        _fail("per-token q_scale, k_scale and v_scale must share one dtype")
    strides = [((t.stride(0), t.stride(2)), t.stride(1)) if cached else (None, None)
               for t, cached in zip((k_scale, v_scale), in_cache)]
    names = {**names, "token_layout": "cache"}
    if in_cache[0]:
        names["k"] = "per_token"
    if in_cache[1]:
        names["v"] = "per_token"
    if blocked:
        names["k_block"] = k_block
    return (names, kinds.pop(), q_strides, strides[0][0], strides[1][0], strides[0][1], strides[1][1],
            block_stride if blocked else None)


def _out_dtype(dtype):
    """fp8 inputs write bfloat16 unless `out` says otherwise; 16-bit inputs their own type."""
    return dtype if dtype in _DTYPE_NAMES else torch.bfloat16


def _problem(lay: _Layout, dtype, out_dtype, mask: str, return_lse: bool, scales=_NO_SCALES, rope_dim=0,
             shared_kv=False, rope_dtype=None, q_dtype=None) -> dict:
    """`dtype` is the cache's; `q_dtype` q's where it differs (a 16-bit q beside an fp8 cache)."""
    kv_layout = {"paged": lay.paged, "page_size": lay.page_size}
    if shared_kv:
        kv_layout["shared_kv"] = True
    return {
        "dtype": _dtypes(dtype, out_dtype, rope_dtype if rope_dim else None, scales[1], q_dtype),
        "scales": scales[0],
        "head_dim": {"qk": lay.dim + rope_dim, "v": lay.dim_v, "rope": rope_dim},
        "group": lay.heads_q // lay.heads_k,
        "mask": mask,
        "varlen": lay.varlen,
        "kv_layout": kv_layout,
        "outputs": {"lse": bool(return_lse)},
    }


def _rope_layout(lay: _Layout, q, q_rope, k, k_rope):
    """A latent cache's rope parts: q_rope beside q and k_rope beside k_cache in every axis but
    the last, in the cache's dtype (an fp8 cache's: bfloat16 or float16, both alike). Returns
    (rope dim, q_rope strides, k_rope strides)."""
    if (q_rope is None) != (k_rope is None):
        _fail("q_rope and k_rope_cache come together (or neither: the rope columns inside q and kv_cache)")
    if q_rope is None:
        return 0, None, None
    fp8 = k.dtype not in _DTYPE_NAMES
    for name, t, like in (("q_rope", q_rope, q), ("k_rope_cache", k_rope, k)):
        if t.dim() != like.dim() or tuple(t.shape[:-1]) != tuple(like.shape[:-1]):
            _fail(f"{name} has shape {tuple(t.shape)}: it must match {tuple(like.shape)} in every axis but the last")
        if fp8 and t.dtype not in _DTYPE_NAMES:
            _fail(f"{name} is {t.dtype}: an fp8 latent cache's rope part is bfloat16 or float16")
        if not fp8 and t.dtype != q.dtype:
            _fail(f"{name} is {t.dtype}, q {q.dtype}: the rope part has the latent cache's dtype")
        if t.stride(-1) != 1:
            _fail(f"{name}'s last axis must be contiguous; its strides are {tuple(t.stride())}")
        if t.device != q.device:
            _fail(f"{name} is on {t.device}, q on {q.device}")
    if q_rope.dtype != k_rope.dtype:
        _fail(f"q_rope is {q_rope.dtype}, k_rope_cache {k_rope.dtype}: the rope parts have one dtype")
    if q_rope.shape[-1] != k_rope.shape[-1]:
        _fail(f"q_rope and k_rope_cache rope dims differ: {q_rope.shape[-1]} and {k_rope.shape[-1]}")
    q_strides = (0, q_rope.stride(0), q_rope.stride(1)) if lay.varlen else tuple(q_rope.stride()[:3])
    return q_rope.shape[-1], q_strides, tuple(k_rope.stride()[:3])


class _Plan:
    __slots__ = ("launch", "device", "index", "o_shape", "o_dtype", "lse_shape", "workspace")


def _make_plan(q, k, v, cache_seqlens, page_table, causal, window, softmax_scale, cu_seqlens_q, max_seqlen_q,
               max_seqlen_k, num_splits, return_lse, out, config_key, q_scale, k_scale, v_scale, q_rope=None,
               k_rope=None, shared_kv=False, scale_layout="positions") -> _Plan:
    if not (q.is_cuda and k.is_cuda and v.is_cuda):
        _fail(f"q, k_cache and v_cache must be CUDA tensors (got {q.device}, {k.device}, {v.device})")
    lay = _layout(q, k, v, cache_seqlens, page_table, cu_seqlens_q, max_seqlen_q, max_seqlen_k,
                  _MAX_LATENT_TOKENS if shared_kv else _MAX_TOKENS)
    rope_dim, q_rope_strides, k_rope_strides = _rope_layout(lay, q, q_rope, k, k_rope)
    mask, left, right = _mask(causal, window)
    plan = _Plan()
    plan.device, plan.index = q.device, q.device.index
    plan.o_shape, plan.o_dtype = lay.o_shape, _out_dtype(q.dtype)
    if out is not None:
        if tuple(out.shape) != lay.o_shape or out.dtype not in _DTYPE_NAMES or out.device != q.device:
            _fail(f"out must be a bfloat16 or float16 tensor of shape {lay.o_shape} on {q.device} "
                  f"(got {tuple(out.shape)} {out.dtype} on {out.device})")
        if not out.is_contiguous():
            _fail(f"out must be contiguous; its strides are {tuple(out.stride())}")
        plan.o_dtype = out.dtype
    plan.lse_shape = lay.lse_shape if return_lse else None
    scales = _scales(lay, q_scale, k_scale, v_scale, q.device, scale_layout, k)
    problem = _problem(lay, k.dtype, plan.o_dtype, mask, return_lse, scales, rope_dim, shared_kv,
                       None if q_rope is None else q_rope.dtype, q.dtype)
    pinned = _pinned(config_key)
    config = _merged(problem, pinned, _device_arch(q.device) if pinned is not None else "native")
    tuning = dict(config.to_dict().get("tuning") or {})
    tuning.setdefault("family", "decode")
    tuning.setdefault("max_seqlen_q", _tokens_bound(max(1, lay.seqlen_q), _MAX_LATENT_TOKENS if shared_kv else _MAX_TOKENS))
    config = Config({**config.to_dict(), "tuning": tuning})
    kernel = _core.load_kernel(config, max(1, lay.seqlen_k), plan.index)
    hq, dv = lay.heads_q, lay.dim_v
    o_strides = (0, hq * dv, dv) if lay.varlen else (lay.seqlen_q * hq * dv, hq * dv, dv)
    lse_strides = None
    plan.launch = _core.LaunchPlan(
        kernel, lay.q, lay.k, lay.v, o_strides, q_rope_strides, k_rope_strides, lse_strides,
        batch=lay.batch, seqlen_q=lay.seqlen_q, seqlen_k=lay.seqlen_k, heads_q=hq, heads_k=lay.heads_k,
        total_q=lay.total_q, total_k=0, softmax_scale=float(softmax_scale or 0.0), window_left=left,
        window_right=right, num_pages=lay.num_pages, max_pages=lay.max_pages, page_table_stride=lay.page_stride,
        num_splits=int(num_splits), q_scale_strides=scales[2], k_scale_strides=scales[3], v_scale_strides=scales[4],
        k_scale_row_stride=scales[5], v_scale_row_stride=scales[6], k_scale_block_stride=scales[7])
    # The splits' scratch depends on the signature only: sized once, with this call's tensors.
    o_probe = _empty(plan.o_shape, dtype=plan.o_dtype, device=plan.device) if out is None else out
    plan.workspace = plan.launch.workspace_bytes(
        q.data_ptr(), k.data_ptr(), v.data_ptr(), o_probe.data_ptr(),
        _empty(1, dtype=_FLOAT32, device=plan.device).data_ptr() if return_lse else 0,
        0 if cu_seqlens_q is None else cu_seqlens_q.data_ptr(),
        0 if page_table is None else page_table.data_ptr(),
        0 if cache_seqlens is None else cache_seqlens.data_ptr(), *_scale_ptrs(q_scale, k_scale, v_scale),
        *_scale_ptrs(q_rope, k_rope))
    return plan


def _scale_ptrs(*tensors):
    """Data pointers of optional tensors (scales, rope parts): 0 for an absent one."""
    return tuple(0 if t is None else t.data_ptr() for t in tensors)


def _run(plan: _Plan, q, k, v, cache_seqlens, page_table, cu_seqlens_q, out, return_lse, q_scale, k_scale,
         v_scale, q_rope=None, k_rope=None):
    o = out if out is not None else _empty(plan.o_shape, dtype=plan.o_dtype, device=plan.device)
    lse = None if plan.lse_shape is None else _empty(plan.lse_shape, dtype=_FLOAT32, device=plan.device)
    ws = 0
    if plan.workspace:
        scratch = _empty(plan.workspace, dtype=_UINT8, device=plan.device)
        o._flashjit_workspace = scratch  # a captured graph's replays keep using it
        ws = scratch.data_ptr()
    plan.launch.launch(
        _raw_stream(plan.index), q.data_ptr(), k.data_ptr(), v.data_ptr(), o.data_ptr(), *_scale_ptrs(q_rope, k_rope),
        0 if lse is None else lse.data_ptr(), 0 if cu_seqlens_q is None else cu_seqlens_q.data_ptr(), 0, 0,
        0 if page_table is None else page_table.data_ptr(), 0 if cache_seqlens is None else cache_seqlens.data_ptr(),
        ws, plan.workspace, *_scale_ptrs(q_scale, k_scale, v_scale))
    return (o, lse) if return_lse else o


def _decode(q, k, v, cache_seqlens, page_table, causal, window, softmax_scale, cu_seqlens_q, max_seqlen_q,
            max_seqlen_k, num_splits, return_lse, out, config_key, q_scale=None, k_scale=None, v_scale=None,
            q_rope=None, k_rope=None, shared_kv=False, scale_layout="positions"):
    key = (q.shape, q.stride(), k.shape, k.stride(), v.shape, v.stride(), q.dtype, k.dtype, q.get_device(),
           _signature(cache_seqlens), _signature(page_table), _signature(cu_seqlens_q), causal, window,
           softmax_scale, max_seqlen_q, max_seqlen_k, num_splits, return_lse, _signature(out), config_key,
           _signature(q_scale), _signature(k_scale), _signature(v_scale), _signature(q_rope), _signature(k_rope),
           shared_kv, scale_layout)
    plan = _plans.get(key)
    if plan is None:
        plan = _make_plan(q, k, v, cache_seqlens, page_table, causal, window, softmax_scale, cu_seqlens_q,
                          max_seqlen_q, max_seqlen_k, num_splits, return_lse, out, config_key, q_scale, k_scale,
                          v_scale, q_rope, k_rope, shared_kv, scale_layout)
        if len(_plans) >= _MAX_PLANS:
            _plans.clear()
        _plans[key] = plan
    return _run(plan, q, k, v, cache_seqlens, page_table, cu_seqlens_q, out, return_lse, q_scale, k_scale, v_scale,
                q_rope, k_rope)


# ---- the custom op --------------------------------------------------------------------------------


def _decode_op(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    cache_seqlens: Optional[torch.Tensor],
    page_table: Optional[torch.Tensor],
    cu_seqlens_q: Optional[torch.Tensor],
    max_seqlen_q: int,
    max_seqlen_k: int,
    causal: bool,
    window_left: int,
    window_right: int,
    softmax_scale: float,
    num_splits: int,
    return_lse: bool,
    config: Optional[str],
    q_scale: Optional[torch.Tensor] = None,
    k_scale: Optional[torch.Tensor] = None,
    v_scale: Optional[torch.Tensor] = None,
    q_rope: Optional[torch.Tensor] = None,
    k_rope: Optional[torch.Tensor] = None,
    shared_kv: bool = False,
    scale_layout: str = "positions",
) -> Tuple[torch.Tensor, torch.Tensor]:
    """flashjit.decode (and mla_decode: shared_kv, v_cache a view of k_cache's first columns) as an
    operator: (out, lse), lse empty unless return_lse; -1 for an absent length or window side,
    0.0 for the default scale, 0 splits for the kernel's choice."""
    result = _decode(q, k_cache, v_cache, cache_seqlens, page_table, causal, (window_left, window_right),
                     softmax_scale or None, cu_seqlens_q, _length(max_seqlen_q), _length(max_seqlen_k), num_splits,
                     return_lse, None, _config_key(config), q_scale, k_scale, v_scale, q_rope, k_rope, shared_kv,
                     scale_layout)
    return result if return_lse else (result, result.new_empty((0,), dtype=_FLOAT32))


def _decode_fake(q, k_cache, v_cache, cache_seqlens, page_table, cu_seqlens_q, max_seqlen_q, max_seqlen_k, causal,
                 window_left, window_right, softmax_scale, num_splits, return_lse, config, q_scale=None,
                 k_scale=None, v_scale=None, q_rope=None, k_rope=None, shared_kv=False, scale_layout="positions"):
    if q.device.type not in ("cuda", "meta"):
        _fail(f"q, k_cache and v_cache must be CUDA tensors (got {q.device})")
    lay = _layout(q, k_cache, v_cache, cache_seqlens, page_table, cu_seqlens_q,
                  _length(max_seqlen_q), _length(max_seqlen_k), _MAX_LATENT_TOKENS if shared_kv else _MAX_TOKENS)
    _rope_layout(lay, q, q_rope, k_cache, k_rope)
    _mask(causal, (window_left, window_right))
    _scales(lay, q_scale, k_scale, v_scale, q.device, scale_layout, k_cache)
    o = q.new_empty(lay.o_shape, dtype=_out_dtype(q.dtype))
    lse = q.new_empty(lay.lse_shape if return_lse else (0,), dtype=_FLOAT32)
    return o, lse


_ops.define("decode", _decode_op, _decode_fake, "flashjit.decode")


# ---- the public call ------------------------------------------------------------------------------


def decode(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    *,
    cache_seqlens: Optional[torch.Tensor] = None,
    page_table: Optional[torch.Tensor] = None,
    causal: bool = False,
    window: Optional[Tuple[int, int]] = None,
    softmax_scale: Optional[float] = None,
    cu_seqlens_q: Optional[torch.Tensor] = None,
    max_seqlen_q: Optional[int] = None,
    max_seqlen_k: Optional[int] = None,
    num_splits: int = 0,
    return_lse: bool = False,
    out: Optional[torch.Tensor] = None,
    config: Union[Config, Mapping[str, Any], str, "os.PathLike[str]", None] = None,
    q_scale: Optional[torch.Tensor] = None,
    k_scale: Optional[torch.Tensor] = None,
    v_scale: Optional[torch.Tensor] = None,
    scale_layout: str = "positions",
) -> Union[torch.Tensor, Tuple[torch.Tensor, torch.Tensor]]:
    """Attention of a decode step against a KV cache, on torch's current CUDA stream.

    Args:
        q: ``[batch, seqlen_q, heads_q, dim]`` (1 to 64 tokens per sequence; a step of several
            tokens is causal among itself with ``causal=True``), or ``[total_q, heads_q, dim]``
            packed rows of ragged steps (with ``cu_seqlens_q`` and a paged cache). bfloat16 or
            float16, or float8_e4m3fn / float8_e5m2 (an fp8 cache; q quantised the same way, with
            q_scale), or bfloat16 / float16 beside an fp8 cache (not quantised: no q_scale).
        k_cache, v_cache: the cache, in q's dtype (or fp8 beside a 16-bit q):
            ``[batch, seqlen_k, heads_k, dim]`` (any strides with a contiguous last axis), or with ``page_table`` paged ``[num_pages,
            page_size, heads_k, dim]`` (page sizes are powers of two up to 256); ``heads_q`` a
            multiple of ``heads_k``.
        cache_seqlens: int32 ``[batch]`` on the GPU: each sequence's cached keys (required with
            a paged cache; default: all of the contiguous cache).
        page_table: int32 ``[batch, max_pages]`` on the GPU: key j of sequence b is row
            ``j % page_size`` of page ``page_table[b, j // page_size]``. An entry outside the
            cache is never read; the rows it would feed come out NaN.
        causal, window, softmax_scale: as :func:`flashjit.attention` (bottom-right aligned:
            token t of a step of seqlen_q tokens sees keys up to ``cache_seqlens - seqlen_q + t``).
        cu_seqlens_q, max_seqlen_q: int32 ``[batch + 1]`` offsets of ragged steps, and the most
            tokens of one (required with cu_seqlens_q).
        max_seqlen_k: the longest cache length, if known (default: what the cache or the page
            table holds); sizes the split of the keys.
        num_splits: how many CTAs split each sequence's keys (0: chosen from the shape and the
            GPU's SM count).
        return_lse: also return the LSE, float32, ``[batch, heads_q, seqlen_q]`` (ragged:
            ``[heads_q, total_q]``).
        out: write the output here (contiguous, the result's shape, bfloat16 or float16).
        config: pin the decode kernel's tuning, as for :func:`flashjit.attention`.
        q_scale, k_scale, v_scale: dequantisation scales of fp8 inputs (the stored values times
            the scale are the inputs): one float32 (per tensor), float32 ``[heads]`` (per head:
            q's heads for q_scale, the KV heads for k/v), or per token float32 / bfloat16
            ``[batch, heads_q, seqlen_q]`` (ragged ``[heads_q, total_q]``) for q_scale and
            ``[batch, heads_k, positions]`` (each key's position in its sequence, paged or not;
            positions covering every sequence's cached keys) for k_scale and v_scale (one dtype
            for all per-token scales). fp8 outputs are bfloat16 unless ``out`` is float16.
        scale_layout: ``"positions"`` (above), or ``"cache"``: per-token k_scale and v_scale lie
            like the cache's rows, ``k_cache.shape[:3]`` (``[num_pages, page_size, heads_k]``
            paged, as engines keep scales beside their pages, or ``[batch, seqlen_k, heads_k]``),
            any strides.

    Returns:
        ``out`` ``[batch, seqlen_q, heads_q, dim_v]`` (or ``[total_q, heads_q, dim_v]``), or
        ``(out, lse)`` with ``return_lse``. Sequences without keys give zeros and an LSE of -inf.

    Nothing synchronises with the GPU; the splits' scratch comes from torch's allocator, so the
    call can be captured in a CUDA graph. Forward only.
    """
    return _call(q, k_cache, v_cache, cache_seqlens, page_table, causal, window, softmax_scale, cu_seqlens_q,
                 max_seqlen_q, max_seqlen_k, num_splits, return_lse, out, config, q_scale, k_scale, v_scale,
                 scale_layout=scale_layout)


def _call(q, k_cache, v_cache, cache_seqlens, page_table, causal, window, softmax_scale, cu_seqlens_q, max_seqlen_q,
          max_seqlen_k, num_splits, return_lse, out, config, q_scale=None, k_scale=None, v_scale=None, q_rope=None,
          k_rope=None, shared_kv=False, scale_layout="positions"):
    """The direct path, or the custom op (torch.compile, autograd, tensor subclasses, meta)."""
    tensors = tuple(t for t in (q, k_cache, v_cache, q_rope, k_rope) if t is not None)
    if (any(type(t) is not torch.Tensor for t in tensors) or not q.is_cuda or _is_compiling()
            or (_grad_enabled() and any(t.requires_grad for t in tensors))):
        left, right = (-1, -1) if window is None else (window[0], window[1])
        if isinstance(config, Config) and _is_compiling():
            raise TypeError("flashjit.decode under torch.compile: pass config as a dict, a path or JSON text")
        o, lse = torch.ops.flashjit.decode(
            q, k_cache, v_cache, cache_seqlens, page_table, cu_seqlens_q,
            -1 if max_seqlen_q is None else max_seqlen_q, -1 if max_seqlen_k is None else max_seqlen_k, causal,
            left, right, 0.0 if softmax_scale is None else float(softmax_scale), int(num_splits), return_lse,
            config if config is None or isinstance(config, str) else _config_text(config), q_scale, k_scale,
            v_scale, q_rope, k_rope, shared_kv, scale_layout)
        if out is not None:
            out.copy_(o)
            o = out
        return (o, lse) if return_lse else o
    if window is not None:
        window = tuple(window)
    return _decode(q, k_cache, v_cache, cache_seqlens, page_table, causal, window, softmax_scale, cu_seqlens_q,
                   max_seqlen_q, max_seqlen_k, num_splits, return_lse, out,
                   None if config is None else _config_key(config), q_scale, k_scale, v_scale, q_rope, k_rope,
                   shared_kv, scale_layout)


def mla_decode(
    q: torch.Tensor,
    q_rope: Optional[torch.Tensor],
    kv_cache: torch.Tensor,
    k_rope_cache: Optional[torch.Tensor],
    *,
    head_dim_v: Optional[int] = None,
    cache_seqlens: Optional[torch.Tensor] = None,
    page_table: Optional[torch.Tensor] = None,
    causal: bool = False,
    window: Optional[Tuple[int, int]] = None,
    softmax_scale: Optional[float] = None,
    cu_seqlens_q: Optional[torch.Tensor] = None,
    max_seqlen_q: Optional[int] = None,
    max_seqlen_k: Optional[int] = None,
    num_splits: int = 0,
    return_lse: bool = False,
    out: Optional[torch.Tensor] = None,
    config: Union[Config, Mapping[str, Any], str, "os.PathLike[str]", None] = None,
    q_scale: Optional[torch.Tensor] = None,
    k_scale: Optional[torch.Tensor] = None,
    scale_layout: str = "positions",
) -> Union[torch.Tensor, Tuple[torch.Tensor, torch.Tensor]]:
    """Attention of a decode step against a shared K/V latent cache (MLA, absorbed form): the
    keys are ``[kv_cache | k_rope_cache]`` rows and the values the first ``head_dim_v`` columns
    of ``kv_cache``, read once for both products (the config's ``kv_layout.shared_kv``).

    Args:
        q, q_rope: the step's queries, nope and rope columns: ``[batch, seqlen_q, heads_q, d]``
            and ``[..., d_rope]`` (or packed ``[total_q, heads_q, ...]`` with ``cu_seqlens_q``),
            bfloat16 or float16, or (an fp8 cache) q float8_e4m3fn / float8_e5m2 with q_scale, or
            bfloat16 / float16 without, beside a bfloat16 or float16 q_rope.
        kv_cache, k_rope_cache: the latent cache and its rope part, in q's and q_rope's dtypes:
            ``[num_pages, page_size, heads_k, d]`` and ``[..., d_rope]`` with ``page_table``
            (FlashInfer's ``ckv``/``kpe``), or ``[batch, seqlen_k, heads_k, ...]``. Views of one
            buffer (FlashMLA's 576-column rows: ``kv[..., :512]`` and ``kv[..., 512:]``) work, or
            pass ``q_rope = k_rope_cache = None`` and the whole rows with ``head_dim_v``.
        head_dim_v: the value columns, the first of each kv_cache row (default: all of them).
        seqlen_q: 1 to 16384 tokens per sequence: a decode step, or a chunk of a prefill (the
            absorbed form against the cache; with ``causal=True`` token t of a chunk of T sees
            the keys up to ``cache_seqlens - T + t``, the chunk's own keys already in the cache).
        q_scale, k_scale: an fp8 cache's dequantisation scales, as :func:`flashjit.decode`'s
            (k_scale per tensor, per head or per token ``[batch, heads_k, positions]``, or with
            ``scale_layout="cache"`` like kv_cache's rows, ``kv_cache.shape[:3]``, or
            ``kv_cache.shape[:3] + (blocks,)``: one scale per ``d / blocks`` columns, a multiple of
            128 (FlashMLA's fp8 rows, 512 e4m3 + 4 fp32 scales + 64 bf16 rope in 656 bytes, are
            three views of one buffer: docs/decode.md); the values take K's scales, and the rope
            parts are not scaled.
        The rest as :func:`flashjit.decode`; the output is ``[..., heads_q, head_dim_v]`` and
        ``softmax_scale`` defaults to 1/sqrt(d + d_rope).
    """
    dv = kv_cache.shape[-1] if head_dim_v is None else int(head_dim_v)
    if dv < 1 or dv > kv_cache.shape[-1]:
        _fail(f"head_dim_v = {dv}: the values are the first columns of kv_cache's {kv_cache.shape[-1]}")
    return _call(q, kv_cache, kv_cache[..., :dv], cache_seqlens, page_table, causal, window, softmax_scale,
                 cu_seqlens_q, max_seqlen_q, max_seqlen_k, num_splits, return_lse, out, config, q_scale, k_scale,
                 None, q_rope=q_rope, k_rope=k_rope_cache, shared_kv=True, scale_layout=scale_layout)

"""flashjit.attention on torch tensors, and the flashjit::attention custom op.

Two paths reach the same launch:

* the direct path (eager calls on plain CUDA tensors without autograd): the call's signature
  (shapes, strides, dtypes, devices, flags) keys a dict of launch plans, so a warm call is one
  lookup, torch's allocations for the outputs and one binding call with plain integers;
* the operator ``torch.ops.flashjit.attention`` (torch.compile tracing, fake/meta tensors,
  tensors that require grad): registered with a fake implementation (_ops.py), so
  ``torch.compile(..., fullgraph=True)`` traces it, and with an autograd formula that raises:
  flashjit is forward only.

Neither path synchronises with the GPU or allocates outside torch's allocator, so both can be
captured in a CUDA graph. Kernels that draw tiles from a device counter get one from torch when
the stream is capturing (outside capture the runtime keeps one per context and stream).
"""

import json
import os
import sys
from collections.abc import Mapping
from typing import Any, Optional, Tuple, Union

import torch

from . import _core, _ops
from ._core import ArgumentError, Config, load_config_file

_Tensor = torch.Tensor
_DTYPE_NAMES = {torch.bfloat16: "bf16", torch.float16: "fp16"}  # 16-bit: outputs, rope parts
_FP8_NAMES = {getattr(torch, name): dt for name, dt in (("float8_e4m3fn", "e4m3"), ("float8_e5m2", "e5m2"))
              if hasattr(torch, name)}
_INPUT_NAMES = {**_DTYPE_NAMES, **_FP8_NAMES}  # what q, k, v may hold
_FLOAT32 = torch.float32
_INT32 = torch.int32
_empty = torch.empty
_empty_strided = torch.empty_strided
_empty_like = torch.empty_like
_grad_enabled = torch.is_grad_enabled
_capturing = getattr(torch._C, "_cuda_isCurrentStreamCapturing", None) or torch.cuda.is_current_stream_capturing
_is_compiling = getattr(getattr(torch, "compiler", None), "is_compiling", None) or torch._dynamo.is_compiling
_raw_stream = getattr(torch._C, "_cuda_getCurrentRawStream", None) or (
    lambda device: torch.cuda.current_stream(device).cuda_stream
)

_MAX_PLANS = 4096  # call signatures remembered; the table starts over when full
_plans: dict = {}


def _length(n: int) -> Optional[int]:
    """An operator's int for an optional length: -1 is None."""
    return None if n < 0 else n


def _fail(message: str):
    raise ArgumentError("flashjit.attention: " + message)


# ---- the call's problem: shapes, layouts and the derived config ---------------------------------


class _Layout:
    """What the tensors say: sizes, element strides (batch, row, head) and the output's layout."""

    __slots__ = ("varlen", "batch", "seqlen_q", "seqlen_k", "heads_q", "heads_k", "total_q", "total_k",
                 "dim_qk", "dim_v", "dim_rope", "q", "k", "v", "q_rope", "k_rope", "o_shape", "o_stride",
                 "lse_shape")


def _strides(t: torch.Tensor, varlen: bool) -> Tuple[int, int, int]:
    s = t.stride()
    return (0, s[0], s[1]) if varlen else (s[0], s[1], s[2])


def _check_dense(name: str, t: Optional[torch.Tensor], dims: int, what: str):
    if t is None:
        return
    if t.dim() != dims:
        _fail(f"{name} has {t.dim()} dimensions (shape {tuple(t.shape)}); expected {what}")
    if t.stride(-1) != 1:
        _fail(f"{name}'s last (head-dim) axis must be contiguous; its strides are {tuple(t.stride())}")


def _layout(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, q_rope, k_rope) -> _Layout:
    """Checks the tensors against each other (shapes, strides, dtypes, devices) and describes them.
    Reads only metadata, so it serves fake tensors (torch.compile tracing) as well."""
    lay = _Layout()
    varlen = cu_seqlens_q is not None or cu_seqlens_k is not None
    lay.varlen = varlen
    if varlen:
        if cu_seqlens_q is None or cu_seqlens_k is None:
            _fail("cu_seqlens_q and cu_seqlens_k go together (ragged batches need both)")
        if max_seqlen_q is None or max_seqlen_k is None:
            _fail("ragged batches need max_seqlen_q and max_seqlen_k, the longest sequences "
                  "(reading them from cu_seqlens would synchronise with the GPU)")
        what = "[total, heads, dim] for ragged batches (cu_seqlens given)"
        for name, t in (("q", q), ("k", k), ("v", v), ("q_rope", q_rope), ("k_rope", k_rope)):
            _check_dense(name, t, 3, what)
        for name, t in (("cu_seqlens_q", cu_seqlens_q), ("cu_seqlens_k", cu_seqlens_k)):
            if t.dim() != 1 or t.dtype != _INT32 or t.stride(0) != 1:
                _fail(f"{name} must be a contiguous 1-D int32 tensor of batch + 1 row offsets "
                      f"(got shape {tuple(t.shape)}, {t.dtype})")
            if t.device != q.device:
                _fail(f"{name} is on {t.device}, q on {q.device}")
        lay.batch = cu_seqlens_q.shape[0] - 1
        if lay.batch < 1 or cu_seqlens_k.shape[0] - 1 != lay.batch:
            _fail(f"cu_seqlens_q has {cu_seqlens_q.shape[0]} offsets and cu_seqlens_k {cu_seqlens_k.shape[0]}: "
                  "both must be batch + 1, with batch >= 1")
        lay.total_q, lay.heads_q, lay.dim_qk = q.shape
        lay.total_k, lay.heads_k, _ = k.shape
        if v.shape[0] != lay.total_k or v.shape[1] != lay.heads_k:
            _fail(f"v's shape {tuple(v.shape)} does not match k's {tuple(k.shape)} in rows and heads")
        lay.seqlen_q, lay.seqlen_k = int(max_seqlen_q), int(max_seqlen_k)
        if lay.seqlen_q < 0 or lay.seqlen_k < 0 or lay.seqlen_q > lay.total_q or lay.seqlen_k > lay.total_k:
            _fail(f"max_seqlen_q = {lay.seqlen_q}, max_seqlen_k = {lay.seqlen_k}: must lie between 0 and "
                  f"the total rows of q ({lay.total_q}) and k ({lay.total_k})")
    else:
        what = "[batch, seqlen, heads, dim] (BSHD; a BHSD tensor passes as x.transpose(1, 2))"
        for name, t in (("q", q), ("k", k), ("v", v), ("q_rope", q_rope), ("k_rope", k_rope)):
            _check_dense(name, t, 4, what)
        lay.batch, lay.seqlen_q, lay.heads_q, lay.dim_qk = q.shape
        kb, lay.seqlen_k, lay.heads_k, _ = k.shape
        if kb != lay.batch or v.shape[0] != lay.batch:
            _fail(f"batch sizes differ: q {lay.batch}, k {kb}, v {v.shape[0]}")
        if v.shape[1] != lay.seqlen_k or v.shape[2] != lay.heads_k:
            _fail(f"v's shape {tuple(v.shape)} does not match k's {tuple(k.shape)} in length and heads")
        lay.total_q = lay.total_k = 0
    if k.shape[-1] != lay.dim_qk:
        _fail(f"q and k head dims differ: {lay.dim_qk} and {k.shape[-1]}")
    lay.dim_v = v.shape[-1]
    if lay.heads_k < 1 or lay.heads_q % lay.heads_k:
        _fail(f"q has {lay.heads_q} heads, k and v {lay.heads_k}: the query heads must be a multiple of the KV heads")
    for name, t in (("k", k), ("v", v), ("q_rope", q_rope), ("k_rope", k_rope)):
        if t is not None and t.device != q.device:
            _fail(f"{name} is on {t.device}, q on {q.device}")
    if not _dtypes_fit(q, k, v):
        _fail(f"q, k and v must share one dtype: bfloat16, float16, float8_e4m3fn or float8_e5m2, or q "
              f"bfloat16 / float16 beside fp8 k and v (got {q.dtype}, {k.dtype}, {v.dtype})")

    lay.dim_rope = 0
    lay.q_rope = lay.k_rope = None
    if (q_rope is None) != (k_rope is None):
        _fail("q_rope and k_rope go together")
    if q_rope is not None:
        lay.dim_rope = q_rope.shape[-1]
        if tuple(q_rope.shape[:-1]) != tuple(q.shape[:-1]) or tuple(k_rope.shape[:-1]) != tuple(k.shape[:-1]):
            _fail(f"q_rope {tuple(q_rope.shape)} and k_rope {tuple(k_rope.shape)} must match q {tuple(q.shape)} "
                  f"and k {tuple(k.shape)} in every axis but the last")
        if k_rope.shape[-1] != lay.dim_rope or k_rope.dtype != q_rope.dtype or q_rope.dtype not in _DTYPE_NAMES:
            _fail(f"q_rope and k_rope must share a rope dim and a 16-bit dtype "
                  f"(got {tuple(q_rope.shape)} {q_rope.dtype}, {tuple(k_rope.shape)} {k_rope.dtype})")
        lay.q_rope, lay.k_rope = _strides(q_rope, varlen), _strides(k_rope, varlen)
    lay.q, lay.k, lay.v = _strides(q, varlen), _strides(k, varlen), _strides(v, varlen)

    # O follows q's memory order (BSHD or BHSD), contiguous; the LSE is [B, Hq, Sq] or [Hq, total_q].
    hq, dv = lay.heads_q, lay.dim_v
    if varlen:
        lay.o_shape, lay.o_stride = (lay.total_q, hq, dv), (hq * dv, dv, 1)
        lay.lse_shape = (hq, lay.total_q)
    else:
        b, sq = lay.batch, lay.seqlen_q
        lay.o_shape = (b, sq, hq, dv)
        bhsd = q.stride(2) > q.stride(1)
        lay.o_stride = (hq * sq * dv, dv, sq * dv, 1) if bhsd else (sq * hq * dv, hq * dv, dv, 1)
        lay.lse_shape = (b, hq, sq)
    return lay


def _mask(causal: bool, window) -> Tuple[str, int, int]:
    """The config's mask and the launch's window sides. A window (left, right) uses -1 for an
    unbounded side, as FlashAttention's window_size; with causal=True its right side is 0."""
    if window is None or (window[0] < 0 and window[1] < 0):
        return ("causal" if causal else "none"), -1, -1
    left, right = int(window[0]), int(window[1])
    if causal:
        if right > 0:
            _fail(f"window = {tuple(window)} with causal=True: a causal window's right side is 0 "
                  "(pass (left, 0) or (left, -1), or causal=False)")
        right = 0
    return "sliding_window", left, right


def _out_dtype(dtype):
    """The default output type: the inputs' own, bfloat16 for fp8 inputs."""
    return dtype if dtype in _DTYPE_NAMES else torch.bfloat16


_NO_SCALES = ({"q": "none", "k": "none", "v": "none"}, None, None, None, None)


def _scale_of(name, t, heads, per_token_shape, varlen, device, allow_token=True, fail=None):
    """(granularity, scale dtype or None, (batch, head) strides or None) of one scale tensor, from
    its shape: one fp32 (per_tensor), fp32 [heads] (per_head), or [batch, heads, seqlen] (ragged:
    [heads, total]) in float32 or bfloat16 (per_token)."""
    fail = fail or _fail
    if t is None:
        return "none", None, None
    if t.device != device:
        fail(f"{name} is on {t.device}, q on {device}")
    if t.dtype == _FLOAT32 and t.numel() == 1:
        return "per_tensor", None, None
    if t.dtype == _FLOAT32 and t.dim() == 1 and t.shape[0] == heads and t.stride(0) == 1:
        return "per_head", None, None
    # A last axis of one element (one query token) is contiguous whatever its stride says:
    # torch's contiguous() leaves such strides as they are.
    if allow_token and t.dim() == len(per_token_shape) and tuple(t.shape) == per_token_shape \
            and (t.stride(-1) == 1 or t.shape[-1] == 1) and t.dtype in (_FLOAT32, torch.bfloat16):
        strides = (0, t.stride(0)) if varlen else (t.stride(0), t.stride(1))
        return "per_token", "fp32" if t.dtype == _FLOAT32 else "bf16", strides
    kinds = "one float32, float32 [%d]%s" % (heads, f", or float32/bfloat16 {list(per_token_shape)} with a "
                                              "contiguous last axis" if allow_token else "")
    fail(f"{name} of shape {tuple(t.shape)} ({t.dtype}) is no scale tensor here: expected {kinds}")


def _scales_of_shapes(scales, heads, shapes, ragged, device, fail=None):
    """The config's scales, dtype.scale and the q, k and v per-token scales' strides, from the q,
    k and v scale tensors, each against its heads, per-token shape and whether its rows are packed
    (v per token as k)."""
    fail = fail or _fail
    if all(t is None for t in scales):
        return _NO_SCALES
    (q_scale, k_scale, v_scale), (hq, hk), (q_shape, k_shape), (q_ragged, k_ragged) = scales, heads, shapes, ragged
    gq, dq, sq = _scale_of("q_scale", q_scale, hq, q_shape, q_ragged, device, fail=fail)
    gk, dk, sk = _scale_of("k_scale", k_scale, hk, k_shape, k_ragged, device, fail=fail)
    gv, dv, sv = _scale_of("v_scale", v_scale, hk, k_shape, k_ragged, device, fail=fail)
    kinds = {d for d in (dq, dk, dv) if d}
    if len(kinds) > 1:
        fail("per-token q_scale, k_scale and v_scale must share one dtype (got "
             f"{', '.join(str(t.dtype) for t in (q_scale, k_scale, v_scale) if t is not None)})")
    return {"q": gq, "k": gk, "v": gv}, dq or dk or dv, sq, sk, sv


def _scales(lay: _Layout, q_scale, k_scale, v_scale, device):
    """flashjit.attention's scales: per-token ones [batch, heads, seqlen] (ragged: [heads, total])."""
    if lay.varlen:
        q_shape, k_shape = (lay.heads_q, lay.total_q), (lay.heads_k, lay.total_k)
    else:
        q_shape = (lay.batch, lay.heads_q, lay.seqlen_q)
        k_shape = (lay.batch, lay.heads_k, lay.seqlen_k)
    return _scales_of_shapes((q_scale, k_scale, v_scale), (lay.heads_q, lay.heads_k), (q_shape, k_shape),
                             (lay.varlen, lay.varlen), device)


def _dtypes_fit(q, k, v) -> bool:
    """q, k and v share one input dtype, or q is 16-bit beside fp8 k and v (the config's dtype.q)."""
    own_q = k.dtype in _FP8_NAMES and q.dtype in _DTYPE_NAMES
    return k.dtype in _INPUT_NAMES and v.dtype == k.dtype and (q.dtype == k.dtype or own_q)


def _dtypes(kv_dtype, out_dtype, rope_dtype=None, scale=None, q_dtype=None) -> dict:
    """The config's dtype section: qkv is k's and v's dtype; rope and q are named where they differ
    from it (a 16-bit rope part or q beside fp8 k and v)."""
    types = {"qkv": _INPUT_NAMES[kv_dtype], "out": _DTYPE_NAMES[out_dtype],
             "rope": None if rope_dtype is None or rope_dtype == kv_dtype else _DTYPE_NAMES[rope_dtype],
             "scale": scale}
    if q_dtype is not None and q_dtype != kv_dtype:
        types["q"] = _DTYPE_NAMES[q_dtype]
    return types


def _problem(lay: _Layout, dtype, out_dtype, rope_dtype, mask: str, return_lse: bool, scales=_NO_SCALES,
             q_dtype=None) -> dict:
    """`dtype` is k's and v's; `q_dtype` q's where it differs (a 16-bit q beside fp8 k and v)."""
    return {
        "dtype": _dtypes(dtype, out_dtype, rope_dtype, scales[1], q_dtype),
        "scales": scales[0],
        "head_dim": {"qk": lay.dim_qk + lay.dim_rope, "v": lay.dim_v, "rope": lay.dim_rope},
        "group": lay.heads_q // lay.heads_k,
        "mask": mask,
        "varlen": lay.varlen,
        "outputs": {"lse": bool(return_lse)},
    }


# ---- pinned configs -------------------------------------------------------------------------------


def _config_key(config):
    """A hashable stand-in for config=: a Config itself, ("path", p) or ("json", text)."""
    if config is None or isinstance(config, Config):
        return config
    if isinstance(config, str):
        return ("json", config) if config.lstrip().startswith("{") else ("path", config)
    if isinstance(config, os.PathLike):
        return ("path", os.fspath(config))
    if isinstance(config, Mapping):
        return ("json", json.dumps(config, sort_keys=True))
    raise TypeError("flashjit.attention: config is a flashjit.Config, a dict, JSON text or a path, "
                    f"not {type(config).__name__}")


def _pinned(key) -> Optional[dict]:
    """The fields a pinned config states (a Config states all of them)."""
    if key is None:
        return None
    if isinstance(key, Config):
        return key.to_dict()
    kind, text = key
    if kind == "path":
        load_config_file(text)  # a readable, well-formed config, or a ConfigError naming the file
        with open(text) as f:
            return json.load(f)
    Config.from_json(text)
    return json.loads(text)


def _flat(d: Mapping, prefix: str = "") -> dict:
    out = {}
    for k, v in d.items():
        if isinstance(v, Mapping):
            out.update(_flat(v, prefix + k + "."))
        else:
            out[prefix + k] = v
    return out


def _merged(problem: dict, pinned: Optional[dict], device_arch: str) -> Config:
    """The call's config: the problem the tensors describe, the tuning of the pinned config. A
    problem field the pinned config states must agree with the tensors and flags."""
    if pinned is None:
        return Config({**problem, "arch": "native"})
    derived = _flat(Config({**problem, "arch": device_arch}).to_dict())
    qkv = derived["dtype.qkv"]
    stated = _flat({k: v for k, v in pinned.items() if k not in ("tuning", "schema")})
    wrong = []
    for path, value in stated.items():
        if path == "arch" and value == "native":
            continue
        have = derived.get(path)
        if path == "dtype.rope":
            value, have = value or qkv, have or qkv
        if value != have:
            wrong.append(f"{path} = {json.dumps(value)} but the call gives {json.dumps(have)}")
    if wrong:
        _fail("the pinned config disagrees with the tensors and flags: " + "; ".join(wrong) +
              " (a config of only {\"tuning\": {...}} pins tuning alone)")
    return Config({**problem, "arch": "native", "tuning": pinned.get("tuning", {})})


def _device_arch(device: torch.device) -> str:
    return _core.arch_for_compute_capability(*torch.cuda.get_device_capability(device))


# ---- launch plans ---------------------------------------------------------------------------------


class _Plan:
    __slots__ = ("launch", "device", "index", "o_shape", "o_stride", "o_dtype", "o_like_q", "lse_shape", "counter",
                 "dense")


def _make_plan(q, k, v, causal, window, softmax_scale, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
               return_lse, out, config_key, q_rope, k_rope, q_scale=None, k_scale=None, v_scale=None) -> _Plan:
    if not (q.is_cuda and k.is_cuda and v.is_cuda):
        _fail(f"q, k and v must be CUDA tensors (got {q.device}, {k.device}, {v.device})")
    lay = _layout(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, q_rope, k_rope)
    mask, left, right = _mask(causal, window)
    plan = _Plan()
    plan.device, plan.index = q.device, q.device.index
    plan.o_shape, plan.o_stride, plan.o_dtype = lay.o_shape, lay.o_stride, _out_dtype(q.dtype)
    if out is not None:
        if tuple(out.shape) != lay.o_shape or out.dtype not in _DTYPE_NAMES or out.device != q.device:
            _fail(f"out must be a bfloat16 or float16 tensor of shape {lay.o_shape} on {q.device} "
                  f"(got {tuple(out.shape)} {out.dtype} on {out.device})")
        if out.stride(-1) != 1:
            _fail(f"out's last axis must be contiguous; its strides are {tuple(out.stride())}")
        plan.o_stride, plan.o_dtype = tuple(out.stride()), out.dtype
    # An output of q's shape, strides and dtype comes from empty_like (q's strides are dense: the
    # signature fixes them), cheaper than empty_strided's arguments.
    plan.o_like_q = (plan.o_shape == tuple(q.shape) and plan.o_stride == tuple(q.stride())
                     and plan.o_dtype == q.dtype)
    plan.lse_shape = lay.lse_shape if return_lse else None
    # q, k, v and o alone: the binding's short launch.
    plan.dense = (not return_lse and cu_seqlens_q is None and cu_seqlens_k is None and q_rope is None
                  and q_scale is None and k_scale is None and v_scale is None)
    scales = _scales(lay, q_scale, k_scale, v_scale, q.device)
    problem = _problem(lay, k.dtype, plan.o_dtype, None if q_rope is None else q_rope.dtype, mask, return_lse, scales,
                       q.dtype)
    pinned = _pinned(config_key)
    config = _merged(problem, pinned, _device_arch(q.device) if pinned is not None else "native")
    kernel = _core.load_kernel(config, max(1, lay.seqlen_k), plan.index)
    plan.counter = kernel.tile_counter
    o_strides = (0, plan.o_stride[0], plan.o_stride[1]) if lay.varlen else tuple(plan.o_stride[:3])
    plan.launch = _core.LaunchPlan(
        kernel, lay.q, lay.k, lay.v, o_strides, lay.q_rope, lay.k_rope, None,
        batch=lay.batch, seqlen_q=lay.seqlen_q, seqlen_k=lay.seqlen_k, heads_q=lay.heads_q, heads_k=lay.heads_k,
        total_q=lay.total_q, total_k=lay.total_k, softmax_scale=float(softmax_scale or 0.0),
        window_left=left, window_right=right, q_scale_strides=scales[2], k_scale_strides=scales[3],
        v_scale_strides=scales[4])
    return plan


def _capture_counter(o: torch.Tensor, device) -> int:
    """A zeroed tile counter for a launch being captured into a CUDA graph: allocated by torch
    (in the graph's pool; its zeroing is captured too, so every replay starts from zero) and
    kept alive as long as the output."""
    counter = torch.zeros(1, dtype=_INT32, device=device)
    o._flashjit_tile_counter = counter
    return counter.data_ptr()


def _run(plan: _Plan, q, k, v, cu_seqlens_q, cu_seqlens_k, q_rope, k_rope, out, return_lse, q_scale=None,
         k_scale=None, v_scale=None):
    if out is not None:
        o = out
    elif plan.o_like_q:
        o = _empty_like(q)
    else:
        o = _empty_strided(plan.o_shape, plan.o_stride, dtype=plan.o_dtype, device=plan.device)
    lse = None if plan.lse_shape is None else _empty(plan.lse_shape, dtype=_FLOAT32, device=plan.device)
    counter = _capture_counter(o, plan.device) if plan.counter and _capturing() else 0
    if plan.dense:
        plan.launch.launch_dense(_raw_stream(plan.index), q.data_ptr(), k.data_ptr(), v.data_ptr(), o.data_ptr(),
                                 counter)
        return o
    plan.launch.launch(
        _raw_stream(plan.index), q.data_ptr(), k.data_ptr(), v.data_ptr(), o.data_ptr(),
        0 if q_rope is None else q_rope.data_ptr(), 0 if k_rope is None else k_rope.data_ptr(),
        0 if lse is None else lse.data_ptr(), 0 if cu_seqlens_q is None else cu_seqlens_q.data_ptr(),
        0 if cu_seqlens_k is None else cu_seqlens_k.data_ptr(), counter, 0, 0, 0, 0,
        0 if q_scale is None else q_scale.data_ptr(), 0 if k_scale is None else k_scale.data_ptr(),
        0 if v_scale is None else v_scale.data_ptr())
    return (o, lse) if return_lse else o


def _signature(t: Optional[torch.Tensor]):
    return None if t is None else (t.shape, t.stride(), t.dtype, t.get_device())


def _plan_for(q, k, v, causal, window, softmax_scale, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
              return_lse, out, config_key, q_rope, k_rope, q_scale=None, k_scale=None, v_scale=None) -> _Plan:
    """The launch plan of the call's signature: a dictionary lookup, or a new plan."""
    extra = None
    if (cu_seqlens_q is not None or cu_seqlens_k is not None or q_rope is not None or k_rope is not None
            or out is not None or max_seqlen_q is not None or max_seqlen_k is not None
            or q_scale is not None or k_scale is not None or v_scale is not None):
        extra = (_signature(cu_seqlens_q), _signature(cu_seqlens_k), max_seqlen_q, max_seqlen_k,
                 _signature(q_rope), _signature(k_rope), _signature(out), _signature(q_scale),
                 _signature(k_scale), _signature(v_scale))
    key = (q.shape, q.stride(), k.shape, k.stride(), v.shape, v.stride(), q.dtype, k.dtype, v.dtype,
           q.get_device(), k.get_device(), v.get_device(), causal, window, softmax_scale, return_lse, config_key, extra)
    plan = _plans.get(key)
    if plan is None:
        plan = _make_plan(q, k, v, causal, window, softmax_scale, cu_seqlens_q, cu_seqlens_k, max_seqlen_q,
                          max_seqlen_k, return_lse, out, config_key, q_rope, k_rope, q_scale, k_scale, v_scale)
        if len(_plans) >= _MAX_PLANS:
            _plans.clear()
        _plans[key] = plan
    return plan


def _attend(q, k, v, causal, window, softmax_scale, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
            return_lse, out, config_key, q_rope, k_rope, q_scale=None, k_scale=None, v_scale=None):
    """The launch for plain CUDA tensors: a plan lookup on the call's signature, then the launch."""
    plan = _plan_for(q, k, v, causal, window, softmax_scale, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                     return_lse, out, config_key, q_rope, k_rope, q_scale, k_scale, v_scale)
    return _run(plan, q, k, v, cu_seqlens_q, cu_seqlens_k, q_rope, k_rope, out, return_lse, q_scale, k_scale,
                v_scale)


# ---- the custom op --------------------------------------------------------------------------------


def _attention_op(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    cu_seqlens_q: Optional[torch.Tensor],
    cu_seqlens_k: Optional[torch.Tensor],
    max_seqlen_q: int,
    max_seqlen_k: int,
    causal: bool,
    window_left: int,
    window_right: int,
    softmax_scale: float,
    return_lse: bool,
    q_rope: Optional[torch.Tensor],
    k_rope: Optional[torch.Tensor],
    config: Optional[str],
    q_scale: Optional[torch.Tensor] = None,
    k_scale: Optional[torch.Tensor] = None,
    v_scale: Optional[torch.Tensor] = None,
) -> Tuple[torch.Tensor, torch.Tensor]:
    """flashjit.attention as an operator: (out, lse), lse empty unless return_lse. max_seqlen -1:
    dense; window sides -1: unbounded (both: no window); softmax_scale 0: 1/sqrt(head dim);
    config: the pinned config as JSON text or a path, or None; *_scale: dequantisation scales."""
    result = _attend(q, k, v, causal, (window_left, window_right), softmax_scale or None, cu_seqlens_q,
                     cu_seqlens_k, _length(max_seqlen_q), _length(max_seqlen_k), return_lse, None,
                     _config_key(config), q_rope, k_rope, q_scale, k_scale, v_scale)
    return result if return_lse else (result, result.new_empty((0,), dtype=_FLOAT32))


def _attention_fake(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, causal, window_left,
                    window_right, softmax_scale, return_lse, q_rope, k_rope, config, q_scale=None, k_scale=None,
                    v_scale=None):
    if q.device.type not in ("cuda", "meta"):
        _fail(f"q, k and v must be CUDA tensors (got {q.device})")
    lay = _layout(q, k, v, cu_seqlens_q, cu_seqlens_k, _length(max_seqlen_q), _length(max_seqlen_k), q_rope, k_rope)
    _mask(causal, (window_left, window_right))
    _scales(lay, q_scale, k_scale, v_scale, q.device)
    o = q.new_empty_strided(lay.o_shape, lay.o_stride, dtype=_out_dtype(q.dtype))
    lse = q.new_empty(lay.lse_shape if return_lse else (0,), dtype=_FLOAT32)
    return o, lse


_ops.define("attention", _attention_op, _attention_fake, "flashjit.attention")


def _assume_constant_result(fn):
    """torch.compiler.assume_constant_result without its cost: the decorator imports
    torch._dynamo (seconds in a fresh process) to set the one attribute dynamo reads, so flashjit
    sets it itself until dynamo is loaded (torch.compile loads it before it traces any call)."""
    if "torch._dynamo" in sys.modules:
        return torch.compiler.assume_constant_result(fn)
    fn._dynamo_marked_constant = True
    return fn


@_assume_constant_result
def _config_text(config) -> str:
    """A dict, Config or PathLike config= as the op's string argument: JSON text or a path
    (evaluated once when torch.compile traces the call)."""
    if isinstance(config, os.PathLike):
        return os.fspath(config)
    return config.to_json() if isinstance(config, Config) else json.dumps(dict(config), sort_keys=True)


def _through_op(q, k, v, causal, window, softmax_scale, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                return_lse, out, config, q_rope, k_rope, q_scale=None, k_scale=None, v_scale=None):
    left, right = (-1, -1) if window is None else (window[0], window[1])
    if isinstance(config, Config) and _is_compiling():
        raise TypeError("flashjit.attention under torch.compile: pass config as a dict, a path or JSON text "
                        "(config.to_json()); a flashjit.Config object cannot be traced")
    o, lse = torch.ops.flashjit.attention(
        q, k, v, cu_seqlens_q, cu_seqlens_k, -1 if max_seqlen_q is None else max_seqlen_q,
        -1 if max_seqlen_k is None else max_seqlen_k, causal, left, right,
        0.0 if softmax_scale is None else float(softmax_scale), return_lse, q_rope, k_rope,
        config if config is None or isinstance(config, str) else _config_text(config), q_scale, k_scale, v_scale)
    if out is not None:
        out.copy_(o)
        o = out
    return (o, lse) if return_lse else o


# ---- the public call ------------------------------------------------------------------------------


def attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    *,
    causal: bool = False,
    window: Optional[Tuple[int, int]] = None,
    softmax_scale: Optional[float] = None,
    cu_seqlens_q: Optional[torch.Tensor] = None,
    cu_seqlens_k: Optional[torch.Tensor] = None,
    max_seqlen_q: Optional[int] = None,
    max_seqlen_k: Optional[int] = None,
    return_lse: bool = False,
    out: Optional[torch.Tensor] = None,
    config: Union[Config, Mapping[str, Any], str, "os.PathLike[str]", None] = None,
    q_rope: Optional[torch.Tensor] = None,
    k_rope: Optional[torch.Tensor] = None,
    q_scale: Optional[torch.Tensor] = None,
    k_scale: Optional[torch.Tensor] = None,
    v_scale: Optional[torch.Tensor] = None,
) -> Union[torch.Tensor, Tuple[torch.Tensor, torch.Tensor]]:
    """Attention forward: softmax(q kᵀ · scale + mask) v, on torch's current CUDA stream.

    Args:
        q: ``[batch, seqlen_q, heads_q, dim]`` (any strides with a contiguous last axis: a BHSD
            tensor passes as ``x.transpose(1, 2)``), or ``[total_q, heads_q, dim]`` packed rows of
            a ragged batch (with ``cu_seqlens_q``). bfloat16 or float16, or float8_e4m3fn /
            float8_e5m2 with scales.
        k, v: ``[batch, seqlen_k, heads_k, dim]`` (or packed ``[total_k, heads_k, dim]``), the same
            dtype; ``heads_q`` must be a multiple of ``heads_k`` (GQA/MQA); v's head dim may differ.
        causal: mask keys after each query, aligned to the bottom right when seqlen_q != seqlen_k
            (query row i stands at key position i + seqlen_k - seqlen_q), as FlashAttention.
        window: ``(left, right)`` keys each query sees around its position, -1 for an unbounded
            side; with ``causal=True`` the right side is 0.
        softmax_scale: default ``1 / sqrt(dim)`` (dim including the rope columns).
        cu_seqlens_q, cu_seqlens_k: int32 ``[batch + 1]`` row offsets of a ragged batch, on the GPU.
        max_seqlen_q, max_seqlen_k: the longest sequences of a ragged batch (required with
            cu_seqlens: reading them would synchronise with the GPU).
        return_lse: also return the log-sum-exp of each row (float32, natural log): ``[batch,
            heads_q, seqlen_q]``, or ``[heads_q, total_q]`` for a ragged batch.
        out: write the output here (shape of the result, bfloat16 or float16: its dtype is the
            kernel's output dtype) instead of allocating it.
        config: pin the kernel's tuning: a :class:`flashjit.Config`, a dict, JSON text or the
            path of a JSON file. Its ``tuning`` is used; the problem fields it states (dtype,
            head_dim, group, mask, varlen, outputs, arch) must agree with the tensors and flags
            (a Config states them all; ``{"tuning": {...}}`` pins tuning alone). A Config, text
            or path keeps the warm path fast (a dict is serialised on every call); under
            torch.compile pass a dict, text or path.
        q_rope, k_rope: the rope columns of q and k in tensors of their own (shape of q and k but
            the last axis); the head dim is then ``dim + rope dim``.
        q_scale, k_scale, v_scale: dequantisation scales: the stored values times the scale are
            the inputs (q, k, v may then be float8_e4m3fn or float8_e5m2; the output defaults to
            bfloat16). One float32 (per tensor), float32 ``[heads]`` (per head), or per token
            ``[batch, heads, seqlen]`` (ragged: ``[heads, total]``) in float32 or bfloat16 (one
            dtype for all). Rope columns are not scaled.

    Returns:
        ``out`` ``[batch, seqlen_q, heads_q, dim_v]`` (or ``[total_q, heads_q, dim_v]``) in q's
        memory order, or ``(out, lse)`` with ``return_lse``.

    The kernel's config is derived from the tensors and flags; its first use compiles it (or
    reads it from the disk cache) and loads it on the tensors' device. Later calls with the same
    shapes, strides, dtypes and flags are a dictionary lookup and a launch. Under
    ``torch.compile`` (or with fake tensors, or tensors that require grad) the call goes through
    the custom op ``torch.ops.flashjit.attention``. Forward only: backpropagating through the
    result raises. Raises :class:`flashjit.ArgumentError` for tensors that do not fit (the text
    names the tensor and the rule), :class:`flashjit.ConfigError` for a config no family
    implements.
    """
    if (type(q) is not _Tensor or type(k) is not _Tensor or type(v) is not _Tensor or not q.is_cuda
            or _is_compiling()
            or (_grad_enabled() and (q.requires_grad or k.requires_grad or v.requires_grad
                                     or (q_rope is not None and (q_rope.requires_grad or k_rope.requires_grad))))):
        return _through_op(q, k, v, causal, window, softmax_scale, cu_seqlens_q, cu_seqlens_k, max_seqlen_q,
                           max_seqlen_k, return_lse, out, config, q_rope, k_rope, q_scale, k_scale, v_scale)
    if window is not None:
        window = tuple(window)
    return _attend(q, k, v, causal, window, softmax_scale, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                   return_lse, out, None if config is None else _config_key(config), q_rope, k_rope, q_scale,
                   k_scale, v_scale)

#!/usr/bin/env python3
"""The FP8 prefill benchmark: flashjit's fp8 attention beside cuDNN's FP8 SDPA (cuDNN frontend)
and flashjit's own bf16, in one process, on the same GPU, point by point, each library timed the
same way in two modes (decode_compare.py's: idle and sustained).

  PYTHONPATH=build/python python3 bench/fp8_compare.py [--dims 64,128,256] [--seqlens 1k,4k,16k]
      [--masks none,causal] [--libraries flashjit-fp8,flashjit-fp8-token,cudnn-fp8,flashjit-bf16]
      [--modes idle,sustained] [--json FILE] [--markdown FILE]

Shapes: the FA3 grid's, batch x seqlen = 16k tokens and heads x d = 2048, q = k = v lengths.
Libraries:
  flashjit-fp8        e4m3 Q/K/V, per-tensor scales, bf16 output
  flashjit-fp8-token  e4m3, per-token Q scales (fp32 [batch, heads, seqlen]), per-head K and V
  cudnn-fp8           cuDNN's FP8 SDPA (e4m3 in, e4m3 out as Hopper requires, per-tensor scales)
  flashjit-bf16       the same values in bf16
TFLOP/s count 4 * batch * heads * seqlen^2 * d, halved when causal. Every library's output is
compared with an fp32 torch reference on its own dequantised inputs (relative error).
"""

import argparse
import json
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_common import (E4M3_MAX, add_timing_arguments, e4m3_per_tensor, entry_summary,  # noqa: E402
                          log, measure_library, names, parse_list, rel_error, run_report, tflops_table)

TOKENS, WIDTH = 16384, 2048
FLASHJIT_CONFIG = None  # --flashjit-config: tuning pinned for flashjit's fp8 calls


class Point:
    def __init__(self, d, seqlen, causal):
        self.d, self.seqlen, self.causal = d, seqlen, causal
        self.heads = WIDTH // d
        self.batch = max(1, TOKENS // seqlen)

    def flops(self):
        f = 4.0 * self.batch * self.heads * self.seqlen * self.seqlen * self.d
        return f / 2 if self.causal else f

    def label(self):
        return f"d{self.d} S{self.seqlen} {'causal' if self.causal else 'none'}"


class Inputs:
    """bf16 values, their e4m3 quantisation per tensor and per token (Q) / per head (K, V), and the
    fp32 reference on the per-tensor dequantised values. Layout [batch, seqlen, heads, d]."""

    def __init__(self, torch, p):
        g = torch.Generator(device="cuda").manual_seed(p.d * 7 + p.seqlen)
        shape = (p.batch, p.seqlen, p.heads, p.d)
        self.bf16 = [torch.randn(shape, device="cuda", generator=g).to(torch.bfloat16) for _ in range(3)]
        f8 = torch.float8_e4m3fn
        self.per_tensor, self.tensor_scales = map(list, zip(*(e4m3_per_tensor(torch, x) for x in self.bf16)))
        q, k, v = (x.float() for x in self.bf16)
        q_amax = q.abs().amax(dim=-1)  # [batch, seqlen, heads]
        q_s = (q_amax / E4M3_MAX).clamp_min(1e-12)
        self.q_token = (q / q_s[..., None]).to(f8)
        self.q_token_scale = q_s.permute(0, 2, 1).contiguous()  # [batch, heads, seqlen]
        self.kv_head, self.kv_head_scale = [], []
        for x in (k, v):
            s = (x.abs().amax(dim=(0, 1, 3)) / E4M3_MAX).clamp_min(1e-12)  # [heads]
            self.kv_head.append((x / s[None, None, :, None]).to(f8))
            self.kv_head_scale.append(s.contiguous())

    def dequantised(self, kind):
        """The fp32 values a library computes on: its inputs times their scales."""
        if kind == "bf16":
            return [x.float() for x in self.bf16]
        if kind == "token":
            q = self.q_token.float() * self.q_token_scale.permute(0, 2, 1)[..., None]
            k, v = (x.float() * s[None, None, :, None] for x, s in zip(self.kv_head, self.kv_head_scale))
            return [q, k, v]
        return [x.float() * s for x, s in zip(self.per_tensor, self.tensor_scales)]

    def reference(self, torch, kind, causal):
        import torch.nn.functional as F
        q, k, v = (x.transpose(1, 2) for x in self.dequantised(kind))
        return F.scaled_dot_product_attention(q, k, v, is_causal=causal).transpose(1, 2)


def flashjit_fp8(torch, p, inp):
    import flashjit
    q, k, v = inp.per_tensor
    sq, sk, sv = inp.tensor_scales
    return lambda: flashjit.attention(q, k, v, causal=p.causal, q_scale=sq, k_scale=sk, v_scale=sv,
                                      config=FLASHJIT_CONFIG)


def flashjit_fp8_token(torch, p, inp):
    import flashjit
    k, v = inp.kv_head
    sk, sv = inp.kv_head_scale
    return lambda: flashjit.attention(inp.q_token, k, v, causal=p.causal, q_scale=inp.q_token_scale, k_scale=sk,
                                      v_scale=sv, config=FLASHJIT_CONFIG)


def flashjit_bf16(torch, p, inp):
    import flashjit
    q, k, v = inp.bf16
    return lambda: flashjit.attention(q, k, v, causal=p.causal)


def cudnn_fp8(torch, p, inp):
    """cuDNN's FP8 SDPA through the frontend: BHSD views of the per-tensor e4m3 inputs, descales
    from flashjit's scales, scale_s 1 (P quantised as cuDNN does), e4m3 output scaled by 1."""
    import cudnn
    handle = cudnn.create_handle()
    cudnn.set_stream(handle=handle, stream=torch.cuda.current_stream().cuda_stream)
    q, k, v = (x.transpose(1, 2) for x in inp.per_tensor)
    o = torch.empty_like(q)
    one = torch.ones(1, 1, 1, 1, device="cuda", dtype=torch.float32)
    descales = [s.reshape(1, 1, 1, 1).contiguous() for s in inp.tensor_scales]
    amax_s = torch.zeros(1, 1, 1, 1, device="cuda", dtype=torch.float32)
    amax_o = torch.zeros_like(amax_s)
    g = cudnn.pygraph(io_data_type=cudnn.data_type.FP8_E4M3, intermediate_data_type=cudnn.data_type.FLOAT,
                      compute_data_type=cudnn.data_type.FLOAT, handle=handle)
    qt, kt, vt = (g.tensor_like(x).set_data_type(cudnn.data_type.FP8_E4M3) for x in (q, k, v))
    dq, dk, dv = (g.tensor_like(x) for x in descales)
    ds, ss, so = g.tensor_like(one), g.tensor_like(one), g.tensor_like(one)
    ot, _, at_s, at_o = g.sdpa_fp8(q=qt, k=kt, v=vt, descale_q=dq, descale_k=dk, descale_v=dv, descale_s=ds,
                                   scale_s=ss, scale_o=so, is_inference=True, attn_scale=1.0 / math.sqrt(p.d),
                                   use_causal_mask=p.causal)
    ot.set_output(True).set_dim(list(o.shape)).set_stride(list(o.stride())).set_data_type(cudnn.data_type.FP8_E4M3)
    at_s.set_output(True).set_dim([1, 1, 1, 1]).set_stride([1, 1, 1, 1]).set_data_type(cudnn.data_type.FLOAT)
    at_o.set_output(True).set_dim([1, 1, 1, 1]).set_stride([1, 1, 1, 1]).set_data_type(cudnn.data_type.FLOAT)
    g.validate()
    g.build_operation_graph()
    g.create_execution_plans([cudnn.heur_mode.A, cudnn.heur_mode.FALLBACK])
    g.check_support()
    g.build_plans()
    ws = torch.empty(max(g.get_workspace_size(), 1), dtype=torch.uint8, device="cuda")
    binding = {qt: q, kt: k, vt: v, dq: descales[0], dk: descales[1], dv: descales[2], ds: one, ss: one, so: one,
               ot: o, at_s: amax_s, at_o: amax_o}

    def run():
        g.execute(binding, ws, handle=handle)
        return o.transpose(1, 2)
    return run


LIBRARIES = {"flashjit-fp8": flashjit_fp8, "flashjit-fp8-token": flashjit_fp8_token, "cudnn-fp8": cudnn_fp8,
             "flashjit-bf16": flashjit_bf16}
INPUT_KIND = {"flashjit-fp8": "tensor", "flashjit-fp8-token": "token", "cudnn-fp8": "tensor", "flashjit-bf16": "bf16"}


def measure(torch, args, gpu, on_point=None):
    points = [Point(d, s, m == "causal") for d in args.dims for s in args.seqlens for m in args.masks]
    flush = torch.empty(args.flush_mb << 18, dtype=torch.int32, device="cuda")
    rows = []
    for p in points:
        inp = Inputs(torch, p)
        refs = {}
        row = {"d": p.d, "seqlen": p.seqlen, "causal": p.causal, "batch": p.batch, "heads": p.heads,
               "flops": p.flops(), "libraries": {}}
        for name in args.libraries:
            kind = INPUT_KIND[name]

            def check(out, kind=kind):
                if kind not in refs:
                    refs[kind] = inp.reference(torch, kind, p.causal)
                return rel_error(torch, out.float(), refs[kind])
            entry = measure_library(torch, lambda: LIBRARIES[name](torch, p, inp), p.flops(), check, args, flush, gpu)
            row["libraries"][name] = entry
            log(f"{p.label()} {name}: " + entry_summary(entry, args.modes))
        rows.append(row)
        del inp, refs
        if on_point:
            on_point(rows)
    return rows


def markdown(rows, args, env):
    out = [f"FP8 prefill, {env['gpu']}, {env['date']} UTC; TFLOP/s sustained (idle); relative error against "
           "fp32 on the dequantised inputs", ""]
    out += tflops_table(rows, args.libraries, args.modes, "flashjit-fp8", "cudnn-fp8",
                        lambda r: f"d{r['d']} S{r['seqlen']} {'causal' if r['causal'] else 'none'}")
    return "\n".join(out) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dims", default="64,128,256")
    ap.add_argument("--seqlens", default="1k,4k,16k")
    ap.add_argument("--masks", default="none,causal")
    ap.add_argument("--libraries", default=",".join(LIBRARIES))
    add_timing_arguments(ap, iters=20, sustain_s=1.0, cooldown_ms=300)
    ap.add_argument("--flashjit-config", default="",
                    help='JSON pinning the fp8 kernels\' tuning, e.g. \'{"tuning": {"num_kv_stages": 3}}\'')
    args = ap.parse_args()
    global FLASHJIT_CONFIG
    FLASHJIT_CONFIG = json.loads(args.flashjit_config) if args.flashjit_config else None
    args.dims, args.seqlens = parse_list(args.dims), parse_list(args.seqlens)
    args.masks = [m for m in args.masks.split(",") if m]
    args.libraries = names(ap, "--libraries", args.libraries, LIBRARIES)
    args.modes = names(ap, "--modes", args.modes, ("idle", "sustained"))
    args.masks = names(ap, "--masks", ",".join(args.masks), ("none", "causal"))
    return run_report("fp8_compare", args, measure, markdown, ("flashjit", "cudnn"))


if __name__ == "__main__":
    sys.exit(main())

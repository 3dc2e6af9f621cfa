#!/usr/bin/env python3
"""The MLA prefill benchmark: DeepSeek's prefill head (qk 192 = 128 nope + 64 rope columns, the
rope part in its own tensors; v 128), bf16, flashjit beside cuDNN's SDPA (through torch) in one
process, on the same GPU, each timed the same way in two modes (bench_common.time_calls).

  PYTHONPATH=build/python python3 bench/mla_prefill_compare.py [--seqlens 1k,4k,16k]
      [--heads 16] [--masks none,causal] [--libraries flashjit,flashjit-sm80,cudnn]
      [--modes idle,sustained] [--json F] [--markdown F]

Shapes: batch x seqlen = 16k tokens, q = k = v lengths. Libraries:
  flashjit       flashjit.attention(q, k, v, q_rope=, k_rope=): the sm90 family on sm_90a
  flashjit-sm80  the same call pinned to the sm80 family (tuning.family "sm80")
  flashjit-fp8   e4m3 nope columns and V (per-tensor scales) beside the bf16 rope parts
  cudnn          torch SDPA on the cuDNN backend, Q and K with their rope columns concatenated
TFLOP/s count 2 x batch x heads x seqlen^2 x (192 + 128), halved when causal. Each output is
compared with an fp32 reference on the first sequence's first two heads (relative error; fp8:
on its dequantised inputs).
"""

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_common import (add_timing_arguments, e4m3_per_tensor, entry_summary, log, measure_library,  # noqa: E402
                          names, parse_list, rel_error, run_report, tflops_table)

TOKENS, NOPE, ROPE, DV = 16384, 128, 64, 128


class Point:
    def __init__(self, seqlen, heads, causal):
        self.seqlen, self.heads, self.causal = seqlen, heads, causal
        self.batch = max(1, TOKENS // seqlen)

    def flops(self):
        f = 2.0 * self.batch * self.heads * self.seqlen * self.seqlen * (NOPE + ROPE + DV)
        return f / 2 if self.causal else f

    def label(self):
        return f"h{self.heads} S{self.seqlen} {'causal' if self.causal else 'none'}"


class Inputs:
    """bf16 [batch, seqlen, heads, d]: the nope parts, the rope parts, V, and the concatenations."""

    def __init__(self, torch, p):
        g = torch.Generator(device="cuda").manual_seed(p.seqlen + p.heads)
        shape = (p.batch, p.seqlen, p.heads)
        rand = lambda d: torch.randn(*shape, d, device="cuda", generator=g).to(torch.bfloat16)  # noqa: E731
        self.q, self.k, self.q_rope, self.k_rope, self.v = rand(NOPE), rand(NOPE), rand(ROPE), rand(ROPE), rand(DV)
        self.q_full = torch.cat([self.q, self.q_rope], -1)
        self.k_full = torch.cat([self.k, self.k_rope], -1)

    def reference(self, torch, causal, fp8=False):
        if fp8:  # the dequantised nope parts beside the bf16 rope parts
            (q8, k8, v8), (qs, ks, vs) = self.fp8(torch)
            q = torch.cat([q8.float() * qs, self.q_rope.float()], -1)
            k = torch.cat([k8.float() * ks, self.k_rope.float()], -1)
            v = v8.float() * vs
        else:
            q, k, v = self.q_full, self.k_full, self.v
        q, k, v = (x[0, :, :2].float().transpose(0, 1) for x in (q, k, v))
        return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal).transpose(0, 1)

    def fp8(self, torch):
        """The nope parts and V in e4m3 with one scale each: ((q8, k8, v8), (q_scale, k_scale, v_scale))."""
        if not hasattr(self, "_fp8"):
            self._fp8 = tuple(zip(*(e4m3_per_tensor(torch, x) for x in (self.q, self.k, self.v))))
        return self._fp8


def flashjit_call(config):
    def make(torch, p, inp):
        import flashjit
        return lambda: flashjit.attention(inp.q, inp.k, inp.v, q_rope=inp.q_rope, k_rope=inp.k_rope,
                                          causal=p.causal, config=config)
    return make


def flashjit_fp8(torch, p, inp):
    import flashjit
    (q8, k8, v8), (qs, ks, vs) = inp.fp8(torch)
    return lambda: flashjit.attention(q8, k8, v8, q_rope=inp.q_rope, k_rope=inp.k_rope, causal=p.causal,
                                      q_scale=qs, k_scale=ks, v_scale=vs)


def cudnn(torch, p, inp):
    from torch.nn.attention import SDPBackend, sdpa_kernel
    q, k, v = (x.transpose(1, 2) for x in (inp.q_full, inp.k_full, inp.v))

    def run():
        with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
            return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=p.causal).transpose(1, 2)
    return run


LIBRARIES = {"flashjit": flashjit_call(None), "flashjit-sm80": flashjit_call({"tuning": {"family": "sm80"}}),
             "flashjit-fp8": flashjit_fp8, "cudnn": cudnn}


def measure(torch, args, gpu, on_point=None):
    points = [Point(s, h, m == "causal") for s in args.seqlens for h in args.heads for m in args.masks]
    flush = torch.empty(args.flush_mb << 18, dtype=torch.int32, device="cuda")
    rows = []
    for p in points:
        inp = Inputs(torch, p)
        ref = inp.reference(torch, p.causal)
        refs = {False: ref}
        row = {"seqlen": p.seqlen, "heads": p.heads, "causal": p.causal, "batch": p.batch, "flops": p.flops(),
               "libraries": {}}
        for name in args.libraries:
            fp8 = name == "flashjit-fp8"
            if fp8 not in refs:
                refs[fp8] = inp.reference(torch, p.causal, fp8)
            entry = measure_library(torch, lambda: LIBRARIES[name](torch, p, inp), p.flops(),
                                    lambda out: rel_error(torch, out[0, :, :2].float(), refs[fp8]), args, flush, gpu)
            row["libraries"][name] = entry
            log(f"{p.label()} {name}: " + entry_summary(entry, args.modes))
        rows.append(row)
        del inp, ref, refs
        if on_point:
            on_point(rows)
    return rows


def markdown(rows, args, env):
    out = [f"MLA prefill (qk 192 = 128 + 64 rope, v 128, bf16), {env['gpu']}, {env['date']} UTC; TFLOP/s "
           "sustained (idle); relative error against fp32", ""]
    out += tflops_table(rows, args.libraries, args.modes, "flashjit", "cudnn",
                        lambda r: f"h{r['heads']} S{r['seqlen']} {'causal' if r['causal'] else 'none'}")
    return "\n".join(out) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seqlens", default="1k,4k,16k")
    ap.add_argument("--heads", default="16")
    ap.add_argument("--masks", default="none,causal")
    ap.add_argument("--libraries", default=",".join(LIBRARIES))
    add_timing_arguments(ap, iters=20, sustain_s=1.0, cooldown_ms=300)
    args = ap.parse_args()
    args.seqlens, args.heads = parse_list(args.seqlens), parse_list(args.heads)
    args.masks = names(ap, "--masks", args.masks, ("none", "causal"))
    args.libraries = names(ap, "--libraries", args.libraries, LIBRARIES)
    args.modes = names(ap, "--modes", args.modes, ("idle", "sustained"))
    return run_report("mla_prefill_compare", args, measure, markdown, ("flashjit",))


if __name__ == "__main__":
    sys.exit(main())

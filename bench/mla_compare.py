#!/usr/bin/env python3
"""The MLA decode benchmark: flashjit.mla_decode beside FlashInfer's MLA decode, in one process, on
the same GPU, point by point, each timed the same way in two modes (bench_common.time_calls).

  PYTHONPATH=build/python python3 bench/mla_compare.py [--batch 32,64,128] [--cache 4k,16k,32k]
      [--tokens 1,2] [--heads 16,32,64,128] [--page 64] [--libraries flashjit,flashinfer]
      [--flashjit-configs '{"tuning": {"BN": 16}}';...] [--modes idle,sustained] [--json F] [--markdown F]

The latent cache is DeepSeek's: one KV head of 512 nope + 64 rope columns per token, V its first
512 columns, bf16, paged (shuffled pages), FlashInfer's layout (ckv and kpe apart; flashjit reads
views of the same tensors). TFLOP/s count 2 x (576 + 512) flops per (query row, head, key); GB/s
the bytes a launch must move (the cache once, Q and O). Each library's output is compared with
an fp64 reference on the first sequence of the batch.
  idle       a pause before each point, an L2-flushing memset before each launch;
  sustained  --sustain-s seconds of the library's own launches first, then timed back to back.
"""

import argparse
import json
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_common import (add_timing_arguments, environment, error_text, log, module_version, names,  # noqa: E402
                          parse_list, rel_error, time_calls, write_outputs)

D_NOPE, D_ROPE = 512, 64


class Point:
    def __init__(self, batch, cache, tokens, heads, page):
        self.batch, self.cache, self.tokens, self.heads, self.page = batch, cache, tokens, heads, page

    @property
    def id(self):
        return f"b{self.batch}_k{self.cache}_q{self.tokens}_h{self.heads}_p{self.page}"

    def flops(self, causal):
        pairs = self.cache * self.tokens - (self.tokens * (self.tokens - 1) // 2 if causal else 0)
        return 2.0 * self.batch * self.heads * pairs * (D_NOPE + D_ROPE + D_NOPE)

    def bytes(self):
        return 2 * (self.batch * self.cache * (D_NOPE + D_ROPE) +
                    self.batch * self.tokens * self.heads * (D_NOPE + D_ROPE + D_NOPE))


class Inputs:
    """`sets` copies of the cache (pages of ckv [P, page, 512] and kpe [P, page, 64]), shuffled
    page tables, the cache lengths and the queries."""

    def __init__(self, torch, p, sets):
        dev, dt = "cuda", torch.bfloat16
        self.per_seq = math.ceil(p.cache / p.page)
        self.pages = p.batch * self.per_seq
        self.ckv = torch.randn(sets * self.pages, p.page, D_NOPE, dtype=dt, device=dev)
        self.kpe = torch.randn(sets * self.pages, p.page, D_ROPE, dtype=dt, device=dev)
        self.tables = [(torch.randperm(self.pages, device=dev, dtype=torch.int64) + s * self.pages)
                       .view(p.batch, self.per_seq).to(torch.int32).contiguous() for s in range(sets)]
        self.lens = torch.full((p.batch,), p.cache, dtype=torch.int32, device=dev)
        self.q = [torch.randn(p.batch, p.tokens, p.heads, D_NOPE, dtype=dt, device=dev) for _ in range(sets)]
        self.q_pe = [torch.randn(p.batch, p.tokens, p.heads, D_ROPE, dtype=dt, device=dev) for _ in range(sets)]
        self.sets = sets
        self.scale = (D_NOPE + D_ROPE) ** -0.5


def reference_first(torch, p, inp, causal):
    """fp64 output of the first sequence of set 0: [tokens, heads, 512]."""
    rows = inp.tables[0][0].long()
    ckv = inp.ckv[rows].reshape(-1, D_NOPE)[:p.cache].double()
    kpe = inp.kpe[rows].reshape(-1, D_ROPE)[:p.cache].double()
    q = torch.cat([inp.q[0][0], inp.q_pe[0][0]], -1).double()             # [T, H, 576]
    s = torch.einsum("thd,nd->thn", q, torch.cat([ckv, kpe], -1)) * inp.scale
    if causal:
        i = torch.arange(p.tokens, device="cuda")[:, None] + (p.cache - p.tokens)
        j = torch.arange(p.cache, device="cuda")[None, :]
        s = s.masked_fill(~(j <= i)[:, None, :], float("-inf"))
    return torch.einsum("thn,nd->thd", torch.softmax(s, -1), ckv)


def flashjit_calls(torch, p, inp, causal, config):
    import flashjit
    return [lambda s=s: flashjit.mla_decode(inp.q[s], inp.q_pe[s], inp.ckv[:, :, None], inp.kpe[:, :, None],
                                            page_table=inp.tables[s], cache_seqlens=inp.lens, causal=causal,
                                            max_seqlen_k=p.cache, config=config)
            for s in range(inp.sets)]


def flashinfer_calls(torch, p, inp, causal, config):
    import flashinfer
    ws = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
    qo_indptr = torch.arange(0, p.batch + 1, dtype=torch.int32, device="cuda") * p.tokens
    kv_indptr = torch.arange(0, p.batch + 1, dtype=torch.int32, device="cuda") * inp.per_seq
    wrappers = []
    for s in range(inp.sets):
        w = flashinfer.mla.BatchMLAPagedAttentionWrapper(ws, backend="auto")
        w.plan(qo_indptr, kv_indptr, inp.tables[s].flatten(), inp.lens, num_heads=p.heads, head_dim_ckv=D_NOPE,
               head_dim_kpe=D_ROPE, page_size=p.page, causal=causal, sm_scale=inp.scale,
               q_data_type=torch.bfloat16, kv_data_type=torch.bfloat16)
        wrappers.append(w)
    return [lambda s=s: wrappers[s].run(inp.q[s].flatten(0, 1), inp.q_pe[s].flatten(0, 1), inp.ckv, inp.kpe)
            .view(p.batch, p.tokens, p.heads, D_NOPE) for s in range(inp.sets)]


LIBRARIES = {"flashjit": ("flashjit", flashjit_calls), "flashinfer": ("FlashInfer MLA", flashinfer_calls)}


def measure(torch, args, gpu, on_point):
    points = [Point(b, c, t, h, args.page) for b in args.batch for c in args.cache for t in args.tokens
              for h in args.heads]
    flush = torch.empty(args.flush_mb << 18, dtype=torch.int32, device="cuda")
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    results = []
    for i, p in enumerate(points):
        row = {"id": p.id, "shape": vars(p).copy(), "flops": p.flops(args.causal), "bytes": p.bytes(), "libraries": {}}
        sets = max(1, min(4, math.ceil(3 * l2 / p.bytes())))
        try:
            inp = Inputs(torch, p, sets)
            want = reference_first(torch, p, inp, args.causal)
        except Exception as e:  # noqa: BLE001  (out of memory)
            row["error"] = error_text(e)
            results.append(row)
            on_point(results)
            continue
        variants = [(name, None) for name in args.libraries if name != "flashjit"]
        if "flashjit" in args.libraries:
            variants = [("flashjit" + (f" {c}" if c else ""), c or None) for c in args.flashjit_configs] + variants
        for name, config in variants:
            lib = name.split(" ")[0]
            entry = {"label": LIBRARIES[lib][0] + (f" {config}" if config else "")}
            try:
                calls = LIBRARIES[lib][1](torch, p, inp, args.causal, config)
                out = calls[0]()
                torch.cuda.synchronize()
                entry["rel_error_fp64"] = rel_error(torch, out[0], want)
                for mode in args.modes:
                    t = time_calls(torch, calls, mode, args, flush, gpu)
                    t["tflops"] = row["flops"] / (t["median_ms"] * 1e-3) / 1e12
                    t["gbps"] = row["bytes"] / (t["median_ms"] * 1e-3) / 1e9
                    t["us_per_call"] = t["median_ms"] * 1e3
                    del t["samples_ms"]
                    entry[mode] = t
            except Exception as e:  # noqa: BLE001
                torch.cuda.synchronize()
                entry["error"] = error_text(e)
            row["libraries"][name] = entry
        results.append(row)
        del inp
        torch.cuda.empty_cache()
        mode = args.modes[-1]
        log(f"[{i + 1}/{len(points)}] {p.id}: " + ", ".join(
            f"{n} {e[mode]['tflops']:.0f} TF {e[mode]['gbps']:.0f} GB/s err {e['rel_error_fp64']:.1e}"
            if mode in e else f"{n} {e.get('error', 'n/a')}" for n, e in row["libraries"].items()) + f" ({mode})")
        on_point(results)
    return results


def markdown(results, args, env):
    lines = ["# MLA decode benchmark", "",
             f"{env.get('gpu', 'GPU')}, {env.get('date', '')}, flashjit {env.get('flashjit', '?')}, FlashInfer "
             f"{env.get('flashinfer', '?')}. bf16 latent cache 512 + 64, V 512, page {args.page}"
             f"{', causal steps' if args.causal else ''}. TFLOP/s / GB/s (µs per call); relative error of the "
             "first sequence against fp64.", ""]
    names_ = []
    for r in results:
        for n in r["libraries"]:
            if n not in names_:
                names_.append(n)
    for mode in args.modes:
        lines += [f"## {mode}", "", "| point | " + " | ".join(names_) + " |", "|---|" + "---:|" * len(names_)]
        for r in results:
            cells = []
            for n in names_:
                e = r["libraries"].get(n, {})
                cells.append(f"{e[mode]['tflops']:.0f} / {e[mode]['gbps']:.0f} ({e[mode]['us_per_call']:.0f}) "
                             f"err {e['rel_error_fp64']:.1e}" if mode in e else e.get("error", "n/a"))
            lines.append(f"| {r['id']} | " + " | ".join(cells) + " |")
        lines.append("")
    return "\n".join(lines) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--batch", default="32,64,128")
    ap.add_argument("--cache", default="4k,16k,32k")
    ap.add_argument("--tokens", default="1,2")
    ap.add_argument("--heads", default="16,32,64,128")
    ap.add_argument("--page", type=int, default=64)
    ap.add_argument("--libraries", default="flashjit,flashinfer")
    ap.add_argument("--flashjit-configs", default="",
                    help="';'-separated JSON configs pinning flashjit's tuning, each a variant ('' : the defaults)")
    ap.add_argument("--non-causal", dest="causal", action="store_false",
                    help="steps of two tokens see each other whole (default: causal among themselves)")
    add_timing_arguments(ap)
    args = ap.parse_args()
    args.batch, args.cache, args.tokens = parse_list(args.batch), parse_list(args.cache), parse_list(args.tokens)
    args.heads = parse_list(args.heads)
    args.libraries = names(ap, "--libraries", args.libraries, LIBRARIES)
    args.modes = names(ap, "--modes", args.modes, ("idle", "sustained"))
    args.flashjit_configs = args.flashjit_configs.split(";")
    for c in args.flashjit_configs:
        if c:
            json.loads(c)
    import torch

    if not torch.cuda.is_available():
        log("mla_compare: torch sees no GPU")
        return 3
    gpu, env = environment(torch, ("flashjit",))
    env["flashinfer"] = module_version("flashinfer")
    planned = len(args.batch) * len(args.cache) * len(args.tokens) * len(args.heads)

    def report(rows):
        text = markdown(rows, args, env)
        if len(rows) < planned:
            text += f"\n{len(rows)} of {planned} points measured so far.\n"
        write_outputs(args, {"environment": env, "settings": vars(args), "points": rows}, text)
        return text

    print(report(measure(torch, args, gpu, report)))
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""The MLA decode benchmark: flashjit.mla_decode beside FlashInfer's MLA decode, in one process, on
the same GPU, point by point, each timed the same way in two modes (bench_common.time_calls).

  PYTHONPATH=build/python python3 bench/mla_compare.py [--batch 32,64,128] [--cache 4k,16k,32k]
      [--tokens 1,2] [--heads 16,32,64,128] [--page 64] [--libraries flashjit,flashjit-fp8,flashinfer]
      [--flashjit-configs '{"tuning": {"BN": 16}}';...] [--modes idle,sustained] [--json F] [--markdown F]

The latent cache is DeepSeek's: one KV head of 512 nope + 64 rope columns per token, V its first
512 columns, bf16, paged (shuffled pages), FlashInfer's layout (ckv and kpe apart; flashjit reads
views of the same tensors). TFLOP/s count 2 x (576 + 512) flops per (query row, head, key); GB/s
the bytes a launch must move (the cache once, Q and O). Each library's output is compared with
an fp64 reference on the first sequence of the batch (its last 8 tokens). Many tokens (--tokens
512) are a prefill chunk against the cache, causal among its tokens.
flashjit-fp8 reads the same cache quantised to e4m3 per token (scale = amax / 448 of each row's 512
nope columns; the rope part stays bf16) with Q quantised per (token, head), FlashMLA's fp8 cache
without its per-128-column scales; flashjit-fp8kv the same cache with the bf16 Q (dtype.q) and
the scales beside the pages (scale_layout "cache"); flashjit-fp8rows FlashMLA's fp8 cache itself,
656-byte rows of 512 e4m3 values, 4 fp32 scales (one per 128 columns) and the 64 bf16 rope
columns, read through three views (scales.k_block 128), with the bf16 Q. Their GB/s count
512 + 128 + 4 bytes per cached token (fp8rows: 656), and their errors are against fp64 on the
dequantised inputs.
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

    def bytes(self, fp8=False, fp8_q=None, scale_bytes=4):
        cache = D_NOPE + 2 * D_ROPE + scale_bytes if fp8 else 2 * (D_NOPE + D_ROPE)
        q = D_NOPE + 2 * D_ROPE + 4 if (fp8 if fp8_q is None else fp8_q) else 2 * (D_NOPE + D_ROPE)
        return self.batch * self.cache * cache + self.batch * self.tokens * self.heads * (q + 2 * D_NOPE)


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


CHECKED_TOKENS = 8  # the reference covers the last tokens of a prefill chunk


def reference_first(torch, p, inp, causal, ckv=None, q=None):
    """fp64 output of the first sequence of set 0 (of the cache `ckv` and the queries `q` of set 0
    in their place: dequantised ones), its last CHECKED_TOKENS tokens: [tokens, heads, 512]."""
    first = max(0, p.tokens - CHECKED_TOKENS)
    rows = inp.tables[0][0].long()
    ckv = (inp.ckv if ckv is None else ckv)[rows].reshape(-1, D_NOPE)[:p.cache].double()
    kpe = inp.kpe[rows].reshape(-1, D_ROPE)[:p.cache].double()
    q = torch.cat([inp.q[0][0] if q is None else q[0], inp.q_pe[0][0]], -1)[first:].double()  # [T, H, 576]
    s = torch.einsum("thd,nd->thn", q, torch.cat([ckv, kpe], -1)) * inp.scale
    if causal:
        i = torch.arange(first, p.tokens, device="cuda")[:, None] + (p.cache - p.tokens)
        j = torch.arange(p.cache, device="cuda")[None, :]
        s = s.masked_fill(~(j <= i)[:, None, :], float("-inf"))
    return torch.einsum("thn,nd->thd", torch.softmax(s, -1), ckv)


def flashjit_calls(torch, p, inp, causal, config):
    import flashjit
    return [lambda s=s: flashjit.mla_decode(inp.q[s], inp.q_pe[s], inp.ckv[:, :, None], inp.kpe[:, :, None],
                                            page_table=inp.tables[s], cache_seqlens=inp.lens, causal=causal,
                                            max_seqlen_k=p.cache, config=config)
            for s in range(inp.sets)]


class Fp8Inputs:
    """The cache quantised to e4m3 per token (its slot's scale, amax / 448 over 512 columns; the
    kernel reads K scales by position: [batch, 1, positions] through the page table), each set's
    q per (token, head) ([batch, heads, tokens] scales), and the dequantised values."""

    def __init__(self, torch, p, inp):
        f8 = torch.float8_e4m3fn
        amax = inp.ckv.float().abs().amax(-1).clamp(min=1e-12)                  # [pages, page]
        slot_scale = amax / 448.0
        self.ckv = (inp.ckv.float() / slot_scale[..., None]).to(f8)
        self.ckv_deq = self.ckv.float() * slot_scale[..., None]
        pos = torch.arange(inp.per_seq * p.page, device="cuda")
        self.k_scale = [slot_scale[t.long()[:, pos // p.page], pos % p.page][:, None, :].contiguous()
                        for t in inp.tables]
        self.slot_scale = slot_scale[..., None].contiguous()                   # [pages, page, 1]
        self.q, self.q_scale, self.q_deq = [], [], []
        for q in inp.q:
            qs = (q.float().abs().amax(-1).clamp(min=1e-12) / 448.0)              # [B, T, H]
            q8 = (q.float() / qs[..., None]).to(f8)
            self.q.append(q8)
            self.q_scale.append(qs.permute(0, 2, 1).contiguous())                # [B, H, T]
            self.q_deq.append(q8.float() * qs[..., None])


class Fp8RowInputs:
    """FlashMLA's fp8 rows, [pages, page, 1, 656] bytes: 512 e4m3 values (one fp32 scale per 128
    columns, amax / 448), the 4 scales, the 64 bf16 rope columns; its three views, and the
    dequantised cache."""

    def __init__(self, torch, p, inp):
        f8 = torch.float8_e4m3fn
        blocks = inp.ckv.float().unflatten(-1, (4, 128))                          # [pages, page, 4, 128]
        scale = blocks.abs().amax(-1).clamp(min=1e-12) / 448.0                    # [pages, page, 4]
        nope = (blocks / scale[..., None]).to(f8)
        self.ckv_deq = (nope.float() * scale[..., None]).flatten(-2)
        rows = torch.cat([nope.flatten(-2).view(torch.uint8), scale.view(torch.uint8), inp.kpe.view(torch.uint8)],
                         -1)[:, :, None]
        self.nope, self.scale = rows[..., :512].view(f8), rows[..., 512:528].view(torch.float32)
        self.rope = rows[..., 528:].view(torch.bfloat16)


def flashjit_fp8_calls(torch, p, inp, causal, config):
    import flashjit
    f = inp.fp8
    return [lambda s=s: flashjit.mla_decode(f.q[s], inp.q_pe[s], f.ckv[:, :, None], inp.kpe[:, :, None],
                                            page_table=inp.tables[s], cache_seqlens=inp.lens, causal=causal,
                                            max_seqlen_k=p.cache, config=config, q_scale=f.q_scale[s],
                                            k_scale=f.k_scale[s])
            for s in range(inp.sets)]


def flashjit_fp8kv_calls(torch, p, inp, causal, config):
    import flashjit
    f = inp.fp8
    return [lambda s=s: flashjit.mla_decode(inp.q[s], inp.q_pe[s], f.ckv[:, :, None], inp.kpe[:, :, None],
                                            page_table=inp.tables[s], cache_seqlens=inp.lens, causal=causal,
                                            max_seqlen_k=p.cache, config=config, k_scale=f.slot_scale,
                                            scale_layout="cache")
            for s in range(inp.sets)]


def flashjit_fp8rows_calls(torch, p, inp, causal, config):
    import flashjit
    f = inp.fp8rows
    return [lambda s=s: flashjit.mla_decode(inp.q[s], inp.q_pe[s], f.nope, f.rope, page_table=inp.tables[s],
                                            cache_seqlens=inp.lens, causal=causal, max_seqlen_k=p.cache,
                                            config=config, k_scale=f.scale, scale_layout="cache")
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


LIBRARIES = {"flashjit": ("flashjit", flashjit_calls), "flashjit-fp8": ("flashjit e4m3", flashjit_fp8_calls),
             "flashjit-fp8kv": ("flashjit e4m3 cache, bf16 q", flashjit_fp8kv_calls),
             "flashjit-fp8rows": ("flashjit FlashMLA fp8 rows, bf16 q", flashjit_fp8rows_calls),
             "flashinfer": ("FlashInfer MLA", flashinfer_calls)}


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
        variants = [(name, None) for name in args.libraries if not name.startswith("flashjit")]
        for lib in [n for n in args.libraries if n.startswith("flashjit")][::-1]:
            variants = [(lib + (f" {c}" if c else ""), c or None) for c in args.flashjit_configs] + variants
        for name, config in variants:
            lib = name.split(" ")[0]
            entry = {"label": LIBRARIES[lib][0] + (f" {config}" if config else "")}
            try:
                fp8 = lib in ("flashjit-fp8", "flashjit-fp8kv")
                if fp8 and not hasattr(inp, "fp8"):
                    inp.fp8 = Fp8Inputs(torch, p, inp)
                    inp.fp8.want = reference_first(torch, p, inp, args.causal, inp.fp8.ckv_deq, inp.fp8.q_deq[0])
                    inp.fp8.want_bf16_q = reference_first(torch, p, inp, args.causal, inp.fp8.ckv_deq)
                if lib == "flashjit-fp8rows" and not hasattr(inp, "fp8rows"):
                    inp.fp8rows = Fp8RowInputs(torch, p, inp)
                    inp.fp8rows.want = reference_first(torch, p, inp, args.causal, inp.fp8rows.ckv_deq)
                calls = LIBRARIES[lib][1](torch, p, inp, args.causal, config)
                out = calls[0]()
                torch.cuda.synchronize()
                checked = out[0][max(0, p.tokens - CHECKED_TOKENS):]
                want_here = (inp.fp8rows.want if lib == "flashjit-fp8rows" else want if not fp8
                             else inp.fp8.want_bf16_q if lib == "flashjit-fp8kv" else inp.fp8.want)
                entry["rel_error_fp64"] = rel_error(torch, checked, want_here)
                point_bytes = (p.bytes(True, False, 16) if lib == "flashjit-fp8rows"
                               else p.bytes(fp8, fp8 and lib != "flashjit-fp8kv"))
                for mode in args.modes:
                    t = time_calls(torch, calls, mode, args, flush, gpu)
                    t["tflops"] = row["flops"] / (t["median_ms"] * 1e-3) / 1e12
                    t["gbps"] = point_bytes / (t["median_ms"] * 1e-3) / 1e9
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
        lines += fp8_speedups(results, names_, mode)
    return "\n".join(lines) + "\n"


def fp8_speedups(results, names_, mode):
    """#16's fp8 bar as a table: each fp8 variant's tokens per second over flashjit's bf16 cache
    at the same point (the bf16 call's time over the fp8 one's); none without both."""
    fp8 = [n for n in names_ if n.split(" ")[0] in ("flashjit-fp8", "flashjit-fp8kv", "flashjit-fp8rows")]
    if not fp8 or "flashjit" not in names_:
        return []
    lines = [f"fp8 caches, tokens per second over flashjit's bf16 cache ({mode}):", "",
             "| point | " + " | ".join(fp8) + " |", "|---|" + "---:|" * len(fp8)]
    for r in results:
        base = r["libraries"].get("flashjit", {}).get(mode)
        cells = []
        for n in fp8:
            e = r["libraries"].get(n, {}).get(mode)
            cells.append(f"{base['us_per_call'] / e['us_per_call']:.2f}x" if base and e else "n/a")
        lines.append(f"| {r['id']} | " + " | ".join(cells) + " |")
    return lines + [""]


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

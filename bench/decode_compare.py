#!/usr/bin/env python3
"""The decode benchmark: flashjit's decode family beside its peers, in one process, on the same
GPU, point by point, each library timed the same way in two modes.

  PYTHONPATH=build/python python3 bench/decode_compare.py [--quick] [--json FILE] [--markdown FILE]
      [--batch 1,8,32,128] [--cache 2k,8k,32k,128k] [--tokens 1,2,4,8,16] [--heads 32/8,64/8,8/1]
      [--dim 128] [--pages 16,64] [--libraries flashjit,cudnn,flashinfer,sdpa] [--modes idle,sustained]

Libraries: flashjit.decode on a paged cache (and on a contiguous one), cuDNN's SDPA through the
cuDNN frontend (paged), FlashInfer's paged decode (tensor-core wrapper; its paged prefill wrapper
for steps of several tokens), torch SDPA on a contiguous cache; with fp8 (e4m3, per-tensor scales)
caches: flashjit-fp8 (q quantised too) and flashinfer-fp8 (bf16 q), whose GB/s count the cache
at one byte per value. Peers that are not importable
read n/a (../shared/peers/README.md says how to bring their wheels).

Measure: GB/s of the bytes a launch must move (Q, every cached key's K and V, O) over the
median of --iters launches timed with CUDA events, and µs per call.
  idle       a 0.5 s pause before each point, an L2-flushing memset before each launch;
  sustained  --sustain-s seconds of the library's own back-to-back launches first, then the
             timed launches back to back (no flush, no pause), as in serving; the board sits at
             its power cap. Cache copies rotate so small caches are not served from L2.
  graph      the same launches captured in a CUDA graph (GRAPH_CALLS per replay), replayed for
             --sustain-s seconds, then timed replay by replay: no host launch path, as an
             engine that replays its decode steps runs them (--modes idle,sustained,graph).
Each timed window records the SM clock, the power draw and the clock-limit reasons at its end,
and (sustained) the energy per call: that power times the median call (NVML's energy counter
advances in steps too coarse for the window; bench/nvml.py).
Each peer's output is compared with flashjit's (relative error) as a cross-check.
"""

import argparse
import math
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_common import (add_timing_arguments, e4m3_per_tensor, environment, error_text, log,  # noqa: E402
                          module_version, names, parse_list, rel_error, time_calls, write_outputs)


def heads_list(text):
    return [tuple(int(x) for x in h.split("/")) for h in text.split(",") if h]


# ---- inputs -----------------------------------------------------------------------------------------

class Point:
    def __init__(self, batch, cache, tokens, hq, hk, dim, page):
        self.batch, self.cache, self.tokens, self.hq, self.hk, self.dim, self.page = \
            batch, cache, tokens, hq, hk, dim, page

    @property
    def id(self):
        return f"b{self.batch}_k{self.cache}_q{self.tokens}_h{self.hq}-{self.hk}_d{self.dim}_p{self.page}"

    def bytes(self, kv_elem=2):
        """Bytes a launch must move: the cached K and V at kv_elem bytes a value, Q and O at 2."""
        kv = self.batch * self.cache * self.hk * 2 * self.dim
        qo = 2 * self.batch * self.tokens * self.hq * self.dim
        return kv_elem * kv + 2 * qo

    def flops(self):
        return 4.0 * self.batch * self.hq * self.tokens * self.cache * self.dim


class Inputs:
    """One point's tensors: `sets` copies of a paged cache in FlashInfer's NHD layout [pages, 2,
    page, Hk, D] (flashjit and cuDNN read views of it), page tables handing out pages in a
    shuffled order, cache lengths, queries; a contiguous cache for the contiguous libraries."""

    def __init__(self, torch, p, sets, contiguous, fp8=False):
        dev, dt = "cuda", torch.bfloat16
        per_seq = math.ceil(p.cache / p.page)
        self.pages = p.batch * per_seq
        self.kv = torch.randn(sets * self.pages, 2, p.page, p.hk, p.dim, dtype=dt, device=dev)
        self.tables = []
        for s in range(sets):
            order = torch.randperm(self.pages, device=dev, dtype=torch.int64) + s * self.pages
            self.tables.append(order.view(p.batch, per_seq).to(torch.int32).contiguous())
        self.lens = torch.full((p.batch,), p.cache, dtype=torch.int32, device=dev)
        self.q = [torch.randn(p.batch, p.tokens, p.hq, p.dim, dtype=dt, device=dev) for _ in range(sets)]
        self.k = self.kv[:, 0]
        self.v = self.kv[:, 1]
        self.dense = None
        if contiguous:
            self.dense = [(torch.randn(p.batch, p.cache, p.hk, p.dim, dtype=dt, device=dev),
                           torch.randn(p.batch, p.cache, p.hk, p.dim, dtype=dt, device=dev)) for _ in range(sets)]
        self.sets = sets
        if fp8:  # the same cache and queries in e4m3 with per-tensor scales
            self.kv8, self.kv_scale = e4m3_per_tensor(torch, self.kv)
            self.k8, self.v8 = self.kv8[:, 0], self.kv8[:, 1]
            self.q8, self.q_scale = zip(*(e4m3_per_tensor(torch, q) for q in self.q))


# ---- libraries: each returns a list of callables (one per input set) and the first's output --------

FLASHJIT_CONFIG = None  # --flashjit-config: tuning pinned for flashjit's calls


def flashjit_paged(torch, p, inp, causal):
    import flashjit
    calls = [lambda s=s: flashjit.decode(inp.q[s], inp.k, inp.v, page_table=inp.tables[s], cache_seqlens=inp.lens,
                                         causal=causal, max_seqlen_k=p.cache, config=FLASHJIT_CONFIG)
             for s in range(inp.sets)]
    return calls


def flashjit_fp8(torch, p, inp, causal):
    import flashjit
    return [lambda s=s: flashjit.decode(inp.q8[s], inp.k8, inp.v8, page_table=inp.tables[s], cache_seqlens=inp.lens,
                                        causal=causal, max_seqlen_k=p.cache, config=FLASHJIT_CONFIG,
                                        q_scale=inp.q_scale[s], k_scale=inp.kv_scale, v_scale=inp.kv_scale)
            for s in range(inp.sets)]


def flashjit_contiguous(torch, p, inp, causal):
    import flashjit
    return [lambda s=s: flashjit.decode(inp.q[s], inp.dense[s][0], inp.dense[s][1], causal=causal,
                                        config=FLASHJIT_CONFIG)
            for s in range(inp.sets)]


def sdpa_contiguous(torch, p, inp, causal):
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    mask = None
    if causal and p.tokens > 1:
        from torch.nn.attention.bias import causal_lower_right
        mask = causal_lower_right(p.tokens, p.cache)
    views = [(inp.q[s].transpose(1, 2), inp.dense[s][0].transpose(1, 2), inp.dense[s][1].transpose(1, 2))
             for s in range(inp.sets)]

    def call(s):
        q, k, v = views[s]
        with sdpa_kernel([SDPBackend.CUDNN_ATTENTION, SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION]):
            return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=p.hq != p.hk).transpose(1, 2)

    return [lambda s=s: call(s) for s in range(inp.sets)]


def cudnn_paged(torch, p, inp, causal):
    import cudnn

    handle = cudnn.create_handle()
    q0 = inp.q[0].transpose(1, 2)                     # (B, H, s_q, D) logical
    kc = inp.k.permute(0, 2, 1, 3)                    # containers (blocks, Hk, page, D), strided views
    vc = inp.v.permute(0, 2, 1, 3)
    tables = [t.view(p.batch, 1, -1, 1) for t in inp.tables]
    seq_q = torch.full((p.batch, 1, 1, 1), p.tokens, dtype=torch.int32, device="cuda")
    seq_kv = inp.lens.view(p.batch, 1, 1, 1)
    o = torch.empty_like(q0)
    g = cudnn.pygraph(io_data_type=cudnn.data_type.BFLOAT16, intermediate_data_type=cudnn.data_type.FLOAT,
                      compute_data_type=cudnn.data_type.FLOAT, handle=handle)
    qt, kt, vt = g.tensor_like(q0), g.tensor_like(kc), g.tensor_like(vc)
    tk, tv = g.tensor_like(tables[0]), g.tensor_like(tables[0])
    sq, skv = g.tensor_like(seq_q), g.tensor_like(seq_kv)
    ot, _ = g.sdpa(name="sdpa", q=qt, k=kt, v=vt, is_inference=True, attn_scale=1 / math.sqrt(p.dim),
                   use_padding_mask=True, seq_len_q=sq, seq_len_kv=skv, paged_attention_k_table=tk,
                   paged_attention_v_table=tv, paged_attention_max_seq_len_kv=p.cache,
                   use_causal_mask_bottom_right=causal and p.tokens > 1)
    ot.set_output(True).set_dim(list(o.shape)).set_stride(list(o.stride()))
    g.validate()
    g.build_operation_graph()
    g.create_execution_plans([cudnn.heur_mode.A, cudnn.heur_mode.FALLBACK])
    g.check_support()
    g.build_plans()
    ws = torch.empty(max(g.get_workspace_size(), 1), dtype=torch.uint8, device="cuda")

    def call(s):
        # On torch's current stream, so events bracket it and a graph capture records it.
        cudnn.set_stream(handle=handle, stream=torch.cuda.current_stream().cuda_stream)
        g.execute({qt: inp.q[s].transpose(1, 2), kt: kc, vt: vc, tk: tables[s], tv: tables[s], sq: seq_q,
                   skv: seq_kv, ot: o}, ws, handle=handle)
        return o.transpose(1, 2)

    return [lambda s=s: call(s) for s in range(inp.sets)]


def flashinfer_paged(torch, p, inp, causal, fp8=False):
    import flashinfer

    kv_dtype = torch.float8_e4m3fn if fp8 else torch.bfloat16
    kv = inp.kv8 if fp8 else inp.kv
    scales = {"k_scale": inp.kv_scale.item(), "v_scale": inp.kv_scale.item()} if fp8 else {}

    ws = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
    per_seq = inp.tables[0].shape[1]
    indptr = torch.arange(0, p.batch + 1, dtype=torch.int32, device="cuda") * per_seq
    last = torch.full((p.batch,), p.cache - (per_seq - 1) * p.page, dtype=torch.int32, device="cuda")
    wrappers = []
    for s in range(inp.sets):
        indices = inp.tables[s].flatten()
        if p.tokens == 1:
            w = flashinfer.BatchDecodeWithPagedKVCacheWrapper(ws, kv_layout="NHD", use_tensor_cores=True)
            w.plan(indptr, indices, last, p.hq, p.hk, p.dim, p.page, q_data_type=torch.bfloat16,
                   kv_data_type=kv_dtype)
        else:
            w = flashinfer.BatchPrefillWithPagedKVCacheWrapper(ws, kv_layout="NHD")
            qo_indptr = torch.arange(0, p.batch + 1, dtype=torch.int32, device="cuda") * p.tokens
            w.plan(qo_indptr, indptr, indices, last, p.hq, p.hk, p.dim, p.page, causal=causal,
                   q_data_type=torch.bfloat16, kv_data_type=kv_dtype)
        wrappers.append(w)
    if p.tokens == 1:
        return [lambda s=s: wrappers[s].run(inp.q[s][:, 0], kv, **scales).unsqueeze(1) for s in range(inp.sets)]
    return [lambda s=s: wrappers[s].run(inp.q[s].flatten(0, 1), kv, **scales).view(p.batch, p.tokens, p.hq, p.dim)
            for s in range(inp.sets)]


def flashinfer_fp8(torch, p, inp, causal):
    return flashinfer_paged(torch, p, inp, causal, fp8=True)


# name: (label, calls, reads a contiguous cache, bytes per cached value)
LIBRARIES = {
    "flashjit": ("flashjit paged", flashjit_paged, False, 2),
    "flashjit-contiguous": ("flashjit contiguous", flashjit_contiguous, True, 2),
    "cudnn": ("cuDNN paged", cudnn_paged, False, 2),
    "flashinfer": ("FlashInfer paged", flashinfer_paged, False, 2),
    "sdpa": ("torch SDPA contiguous", sdpa_contiguous, True, 2),
    "flashjit-fp8": ("flashjit paged e4m3", flashjit_fp8, False, 1),
    "flashinfer-fp8": ("FlashInfer paged e4m3", flashinfer_fp8, False, 1),
}


# ---- timing ---------------------------------------------------------------------------------------

GRAPH_CALLS = 8  # calls captured in one CUDA graph (graph mode); a replay's time is divided by them


def time_graph(torch, calls, args, gpu):
    """graph mode: GRAPH_CALLS calls (cycling the input sets) captured in one CUDA graph after a
    warm-up on the capture stream, replayed back to back for --sustain-s seconds, then --iters
    replays timed; a call's time is a replay's over GRAPH_CALLS. The kernels under sustained load
    without the host's launch path, as an engine that replays its decode steps sees them."""
    n = len(calls)
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for i in range(max(2, n)):  # per-stream state (workspaces, plans) exists before capture
            calls[i % n]()
    stream.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, stream=stream):
        for i in range(GRAPH_CALLS):
            calls[i % n]()
    torch.cuda.synchronize()
    end = time.time() + args.sustain_s
    while time.time() < end:
        graph.replay()
    torch.cuda.synchronize()
    energy0 = gpu.energy_mj()
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(args.iters)]
    stops = [torch.cuda.Event(enable_timing=True) for _ in range(args.iters)]
    for i in range(args.iters):
        starts[i].record()
        graph.replay()
        stops[i].record()
    torch.cuda.synchronize()
    samples = sorted(a.elapsed_time(b) / GRAPH_CALLS for a, b in zip(starts, stops))
    tele = gpu.sample(energy0)
    median = samples[len(samples) // 2]
    result = {"median_ms": median, "min_ms": samples[0], "samples_ms": samples, "calls_per_replay": GRAPH_CALLS,
              **tele}
    if tele["power_w"] is not None:
        result["energy_per_call_j"] = tele["power_w"] * median * 1e-3
    del graph
    return result


def measure(torch, args, gpu, on_point=None):
    """Every point's row; on_point(rows so far) after each, so a run cut short keeps what it measured."""
    points = [Point(b, c, t, hq, hk, args.dim, pg)
              for b in args.batch for c in args.cache for t in args.tokens for (hq, hk) in args.heads
              for pg in args.pages]
    flush = torch.empty(args.flush_mb << 18, dtype=torch.int32, device="cuda")
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    results = []
    for i, p in enumerate(points):
        row = {"id": p.id, "shape": vars(p).copy(), "bytes": p.bytes(), "flops": p.flops(), "libraries": {}}
        kv_bytes = p.bytes()
        sets = max(1, min(8, math.ceil(3 * l2 / kv_bytes)))
        contiguous_needed = any(LIBRARIES[name][2] for name in args.libraries)
        fp8_needed = any(LIBRARIES[name][3] == 1 for name in args.libraries)
        per_copy = kv_bytes * ((2 if contiguous_needed else 1) + (0.5 if fp8_needed else 0))
        if per_copy * sets > args.max_gb * 2 ** 30:
            sets = max(1, int(args.max_gb * 2 ** 30 // per_copy))
        try:
            inp = Inputs(torch, p, sets, contiguous_needed and per_copy * sets <= args.max_gb * 2 ** 30, fp8_needed)
        except Exception as e:  # noqa: BLE001  (out of memory)
            row["error"] = f"inputs: {type(e).__name__}: {e}"
            results.append(row)
            log(f"[{i + 1}/{len(points)}] {p.id}: {row['error']}")
            if on_point:
                on_point(results)
            continue
        reference = None
        for name in args.libraries:
            label, make, contiguous, kv_elem = LIBRARIES[name]
            entry = {"label": label, "bytes": p.bytes(kv_elem)}
            try:
                if contiguous and inp.dense is None:
                    raise RuntimeError("a contiguous cache does not fit beside the paged one")
                calls = make(torch, p, inp, args.causal)
                out = calls[0]()
                torch.cuda.synchronize()
                if reference is None and name.startswith("flashjit"):
                    reference = out.clone()
                elif reference is not None and not contiguous:
                    entry["rel_error_vs_flashjit"] = rel_error(torch, out, reference)
                for mode in args.modes:
                    try:
                        t = time_graph(torch, calls, args, gpu) if mode == "graph" else \
                            time_calls(torch, calls, mode, args, flush, gpu)
                    except Exception as e:  # noqa: BLE001  (a library that cannot be captured)
                        torch.cuda.synchronize()
                        entry[f"{mode}_error"] = error_text(e)
                        continue
                    t["gbps"] = entry["bytes"] / (t["median_ms"] * 1e-3) / 1e9
                    t["us_per_call"] = t["median_ms"] * 1e3
                    entry[mode] = t
            except Exception as e:  # noqa: BLE001
                entry["error"] = error_text(e)
            row["libraries"][name] = entry
        results.append(row)
        del inp
        torch.cuda.empty_cache()
        cells = []
        for name, e in row["libraries"].items():
            mode = args.modes[-1]
            cells.append(f"{name} {e[mode]['gbps']:.0f}" if mode in e else f"{name} n/a")
        log(f"[{i + 1}/{len(points)}] {p.id}: " + ", ".join(cells) + f" GB/s ({args.modes[-1]})")
        if on_point:
            on_point(results)
    return results


# ---- report ---------------------------------------------------------------------------------------

def markdown(results, args, env):
    lines = ["# Decode benchmark", "",
             f"{env.get('gpu', 'GPU')}, {env.get('date', '')}, flashjit {env.get('flashjit', '?')}; "
             f"peers: {', '.join(f'{k} {v}' for k, v in env.get('peers', {}).items())}.", "",
             "GB/s of Q, the cached K and V (one byte a value for the e4m3 columns), and O per launch (median of "
             f"{args.iters}); µs per call in brackets. idle: a pause before each point and an L2 flush before "
             f"each launch; sustained: {args.sustain_s} s of the library's own launches first, no flush; graph: "
             f"the same after capturing {GRAPH_CALLS} calls in a CUDA graph, timed per replay (no host launch path).",
             ""]
    names = list(args.libraries)
    for mode in args.modes:
        lines += [f"## {mode}", "", "| point | " + " | ".join(LIBRARIES[n][0] for n in names) + " | SM MHz / W |",
                  "|---|" + "---:|" * len(names) + "---|"]
        for r in results:
            cells = []
            tele = ""
            for n in names:
                e = r["libraries"].get(n, {})
                if mode in e:
                    cells.append(f"{e[mode]['gbps']:.0f} ({e[mode]['us_per_call']:.1f})")
                    if n == "flashjit":
                        tele = f"{e[mode].get('sm_mhz')} / {e[mode].get('power_w')}"
                else:
                    cells.append("n/a")
            lines.append(f"| {r['id']} | " + " | ".join(cells) + f" | {tele} |")
        lines.append("")
    return "\n".join(lines) + "\n"


def write_report(results, args, env, planned):
    """The JSON report and the markdown page of the points so far (rewritten after every point, so
    a run stopped at its time limit keeps what it measured); returns the page."""
    report = {"environment": env, "settings": {k: v for k, v in vars(args).items() if k != "heads"},
              "points": results, "planned_points": planned}
    text = markdown(results, args, env)
    if len(results) < planned:
        text += f"\n{len(results)} of {planned} points measured so far.\n"
    write_outputs(args, report, text)
    return text


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--batch", default="1,8,32,128")
    ap.add_argument("--cache", default="2k,8k,32k,128k")
    ap.add_argument("--tokens", default="1,2,4,8,16")
    ap.add_argument("--heads", default="32/8,64/8,8/1")
    ap.add_argument("--dim", type=int, default=128)
    ap.add_argument("--pages", default="16,64")
    ap.add_argument("--libraries", default="flashjit,flashjit-contiguous,cudnn,flashinfer,sdpa")
    add_timing_arguments(ap, modes_help="idle, sustained and/or graph")
    ap.add_argument("--non-causal", dest="causal", action="store_false",
                    help="steps of several tokens see each other whole (default: causal among themselves)")
    ap.add_argument("--max-gb", type=float, default=60.0, help="inputs per point at most (GiB)")
    ap.add_argument("--quick", action="store_true", help="batch 1,32; cache 8k,32k; tokens 1,4; heads 32/8; page 16")
    ap.add_argument("--flashjit-config", default="",
                    help='JSON pinning flashjit\'s tuning, e.g. \'{"tuning": {"BN": 128, "num_kv_stages": 2}}\'')
    args = ap.parse_args()
    global FLASHJIT_CONFIG
    FLASHJIT_CONFIG = args.flashjit_config or None
    if args.quick:
        args.batch, args.cache, args.tokens, args.heads, args.pages = "1,32", "8k,32k", "1,4", "32/8", "16"
    args.batch, args.cache, args.tokens = parse_list(args.batch), parse_list(args.cache), parse_list(args.tokens)
    args.heads, args.pages = heads_list(args.heads), parse_list(args.pages)
    args.libraries = names(ap, "--libraries", args.libraries, LIBRARIES)
    args.modes = names(ap, "--modes", args.modes, ("idle", "sustained", "graph"))
    import torch

    if not torch.cuda.is_available():
        log("decode_compare: torch sees no GPU")
        return 3
    gpu, env = environment(torch, ("flashjit",))
    env["peers"] = {m: module_version(m) for m in ("cudnn", "flashinfer")}
    planned = len(args.batch) * len(args.cache) * len(args.tokens) * len(args.heads) * len(args.pages)
    text = write_report(measure(torch, args, gpu, on_point=lambda rows: write_report(rows, args, env, planned)),
                        args, env, planned)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())

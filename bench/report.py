"""Pure formatting and merging logic of the peer comparison (no torch, no GPU).

flashjit_bench writes a JSON report ("flashjit.bench.v1"); bench/peer_compare.py times torch SDPA
(cuDNN and FA2 backends) on the same shapes and calls into this module to merge the results,
compute geometric means and render the console table and docs/benchmarks.md. The JIT latency
report of flashjit_jit_latency ("flashjit.jit_latency.v1") adds a section when given.
"""

import math

BACKENDS = ("flashjit", "cudnn", "fa2")
BACKEND_TITLES = {"flashjit": "flashjit", "cudnn": "cuDNN", "fa2": "FA2"}

# Published JIT/cache figures of other systems (shared/reference/jit_cache_anchors.md).
PUBLISHED_JIT = [
    ("FlashInfer, nvcc + ninja JIT", "cold compile per module", "15–120 s",
     "FlashInfer #972 (\"within 15 s\" target); vLLM RFC #47456 (~120 s first-use JIT at boot)"),
    ("FlashInfer CuTe-DSL kernels", "cold compile", "0.4–4 s",
     "FlashInfer design doc cute_dsl_kernel_cache.md §4"),
    ("FlashInfer CuTe-DSL kernels", "reload from disk (JITLink)", "3–30 ms",
     "FlashInfer design doc cute_dsl_kernel_cache.md §4"),
    ("Triton", "disk-cache hit per kernel", "~3 ms", "PyTorch PR #148561"),
    ("Triton", "warm launch overhead", "3–27 µs",
     "tritonbench PR #1059; Triton PRs #3648, #7768"),
    ("cuDNN frontend SDPA", "execute() host cost", "24–51 µs",
     "cudnn-frontend PR #1099 (FlashInfer TVM-FFI launch: 12–15 µs)"),
]


# ---- keys, flops, versions ------------------------------------------------------------------------

def point_key(point):
    """Identifies a problem independently of who ran it."""
    s = point.get("shape", {})
    return (point.get("dtype"), s.get("head_dim_qk", point.get("head_dim")),
            s.get("head_dim_v", point.get("head_dim")), point.get("mask"), s.get("batch"),
            s.get("seqlen_q"), s.get("seqlen_k"), s.get("heads_q"), s.get("heads_k"))


def attention_flops(shape, mask):
    """4*B*H*Sq*Sk*D with D = (Dqk + Dv) / 2, halved for causal (the FlashAttention count)."""
    d = 0.5 * (shape["head_dim_qk"] + shape["head_dim_v"])
    f = 4.0 * shape["batch"] * shape["heads_q"] * shape["seqlen_q"] * shape["seqlen_k"] * d
    return f / 2 if mask == "causal" else f


def tflops(flops, ms):
    if not ms or ms <= 0 or flops is None:
        return None
    return flops / (ms * 1e-3) / 1e12


def cudnn_version_string(v):
    """torch.backends.cudnn.version() -> "9.19.0" (9.x: M*10000+m*100+p; 8.x: M*1000+m*100+p)."""
    if v is None:
        return "n/a"
    v = int(v)
    if v >= 90000:
        return "%d.%d.%d" % (v // 10000, (v % 10000) // 100, v % 100)
    return "%d.%d.%d" % (v // 1000, (v % 1000) // 100, v % 100)


def torch_support(point):
    """(True, "") when torch SDPA can run the point's problem as flashjit defines it, else
    (False, reason). torch takes dense 16-bit [B, H, S, D] tensors; its causal mask is aligned to
    the top left, flashjit's to the bottom right, so they agree only when Sq == Sk."""
    cfg = point.get("config", {}) or {}
    s = point.get("shape", {})
    if point.get("dtype") not in ("bf16", "fp16"):
        return False, "dtype %s" % point.get("dtype")
    if cfg.get("varlen") or "seqlens_q" in s:
        return False, "ragged batch"
    if (cfg.get("head_dim", {}) or {}).get("rope"):
        return False, "separate rope columns"
    if (cfg.get("kv_layout", {}) or {}).get("paged"):
        return False, "paged KV"
    mask = point.get("mask")
    if mask not in ("none", "causal"):
        return False, "mask %s" % mask
    if mask == "causal" and s.get("seqlen_q") != s.get("seqlen_k"):
        return False, "causal with Sq != Sk (torch aligns the mask top-left)"
    return True, ""


# ---- merging and geometric means ------------------------------------------------------------------

def geomean(values):
    vals = [v for v in values if v is not None and v > 0 and math.isfinite(v)]
    if not vals:
        return None
    return math.exp(sum(math.log(v) for v in vals) / len(vals))


def _ratio(a, b):
    if a is None or b is None or b <= 0:
        return None
    return a / b


def merge(flashjit_report, torch_results):
    """One row per flashjit point: its result and the torch backends' (matched by point_key).

    torch_results: a list of {"key": [...], "backend": "cudnn"|"fa2", "median_ms", "min_ms",
    "tflops", "error"} as peer_compare.py records them."""
    by_key = {}
    for r in torch_results or []:
        by_key[(tuple(r["key"]), r["backend"])] = r
    rows = []
    for p in flashjit_report.get("points", []):
        key = point_key(p)
        row = {
            "id": p.get("id"),
            "key": list(key),
            "dtype": p.get("dtype"),
            "head_dim": p.get("head_dim"),
            "mask": p.get("mask"),
            "shape": p.get("shape", {}),
            "flops": p.get("flops"),
            "kernel": p.get("kernel"),
            "check": p.get("check"),
            "flashjit": {
                "median_ms": p.get("median_ms"),
                "min_ms": p.get("min_ms"),
                "tflops": p.get("tflops"),
                "error": p.get("error"),
                "telemetry": p.get("telemetry"),
                "energy_pj_per_flop": p.get("energy_pj_per_flop"),
            },
        }
        for b in ("cudnn", "fa2"):
            t = by_key.get((key, b))
            row[b] = dict(t) if t else {"tflops": None, "error": "not run"}
            row[b].pop("key", None)
        row["ratio_cudnn"] = _ratio(row["flashjit"]["tflops"], row["cudnn"].get("tflops"))
        row["ratio_fa2"] = _ratio(row["flashjit"]["tflops"], row["fa2"].get("tflops"))
        rows.append(row)
    return rows


def geomean_groups(rows):
    """Geometric means overall and per dtype / head dim / mask. Each backend's mean is over the
    rows where it has a number; each ratio's over the rows where both sides have one."""
    groups = [("all", lambda r: True)]
    for field, title in (("dtype", "dtype"), ("head_dim", "head dim"), ("mask", "mask")):
        values = {r[field] for r in rows if r.get(field) is not None}
        for v in sorted(values, key=lambda x: (not isinstance(x, (int, float)), x if isinstance(
                x, (int, float)) else 0, str(x))):
            groups.append(("%s %s" % (title, v), lambda r, f=field, v=v: r.get(f) == v))
    out = []
    for name, pred in groups:
        sel = [r for r in rows if pred(r)]
        if not sel:
            continue
        g = {"group": name, "points": len(sel)}
        for b in BACKENDS:
            vals = [r[b].get("tflops") for r in sel]
            g[b] = geomean(vals)
            g[b + "_n"] = sum(1 for v in vals if v)
        for rk in ("ratio_cudnn", "ratio_fa2"):
            vals = [r.get(rk) for r in sel]
            g[rk] = geomean(vals)
            g[rk + "_n"] = sum(1 for v in vals if v)
        out.append(g)
    return out


# ---- formatting -----------------------------------------------------------------------------------

def fmt_tflops(v):
    return "n/a" if v is None else "%.1f" % v


def fmt_ratio(v):
    return "n/a" if v is None else "%.2fx" % v


def fmt_ms(v):
    if v is None:
        return "n/a"
    if v >= 1000:
        return "%.1f s" % (v / 1000)
    if v >= 100:
        return "%.0f ms" % v
    if v >= 10:
        return "%.1f ms" % v
    if v >= 0.1:
        return "%.2f ms" % v
    return "%.3f ms" % v


def fmt_us(v):
    if v is None:
        return "n/a"
    return "%.2f µs" % v if v < 1 else "%.1f µs" % v if v < 100 else "%.0f µs" % v


def _seq(shape):
    sq, sk = shape.get("seqlen_q"), shape.get("seqlen_k")
    return str(sq) if sq == sk else "%s/%s" % (sq, sk)


def _check(row):
    c = row.get("check")
    if not isinstance(c, dict):
        return "-"
    if c.get("nonfinite"):
        return "FAIL %s non-finite" % c["nonfinite"]
    err = c.get("rel_error")
    return "%s %s" % ("ok" if c.get("passed") else "FAIL",
                      "%.1e" % err if isinstance(err, (int, float)) else "nan")


def _cell(row, backend):
    v = row[backend].get("tflops")
    return fmt_tflops(v)


def console_table(rows, groups):
    lines = []
    hdr = "%-5s %4s %-6s %6s %5s %4s %9s %9s %9s %8s %8s  %s" % (
        "dtype", "hd", "mask", "seqlen", "batch", "hq", "flashjit", "cuDNN", "FA2", "fj/cuDNN",
        "fj/FA2", "check")
    lines.append("TFLOP/s (median)")
    lines.append(hdr)
    for r in rows:
        s = r["shape"]
        lines.append("%-5s %4s %-6s %6s %5s %4s %9s %9s %9s %8s %8s  %s" % (
            r["dtype"], r["head_dim"], r["mask"], _seq(s), s.get("batch"), s.get("heads_q"),
            _cell(r, "flashjit"), _cell(r, "cudnn"), _cell(r, "fa2"), fmt_ratio(r["ratio_cudnn"]),
            fmt_ratio(r["ratio_fa2"]), _check(r)))
    lines.append("")
    lines.append("Geometric means (TFLOP/s; ratios over points where both ran)")
    lines.append("%-14s %6s %9s %9s %9s %8s %8s" % ("group", "points", "flashjit", "cuDNN", "FA2",
                                                    "fj/cuDNN", "fj/FA2"))
    for g in groups:
        lines.append("%-14s %6d %9s %9s %9s %8s %8s" % (
            g["group"], g["points"], fmt_tflops(g["flashjit"]), fmt_tflops(g["cudnn"]),
            fmt_tflops(g["fa2"]), fmt_ratio(g["ratio_cudnn"]), fmt_ratio(g["ratio_fa2"])))
    return "\n".join(lines) + "\n"


def _md_escape(text):
    return str(text).replace("|", "\\|").replace("\n", " ")


def _short_error(err, limit=80):
    if not err:
        return ""
    first = str(err).strip().splitlines()[0] if str(err).strip() else str(err)
    return first if len(first) <= limit else first[:limit - 3] + "..."


def environment_lines(env):
    """Markdown bullet lines of the environment dict peer_compare.py collects."""
    order = [("date", "Date (UTC)"), ("gpu", "GPU"), ("driver", "Driver"),
             ("cuda_runtime", "CUDA (torch runtime)"), ("driver_cuda", "CUDA (driver API)"),
             ("nvrtc", "NVRTC (flashjit)"), ("torch", "torch"), ("cudnn", "cuDNN (torch)"),
             ("flash_impl", "torch flash backend"), ("flashjit", "flashjit"),
             ("power_limit", "Power limit"), ("clocks", "SM clock (current / max)"),
             ("host", "Host CPU")]
    lines = []
    for k, title in order:
        if env.get(k) not in (None, ""):
            lines.append("- %s: %s" % (title, _md_escape(env[k])))
    return lines


def cooldown_line(settings):
    """The Method line on the idle pause before each point (both harnesses take the same one)."""
    ms = settings.get("cooldown_ms", 0)
    if not ms:
        return ("- Points ran back to back: a point's clocks depend on the power drawn by the "
                "points before it.")
    return ("- Each point starts from an idle GPU: a %d ms pause before its warm-up (%d ms for "
            "torch), so no point runs at the clocks the power draw of the points before it left."
            % (ms, settings.get("torch_cooldown_ms", ms) or 0))


def sustained_markdown(merged):
    """The sustained-load section: each library timed after its own back-to-back launches, at the
    board's power cap; geometric means, and per shape the ratio, clocks, power and energy."""
    settings = merged.get("settings", {})
    rows, groups = merged.get("rows", []), merged.get("geomeans", [])
    out = ["## Sustained load", "",
           "Each library timed after %s s of its own back-to-back launches, then %s timed launches "
           "back to back (no L2 flush, no pause), as in serving: the board sits at its power cap. "
           "SM clock, power and clock-limit reasons at the end of the timed launches, from NVML; energy "
           "per FLOP is that power times the median launch (NVML's energy counter advances in steps of "
           "about 0.1 s, longer than most timed windows)." % (settings.get("sustain_s", "?"), settings.get("iters", "?")), "",
           "| group | points | flashjit | cuDNN | FA2 | flashjit / cuDNN | flashjit / FA2 | "
           "flashjit pJ/FLOP | cuDNN pJ/FLOP |",
           "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    energy = {b: {} for b in ("flashjit", "cudnn")}
    for g in groups:
        name = g["group"]
        for b in energy:
            vals = [r[b].get("energy_pj_per_flop") for r in rows if _in_group(r, name)]
            energy[b][name] = geomean(vals)
        out.append("| %s | %d | %s | %s | %s | %s | %s | %s | %s |" % (
            name, g["points"], fmt_tflops(g["flashjit"]), fmt_tflops(g["cudnn"]), fmt_tflops(g["fa2"]),
            fmt_ratio(g["ratio_cudnn"]), fmt_ratio(g["ratio_fa2"]), _fmt_energy(energy["flashjit"][name]),
            _fmt_energy(energy["cudnn"][name])))
    out += ["", "| dtype | head dim | mask | seqlen | flashjit | cuDNN | flashjit / cuDNN | flashjit MHz / W "
            "| cuDNN MHz / W | limits (flashjit) |", "|---|---:|---|---:|---:|---:|---:|---|---|---|"]
    for r in rows:
        tele = {b: (r[b].get("telemetry") or {}) for b in ("flashjit", "cudnn")}
        out.append("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
            r["dtype"], r["head_dim"], r["mask"], _seq(r["shape"]), fmt_tflops(r["flashjit"].get("tflops")),
            fmt_tflops(r["cudnn"].get("tflops")), fmt_ratio(r["ratio_cudnn"]),
            _fmt_clock(tele["flashjit"]), _fmt_clock(tele["cudnn"]),
            ", ".join(tele["flashjit"].get("limit_reasons") or []) or "-"))
    return out + [""]


def _in_group(row, name):
    if name == "all":
        return True
    for field, title in (("dtype", "dtype"), ("head_dim", "head dim"), ("mask", "mask")):
        if name.startswith(title + " "):
            return str(row.get(field)) == name[len(title) + 1:]
    return False


def _fmt_energy(v):
    return "n/a" if v is None else "%.2f" % v


def _fmt_clock(t):
    if not t or t.get("sm_mhz") is None:
        return "n/a"
    return "%s / %s" % (t["sm_mhz"], "n/a" if t.get("power_w") is None else "%.0f" % t["power_w"])


def render_markdown(merged, jit=None, sustained=None):
    env = merged.get("env", {})
    settings = merged.get("settings", {})
    rows = merged.get("rows", [])
    groups = merged.get("geomeans", [])
    out = ["# flashjit benchmarks", "",
           "Generated by `scripts/bench` (bench/peer_compare.py); do not edit by hand.", ""]
    out += ["## Environment", ""] + environment_lines(env) + [""]
    out += ["## Method", "",
            "- Forward attention, TFLOP/s = 4·B·H·Sq·Sk·D / time, halved for causal (the "
            "FlashAttention convention; softmax FLOPs not counted).",
            ("- Shapes: the FlashAttention-3 grid, batch·seqlen = 16384 tokens and heads·head_dim = "
             "2048, seqlen 512…16k, bf16 and fp16, head dim 64/128/256, causal and not."
             if (merged.get("flashjit_report") or {}).get("mode", "grid") == "grid"
             else "- Shapes: as listed below."),
            ("- Timing (sustained mode): CUDA events around each launch, median of %s launches after %s "
             "warm-up launches and %s s of the library's own back-to-back launches; no L2 flush, no pause; "
             "inputs rotate over enough buffers to exceed 3× L2. torch runs "
             % (settings.get("iters", "?"), settings.get("warmup", "?"), settings.get("sustain_s", "?"))
             if settings.get("timing_mode") == "sustained" else
             "- Timing: CUDA events around each launch, median of %s launches after %s warm-up "
             "launches; before each launch a %s MB memset flushes L2 and hides the host launch "
             "cost; inputs (random normal) rotate over enough buffers to exceed 3× L2. torch runs "
             % (settings.get("iters", "?"), settings.get("warmup", "?"), settings.get("flush_mb", "?"))) +
            "the same loop: `F.scaled_dot_product_attention` on [B, H, S, D] tensors under "
            "`sdpa_kernel(SDPBackend.CUDNN_ATTENTION)` and `sdpa_kernel(SDPBackend.FLASH_ATTENTION)`.",
            cooldown_line(settings),
            "- flashjit and torch run in separate processes on the same GPU, one after the other.",
            "- `check`: flashjit's output against the fp32 reference kernel before timing "
            "(‖out−ref‖/‖ref‖; on a problem capped at seqlen 2k and 4096 tokens).",
            "- n/a: the backend rejected the shape or failed (reasons below the table).", ""]
    if rows and all(r[b].get("error") == "not run" for r in rows for b in ("cudnn", "fa2")):
        out[-1:-1] = ["- torch was not measured in this run: the cuDNN and FA2 columns are empty."]

    out += ["## Summary (geometric means)", "",
            "| group | points | flashjit | cuDNN | FA2 | flashjit / cuDNN | flashjit / FA2 |",
            "|---|---:|---:|---:|---:|---:|---:|"]
    for g in groups:
        out.append("| %s | %d | %s | %s | %s | %s | %s |" % (
            g["group"], g["points"], fmt_tflops(g["flashjit"]), fmt_tflops(g["cudnn"]),
            fmt_tflops(g["fa2"]), fmt_ratio(g["ratio_cudnn"]), fmt_ratio(g["ratio_fa2"])))
    out.append("")

    out += ["## Per shape (TFLOP/s, median)", "",
            "| dtype | head dim | mask | seqlen | batch | heads | flashjit | cuDNN | FA2 | "
            "flashjit / cuDNN | flashjit / FA2 | flashjit ms | check | kernel |",
            "|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|"]
    notes = []
    for r in rows:
        s = r["shape"]
        cells = []
        for b in BACKENDS:
            v = r[b].get("tflops")
            if v is None and r[b].get("error") and r[b]["error"] != "not run":
                notes.append("%s %s: %s" % (r.get("id"), BACKEND_TITLES[b],
                                            _short_error(r[b]["error"], 160)))
            cells.append(fmt_tflops(v))
        heads = str(s.get("heads_q"))
        if s.get("heads_k") != s.get("heads_q"):
            heads += "/%s" % s.get("heads_k")
        out.append("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | `%s` |" % (
            r["dtype"], r["head_dim"], r["mask"], _seq(s), s.get("batch"), heads, cells[0],
            cells[1], cells[2], fmt_ratio(r["ratio_cudnn"]), fmt_ratio(r["ratio_fa2"]),
            "n/a" if r["flashjit"].get("median_ms") is None else "%.3f" % r["flashjit"]["median_ms"],
            _check(r), _md_escape(r.get("kernel") or "-")))
    out.append("")
    if notes:
        out += ["<details><summary>n/a reasons</summary>", ""]
        out += ["- " + _md_escape(n) for n in notes]
        out += ["", "</details>", ""]
    if sustained:
        out += sustained_markdown(sustained)
    if jit:
        out += jit_markdown(jit)
    return "\n".join(out).rstrip() + "\n"


def _stat(d, key="median"):
    if not isinstance(d, dict):
        return None
    return d.get(key)


def jit_markdown(jit):
    """The JIT latency section from a flashjit_jit_latency report."""
    host = jit.get("host", {})
    build = jit.get("build", {})
    gpu = jit.get("gpu") or {}
    out = ["## JIT latency", "",
           "Measured by `flashjit_jit_latency` on %s (%s cores), NVRTC %s%s, %s." % (
               host.get("cpu", "?"), host.get("cpu_cores", "?"), build.get("nvrtc", "?"),
               (", GPU " + gpu["name"]) if gpu.get("name") else ", no GPU", host.get("date", "?")),
           ""]
    cold = jit.get("cold", [])
    if cold:
        out += ["### Cold compile (NVRTC; every run into a fresh, empty cache directory)", "",
                "| config | arch | kernel | generate | NVRTC (median) | whole miss (median) | "
                "whole miss (max) | runs |",
                "|---|---|---|---:|---:|---:|---:|---:|"]
        for r in cold:
            if "skipped" in r or "error" in r:
                why = ("skipped: " + r["skipped"]) if "skipped" in r else ("error: " + r["error"])
                out.append("| %s | %s | %s | | | | | |" % (r["config"], r["arch"],
                                                           _md_escape(_short_error(why, 120))))
                continue
            out.append("| %s | %s | `%s` | %s | %s | %s | %s | %s |" % (
                r["config"], r["arch"], r.get("kernel", "-"), fmt_ms(_stat(r.get("generate_ms"))),
                fmt_ms(_stat(r.get("compile_ms"))), fmt_ms(_stat(r.get("build_ms"))),
                fmt_ms(_stat(r.get("build_ms"), "max")), r.get("runs", "")))
        out.append("")
    hits = jit.get("disk_hit", [])
    if hits:
        gpu_steps = any("module_load_ms" in (h.get("steps") or {}) for h in hits)
        cols = ["parse_ms", "generate_ms", "key_ms", "disk_read_verify_ms", "decode_ms"]
        if gpu_steps:
            cols.append("module_load_ms")
        cols += ["total_ms", "first_call_ms"]
        titles = {"parse_ms": "parse", "generate_ms": "resolve + generate", "key_ms": "key",
                  "disk_read_verify_ms": "disk read + verify", "decode_ms": "decode",
                  "module_load_ms": "module load", "total_ms": "sum of steps",
                  "first_call_ms": "first %s() of the process" % (
                      "get_kernel" if gpu_steps else "build")}
        out += ["### Cache hit in a fresh process (medians)", "",
                "A child process per run, against a warm cache directory; CUDA context creation "
                "is excluded (timed apart).", "",
                "| config | arch | " + " | ".join(titles[c] for c in cols) + " |",
                "|---|---|" + "---:|" * len(cols)]
        for h in hits:
            if "skipped" in h or "error" in h:
                why = ("skipped: " + h["skipped"]) if "skipped" in h else ("error: " + h["error"])
                out.append("| %s | %s | %s |" % (h["config"], h["arch"],
                                                 _md_escape(_short_error(why, 120))) +
                           " |" * (len(cols) - 1))
                continue
            st = h.get("steps", {})
            out.append("| %s | %s | " % (h["config"], h["arch"]) +
                       " | ".join(fmt_ms(_stat(st.get(c))) for c in cols) + " |")
        ctx = [_stat((h.get("steps") or {}).get("context_init_ms")) for h in hits]
        ctx = [c for c in ctx if c is not None]
        if ctx:
            out += ["", "CUDA context creation in those processes (not included above): %s .. %s." % (
                fmt_ms(min(ctx)), fmt_ms(max(ctx)))]
        out.append("")
    mem = jit.get("memory_hit", [])
    launch = jit.get("launch", [])
    if mem or launch:
        out += ["### In-memory hit and launch overhead (medians)", "",
                "| config | arch | in-memory hit | launch() | launch() + sync |",
                "|---|---|---:|---:|---:|"]
        launch_by = {(l["config"], l["arch"]): l for l in launch}
        for m in mem:
            l = launch_by.get((m["config"], m["arch"]), {})
            if "skipped" in m:
                out.append("| %s | %s | skipped | | |" % (m["config"], m["arch"]))
                continue
            hit = "error" if "error" in m else fmt_us(_stat(m.get("per_call_us")))
            la = "n/a" if not l or "error" in l or "skipped" in l else fmt_us(_stat(l.get("launch_us")))
            ls = "n/a" if not l or "error" in l or "skipped" in l else fmt_us(
                _stat(l.get("launch_sync_us")))
            out.append("| %s | %s | %s | %s | %s |" % (m["config"], m["arch"], hit, la, ls))
        what = {m.get("what") for m in mem if m.get("what")}
        if what:
            out += ["", "In-memory hit: " + "; ".join(sorted(what)) + "."]
        out.append("")
    out += ["### Published figures of other systems", "",
            "| system | what | figure | source |", "|---|---|---|---|"]
    for system, what, figure, source in PUBLISHED_JIT:
        out.append("| %s | %s | %s | %s |" % (system, what, figure, source))
    out.append("")
    return out


def jit_console(jit):
    """A few lines summarising the JIT report for the console."""
    lines = []
    colds = [_stat(r.get("build_ms")) for r in jit.get("cold", []) if "build_ms" in r]
    if colds:
        lines.append("JIT cold compile: median over configs %s (min %s, max %s)" % (
            fmt_ms(sorted(colds)[len(colds) // 2]), fmt_ms(min(colds)), fmt_ms(max(colds))))
    firsts = [_stat((h.get("steps") or {}).get("first_call_ms")) for h in jit.get("disk_hit", [])]
    firsts = [f for f in firsts if f is not None]
    if firsts:
        lines.append("JIT cache hit, fresh process, first call: %s .. %s" % (
            fmt_ms(min(firsts)), fmt_ms(max(firsts))))
    la = [_stat(l.get("launch_us")) for l in jit.get("launch", []) if "launch_us" in l]
    if la:
        lines.append("launch() host overhead: %s .. %s" % (fmt_us(min(la)), fmt_us(max(la))))
    return "\n".join(lines) + ("\n" if lines else "")

"""What the benchmarks share: timing a library's calls in the idle and sustained modes (with the
board's telemetry), the timing and output options, the run's environment, list parsing and
error text. decode_compare.py and fp8_compare.py build their points and reports on it."""

import importlib
import json
import sys
import time

import nvml


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def module_version(name):
    try:
        return getattr(importlib.import_module(name), "__version__", "?")
    except Exception as e:  # noqa: BLE001
        return f"not importable ({type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''})"


def parse_list(text, kind=int):
    out = []
    for part in text.split(","):
        part = part.strip().lower()
        if not part:
            continue
        mult = 1
        if kind is int and part.endswith("k"):
            part, mult = part[:-1], 1024
        out.append(kind(part) * mult if kind is int else kind(part))
    return out


def time_calls(torch, calls, mode, args, flush, gpu):
    n = len(calls)
    calls[0]()  # plan, compile, autotune outside the timing
    torch.cuda.synchronize()
    if mode == "idle":
        time.sleep(args.cooldown_ms / 1000.0)
        for i in range(args.warmup):
            flush.fill_(i)
            calls[i % n]()
    else:
        end, i = time.time() + args.sustain_s, 0
        while time.time() < end:
            calls[i % n]()
            i += 1
    torch.cuda.synchronize()
    energy0 = gpu.energy_mj()
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(args.iters)]
    stops = [torch.cuda.Event(enable_timing=True) for _ in range(args.iters)]
    for i in range(args.iters):
        if mode == "idle":
            flush.fill_(i)
        starts[i].record()
        calls[i % n]()
        stops[i].record()
    torch.cuda.synchronize()
    samples = sorted(a.elapsed_time(b) for a, b in zip(starts, stops))
    tele = gpu.sample(energy0)
    median = samples[len(samples) // 2]
    result = {"median_ms": median, "min_ms": samples[0], "samples_ms": samples, **tele}
    if mode == "sustained" and tele["power_w"] is not None:
        result["energy_per_call_j"] = tele["power_w"] * median * 1e-3
    return result


def measure_library(torch, make_call, flops, check, args, flush, gpu):
    """One library at one point: make_call() gives its call; check(out) its error against the
    reference; then its timing in each of args.modes with TFLOP/s of `flops`. {"error": ...}
    where it cannot run (a peer without this shape reads n/a)."""
    entry = {}
    try:
        call = make_call()
        out = call()
        torch.cuda.synchronize()
        entry["rel_error"] = check(out)
        for mode in args.modes:
            t = time_calls(torch, [call], mode, args, flush, gpu)
            t.pop("samples_ms", None)
            t["tflops"] = flops / (t["median_ms"] * 1e-3) / 1e12
            entry[mode] = t
    except Exception as e:  # noqa: BLE001
        entry["error"] = error_text(e)
    return entry


def entry_summary(entry, modes):
    """A measured entry as one log line: TFLOP/s per mode, its error, or why it did not run."""
    return (", ".join(f"{m} {entry[m]['tflops']:.0f}" for m in modes if m in entry)
            + (f" err {entry['rel_error']:.2e}" if "rel_error" in entry else "")
            + (f" {entry['error']}" if "error" in entry else ""))


def tflops_table(rows, libs, modes, ours, peer, label):
    """Markdown lines: one row per point (label(row)), each library's sustained TFLOP/s (idle in
    brackets) or n/a, `ours` over `peer` in the sustained mode (else the one measured), and the
    errors of the libraries that ran."""
    mode = "sustained" if "sustained" in modes else modes[0]
    out = ["| point | " + " | ".join(libs) + f" | {ours} / {peer} | errors |", "|---|" + "---|" * (len(libs) + 2)]
    for r in rows:
        cells, errs = [], []
        for name in libs:
            e = r["libraries"].get(name, {})
            if "error" in e or not any(m in e for m in modes):
                cells.append("n/a")
                continue
            vals = [f"{e[m]['tflops']:.0f}" for m in ("sustained", "idle") if m in e]
            cells.append(vals[0] + (f" ({vals[1]})" if len(vals) > 1 else ""))
            errs.append(f"{e['rel_error']:.1e}")
        a, b = r["libraries"].get(ours, {}), r["libraries"].get(peer, {})
        ratio = f"{a[mode]['tflops'] / b[mode]['tflops']:.2f}" if mode in a and mode in b else "n/a"
        out.append(f"| {label(r)} | " + " | ".join(cells) + f" | {ratio} | {' / '.join(errs)} |")
    return out


def rel_error(torch, a, b):
    a, b = a.double(), b.double()
    return ((a - b).norm() / b.norm().clamp_min(1e-30)).item()


def error_text(e):
    msg = str(e).strip().splitlines()[0] if str(e).strip() else ""
    return f"{type(e).__name__}: {msg}"[:300]


E4M3_MAX = 448.0


def e4m3_per_tensor(torch, x):
    """x stored as e4m3 with one float32 dequantisation scale (amax mapped to 448): (stored, scale [1])."""
    scale = (x.float().abs().amax() / E4M3_MAX).clamp_min(1e-12).reshape(1).contiguous()
    return (x.float() / scale).to(torch.float8_e4m3fn), scale


def add_timing_arguments(ap, iters=30, sustain_s=1.5, cooldown_ms=500, modes_help="idle and/or sustained"):
    """The options every benchmark's timing takes (time_calls reads them), and its outputs."""
    ap.add_argument("--modes", default="idle,sustained", help=modes_help)
    ap.add_argument("--iters", type=int, default=iters)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--sustain-s", type=float, default=sustain_s)
    ap.add_argument("--cooldown-ms", type=int, default=cooldown_ms)
    ap.add_argument("--flush-mb", type=int, default=256)
    ap.add_argument("--json", default="")
    ap.add_argument("--markdown", default="")


def names(ap, flag, text, known):
    """A comma-separated option's entries, each one of `known` (else the parser's error)."""
    out = [x for x in text.split(",") if x]
    for x in out:
        if x not in known:
            ap.error(f"{flag}: unknown {x} (known: {', '.join(known)})")
    return out


def environment(torch, modules):
    """The GPU's telemetry and the run's environment: GPU, date, torch and the named modules' versions."""
    device = torch.cuda.current_device()
    gpu = nvml.Telemetry(device, uuid=torch.cuda.get_device_properties(device).uuid)
    env = {"gpu": torch.cuda.get_device_name(0), "date": time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime()),
           "torch": torch.__version__, "nvml": gpu.available}
    env.update({m: module_version(m) for m in modules})
    return gpu, env


def run_report(name, args, measure, markdown, modules):
    """A prefill benchmark's run: measure(torch, args, gpu, on_point) on the GPU, the JSON report
    and markdown (markdown(rows, args, env)) written after every point and printed at the end.
    Returns the exit status: 3 where torch sees no GPU."""
    import torch

    if not torch.cuda.is_available():
        log(f"{name}: torch sees no GPU")
        return 3
    gpu, env = environment(torch, modules)

    def report(rows):
        text = markdown(rows, args, env)
        write_outputs(args, {"env": env, "rows": rows}, text)
        return text
    print(report(measure(torch, args, gpu, report)))
    return 0


def write_outputs(args, report, text):
    """The JSON report and the markdown page where --json / --markdown name files."""
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=1)
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(text)

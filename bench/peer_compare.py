#!/usr/bin/env python3
"""Times torch SDPA with the cuDNN and the flash (FA2) backends on the shapes of a flashjit_bench
report, in the same way flashjit_bench times flashjit, then writes the merged JSON and
docs/benchmarks.md (with the JIT latency section when a flashjit_jit_latency report is given)
and prints the comparison table last.

  python3 bench/peer_compare.py --flashjit flashjit.json [--jit jit_latency.json]
      [--markdown docs/benchmarks.md] [--merged merged.json] [--iters 30] [--warmup 10]

Needs torch (with CUDA) for the measurement; --skip-torch or --torch-results FILE (a previous
run's "torch_results") render without it. Only the standard library, torch and numpy are used.
"""

import argparse
import datetime
import json
import math
import os
import shutil
import subprocess
import sys
import time
import warnings

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import nvml  # noqa: E402
import report  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def log(msg):
    print(msg, file=sys.stderr, flush=True)


# ---- environment ----------------------------------------------------------------------------------

def nvidia_smi():
    exe = shutil.which("nvidia-smi")
    if not exe:
        return {}
    fields = ["name", "driver_version", "power.limit", "clocks.sm", "clocks.max.sm",
              "memory.total"]
    try:
        out = subprocess.run([exe, "--query-gpu=" + ",".join(fields), "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=20).stdout
    except (OSError, subprocess.SubprocessError):
        return {}
    line = out.strip().splitlines()[0] if out.strip() else ""
    vals = [v.strip() for v in line.split(",")]
    return dict(zip(fields, vals)) if len(vals) == len(fields) else {}


def torch_environment(torch):
    env = {"torch": torch.__version__, "cuda_runtime": torch.version.cuda}
    try:
        env["cudnn"] = report.cudnn_version_string(torch.backends.cudnn.version())
    except Exception as e:  # noqa: BLE001
        env["cudnn"] = "n/a (%s)" % e
    try:
        env["gpu"] = torch.cuda.get_device_name(0)
    except Exception:  # noqa: BLE001
        pass
    impl = None
    try:
        from torch.nn.attention import current_flash_attention_impl
        impl = current_flash_attention_impl()
    except Exception:  # noqa: BLE001
        impl = None
    env["flash_impl"] = ("%s (activated)" % impl) if impl else "torch built-in flash kernels (FA2)"
    return env


def environment(flashjit_report, torch_env):
    env = {"date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S")}
    gpu = flashjit_report.get("gpu") or {}
    build = flashjit_report.get("build") or {}
    host = flashjit_report.get("host") or {}
    if gpu.get("name"):
        env["gpu"] = "%s (sm %s, %s SMs, L2 %.0f MB)" % (
            gpu["name"], gpu.get("cc", "?"), gpu.get("sm_count", "?"),
            gpu.get("l2_bytes", 0) / 2 ** 20)
    if gpu.get("driver_cuda_version"):
        env["driver_cuda"] = gpu["driver_cuda_version"]
    env["nvrtc"] = build.get("nvrtc")
    env["flashjit"] = build.get("flashjit")
    if host.get("cpu"):
        env["host"] = "%s, %s cores" % (host["cpu"], host.get("cpu_cores", "?"))
    env.update({k: v for k, v in torch_env.items() if k != "gpu" or "gpu" not in env})
    smi = nvidia_smi()
    if smi:
        env["driver"] = smi.get("driver_version")
        env["power_limit"] = smi.get("power.limit")
        env["clocks"] = "%s / %s" % (smi.get("clocks.sm"), smi.get("clocks.max.sm"))
        env["nvidia_smi"] = smi
    return env


# ---- timing ---------------------------------------------------------------------------------------

def time_backend(torch, backend_name, point, args, flush, gpu):
    """{"median_ms", "min_ms", "tflops", ...} or {"error": reason} for one backend and point."""
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    backend = {"cudnn": SDPBackend.CUDNN_ATTENTION, "fa2": SDPBackend.FLASH_ATTENTION}[backend_name]
    sustained = args.mode == "sustained"
    ok, why = report.torch_support(point)
    if not ok:
        return {"error": "unsupported here: " + why}
    s = point["shape"]
    b, sq, sk, hq, hk = s["batch"], s["seqlen_q"], s["seqlen_k"], s["heads_q"], s["heads_k"]
    dqk, dv = s["head_dim_qk"], s["head_dim_v"]
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}[point["dtype"]]
    causal = point["mask"] == "causal"
    per_set = 2 * (b * hq * sq * dqk + b * hk * sk * (dqk + dv) + b * hq * sq * dv)
    sets = max(1, min(4096, math.ceil(3 * args.l2_bytes / per_set)))
    while sets > 1 and sets * per_set > args.max_bytes:
        sets -= 1
    kwargs = {"is_causal": causal}
    if hq != hk:
        kwargs["enable_gqa"] = True
    q = k = v = None
    try:
        q = torch.randn(sets, b, hq, sq, dqk, dtype=dtype, device="cuda")
        k = torch.randn(sets, b, hk, sk, dqk, dtype=dtype, device="cuda")
        v = torch.randn(sets, b, hk, sk, dv, dtype=dtype, device="cuda")
        with warnings.catch_warnings(record=True) as caught, sdpa_kernel([backend]):
            warnings.simplefilter("always")

            def run(i):
                return F.scaled_dot_product_attention(q[i], k[i], v[i], **kwargs)

            try:
                run(0)  # plan / autotune outside the timing
                torch.cuda.synchronize()
                if not sustained:
                    time.sleep(args.cooldown_ms / 1000.0)  # start from an idle GPU, as flashjit_bench
            except Exception as e:  # noqa: BLE001
                reasons = [str(w.message).splitlines()[0] for w in caught][:3]
                msg = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
                return {"error": "; ".join([msg] + reasons)}
            launched = 0
            if sustained:  # the library's own back-to-back launches first, as flashjit_bench
                end = time.time() + args.sustain_s
                while time.time() < end:
                    run(launched % sets)
                    launched += 1
            for i in range(args.warmup):
                if flush is not None:
                    flush.fill_(i)
                run((launched + i) % sets)
            launched += args.warmup
            torch.cuda.synchronize()
            energy0 = gpu.energy_mj()
            starts = [torch.cuda.Event(enable_timing=True) for _ in range(args.iters)]
            stops = [torch.cuda.Event(enable_timing=True) for _ in range(args.iters)]
            for i in range(args.iters):
                if flush is not None:
                    flush.fill_(i)
                starts[i].record()
                run((launched + i) % sets)
                stops[i].record()
            torch.cuda.synchronize()
            telemetry = gpu.sample(energy0)
        samples = sorted(a.elapsed_time(z) for a, z in zip(starts, stops))
    except Exception as e:  # noqa: BLE001  (out of memory, launch failure, ...)
        return {"error": "%s: %s" % (type(e).__name__, str(e).strip().splitlines()[0] if str(e).strip() else "")}
    finally:
        del q, k, v
    n = len(samples)
    median = samples[n // 2] if n % 2 else 0.5 * (samples[n // 2 - 1] + samples[n // 2])
    flops = point.get("flops") or report.attention_flops(s, point["mask"])
    result = {"median_ms": median, "min_ms": samples[0], "tflops": report.tflops(flops, median),
              "input_sets": sets, "samples_ms": samples, "telemetry": telemetry}
    if sustained and telemetry.get("power_w") is not None:
        result["energy_pj_per_flop"] = nvml.energy_per_flop_pj(telemetry["power_w"], median, flops)
    return result


def measure_torch(points, args):
    try:
        import torch
    except Exception as e:  # noqa: BLE001
        log("peer_compare: torch is not importable (%s); cuDNN and FA2 will read n/a" % e)
        return [], {}
    if not torch.cuda.is_available():
        log("peer_compare: torch sees no GPU; cuDNN and FA2 will read n/a")
        return [], torch_environment(torch)
    if args.l2_bytes is None:
        try:
            args.l2_bytes = torch.cuda.get_device_properties(0).L2_cache_size
        except Exception:  # noqa: BLE001
            args.l2_bytes = 60 * 2 ** 20
    torch_env = torch_environment(torch)
    device = torch.cuda.current_device()
    gpu = nvml.Telemetry(device, uuid=torch.cuda.get_device_properties(device).uuid)
    flush = None
    if args.flush_mb > 0 and args.mode != "sustained":
        flush = torch.empty(args.flush_mb * 2 ** 20 // 4, dtype=torch.int32, device="cuda")
    results = []
    backends = [b for b in args.backends.split(",") if b]
    start = time.time()
    total = len(points) * len(backends)
    done = 0
    for backend in backends:
        for p in points:
            r = time_backend(torch, backend, p, args, flush, gpu)
            r["key"] = list(report.point_key(p))
            r["backend"] = backend
            r["id"] = p.get("id")
            results.append(r)
            done += 1
            log("[%d/%d %.0fs] %-5s %-28s %s" % (
                done, total, time.time() - start, backend, p.get("id"),
                "%.1f TFLOP/s (%.4f ms)" % (r["tflops"], r["median_ms"]) if r.get("tflops")
                else "n/a: " + r.get("error", "")))
    return results, torch_env


# ---- main -----------------------------------------------------------------------------------------

def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--flashjit", required=True, help="flashjit_bench --json report")
    ap.add_argument("--jit", help="flashjit_jit_latency --json report (adds the JIT section)")
    ap.add_argument("--markdown", default=os.path.join(REPO, "docs", "benchmarks.md"))
    ap.add_argument("--merged", help="merged JSON (default: beside the flashjit report)")
    ap.add_argument("--backends", default="cudnn,fa2")
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--iters", type=int, default=30)
    ap.add_argument("--flush-mb", type=int, default=256)
    ap.add_argument("--cooldown-ms", type=int, default=None,
                    help="idle pause before each point (default: the flashjit report's, else 500)")
    ap.add_argument("--mode", choices=["idle", "sustained"], default=None,
                    help="timing mode (default: the flashjit report's): idle pauses before each point and "
                         "flushes L2 before each launch; sustained launches back to back after --sustain-s "
                         "seconds of the library's own launches")
    ap.add_argument("--sustain-s", type=float, default=None, help="default: the flashjit report's, else 1.5")
    ap.add_argument("--sustained", help="the merged JSON of a sustained-mode run, rendered beside this one")
    ap.add_argument("--l2-bytes", type=int, default=None, help="default: the GPU's")
    ap.add_argument("--max-bytes", type=int, default=8 * 2 ** 30, help="cap of rotated inputs")
    ap.add_argument("--skip-torch", action="store_true", help="render without measuring torch")
    ap.add_argument("--torch-results", help="reuse the torch_results of a previous merged JSON")
    args = ap.parse_args(argv)
    if args.iters < 1:
        ap.error("--iters must be at least 1")

    with open(args.flashjit) as f:
        fj = json.load(f)
    jit = None
    if args.jit:
        try:
            with open(args.jit) as f:
                jit = json.load(f)
        except (OSError, ValueError) as e:
            log("peer_compare: cannot read %s (%s); no JIT section" % (args.jit, e))
    points = [p for p in fj.get("points", []) if p.get("shape")]
    if args.cooldown_ms is None:
        args.cooldown_ms = fj.get("settings", {}).get("cooldown_ms", 500)
    if args.mode is None:
        args.mode = fj.get("settings", {}).get("timing_mode", "idle")
    if args.sustain_s is None:
        args.sustain_s = fj.get("settings", {}).get("sustain_s") or 1.5

    torch_env = {}
    if args.torch_results:
        with open(args.torch_results) as f:
            prev = json.load(f)
        torch_results = prev.get("torch_results", [])
        torch_env = {k: v for k, v in prev.get("env", {}).items()
                     if k in ("torch", "cuda_runtime", "cudnn", "flash_impl")}
    elif args.skip_torch:
        torch_results = []
    else:
        torch_results, torch_env = measure_torch(points, args)

    rows = report.merge(fj, torch_results)
    groups = report.geomean_groups(rows)
    fj_settings = fj.get("settings", {})
    merged = {
        "schema": "flashjit.peer_compare.v1",
        "env": environment(fj, torch_env),
        "settings": {"warmup": fj_settings.get("warmup", args.warmup),
                     "iters": fj_settings.get("iters", args.iters),
                     "flush_mb": fj_settings.get("flush_bytes", args.flush_mb * 2 ** 20) // 2 ** 20,
                     "cooldown_ms": fj_settings.get("cooldown_ms", 0),
                     "torch_warmup": args.warmup, "torch_iters": args.iters,
                     "torch_flush_mb": args.flush_mb, "torch_cooldown_ms": args.cooldown_ms,
                     "timing_mode": args.mode, "sustain_s": args.sustain_s if args.mode == "sustained" else 0},
        "flashjit_report": {k: fj.get(k) for k in ("host", "build", "gpu", "settings", "mode")},
        "torch_results": torch_results,
        "rows": rows,
        "geomeans": groups,
        "jit_latency": jit,
    }
    merged_path = args.merged or os.path.join(os.path.dirname(os.path.abspath(args.flashjit)),
                                              "merged.json")
    with open(merged_path + ".tmp", "w") as f:
        json.dump(merged, f, indent=1)
    os.replace(merged_path + ".tmp", merged_path)
    sustained = None
    if args.sustained:
        with open(args.sustained) as f:
            sustained = json.load(f)
    md = report.render_markdown(merged, jit, sustained=sustained)
    os.makedirs(os.path.dirname(os.path.abspath(args.markdown)), exist_ok=True)
    with open(args.markdown, "w") as f:
        f.write(md)
    log("peer_compare: wrote %s and %s" % (merged_path, args.markdown))

    env = merged["env"]
    print("\n%s | driver %s | CUDA %s | torch %s | cuDNN %s" % (
        env.get("gpu", "?"), env.get("driver", "?"), env.get("cuda_runtime", "?"),
        env.get("torch", "?"), env.get("cudnn", "?")))
    if jit:
        print(report.jit_console(jit), end="")
    print(report.console_table(rows, groups), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())

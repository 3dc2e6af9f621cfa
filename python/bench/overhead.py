"""Host overhead of one attention call on a tiny shape, and the first call of a fresh process.

Per-call host time (CPU time to issue one call, in batches of 100 that never fill the launch
queue, so the host does not wait for the GPU) for:
  flashjit direct     flashjit.attention (plan lookup + one binding call)
  flashjit op         torch.ops.flashjit.attention (the custom op torch.compile uses)
  flashjit graph      one call inside a replayed CUDA graph (replay host time / calls captured)
  torch SDPA          torch.nn.functional.scaled_dot_product_attention, BHSD tensors
  flashinfer          flashinfer.single_prefill_with_kv_cache (with --flashinfer, when importable)
The paths run interleaved, repeat after repeat; medians are reported, with the GPU time per
call (CUDA events) beside each, so a GPU-bound figure is visible as such. The direct path's
parts are timed apart too: the plan lookup (signature key + dictionary), torch's allocation of
the output, and the binding's launch (argument checks, TMA descriptors, cuLaunchKernelEx).

Then a fresh interpreter, with the disk cache already holding the kernel, times `import torch`,
`import flashjit`, the first flashjit.attention call (plan, disk cache read, module load, launch)
and the second.

  python3 python/bench/overhead.py [--shape 1,128,4,64] [--iters 2000] [--repeats 7] [--json FILE]
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import torch
import torch.nn.functional as F

import flashjit

FIRST_CALL_CHILD = r"""
import json, os, sys, time
t0 = time.perf_counter()
import torch
t1 = time.perf_counter()
import flashjit
t2 = time.perf_counter()
b, s, h, d = json.loads(sys.argv[1])
q, k, v = (torch.randn(b, s, h, d, device="cuda", dtype=torch.bfloat16) for _ in range(3))
torch.cuda.synchronize()
t3 = time.perf_counter()
flashjit.attention(q, k, v, causal=True)
torch.cuda.synchronize()
t4 = time.perf_counter()
flashjit.attention(q, k, v, causal=True)
torch.cuda.synchronize()
t5 = time.perf_counter()
print(json.dumps({"import_torch_ms": (t1 - t0) * 1e3, "import_flashjit_ms": (t2 - t1) * 1e3,
                  "first_call_ms": (t4 - t3) * 1e3, "second_call_ms": (t5 - t4) * 1e3}))
"""


def timed(fn, iters: int, batch: int = 100):
    """(host us per call, GPU us per call) over `iters` calls issued in batches of `batch`, with a
    synchronisation between batches that is not timed: a batch stays far below the launch queue's
    depth, so the host never waits for the GPU and its time is the calls' own. The GPU time is
    the batches' event time (the GPU idles while a host-bound batch is issued, so it is at least
    the kernel time)."""
    host_ns, gpu_ms, done = 0, 0.0, 0
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    while done < iters:
        n = min(batch, iters - done)
        torch.cuda.synchronize()
        start.record()
        t0 = time.perf_counter_ns()
        for _ in range(n):
            fn()
        t1 = time.perf_counter_ns()
        end.record()
        torch.cuda.synchronize()
        host_ns += t1 - t0
        gpu_ms += start.elapsed_time(end)
        done += n
    return host_ns / 1e3 / iters, gpu_ms * 1e3 / iters


def graph_path(call, calls_per_graph: int):
    """A graph of `calls_per_graph` calls; returns (replay fn, calls per replay)."""
    call()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(calls_per_graph):
            call()
    return graph.replay, calls_per_graph


def paths(shape, with_flashinfer: bool):
    b, s, h, d = shape
    q, k, v = (torch.randn(b, s, h, d, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    qh, kh, vh = (t.transpose(1, 2).contiguous() for t in (q, k, v))
    op = torch.ops.flashjit.attention

    def direct():
        flashjit.attention(q, k, v, causal=True)

    def custom_op():
        op(q, k, v, None, None, -1, -1, True, -1, -1, 0.0, False, None, None, None)

    def sdpa():
        F.scaled_dot_product_attention(qh, kh, vh, is_causal=True)

    from flashjit import _torch as fj

    plan = fj._plan_for(q, k, v, True, None, None, None, None, None, None, False, None, None, None, None)
    o = torch.empty_strided(plan.o_shape, plan.o_stride, dtype=plan.o_dtype, device=q.device)
    stream = torch.cuda.current_stream().cuda_stream
    qp, kp, vp, op_ = q.data_ptr(), k.data_ptr(), v.data_ptr(), o.data_ptr()

    def lookup():
        fj._plan_for(q, k, v, True, None, None, None, None, None, None, False, None, None, None, None)

    def alloc():  # as the direct path allocates
        if plan.o_like_q:
            torch.empty_like(q)
        else:
            torch.empty_strided(plan.o_shape, plan.o_stride, dtype=plan.o_dtype, device=q.device)

    def binding():  # the direct path's launch: checks, TMA descriptors, cuLaunchKernelEx
        plan.launch.launch_dense(stream, qp, kp, vp, op_, 0)

    result = {"flashjit direct": (direct, 1), "flashjit op": (custom_op, 1), "  part: plan lookup": (lookup, 1),
              "  part: output alloc": (alloc, 1), "  part: launch()": (binding, 1)}
    replay, per = graph_path(direct, 100)
    result["flashjit graph"] = (replay, per)
    result["torch SDPA"] = (sdpa, 1)
    if with_flashinfer:
        try:
            import flashinfer
        except ImportError as e:
            print(f"flashinfer: not importable ({e})", file=sys.stderr)
        else:
            q3, k3, v3 = q[0], k[0], v[0]  # NHD: [S, H, D]

            def fi():
                flashinfer.single_prefill_with_kv_cache(q3, k3, v3, causal=True)

            fi()  # JIT-compiles on first use
            result["flashinfer"] = (fi, 1)
    return result


def first_call(shape):
    """The first and second call of a fresh interpreter whose disk cache holds the kernel."""
    env = dict(os.environ)
    env.setdefault("FLASHJIT_CACHE_DIR", os.path.join(tempfile.gettempdir(), "flashjit-bench-cache"))
    env.setdefault("FLASHJIT_LOG_LEVEL", "warn")
    run = lambda: json.loads(subprocess.run(  # noqa: E731
        [sys.executable, "-c", FIRST_CALL_CHILD, json.dumps(list(shape))], env=env, check=True,
        capture_output=True, text=True).stdout.strip().splitlines()[-1])
    run()  # fills the disk cache
    return run()


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shape", default="1,128,4,64", help="B,S,H,D of q, k and v (bf16, causal)")
    parser.add_argument("--iters", type=int, default=2000, help="calls per timing")
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--flashinfer", action="store_true", help="also time FlashInfer (JIT-compiles first)")
    parser.add_argument("--no-first-call", action="store_true", help="skip the fresh-process measurement")
    parser.add_argument("--json", help="write the figures to this file")
    args = parser.parse_args()
    shape = tuple(int(x) for x in args.shape.split(","))

    table = paths(shape, args.flashinfer)
    timings = {name: ([], []) for name in table}
    with torch.inference_mode():
        for fn, _ in table.values():
            for _ in range(20):
                fn()
        for _ in range(args.repeats):
            for name, (fn, per) in table.items():
                iters = max(1, args.iters // per)
                host, gpu = timed(fn, iters)
                timings[name][0].append(host / per)
                timings[name][1].append(gpu / per)

    report = {"shape": list(shape), "device": torch.cuda.get_device_name(), "torch": torch.__version__,
              "flashjit": flashjit.__version__, "iters": args.iters, "repeats": args.repeats, "per_call_us": {}}
    print(f"host time per call, shape {shape} bf16 causal, median of {args.repeats} x {args.iters} calls")
    print(f"{'path':<22}{'host us':>10}{'GPU us':>10}")
    for name, (host, gpu) in timings.items():
        h, g = statistics.median(host), statistics.median(gpu)
        report["per_call_us"][name] = {"host": h, "gpu": g}
        print(f"{name:<22}{h:>10.2f}{g:>10.2f}")
    if not args.no_first_call:
        fc = first_call(shape)
        report["fresh_process"] = fc
        print(f"fresh process, warm disk cache: import torch {fc['import_torch_ms']:.1f} ms, "
              f"import flashjit {fc['import_flashjit_ms']:.1f} ms, first call {fc['first_call_ms']:.2f} ms, "
              f"second call {fc['second_call_ms']:.3f} ms")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=2)


if __name__ == "__main__":
    main()

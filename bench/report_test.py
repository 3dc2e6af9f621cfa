#!/usr/bin/env python3
"""Self-test of bench/report.py (and peer_compare.py's rendering path) on fake data; no torch,
no GPU.  Run: python3 bench/report_test.py"""

import json
import math
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import report  # noqa: E402


def fake_point(dtype="bf16", d=128, mask="none", s=2048, tflops=500.0, error=None, check=True):
    shape = {"batch": 16384 // s, "seqlen_q": s, "seqlen_k": s, "heads_q": 2048 // d,
             "heads_k": 2048 // d, "head_dim_qk": d, "head_dim_v": d, "layout": "bshd"}
    flops = report.attention_flops(shape, mask)
    p = {"id": "%s_d%d_%s_s%d" % (dtype, d, mask, s), "dtype": dtype, "head_dim": d, "mask": mask,
         "config": {"arch": "native", "dtype": {"qkv": dtype, "out": dtype},
                    "head_dim": {"qk": d, "v": d}, "mask": mask},
         "shape": shape, "flops": flops, "kernel": "fwd_sm90a_%s_d%d_%s" % (dtype, d, mask),
         "error": error}
    if error is None:
        ms = flops / (tflops * 1e12) * 1e3
        p.update({"median_ms": ms, "min_ms": ms * 0.98, "tflops": tflops})
    if check:
        p["check"] = {"passed": True, "rel_error": 2.5e-3}
    return p


def fake_report(points):
    return {"schema": "flashjit.bench.v1", "mode": "grid",
            "host": {"cpu": "Fake CPU", "cpu_cores": 16, "date": "2026-01-01T00:00:00Z"},
            "build": {"flashjit": "0.1.0", "nvrtc": "13.0 libnvrtc.so.13"},
            "gpu": {"name": "NVIDIA H200", "cc": "9.0", "sm_count": 132, "l2_bytes": 62914560,
                    "driver_cuda_version": "13.0"},
            "settings": {"warmup": 10, "iters": 30, "flush_bytes": 256 << 20},
            "points": points}


def torch_result(point, backend, tflops=None, error=None):
    r = {"key": list(report.point_key(point)), "backend": backend, "id": point["id"]}
    if error:
        r["error"] = error
        r["tflops"] = None
    else:
        r.update({"tflops": tflops, "median_ms": point["flops"] / (tflops * 1e12) * 1e3})
    return r


def fake_jit():
    return {
        "schema": "flashjit.jit_latency.v1",
        "host": {"cpu": "Fake CPU", "cpu_cores": 2, "date": "2026-01-01T00:00:00Z"},
        "build": {"nvrtc": "13.0 libnvrtc.so.13"}, "gpu": None,
        "cold": [
            {"config": "default.json", "arch": "sm_90a", "runs": 3, "kernel": "fwd_x",
             "generate_ms": {"median": 0.1, "max": 0.2}, "compile_ms": {"median": 1500, "max": 1600},
             "build_ms": {"median": 1520, "max": 1620}},
            {"config": "pinned.json", "arch": "sm_80", "runs": 3, "skipped": "arch = \"sm_80\": no"},
            {"config": "bad.json", "arch": "sm_100a", "runs": 3, "error": "boom | pipe"},
        ],
        "disk_hit": [{"config": "default.json", "arch": "sm_90a", "runs": 5,
                      "steps": {"parse_ms": {"median": 0.1}, "generate_ms": {"median": 0.12},
                                "key_ms": {"median": 1.3}, "disk_read_verify_ms": {"median": 0.5},
                                "decode_ms": {"median": 0.02}, "total_ms": {"median": 2.0},
                                "first_call_ms": {"median": 2.7}}}],
        "memory_hit": [{"config": "default.json", "arch": "sm_90a", "what": "build (disk hit)",
                        "per_call_us": {"median": 730.0}}],
        "launch": [],
    }


class GeomeanTest(unittest.TestCase):
    def test_values(self):
        self.assertAlmostEqual(report.geomean([2, 8]), 4.0)
        self.assertAlmostEqual(report.geomean([1, 10, 100]), 10.0)

    def test_ignores_missing(self):
        self.assertAlmostEqual(report.geomean([None, 4, 0, float("nan"), 4]), 4.0)
        self.assertIsNone(report.geomean([None, 0]))
        self.assertIsNone(report.geomean([]))


class FlopsAndVersionsTest(unittest.TestCase):
    def test_flops_match_fa_convention(self):
        shape = {"batch": 8, "heads_q": 16, "seqlen_q": 2048, "seqlen_k": 2048,
                 "head_dim_qk": 128, "head_dim_v": 128}
        self.assertEqual(report.attention_flops(shape, "none"), 4 * 8 * 16 * 2048 * 2048 * 128)
        self.assertEqual(report.attention_flops(shape, "causal"), 2 * 8 * 16 * 2048 * 2048 * 128)
        self.assertAlmostEqual(report.tflops(1e12, 1.0), 1000.0)
        self.assertIsNone(report.tflops(1e12, 0))

    def test_cudnn_version(self):
        self.assertEqual(report.cudnn_version_string(91900), "9.19.0")
        self.assertEqual(report.cudnn_version_string(90100), "9.1.0")
        self.assertEqual(report.cudnn_version_string(8907), "8.9.7")
        self.assertEqual(report.cudnn_version_string(None), "n/a")

    def test_torch_support(self):
        self.assertTrue(report.torch_support(fake_point())[0])
        p = fake_point(mask="causal")
        p["shape"]["seqlen_k"] = 4096
        self.assertFalse(report.torch_support(p)[0])
        p = fake_point()
        p["dtype"] = "e4m3"
        self.assertFalse(report.torch_support(p)[0])
        p = fake_point(mask="sliding_window")
        self.assertFalse(report.torch_support(p)[0])
        p = fake_point()
        p["config"]["varlen"] = True
        self.assertFalse(report.torch_support(p)[0])


class MergeTest(unittest.TestCase):
    def setUp(self):
        self.points = [
            fake_point("bf16", 64, "none", 512, 400.0),
            fake_point("bf16", 64, "causal", 512, 200.0),
            fake_point("bf16", 128, "none", 512, 600.0),
            fake_point("fp16", 128, "causal", 1024, None, error="launch failed"),
        ]
        self.torch = [
            torch_result(self.points[0], "cudnn", 500.0),
            torch_result(self.points[0], "fa2", 320.0),
            torch_result(self.points[1], "cudnn", 250.0),
            torch_result(self.points[1], "fa2", error="No available kernel"),
            torch_result(self.points[2], "cudnn", 600.0),
            torch_result(self.points[2], "fa2", 300.0),
            torch_result(self.points[3], "cudnn", 400.0),
        ]
        self.rows = report.merge(fake_report(self.points), self.torch)

    def test_rows_match_by_shape(self):
        self.assertEqual(len(self.rows), 4)
        r = self.rows[0]
        self.assertAlmostEqual(r["ratio_cudnn"], 0.8)
        self.assertAlmostEqual(r["ratio_fa2"], 1.25)
        self.assertIsNone(self.rows[1]["ratio_fa2"])
        self.assertIsNone(self.rows[3]["ratio_cudnn"])  # flashjit failed
        self.assertEqual(self.rows[3]["fa2"]["error"], "not run")

    def test_torch_order_does_not_matter(self):
        rows2 = report.merge(fake_report(self.points), list(reversed(self.torch)))
        self.assertEqual([r["ratio_cudnn"] for r in rows2], [r["ratio_cudnn"] for r in self.rows])

    def test_geomeans(self):
        groups = {g["group"]: g for g in report.geomean_groups(self.rows)}
        self.assertIn("all", groups)
        self.assertIn("head dim 64", groups)
        self.assertIn("head dim 128", groups)
        self.assertIn("mask causal", groups)
        self.assertIn("dtype fp16", groups)
        g = groups["all"]
        self.assertEqual(g["points"], 4)
        self.assertAlmostEqual(g["flashjit"], (400 * 200 * 600) ** (1 / 3))
        self.assertEqual(g["flashjit_n"], 3)
        self.assertAlmostEqual(g["cudnn"], (500 * 250 * 600 * 400) ** 0.25)
        self.assertAlmostEqual(g["ratio_cudnn"], (0.8 * 0.8 * 1.0) ** (1 / 3))
        self.assertAlmostEqual(g["ratio_fa2"], math.sqrt(1.25 * 2.0))
        self.assertAlmostEqual(groups["head dim 64"]["flashjit"], math.sqrt(400 * 200))
        self.assertIsNone(groups["dtype fp16"]["flashjit"])

    def test_console_and_markdown(self):
        groups = report.geomean_groups(self.rows)
        text = report.console_table(self.rows, groups)
        self.assertIn("n/a", text)
        self.assertIn("0.80x", text)
        merged = {"env": {"date": "2026-01-01", "gpu": "NVIDIA H200", "torch": "2.11",
                          "cudnn": "9.19.0", "driver": "580.1"},
                  "settings": {"iters": 30, "warmup": 10, "flush_mb": 256},
                  "rows": self.rows, "geomeans": groups}
        md = report.render_markdown(merged, fake_jit())
        self.assertIn("| all | 4 |", md)
        self.assertIn("NVIDIA H200", md)
        self.assertIn("cuDNN (torch): 9.19.0", md)
        self.assertIn("No available kernel", md)
        self.assertIn("## JIT latency", md)
        self.assertIn("15–120 s", md)
        self.assertIn("24–51 µs", md)
        self.assertIn("skipped", md)
        self.assertIn("boom \\| pipe", md)  # escaped for the table
        self._tables_are_rectangular(md)  # every row has its header's column count
        self.assertIn("Points ran back to back", md)  # a report from before the idle pause

    def test_method_names_the_idle_pause_of_each_harness(self):
        merged = {"env": {}, "rows": self.rows, "geomeans": report.geomean_groups(self.rows),
                  "settings": {"iters": 30, "warmup": 10, "flush_mb": 256, "cooldown_ms": 500,
                               "torch_cooldown_ms": 250}}
        md = report.render_markdown(merged)
        self.assertIn("a 500 ms pause before its warm-up (250 ms for torch)", md)
        self.assertNotIn("back to back", md)

    def _tables_are_rectangular(self, md):
        cols = None
        for line in md.splitlines() + [""]:
            if line.startswith("|"):
                n = len(line.replace("\\|", "").strip().strip("|").split("|"))
                if cols is None:
                    cols = n
                self.assertEqual(n, cols, line)
            else:
                cols = None


class FormatTest(unittest.TestCase):
    def test_ms(self):
        self.assertEqual(report.fmt_ms(1520), "1.5 s")
        self.assertEqual(report.fmt_ms(150), "150 ms")
        self.assertEqual(report.fmt_ms(15.04), "15.0 ms")
        self.assertEqual(report.fmt_ms(1.234), "1.23 ms")
        self.assertEqual(report.fmt_ms(None), "n/a")
        self.assertEqual(report.fmt_us(3.21), "3.2 µs")
        self.assertEqual(report.fmt_us(0.117), "0.12 µs")  # sub-microsecond table hits

    def test_check_cell(self):
        self.assertEqual(report._check({"check": {"passed": True, "rel_error": 2.5e-3}}), "ok 2.5e-03")
        self.assertEqual(report._check({"check": {"passed": False, "rel_error": None}}), "FAIL nan")
        self.assertEqual(report._check({"check": {"passed": False, "nonfinite": 7}}), "FAIL 7 non-finite")
        self.assertEqual(report._check({"check": None}), "-")

    def test_jit_console(self):
        text = report.jit_console(fake_jit())
        self.assertIn("1.5 s", text)
        self.assertIn("2.70 ms", text)


class PeerCompareRenderTest(unittest.TestCase):
    """peer_compare.py end to end without torch (--skip-torch / --torch-results)."""

    def test_skip_torch_and_reuse(self):
        points = [fake_point("bf16", 64, "none", 512, 400.0), fake_point("bf16", 64, "causal", 512, 200.0)]
        with tempfile.TemporaryDirectory() as d:
            fj = os.path.join(d, "flashjit.json")
            jit = os.path.join(d, "jit.json")
            md = os.path.join(d, "docs", "benchmarks.md")
            merged = os.path.join(d, "merged.json")
            with open(fj, "w") as f:
                json.dump(fake_report(points), f)
            with open(jit, "w") as f:
                json.dump(fake_jit(), f)
            cmd = [sys.executable, os.path.join(HERE, "peer_compare.py"), "--flashjit", fj, "--jit",
                   jit, "--markdown", md, "--merged", merged, "--skip-torch"]
            out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
            self.assertIn("Geometric means", out)
            self.assertTrue(os.path.exists(md))
            with open(merged) as f:
                m = json.load(f)
            self.assertEqual(len(m["rows"]), 2)
            self.assertIsNone(m["rows"][0]["cudnn"]["tflops"])
            # Feed fake torch results back in through --torch-results.
            m["torch_results"] = [torch_result(points[0], "cudnn", 500.0),
                                  torch_result(points[1], "fa2", 100.0)]
            m["env"]["torch"] = "2.11.0"
            with open(merged, "w") as f:
                json.dump(m, f)
            merged2 = os.path.join(d, "merged2.json")
            cmd = [sys.executable, os.path.join(HERE, "peer_compare.py"), "--flashjit", fj,
                   "--markdown", md, "--merged", merged2, "--torch-results", merged]
            out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
            self.assertIn("0.80x", out)
            self.assertIn("2.00x", out)
            with open(md) as f:
                text = f.read()
            self.assertIn("torch: 2.11.0", text)


class SustainedSection(unittest.TestCase):
    def test_sustained_rows_show_clocks_power_and_energy(self):
        point = {"id": "p", "dtype": "bf16", "head_dim": 128, "mask": "causal", "flops": 1e12,
                 "shape": {"batch": 2, "seqlen_q": 8192, "seqlen_k": 8192, "heads_q": 16, "heads_k": 16,
                           "head_dim_qk": 128, "head_dim_v": 128},
                 "tflops": 600.0, "median_ms": 1.0, "energy_pj_per_flop": 1.25,
                 "telemetry": {"sm_mhz": 1410, "power_w": 699.6, "limit_reasons": ["SW power cap"]}}
        fj = {"points": [point]}
        torch_results = [{"key": list(report.point_key(point)), "backend": "cudnn", "tflops": 500.0,
                          "median_ms": 1.2, "energy_pj_per_flop": 1.5,
                          "telemetry": {"sm_mhz": 1500, "power_w": 700.0}}]
        rows = report.merge(fj, torch_results)
        merged = {"settings": {"sustain_s": 1.5, "iters": 30}, "rows": rows,
                  "geomeans": report.geomean_groups(rows)}
        text = "\n".join(report.sustained_markdown(merged))
        self.assertIn("| all | 1 | 600.0 | 500.0 | n/a | 1.20x | n/a | 1.25 | 1.50 |", text)
        self.assertIn("| 1410 / 700 | 1500 / 700 | SW power cap |", text)



class EnergyPerFlop(unittest.TestCase):
    def test_is_power_times_the_median_launch_over_the_flops(self):
        import nvml
        # 700 W for 1 ms is 0.7 J; over 1e12 FLOPs that is 0.7 pJ each.
        self.assertAlmostEqual(nvml.energy_per_flop_pj(700.0, 1.0, 1e12), 0.7)
        self.assertAlmostEqual(nvml.energy_per_flop_pj(350.0, 2.0, 1e12), 0.7)
        self.assertIsNone(nvml.energy_per_flop_pj(700.0, 1.0, 0))

if __name__ == "__main__":
    unittest.main()

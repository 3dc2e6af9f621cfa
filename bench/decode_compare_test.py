#!/usr/bin/env python3
"""The decode benchmark's arithmetic and report without a GPU: list parsing, bytes per launch,
the markdown table (n/a for a library without results), and NVML's limit-reason names."""

import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import decode_compare as dc  # noqa: E402
import nvml  # noqa: E402


class DecodeCompare(unittest.TestCase):
    def test_lists(self):
        self.assertEqual(dc.parse_list("2k,8K,100"), [2048, 8192, 100])
        self.assertEqual(dc.heads_list("32/8,8/1"), [(32, 8), (8, 1)])

    def test_bytes_count_q_cache_and_o(self):
        p = dc.Point(batch=2, cache=1000, tokens=4, hq=8, hk=2, dim=64, page=16)
        # bf16: K and V 2 x 1000 x 2 heads x 64 per sequence, Q and O 4 x 8 x 64 each
        self.assertEqual(p.bytes(), 2 * (2 * 1000 * 2 * 2 * 64 + 2 * 2 * 4 * 8 * 64))
        self.assertEqual(p.id, "b2_k1000_q4_h8-2_d64_p16")
        # an e4m3 cache: K and V at one byte a value, Q and O still 2
        self.assertEqual(p.bytes(kv_elem=1), 2 * 1000 * 2 * 2 * 64 + 2 * 2 * 2 * 4 * 8 * 64)

    def test_e4m3_per_tensor_maps_the_largest_magnitude_to_448(self):
        try:
            import torch
        except ImportError:
            self.skipTest("torch is not installed")
        import bench_common
        x = torch.tensor([[1.0, -3.5], [0.25, 2.0]])
        stored, scale = bench_common.e4m3_per_tensor(torch, x)
        self.assertEqual(stored.dtype, torch.float8_e4m3fn)
        self.assertAlmostEqual(scale.item(), 3.5 / 448, places=7)
        self.assertEqual(stored.float()[0, 1].item(), -448.0)
        self.assertEqual(stored.float()[1, 1].item(), 256.0)  # 2 / (3.5 / 448), exact in e4m3

    def test_markdown_marks_missing_libraries(self):
        class Args:
            iters, sustain_s, modes, libraries = 30, 1.5, ["sustained"], ["flashjit", "cudnn"]
        row = {"id": "b1_k2048_q1_h32-8_d128_p16", "libraries": {
            "flashjit": {"sustained": {"gbps": 4321.0, "us_per_call": 9.87, "sm_mhz": 1755, "power_w": 700.0}},
            "cudnn": {"error": "ImportError: no module"}}}
        text = dc.markdown([row], Args, {"gpu": "H200", "date": "d", "flashjit": "0.1.0", "peers": {}})
        self.assertIn("| b1_k2048_q1_h32-8_d128_p16 | 4321 (9.9) | n/a | 1755 / 700.0 |", text)

    def test_a_partial_report_is_written_and_says_how_far_it_got(self):
        import argparse
        import json
        import tempfile
        with tempfile.TemporaryDirectory() as d:
            args = argparse.Namespace(iters=30, sustain_s=1.5, modes=["sustained"], libraries=["flashjit"],
                                      heads=[(32, 8)], json=os.path.join(d, "r.json"), markdown=os.path.join(d, "r.md"))
            row = {"id": "b1_k2048_q1_h32-8_d128_p16", "libraries": {
                "flashjit": {"sustained": {"gbps": 1000.0, "us_per_call": 5.0, "sm_mhz": 1980, "power_w": 650.0}}}}
            dc.write_report([row], args, {"gpu": "H200"}, planned=3)
            with open(args.json) as f:
                report = json.load(f)
            self.assertEqual(len(report["points"]), 1)
            self.assertEqual(report["planned_points"], 3)
            self.assertNotIn("heads", report["settings"])
            with open(args.markdown) as f:
                self.assertIn("1 of 3 points measured so far.", f.read())
            dc.write_report([row] * 3, args, {"gpu": "H200"}, planned=3)
            with open(args.markdown) as f:
                self.assertNotIn("measured so far", f.read())

    def test_graph_mode_captures_the_calls_once_and_times_replays_per_call(self):
        # A stand-in for torch.cuda that records what runs where: events 8 ms apart per replay.
        import argparse
        import contextlib

        log = []

        class Event:
            clock = [0.0]

            def __init__(self, enable_timing=False):
                self.t = None

            def record(self):
                Event.clock[0] += 4.0
                self.t = Event.clock[0]

            def elapsed_time(self, other):
                return other.t - self.t

        class Graph:
            def replay(self):
                log.append("replay")

        capturing = [False]

        @contextlib.contextmanager
        def graph(g, stream=None):
            capturing[0] = True
            yield
            capturing[0] = False

        class Stream:
            def wait_stream(self, other):
                pass

            def synchronize(self):
                pass

        cuda = argparse.Namespace(Stream=Stream, CUDAGraph=Graph, graph=graph, Event=Event,
                                  stream=lambda s: contextlib.nullcontext(), current_stream=lambda: Stream(),
                                  synchronize=lambda: None)
        fake_torch = argparse.Namespace(cuda=cuda)

        class Gpu:
            def energy_mj(self):
                return None

            def sample(self, energy0):
                return {"sm_mhz": 1980, "power_w": 700.0}

        calls = [lambda s=s: log.append(("capture" if capturing[0] else "warm", s)) for s in range(3)]
        args = argparse.Namespace(sustain_s=0.0, iters=5)
        r = dc.time_graph(fake_torch, calls, args, Gpu())
        captured = [x for x in log if isinstance(x, tuple) and x[0] == "capture"]
        self.assertEqual([s for _, s in captured], [i % 3 for i in range(dc.GRAPH_CALLS)])
        self.assertEqual([x for x in log if x == "replay"], ["replay"] * 5)
        self.assertEqual(r["median_ms"], 4.0 / dc.GRAPH_CALLS)  # 4 ms between an event pair, per call
        self.assertEqual(r["calls_per_replay"], dc.GRAPH_CALLS)
        self.assertAlmostEqual(r["energy_per_call_j"], 700.0 * 4.0 / dc.GRAPH_CALLS * 1e-3)

    def test_nvml_names_a_gpu_by_its_prefixed_uuid(self):
        self.assertEqual(nvml.nvml_uuid("8d3e0a1c-1111-2222-3333-444455556666"), "GPU-8d3e0a1c-1111-2222-3333-444455556666")
        self.assertEqual(nvml.nvml_uuid("GPU-8d3e0a1c"), "GPU-8d3e0a1c")

    def test_limit_reason_names(self):
        self.assertEqual(nvml.reason_names(0x4 | 0x40), ["SW power cap", "HW thermal"])
        self.assertIsNone(nvml.reason_names(None))


if __name__ == "__main__":
    unittest.main()

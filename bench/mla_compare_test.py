#!/usr/bin/env python3
"""The MLA benchmark's arithmetic and report without a GPU: flops and bytes per launch (causal
steps drop the pairs a token cannot see; fp8 caches count their bytes) and the markdown table (a library's error shown where
it has no timing)."""

import argparse
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mla_compare as mc  # noqa: E402


class MlaCompare(unittest.TestCase):
    def test_flops_and_bytes(self):
        p = mc.Point(batch=2, cache=1000, tokens=2, heads=16, page=64)
        self.assertEqual(p.id, "b2_k1000_q2_h16_p64")
        # 2 x (576 + 512) flops per visible (row, head, key); the first of two causal tokens sees 999 keys
        self.assertEqual(p.flops(causal=False), 2.0 * 2 * 16 * 2000 * 1088)
        self.assertEqual(p.flops(causal=True), 2.0 * 2 * 16 * 1999 * 1088)
        # bf16: the cache's 576 columns once, Q's 576 and O's 512 per (token, head)
        self.assertEqual(p.bytes(), 2 * (2 * 1000 * 576 + 2 * 2 * 16 * 1088))
        # fp8: 512 e4m3 bytes, 64 bf16 rope columns and a 4-byte scale per cached token (and per
        # query row of an fp8 Q), O in bf16; a bf16 Q beside the fp8 cache keeps its 2 x 576 bytes
        self.assertEqual(p.bytes(fp8=True), 2 * 1000 * 644 + 2 * 2 * 16 * (644 + 1024))
        self.assertEqual(p.bytes(fp8=True, fp8_q=False), 2 * 1000 * 644 + 2 * 2 * 16 * (1152 + 1024))
        # FlashMLA's fp8 rows: 656 bytes a cached token (four fp32 scales, one per 128 columns).
        self.assertEqual(p.bytes(True, False, 16), 2 * 1000 * 656 + 2 * 2 * 16 * (1152 + 1024))

    def test_markdown_shows_errors_beside_timings(self):
        args = argparse.Namespace(page=64, causal=True, modes=["sustained"])
        timing = {"tflops": 120.4, "gbps": 3300.2, "us_per_call": 41.0}
        rows = [{"id": "b2_k1000_q1_h16_p64", "libraries": {
            "flashjit": {"sustained": timing, "rel_error_fp64": 1.7e-3},
            "flashinfer": {"error": "ImportError: no module"}}}]
        text = mc.markdown(rows, args, {"gpu": "H200", "date": "2026-12-03", "flashjit": "0.1.0"})
        self.assertIn("| point | flashjit | flashinfer |", text)
        self.assertIn("| b2_k1000_q1_h16_p64 | 120 / 3300 (41) err 1.7e-03 | ImportError: no module |", text)

    def test_fp8_tokens_per_second_over_bf16(self):
        args = argparse.Namespace(page=64, causal=False, modes=["sustained"])
        rows = [{"id": "b64_k16384_q1_h16_p64", "libraries": {
            "flashjit": {"sustained": {"tflops": 100.0, "gbps": 3700.0, "us_per_call": 300.0}, "rel_error_fp64": 2e-3},
            "flashjit-fp8kv": {"sustained": {"tflops": 150.0, "gbps": 3000.0, "us_per_call": 200.0},
                               "rel_error_fp64": 3e-3},
            "flashjit-fp8rows": {"error": "RuntimeError: out of memory"}}}]
        text = mc.markdown(rows, args, {"gpu": "H200", "date": "2026-12-05"})
        self.assertIn("| point | flashjit-fp8kv | flashjit-fp8rows |", text)
        self.assertIn("| b64_k16384_q1_h16_p64 | 1.50x | n/a |", text)
        no_bf16 = [{"id": "p", "libraries": {"flashjit-fp8": rows[0]["libraries"]["flashjit-fp8kv"]}}]
        self.assertNotIn("tokens per second", mc.markdown(no_bf16, args, {}))


if __name__ == "__main__":
    unittest.main()

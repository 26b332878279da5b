#!/usr/bin/env python3
"""Tests of torch_allreduce_probe.py that need no GPU.

    python3 ci/probes/test_torch_allreduce_probe.py        (or: pytest ci/probes/)

The argument tests run anywhere; the numeric helpers (one-step rounding of the float64 reference
to bf16, the contract's relative error, the oracle, ULP distances, the input kinds) need torch and
are skipped without it. They run on CPU tensors, and on the GPU too when one is present. The gloo
test runs the whole probe on CPUs, in 3 processes, and checks what it wrote (about 20 s).
"""

import json
import math
import os
import random
import struct
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_allreduce_probe as probe  # noqa: E402

try:
    import torch
except ImportError:  # pragma: no cover - depends on the machine
    torch = None


def bf16_from_f64(x):
    """Reference: nearest bf16 (ties to even) of a Python float, as a Python float, exactly."""
    if math.isnan(x) or math.isinf(x):
        return x
    f32 = struct.unpack("<f", struct.pack("<f", x))[0] if abs(x) < 3.4e38 else math.copysign(math.inf, x)
    bits = struct.unpack("<I", struct.pack("<f", f32))[0]
    # the two bf16 values around x: truncate the float32 toward zero, and the next one out
    lo_bits = bits & 0xFFFF0000
    cands = []
    for b in (lo_bits - 0x10000, lo_bits, lo_bits + 0x10000):
        if 0 <= b <= 0xFFFFFFFF:
            v = struct.unpack("<f", struct.pack("<I", b))[0]
            if not math.isnan(v):
                cands.append((b, v))
    best = min(cands, key=lambda bv: (abs(bv[1] - x), (bv[0] >> 16) & 1))
    return best[1]


class Arguments(unittest.TestCase):
    def test_sizes(self):
        self.assertEqual(probe.parse_sizes("1KiB,64KiB,1MiB,4096,2KB"),
                         [1024, 65536, 1 << 20, 4096, 2000])
        for bad in ("1XB", "", "-4", "0.5B"):
            with self.assertRaises(probe.UsageError):
                probe.parse_sizes(bad)

    def test_reference_always_first(self):
        a = probe.parse_args(["--dry-run", "--backend", "nccl", "--algorithms", "symm_mem_two_shot"])
        self.assertEqual(a.algorithm_list, ["nccl", "symm_mem_two_shot"])
        a = probe.parse_args(["--dry-run", "--backend", "gloo", "--algorithms", "tree,one_shot,one_shot+scale"])
        self.assertEqual(a.algorithm_list, ["ring", "tree", "one_shot", "one_shot+scale"])

    def test_roster(self):
        a = probe.parse_args(["--dry-run", "--backend", "nccl"])
        self.assertEqual(a.algorithm_list[:4], ["nccl", "nccl_ring", "nccl_tree", "nccl_ch2"])
        self.assertEqual(a.algorithm_list[-3:], ["symm_mem_one_shot+scale", "symm_mem_one_shot+drop_peer",
                                                 "symm_mem_one_shot+stale"])
        self.assertEqual(a.mode_list, ["eager", "queued", "graph3", "graph4"])
        roles = {n: r for n, r, _, _ in probe.roster("nccl", "symm_mem_one_shot")}
        self.assertEqual(roles["nccl_tree"], "twin")
        self.assertEqual(roles["custom_auto"], "candidate")
        # The plan crosses the one-shot/two-shot switch and the custom limit by one element.
        for s in (524284, 524288, 524292, 8388604, 8388608, 8388612):
            self.assertIn(s, a.size_list)
        plan = probe.plan(a)
        self.assertEqual(plan["schema"], "reckon.allreduce-probe/v2")
        # queued only up to 1 MiB, graphs up to 16 MiB
        cases = probe.case_list(a)
        self.assertFalse([c for c in cases if c[3] == "queued" and c[0] > (1 << 20)])
        self.assertTrue([c for c in cases if c[3] == "graph3" and c[0] == 16 << 20])

    def test_bad_arguments(self):
        for argv in (["--dry-run", "--dtype", "fp8"], ["--dry-run", "--iters", "0"],
                     ["--sizes", "1KiB"], ["--dry-run", "--sizes", "2", "--dtype", "float32"],
                     ["--dry-run", "--backend", "gloo", "--modes", "graph3"],
                     ["--dry-run", "--controls-of", "nccl"], ["--dry-run", "--calls", "1"],
                     ["--dry-run", "--inputs", "ones"], ["--dry-run", "--scale-fault", "0"],
                     ["--dry-run", "--algorithms", "nccl,symm_mem_one_shot+scale"]):
            with self.assertRaises(probe.UsageError, msg=argv):
                probe.parse_args(argv)

    def test_safe_env_is_set(self):
        # importing the probe sets the NVLink-multicast switches that were unset
        for k in probe.SAFE_ENV:
            self.assertIn(k, os.environ)


@unittest.skipIf(torch is None, "torch not installed")
class Numerics(unittest.TestCase):
    def devices(self):
        devs = [torch.device("cpu")]
        if torch.cuda.is_available():
            devs.append(torch.device("cuda", 0))
        return devs

    def test_round_ref_is_one_rounding(self):
        rng = random.Random(5)
        xs = [rng.gauss(0, 1) * 10 ** rng.randint(-3, 3) for _ in range(20000)]
        # midpoint traps: just above / below a bf16 tie, where float32 rounding lands on the tie
        for k in range(200):
            base = 1.0 + k / 128.0
            xs += [base + 2 ** -8 + 2 ** -30, base + 2 ** -8 - 2 ** -30, -(base + 2 ** -8 + 2 ** -30)]
        want = [bf16_from_f64(x) for x in xs]
        for dev in self.devices():
            got = probe.round_ref(torch.tensor(xs, dtype=torch.float64, device=dev), "bfloat16")
            got = got.to(torch.float64).cpu().tolist()
            bad = [(x, g, w) for x, g, w in zip(xs, got, want) if g != w]
            self.assertEqual(bad[:5], [], f"{dev}: {len(bad)} values rounded twice")
            naive = torch.tensor(xs, dtype=torch.float64).to(torch.float32).to(torch.bfloat16)
            naive = naive.to(torch.float64).tolist()
            self.assertTrue(any(n != w for n, w in zip(naive, want)),
                            "the traps do not exercise double rounding")

    def test_rel_err(self):
        for dev in self.devices():
            d = torch.tensor([0.0, 1.0, 0.0, 2.0], dtype=torch.float64, device=dev)
            mag = torch.tensor([0.0, 4.0, 3.0, 0.0], dtype=torch.float64, device=dev)
            self.assertEqual(probe.rel_err(d, mag).cpu().tolist(), [0.0, 0.25, 0.0, 1e300])

    def test_oracle_and_ulps(self):
        xs = [torch.tensor([1.0, 2.0 ** 24, 3.0], dtype=torch.float32),
              torch.tensor([2.0 ** -30, 1.0, -3.0], dtype=torch.float32),
              torch.tensor([0.0, -(2.0 ** 24), 0.0], dtype=torch.float32)]
        o = probe.oracle_sum(xs, torch.float32)
        # rank order: 2^24 + 1 rounds to 2^24 before -2^24 cancels it; 1 + 2^-30 rounds to 1
        self.assertEqual(o.tolist(), [1.0, 0.0, 0.0])
        a = torch.tensor([1.0, -0.0, 2.0, -1.0], dtype=torch.bfloat16)
        b = torch.tensor([1.0, 0.0, 2.0 + 2 ** -5, -1.0 - 2 ** -7], dtype=torch.bfloat16)
        self.assertEqual(probe.ulp_dist(a, b), 2.0)  # bf16 keeps 8 bits: 2 -> 2+2^-5 is 2 ulps, -1 -> -1-2^-7 is 1
        self.assertEqual(probe.ulp_dist(a[:2], b[:2]), 0.0)  # +0 and -0 are the same
        f = torch.tensor([1.0], dtype=torch.float32)
        self.assertEqual(probe.ulp_dist(f, torch.nextafter(f, torch.tensor([2.0]))), 1.0)
        self.assertEqual(probe.ulp_dist(f, torch.tensor([float("nan")])), 1e300)

    def test_input_kinds(self):
        a = probe.parse_args(["--dry-run", "--backend", "gloo"])
        cpu = torch.device("cpu")
        n = 4
        cols = [probe.make_inputs(a, n, 4096, "float32", torch.float32, "order_sensitive", r, cpu, call=1)
                for r in range(n)]
        nz = sum((c != 0).to(torch.int64) for c in cols)
        self.assertTrue(bool((nz == 3).all()), "every column holds 2^24, 1, -2^24")
        self.assertTrue(bool((sum(c.double() for c in cols).abs() == 1).all()))
        exact = sum(c.double() for c in cols)
        self.assertFalse(torch.equal(probe.oracle_sum(cols, torch.float32).double(), exact),
                         "the rank-order oracle should differ from the exact sum somewhere")
        w = probe.make_inputs(a, n, 1 << 14, "bfloat16", torch.bfloat16, "wide", 0, cpu)
        m = w.to(torch.float32).abs()
        self.assertGreater((m.max() / m[m > 0].min()).item(), 2.0 ** 30)
        c0 = probe.make_inputs(a, n, 64, "bfloat16", torch.bfloat16, "random", 0, cpu, call=0)
        c1 = probe.make_inputs(a, n, 64, "bfloat16", torch.bfloat16, "random", 0, cpu, call=1)
        self.assertFalse(torch.equal(c0, c1), "a fresh payload on every call")

    def test_inputs_deterministic_and_integer_exact(self):
        a = probe.parse_args(["--dry-run"])
        for dev in self.devices():
            for dt_name, dt in (("float32", torch.float32), ("bfloat16", torch.bfloat16)):
                x1 = probe.make_inputs(a, 8, 4096, dt_name, dt, "integer", 3, dev)
                x2 = probe.make_inputs(a, 8, 4096, dt_name, dt, "integer", 3, dev)
                self.assertTrue(torch.equal(x1, x2))
                self.assertEqual(x1.dtype, dt)
                k = 256 // 8 if dt_name == "bfloat16" else 1024
                self.assertLessEqual(x1.abs().max().item(), k)
                self.assertTrue(torch.equal(x1, x1.round()))
                other = probe.make_inputs(a, 8, 4096, dt_name, dt, "integer", 4, dev)
                self.assertFalse(torch.equal(x1, other), "ranks got the same inputs")


@unittest.skipIf(torch is None, "torch not installed")
class GlooProbe(unittest.TestCase):
    """The whole probe on CPUs: 3 gloo processes, two sizes either side of the drop_peer size."""

    def test_gloo_run(self):
        with tempfile.TemporaryDirectory() as d:
            out = os.path.join(d, "probe.json")
            cmd = [sys.executable, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                "torch_allreduce_probe.py"),
                   "--backend", "gloo", "--nproc", "3", "--sizes", "1KiB,4KiB", "--dtype", "bfloat16,float32",
                   "--inputs", "random,integer", "--modes", "eager,queued", "--calls", "3", "--queued", "2",
                   "--min-samples", "0", "--warmup", "0", "--iters", "1", "--drop-above", "2KiB",
                   "--custom-max-bytes", "2KiB", "--out", out]
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
            self.assertEqual(r.returncode, 0, r.stderr[-3000:])
            with open(out) as f:
                p = json.load(f)
        self.assertEqual(p["schema"], "reckon.allreduce-probe/v2")
        self.assertEqual(p["world_size"], 3)
        self.assertEqual(p["reference"], "ring")
        roles = {r["algorithm"]: r for r in p["calibration"]["roles"]}
        self.assertEqual(roles["tree"]["role"], "twin")
        self.assertEqual(roles["one_shot+drop_peer"]["above_bytes"], 2048)
        self.assertEqual(len(p["results"]), 2 * 2 * 2 * 2)
        for c in p["results"]:
            algs = {a["name"]: a for a in c["algorithms"]}
            where = (c["size_bytes"], c["dtype"], c["inputs"], c["mode"])
            self.assertEqual(c["calls"], 3 if c["mode"] == "eager" else 2, where)
            above = c["size_bytes"] > 2048
            for n in ("one_shot", "two_shot", "one_shot+scale"):
                if above:
                    self.assertIn("custom-max-bytes", algs[n].get("skipped", ""), where)
                else:
                    self.assertEqual(algs[n]["engaged_calls"], c["calls"], where)
            self.assertEqual(algs["custom_auto"]["engaged_calls"], 0 if above else c["calls"], where)
            if not above:
                self.assertEqual(algs["one_shot"]["nrmse"], 0.0, where)  # the oracle's own order
                self.assertGreater(algs["one_shot+scale"]["nrmse"], 0.005, where)
                self.assertEqual(algs["one_shot+scale"]["faulted_calls"], c["calls"], where)
                stale = algs["one_shot+stale"]
                self.assertEqual(stale["faulted_calls"], c["calls"] - 1 if c["mode"] == "eager" else 0, where)
            if c["inputs"] == "integer":
                for n in ("ring", "tree", "ring_rotated", "custom_auto"):
                    self.assertTrue(algs[n]["exact"] and algs[n]["nrmse"] == 0.0, (where, n))
            elif c["dtype"] == "bfloat16":
                self.assertGreater(algs["ring"]["nrmse"], 0.0, where)  # 3 ranks: orders differ
            for a in c["algorithms"]:
                if "skipped" not in a:
                    self.assertTrue(a["ranks_identical"], (where, a["name"]))
            if c["dtype"] == "bfloat16":
                self.assertIn("bfloat16", algs["gloo"].get("skipped", "bfloat16"), where)


if __name__ == "__main__":
    unittest.main(verbosity=2)

#!/usr/bin/env python3
"""Tests of torch_allreduce_probe.py that need no GPU and no second process.

    python3 ci/probes/test_torch_allreduce_probe.py        (or: pytest ci/probes/)

The argument tests run anywhere; the numeric helpers (one-step rounding of the float64 reference
to bf16, the contract's relative error, deterministic inputs) need torch and are skipped without
it. They run on CPU tensors, and on the GPU too when one is present.
"""

import math
import os
import random
import struct
import sys
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
        a = probe.parse_args(["--dry-run", "--algorithms", "symm_mem_two_shot"])
        self.assertEqual(a.algorithm_list, ["nccl", "symm_mem_two_shot"])

    def test_bad_arguments(self):
        for argv in (["--dry-run", "--dtype", "fp8"], ["--dry-run", "--iters", "0"],
                     ["--sizes", "1KiB"], ["--dry-run", "--sizes", "2", "--dtype", "float32"]):
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


if __name__ == "__main__":
    unittest.main(verbosity=2)

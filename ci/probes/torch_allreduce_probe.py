#!/usr/bin/env python3
"""Calibrated op-level allreduce probe (reckon.allreduce-probe/v2), on GPUs (NCCL) or CPUs (gloo).

One process per rank. For every message size, dtype, input kind and call pattern it runs every
algorithm of the backend's roster on fresh payloads and scores each output against

  * the fixed-order oracle: all_gather of the payloads, a float32 sum in rank order 0..n-1, one
    rounding to the dtype (NRMSE and max ULP distance), and
  * the exact float64 sum (max_abs_err, max_rel_err, exact: the v1 fields).

Roster (role in brackets; docs/allreduce-probe.md):

  NCCL backend (GPUs)
    nccl                 [reference]        torch.distributed.all_reduce, NCCL's own choice
    nccl_ring            [twin]             a group created under NCCL_ALGO=Ring
    nccl_tree            [twin]             a group created under NCCL_ALGO=Tree
    nccl_ch2             [twin]             a group limited to 2 channels (CTAs)
    symm_mem_one_shot    [candidate]        torch.ops.symm_mem.one_shot_all_reduce
    symm_mem_two_shot    [candidate]        torch.ops.symm_mem.two_shot_all_reduce_
    custom_auto          [candidate]        engine-like dispatch: one-shot up to --two-shot-above,
                                            two-shot up to --custom-max-bytes, NCCL above
  gloo backend (CPUs; the logic of the probe without GPUs)
    ring                 [reference]        ring reduce-scatter + all-gather over send/recv,
                                            partial sums rounded to the dtype at every hop (as NCCL)
    ring_rotated         [twin]             the same ring over the rank order rotated by one
    tree                 [twin]             binary tree over send/recv, rounded at every level
    gloo                 [twin]             gloo's own all_reduce (float32 only)
    one_shot             [candidate]        all_gather, float32 sum in rank order, one rounding
    two_shot             [candidate]        each rank reduces its 1/n slice (float32, rank order),
                                            then all_gather of the slices
    custom_auto          [candidate]        the same dispatch as on GPUs, falling back to ring
  Positive controls, wrapped around the --controls-of candidate (symm_mem_one_shot / one_shot):
    CAND+scale           output x (1 + --scale-fault)                        every call
    CAND+drop_peer       the last rank's payload zeroed before the op,       above --drop-above
                         so every rank gets the sum without it
    CAND+stale           the previous call's (or replay's) result returned   from the 2nd call on

Call patterns (--modes): eager (--calls calls, a fresh payload and a sync each), queued (--queued
calls on distinct buffers before one sync), graph3 / graph4 (3 or 4 calls captured in one CUDA
graph, replayed --replays times with fresh payloads copied in before every replay; NCCL only).
Input kinds (--inputs): random N(0,1); wide N(0,1) x 2^U{-20..20} (bfloat16's exponent range
exercised; vLLM's determinism tests); order_sensitive columns (2^24, 1, -2^24 on consecutive
ranks, so a different summation order gives different bits; FlashInfer); integer (exact in every
order; nccl-tests). Every call of every case gets a fresh payload.

Run:
  torchrun --nproc-per-node 2 ci/probes/torch_allreduce_probe.py --out probe.json
  python3 ci/probes/torch_allreduce_probe.py --nproc 2 --out probe.json
  python3 ci/probes/torch_allreduce_probe.py --backend gloo --nproc 4 --out cpu.json   # no GPU
  python3 ci/probes/torch_allreduce_probe.py --dry-run --nproc 8 --sizes 1KiB,64MiB
  reckon probe check probe.json

NVLink multicast (NVLS) is kept off: NCCL_NVLS_ENABLE=0, TORCH_SYMM_MEM_DISABLE_MULTICAST=1 and
NVSHMEM_DISABLE_NVLS=1 are set when unset, before torch is imported. GPU settings are never
changed.
"""

import argparse
import datetime
import hashlib
import json
import math
import os
import re
import socket
import statistics
import sys
import tempfile
import time

SCHEMA = "reckon.allreduce-probe/v2"
SAFE_ENV = {
    "NCCL_NVLS_ENABLE": "0",
    "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
    "NVSHMEM_DISABLE_NVLS": "1",
}
MiB = 1 << 20
MAX_CALLS = 256
# Sizes across the one-shot/two-shot switch (512 KiB) and the custom path's limit (8 MiB), one
# float32 element either side, plus odd, non-16-byte-multiple sizes.
DEFAULT_SIZES = ("1KiB,4100,64KiB,524284,512KiB,524292,1MiB,4MiB,8388604,8MiB,8388612,16MiB")
DEFAULT_SIZES_GLOO = "1KiB,4100,64KiB,65540,256KiB"
DTYPE_BYTES = {"float32": 4, "bfloat16": 2}
INPUT_KINDS = ("random", "wide", "order_sensitive", "integer")
MODES = ("eager", "queued", "graph3", "graph4")
BACKENDS = ("nccl", "gloo")
FAULTS = ("scale", "drop_peer", "stale")
ORACLE = ("all_gather of every rank's payload, float32 sum in rank order 0..n-1, "
          "one rounding to the dtype")

# name -> (role, setting)
ROSTER = {
    "nccl": [
        ("nccl", "reference", "torch.distributed.all_reduce (NCCL's own algorithm choice)"),
        ("nccl_ring", "twin", "NCCL_ALGO=Ring"),
        ("nccl_tree", "twin", "NCCL_ALGO=Tree"),
        ("nccl_ch2", "twin", "2 channels (ProcessGroupNCCL config min_ctas=max_ctas=2, else "
                             "NCCL_MIN_NCHANNELS=NCCL_MAX_NCHANNELS=2)"),
        ("symm_mem_one_shot", "candidate", "torch.ops.symm_mem.one_shot_all_reduce"),
        ("symm_mem_two_shot", "candidate", "torch.ops.symm_mem.two_shot_all_reduce_"),
        ("custom_auto", "candidate", "one-shot up to --two-shot-above, two-shot up to "
                                     "--custom-max-bytes, NCCL above"),
    ],
    "gloo": [
        ("ring", "reference", "ring reduce-scatter + all-gather over send/recv, rounded per hop"),
        ("ring_rotated", "twin", "the ring over the rank order rotated by one"),
        ("tree", "twin", "binary tree over send/recv, rounded per level"),
        ("gloo", "twin", "gloo's all_reduce (float32 only)"),
        ("one_shot", "candidate", "all_gather, float32 sum in rank order, one rounding"),
        ("two_shot", "candidate", "slice reduce (float32, rank order) + all_gather"),
        ("custom_auto", "candidate", "one-shot up to --two-shot-above, two-shot up to "
                                     "--custom-max-bytes, ring above"),
    ],
}
CONTROLS_OF = {"nccl": "symm_mem_one_shot", "gloo": "one_shot"}
SPIN_CYCLES = 200_000  # about 100 us at H100/H200 clocks: longer than the host's launch of one op
UNITS = {"": 1, "B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30,
         "KB": 10**3, "MB": 10**6, "GB": 10**9}

for _k, _v in SAFE_ENV.items():
    os.environ.setdefault(_k, _v)


class UsageError(Exception):
    """Bad command-line input; exit status 2."""


def parse_sizes(text):
    sizes = []
    for entry in text.split(","):
        entry = entry.strip()
        m = re.fullmatch(r"(\d+(?:\.\d+)?)\s*([A-Za-z]*)", entry)
        if not m:
            raise UsageError(f"--sizes entry {entry!r}: expected a number of bytes with an "
                             "optional unit (e.g. 4096, 64KiB)")
        unit = m.group(2)
        if unit not in UNITS:
            raise UsageError(f"--sizes entry {entry!r}: unknown unit {unit!r}: expected B, KiB, "
                             "MiB, GiB, KB, MB or GB")
        value = float(m.group(1)) * UNITS[unit]
        if value != int(value) or value <= 0:
            raise UsageError(f"--sizes entry {entry!r}: expected a positive whole number of bytes")
        sizes.append(int(value))
    return sizes


def parse_list(flag, text, allowed):
    items = [s.strip() for s in text.split(",") if s.strip()]
    if not items:
        raise UsageError(f"{flag}: expected at least one of {', '.join(allowed)}")
    for item in items:
        if item not in allowed:
            raise UsageError(f"{flag} {item!r}: expected one of {', '.join(allowed)}")
    return items


def roster(backend, controls_of):
    """[(name, role, setting, extra)] for the backend: the base roster and the positive controls
    wrapped around controls_of."""
    out = [(n, r, s, {}) for n, r, s in ROSTER[backend]]
    for f in FAULTS:
        out.append((f"{controls_of}+{f}", "positive_control", "", {"of": controls_of, "fault": f}))
    return out


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--backend", choices=BACKENDS, default=None,
                   help="nccl (GPUs, the default when CUDA is available) or gloo (CPUs)")
    p.add_argument("--sizes", default=None,
                   help="comma-separated message sizes per rank (bytes or 1KiB, 64MiB, ...)")
    p.add_argument("--dtype", default="float32,bfloat16", help="comma list: float32, bfloat16")
    p.add_argument("--inputs", default=",".join(INPUT_KINDS), help="comma list: " + ", ".join(INPUT_KINDS))
    p.add_argument("--modes", default=None,
                   help="comma list: eager, queued, graph3, graph4 (graphs: NCCL only; default "
                        "all that the backend has)")
    p.add_argument("--algorithms", default=None,
                   help="comma list of the roster's algorithms (the reference is always run)")
    p.add_argument("--controls-of", default=None,
                   help="the candidate the positive controls wrap (default symm_mem_one_shot, "
                        "gloo: one_shot)")
    p.add_argument("--scale-fault", type=float, default=1e-2, help="scale control: output x (1+X)")
    p.add_argument("--drop-above", default="256KiB",
                   help="drop_peer control: only messages above this many bytes lose the last rank")
    p.add_argument("--two-shot-above", default="512KiB",
                   help="custom_auto: one-shot up to this size, two-shot above")
    p.add_argument("--custom-max-bytes", default="8MiB",
                   help="the custom path's size limit: candidates are skipped (custom_auto falls "
                        "back to the reference) above it")
    p.add_argument("--calls", type=int, default=4, help="eager calls per case at least, a fresh payload each")
    p.add_argument("--min-samples", type=int, default=16384,
                   help="more eager calls for small messages, until calls x elements reaches this "
                        f"(at most {MAX_CALLS} calls): a small message's NRMSE over a few calls is "
                        "too noisy to calibrate against")
    p.add_argument("--queued", type=int, default=64, help="calls queued before one sync (queued)")
    p.add_argument("--queued-max-bytes", default="1MiB", help="largest message of the queued mode")
    p.add_argument("--replays", type=int, default=16, help="CUDA-graph replays per case")
    p.add_argument("--graph-max-bytes", default="16MiB", help="largest message of the graph modes")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--warmup", type=int, default=10, help="untimed runs per algorithm and case")
    p.add_argument("--iters", type=int, default=100, help="timed eager runs per algorithm and case")
    p.add_argument("--nproc", type=int, default=0,
                   help="start this many processes with torch.multiprocessing (without torchrun)")
    p.add_argument("--out", help="write the probe JSON here (atomically); required unless --dry-run")
    p.add_argument("--dry-run", action="store_true",
                   help="validate the arguments and print the plan as JSON, without importing torch")
    p.add_argument("--allow-single-rank", action="store_true",
                   help="smoke test of the code paths on one GPU: runs with 1 rank and writes a file "
                        "that is NOT a valid probe (world_size 1; an allreduce needs 2 ranks)")
    a = p.parse_args(argv)
    if a.backend is None:
        a.backend = default_backend(a.dry_run)
    a.size_list = parse_sizes(a.sizes or (DEFAULT_SIZES if a.backend == "nccl" else DEFAULT_SIZES_GLOO))
    a.dtype_list = parse_list("--dtype", a.dtype, tuple(DTYPE_BYTES))
    a.input_list = parse_list("--inputs", a.inputs, INPUT_KINDS)
    default_modes = "eager,queued,graph3,graph4" if a.backend == "nccl" else "eager,queued"
    a.mode_list = parse_list("--modes", a.modes or default_modes, MODES)
    if a.backend == "gloo" and any(m.startswith("graph") for m in a.mode_list):
        raise UsageError("--modes graph3/graph4: CUDA graphs need the nccl backend (GPUs)")
    a.controls_of = a.controls_of or CONTROLS_OF[a.backend]
    base = [n for n, r, _, _ in roster(a.backend, a.controls_of)]
    cands = [n for n, r, _ in ROSTER[a.backend] if r == "candidate"]
    if a.controls_of not in cands:
        raise UsageError(f"--controls-of {a.controls_of!r}: expected a candidate: {', '.join(cands)}")
    reference = ROSTER[a.backend][0][0]
    algs = parse_list("--algorithms", a.algorithms, base) if a.algorithms else base
    a.reference = reference
    a.algorithm_list = [reference] + [x for x in base if x in algs and x != reference]
    for n in a.algorithm_list:
        if "+" in n and n.split("+")[0] not in a.algorithm_list:
            raise UsageError(f"--algorithms: {n} wraps {n.split('+')[0]}, which is not selected")
    for s in a.size_list:
        for dt in a.dtype_list:
            if s % DTYPE_BYTES[dt]:
                raise UsageError(f"--sizes {s}: not a multiple of the {dt} element size "
                                 f"({DTYPE_BYTES[dt]} bytes)")
    for flag in ("drop_above", "two_shot_above", "custom_max_bytes", "queued_max_bytes", "graph_max_bytes"):
        v = parse_sizes(getattr(a, flag))
        if len(v) != 1:
            raise UsageError(f"--{flag.replace('_', '-')}: expected one size")
        setattr(a, flag, v[0])
    if a.warmup < 0 or a.iters < 1:
        raise UsageError(f"--warmup {a.warmup} / --iters {a.iters}: expected warmup >= 0, iters >= 1")
    if a.calls < 2 or a.queued < 2 or a.replays < 2:
        raise UsageError(f"--calls {a.calls} / --queued {a.queued} / --replays {a.replays}: expected "
                         "at least 2 each (a fresh payload on every call needs more than one call)")
    if a.min_samples < 0:
        raise UsageError(f"--min-samples {a.min_samples}: expected at least 0")
    if not (a.scale_fault > 0 and math.isfinite(a.scale_fault)):
        raise UsageError(f"--scale-fault {a.scale_fault}: expected a positive number")
    if a.nproc < 0 or (a.nproc == 1 and not a.allow_single_rank):
        raise UsageError(f"--nproc {a.nproc}: expected 0 (torchrun) or at least 2")
    if not a.dry_run and not a.out:
        raise UsageError("--out FILE is required (or --dry-run)")
    if a.out and not os.path.isdir(os.path.dirname(os.path.abspath(a.out))):
        raise UsageError(f"--out {a.out}: directory does not exist")
    return a


def default_backend(dry_run):
    """nccl when CUDA is available, else gloo; a dry run (which never imports torch) plans for
    nccl, the GPU run."""
    if dry_run:
        return "nccl"
    try:
        import torch
    except ImportError:
        return "nccl"  # the run itself then says torch is missing
    return "nccl" if torch.cuda.is_available() else "gloo"


def case_list(a):
    """(size, dtype, inputs, mode) of every case, in output order."""
    out = []
    for size in a.size_list:
        for dt in a.dtype_list:
            for kind in a.input_list:
                for mode in a.mode_list:
                    if mode == "queued" and size > a.queued_max_bytes:
                        continue
                    if mode.startswith("graph") and size > a.graph_max_bytes:
                        continue
                    out.append((size, dt, kind, mode))
    return out


def plan(a):
    world = a.nproc or int(os.environ.get("WORLD_SIZE", "0")) or None
    return {
        "schema": SCHEMA,
        "backend": a.backend,
        "world_size": world,
        "sizes": a.size_list,
        "dtypes": a.dtype_list,
        "inputs": a.input_list,
        "modes": a.mode_list,
        "algorithms": a.algorithm_list,
        "reference": a.reference,
        "cases": len(case_list(a)),
        "calls": a.calls, "queued": a.queued, "replays": a.replays,
        "warmup": a.warmup,
        "iters": a.iters,
        "env": {k: os.environ.get(k) for k in SAFE_ENV},
        "out": a.out,
    }


def case_seed(seed, world, numel, dtype, inputs, rank, call=0):
    key = f"{seed}/{world}/{numel}/{dtype}/{inputs}/{rank}/{call}".encode()
    return int.from_bytes(hashlib.sha256(key).digest()[:7], "little")


def write_atomic(path, data):
    d = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix="." + os.path.basename(path) + ".", dir=d)
    try:
        with os.fdopen(fd, "w") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def finite(x):
    """A metric as strict JSON allows it: NaN/Inf (garbage output) become 1e300, so the check
    fails the algorithm instead of rejecting the file."""
    return x if math.isfinite(x) else 1e300


# ---------------------------------------------------------------------------------------------
# Everything below runs with torch, one process per rank.


def make_inputs(a, world, numel, dt_name, dt, kind, rank, dev, call=0):
    """Rank r's payload of one call, bit-identical on every process that builds it."""
    import torch
    gdev = dev if dev.type == "cuda" else torch.device("cpu")
    g = torch.Generator(device=gdev)
    g.manual_seed(case_seed(a.seed, world, numel, dt_name, kind, rank, call))
    if kind == "integer":
        # |x| <= k with k*world <= 2^p (p = 8 for bf16, 24 for fp32; at most 1024): every partial
        # sum in any order is an exactly representable integer, so every algorithm must be exact.
        k = min(1024, 256 // world) if dt_name == "bfloat16" else 1024
        x = torch.randint(-k, k + 1, (numel,), generator=g, device=gdev).to(torch.float32)
    elif kind == "order_sensitive":
        # Column i: rank (i+c) mod n holds s*2^24, the next rank s*1, the next -s*2^24, the rest 0
        # (s = +-1, c = the call). 2^24 + 1 rounds to 2^24 in float32 and bfloat16, so the result
        # (0 or +-1) depends on which two of the three are added first.
        i = torch.arange(numel, device=gdev)
        pos = (rank - i - call) % world
        gs = torch.Generator(device=gdev)  # the column's sign, the same on every rank
        gs.manual_seed(case_seed(a.seed, world, numel, dt_name, kind, -1, call))
        s = torch.where(torch.rand(numel, generator=gs, device=gdev) < 0.5, -1.0, 1.0)
        big = float(1 << 24)
        x = torch.zeros(numel, device=gdev)
        x = torch.where(pos == 0, s * big, x)
        x = torch.where(pos == 1, s, x)
        if world > 2:
            x = torch.where(pos == 2, -s * big, x)
    else:
        x = torch.randn(numel, generator=g, device=gdev, dtype=torch.float32)
        if kind == "wide":
            e = torch.randint(-20, 21, (numel,), generator=g, device=gdev).to(torch.float32)
            x = x * torch.pow(2.0, e)
    return x.to(dt).to(dev)


def round_ref(ref64, dt_name):
    """The float64 reference rounded once (RNE) to the dtype, avoiding double rounding for bf16."""
    import torch
    f32 = ref64.to(torch.float32)
    if dt_name == "float32":
        return f32
    # Round to odd into float32, then RNE to bf16: float32 keeps more than two extra bits, so the
    # result equals a direct float64 -> bf16 rounding. f32 (RNE) is one of the two float32 values
    # around ref64; when it is inexact with an even significand, the other one is odd.
    inexact = f32.to(torch.float64) != ref64
    even = (f32.view(torch.int32) & 1) == 0
    direction = torch.where(ref64 > f32.to(torch.float64), torch.full_like(f32, math.inf),
                            torch.full_like(f32, -math.inf))
    odd = torch.where(inexact & even & torch.isfinite(f32), torch.nextafter(f32, direction), f32)
    return odd.to(torch.bfloat16)


def rel_err(d, mag):
    """The contract's relative error: |out - ref| / (sum over ranks of |addend|). A correct sum in
    any order stays below (n-1)*u (u: unit roundoff) however much the addends cancel. Where every
    addend is zero the error must be zero too; a non-zero one counts as 1e300."""
    import torch
    safe = torch.where(mag > 0, mag, torch.ones_like(mag))
    return torch.where(mag > 0, d / safe,
                       torch.where(d == 0, torch.zeros_like(d), torch.full_like(d, 1e300)))


def oracle_sum(gathered, dt):
    """The fixed-order oracle from the gathered payloads: float32 sum in rank order, one rounding."""
    import torch
    acc = gathered[0].to(torch.float32).clone()
    for g in gathered[1:]:
        acc += g.to(torch.float32)
    return acc.to(dt)


def ordered(x):
    """x's bit pattern as a signed int64 that is monotonic in the value (+0 and -0 both 0), so that
    the ULP distance of two values of the same dtype is the difference."""
    import torch
    if x.dtype == torch.bfloat16:
        bits = x.view(torch.int16).to(torch.int64) & 0xFFFF
        mag, sign = bits & 0x7FFF, (bits & 0x8000) != 0
    else:
        bits = x.view(torch.int32).to(torch.int64) & 0xFFFFFFFF
        mag, sign = bits & 0x7FFFFFFF, (bits & 0x80000000) != 0
    return torch.where(sign, -mag, mag)


def ulp_dist(a, b):
    """max ULP distance between two tensors of one dtype (NaN anywhere: 1e300)."""
    import torch
    if bool(torch.isnan(a).any()) or bool(torch.isnan(b).any()):
        return 1e300
    return float((ordered(a) - ordered(b)).abs().max().item()) if a.numel() else 0.0


class Comm:
    """The collectives the probe needs, on either backend. On gloo, bfloat16 tensors travel
    reinterpreted as float16 (the same 16 bits; gathers and sends copy them exactly), because
    gloo has no bfloat16 (nor int16)."""

    def __init__(self, dist, backend, rank, world, dev):
        self.dist, self.backend, self.rank, self.world, self.dev = dist, backend, rank, world, dev

    def _wire(self, t):
        import torch
        return t.view(torch.float16) if (self.backend == "gloo" and t.dtype == torch.bfloat16) else t

    def all_gather(self, t):
        out = [self.dist_empty(t) for _ in range(self.world)]
        self.dist.all_gather([self._wire(o) for o in out], self._wire(t.contiguous()))
        return out

    def dist_empty(self, t):
        import torch
        return torch.empty_like(t)

    def sendrecv(self, send, dst, recv, src):
        """Sends send to rank dst while receiving recv from rank src."""
        reqs = [self.dist.isend(self._wire(send.contiguous()), dst),
                self.dist.irecv(self._wire(recv), src)]
        for r in reqs:
            r.wait()

    def max_stats(self, values):
        """Element-wise max of a list of floats over the ranks."""
        import torch
        t = torch.tensor(values, dtype=torch.float64, device=self.dev)
        self.dist.all_reduce(t, op=self.dist.ReduceOp.MAX)
        return t.tolist()

    def sum_stats(self, values):
        import torch
        t = torch.tensor(values, dtype=torch.float64, device=self.dev)
        self.dist.all_reduce(t, op=self.dist.ReduceOp.SUM)
        return t.tolist()


class Skip(Exception):
    """The algorithm cannot run in this case; the message is the reason."""


def agree(comm, err):
    """Makes every rank raise Skip when any rank saw an error, so collectives stay matched."""
    flag = comm.max_stats([1.0 if err else 0.0])[0]
    if flag > 0:
        raise Skip(err or "failed on another rank")


# --- gloo algorithms: real data movement over send/recv, summation order as named -------------


def ring_allreduce(comm, buf, rotate=0):
    """NCCL-style ring over send/recv: reduce-scatter (every hop adds in float32 and rounds to the
    dtype) then all-gather. rotate shifts the ring's rank order (another rank mapping)."""
    import torch
    n, dt = comm.world, buf.dtype
    order = [(r + rotate) % n for r in range(n)]
    pos = order.index(comm.rank)
    nxt, prv = order[(pos + 1) % n], order[(pos - 1) % n]
    chunks = list(torch.tensor_split(buf, n))
    recv = [torch.empty_like(c) for c in chunks]
    for s in range(n - 1):
        si, ri = (pos - s) % n, (pos - 1 - s) % n
        comm.sendrecv(chunks[si], nxt, recv[ri], prv)
        chunks[ri].copy_((chunks[ri].to(torch.float32) + recv[ri].to(torch.float32)).to(dt))
    for s in range(n - 1):
        si, ri = (pos + 1 - s) % n, (pos - s) % n
        comm.sendrecv(chunks[si], nxt, recv[ri], prv)
        chunks[ri].copy_(recv[ri])
    return buf


def tree_allreduce(comm, buf):
    """Binary tree over send/recv: level k adds the partial sum of rank r+2^(k-1) into rank r
    (float32 add, rounded to the dtype), then rank 0's total is sent back down."""
    import torch
    n, r, dt = comm.world, comm.rank, buf.dtype
    tmp = torch.empty_like(buf)
    s = 1
    while s < n:
        if r % (2 * s) == 0 and r + s < n:
            comm.dist.recv(comm._wire(tmp), r + s)
            buf.copy_((buf.to(torch.float32) + tmp.to(torch.float32)).to(dt))
        elif r % (2 * s) == s:
            comm.dist.send(comm._wire(buf.contiguous()), r - s)
        s *= 2
    while s >= 1:
        if r % (2 * s) == 0 and r + s < n:
            comm.dist.send(comm._wire(buf.contiguous()), r + s)
        elif r % (2 * s) == s:
            comm.dist.recv(comm._wire(buf), r - s)
        s //= 2
    return buf


def one_shot_allreduce(comm, buf):
    """Every rank reads every peer's payload (all_gather) and sums in rank order in float32,
    rounding once: vLLM's 1-stage kernel."""
    buf.copy_(oracle_sum(comm.all_gather(buf), buf.dtype))
    return buf


def two_shot_allreduce(comm, buf):
    """Reduce-scatter then all-gather: rank r sums slice r of every payload in rank order in
    float32 (one rounding), then every rank gathers the n reduced slices."""
    import torch
    n = comm.world
    slices = [list(torch.tensor_split(g, n)) for g in comm.all_gather(buf)]
    mine = oracle_sum([s[comm.rank] for s in slices], buf.dtype)
    width = max(s[0].numel() for s in slices)
    pad = torch.zeros(width, dtype=buf.dtype, device=buf.device)
    pad[:mine.numel()] = mine
    parts = comm.all_gather(pad)
    out = torch.cat([parts[r][:slices[0][r].numel()] for r in range(n)])
    buf.copy_(out)
    return buf


# --- one algorithm, as the probe drives it --------------------------------------------------


class Algo:
    """One algorithm of the roster: run(buf) -> output tensor, plus its counters. engaged counts
    calls that went through the candidate's own path; faulted counts calls a control altered."""

    def __init__(self, name, role, setting, extra):
        self.name, self.role, self.setting, self.extra = name, role, setting, extra
        self.engaged = 0
        self.faulted = 0
        self.capturable = True
        self.prev = {}

    def counts_engagement(self):
        return self.role in ("candidate", "positive_control")


def build_algos(a, comm, symm, groups):
    """The Algo objects of a.algorithm_list, each with its run(buf, size, slot) function."""
    dist = comm.dist
    algos = {}
    for name, role, setting, extra in roster(a.backend, a.controls_of):
        if name not in a.algorithm_list:
            continue
        algos[name] = Algo(name, role, setting, extra)

    def nccl_on(group):
        def run(al, buf, size, slot):
            dist.all_reduce(buf, op=dist.ReduceOp.SUM, group=group)
            return buf
        return run

    def symm_op(opname):
        def run(al, buf, size, slot):
            if size > a.custom_max_bytes:
                raise Skip(f"above the custom path's size limit --custom-max-bytes {a.custom_max_bytes}")
            op = symm.op(opname)
            al.engaged += 1
            if opname == "one_shot_all_reduce":
                return op(buf, "sum", symm.group_name)
            op(buf, "sum", symm.group_name)
            return buf
        return run

    def gloo_fn(fn, custom=False):
        def run(al, buf, size, slot):
            if custom and size > a.custom_max_bytes:
                raise Skip(f"above the custom path's size limit --custom-max-bytes {a.custom_max_bytes}")
            if al.counts_engagement():
                al.engaged += 1
            return fn(comm, buf)
        return run

    runs = {}
    if a.backend == "nccl":
        runs["nccl"] = nccl_on(None)
        for n in ("nccl_ring", "nccl_tree", "nccl_ch2"):
            if n in algos:
                runs[n] = nccl_on(groups.get(n))
        runs["symm_mem_one_shot"] = symm_op("one_shot_all_reduce")
        runs["symm_mem_two_shot"] = symm_op("two_shot_all_reduce_")
        one, two, fallback = runs["symm_mem_one_shot"], runs["symm_mem_two_shot"], runs["nccl"]
    else:
        runs["ring"] = gloo_fn(ring_allreduce)
        runs["ring_rotated"] = gloo_fn(lambda c, b: ring_allreduce(c, b, rotate=1))
        runs["tree"] = gloo_fn(tree_allreduce)

        def gloo_native(al, buf, size, slot):
            import torch
            if buf.dtype != torch.float32:
                raise Skip(f"gloo has no {str(buf.dtype).replace('torch.', '')} allreduce in this torch")
            dist.all_reduce(buf, op=dist.ReduceOp.SUM)
            return buf
        runs["gloo"] = gloo_native
        runs["one_shot"] = gloo_fn(one_shot_allreduce, custom=True)
        runs["two_shot"] = gloo_fn(two_shot_allreduce, custom=True)
        one, two, fallback = runs["one_shot"], runs["two_shot"], runs["ring"]
        for n in ("ring", "ring_rotated", "tree", "gloo", "one_shot", "two_shot", "custom_auto"):
            if n in algos:
                algos[n].capturable = False

    def auto(al, buf, size, slot):
        # The engine's dispatch: the engagement counter is what tells NCCL-carried calls apart.
        if size > a.custom_max_bytes:
            return fallback(al_ref, buf, size, slot)
        inner = one if size <= a.two_shot_above else two
        before = al_inner.engaged
        out = inner(al_inner, buf, size, slot)
        al.engaged += al_inner.engaged - before
        return out
    al_ref = Algo("fallback", "reference", "", {})
    al_inner = Algo("inner", "candidate", "", {})
    runs["custom_auto"] = auto

    for name, al in algos.items():
        if al.role != "positive_control":
            al.run = runs[name]
            continue
        base, fault = runs[al.extra["of"]], al.extra["fault"]
        al.run = make_control(a, comm, base, fault)
    return algos


def make_control(a, comm, base, fault):
    """A positive control: the candidate's run with a fault injected around the op."""
    import torch

    def run(al, buf, size, slot):
        if fault == "drop_peer" and size > a.drop_above:
            if comm.rank == comm.world - 1:
                buf.zero_()  # the large-message path loses the last peer's contribution
            al.faulted += 1
        out = base(al, buf, size, slot)
        if fault == "scale":
            out.mul_(1.0 + a.scale_fault)
            al.faulted += 1
        elif fault == "stale":
            prev = al.prev.get(slot)
            if prev is None:  # first call of this slot: nothing older to hand out
                al.prev[slot] = out.clone()
            else:
                res = prev.clone()
                prev.copy_(out)
                al.faulted += 1
                return res
        return out
    return run


class Score:
    """Running metrics of one algorithm in one case, accumulated over its calls on this rank."""

    def __init__(self):
        self.sse = self.sso = 0.0
        self.max_ulp = self.max_abs = self.max_rel = 0.0
        self.exact = self.same = True
        self.calls = 0
        self.pair_abs = self.pair_rel = 0.0
        self.pair_same = True

    def add(self, out, oracle, ref64, ref_dt, mag, comm, ref_out=None):
        import torch
        self.calls += 1
        o64 = out.to(torch.float64)
        d = o64 - oracle.to(torch.float64)
        self.sse += float((d * d).sum().item())
        self.sso += float((oracle.to(torch.float64) ** 2).sum().item())
        self.max_ulp = max(self.max_ulp, ulp_dist(out, oracle))
        e = (o64 - ref64).abs()
        self.max_abs = max(self.max_abs, finite(float(e.max().item())) if e.numel() else 0.0)
        self.max_rel = max(self.max_rel, finite(float(rel_err(e, mag).max().item())) if e.numel() else 0.0)
        self.exact = self.exact and bool(torch.equal(out, ref_dt))
        self.same = self.same and ranks_identical(out, comm)
        if ref_out is not None:
            pd = (o64 - ref_out.to(torch.float64)).abs()
            self.pair_abs = max(self.pair_abs, finite(float(pd.max().item())))
            self.pair_rel = max(self.pair_rel, finite(float(rel_err(pd, mag).max().item())))
            self.pair_same = self.pair_same and bool(torch.equal(bits(out), bits(ref_out)))


def bits(t):
    """t's bit patterns (int16 for bfloat16, int32 for float32): equal means bit-identical."""
    import torch
    return t.view(torch.int16) if t.dtype == torch.bfloat16 else t.view(torch.int32)


def ranks_identical(out, comm):
    """Every rank's output bit-identical to rank 0's."""
    import torch
    g = comm.all_gather(out)
    return all(bool(torch.equal(bits(g[0]), bits(x))) for x in g[1:])


# --- the run ---------------------------------------------------------------------------------


def worker(rank, world, a):
    import torch
    import torch.distributed as dist

    if a.backend == "nccl":
        local = int(os.environ.get("LOCAL_RANK", rank))
        if not torch.cuda.is_available() or local >= torch.cuda.device_count():
            raise SystemExit(f"torch_allreduce_probe: rank {rank} needs GPU {local}, but "
                             f"{torch.cuda.device_count()} CUDA device(s) are visible: start at most "
                             "one process per GPU (or use --backend gloo on CPUs)")
        torch.cuda.set_device(local)
        dev = torch.device("cuda", local)
        import inspect
        kw = {"device_id": dev} if "device_id" in inspect.signature(dist.init_process_group).parameters else {}
        dist.init_process_group("nccl", rank=rank, world_size=world,
                                timeout=datetime.timedelta(minutes=5), **kw)
    else:
        dev = torch.device("cpu")
        torch.set_num_threads(1)
        dist.init_process_group("gloo", rank=rank, world_size=world,
                                timeout=datetime.timedelta(minutes=5))
    try:
        result = run_probe(rank, world, a, dev)
        if rank == 0:
            write_atomic(a.out, json.dumps(result, indent=1, allow_nan=False) + "\n")
            print(f"wrote {a.out}: {len(result['results'])} cases on {result['device']}", flush=True)
    finally:
        dist.barrier()
        dist.destroy_process_group()


def nccl_twin_groups(a, dist, dev):
    """The NCCL twins' groups, each created (and its communicator initialised by a first
    collective) under its own setting; the environment is restored afterwards."""
    import torch
    groups = {}
    world = list(range(dist.get_world_size()))
    envs = {"nccl_ring": {"NCCL_ALGO": "Ring"}, "nccl_tree": {"NCCL_ALGO": "Tree"}}
    for name, env in envs.items():
        if name not in a.algorithm_list:
            continue
        saved = {k: os.environ.get(k) for k in env}
        os.environ.update(env)
        try:
            g = dist.new_group(world, backend="nccl")
            t = torch.ones(1, device=dev)
            dist.all_reduce(t, group=g)
            torch.cuda.synchronize()
        finally:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
        groups[name] = g
    if "nccl_ch2" in a.algorithm_list:
        opts = None
        try:
            opts = dist.ProcessGroupNCCL.Options()
            opts.config.min_ctas = 2
            opts.config.max_ctas = 2
        except Exception:  # noqa: BLE001 - older torch: the environment instead
            opts = None
        env = {} if opts is not None else {"NCCL_MIN_NCHANNELS": "2", "NCCL_MAX_NCHANNELS": "2"}
        saved = {k: os.environ.get(k) for k in env}
        os.environ.update(env)
        try:
            g = dist.new_group(world, backend="nccl", pg_options=opts) if opts is not None else \
                dist.new_group(world, backend="nccl")
            t = torch.ones(1, device=dev)
            dist.all_reduce(t, group=g)
            torch.cuda.synchronize()
        finally:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
        groups["nccl_ch2"] = g
    return groups


def run_probe(rank, world, a, dev):
    import torch
    import torch.distributed as dist

    comm = Comm(dist, a.backend, rank, world, dev)
    symm, groups = None, {}
    if a.backend == "nccl":
        symm = SymmMem(dist, comm, dist.group.WORLD.group_name, dev)
        groups = nccl_twin_groups(a, dist, dev)
    algos = build_algos(a, comm, symm, groups)
    dtypes = {"float32": torch.float32, "bfloat16": torch.bfloat16}
    results = []
    for size, dt_name, kind, mode in case_list(a):
        numel = size // DTYPE_BYTES[dt_name]
        results.append(run_case(comm, a, algos, symm, size, numel, dt_name, dtypes[dt_name], kind, mode))
        if rank == 0:
            print(f"  {size:>10} B {dt_name:<8} {kind:<15} {mode:<6} done", flush=True)
    if a.backend == "nccl":
        nccl_version = ".".join(str(x) for x in torch.cuda.nccl.version())
        device = (f"{torch.cuda.get_device_name(dev)} x{world} (torch {torch.__version__}, "
                  f"nccl {nccl_version}, cuda {torch.version.cuda})")
        source = "torch.distributed"
    else:
        device = f"cpu x{world} processes (gloo, torch {torch.__version__})"
        source = "torch.distributed/gloo"
    roles = []
    for name, role, setting, extra in roster(a.backend, a.controls_of):
        if name not in algos:
            continue
        r = {"algorithm": name, "role": role}
        if setting:
            r["setting"] = setting
        if role == "candidate":
            r["max_bytes"] = a.custom_max_bytes
        if role == "positive_control":
            r["of"], r["fault"] = extra["of"], extra["fault"]
            if extra["fault"] == "scale":
                r["setting"] = f"output x (1 + {a.scale_fault:g})"
            elif extra["fault"] == "drop_peer":
                r["above_bytes"] = a.drop_above
                r["setting"] = f"the last rank's payload left out above {a.drop_above} bytes"
            else:
                r["setting"] = "the previous call's (replay's) result returned"
        roles.append(r)
    return {
        "schema": SCHEMA,
        "source": source,
        "world_size": world,
        "device": device,
        "reference": a.reference,
        "calibration": {"oracle": ORACLE, "roles": roles},
        "results": results,
    }


class SymmMem:
    """Symmetric-memory buffers, one per (numel, dtype, slot), allocated and rendezvoused on all
    ranks."""

    def __init__(self, dist, comm, group_name, dev):
        self.dist, self.comm, self.group_name, self.dev = dist, comm, group_name, dev
        self.buffers = {}
        self.unavailable = None
        try:
            import torch
            import torch.distributed._symmetric_memory as symm_mem
            self.mod = symm_mem
            self.ops = torch.ops.symm_mem
        except Exception as e:  # noqa: BLE001 - any failure means "not available here"
            self.unavailable = f"torch.distributed._symmetric_memory unavailable: {type(e).__name__}: {e}"

    def op(self, name):
        """Returns the torch.ops.symm_mem op or raises with a readable reason."""
        if self.unavailable:
            raise Skip(self.unavailable)
        try:
            return getattr(self.ops, name)
        except (AttributeError, RuntimeError) as e:
            raise Skip(f"torch.ops.symm_mem.{name} not in this PyTorch: {e}") from e

    def buffer(self, numel, dtype, slot):
        """A rendezvoused symmetric tensor, or raises Skip on every rank alike."""
        key = (numel, dtype, slot)
        if key in self.buffers:
            return self.buffers[key]
        if self.unavailable:
            raise Skip(self.unavailable)
        err = None
        buf = None
        try:
            buf = self.mod.empty(numel, dtype=dtype, device=self.dev)
        except Exception as e:  # noqa: BLE001
            err = f"symm_mem.empty({numel}, {dtype}) failed: {type(e).__name__}: {e}"
        agree(self.comm, err)
        try:
            self.mod.rendezvous(buf, self.group_name)
        except Exception as e:  # noqa: BLE001
            err = f"symm_mem.rendezvous failed: {type(e).__name__}: {e}"
        agree(self.comm, err)
        self.buffers[key] = buf
        return buf


def uses_symm(a, name):
    base = name.split("+")[0]
    return a.backend == "nccl" and base in ("symm_mem_one_shot", "symm_mem_two_shot", "custom_auto")


def sync(dev):
    import torch
    if dev.type == "cuda":
        torch.cuda.synchronize()


def run_case(comm, a, algos, symm, size, numel, dt_name, dt, kind, mode):
    """One case: every algorithm on the same fresh payloads; metrics against the oracle and the
    float64 sum, max over ranks (sums for NRMSE)."""
    import torch

    world, rank, dev = comm.world, comm.rank, comm.dev
    if mode == "eager":
        per_sync, syncs = 1, max(a.calls, min(MAX_CALLS, -(-a.min_samples // numel)))
    elif mode == "queued":
        per_sync = a.queued
        syncs = max(1, min(MAX_CALLS // per_sync, -(-a.min_samples // (numel * per_sync))))
    else:
        per_sync = int(mode[-1])
        syncs = max(a.replays, min(MAX_CALLS // per_sync, -(-a.min_samples // (numel * per_sync))))
    ncalls = per_sync * syncs
    # Payloads, oracle and float64 references for every call (slot k of sync j is call j*per_sync+k).
    payload, oracle, ref64, refdt, mag = [], [], [], [], []
    for c in range(ncalls):
        mine = make_inputs(a, world, numel, dt_name, dt, kind, rank, dev, call=c)
        g = comm.all_gather(mine)
        payload.append(mine)
        oracle.append(oracle_sum(g, dt))
        r64 = torch.zeros(numel, dtype=torch.float64, device=dev)
        m = torch.zeros(numel, dtype=torch.float64, device=dev)
        for x in g:
            r64 += x.to(torch.float64)
            m += x.to(torch.float64).abs()
        ref64.append(r64)
        refdt.append(round_ref(r64, dt_name))
        mag.append(m)

    entries, ref_outs = [], None
    order = [a.reference] + [n for n in a.algorithm_list if n != a.reference]
    for name in order:
        al = algos[name]
        al.engaged = al.faulted = 0
        al.prev = {}
        entry = {"name": name, "max_abs_err": 0.0, "max_rel_err": 0.0, "exact": False}
        try:
            outs, med = drive(comm, a, al, symm, size, numel, dt, mode, per_sync, syncs, payload)
            agree(comm, None)
        except Skip as e:
            entry["skipped"] = str(e)
            entries.append(entry)
            continue
        except Exception as e:  # noqa: BLE001 - report, and keep ranks in step
            reason = f"{type(e).__name__}: {e}".splitlines()[0][:300]
            try:
                agree(comm, reason)
            except Skip as s:
                entry["skipped"] = str(s)
            entries.append(entry)
            continue
        sc = Score()
        for c, out in enumerate(outs):
            sc.add(out, oracle[c], ref64[c], refdt[c], mag[c], comm,
                   ref_outs[c] if (ref_outs is not None and name != a.reference) else None)
        if name == a.reference:
            ref_outs = outs
        sse, sso = comm.sum_stats([sc.sse, sc.sso])
        mx = comm.max_stats([sc.max_ulp, sc.max_abs, sc.max_rel, 0.0 if sc.exact else 1.0,
                             0.0 if sc.same else 1.0, med or 0.0, sc.pair_abs, sc.pair_rel,
                             0.0 if sc.pair_same else 1.0])
        nrmse = math.sqrt(sse / sso) if sso > 0 else (0.0 if sse == 0 else 1e300)
        entry.update({"max_abs_err": finite(mx[1]), "max_rel_err": finite(mx[2]), "exact": mx[3] == 0.0,
                      "nrmse": finite(nrmse), "max_ulp": finite(mx[0]), "ranks_identical": mx[4] == 0.0})
        if med is not None:
            entry["median_us"] = finite(mx[5])
        if al.counts_engagement():
            eng = comm.max_stats([float(al.engaged)])[0]
            entry["engaged_calls"] = int(eng)
        if al.role == "positive_control":
            entry["faulted_calls"] = int(comm.max_stats([float(al.faulted)])[0])
        entry["_pair"] = (mx[6], mx[7], mx[8] == 0.0)
        entries.append(entry)

    pairs = []
    for e in entries:
        p = e.pop("_pair", None)
        if p is not None and e["name"] != a.reference and ref_outs is not None:
            pairs.append({"a": e["name"], "b": a.reference, "max_abs_diff": p[0],
                          "max_rel_diff": p[1], "identical": p[2]})
    case = {"size_bytes": size, "elements": numel, "dtype": dt_name, "inputs": kind,
            "mode": "cuda_graph" if mode.startswith("graph") else mode,
            "calls": ncalls, "calls_per_sync": per_sync, "algorithms": entries, "pairs": pairs}
    return case


def drive(comm, a, al, symm, size, numel, dt, mode, per_sync, syncs, payload):
    """Runs al on every payload in the case's call pattern; returns (outputs, median_us or None)."""
    import torch
    dev = comm.dev
    bufs = []
    for k in range(per_sync):
        if uses_symm(a, al.name):
            if size > a.custom_max_bytes and not al.name.startswith("custom_auto"):
                raise Skip(f"above the custom path's size limit --custom-max-bytes {a.custom_max_bytes}")
            bufs.append(symm.buffer(numel, dt, k))
        else:
            bufs.append(torch.empty(numel, dtype=dt, device=dev))
    outs = []
    if mode == "eager" or mode == "queued":
        for j in range(syncs):
            res = []
            for k in range(per_sync):
                bufs[k].copy_(payload[j * per_sync + k])
                res.append(al.run(al, bufs[k], size, k))
                if mode == "queued":
                    res[-1] = res[-1].clone()  # the next call may reuse the op's output buffer
            sync(dev)
            outs.extend(r.clone() for r in res)
        med = time_eager(comm, a, al, bufs[0], size, payload[:per_sync * syncs]) if mode == "eager" else None
        return outs, med
    # CUDA graph: warm up (also primes the stale control), capture per_sync calls, replay.
    if not al.capturable:
        raise Skip("not capturable in a CUDA graph")
    results = [torch.empty(numel, dtype=dt, device=dev) for _ in range(per_sync)]
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for k in range(per_sync):
            # the last replay's payloads, so that the first replay's result differs from the
            # warm-up's (the stale control then hands out a wrong result from the first replay)
            bufs[k].copy_(payload[len(payload) - per_sync + k])
            results[k].copy_(al.run(al, bufs[k], size, k))
    torch.cuda.current_stream().wait_stream(s)
    sync(dev)
    warm_eng, warm_fault = al.engaged, al.faulted
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for k in range(per_sync):
            results[k].copy_(al.run(al, bufs[k], size, k))
    # The Python wrapper ran once at capture; each replay runs the captured kernels again.
    cap_eng, cap_fault = al.engaged - warm_eng, al.faulted - warm_fault
    al.engaged, al.faulted = cap_eng * syncs, cap_fault * syncs
    for j in range(syncs):
        for k in range(per_sync):
            bufs[k].copy_(payload[j * per_sync + k])  # a fresh payload before every replay
        graph.replay()
        sync(dev)
        outs.extend(r.clone() for r in results)
    del graph
    return outs, None


def time_eager(comm, a, al, buf, size, payloads):
    """Median microseconds of one call, payloads cycled (consecutive calls never see the same
    data). GPU: CUDA events around the op, the host's launch hidden behind a ~100 us spin; CPU:
    wall time. Counters are restored: only the scored calls count."""
    import torch
    eng, flt, prev = al.engaged, al.faulted, dict(al.prev)
    cuda = comm.dev.type == "cuda"
    spin = getattr(torch.cuda, "_sleep", None) if cuda else None
    for i in range(a.warmup):
        buf.copy_(payloads[i % len(payloads)])
        al.run(al, buf, size, 0)
    sync(comm.dev)
    comm.dist.barrier()
    times = []
    for i in range(a.iters):
        buf.copy_(payloads[i % len(payloads)])
        if cuda:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            if spin is not None:
                spin(SPIN_CYCLES)
            start.record()
            al.run(al, buf, size, 0)
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end) * 1000.0)
        else:
            t0 = time.perf_counter()
            al.run(al, buf, size, 0)
            times.append((time.perf_counter() - t0) * 1e6)
    al.engaged, al.faulted, al.prev = eng, flt, prev
    return statistics.median(times)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def spawned(rank, world, a):
    os.environ["RANK"], os.environ["LOCAL_RANK"] = str(rank), str(rank)
    worker(rank, world, a)


def main(argv=None):
    try:
        a = parse_args(sys.argv[1:] if argv is None else argv)
    except UsageError as e:
        print(f"torch_allreduce_probe: {e}", file=sys.stderr)
        return 2
    if a.dry_run:
        print(json.dumps(plan(a), indent=2))
        return 0
    for k, v in SAFE_ENV.items():
        if os.environ.get(k) != v:
            print(f"torch_allreduce_probe: warning: {k}={os.environ.get(k)} (NVLink multicast may be "
                  f"used; {k}={v} keeps it off)", file=sys.stderr)
    if a.nproc:
        import torch
        import torch.multiprocessing as mp
        if a.backend == "nccl" and torch.cuda.device_count() < a.nproc:
            print(f"torch_allreduce_probe: --nproc {a.nproc} but {torch.cuda.device_count()} CUDA "
                  "device(s) are visible: one process per GPU (--backend gloo runs on CPUs)",
                  file=sys.stderr)
            return 2
        os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
        os.environ.setdefault("MASTER_PORT", str(free_port()))
        os.environ["WORLD_SIZE"] = str(a.nproc)
        mp.spawn(spawned, args=(a.nproc, a), nprocs=a.nproc, join=True)
        return 0
    if "RANK" not in os.environ or "WORLD_SIZE" not in os.environ:
        print("torch_allreduce_probe: start with torchrun (RANK/WORLD_SIZE unset) or pass --nproc N",
              file=sys.stderr)
        return 2
    world = int(os.environ["WORLD_SIZE"])
    if world < 2 and not a.allow_single_rank:
        print(f"torch_allreduce_probe: WORLD_SIZE={world}: an allreduce probe needs 2 or more ranks",
              file=sys.stderr)
        return 2
    worker(int(os.environ["RANK"]), world, a)
    return 0


if __name__ == "__main__":
    sys.exit(main())

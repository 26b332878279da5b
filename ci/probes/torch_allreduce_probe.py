#!/usr/bin/env python3
"""Op-level allreduce equivalence probe on real GPUs (reckon.allreduce-probe/v1).

One process per GPU. For every message size, dtype and input kind it runs

  * nccl               torch.distributed.all_reduce on the NCCL backend (the reference algorithm)
  * symm_mem_one_shot  torch.ops.symm_mem.one_shot_all_reduce   (PyTorch symmetric memory)
  * symm_mem_two_shot  torch.ops.symm_mem.two_shot_all_reduce_  (PyTorch symmetric memory)

and compares each one's output with a float64 reference sum of the same inputs and with the other
algorithms. Each algorithm is timed with CUDA events (median of --iters runs after --warmup runs).
An algorithm that cannot run (no symmetric memory in this PyTorch, an op missing, a size the op
refuses) is reported with "skipped" and the reason; it never silently becomes another algorithm.

The output file is exactly the JSON contract documented in docs/allreduce-probe.md, the same one
that `refengine probe-allreduce --json` writes; `refengine probe-allreduce --check FILE` reads it.

Run (either launcher):
  torchrun --nproc-per-node 2 ci/probes/torch_allreduce_probe.py --out probe.json
  python3 ci/probes/torch_allreduce_probe.py --nproc 2 --out probe.json
  python3 ci/probes/torch_allreduce_probe.py --dry-run --nproc 8 --sizes 1KiB,64MiB

NVLink multicast (NVLS) is kept off: NCCL_NVLS_ENABLE=0, TORCH_SYMM_MEM_DISABLE_MULTICAST=1 and
NVSHMEM_DISABLE_NVLS=1 are set when unset, before torch is imported.
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

SCHEMA = "reckon.allreduce-probe/v1"
SAFE_ENV = {
    "NCCL_NVLS_ENABLE": "0",
    "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
    "NVSHMEM_DISABLE_NVLS": "1",
}
DEFAULT_SIZES = "1KiB,4KiB,16KiB,64KiB,256KiB,1MiB,4MiB,16MiB,64MiB"
DTYPE_BYTES = {"float32": 4, "bfloat16": 2}
INPUT_KINDS = ("random", "integer")
ALGORITHMS = ("nccl", "symm_mem_one_shot", "symm_mem_two_shot")
REFERENCE = "nccl"
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


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes", default=DEFAULT_SIZES,
                   help="comma-separated message sizes per rank (bytes or 1KiB, 64MiB, ...)")
    p.add_argument("--dtype", default="float32,bfloat16", help="comma list: float32, bfloat16")
    p.add_argument("--inputs", default="random,integer", help="comma list: random, integer")
    p.add_argument("--algorithms", default=",".join(ALGORITHMS),
                   help="comma list of algorithms to run; nccl (the reference) is always run")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--warmup", type=int, default=10, help="untimed runs per algorithm and case")
    p.add_argument("--iters", type=int, default=100, help="timed runs per algorithm and case")
    p.add_argument("--nproc", type=int, default=0,
                   help="start this many processes with torch.multiprocessing (without torchrun)")
    p.add_argument("--out", help="write the probe JSON here (atomically); required unless --dry-run")
    p.add_argument("--dry-run", action="store_true",
                   help="validate the arguments and print the plan as JSON, without importing torch")
    a = p.parse_args(argv)
    a.size_list = parse_sizes(a.sizes)
    a.dtype_list = parse_list("--dtype", a.dtype, tuple(DTYPE_BYTES))
    a.input_list = parse_list("--inputs", a.inputs, INPUT_KINDS)
    algs = parse_list("--algorithms", a.algorithms, ALGORITHMS)
    a.algorithm_list = [REFERENCE] + [x for x in ALGORITHMS if x in algs and x != REFERENCE]
    for s in a.size_list:
        for dt in a.dtype_list:
            if s % DTYPE_BYTES[dt]:
                raise UsageError(f"--sizes {s}: not a multiple of the {dt} element size "
                                 f"({DTYPE_BYTES[dt]} bytes)")
    if a.warmup < 0 or a.iters < 1:
        raise UsageError(f"--warmup {a.warmup} / --iters {a.iters}: expected warmup >= 0, iters >= 1")
    if a.nproc < 0 or a.nproc == 1:
        raise UsageError(f"--nproc {a.nproc}: expected 0 (torchrun) or at least 2")
    if not a.dry_run and not a.out:
        raise UsageError("--out FILE is required (or --dry-run)")
    if a.out and not os.path.isdir(os.path.dirname(os.path.abspath(a.out))):
        raise UsageError(f"--out {a.out}: directory does not exist")
    return a


def plan(a):
    world = a.nproc or int(os.environ.get("WORLD_SIZE", "0")) or None
    return {
        "world_size": world,
        "sizes": a.size_list,
        "dtypes": a.dtype_list,
        "inputs": a.input_list,
        "algorithms": a.algorithm_list,
        "reference": REFERENCE,
        "cases": len(a.size_list) * len(a.dtype_list) * len(a.input_list),
        "warmup": a.warmup,
        "iters": a.iters,
        "env": {k: os.environ.get(k) for k in SAFE_ENV},
        "out": a.out,
    }


def case_seed(seed, world, numel, dtype, inputs, rank):
    key = f"{seed}/{world}/{numel}/{dtype}/{inputs}/{rank}".encode()
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


# ---------------------------------------------------------------------------------------------
# Everything below runs with torch, one process per GPU.


def worker(rank, world, a):
    import torch
    import torch.distributed as dist

    local = int(os.environ.get("LOCAL_RANK", rank))
    if not torch.cuda.is_available() or local >= torch.cuda.device_count():
        raise SystemExit(f"torch_allreduce_probe: rank {rank} needs GPU {local}, but "
                         f"{torch.cuda.device_count()} CUDA device(s) are visible: start at most "
                         "one process per GPU")
    torch.cuda.set_device(local)
    dev = torch.device("cuda", local)
    dist.init_process_group("nccl", rank=rank, world_size=world, device_id=dev,
                            timeout=datetime.timedelta(minutes=5))
    try:
        result = run_probe(rank, world, a, dev)
        if rank == 0:
            write_atomic(a.out, json.dumps(result, indent=2, allow_nan=False) + "\n")
            print(f"wrote {a.out}: {len(result['results'])} cases on {result['device']}", flush=True)
    finally:
        dist.barrier()
        dist.destroy_process_group()


def run_probe(rank, world, a, dev):
    import torch
    import torch.distributed as dist

    group_name = dist.group.WORLD.group_name
    symm = SymmMem(dist, group_name, dev)
    dtypes = {"float32": torch.float32, "bfloat16": torch.bfloat16}
    results = []
    for size in a.size_list:
        for dt_name in a.dtype_list:
            dt = dtypes[dt_name]
            numel = size // DTYPE_BYTES[dt_name]
            for kind in a.input_list:
                results.append(run_case(rank, world, a, dev, symm, size, numel, dt_name, dt, kind))
                if rank == 0:
                    print(f"  {size:>10} B {dt_name:<8} {kind:<7} done", flush=True)
    nccl_version = ".".join(str(x) for x in torch.cuda.nccl.version())
    return {
        "schema": SCHEMA,
        "source": "torch.distributed",
        "world_size": world,
        "device": f"{torch.cuda.get_device_name(dev)} x{world} (torch {torch.__version__}, "
                  f"nccl {nccl_version}, cuda {torch.version.cuda})",
        "reference": REFERENCE,
        "results": results,
    }


class SymmMem:
    """Symmetric-memory buffers, one per (numel, dtype), allocated and rendezvoused on all ranks."""

    def __init__(self, dist, group_name, dev):
        self.dist, self.group_name, self.dev = dist, group_name, dev
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
            raise RuntimeError(self.unavailable)
        try:
            return getattr(self.ops, name)
        except (AttributeError, RuntimeError) as e:
            raise RuntimeError(f"torch.ops.symm_mem.{name} not in this PyTorch: {e}") from e

    def buffer(self, numel, dtype):
        """A rendezvoused symmetric tensor, or raises on every rank alike."""
        key = (numel, dtype)
        if key in self.buffers:
            return self.buffers[key]
        if self.unavailable:
            raise RuntimeError(self.unavailable)
        err = None
        buf = None
        try:
            buf = self.mod.empty(numel, dtype=dtype, device=self.dev)
        except Exception as e:  # noqa: BLE001
            err = f"symm_mem.empty({numel}, {dtype}) failed: {type(e).__name__}: {e}"
        agree(self.dist, self.dev, err)  # raises on all ranks if any failed
        try:
            self.mod.rendezvous(buf, self.group_name)
        except Exception as e:  # noqa: BLE001
            err = f"symm_mem.rendezvous failed: {type(e).__name__}: {e}"
        agree(self.dist, self.dev, err)
        self.buffers[key] = buf
        return buf


class Skip(Exception):
    """The algorithm cannot run in this case; the message is the reason."""


def agree(dist, dev, err):
    """Makes every rank raise Skip when any rank saw an error, so collectives stay matched."""
    import torch
    flag = torch.tensor([1.0 if err else 0.0], device=dev)
    dist.all_reduce(flag, op=dist.ReduceOp.MAX)
    if flag.item() > 0:
        raise Skip(err or "failed on another rank")


def make_inputs(a, world, numel, dt_name, dt, kind, rank, dev):
    """Rank r's input, bit-identical on every process that builds it (seeded GPU generator)."""
    import torch
    g = torch.Generator(device=dev)
    g.manual_seed(case_seed(a.seed, world, numel, dt_name, kind, rank))
    if kind == "integer":
        # |x| <= k with k*world <= 2^p (p = 8 for bf16, 24 for fp32; at most 1024): every partial
        # sum in any order is an exactly representable integer, so every algorithm must be exact.
        k = min(1024, 256 // world) if dt_name == "bfloat16" else 1024
        x = torch.randint(-k, k + 1, (numel,), generator=g, device=dev).to(torch.float32)
    else:
        x = torch.randn(numel, generator=g, device=dev, dtype=torch.float32)
    return x.to(dt)


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


def metrics(out, ref64, mag):
    """(max_abs, max_rel) of out against the float64 reference."""
    import torch
    d = (out.to(torch.float64) - ref64).abs()
    return d.max().item(), rel_err(d, mag).max().item()


def run_case(rank, world, a, dev, symm, size, numel, dt_name, dt, kind):
    import torch
    import torch.distributed as dist

    mine = make_inputs(a, world, numel, dt_name, dt, kind, rank, dev)
    ref64 = torch.zeros(numel, dtype=torch.float64, device=dev)
    mag = torch.zeros(numel, dtype=torch.float64, device=dev)  # sum of |addends|
    for r in range(world):
        x = mine if r == rank else make_inputs(a, world, numel, dt_name, dt, kind, r, dev)
        ref64 += x.to(torch.float64)
        mag += x.to(torch.float64).abs()
    ref_dt = round_ref(ref64, dt_name)

    outputs = {}
    entries = []
    for name in a.algorithm_list:
        entry = {"name": name, "max_abs_err": 0.0, "max_rel_err": 0.0, "exact": False}
        try:
            op, buf = prepare(name, symm, numel, dt, dev)
            buf.copy_(mine)
            out = op(buf)  # the correctness run, on fresh inputs
            torch.cuda.synchronize()
            outputs[name] = out.clone()
            med = time_it(op, buf, mine, a.warmup, a.iters)
            agree(dist, dev, None)
        except Skip as e:
            entry["skipped"] = str(e)
            entries.append(entry)
            continue
        except Exception as e:  # noqa: BLE001 - report, and keep ranks in step
            reason = f"{type(e).__name__}: {e}".splitlines()[0][:300]
            try:
                agree(dist, dev, reason)
            except Skip as s:
                entry["skipped"] = str(s)
            entries.append(entry)
            continue
        o = outputs[name]
        abs_err, max_rel = metrics(o, ref64, mag)
        exact = bool(torch.equal(o, ref_dt))  # value equality: +0 == -0, NaN never exact
        same = ranks_identical(o, dist, dev)
        stats = torch.tensor([abs_err, max_rel, 0.0 if exact else 1.0, 0.0 if same else 1.0, med],
                             dtype=torch.float64, device=dev)
        dist.all_reduce(stats, op=dist.ReduceOp.MAX)
        # NaN/Inf errors (an algorithm that produced garbage) are written as a huge finite error:
        # the contract (strict JSON) forbids NaN literals, and the gate must fail the algorithm,
        # not reject the file.
        s = [x if math.isfinite(x) else 1e300 for x in stats.tolist()]
        entry.update({"max_abs_err": s[0], "max_rel_err": s[1], "exact": s[2] == 0.0,
                      "median_us": s[4], "ranks_identical": s[3] == 0.0})
        entries.append(entry)

    pairs = []
    names = [n for n in a.algorithm_list if n in outputs]
    for i, an in enumerate(names):
        for bn in names[:i]:
            d = (outputs[an].to(torch.float64) - outputs[bn].to(torch.float64)).abs()
            ident = bool(torch.equal(outputs[an], outputs[bn]))
            stats = torch.tensor([d.max().item(),
                                  rel_err(d, mag).max().item(),
                                  0.0 if ident else 1.0], dtype=torch.float64, device=dev)
            dist.all_reduce(stats, op=dist.ReduceOp.MAX)
            s = stats.tolist()
            # A = the candidate, B = the algorithm it is compared with (the reference first).
            pairs.append({"a": an, "b": bn, "max_abs_diff": s[0], "max_rel_diff": s[1],
                          "identical": s[2] == 0.0})
    return {"size_bytes": size, "elements": numel, "dtype": dt_name, "inputs": kind,
            "algorithms": entries, "pairs": pairs}


def prepare(name, symm, numel, dt, dev):
    """Returns (op, buf): the caller copies the input into buf; op(buf) runs the allreduce and
    returns the tensor holding the result."""
    import torch
    import torch.distributed as dist

    if name == "nccl":
        def nccl(b):
            dist.all_reduce(b, op=dist.ReduceOp.SUM)
            return b
        return nccl, torch.empty(numel, dtype=dt, device=dev)
    err = None
    try:
        op = symm.op("one_shot_all_reduce" if name == "symm_mem_one_shot" else "two_shot_all_reduce_")
    except Exception as e:  # noqa: BLE001
        err = str(e)
    agree(dist, dev, err)  # every rank skips together
    buf = symm.buffer(numel, dt)
    group = symm.group_name
    if name == "symm_mem_one_shot":
        def one_shot(b):
            return op(b, "sum", group)
        return one_shot, buf

    def two_shot(b):
        op(b, "sum", group)
        return b
    return two_shot, buf


def time_it(op, buf, inp, warmup, iters):
    """Median microseconds of the allreduce alone, timed with CUDA events around the op. Before
    every run the input is copied back into buf and the GPU spins for about 100 us
    (torch.cuda._sleep) so that the CPU has queued the op before the start event fires: the events
    then measure the device's time for the op (including waiting for the peers), not the host's
    launch overhead."""
    import torch
    import torch.distributed as dist

    spin = getattr(torch.cuda, "_sleep", None)
    for _ in range(warmup):
        buf.copy_(inp)
        op(buf)
    torch.cuda.synchronize()
    dist.barrier()
    times = []
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    for _ in range(iters):
        buf.copy_(inp)
        if spin is not None:
            spin(SPIN_CYCLES)
        start.record()
        op(buf)
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1000.0)
    return statistics.median(times)


def ranks_identical(out, dist, dev):
    import torch
    ref = out.clone()
    dist.broadcast(ref, src=0)
    return bool(torch.equal(out.view(torch.uint8), ref.view(torch.uint8)))  # bit-identical


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
        if torch.cuda.device_count() < a.nproc:
            print(f"torch_allreduce_probe: --nproc {a.nproc} but {torch.cuda.device_count()} CUDA "
                  "device(s) are visible: one process per GPU", file=sys.stderr)
            return 2
        os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
        os.environ.setdefault("MASTER_PORT", str(free_port()))
        mp.spawn(spawned, args=(a.nproc, a), nprocs=a.nproc, join=True)
        return 0
    if "RANK" not in os.environ or "WORLD_SIZE" not in os.environ:
        print("torch_allreduce_probe: start with torchrun (RANK/WORLD_SIZE unset) or pass --nproc N",
              file=sys.stderr)
        return 2
    world = int(os.environ["WORLD_SIZE"])
    if world < 2:
        print(f"torch_allreduce_probe: WORLD_SIZE={world}: an allreduce probe needs 2 or more ranks",
              file=sys.stderr)
        return 2
    worker(int(os.environ["RANK"]), world, a)
    return 0


if __name__ == "__main__":
    sys.exit(main())

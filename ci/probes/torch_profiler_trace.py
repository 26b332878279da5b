#!/usr/bin/env python3
"""Record a real torch-profiler Chrome trace of tensor-parallel-style allreduces, for reckon's
conformance corpus (fixtures/conformance/traces/): the trace format that SGLang's and vLLM's
/start_profile + /stop_profile write (torch.profiler with CPU and CUDA activities).

Run one process per GPU (torchrun --nproc-per-node N ci/probes/torch_profiler_trace.py OUTDIR), or
a single process on one GPU (world size 1). Each rank writes OUTDIR/rank{R}.trace.json.gz.
NVLink multicast stays off (NCCL_NVLS_ENABLE=0), as on shared machines it must.
"""
import gzip, json, os, shutil, sys

os.environ.setdefault("NCCL_NVLS_ENABLE", "0")
os.environ.setdefault("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1")
os.environ.setdefault("NVSHMEM_DISABLE_NVLS", "1")

import torch
import torch.distributed as dist
from torch.profiler import ProfilerActivity, profile


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "traces"
    os.makedirs(out, exist_ok=True)
    rank = int(os.environ.get("RANK", "0"))
    world = int(os.environ.get("WORLD_SIZE", "1"))
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29511")
    torch.cuda.set_device(rank % torch.cuda.device_count())
    dist.init_process_group("nccl", rank=rank, world_size=world)
    x = torch.randn(8, 4096, dtype=torch.bfloat16, device="cuda")
    w = torch.randn(4096, 4096, dtype=torch.bfloat16, device="cuda")
    for _ in range(3):  # warm-up: NCCL communicator set-up stays out of the window
        dist.all_reduce(x @ w)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(4):  # four "decode steps": a matmul, then its allreduce
            y = x @ w
            dist.all_reduce(y)
        torch.cuda.synchronize()
    path = os.path.join(out, f"rank{rank}.trace.json")
    prof.export_chrome_trace(path)
    with open(path, "rb") as f, gzip.open(path + ".gz", "wb") as g:
        shutil.copyfileobj(f, g)
    os.remove(path)
    with gzip.open(path + ".gz", "rt") as f:
        ev = json.load(f)["traceEvents"]
    kernels = sorted({e["name"] for e in ev if str(e.get("cat", "")).lower() == "kernel"})
    print(f"rank {rank}/{world}: torch {torch.__version__}, nccl {torch.cuda.nccl.version()}, {len(ev)} events; kernels:")
    for k in kernels:
        print("  ", k)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()

#!/usr/bin/env bash
# Runs the op-level allreduce probe on every GPU of this machine and judges it with reckon.
#
#   ci/probes/run-on-gpus.sh [OUTDIR]        (OUTDIR defaults to $OUT)
#
# Build reckon first (on any machine of the same OS/architecture): `go build -o bin/reckon
# ./cmd/reckon`. On the GPU machine the script
#   1. keeps NVLink multicast off (NCCL_NVLS_ENABLE=0, TORCH_SYMM_MEM_DISABLE_MULTICAST=1,
#      NVSHMEM_DISABLE_NVLS=1),
#   2. records the machine: nvidia-smi, nvidia-smi -L, nvidia-smi topo -m, nvidia-smi nvlink -s,
#      torch/CUDA/NCCL versions,
#   3. runs the calibrated probe ci/probes/torch_allreduce_probe.py under torchrun, one process
#      per GPU: its default sizes (across the one-shot/two-shot switch and the custom path's limit,
#      one element either side), float32 and bfloat16, random, wide, order-sensitive and integer
#      inputs, eager, queued and CUDA-graph (3 and 4 captured calls) patterns, NCCL and its twins
#      (NCCL_ALGO=Ring, Tree, 2 channels), the symmetric-memory candidates and the positive
#      controls,
#   4. runs `bin/reckon probe check` on the result (text to stdout and OUTDIR/check.txt, verdicts
#      as JSON in OUTDIR/check.json),
#   5. unless LATENCY=0, a latency sweep (1KiB, 2KiB, ..., 64MiB, bfloat16 random, eager, fresh
#      payloads; NCCL and the two symmetric-memory ops) into OUTDIR/torch_allreduce_latency.json,
#      printed as a table by `refengine probe-allreduce --check` when bin/refengine exists (that
#      file has no controls: it is for the timing table, not for the verdict).
# Everything lands in OUTDIR: torch_allreduce_probe.json, torchrun.log, check.txt, check.json,
# torch_allreduce_latency.json, latency.log, nvidia-smi*.txt, versions.txt.
#
# Environment overrides: NPROC (default: all GPUs), SIZES (comma list; default the probe's own),
# DTYPES, INPUTS, MODES, PROBE_ARGS (extra arguments for the probe, e.g. "--iters 20"), LATENCY
# (0 to skip the sweep), RECKON (default bin/reckon), PYTHON (default python3).
#
# Exit status: 0 the calibrated rule holds; 1 reckon found a fault (a candidate above the bound,
# not exact on integer inputs, not engaged, ranks that disagree) or controls that misbehave; 2
# usage or a probe file reckon cannot read; 3 infrastructure (no GPUs, fewer than 2, torchrun
# failed, reckon missing).
set -euo pipefail

die() { # die CODE MESSAGE
	echo "run-on-gpus: $2" >&2
	exit "$1"
}

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$repo"

outdir=${1:-${OUT:-}}
[[ $# -le 1 ]] || die 2 "usage: $0 [OUTDIR] (one directory; default \$OUT)"
[[ -n $outdir ]] || die 2 "no output directory: pass one, or set \$OUT"
mkdir -p "$outdir" || die 2 "cannot create $outdir"
outdir=$(cd "$outdir" && pwd)

reckon=${RECKON:-$repo/bin/reckon}
python=${PYTHON:-python3}
[[ -x $reckon ]] || die 3 "$reckon not found or not executable: build it first (go build -o bin/reckon ./cmd/reckon)"
"$reckon" --version >/dev/null 2>&1 || die 3 "$reckon does not run here (built for another OS or architecture?)"
command -v nvidia-smi >/dev/null || die 3 "nvidia-smi not found: not a GPU machine"

# NVLink multicast stays off, whatever the environment said.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1

# The machine, as the probe saw it. Only the GPU list is required; the rest is best effort.
nvidia-smi -L >"$outdir/nvidia-smi-L.txt" 2>&1 || die 3 "nvidia-smi -L failed: $(cat "$outdir/nvidia-smi-L.txt")"
ngpu=$(grep -c '^GPU [0-9]' "$outdir/nvidia-smi-L.txt" || true)
nproc=${NPROC:-$ngpu}
[[ $nproc =~ ^[0-9]+$ ]] || die 2 "NPROC=$nproc: expected a number of processes"
((nproc >= 2)) || die 3 "$nproc GPU(s) to use ($ngpu visible): an allreduce probe needs at least 2"
((nproc <= ngpu)) || die 2 "NPROC=$nproc but only $ngpu GPU(s) are visible"
nvidia-smi topo -m >"$outdir/nvidia-smi-topo-m.txt" 2>&1 || echo "run-on-gpus: warning: nvidia-smi topo -m failed" >&2
nvidia-smi nvlink -s >"$outdir/nvidia-smi-nvlink-s.txt" 2>&1 || true
nvidia-smi >"$outdir/nvidia-smi.txt" 2>&1 || true
"$python" - >"$outdir/versions.txt" 2>&1 <<'EOF' || echo "run-on-gpus: warning: could not read the torch versions (see versions.txt)" >&2
import torch
print("torch", torch.__version__)
print("cuda", torch.version.cuda)
print("nccl", ".".join(map(str, torch.cuda.nccl.version())))
print("devices", [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())])
EOF
{
	echo "NCCL_NVLS_ENABLE=$NCCL_NVLS_ENABLE"
	echo "TORCH_SYMM_MEM_DISABLE_MULTICAST=$TORCH_SYMM_MEM_DISABLE_MULTICAST"
	echo "NVSHMEM_DISABLE_NVLS=$NVSHMEM_DISABLE_NVLS"
	echo "nproc=$nproc of $ngpu GPUs"
} >>"$outdir/versions.txt"
echo "run-on-gpus: $nproc of $ngpu GPUs; topology:" >&2
sed 's/\x1b\[[0-9;]*m//g' "$outdir/nvidia-smi-topo-m.txt" >&2 || true

# Message sizes per rank for the latency sweep: 1KiB, 2KiB, ..., 64MiB.
SWEEP=""
for ((s = 1; s <= 65536; s *= 2)); do
	if ((s < 1024)); then SWEEP+="${s}KiB,"; else SWEEP+="$((s / 1024))MiB,"; fi
done
SWEEP=${SWEEP%,}

if command -v torchrun >/dev/null; then
	launch=(torchrun)
else
	launch=("$python" -m torch.distributed.run)
fi
probe_json="$outdir/torch_allreduce_probe.json"
rm -f "$probe_json"
read -r -a extra <<<"${PROBE_ARGS:-}" # a list of words, e.g. "--iters 20 --warmup 5"
sizes=()
[[ -z ${SIZES:-} ]] || sizes=(--sizes "$SIZES")
cmd=("${launch[@]}" --standalone --nproc-per-node "$nproc" ci/probes/torch_allreduce_probe.py
	--backend nccl "${sizes[@]}" --dtype "${DTYPES:-float32,bfloat16}"
	--inputs "${INPUTS:-random,wide,order_sensitive,integer}" --modes "${MODES:-eager,queued,graph3,graph4}"
	--out "$probe_json" "${extra[@]}")
echo "run-on-gpus: ${cmd[*]}" | tee "$outdir/torchrun.log" >&2
set +e
"${cmd[@]}" 2>&1 | tee -a "$outdir/torchrun.log" >&2
rc=${PIPESTATUS[0]}
set -e
if ((rc != 0)); then
	die 3 "the probe failed (exit $rc); see $outdir/torchrun.log"
fi
[[ -s $probe_json ]] || die 3 "the probe exited 0 but wrote no $probe_json"

# Judge it. The text verdict is the job's log; the JSON is for the reports.
set +e
"$reckon" probe check --json "$probe_json" >"$outdir/check.json" 2>/dev/null # same verdicts as below
"$reckon" probe check "$probe_json" | tee "$outdir/check.txt"
rc=${PIPESTATUS[0]}
set -e
if [[ ${LATENCY:-1} != 0 ]]; then
	lat_json="$outdir/torch_allreduce_latency.json"
	lat=("${launch[@]}" --standalone --nproc-per-node "$nproc" ci/probes/torch_allreduce_probe.py
		--backend nccl --sizes "$SWEEP" --dtype bfloat16 --inputs random --modes eager
		--algorithms nccl,symm_mem_one_shot,symm_mem_two_shot --custom-max-bytes 64MiB --out "$lat_json")
	echo "run-on-gpus: ${lat[*]}" | tee "$outdir/latency.log" >&2
	if "${lat[@]}" >>"$outdir/latency.log" 2>&1; then
		if [[ -x $repo/bin/refengine ]]; then
			"$repo/bin/refengine" probe-allreduce --check "$lat_json" >"$outdir/latency.txt" 2>&1 || true
		fi
	else
		echo "run-on-gpus: warning: the latency sweep failed; see $outdir/latency.log" >&2
	fi
fi
case $rc in
0) echo "run-on-gpus: PASS: the calibrated rule holds ($probe_json)" >&2 ;;
1) echo "run-on-gpus: FAIL: see $outdir/check.txt" >&2 ;;
*) echo "run-on-gpus: reckon probe check exited $rc" >&2 ;;
esac
exit "$rc"

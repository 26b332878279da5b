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
#   3. runs ci/probes/torch_allreduce_probe.py under torchrun, one process per GPU, over message
#      sizes 1KiB, 2KiB, ..., 64MiB, float32 and bfloat16, random and integer inputs,
#   4. runs `bin/reckon probe check` on the result (text to stdout and OUTDIR/check.txt, verdicts
#      as JSON in OUTDIR/check.json).
# Everything lands in OUTDIR: torch_allreduce_probe.json, torchrun.log, check.txt, check.json,
# nvidia-smi*.txt, versions.txt.
#
# Environment overrides: NPROC (default: all GPUs), SIZES (comma list), DTYPES, INPUTS,
# PROBE_ARGS (extra arguments for the probe, e.g. "--iters 20"), RECKON (default bin/reckon),
# PYTHON (default python3).
#
# Exit status: 0 the probe holds the contract; 1 reckon found a fault (an algorithm out of
# tolerance, not exact on integer inputs, or ranks that disagree); 2 usage or a probe file reckon
# cannot read; 3 infrastructure (no GPUs, fewer than 2, torchrun failed, reckon missing).
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

# Message sizes per rank: 1KiB, 2KiB, ..., 64MiB unless SIZES says otherwise.
if [[ -z ${SIZES:-} ]]; then
	SIZES=""
	for ((s = 1; s <= 65536; s *= 2)); do
		if ((s < 1024)); then SIZES+="${s}KiB,"; else SIZES+="$((s / 1024))MiB,"; fi
	done
	SIZES=${SIZES%,}
fi

if command -v torchrun >/dev/null; then
	launch=(torchrun)
else
	launch=("$python" -m torch.distributed.run)
fi
probe_json="$outdir/torch_allreduce_probe.json"
rm -f "$probe_json"
read -r -a extra <<<"${PROBE_ARGS:-}" # a list of words, e.g. "--iters 20 --warmup 5"
cmd=("${launch[@]}" --standalone --nproc-per-node "$nproc" ci/probes/torch_allreduce_probe.py
	--sizes "$SIZES" --dtype "${DTYPES:-float32,bfloat16}" --inputs "${INPUTS:-random,integer}"
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
case $rc in
0) echo "run-on-gpus: PASS: the allreduce probe holds the contract ($probe_json)" >&2 ;;
1) echo "run-on-gpus: FAIL: see $outdir/check.txt" >&2 ;;
*) echo "run-on-gpus: reckon probe check exited $rc" >&2 ;;
esac
exit "$rc"

#!/usr/bin/env bash
# step-cost.sh CORES HOGS CONCURRENCY [REFENGINE FLAGS...]
#
# Starts the reference engine as default.yaml's custom-ar config (tp 4, device clock) pinned to
# CORES (e.g. 0,1) with HOGS busy loops pinned there too, drives it with reckon bench at
# CONCURRENCY, and prints one line: the throughput and the device clock's counters (steps,
# overruns, modelled and real compute seconds), i.e. how close the real CPU compute per step comes
# to the modelled step on a loaded box.
set -euo pipefail
cores=${1:?cores}; hogs=${2:?hogs}; conc=${3:?concurrency}; shift 3
work=$(mktemp -d)
pids=()
cleanup() { [ ${#pids[@]} -eq 0 ] || kill "${pids[@]}" 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT
for _ in $(seq 1 "$hogs"); do taskset -c "$cores" sh -c 'while :; do :; done' & pids+=($!); done
port=$((20000 + RANDOM % 20000))
taskset -c "$cores" bin/refengine --model-path fixtures/models/tiny.json --tp-size 4 --topology nvlink \
	--dtype bfloat16 --random-seed 1 --clock modelled --port "$port" "$@" >"$work/engine.log" 2>&1 &
pids+=($!)
for _ in $(seq 1 300); do curl -sf "localhost:$port/health" >/dev/null && break; sleep 0.1; done
taskset -c "$cores" bin/reckon bench --url "http://localhost:$port" --concurrency "$conc" --num-prompts 64 \
	--input-len 64 --output-len 32 --backend sglang --result "$work/bench.json" >"$work/bench.log" 2>&1
curl -sf "localhost:$port/server_info" >"$work/info.json"
python3 - "$work" "$hogs" "$conc" "$*" <<'PY'
import json, sys
w, hogs, conc, flags = sys.argv[1:5]
b = json.load(open(w + "/bench.json"))
d = json.load(open(w + "/info.json"))["refengine"]["device_clock"]
s = d["steps"]
print(f"hogs={hogs} conc={conc} flags=[{flags}] tok/s={b['output_throughput']:.1f} steps={s} overruns={d['cpu_overrun_steps']} "
      f"modelled/step={1e3*d['modelled_s']/s:.2f}ms real/step={1e3*d['real_compute_s']/s:.2f}ms repaid={d['repaid_s']:.2f}s worst={1e3*d['worst_cpu_overrun_s']:.0f}ms")
PY

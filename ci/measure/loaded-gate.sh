#!/usr/bin/env bash
# loaded-gate.sh RUNS SLOTS OUT [SPEC]
#
# Runs `reckon gate` RUNS times on simulated loaded 2-core boxes: slot s owns cores 2s and 2s+1;
# the gate, its engines and BUSY (default 2) busy loops are pinned there, so every run sees two
# cores shared with two CPU hogs, as on a busy CI runner. Slots run concurrently; each appends
# one row to OUT/runs.tsv when its run ends:
#   run  slot  exit  seconds  closing line of the gate
# BUSY=0 gives the idle control. Needs taskset (util-linux) and bin/reckon, bin/refengine built.
set -euo pipefail
runs=${1:?usage: loaded-gate.sh RUNS SLOTS OUT [SPEC]}
slots=${2:?usage: loaded-gate.sh RUNS SLOTS OUT [SPEC]}
out=${3:?usage: loaded-gate.sh RUNS SLOTS OUT [SPEC]}
spec=${4:-fixtures/specs/default.yaml}
busy=${BUSY:-2}
mkdir -p "$out"
hogs=()
cleanup() { [ ${#hogs[@]} -eq 0 ] || kill "${hogs[@]}" 2>/dev/null || true; }
trap cleanup EXIT INT TERM

cores_of() { echo "$((2 * $1)),$((2 * $1 + 1))"; }

for s in $(seq 0 $((slots - 1))); do
	for _ in $(seq 1 "$busy"); do
		taskset -c "$(cores_of "$s")" sh -c 'while :; do :; done' &
		hogs+=($!)
	done
done

run_slot() {
	local s=$1 n=$1 start rc
	while [ "$n" -lt "$runs" ]; do
		start=$(date +%s)
		set +e
		taskset -c "$(cores_of "$s")" bin/reckon gate --spec "$spec" --out "$out/run-$n" --quiet >"$out/run-$n.txt" 2>&1
		rc=$?
		set -e
		printf '%s\t%s\t%s\t%s\t%s\n' "$n" "$s" "$rc" "$(($(date +%s) - start))" "$(tail -n 1 "$out/run-$n.txt")" >>"$out/runs.tsv"
		n=$((n + slots))
	done
}

pids=()
for s in $(seq 0 $((slots - 1))); do
	run_slot "$s" &
	pids+=($!)
done
wait "${pids[@]}"

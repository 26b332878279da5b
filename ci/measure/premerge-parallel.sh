#!/usr/bin/env bash
# premerge-parallel.sh SETS BOOT STREAMS OUT
#
# The shipped pre-merge design end to end on the reference engine (as affordable-verdicts.sh
# premerge), laid out for a many-core machine so that 20+ pull requests of each kind fit in
# minutes: SETS testbed histories are each bootstrapped by BOOT calibration runs (main against
# main, no --strict) launched side by side and appended with `reckon history add` (as the
# templates' calibration job appends its runs); then STREAMS streams, each reading one of those
# histories (--history-readonly), run one no-op PR and one PR with 5% less throughput, each with
# --strict. Every run draws its own launches' noise (device clock, 2% between launches and 2%
# within: fixtures/specs/affordable/premerge.yaml).
# Rows in OUT/rows.tsv:  phase  stream  exit  outcome  message
# Needs bin/reckon and bin/refengine built (make build).
set -euo pipefail
sets=${1:?usage: premerge-parallel.sh SETS BOOT STREAMS OUT}
boot=${2:?usage: premerge-parallel.sh SETS BOOT STREAMS OUT}
streams=${3:?usage: premerge-parallel.sh SETS BOOT STREAMS OUT}
out=${4:?usage: premerge-parallel.sh SETS BOOT STREAMS OUT}
mkdir -p "$out"
out=$(cd "$out" && pwd)
: >"$out/rows.tsv"

# gate_run DIR SEED FIRSTLAUNCH SLOWDOWN PHASE STREAM [FLAGS...]: one gate run in DIR; a row.
gate_run() {
	local dir=$1 seed=$2 first=$3 slow=$4 phase=$5 stream=$6
	shift 6
	mkdir -p "$dir"
	echo "$first" >"$dir/launch-counter"
	sed -e "s/SLOWDOWN/$slow/" -e "s/SEED/$seed/" -e "s#COUNTER#$dir/launch-counter#" \
		fixtures/specs/affordable/premerge.yaml >"$dir/spec.yaml"
	local rc=0
	bin/reckon gate --spec "$dir/spec.yaml" --out "$dir/run" --quiet "$@" >"$dir/gate.log" 2>&1 || rc=$?
	local line
	line=$(python3 ci/measure/verdict-line.py "$dir/run/results.json" || printf '?\t?')
	printf '%s\t%s\t%d\t%s\n' "$phase" "$stream" "$rc" "$line" >>"$out/rows.tsv"
}

# 1. Bootstrap: SETS x BOOT calibration runs side by side (each its own noise draws), then each
#    set's runs appended to that set's history.
for s in $(seq 1 "$sets"); do
	for r in $(seq 1 "$boot"); do
		gate_run "$out/boot$s/r$r" "$((100 * s))" "$((8 * r))" 1 boot "$s" \
			--commit "$(printf 'a%03d%036x' "$s" "$r")" &
	done
done
wait
for s in $(seq 1 "$sets"); do
	for r in $(seq 1 "$boot"); do
		bin/reckon history add --history "$out/boot$s/history.db" "$out/boot$s/r$r/run/results.json" >/dev/null
	done
done

# 2. Pull requests: each stream copies one set's history and runs a no-op PR and a 5% slower PR
#    side by side, reading the copy only.
for i in $(seq 1 "$streams"); do
	s=$(((i - 1) % sets + 1))
	for kind in noop slow; do
		slow=1
		[ "$kind" = slow ] && slow=1.0526
		dir="$out/$kind$i"
		mkdir -p "$dir"
		cp "$out/boot$s/history.db" "$dir/history.db"
		gate_run "$dir" "$((10000 + i))" 0 "$slow" "$kind" "$i" \
			--strict --history "$dir/history.db" --history-readonly --commit "$(printf 'c%03d%036x' "$i" 1)" &
	done
done
wait
awk -F'\t' '{n[$1]++; if ($3 == 0) g[$1]++} END {for (p in n) printf "%s: %d runs, %d exit 0 (green)\n", p, n[p], g[p]}' "$out/rows.tsv"

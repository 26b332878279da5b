#!/usr/bin/env bash
# nightly-parallel.sh STREAMS OUT
#
# The shipped nightly design end to end on the reference engine (as affordable-verdicts.sh
# nightly), laid out for a many-core machine: STREAMS independent testbeds, each bootstrapped by
# BOOT (default 20) nights without --strict (the documented bootstrap; the nights are launched
# side by side, at most JOBS (default 48) at once, then appended to the stream's history in
# order with `reckon history add`), followed by HEALTHY (10) nights and then STEP (6) nights with
# 5% less throughput, one after another, each `reckon gate --strict --history DB` as the nightly
# template runs it. Device clock, 2% between launches and 2% within
# (fixtures/specs/affordable/nightly.yaml).
# Rows in OUT/rows.tsv:  phase  stream  night  exit  outcome  message
# Needs bin/reckon and bin/refengine built (make build).
set -euo pipefail
streams=${1:?usage: nightly-parallel.sh STREAMS OUT}
out=${2:?usage: nightly-parallel.sh STREAMS OUT}
boot=${BOOT:-20} healthy=${HEALTHY:-10} step=${STEP:-6} jobs=${JOBS:-48}
mkdir -p "$out"
out=$(cd "$out" && pwd)
: >"$out/rows.tsv"

# night STREAM INDEX SLOWDOWN PHASE [FLAGS...]: one night of a stream; a row unless boot.
night() {
	local s=$1 i=$2 slow=$3 phase=$4 dir="$out/s$1/n$2"
	shift 4
	mkdir -p "$dir"
	echo "$i" >"$dir/launch-counter"
	sed -e "s/SLOWDOWN/$slow/" -e "s/SEED/$((1000 + s))/" -e "s#COUNTER#$dir/launch-counter#" \
		fixtures/specs/affordable/nightly.yaml >"$dir/spec.yaml"
	local rc=0
	bin/reckon gate --spec "$dir/spec.yaml" --out "$dir/run" --quiet --commit "$(printf 'c0ffee%06x%028x' "$s" "$i")" "$@" >"$dir/gate.log" 2>&1 || rc=$?
	[ "$phase" = boot ] && return 0
	local line
	line=$(python3 ci/measure/verdict-line.py "$dir/run/results.json" || printf '?\t?')
	printf '%s\t%d\t%d\t%d\t%s\n' "$phase" "$s" "$i" "$rc" "$line" >>"$out/rows.tsv"
}
export -f night
export out

# 1. Bootstrap nights, side by side; then appended in night order.
for s in $(seq 1 "$streams"); do
	for i in $(seq 0 $((boot - 1))); do echo "$s $i"; done
done | xargs -P "$jobs" -n 2 bash -c 'night "$0" "$1" 1 boot'
for s in $(seq 1 "$streams"); do
	for i in $(seq 0 $((boot - 1))); do
		bin/reckon history add --history "$out/s$s/history.db" "$out/s$s/n$i/run/results.json" >/dev/null
	done
done

# 2. The judged nights, one after another in each stream; the streams side by side.
stream() {
	local s=$1 i=$boot
	for _ in $(seq 1 "$healthy"); do night "$s" $((i++)) 1 healthy --strict --history "$out/s$s/history.db"; done
	for _ in $(seq 1 "$step"); do night "$s" $((i++)) 1.0526 step --strict --history "$out/s$s/history.db"; done
}
for s in $(seq 1 "$streams"); do stream "$s" & done
wait
awk -F'\t' '{n[$1]++; if ($4 == 0) g[$1]++} END {for (p in n) printf "%s: %d nights, %d exit 0 (green)\n", p, n[p], g[p]}' "$out/rows.tsv"

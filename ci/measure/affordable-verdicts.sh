#!/usr/bin/env bash
# affordable-verdicts.sh nightly|premerge STREAMS OUT
#
# Measures the shipped nightly and pre-merge designs end to end on the reference engine (issue
# 31's targets; docs/ci.md, "Verdicts a GPU CI can afford"), with the device clock's seeded noise
# (2% between launches, 2% within), so the verdicts do not depend on the machine's load. STREAMS
# independent streams run side by side, each with its own history and noise seed.
#   nightly:  BOOT (default 20) bootstrap nights without --strict (the documented bootstrap),
#             HEALTHY (10) nights with --strict, then STEP (10) nights at 5% less throughput.
#   premerge: BOOT (10) no-op runs seed the history (the templates' calibration runs, main
#             against main, appended), then NOOP (5) no-op PRs and SLOW (5) PRs with 5% less
#             throughput, each with --strict and --history-readonly (a PR's run appends nothing).
# Each gate run appends one row to OUT/STREAM.tsv:  phase  index  exit  outcome  message
# Needs bin/reckon and bin/refengine built (make build).
set -euo pipefail
mode=${1:?usage: affordable-verdicts.sh nightly|premerge STREAMS OUT}
streams=${2:?usage: affordable-verdicts.sh nightly|premerge STREAMS OUT}
out=${3:?usage: affordable-verdicts.sh nightly|premerge STREAMS OUT}
mkdir -p "$out"
out=$(cd "$out" && pwd)

# run_one STREAM PHASE INDEX SLOWDOWN STRICT [READONLY]: one gate run; its row in OUT/STREAM.tsv.
run_one() {
	local s=$1 phase=$2 i=$3 slow=$4 strict=$5 readonly=${6:-0} dir="$out/s$1"
	mkdir -p "$dir"
	sed -e "s/SLOWDOWN/$slow/" -e "s/SEED/$((1000 + s))/" -e "s#COUNTER#$dir/launch-counter#" \
		"fixtures/specs/affordable/$mode.yaml" >"$dir/spec.yaml"
	local flags=(--spec "$dir/spec.yaml" --history "$dir/history.db" --out "$dir/run" --quiet --commit "$(printf 'c0ffee%034x' "$i")")
	[ "$strict" = 1 ] && flags+=(--strict)
	[ "$readonly" = 1 ] && flags+=(--history-readonly)
	local rc=0
	bin/reckon gate "${flags[@]}" >"$dir/last.log" 2>&1 || rc=$?
	local line
	line=$(python3 ci/measure/verdict-line.py "$dir/run/results.json" || printf '?\t?')
	printf '%s\t%d\t%d\t%s\n' "$phase" "$i" "$rc" "$line" >>"$out/s$s.tsv"
}

stream() {
	local s=$1 i=0
	if [ "$mode" = nightly ]; then
		for _ in $(seq 1 "${BOOT:-20}"); do run_one "$s" boot $((i++)) 1 0; done
		for _ in $(seq 1 "${HEALTHY:-10}"); do run_one "$s" healthy $((i++)) 1 1; done
		for _ in $(seq 1 "${STEP:-10}"); do run_one "$s" step $((i++)) 1.0526 1; done
	else
		for _ in $(seq 1 "${BOOT:-10}"); do run_one "$s" boot $((i++)) 1 0; done
		for _ in $(seq 1 "${NOOP:-5}"); do run_one "$s" noop $((i++)) 1 1 1; done
		for _ in $(seq 1 "${SLOW:-5}"); do run_one "$s" slow $((i++)) 1.0526 1 1; done
	fi
}

for s in $(seq 1 "$streams"); do stream "$s" & done
wait
cat "$out"/s*.tsv | awk -F'\t' '{n[$1]++; if ($3 == 0) g[$1]++} END {for (p in n) printf "%s: %d runs, %d exit 0 (green)\n", p, n[p], g[p]}'

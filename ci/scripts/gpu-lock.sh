#!/usr/bin/env bash
# gpu-lock.sh: run a command while holding this machine's GPU lock, so that two CI jobs (two
# runner processes, two pipelines, a person at the shell) never share the GPUs.
#
#   ci/scripts/gpu-lock.sh [--timeout SECONDS] [--lock FILE] -- COMMAND [ARGS...]
#
# The lock is an flock(1) on FILE (default $RECKON_GPU_LOCK, else /run/lock/reckon-gpu.lock, else
# /tmp/reckon-gpu.lock). Machines whose GPUs are split between jobs use one lock file per GPU set
# (e.g. RECKON_GPU_LOCK=/run/lock/reckon-gpu-0-3.lock with CUDA_VISIBLE_DEVICES=0,1,2,3).
# It waits up to --timeout seconds (default $RECKON_GPU_LOCK_TIMEOUT, else 7200; 0 = do not wait).
#
# The command replaces this shell (exec) and inherits the locked descriptor, so signals reach it
# directly and the lock is released only when it, and every child still holding the descriptor
# (a stray engine process), has exited: a leaked engine keeps the GPUs marked busy.
#
# Exit status: the command's; 3 when the lock could not be taken in time (infrastructure, as in
# reckon); 2 for bad usage.
set -euo pipefail

usage() {
	echo "usage: gpu-lock.sh [--timeout SECONDS] [--lock FILE] -- COMMAND [ARGS...]" >&2
	exit 2
}

lock="${RECKON_GPU_LOCK:-}"
timeout="${RECKON_GPU_LOCK_TIMEOUT:-7200}"
while [ $# -gt 0 ]; do
	case "$1" in
	--timeout)
		[ $# -ge 2 ] || usage
		timeout="$2"
		shift 2
		;;
	--lock)
		[ $# -ge 2 ] || usage
		lock="$2"
		shift 2
		;;
	--)
		shift
		break
		;;
	*) usage ;;
	esac
done
[ $# -gt 0 ] || usage
case "$timeout" in
'' | *[!0-9]*)
	echo "gpu-lock: --timeout $timeout: expected a whole number of seconds" >&2
	exit 2
	;;
esac
if [ -z "$lock" ]; then
	if [ -d /run/lock ] && [ -w /run/lock ]; then
		lock=/run/lock/reckon-gpu.lock
	else
		lock=/tmp/reckon-gpu.lock
	fi
fi
if ! command -v flock >/dev/null 2>&1; then
	echo "gpu-lock: flock not found (install util-linux)" >&2
	exit 3
fi

# Create the lock file readable and writable by every runner user, then open it read-only: a
# sticky world-writable directory (fs.protected_regular) refuses O_CREAT on another user's file,
# and flock works on a read-only descriptor.
if [ ! -e "$lock" ]; then
	(umask 0111 && : >>"$lock") 2>/dev/null || true
fi
if ! exec 9<"$lock"; then
	echo "gpu-lock: cannot open lock file $lock" >&2
	exit 3
fi

holder="${GITHUB_RUN_ID:+github run $GITHUB_RUN_ID}${BUILDKITE_JOB_ID:+buildkite job $BUILDKITE_JOB_ID}${CI_JOB_ID:+gitlab job $CI_JOB_ID}"
echo "gpu-lock: waiting for $lock (up to ${timeout}s)" >&2
start=$(date +%s)
if ! flock --wait "$timeout" 9; then
	echo "gpu-lock: GPUs busy: $lock is held by another job (waited ${timeout}s)" >&2
	exit 3
fi
echo "gpu-lock: holding $lock after $(($(date +%s) - start))s${holder:+ for $holder}" >&2
exec "$@"

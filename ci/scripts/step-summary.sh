#!/usr/bin/env bash
# step-summary.sh: publish reckon's Markdown summary as the GitHub Actions job summary and print it
# in the log. A missing summary (the gate never started) is said, not hidden.
#
#   ci/scripts/step-summary.sh [SUMMARY_FILE]   (default out/summary.md)
set -euo pipefail
file="${1:-out/summary.md}"
target="${GITHUB_STEP_SUMMARY:-/dev/null}"
if [ ! -s "$file" ]; then
	msg="reckon wrote no summary ($file missing): the gate did not get to write its reports; see the job log."
	echo "$msg" >&2
	echo "## reckon: no report" >>"$target"
	echo "$msg" >>"$target"
	exit 0
fi
# GitHub accepts up to 1 MiB per step summary; reckon keeps summary.md far below that.
cat "$file" >>"$target"
cat "$file"

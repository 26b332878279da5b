#!/usr/bin/env bash
# build-engine.sh for vLLM (copy to .reckon/build-engine.sh): build one side of the A/B as vLLM
# builds itself, into a virtual environment the spec's config launches
# (PREFIX/bin/vllm serve ... or PREFIX/bin/python -m vllm.entrypoints.openai.api_server).
#
#   .reckon/build-engine.sh SRC PREFIX [BASE_REV]
#
# vLLM's "Build wheel from source" docs (docs/getting_started/installation/gpu.cuda.inc.md):
# - Python-only change: VLLM_USE_PRECOMPILED=1 pip install -e . ("Set up using Python-only build
#   (without compilation)": it downloads the pre-built wheel of the merge base on main and uses
#   its compiled libraries). Allowed only when no compiled source differs from BASE_REV: the
#   docs say "If you change C++ or kernel code, you cannot use Python-only build".
# - Compiled source changed (csrc/, CMakeLists.txt, cmake/, setup.py, requirements/build*):
#   a full build, pip install -e . ("Full build (with compilation)"), with ccache
#   (CCACHE_NOHASHDIR=true and --no-build-isolation, as the docs' ccache tip says) and MAX_JOBS.
# The base side (no BASE_REV) is main's commit: its precompiled wheel exists once main's
# wheel build has run (VLLM_PRECOMPILED_WHEEL_COMMIT; about an hour after the merge, per the docs).
# Budget: about 5 min precompiled, 20-40 min full build warm ccache, 1-2 h cold.
set -euo pipefail
src="$1" prefix="$2" base="${3:-}"
python3 -m venv "$prefix"
"$prefix/bin/pip" install --quiet --upgrade pip
compiled='csrc/ CMakeLists.txt cmake/ setup.py requirements/build'
# shellcheck disable=SC2086 # $compiled is a list of pathspecs
if [ -n "$base" ] && ! git -C "$src" diff --quiet "$base" HEAD -- $compiled; then
	echo "build-engine: compiled sources changed: full build with ccache"
	"$prefix/bin/pip" install --quiet -r "$src/requirements/build.txt"
	(cd "$src" && CCACHE_NOHASHDIR=true MAX_JOBS="${MAX_JOBS:-$(nproc)}" "$prefix/bin/pip" install --no-build-isolation -e .)
else
	echo "build-engine: no compiled source changed: precompiled wheel of the merge base"
	(cd "$src" && VLLM_USE_PRECOMPILED=1 "$prefix/bin/pip" install -e .)
fi
"$prefix/bin/python" -c 'import vllm; print("vllm", vllm.__version__)'

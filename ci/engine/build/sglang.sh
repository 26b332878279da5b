#!/usr/bin/env bash
# build-engine.sh for SGLang (copy to .reckon/build-engine.sh): build one side of the A/B as
# SGLang builds itself, into a virtual environment the spec's config launches
# (PREFIX/bin/python -m sglang.launch_server).
#
#   .reckon/build-engine.sh SRC PREFIX [BASE_REV]
#
# SRC is a checkout of the engine (base/ or pr/), PREFIX the venv to create, BASE_REV the commit
# the PR is compared with (given for the PR's side only).
# - The Python package from source, editable, with its extras:
#   pip install -e "python[all]" (SGLang's install docs, "Method 2: From source").
# - sgl-kernel (the CUDA kernels: custom allreduce lives in sgl-kernel/csrc/allreduce/) is taken
#   as the released wheel that python/pyproject.toml pins, UNLESS this side's tree differs from
#   BASE_REV under sgl-kernel/: then it is built from this tree with sgl-kernel's own build
#   (`make build` in sgl-kernel/, sgl-kernel/README.md; SGLang's own CI builds the wheel in
#   .github/workflows/pr-test-sgl-kernel.yml only when paths sgl-kernel/** change). Without
#   this a kernel PR is compared with the released kernels, i.e. with itself.
# Caches: pip's (PIP_CACHE_DIR) and the compiler's (CCACHE_DIR, picked up by CMake when ccache
# is on PATH) live on the runner, outside the workspace; MAX_JOBS bounds the compile.
# Budget: about 5 min for a Python-only side, 30-60 min for a kernel build on 32 cores.
set -euo pipefail
src="$1" prefix="$2" base="${3:-}"
python3 -m venv "$prefix"
"$prefix/bin/pip" install --quiet --upgrade pip
"$prefix/bin/pip" install --quiet -e "$src/python[all]"
if [ -n "$base" ] && ! git -C "$src" diff --quiet "$base" HEAD -- sgl-kernel/; then
	echo "build-engine: the PR changes sgl-kernel/: building it from the PR's tree"
	export MAX_JOBS="${MAX_JOBS:-$(nproc)}"
	export CMAKE_BUILD_PARALLEL_LEVEL="$MAX_JOBS"
	(
		# shellcheck disable=SC1091 # the venv's activate script exists once created above
		. "$prefix/bin/activate"
		make -C "$src/sgl-kernel" build
	)
else
	echo "build-engine: sgl-kernel unchanged: using the wheel python/pyproject.toml pins"
fi
"$prefix/bin/python" -c 'import sglang, sgl_kernel; print("sglang", sglang.__version__, "sgl_kernel", sgl_kernel.__version__)'

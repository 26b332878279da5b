#!/usr/bin/env bash
# reckon.sh: run the pinned reckon, verified immediately before this use.
#
#   .reckon/reckon.sh BIN_DIR ARGS...
#
# BIN_DIR is where install-reckon.sh installed reckon and kept the release archive it verified.
# Before every run this checks, again, that the archive's sha256 is the pinned RECKON_SHA256 of
# release RECKON_VERSION (both from the CI's own variables, which no step of the job can
# change) and that BIN_DIR/reckon is byte for byte the reckon inside that archive; then it execs
# it with ARGS. A binary swapped since the install (by a process a pull request's build left
# behind, or anything else) is refused: exit 3 (infrastructure), nothing run.
set -euo pipefail
if [ "$#" -lt 1 ]; then
	echo "usage: reckon.sh BIN_DIR ARGS..." >&2
	exit 2
fi
dir="$1"
shift
version="${RECKON_VERSION:-}" sums="${RECKON_SHA256:-}"
case "$(uname -m)" in
x86_64 | amd64) arch=amd64 ;;
aarch64 | arm64) arch=arm64 ;;
*)
	echo "reckon.sh: no reckon release for $(uname -m)" >&2
	exit 3
	;;
esac
want="$sums"
case "$sums" in
*=*)
	want=""
	IFS=, read -r -a pairs <<<"$sums"
	for p in "${pairs[@]}"; do
		if [ "${p%%=*}" = "$arch" ]; then want="${p#*=}"; fi
	done
	;;
esac
if ! [[ "$want" =~ ^[0-9a-f]{64}$ ]]; then
	echo "reckon.sh: RECKON_SHA256 pins no sha256 for linux/$arch (got \"$sums\")" >&2
	exit 3
fi
archive="$dir/reckon_${version#v}_linux_${arch}.tar.gz"
if [ ! -f "$archive" ] || [ -L "$archive" ] || [ ! -f "$dir/reckon" ] || [ -L "$dir/reckon" ]; then
	echo "reckon.sh: $dir holds no reckon installed by install-reckon.sh (archive $archive)" >&2
	exit 3
fi
got="$(sha256sum <"$archive" | cut -d' ' -f1)"
if [ "$got" != "$want" ]; then
	echo "reckon.sh: CHECKSUM MISMATCH: $archive is $got, pinned $want; not running it" >&2
	exit 3
fi
inside="$(tar -xzOf "$archive" reckon | sha256sum | cut -d' ' -f1)"
bin="$(sha256sum <"$dir/reckon" | cut -d' ' -f1)"
if [ "$bin" != "$inside" ]; then
	echo "reckon.sh: $dir/reckon CHANGED since it was installed (sha256 $bin, the release's reckon is $inside); not running it" >&2
	exit 3
fi
exec "$dir/reckon" "$@"

#!/usr/bin/env bash
# install-reckon.sh: install a pinned reckon release and verify it before it runs anything.
#
#   .reckon/install-reckon.sh VERSION SHA256 DEST_DIR
#
# Downloads reckon_<VERSION without v>_linux_<arch>.tar.gz of release VERSION (vX.Y.Z) from
# $RECKON_RELEASE_URL (default https://github.com/reckon-ci/reckon/releases/download), checks
# its sha256 against SHA256 (the value the workflow pins, copied from the release's
# checksums.txt), unpacks the reckon binary into DEST_DIR and prints `reckon version`. A
# checksum that does not match, or a version that is not a tag, exits 3 (infrastructure) and
# installs nothing. The verified archive is kept beside the binary: reckon.sh BIN_DIR checks
# both against the pin again immediately before each use. SHA256 may be "arch=sum,arch=sum" (amd64=...,arm64=...) for mixed fleets.
set -euo pipefail
if [ "$#" -ne 3 ]; then
	echo "usage: install-reckon.sh VERSION SHA256 DEST_DIR" >&2
	exit 2
fi
version="$1" sums="$2" dest="$3"
case "$version" in
v[0-9]*.[0-9]*.[0-9]*) ;;
*)
	echo "install-reckon: $version is not a release tag vX.Y.Z" >&2
	exit 3
	;;
esac
case "$(uname -m)" in
x86_64 | amd64) arch=amd64 ;;
aarch64 | arm64) arch=arm64 ;;
*)
	echo "install-reckon: no reckon release for $(uname -m)" >&2
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
	echo "install-reckon: no sha256 pinned for linux/$arch (got \"$sums\")" >&2
	exit 3
fi
base="${RECKON_RELEASE_URL:-https://github.com/reckon-ci/reckon/releases/download}"
archive="reckon_${version#v}_linux_${arch}.tar.gz"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
if ! curl -fsSL --retry 3 -o "$tmp/$archive" "$base/$version/$archive"; then
	echo "install-reckon: could not download $base/$version/$archive" >&2
	exit 3
fi
got="$(sha256sum "$tmp/$archive" | cut -d' ' -f1)"
if [ "$got" != "$want" ]; then
	echo "install-reckon: CHECKSUM MISMATCH for $archive: got $got, pinned $want; not installing" >&2
	exit 3
fi
tar -xzf "$tmp/$archive" -C "$tmp" reckon
mkdir -p "$dest"
install -m 0755 "$tmp/reckon" "$dest/reckon"
install -m 0644 "$tmp/$archive" "$dest/$archive"
echo "install-reckon: $archive sha256 $got verified"
"$dest/reckon" version

#!/usr/bin/env bash
# Build the real SPIRE server and agent the SPIFFE source's tests run, from the
# Go module proxy into OUTDIR.
#
#   hack/build-spire.sh OUTDIR
#
# The sources are the wrapper module in hack/spire: github.com/spiffe/spire is
# served as a program, so the module declares spire-server and spire-agent as
# tool dependencies (go get -tool ...@v1.13.3) and this script builds them. As
# with hack/build-k8s.sh, a stamp file in OUTDIR records a hash of every input
# (the wrapper module, this script, the Go toolchain): a second run with nothing
# changed returns at once; any change rebuilds. The server's SQLite datastore
# needs cgo (SPIRE's sqlstore refuses sqlite3 without it), so this build, unlike
# the Kubernetes one, needs a C compiler.
set -euo pipefail

NAME=build-spire
HACK_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
. "$HACK_DIR/lib.sh"

[ $# -eq 1 ] && [ -n "$1" ] || die "usage: $0 OUTDIR"

MOD_DIR=$HACK_DIR/spire
MODULE=github.com/spiffe/spire
BINARIES=(spire-server spire-agent)
[ -f "$MOD_DIR/go.mod" ] || die "$MOD_DIR/go.mod is missing"

prepare_outdir "$1"
export CGO_ENABLED=1
cd "$MOD_DIR"

HASH=$(inputs_hash "$HACK_DIR/build-spire.sh" "$HACK_DIR/lib.sh" .) || die "cannot hash the inputs in $MOD_DIR"
up_to_date "$HASH" "${BINARIES[@]/#/$OUT_DIR/}" && exit 0

CC=$("$GO" env CC)
command -v "${CC%% *}" >/dev/null 2>&1 ||
	die "C compiler '$CC' not found: spire-server's SQLite datastore needs cgo (apt-get install gcc)"

VERSION=$("$GO" list -m -f '{{.Version}}' "$MODULE") ||
	die "cannot resolve $MODULE in $MOD_DIR/go.mod (is the Go module proxy reachable?)"

echo "build-spire: building ${BINARIES[*]} ($MODULE $VERSION) into $OUT_DIR (several minutes on a cold Go build cache)..."

TMP=$(mktemp -d "$OUT_DIR/.build-spire.XXXXXX")
trap 'rm -rf "$TMP"' EXIT

start=$(date +%s)
pkgs=()
for b in "${BINARIES[@]}"; do
	pkgs+=("$MODULE/cmd/$b")
done
# SPIRE's release builds stamp the version from the git tag; do the same so the
# binaries report the pinned release rather than "1.13.3-dev-unk".
LDFLAGS="-s -w -X $MODULE/pkg/common/version.gittag=${VERSION#v}"
if ! "$GO" build -trimpath -ldflags "$LDFLAGS" -o "$TMP/" "${pkgs[@]}"; then
	die "go build of ${BINARIES[*]} in $MOD_DIR failed (see the errors above)"
fi

for b in "${BINARIES[@]}"; do
	[ -x "$TMP/$b" ] || die "go build did not produce $b"
done
# Sanity check: the binaries run and report the pinned release.
want=${VERSION#v}
for b in "${BINARIES[@]}"; do
	got=$("$TMP/$b" --version 2>&1) || die "built $b does not run: $got"
	[ "$got" = "$want" ] || die "built $b reports '$got', want '$want'"
done

rm -f "$STAMP"
for b in "${BINARIES[@]}"; do
	mv -f "$TMP/$b" "$OUT_DIR/$b"
done
write_stamp "$HASH" "$MODULE $VERSION"
echo "build-spire: built ${BINARIES[*]} ($MODULE $VERSION) in $(($(date +%s) - start))s"

#!/usr/bin/env bash
# Build the real Kubernetes binaries the tests run (kube-apiserver,
# kube-controller-manager, etcd) from the Go module proxy into OUTDIR.
#
#   hack/build-k8s.sh OUTDIR
#
# The sources are the wrapper module in hack/k8s (k8s.io/kubernetes and etcd at
# the versions pinned in hack/k8s/go.mod). A stamp file in OUTDIR records a
# hash of every input (the wrapper module, this script, the Go toolchain), so a
# second run with nothing changed returns at once; any change rebuilds. The
# first build takes several minutes on 2 cores; later ones reuse Go's build
# cache. Point KUBEBUILDER_ASSETS at OUTDIR to use the binaries with envtest.
set -euo pipefail

NAME=build-k8s
HACK_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
. "$HACK_DIR/lib.sh"

[ $# -eq 1 ] && [ -n "$1" ] || die "usage: $0 OUTDIR"

MOD_DIR=$HACK_DIR/k8s
BINARIES=(kube-apiserver kube-controller-manager etcd)
[ -f "$MOD_DIR/go.mod" ] || die "$MOD_DIR/go.mod is missing"

prepare_outdir "$1"
export CGO_ENABLED=0
cd "$MOD_DIR"

HASH=$(inputs_hash "$HACK_DIR/build-k8s.sh" "$HACK_DIR/lib.sh" .) || die "cannot hash the inputs in $MOD_DIR"
up_to_date "$HASH" "${BINARIES[@]/#/$OUT_DIR/}" && exit 0

K8S_VERSION=$("$GO" list -m -f '{{.Version}}' k8s.io/kubernetes) ||
	die "cannot resolve k8s.io/kubernetes in $MOD_DIR/go.mod (is the Go module proxy reachable?)"
ETCD_VERSION=$("$GO" list -m -f '{{.Version}}' go.etcd.io/etcd/server/v3) ||
	die "cannot resolve go.etcd.io/etcd/server/v3 in $MOD_DIR/go.mod"
# The k8s release's publication time as build date keeps the build reproducible.
BUILD_DATE=$("$GO" list -m -f '{{if .Time}}{{.Time.UTC.Format "2006-01-02T15:04:05Z"}}{{end}}' k8s.io/kubernetes)
BUILD_DATE=${BUILD_DATE:-1970-01-01T00:00:00Z}

[[ $K8S_VERSION =~ ^v([0-9]+)\.([0-9]+)\. ]] || die "unexpected k8s.io/kubernetes version '$K8S_VERSION'"
MAJOR=${BASH_REMATCH[1]}
MINOR=${BASH_REMATCH[2]}

VERSION_PKG=k8s.io/component-base/version
LDFLAGS="-s -w"
LDFLAGS+=" -X $VERSION_PKG.gitVersion=$K8S_VERSION"
LDFLAGS+=" -X $VERSION_PKG.gitMajor=$MAJOR"
LDFLAGS+=" -X $VERSION_PKG.gitMinor=$MINOR"
LDFLAGS+=" -X $VERSION_PKG.gitCommit="
LDFLAGS+=" -X $VERSION_PKG.gitTreeState=clean"
LDFLAGS+=" -X $VERSION_PKG.buildDate=$BUILD_DATE"
LDFLAGS+=" -X go.etcd.io/etcd/api/v3/version.GitSHA=$ETCD_VERSION"

VERSIONS="kubernetes $K8S_VERSION, etcd $ETCD_VERSION"
echo "build-k8s: building ${BINARIES[*]} ($VERSIONS) into $OUT_DIR (several minutes on a cold Go build cache)..."

TMP=$(mktemp -d "$OUT_DIR/.build-k8s.XXXXXX")
trap 'rm -rf "$TMP"' EXIT

start=$(date +%s)
if ! "$GO" build -trimpath -ldflags "$LDFLAGS" -o "$TMP/" ./cmd/...; then
	die "go build of ${BINARIES[*]} in $MOD_DIR failed (see the errors above)"
fi

for b in "${BINARIES[@]}"; do
	[ -x "$TMP/$b" ] || die "go build did not produce $b"
done
# Sanity check: the version ldflags took effect.
got=$("$TMP/kube-apiserver" --version 2>&1) || die "built kube-apiserver does not run: $got"
[ "$got" = "Kubernetes $K8S_VERSION" ] || die "built kube-apiserver reports '$got', want 'Kubernetes $K8S_VERSION'"

rm -f "$STAMP"
for b in "${BINARIES[@]}"; do
	mv -f "$TMP/$b" "$OUT_DIR/$b"
done
write_stamp "$HASH" "$VERSIONS"
echo "build-k8s: built ${BINARIES[*]} ($VERSIONS) in $(($(date +%s) - start))s"

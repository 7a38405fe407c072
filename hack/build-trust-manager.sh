#!/usr/bin/env bash
# Build cert-manager's trust-manager, which the CA-rotation test runs against
# the test API server, from the Go module proxy into OUTDIR, with the CRDs the
# tests install into OUTDIR/crds.
#
#   hack/build-trust-manager.sh OUTDIR
#
# The source is the wrapper module in hack/trust-manager (trust-manager at the
# version pinned in its go.mod). Its Bundle CRD is copied from the same module,
# so the CRD and the controller come from one release. cert-manager's
# controller is not buildable from the module proxy; its CRDs (Certificate,
# Issuer) are copied from the module hack/cert-manager pins, for the tests that
# validate the webhook's cert-manager objects. As with hack/build-k8s.sh, a
# stamp file in OUTDIR records a hash of every input (both wrapper modules,
# this script, the Go toolchain): a second run with nothing changed returns at
# once.
set -euo pipefail

NAME=build-trust-manager
HACK_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
. "$HACK_DIR/lib.sh"

[ $# -eq 1 ] && [ -n "$1" ] || die "usage: $0 OUTDIR"

MOD_DIR=$HACK_DIR/trust-manager
CM_DIR=$HACK_DIR/cert-manager
MODULE=github.com/cert-manager/trust-manager
CM_MODULE=github.com/cert-manager/cert-manager
CRD=trust.cert-manager.io_bundles.yaml
CM_CRDS=(cert-manager.io_certificates.yaml cert-manager.io_issuers.yaml)
[ -f "$MOD_DIR/go.mod" ] || die "$MOD_DIR/go.mod is missing"
[ -f "$CM_DIR/go.mod" ] || die "$CM_DIR/go.mod is missing"

prepare_outdir "$1"
export CGO_ENABLED=0
cd "$MOD_DIR"

HASH=$(inputs_hash "$HACK_DIR/build-trust-manager.sh" "$HACK_DIR/lib.sh" . "$CM_DIR") || die "cannot hash the inputs in $MOD_DIR"
up_to_date "$HASH" "$OUT_DIR/trust-manager" "$OUT_DIR/crds/$CRD" "${CM_CRDS[@]/#/$OUT_DIR/crds/}" && exit 0

VERSION=$("$GO" list -m -f '{{.Version}}' "$MODULE") ||
	die "cannot resolve $MODULE in $MOD_DIR/go.mod (is the Go module proxy reachable?)"
"$GO" mod download "$MODULE" || die "cannot download $MODULE $VERSION"
SRC=$("$GO" list -m -f '{{.Dir}}' "$MODULE")
[ -f "$SRC/deploy/crds/$CRD" ] || die "$MODULE $VERSION carries no deploy/crds/$CRD"
CM_VERSION=$(cd "$CM_DIR" && "$GO" list -m -f '{{.Version}}' "$CM_MODULE") ||
	die "cannot resolve $CM_MODULE in $CM_DIR/go.mod"
(cd "$CM_DIR" && "$GO" mod download "$CM_MODULE") || die "cannot download $CM_MODULE $CM_VERSION"
CM_SRC=$(cd "$CM_DIR" && "$GO" list -m -f '{{.Dir}}' "$CM_MODULE")
for f in "${CM_CRDS[@]}"; do
	[ -f "$CM_SRC/deploy/crds/$f" ] || die "$CM_MODULE $CM_VERSION carries no deploy/crds/$f"
done

echo "build-trust-manager: building trust-manager $VERSION into $OUT_DIR (a few minutes on a cold Go build cache)..."
TMP=$(mktemp -d "$OUT_DIR/.build-trust-manager.XXXXXX")
trap 'rm -rf "$TMP"' EXIT

start=$(date +%s)
"$GO" build -trimpath -ldflags "-s -w" -o "$TMP/trust-manager" ./cmd/trust-manager ||
	die "go build of trust-manager in $MOD_DIR failed (see the errors above)"
"$TMP/trust-manager" --help >/dev/null 2>&1 || die "built trust-manager does not run"

rm -f "$STAMP"
mkdir -p "$OUT_DIR/crds"
install -m 0644 "$SRC/deploy/crds/$CRD" "$OUT_DIR/crds/$CRD"
for f in "${CM_CRDS[@]}"; do
	install -m 0644 "$CM_SRC/deploy/crds/$f" "$OUT_DIR/crds/$f"
done
mv -f "$TMP/trust-manager" "$OUT_DIR/trust-manager"
write_stamp "$HASH" "trust-manager $VERSION, cert-manager CRDs $CM_VERSION"
echo "build-trust-manager: built trust-manager $VERSION in $(($(date +%s) - start))s"

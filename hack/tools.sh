#!/usr/bin/env bash
# Install the system tools `make test` needs besides Go, from Debian's packages:
#   openssl   the runbook's and tests' cross-checks (openssl s_client, x509 -serial)
#   promtool  the alert rules' unit tests (Debian's prometheus package)
#   prometheus  the census tests' real Prometheus server (the same package)
#   python3   the census fleet test's consumer that is not Go and reports nothing
#   gcc       spire-server links SQLite with cgo (hack/build-spire.sh)
#   openjdk-17-jdk-headless  javac, java and keytool: the mirror's tests run a Java
#             program that reloads a PKCS#12 keystore and truststore (about 116 MB
#             to download, 266 MB installed)
#   curl      a client of hotcert proxy in its tests (python3 is also its backend)
# Nothing is installed when every tool is there. Without root or apt-get, it says
# what to install and fails.
#
# `hack/tools.sh kwok DIR` (make bench only) installs kwok v0.8.0 with go install
# into DIR, with the stages of its "fast" node and pod lifecycles (the YAML its
# module ships) in DIR/stages: fake nodes on which pods become Running, with a
# podIP and start times, on the tests' own API server. About a minute cold
# (download and build), nothing once installed.
set -euo pipefail

if [ "${1:-}" = kwok ]; then
	dir=${2:?usage: hack/tools.sh kwok DIR}
	version=v0.8.0
	[ -x "$dir/kwok" ] && [ -f "$dir/stages/pod-ready.yaml" ] && [ "$(cat "$dir/.version" 2>/dev/null)" = "$version" ] && exit 0
	echo "tools: installing kwok $version into $dir..."
	mkdir -p "$dir/stages"
	GOBIN="$(cd "$dir" && pwd)" GOFLAGS=-mod=mod go install "sigs.k8s.io/kwok/cmd/kwok@$version"
	mod=$(go mod download -json "sigs.k8s.io/kwok@$version" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
	cp "$mod"/kustomize/stage/node/fast/node-initialize.yaml "$mod"/kustomize/stage/pod/fast/pod-*.yaml "$dir/stages/"
	chmod u+w "$dir"/stages/*.yaml
	echo "$version" >"$dir/.version"
	exit 0
fi

need=()
command -v openssl >/dev/null || need+=(openssl)
command -v promtool >/dev/null && command -v prometheus >/dev/null || need+=(prometheus)
command -v gcc >/dev/null || need+=(gcc)
command -v javac >/dev/null && command -v keytool >/dev/null || need+=(openjdk-17-jdk-headless)
command -v python3 >/dev/null || need+=(python3)
command -v curl >/dev/null || need+=(curl)
[ ${#need[@]} -eq 0 ] && exit 0

if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null; then
	echo "tools: ERROR: install ${need[*]} (Debian/Ubuntu package names), then run make test again" >&2
	exit 1
fi
echo "tools: installing ${need[*]} with apt-get..."
apt-get update -qq
# Debian's slim images drop /usr/share/man; the JDK's postinst fails without it.
mkdir -p /usr/share/man/man1
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}"

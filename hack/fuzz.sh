#!/usr/bin/env bash
# Runs every Go fuzz target of the given module directories (default: every module
# of go.work) for FUZZTIME each (default 30s). Exits non-zero if any target fails;
# the failing input is written to the package's testdata/fuzz/<target>/ by go test,
# ready to be checked in.
#
# Targets are found in the source, per package: `go list` names each package's test
# files (build constraints applied, nested modules excluded) and every
# `func FuzzXxx(f *testing.F)` in them is a target, so a new target anywhere is
# picked up without editing this script. The listing runs no test binary: `go test
# -list` would run each package's TestMain, and those of the Kubernetes packages
# start a control plane, which a machine without the binaries of `make k8s-bins`
# does not have (and fuzzing does not need: no fuzz target uses it).
set -euo pipefail
cd "$(dirname "$0")/.."
FUZZTIME=${FUZZTIME:-30s}
# Go minimizes every input that reaches new coverage before fuzzing on, with a
# minimizer quadratic in the input's length (golang/go#48820). A target on raw
# certificate DER finds new coverage every few inputs, and minimizing a kilobyte
# of DER by time (60 s by default, per input) took the whole run: a count bounds
# it whatever the input's size and the machine's load.
FUZZMINIMIZETIME=${FUZZMINIMIZETIME:-1000x}
GO=${GO:-go}
mods=("$@")
if [ ${#mods[@]} -eq 0 ]; then
	mapfile -t mods < <($GO list -m -f '{{.Dir}}')
fi

# targets MODDIR prints "<package> <target>" for every fuzz target of the module.
# A module whose packages cannot be listed fails the run (pipefail).
targets() {
	(cd "$1" && $GO list -f '{{.ImportPath}} {{.Dir}}{{range .TestGoFiles}} {{.}}{{end}}{{range .XTestGoFiles}} {{.}}{{end}}' ./...) |
		while read -r pkg dir files; do
			[ -n "$files" ] || continue
			for f in $files; do
				sed -nE 's/^func (Fuzz([^a-z(][A-Za-z0-9_]*)?)\([A-Za-z_][A-Za-z0-9_]* \*testing\.F\).*/\1/p' "$dir/$f"
			done | sort -u | sed "s|^|$pkg |"
		done
}

failed=()
for mod in "${mods[@]}"; do
	list=$(targets "$mod")
	while read -r pkg name; do
		[ -n "$pkg" ] || continue
		echo "== $pkg $name (${FUZZTIME})"
		if ! (cd "$mod" && $GO test -run '^$' -fuzz "^${name}\$" -fuzztime "$FUZZTIME" -fuzzminimizetime "$FUZZMINIMIZETIME" "$pkg"); then
			failed+=("$pkg $name")
		fi
	done <<<"$list"
done
if [ ${#failed[@]} -gt 0 ]; then
	printf 'fuzz target failed: %s\n' "${failed[@]}" >&2
	exit 1
fi

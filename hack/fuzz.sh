#!/usr/bin/env bash
# Runs every Go fuzz target of the given module directories (default: every module
# of go.work) for FUZZTIME each (default 30s). Targets are found per package with
# `go test -list '^Fuzz'`, so a new target anywhere is picked up without editing
# this script. Exits non-zero if any target fails; the failing input is written to
# the package's testdata/fuzz/<target>/ by go test, ready to be checked in.
set -euo pipefail
cd "$(dirname "$0")/.."
FUZZTIME=${FUZZTIME:-30s}
# Minimizing each new interesting input may take 60 s by default, more than a whole
# run: keep it short so the time goes to fuzzing.
FUZZMINIMIZETIME=${FUZZMINIMIZETIME:-5s}
GO=${GO:-go}
mods=("$@")
if [ ${#mods[@]} -eq 0 ]; then
	mapfile -t mods < <($GO list -m -f '{{.Dir}}')
fi
failed=()
for mod in "${mods[@]}"; do
	# `go test -list` prints a package's matching names, then "ok <package> ...". A
	# package that does not build fails the listing, and so the run (pipefail).
	targets=$(cd "$mod" && $GO test -list '^Fuzz' ./... | awk '
		/^Fuzz/ { names[++n] = $1; next }
		/^ok / { for (i = 1; i <= n; i++) print $2, names[i]; n = 0 }')
	while read -r pkg name; do
		[ -n "$pkg" ] || continue
		echo "== $pkg $name (${FUZZTIME})"
		if ! (cd "$mod" && $GO test -run '^$' -fuzz "^${name}\$" -fuzztime "$FUZZTIME" -fuzzminimizetime "$FUZZMINIMIZETIME" "$pkg"); then
			failed+=("$pkg $name")
		fi
	done <<<"$targets"
done
if [ ${#failed[@]} -gt 0 ]; then
	printf 'fuzz target failed: %s\n' "${failed[@]}" >&2
	exit 1
fi

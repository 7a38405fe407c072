#!/usr/bin/env bash
# Tidy every module of the workspace (go.work).
#
#   hack/tidy.sh
#
# `go mod tidy` does not read go.work, so a module that imports a sibling would
# look the sibling up on the module proxy. For the length of the tidy, each module
# gets a replace directive for every workspace module; they are removed again
# afterwards, so no go.mod ever carries one (a release of one module needs none:
# it requires its siblings' released versions).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
root=$(pwd)
mapfile -t mods < <(go work edit -json | sed -n 's/.*"DiskPath": "\(.*\)".*/\1/p')
declare -A path
for m in "${mods[@]}"; do
	path[$m]=$(cd "$m" && GOWORK=off go list -m -f '{{.Path}}' 2>/dev/null || sed -n 's/^module //p' go.mod)
done
for m in "${mods[@]}"; do
	(
		cd "$m"
		args=()
		for o in "${mods[@]}"; do
			[ "$o" = "$m" ] && continue
			rel=$(realpath --relative-to=. "$root/$o"); case $rel in .*) ;; *) rel=./$rel ;; esac
			args+=("-replace=${path[$o]}=$rel")
		done
		go mod edit "${args[@]}"
		trap 'for o in "${mods[@]}"; do [ "$o" = "$m" ] || go mod edit -dropreplace="${path[$o]}"; done' EXIT
		GOWORK=off GOFLAGS=-mod=mod go mod tidy
	)
	echo "tidy: $m"
done

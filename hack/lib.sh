# Shared by hack/build-*.sh, which build the real binaries the tests run (from
# the Go module proxy, in a wrapper module of their own) into an output folder.
# A script sets NAME, then sources this file. What it gives:
#   die MSG...            print "NAME: ERROR: MSG" and exit 1
#   prepare_outdir DIR    create DIR; set OUT_DIR, STAMP; serialise concurrent runs
#   inputs_hash PATH...   hash of the Go toolchain and build environment, and of
#                         each PATH: a file's bytes, or a directory's go.mod, go.sum
#                         and .go files (everything that decides the binaries)
#   up_to_date HASH PATH... true when the stamp records HASH and each PATH exists
#   write_stamp HASH VERSIONS  record a finished build
# The build environment is fixed here, whatever the caller's: the wrapper module
# alone (GOWORK=off), its go.sum as it is (-mod=readonly).

export GOWORK=off GOFLAGS=-mod=readonly
GO=${GO:-go}

die() {
	echo "$NAME: ERROR: $*" >&2
	exit 1
}

command -v "$GO" >/dev/null 2>&1 || die "'$GO' not found in PATH; install Go first"

prepare_outdir() {
	mkdir -p "$1" || die "cannot create $1"
	OUT_DIR=$(cd "$1" && pwd)
	STAMP=$OUT_DIR/.$NAME.stamp
	# Serialise concurrent runs (e.g. two `make test` at once) on the same folder.
	if command -v flock >/dev/null 2>&1; then
		exec 9>"$OUT_DIR/.$NAME.lock"
		flock 9
	fi
}

inputs_hash() {
	local p
	{
		"$GO" version
		"$GO" env GOOS GOARCH GOAMD64 GOARM64 CGO_ENABLED CC
		for p in "$@"; do
			if [ -d "$p" ]; then
				cat "$p/go.mod" "$p/go.sum"
				find "$p" -name '*.go' -type f | LC_ALL=C sort | xargs -r cat
			else
				cat "$p"
			fi
		done
	} | sha256sum | cut -d' ' -f1
}

up_to_date() {
	local hash=$1 p
	shift
	[ -f "$STAMP" ] && grep -qx "inputs $hash" "$STAMP" || return 1
	for p in "$@"; do
		[ -e "$p" ] || return 1
	done
	echo "$NAME: up to date in $OUT_DIR ($(sed -n 's/^versions //p' "$STAMP"))"
}

write_stamp() {
	printf 'inputs %s\nversions %s\n' "$1" "$2" >"$STAMP"
}

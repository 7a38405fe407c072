package ociimage

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
)

// VersionVar is the variable the hotcert binaries report on --version; the
// link step sets it (-ldflags -X).
const VersionVar = "github.com/hotcert/hotcert/cmd/internal/cli.version"

// Binary is a binary to build: its main package (relative to Dir, the module
// or workspace it is built in), the version it reports, and its platform.
type Binary struct {
	Dir, Package, Version string
	GOOS, GOARCH          string
}

// Name is the binary's name: the last element of its package.
func (b Binary) Name() string { return path.Base(filepath.ToSlash(filepath.Clean(b.Package))) }

// Compile builds b into the file out as hotcert's images and releases carry
// it: static (CGO_ENABLED=0), without file system paths (-trimpath), without
// the VCS stamp (a dirty tree would change the digest), stripped (the module
// list stays: `go version -m` and debug/buildinfo read it), with the version
// set at link time.
func Compile(b Binary, out string) error {
	cmd := exec.Command("go", "build", "-trimpath", "-buildvcs=false",
		"-ldflags", fmt.Sprintf("-s -w -buildid= -X %s=%s", VersionVar, b.Version),
		"-o", out, b.Package)
	cmd.Dir = b.Dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+b.GOOS, "GOARCH="+b.GOARCH)
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stderr, &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("ociimage: go build %s for %s/%s: %w\n%s", b.Package, b.GOOS, b.GOARCH, err, strings.TrimSpace(stderr.String()))
	}
	return nil
}

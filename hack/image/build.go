package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"runtime"
	"strings"
)

// versionVar is the variable the hotcert binaries report on --version.
const versionVar = "github.com/hotcert/hotcert/cmd/internal/cli.version"

// compile builds s's binary as the image carries it: static (CGO_ENABLED=0),
// without file system paths (-trimpath), without the VCS stamp (a dirty tree
// would change the digest), stripped, with the version set at link time.
func compile(s Spec, goarch, out string) error {
	cmd := exec.Command("go", "build", "-trimpath", "-buildvcs=false",
		"-ldflags", fmt.Sprintf("-s -w -buildid= -X %s=%s", versionVar, s.Version),
		"-o", out, s.Package)
	cmd.Dir = s.Dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+goarch)
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stderr, &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go build %s: %w\n%s", s.Package, err, strings.TrimSpace(stderr.String()))
	}
	return nil
}

// binaryName is the name of the binary s.Package builds (its last element).
func binaryName(s Spec) string { return path.Base(filepath.ToSlash(filepath.Clean(s.Package))) }

func targetArch(s Spec) string {
	if s.GOARCH != "" {
		return s.GOARCH
	}
	return runtime.GOARCH
}

// Command release builds, from this repository, what a hotcert release
// publishes, into one directory:
//
//   - hotcert and hotcert-controller for linux and darwin on amd64 and arm64
//     (static, -trimpath, the version set at link time);
//   - the controller's multi-platform image (an OCI image index over
//     linux/amd64 and linux/arm64, built with package ociimage as `make image`
//     builds one) as an OCI archive, a tar of an OCI image layout;
//   - the Helm chart packaged, its version and appVersion the release's;
//   - a CycloneDX SBOM (JSON) of every binary's Go modules;
//   - SHA256SUMS over all of them, in sha256sum's format.
//
// The version (-version vX.Y.Z) is one string everywhere: both binaries'
// --version, the image's tag and org.opencontainers.image.version label, the
// chart's version and appVersion. A release is built from a clean tree whose
// HEAD is tagged -version and whose go.mod files require their sibling modules
// at released versions; -allow-dirty turns those checks into warnings, for a
// rehearsal. `make release` runs it. Publishing the artifacts happens
// elsewhere (docs/releasing.md).
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "release:", err)
		os.Exit(1)
	}
}

// run builds the release the command line describes.
func run(args []string, stdout, stderr io.Writer) error {
	var c Config
	var platforms string
	fs := flag.NewFlagSet("release", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&c.Dir, "dir", ".", "root of the repository (the go.work workspace)")
	fs.StringVar(&c.Version, "version", "", "the release's version, vX.Y.Z[-pre] (required)")
	fs.StringVar(&c.Out, "out", "", "directory to write the artifacts to, replaced (default: DIR/dist/VERSION)")
	fs.StringVar(&platforms, "platforms", strings.Join(DefaultPlatforms, ","), "GOOS/GOARCH pairs the binaries are built for; the linux ones are the image's")
	fs.StringVar(&c.Repository, "repository", "hotcert.local/hotcert-controller", "image repository the image is tagged in and the chart pulls from")
	fs.BoolVar(&c.AllowDirty, "allow-dirty", false, "a rehearsal: build from a dirty or untagged tree, or one whose modules require unreleased siblings (warnings, not errors)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	c.Platforms = strings.Split(platforms, ",")
	if c.Out == "" && c.Version != "" {
		c.Out = filepath.Join(c.Dir, "dist", c.Version)
	}
	c.Log = func(msg string) { fmt.Fprintln(stderr, "release:", msg) }
	r, err := Build(c)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "release %s in %s:\n", c.Version, c.Out)
	for _, a := range r.Artifacts {
		fmt.Fprintf(stdout, "  %-48s %10d bytes\n", a.Name, a.Size)
	}
	fmt.Fprintf(stdout, "image %s index %s\n", r.Image.Ref, r.Image.Digest)
	return nil
}

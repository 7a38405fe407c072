package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"golang.org/x/mod/semver"

	"github.com/hotcert/hotcert/hack/image/ociimage"
)

// DefaultPlatforms are the platforms a release's binaries are built for.
var DefaultPlatforms = []string{"linux/amd64", "linux/arm64", "darwin/amd64", "darwin/arm64"}

// Commands are the main packages a release ships, relative to the root; the
// controller's is the one the image carries.
var Commands = []string{"./cmd/hotcert", "./cmd/hotcert-controller"}

const (
	controllerPkg = "./cmd/hotcert-controller"
	chartDir      = "deploy/helm/hotcert-controller"
)

// Config describes a release to build.
type Config struct {
	Dir, Version, Out, Repository string
	Platforms                     []string
	// AllowDirty makes a rehearsal: the checks of a real release (clean
	// tree, HEAD tagged Version, sibling modules required at released
	// versions) only warn.
	AllowDirty bool
	Log        func(string) // progress and warnings; nil: silent
}

// Artifact is a file of the release.
type Artifact struct {
	Name string // base name, in Config.Out
	Size int64
}

// Result is what Build wrote.
type Result struct {
	Artifacts []Artifact // sorted by name, SHA256SUMS last
	Binaries  []Built
	Image     *ociimage.Index
}

// Build checks c, then writes the release's artifacts into c.Out (replacing
// the directory) and their checksums.
func Build(c Config) (*Result, error) {
	if err := checkVersion(c.Version); err != nil {
		return nil, err
	}
	if c.Log == nil {
		c.Log = func(string) {}
	}
	for _, check := range []func(string, string) error{checkClean, checkTagged, checkModules} {
		if err := check(c.Dir, c.Version); err != nil {
			if !c.AllowDirty {
				return nil, fmt.Errorf("%w (a rehearsal: -allow-dirty, ALLOW_DIRTY=1)", err)
			}
			c.Log("warning: " + err.Error())
		}
	}
	if c.Out == "" {
		return nil, fmt.Errorf("no output directory")
	}
	var err error
	if c.Out, err = filepath.Abs(c.Out); err != nil { // go build -o runs in c.Dir
		return nil, err
	}
	if err := clearOut(c.Out); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(c.Out, 0o755); err != nil {
		return nil, err
	}
	r := &Result{}
	steps := []struct {
		name string
		run  func() error
	}{
		{"binaries", func() (err error) { r.Binaries, err = buildBinaries(c); return err }},
		{"image", func() (err error) { r.Image, err = writeImage(c, r.Binaries); return err }},
		{"chart", func() error { return writeChart(c) }},
		{"SBOM", func() error { return writeSBOM(c, r.Binaries) }},
		{"checksums", func() error { return writeSums(c.Out) }},
	}
	for _, s := range steps {
		start := time.Now()
		if err := s.run(); err != nil {
			return nil, err
		}
		c.Log(fmt.Sprintf("%s in %s", s.name, time.Since(start).Round(100*time.Millisecond)))
	}
	entries, err := os.ReadDir(c.Out)
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		fi, err := e.Info()
		if err != nil {
			return nil, err
		}
		r.Artifacts = append(r.Artifacts, Artifact{Name: e.Name(), Size: fi.Size()})
	}
	slices.SortStableFunc(r.Artifacts, func(a, b Artifact) int {
		return boolCmp(a.Name == sumsFile, b.Name == sumsFile)
	})
	return r, nil
}

// clearOut removes the directory out if it holds a previous release (its
// SHA256SUMS) or nothing, and refuses to remove any other directory.
func clearOut(out string) error {
	entries, err := os.ReadDir(out)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if _, err := os.Stat(filepath.Join(out, sumsFile)); len(entries) > 0 && err != nil {
		return fmt.Errorf("%s holds files and no %s: not a release's directory, left alone", out, sumsFile)
	}
	return os.RemoveAll(out)
}

func boolCmp(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return 1
	}
	return -1
}

// checkVersion accepts a semantic version with its "v", as Go's module tags
// and `go install …@vX.Y.Z` spell it, without build metadata (an image tag
// cannot hold "+").
func checkVersion(v string) error {
	if v == "" {
		return fmt.Errorf("no version: tag HEAD vX.Y.Z or pass VERSION=vX.Y.Z")
	}
	if !semver.IsValid(v) || semver.Canonical(v) != v || strings.Contains(v, "+") {
		return fmt.Errorf("version %q: want vMAJOR.MINOR.PATCH[-PRERELEASE]", v)
	}
	return nil
}

// artifactName is the file name of a release's binary.
func artifactName(bin, version, goos, goarch string) string {
	return fmt.Sprintf("%s_%s_%s_%s", bin, version, goos, goarch)
}

// abs is the path of rel, slash-separated, under dir.
func abs(dir, rel string) string { return filepath.Join(dir, filepath.FromSlash(rel)) }

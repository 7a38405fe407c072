package main

import (
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/hotcert/hotcert/hack/image/ociimage"
)

// Built is a binary of the release, compiled.
type Built struct {
	ociimage.Binary
	File string // the artifact's base name in Config.Out
}

// buildBinaries compiles every command for every platform into c.Out.
func buildBinaries(c Config) ([]Built, error) {
	var built []Built
	for _, p := range c.Platforms {
		goos, goarch, ok := strings.Cut(p, "/")
		if !ok || goos == "" || goarch == "" {
			return nil, fmt.Errorf("platform %q: want GOOS/GOARCH", p)
		}
		for _, pkg := range Commands {
			b := Built{Binary: ociimage.Binary{Dir: c.Dir, Package: pkg, Version: c.Version, GOOS: goos, GOARCH: goarch}}
			b.File = artifactName(b.Name(), c.Version, goos, goarch)
			start := time.Now()
			if err := ociimage.Compile(b.Binary, filepath.Join(c.Out, b.File)); err != nil {
				return nil, err
			}
			c.Log(fmt.Sprintf("built %s in %s", b.File, time.Since(start).Round(time.Second)))
			built = append(built, b)
		}
	}
	return built, nil
}

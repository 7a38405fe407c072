package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
)

// sizeTolerance is how far the image may drift from the size the docs give
// before they must be measured again (a dependency bump moves it by a few %).
const sizeTolerance = 0.15

// checkDocumentedSize compares the sizes `make image` printed (built is its
// output) with the ones docs/rollout-controller.md states, so the page cannot
// go stale by more than sizeTolerance.
func checkDocumentedSize(t *testing.T, built string) {
	t.Helper()
	m := regexp.MustCompile(`\((\d+) bytes compressed, (\d+) bytes binary\)`).FindStringSubmatch(built)
	if m == nil {
		t.Fatalf("no sizes in %q", built)
	}
	page := filepath.Join(repoRoot, "docs", "rollout-controller.md")
	doc, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	d := regexp.MustCompile(`About ([0-9.]+) MB compressed \(a ([0-9.]+) MB binary`).FindSubmatch(doc)
	if d == nil {
		t.Fatalf("%s states no image size (\"About N MB compressed (a M MB binary\")", page)
	}
	for i, what := range []string{"compressed layer", "binary"} {
		got, _ := strconv.ParseFloat(m[i+1], 64)
		stated, _ := strconv.ParseFloat(string(d[i+1]), 64)
		got /= 1e6
		if got < stated*(1-sizeTolerance) || got > stated*(1+sizeTolerance) {
			t.Errorf("%s: the image's %s is %.1f MB, the page says %.1f MB: measure with `make image` and correct it", page, what, got, stated)
		}
	}
}

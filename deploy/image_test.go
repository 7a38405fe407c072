package deploy

import (
	"os/exec"
	"strings"
	"testing"
)

// TestMakeImageTagsWhatTheManifestsRun checks that `make image` tags the image
// the chart and the kustomize base run (their own tests check those).
func TestMakeImageTagsWhatTheManifestsRun(t *testing.T) {
	cmd := exec.Command("make", "-s", "-n", "image")
	cmd.Dir = ".."
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("make -n image: %v\n%s", err, out)
	}
	repo, tag, _ := strings.Cut(controllerImage(t), ":")
	if want := "-version " + tag + " -repository " + repo; !strings.Contains(string(out), want) {
		t.Fatalf("make image runs %q, without %q", out, want)
	}
}

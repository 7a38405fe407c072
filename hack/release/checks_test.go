package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func TestCheckVersion(t *testing.T) {
	for v, ok := range map[string]bool{
		"v1.2.3": true, "v0.1.0-rc.1": true, "v0.0.0-releasetest": true,
		"": false, "1.2.3": false, "v1.2": false, "v1.2.3+build": false, "dev": false,
	} {
		if err := checkVersion(v); (err == nil) != ok {
			t.Errorf("checkVersion(%q) = %v", v, err)
		}
	}
}

// TestRealReleaseChecks checks, in a repository of its own, that a real
// release refuses a dirty tree, an untagged HEAD and modules requiring an
// unreleased sibling or carrying a replace directive, before it builds
// anything; and that a rehearsal (-allow-dirty) goes past them.
func TestRealReleaseChecks(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) {
		t.Helper()
		path := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	gitRun := func(args ...string) {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-C", dir, "-c", "user.name=t", "-c", "user.email=t@example.com"}, args...)...)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	const v = "v1.2.3"
	write("go.work", "go 1.26.0\n\nuse (\n\t.\n\t./cmd\n)\n")
	write("go.mod", "module example.com/m\n\ngo 1.26.0\n")
	write("cmd/go.mod", "module example.com/m/cmd\n\ngo 1.26.0\n\nrequire example.com/m v0.0.0-00010101000000-000000000000\n")
	gitRun("init", "-q")
	gitRun("add", ".")
	gitRun("commit", "-q", "-m", "init")

	if err := checkClean(dir, v); err != nil {
		t.Errorf("clean tree: %v", err)
	}
	if err := checkTagged(dir, v); err == nil {
		t.Error("untagged HEAD passed")
	}
	err := checkModules(dir, v)
	if err == nil || !strings.Contains(err.Error(), "cmd/go.mod requires example.com/m v0.0.0-00010101000000-000000000000, not v1.2.3") {
		t.Errorf("a sibling required at the zero version: %v", err)
	}
	// What the release preparation does: require the siblings at the tag.
	write("cmd/go.mod", "module example.com/m/cmd\n\ngo 1.26.0\n\nrequire example.com/m v1.2.3\n")
	gitRun("commit", "-q", "-am", "require v1.2.3")
	gitRun("tag", v)
	for name, check := range map[string]func(string, string) error{"clean": checkClean, "tagged": checkTagged, "modules": checkModules} {
		if err := check(dir, v); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	write("cmd/go.mod", "module example.com/m/cmd\n\ngo 1.26.0\n\nrequire example.com/m v1.2.3\n\nreplace example.com/m => ../\n")
	if err := checkModules(dir, v); err == nil || !strings.Contains(err.Error(), "replace directive") {
		t.Errorf("a replace directive: %v", err)
	}
	if err := checkClean(dir, v); err == nil {
		t.Error("a modified file passed")
	}
	gitRun("checkout", "-q", "cmd/go.mod")
	write("untracked", "x")
	if err := checkClean(dir, v); err == nil {
		t.Error("an untracked file passed")
	}

	// Build stops at the first failed check and writes nothing.
	out := filepath.Join(t.TempDir(), "out")
	_, err = Build(Config{Dir: dir, Version: v, Out: out, Repository: testRepo, Platforms: []string{"linux/amd64"}})
	if err == nil || !strings.Contains(err.Error(), "dirty") {
		t.Fatalf("Build from a dirty tree: %v", err)
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Errorf("a refused release wrote %s (%v)", out, err)
	}
	// An output directory that holds something else is left alone.
	if _, err := Build(Config{Dir: dir, Version: v, Out: dir, Platforms: []string{"linux/amd64"}, AllowDirty: true}); err == nil || !strings.Contains(err.Error(), "not a release's directory") {
		t.Errorf("Build into the repository itself: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "go.work")); err != nil {
		t.Fatalf("Build removed the repository: %v", err)
	}
	// A rehearsal warns and goes on (to fail here: the tree has no command).
	var warned []string
	_, err = Build(Config{Dir: dir, Version: v, Out: out, Repository: testRepo, Platforms: []string{"linux/amd64"},
		AllowDirty: true, Log: func(msg string) { warned = append(warned, msg) }})
	if err == nil || len(warned) == 0 || !strings.Contains(warned[0], "warning: the tree is dirty") {
		t.Errorf("rehearsal: %v, warnings %q", err, warned)
	}
}

// TestModulesCarryNoReplace checks every go.mod of this repository: none has
// a replace directive (the workspace's go.work holds them) or an exclude
// directive, which `go install …/cmd/hotcert@vX.Y.Z` would refuse.
func TestModulesCarryNoReplace(t *testing.T) {
	mods, err := workspaceModules(repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	if len(mods) < 2 {
		t.Fatalf("%d modules in the workspace", len(mods))
	}
	for _, m := range mods {
		for _, r := range m.Replace {
			t.Errorf("%s replaces %s", m.Syntax.Name, r.Old.Path)
		}
		for _, x := range m.Exclude {
			t.Errorf("%s excludes %s", m.Syntax.Name, x.Mod.Path)
		}
	}
}

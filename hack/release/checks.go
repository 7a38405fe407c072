package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/mod/modfile"
)

// git runs git in dir and returns its standard output.
func git(dir string, args ...string) (string, error) {
	cmd := exec.Command("git", append([]string{"-C", dir}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("git %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return string(out), nil
}

// checkClean fails when the tree at dir has changes git would commit or
// files it does not ignore: a release is built from a commit and nothing else.
func checkClean(dir, _ string) error {
	out, err := git(dir, "status", "--porcelain", "--untracked-files=normal")
	if err != nil {
		return err
	}
	if out = strings.TrimRight(out, "\n"); out != "" { // each line starts with its status: keep its spaces
		lines := strings.Split(out, "\n")
		if len(lines) > 5 {
			lines = append(lines[:5], "…")
		}
		return fmt.Errorf("the tree is dirty:\n%s", strings.Join(lines, "\n"))
	}
	return nil
}

// checkTagged fails when HEAD is not tagged version.
func checkTagged(dir, version string) error {
	out, err := git(dir, "tag", "--points-at", "HEAD")
	if err != nil {
		return err
	}
	if !slices.Contains(strings.Fields(out), version) {
		return fmt.Errorf("HEAD is not tagged %s", version)
	}
	return nil
}

// unpublished are the directories of the workspace's modules a release does
// not publish (tests, examples, build tools): users never require them.
var unpublished = []string{"bench/", "deploy/", "examples/", "hack/"}

// checkModules reads the go.mod of every module of the workspace at dir and
// fails when one carries a replace or exclude directive (`go install
// …@version` refuses such a module) or when a published one requires a sibling module at another
// version than the release's: outside the workspace, `go get` and `go
// install` resolve a sibling by its requirement, and
// v0.0.0-00010101000000-000000000000, what the tree requires between
// releases, exists on no proxy.
func checkModules(dir, version string) error {
	mods, err := workspaceModules(dir)
	if err != nil {
		return err
	}
	siblings := map[string]bool{}
	for _, m := range mods {
		siblings[m.Module.Mod.Path] = true
	}
	var problems []string
	for _, m := range mods {
		name := m.Syntax.Name
		published := !slices.ContainsFunc(unpublished, func(p string) bool { return strings.HasPrefix(name, p) })
		for _, r := range m.Replace {
			problems = append(problems, fmt.Sprintf("%s replaces %s (go install refuses a module with a replace directive)", name, r.Old.Path))
		}
		for _, x := range m.Exclude {
			problems = append(problems, fmt.Sprintf("%s excludes %s (go install refuses a module with an exclude directive)", name, x.Mod.Path))
		}
		for _, r := range m.Require {
			if published && siblings[r.Mod.Path] && r.Mod.Version != version {
				problems = append(problems, fmt.Sprintf("%s requires %s %s, not %s", name, r.Mod.Path, r.Mod.Version, version))
			}
		}
	}
	if len(problems) > 0 {
		return fmt.Errorf("the modules are not ready for %s (docs/releasing.md, preparing the modules):\n%s", version, strings.Join(problems, "\n"))
	}
	return nil
}

// workspaceModules parses the go.mod of every module go.work at dir uses;
// each file's Syntax.Name is its path relative to dir.
func workspaceModules(dir string) ([]*modfile.File, error) {
	data, err := os.ReadFile(filepath.Join(dir, "go.work"))
	if err != nil {
		return nil, err
	}
	work, err := modfile.ParseWork("go.work", data, nil)
	if err != nil {
		return nil, err
	}
	var mods []*modfile.File
	for _, u := range work.Use {
		rel := filepath.Join(filepath.FromSlash(u.Path), "go.mod")
		data, err := os.ReadFile(filepath.Join(dir, rel))
		if err != nil {
			return nil, err
		}
		f, err := modfile.Parse(filepath.ToSlash(rel), data, nil)
		if err != nil {
			return nil, err
		}
		mods = append(mods, f)
	}
	return mods, nil
}

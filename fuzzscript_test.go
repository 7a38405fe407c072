package hotcert_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestFuzzScriptRunsEveryTarget runs hack/fuzz.sh (make fuzz) as a machine
// without the Kubernetes binaries would, with KUBEBUILDER_ASSETS naming an empty
// folder, and a `go` that records each `go test -fuzz` call instead of fuzzing
// (every other go command is the real one). The script must run every fuzz target
// of every module of go.work, found here independently by parsing each test file,
// and bound each target's minimization by a count (see hack/fuzz.sh: minimizing
// by time took whole runs of FuzzValidateDER).
func TestFuzzScriptRunsEveryTarget(t *testing.T) {
	root, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	realGo, err := exec.LookPath("go")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	calls := filepath.Join(dir, "calls")
	fakeGo := filepath.Join(dir, "go")
	script := "#!/bin/sh\ncase \" $* \" in *\" -fuzz \"*) echo \"$*\" >>" + calls + "; exit 0;; esac\nexec " + realGo + " \"$@\"\n"
	if err := os.WriteFile(fakeGo, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	empty := t.TempDir()
	cmd := exec.Command(filepath.Join(root, "hack", "fuzz.sh"))
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "GO="+fakeGo, "KUBEBUILDER_ASSETS="+empty, "FUZZTIME=1x", "GOWORK="+filepath.Join(root, "go.work"), "GOFLAGS=")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("hack/fuzz.sh without Kubernetes binaries: %v\n%s", err, out)
	}

	var got []string
	data, err := os.ReadFile(calls)
	if err != nil {
		t.Fatalf("hack/fuzz.sh ran no fuzz target: %v", err)
	}
	countBound := regexp.MustCompile(`^[0-9]+x$`)
	for line := range strings.SplitSeq(strings.TrimSpace(string(data)), "\n") {
		args := strings.Fields(line)
		flag := func(name string) string {
			if i := slices.Index(args, name); i >= 0 && i+1 < len(args) {
				return args[i+1]
			}
			return ""
		}
		if m := flag("-fuzzminimizetime"); !countBound.MatchString(m) {
			t.Errorf("%s: -fuzzminimizetime %q, want a count (Nx)", line, m)
		}
		got = append(got, args[len(args)-1]+" "+strings.Trim(flag("-fuzz"), "^$"))
	}
	slices.Sort(got)
	want := fuzzTargets(t, root)
	if len(want) < 5 {
		t.Fatalf("found only %d fuzz targets in the source: %v", len(want), want)
	}
	if !slices.Equal(got, want) {
		t.Errorf("hack/fuzz.sh ran\n  %s\nwant every target of the source\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
}

// fuzzTargets returns "<package> <target>" for every func FuzzXxx(*testing.F) in a
// _test.go file of a module of go.work, sorted.
func fuzzTargets(t *testing.T, root string) []string {
	t.Helper()
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}} {{.Path}}").Output()
	if err != nil {
		t.Fatal(err)
	}
	modules := map[string]string{} // directory → module path
	for line := range strings.SplitSeq(strings.TrimSpace(string(out)), "\n") {
		d, p, _ := strings.Cut(line, " ")
		modules[d] = p
	}
	var targets []string
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); path != root && (name == "testdata" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		pkg, ok := importPath(filepath.Dir(path), modules)
		if !ok {
			return nil // a module outside go.work (hack's build wrappers)
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if ok && fn.Recv == nil && isFuzzName(fn.Name.Name) && takesTestingF(fn) {
				targets = append(targets, pkg+" "+fn.Name.Name)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(targets)
	return slices.Compact(targets)
}

// importPath maps a directory to its import path through the nearest go.mod,
// which must be one of modules'.
func importPath(dir string, modules map[string]string) (string, bool) {
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			mod, ok := modules[d]
			if !ok {
				return "", false
			}
			rel, _ := filepath.Rel(d, dir)
			if rel == "." {
				return mod, true
			}
			return mod + "/" + filepath.ToSlash(rel), true
		}
		if filepath.Dir(d) == d {
			return "", false
		}
	}
}

// isFuzzName: go test's rule, "Fuzz" then nothing or a rune that is not lower case.
func isFuzzName(name string) bool {
	rest, ok := strings.CutPrefix(name, "Fuzz")
	return ok && (rest == "" || !(rest[0] >= 'a' && rest[0] <= 'z'))
}

func takesTestingF(fn *ast.FuncDecl) bool {
	params := fn.Type.Params.List
	if len(params) != 1 || len(params[0].Names) > 1 || fn.Type.Results != nil {
		return false
	}
	star, ok := params[0].Type.(*ast.StarExpr)
	if !ok {
		return false
	}
	sel, ok := star.X.(*ast.SelectorExpr)
	if !ok {
		return false
	}
	pkg, ok := sel.X.(*ast.Ident)
	return ok && pkg.Name == "testing" && sel.Sel.Name == "F"
}

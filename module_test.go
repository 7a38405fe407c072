package hotcert_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestImportersGetALeanModuleGraph builds a scratch module that imports only the
// TLS library (the root package and tlsconfig) and checks its module graph: no
// Kubernetes, controller-runtime, cobra or JWT module may reach an importer.
func TestImportersGetALeanModuleGraph(t *testing.T) {
	root, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	write := func(name, text string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("go.mod", "module example.com/importer\n\ngo 1.26.0\n\nrequire github.com/hotcert/hotcert v0.0.0-00010101000000-000000000000\n\nreplace github.com/hotcert/hotcert => "+root+"\n")
	write("main.go", `package main

import (
	"github.com/hotcert/hotcert"
	"github.com/hotcert/hotcert/tlsconfig"
)

var _ = tlsconfig.Server
var _ hotcert.Source

func main() {}
`)
	goCmd := func(args ...string) string {
		t.Helper()
		cmd := exec.Command("go", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	goCmd("mod", "tidy")
	graph := goCmd("mod", "graph")
	for _, banned := range []string{"k8s.io/", "sigs.k8s.io/", "github.com/spf13/cobra", "github.com/golang-jwt/", "github.com/go-jose/"} {
		for line := range strings.SplitSeq(graph, "\n") {
			if strings.Contains(line, banned) {
				t.Errorf("the importer's module graph has %s: %s", banned, line)
				break
			}
		}
	}
	if !strings.Contains(graph, "github.com/fsnotify/fsnotify") {
		t.Errorf("the graph does not list the library's own dependencies; is the check looking at the right module?\n%s", graph)
	}
}

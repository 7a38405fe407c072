package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The README's tour compiles as pasted: its Go block is built as a program of the
// cmd module (which requires the library), from a directory of its own.
func TestReadmeTourCompiles(t *testing.T) {
	text, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(text), "## A five-minute tour")
	if !ok {
		t.Fatal("README.md has no tour")
	}
	_, code, ok := strings.Cut(rest, "```go\n")
	if !ok {
		t.Fatal("the tour has no Go block")
	}
	code, _, _ = strings.Cut(code, "```")
	dir, err := os.MkdirTemp(".", "_readme-tour-") // inside the cmd module; "_": never matched by ./...
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(code), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("go", "vet", "./"+filepath.Base(dir)).CombinedOutput()
	if err != nil {
		t.Fatalf("the README tour does not compile as pasted: %v\n%s\n%s", err, out, code)
	}
	if out, err := exec.Command("gofmt", "-l", dir).CombinedOutput(); err != nil || len(out) > 0 {
		t.Fatalf("the README tour is not gofmt-formatted: %v %s", err, out)
	}
}

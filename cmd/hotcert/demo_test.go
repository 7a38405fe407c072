package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestDemoCommand runs `hotcert demo` as CI does: short mode, its invariants checked
// by the demo itself, and the exit status (an error from the command) on a broken one.
func TestDemoCommand(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	out := t.TempDir()
	stdout, _, err := run(ctx, "demo", "--short", "--agents", "8", "--out", out, "--log-format", "json", "--log-level", "debug")
	if err != nil {
		t.Fatalf("hotcert demo failed: %v\n%s", err, stdout)
	}
	// demo.log follows --log-format and --log-level.
	logs, err := os.ReadFile(filepath.Join(out, "demo.log"))
	if err != nil {
		t.Fatal(err)
	}
	first, _, _ := strings.Cut(string(logs), "\n")
	if !strings.HasPrefix(first, "{") || !strings.Contains(string(logs), `"level":"DEBUG"`) {
		t.Fatalf("demo.log is not JSON at debug level: %s", first)
	}
	if !strings.Contains(stdout, "every invariant held") {
		t.Fatalf("no verdict in the output:\n%s", stdout)
	}
	if _, err := os.Stat(filepath.Join(out, "timeline.svg")); err != nil {
		t.Fatal(err)
	}

	_, _, err = run(ctx, "demo", "--short", "--agents", "4", "--out", t.TempDir(), "--break", "one-step-ca", "--trust-guard=false")
	if err == nil || !strings.Contains(err.Error(), "invariant broken") || strings.Contains(err.Error(), "\n") {
		t.Fatalf("a broken invariant must fail the command with a one-line reason, got %v", err)
	}
	// --trust-guard, as hotcert server and agent name it; the demo's old
	// --trust-guards still works, deprecated and hidden from --help.
	_, stderr, err := run(ctx, "demo", "--short", "--agents", "4", "--out", t.TempDir(), "--break", "one-step-ca", "--trust-guards=false")
	if err == nil || !strings.Contains(err.Error(), "UNSAFE one-step CA swap:") || !strings.Contains(stderr, "Flag --trust-guards has been deprecated, use --trust-guard instead") {
		t.Fatalf("--trust-guards=false: %v, stderr %q; want the unguarded swap broken and a deprecation warning", err, stderr)
	}
	help, _, err := run(ctx, "demo", "--help")
	if err != nil || !strings.Contains(help, "--trust-guard[=true|false]") || strings.Contains(help, "--trust-guards") {
		t.Fatalf("demo --help shows --trust-guards or lacks --trust-guard: %v\n%s", err, help)
	}
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp) // where a demo without --out would make its directory
	_, _, err = run(ctx, "demo", "--agents", "0")
	requireOneLine(t, err, "--agents")
	_, _, err = run(ctx, "demo", "--break", "two-step")
	requireOneLine(t, err, "--break")
	if ents, _ := os.ReadDir(tmp); len(ents) != 0 {
		t.Errorf("a refused demo left %d directories behind in TMPDIR", len(ents))
	}
	_, _, err = run(ctx, "demo", "--log-format", "xml")
	requireOneLine(t, err, "--log-format")
}

package main

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The docs cannot drift from the CLI: the shell blocks of docs/cli.md and the
// runbook marked as runnable (```sh runnable) run, in order, as one script per
// document, from an empty directory with the hotcert binary on PATH, against real
// `hotcert server` and `hotcert agent` processes on loopback. The addresses the docs
// use (127.0.0.1:9090, :9091, :9092) are replaced by free ports, so the test runs
// beside others.
func TestDocsRun(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Fatal("the docs' blocks are bash: install bash")
	}
	bin := t.TempDir()
	build := exec.Command("go", "build", "-o", filepath.Join(bin, "hotcert"), ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	for _, doc := range []struct {
		path   string
		blocks int      // at least this many runnable blocks
		want   []string // in the script's output
	}{
		{"../../docs/cli.md", 4, []string{"result: VERIFIED: an agent with this bundle accepts this replica", "refused: expired", "refused: the key does not match",
			"refused: the certificate does not name cp.example.com", "result: VERIFIED", "result: OK: the reloader would load these files",
			"the agent moved onto serial "}},
		{"../../docs/runbooks/rotate-agent-certificates.md", 5, []string{"ca bundle: 2 CA(s)", "step 1 done: 1/1 connected agents trust dexaflow CA 2026", "step 2 done: 1/1 replicas serve a leaf issued by dexaflow CA 2026", "not ready for step 3",
			"ready for step 3", "result: VERIFIED", "refused: key_mismatch"}},
		{"../../docs/proxy.md", 4, []string{"hello from a program that cannot reload", "the proxy serves serial", `hotcert_tls_cert_info{component="proxy"`,
			"refused: the laptop's certificate is revoked", `hotcert_tls_deny_list_info{component="proxy_deny_list"`}},
	} {
		t.Run(filepath.Base(doc.path), func(t *testing.T) {
			text, err := os.ReadFile(doc.path)
			if err != nil {
				t.Fatal(err)
			}
			blocks := runnableBlocks(string(text))
			if len(blocks) < doc.blocks {
				t.Fatalf("%s: %d runnable blocks, want at least %d", doc.path, len(blocks), doc.blocks)
			}
			ports := strings.NewReplacer("127.0.0.1:9090", freeAddr(t), "127.0.0.1:9091", freeAddr(t), "127.0.0.1:9092", freeAddr(t),
				"127.0.0.1:9093", freeAddr(t), "127.0.0.1:9094", freeAddr(t))
			// At the end, stop the background processes newest first, each
			// before the next: agents are started after their servers, and an
			// agent still running when its server stops logs a failed
			// reconnect that is teardown, not the walkthrough (seen under load).
			script := "set -euo pipefail\ntrap 'for p in $(jobs -p | tac); do kill \"$p\" 2>/dev/null || true; wait \"$p\" 2>/dev/null || true; done' EXIT\n" + ports.Replace(strings.Join(blocks, "\n"))
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			dir := t.TempDir()
			cmd := exec.CommandContext(ctx, "bash", "-c", script)
			cmd.Dir = dir
			cmd.Env = append(os.Environ(), "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"))
			out, err := cmd.CombinedOutput()
			logs := readLogs(dir)
			if err != nil {
				t.Fatalf("%s: the runnable blocks failed: %v\n--- script\n%s\n--- output\n%s\n--- logs\n%s", doc.path, err, script, out, logs)
			}
			for _, w := range doc.want {
				if !strings.Contains(string(out), w) {
					t.Errorf("%s: output lacks %q:\n%s", doc.path, w, out)
				}
			}
			// The agents of the walkthroughs never failed a handshake.
			if strings.Contains(logs, "control plane connection failed") {
				t.Errorf("%s: an agent failed to connect during the walkthrough:\n%s", doc.path, logs)
			}
		})
	}
}

// runnableBlocks returns the bodies of the ```sh runnable fenced blocks of md.
func runnableBlocks(md string) []string {
	var (
		blocks []string
		cur    []string
		in     bool
	)
	for _, line := range strings.Split(md, "\n") {
		switch {
		case !in && strings.TrimSpace(line) == "```sh runnable":
			in, cur = true, nil
		case in && strings.TrimSpace(line) == "```":
			in = false
			blocks = append(blocks, strings.Join(cur, "\n"))
		case in:
			cur = append(cur, line)
		}
	}
	return blocks
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// readLogs returns the *.log files the blocks wrote, for failure messages.
func readLogs(dir string) string {
	var b strings.Builder
	paths, _ := filepath.Glob(filepath.Join(dir, "*.log"))
	for _, p := range paths {
		data, _ := os.ReadFile(p)
		b.WriteString("== " + filepath.Base(p) + "\n" + string(data))
	}
	return b.String()
}

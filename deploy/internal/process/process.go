// Package process runs a binary under test (hotcert-controller,
// trust-manager) for the length of a test, keeping its output.
package process

import (
	"bytes"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"testing"
)

// Output is what a process wrote to stdout and stderr; it is safe to read
// while the process writes.
type Output struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (o *Output) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.buf.Write(p)
}

// String returns the output so far.
func (o *Output) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.buf.String()
}

// Start starts path with args and the test's environment (plus env), and
// stops it when the test ends: SIGTERM, then a wait. If the test failed, the
// output is logged.
func Start(t testing.TB, path string, args []string, env ...string) *Output {
	t.Helper()
	out := &Output{}
	cmd := exec.Command(path, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", path, err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		err := cmd.Wait()
		if t.Failed() {
			t.Logf("%s (%v):\n%s", path, err, out.String())
		}
	})
	return out
}

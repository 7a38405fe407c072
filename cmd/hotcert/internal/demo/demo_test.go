package demo

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func run(t *testing.T, b Break) (*Result, string, error) {
	t.Helper()
	var out strings.Builder
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	res, err := Run(ctx, Config{Out: t.TempDir(), Agents: 10, Short: true, Break: b, Stdout: &out, PhaseTimeout: 30 * time.Second})
	return res, out.String(), err
}

func TestDemoHoldsEveryInvariant(t *testing.T) {
	res, out, err := run(t, BreakNone)
	if err != nil {
		t.Fatalf("demo failed: %v\n%s", err, out)
	}
	want := []string{"renew server certificate", "CA step 1: union bundle", "CA step 2: new-CA certificate", "CA step 3: drop old CA", "botched rotation refused", "rotate JWT signing key", "graceful reconnect (drain)"}
	if len(res.Phases) != len(want) {
		t.Fatalf("%d phases, want %d", len(res.Phases), len(want))
	}
	for i, ph := range res.Phases {
		if ph.Name != want[i] || ph.Err != nil || ph.Failures != 0 || ph.UnexpectedDrops != 0 || ph.Rejected != 0 {
			t.Errorf("phase %d: %+v", i, ph)
		}
		if ph.Handshakes < 10 {
			t.Errorf("%s: %d handshakes: the agents did not all reconnect", ph.Name, ph.Handshakes)
		}
	}
	if res.Phases[0].Reloads != 2 || res.Phases[2].Reloads != 2 {
		t.Errorf("each replica must reload once per server-certificate rotation: %d, %d", res.Phases[0].Reloads, res.Phases[2].Reloads)
	}
	if !strings.Contains(out, "every invariant held") {
		t.Errorf("summary lacks the verdict:\n%s", out)
	}
	// The signing-key rotation: the new key's tokens reached every agent over its
	// stream, every agent re-authenticated after the old key was removed, none was
	// refused.
	if jwt := res.Phases[5]; jwt.Handshakes < 10 {
		t.Errorf("%s: %d handshakes, want every agent to re-authenticate", jwt.Name, jwt.Handshakes)
	}
	if !strings.Contains(res.Tokens, "all 10 agents held a token of it") || !strings.Contains(res.Tokens, "(10 over their existing stream)") || !strings.Contains(out, res.Tokens) {
		t.Errorf("summary lacks the signing-key rotation: %q\n%s", res.Tokens, out)
	}
	svg, err := os.ReadFile(res.Timeline)
	if err != nil || !strings.Contains(string(svg), "CA step 2") {
		t.Errorf("timeline missing or incomplete: %v", err)
	}
	logs, err := os.ReadFile(filepath.Join(filepath.Dir(res.Timeline), "demo.log"))
	if err != nil || strings.Count(string(logs), `msg="TLS certificate reload failed"`) != 1 {
		t.Errorf("want exactly one reload-failure line in the log (the botched rotation): %v", err)
	}
	// Every replica logged the rotation once, with the new and the previous kid.
	if n := strings.Count(string(logs), `msg="JWT signing key rotated"`); n != 2 {
		t.Errorf("%d \"JWT signing key rotated\" lines, want one per replica", n)
	}
	if strings.Contains(string(logs), "PRIVATE KEY") || strings.Contains(string(logs), "eyJ") {
		t.Error("the log contains key material or a token")
	}
}

func TestDemoReportsAnUnsafeRotation(t *testing.T) {
	res, out, err := run(t, BreakOneStepCA)
	if err == nil {
		t.Fatalf("the one-step CA swap passed as safe:\n%s", out)
	}
	if !strings.Contains(err.Error(), "UNSAFE one-step CA swap") || !strings.Contains(err.Error(), "failed handshakes") {
		t.Fatalf("error does not name the broken invariant: %v", err)
	}
	if res == nil || len(res.Broken) == 0 || !strings.Contains(out, "BROKEN") {
		t.Fatalf("summary does not show the broken invariant:\n%s", out)
	}
}

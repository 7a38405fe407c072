package demo

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func run(t *testing.T, b Break, guards bool) (*Result, string, error) {
	t.Helper()
	var out strings.Builder
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	res, err := Run(ctx, Config{Out: t.TempDir(), Agents: 10, Short: true, Break: b, TrustGuards: guards, Stdout: &out, PhaseTimeout: 30 * time.Second,
		NewLogger: func(w io.Writer) (*slog.Logger, error) { return slog.New(slog.NewJSONHandler(w, nil)), nil }})
	return res, out.String(), err
}

func TestDemoHoldsEveryInvariant(t *testing.T) {
	res, out, err := run(t, BreakNone, true) // as hotcert demo runs it
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
	// Each phase's reload latencies are its own reloads'; how long agents were not
	// connected is measured for every agent that reconnected.
	for _, ph := range res.Phases {
		if len(ph.ReloadLatencies) != int(ph.Reloads) || ph.ReloadP50 > ph.ReloadP99 {
			t.Errorf("%s: %d reloads, %d latencies (p50 %s, p99 %s)", ph.Name, ph.Reloads, len(ph.ReloadLatencies), ph.ReloadP50, ph.ReloadP99)
		}
		if len(ph.Gaps) < 10 || ph.NotConnectedP50 <= 0 || ph.NotConnectedP50 > ph.NotConnectedMax {
			t.Errorf("%s: %d times not connected for 10 agents that reconnected (p50 %s, max %s)", ph.Name, len(ph.Gaps), ph.NotConnectedP50, ph.NotConnectedMax)
		}
	}
	// How agents moved, on both sides: server certificates by graceful drain, CA
	// bundles by a forced reconnect, each agent reloading its bundle once.
	for _, i := range []int{0, 2, 6} {
		if ph := res.Phases[i]; ph.Moves != movesDrain || ph.Forced != 0 || ph.Drained < 10 {
			t.Errorf("%s: moved by %q, %d forced drops, %d drained; want a graceful drain of all 10 agents, none forced", ph.Name, ph.Moves, ph.Forced, ph.Drained)
		}
	}
	for _, i := range []int{1, 3} {
		if ph := res.Phases[i]; ph.Moves != movesForced || ph.Forced == 0 || ph.BundleReloads != 10 || ph.Reloads != 0 {
			t.Errorf("%s: moved by %q, %d forced drops, %d bundle reloads, %d server reloads; want forced, each agent reloading its bundle once",
				ph.Name, ph.Moves, ph.Forced, ph.BundleReloads, ph.Reloads)
		}
	}
	// Each CA step waited for the readiness verdict of hotcert rotation status and
	// printed it.
	for i, want := range map[int]string{1: "step 1 done: 10/10 connected agents trust", 2: "step 2 done: 2/2 replicas serve a leaf issued by", 3: "rotation complete: "} {
		if ph := res.Phases[i]; !strings.HasPrefix(ph.Readiness, want) || !strings.Contains(out, "hotcert rotation status: "+ph.Readiness) {
			t.Errorf("%s: readiness %q, want %q… printed", ph.Name, ph.Readiness, want)
		}
	}
	if ph := res.Phases[4]; ph.Refused != 1 {
		t.Errorf("%s: %d refused reloads, want 1", ph.Name, ph.Refused)
	}
	for _, want := range []string{"agents moved by", "forced drops", "reloads (replicas/agents)", "refused reloads", "forced reconnect = the demo drops every connection", "not connected p50/max"} {
		if !strings.Contains(out, want) {
			t.Errorf("summary lacks %q:\n%s", want, out)
		}
	}
	requireTimelineShowsEveryPhase(t, res)
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
	if err != nil || strings.Count(string(logs), `"msg":"TLS certificate reload failed"`) != 1 {
		t.Errorf("want exactly one reload-failure line in the log (the botched rotation): %v", err)
	}
	// Every replica logged the rotation once, with the new and the previous kid.
	if n := strings.Count(string(logs), `"msg":"JWT signing key rotated"`); n != 2 {
		t.Errorf("%d \"JWT signing key rotated\" lines, want one per replica", n)
	}
	// Each forced reconnect is said in the log, before the agents' drop warnings.
	if n := strings.Count(string(logs), `"msg":"demo: forced reconnect: dropping every agent connection, as a control-plane restart would"`); n != 4 {
		t.Errorf("%d forced-reconnect lines in demo.log, want one per forced reconnect (4)", n)
	}
	if strings.Contains(string(logs), "PRIVATE KEY") || strings.Contains(string(logs), "eyJ") {
		t.Error("the log contains key material or a token")
	}
	// One key, one meaning: no line names its agent or replica twice.
	for i, line := range strings.Split(strings.TrimSpace(string(logs)), "\n") {
		if dup := duplicateKeys(t, line); len(dup) > 0 {
			t.Fatalf("demo.log line %d carries %v twice: %s", i+1, dup, line)
		}
	}
}

// duplicateKeys returns the top-level keys a JSON object line carries more than once.
func duplicateKeys(t *testing.T, line string) []string {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(line))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		t.Fatalf("not a JSON object: %s", line)
	}
	seen := map[string]bool{}
	var dup []string
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			t.Fatalf("%v: %s", err, line)
		}
		key := tok.(string)
		if seen[key] {
			dup = append(dup, key)
		}
		seen[key] = true
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			t.Fatalf("%v: %s", err, line)
		}
	}
	return dup
}

// With the trust guards on (hotcert demo's default), the one-step CA swap completes
// with zero failed handshakes: the agents keep the old CA while its leaf serves, the
// replicas serve the new CA's leaf once every agent trusts it.
func TestDemoTrustGuardsSaveTheOneStepSwap(t *testing.T) {
	res, out, err := run(t, BreakOneStepCA, true)
	if err != nil {
		t.Fatalf("the guarded one-step CA swap broke an invariant: %v\n%s", err, out)
	}
	ph := res.Phases[1]
	if ph.Name != "UNSAFE one-step CA swap (trust guards on)" || ph.Failures != 0 || ph.Err != nil || ph.Handshakes < 20 {
		t.Fatalf("phase %+v: want the guarded swap, every agent reconnecting twice, no failed handshake", ph)
	}
	if !strings.HasPrefix(ph.Readiness, "rotation complete: ") {
		t.Errorf("the guarded swap ended with readiness %q, want the rotation complete", ph.Readiness)
	}
}

func TestDemoReportsAnUnsafeRotation(t *testing.T) {
	res, out, err := run(t, BreakOneStepCA, false)
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

// requireTimelineShowsEveryPhase reads timeline.svg back: every phase has its mark
// and the marks of what happened in it (server reloads, bundle reloads, drains,
// forced reconnects, the refusal, the signing-key steps), and the bands show every
// certificate served and every CA set trusted.
func requireTimelineShowsEveryPhase(t *testing.T, res *Result) {
	t.Helper()
	svg, err := os.ReadFile(res.Timeline)
	if err != nil {
		t.Fatal(err)
	}
	els := parseSVG(t, string(svg))
	marks := map[string]map[MarkKind]int{}
	bands := map[string]bool{}
	for _, e := range els {
		if kind, ok := strings.CutPrefix(e.Class, "mark "); ok {
			if marks[e.Phase] == nil {
				marks[e.Phase] = map[MarkKind]int{}
			}
			marks[e.Phase][MarkKind(kind)]++
		}
		if strings.HasPrefix(e.Class, "band ") {
			bands[e.Class+": "+e.Label] = true
		}
	}
	for _, ph := range res.Phases {
		m := marks[ph.Name]
		if m[MarkPhase] != 1 {
			t.Errorf("timeline: phase %q has %d phase marks, want 1", ph.Name, m[MarkPhase])
		}
		want := map[MarkKind]int{}
		if ph.Reloads > 0 {
			want[MarkReload] = int(ph.Reloads)
		}
		if ph.BundleReloads > 0 {
			want[MarkBundleReload] = int(ph.BundleReloads)
		}
		if ph.Refused > 0 {
			want[MarkFailure] = int(ph.Refused)
		}
		if strings.Contains(ph.Moves, "drain") {
			want[MarkDrain] = 1
		}
		if strings.Contains(ph.Moves, "forced") {
			want[MarkForced] = 1
		}
		if ph.Name == "rotate JWT signing key" {
			want[MarkKeys] = 3
		}
		for kind, n := range want {
			if m[kind] < n {
				t.Errorf("timeline: phase %q has %d %s marks, want at least %d", ph.Name, m[kind], kind, n)
			}
		}
		if ph.Moves == movesDrain && m[MarkForced] != 0 {
			t.Errorf("timeline: phase %q moved agents by drain but shows %d forced reconnects", ph.Name, m[MarkForced])
		}
	}
	for _, want := range []string{"band served: cert 1 (CA 2025)", "band served: cert 3 (CA 2026)", "band trusted: trusts CA 2025",
		"band trusted: trusts CA 2025 + CA 2026", "band trusted: trusts CA 2026",
		"band issuer: issued by CA 2025", "band issuer: issued by CA 2026"} {
		if !bands[want] {
			t.Errorf("timeline lacks the %s (has %v)", want, bands)
		}
	}
	if note := texts(withClass(els, "legend-refused")); !strings.Contains(note, "cert 4 (CA 2026): never served") || !strings.Contains(note, "refused by replica-0") {
		t.Errorf("the legend does not say why cert 4 has no band: %q", note)
	}
	for b := range bands {
		if strings.Contains(b, "cert 4 ") { // cert 4 is the botched one: never served
			t.Errorf("timeline shows the botched certificate served: %s", b)
		}
	}
}

// A demo interrupted after its first phase claims only what it checked, and says
// so; its first line comes before any work (nothing in --out yet).
func TestInterruptedDemoClaimsOnlyWhatItChecked(t *testing.T) {
	out := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w := &watchWriter{dir: out, cancelOn: "renew server certificate", cancel: cancel}
	res, err := Run(ctx, Config{Out: out, Agents: 4, Short: true, Stdout: w, PhaseTimeout: 30 * time.Second})
	if err == nil || !strings.Contains(err.Error(), "interrupted") {
		t.Fatalf("an interrupted demo returned %v", err)
	}
	if w.firstSawFiles {
		t.Error("the first line came after the demo had started writing files: print before working")
	}
	text := w.String()
	if len(res.Phases) != 1 || len(res.NotRun) != 6 {
		t.Fatalf("%d phases ran, %d not run; want 1 and 6:\n%s", len(res.Phases), len(res.NotRun), text)
	}
	if strings.Contains(text, "every invariant held") || strings.Contains(text, "botched certificate never served") {
		t.Errorf("an interrupted demo claims what it never checked:\n%s", text)
	}
	if !strings.Contains(text, "interrupted: in the 1 phases that finished") || !strings.Contains(text, "not run, so not checked: CA step 1: union bundle") {
		t.Errorf("the summary does not say what was checked:\n%s", text)
	}
}

// A demo interrupted in its first phase, after a replica reloaded, reports no
// reload latency: the phase did not finish, so none of its measures count.
func TestInterruptedDemoCountsOnlyFinishedPhases(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out strings.Builder
	_, err := Run(ctx, Config{Out: t.TempDir(), Agents: 4, Short: true, Stdout: &out, PhaseTimeout: 30 * time.Second,
		NewLogger: func(w io.Writer) (*slog.Logger, error) {
			// Interrupted once a replica drains its agents: it reloaded (and its reload
			// latency was measured) before it drains.
			return slog.New(slog.NewTextHandler(&cancelOn{w: w, msg: "draining connections onto the new certificate", cancel: cancel}, nil)), nil
		}})
	if err == nil || !strings.Contains(err.Error(), "interrupted") {
		t.Fatalf("an interrupted demo returned %v", err)
	}
	if s := out.String(); !strings.Contains(s, "interrupted before the first phase finished") || strings.Contains(s, "reload latency") {
		t.Errorf("an interrupted demo reports the unfinished phase's reloads:\n%s", s)
	}
}

// cancelOn passes writes to w and cancels once one carries msg.
type cancelOn struct {
	w      io.Writer
	msg    string
	cancel context.CancelFunc
}

func (c *cancelOn) Write(p []byte) (int, error) {
	if strings.Contains(string(p), c.msg) {
		c.cancel()
	}
	return c.w.Write(p)
}

// watchWriter collects the demo's output, notes whether --out held files when the
// first line arrived, and cancels once a line names cancelOn.
type watchWriter struct {
	strings.Builder
	dir           string
	cancelOn      string
	cancel        context.CancelFunc
	wrote         bool
	firstSawFiles bool
}

func (w *watchWriter) Write(p []byte) (int, error) {
	if !w.wrote {
		w.wrote = true
		ents, _ := os.ReadDir(w.dir)
		w.firstSawFiles = len(ents) > 0
	}
	if strings.Contains(string(p), w.cancelOn) && strings.Contains(string(p), "ok (") {
		w.cancel()
	}
	return w.Builder.Write(p)
}

package demo

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

// The summary claims what the phases that ran checked and held, whatever they are
// named, and nothing else: a phase's claim travels with the phase, a phase whose
// run failed claims nothing of its own, and the invariants are claimed only for
// counts that were checked.
func TestSummaryClaimsOnlyWhatWasChecked(t *testing.T) {
	summary := func(res *Result) string {
		var out strings.Builder
		writeSummary(&out, res)
		return out.String()
	}

	s := &story{w: &world{}}
	var ran []PhaseResult
	for _, ph := range s.phases() {
		ph.name = "renamed: " + ph.name
		pr := PhaseResult{Name: ph.name}
		if b := check(ph, &pr); len(b) > 0 {
			t.Fatalf("%s: a phase with zero counts broke %v", ph.name, b)
		}
		ran = append(ran, pr)
	}
	want := "every invariant held: no failed handshake, no unexpected drop, no agent token refused, " +
		"the botched certificate never served, one log line and one count for it, " +
		"tokens of the removed signing key refused by every replica, every agent moved by the graceful drain, none dropped.\n"
	if out := summary(&Result{Phases: ran}); !strings.HasSuffix(out, want) {
		t.Errorf("renamed phases lost their claims; summary:\n%s\nwant it to end with:\n%s", out, want)
	}

	// A phase that is not safe checks nothing: its counts and its claim are not claimed.
	unsafe := PhaseResult{Name: "unsafe", Failures: 3}
	if b := check(phase{name: "unsafe", claim: "unsafe claim"}, &unsafe); len(b) > 0 || len(unsafe.Claims) > 0 {
		t.Errorf("a phase that is not safe broke %v, claimed %v; want nothing checked", b, unsafe.Claims)
	}
	if out := summary(&Result{Phases: []PhaseResult{unsafe}}); strings.Contains(out, "no failed handshake") || strings.Contains(out, "unsafe claim") ||
		!strings.Contains(out, "no invariant was checked in the phases that ran.") {
		t.Errorf("the summary claims what was not checked:\n%s", out)
	}

	// A safe phase claims the invariants that held, and its own claim only when its run succeeded.
	failed := PhaseResult{Name: "failed", Failures: 1, Err: errors.New("boom")}
	b := check(phase{name: "failed", safe: true, claim: "its claim"}, &failed)
	if !slices.Equal(failed.Claims, []string{"no unexpected drop", "no agent token refused"}) ||
		!slices.Equal(b, []string{"failed: boom", "failed: 1 failed handshakes (want 0)"}) {
		t.Errorf("a failed phase claimed %v, broke %v", failed.Claims, b)
	}
}

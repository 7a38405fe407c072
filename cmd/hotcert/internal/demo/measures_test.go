package demo

import (
	"slices"
	"strings"
	"testing"
	"time"
)

// Percentiles are nearest-rank: of a phase's two reloads (one per replica), p50 is
// the faster and p99 the slower, not one value twice.
func TestPercentileIsNearestRank(t *testing.T) {
	ms := time.Millisecond
	for _, tc := range []struct {
		d             []time.Duration
		p50, p99, max time.Duration
	}{
		{nil, 0, 0, 0},
		{[]time.Duration{7 * ms}, 7 * ms, 7 * ms, 7 * ms},
		{[]time.Duration{9 * ms, 3 * ms}, 3 * ms, 9 * ms, 9 * ms},
		{[]time.Duration{5 * ms, 1 * ms, 3 * ms}, 3 * ms, 5 * ms, 5 * ms},
	} {
		if p50, p99, mx := percentile(tc.d, 0.5), percentile(tc.d, 0.99), percentile(tc.d, 1); p50 != tc.p50 || p99 != tc.p99 || mx != tc.max {
			t.Errorf("%v: p50 %s, p99 %s, max %s; want %s, %s, %s", tc.d, p50, p99, mx, tc.p50, tc.p99, tc.max)
		}
	}
}

// A phase takes exactly the reloads measured while it ran, whichever replica
// reloaded, in the order they happened: not another phase's or another replica's.
func TestPhaseTakesOnlyItsOwnReloads(t *testing.T) {
	var lats series
	ms := time.Millisecond
	first := lats.mark()
	lats.add(1 * ms) // replica-0, phase 1
	lats.add(2 * ms) // replica-1, phase 1
	second := lats.mark()
	lats.add(30 * ms) // replica-0, phase 2
	lats.add(40 * ms) // replica-1, phase 2
	if got := lats.since(first)[:2]; !slices.Equal(got, []time.Duration{1 * ms, 2 * ms}) {
		t.Errorf("phase 1 took %v", got)
	}
	if got := lats.since(second); !slices.Equal(got, []time.Duration{30 * ms, 40 * ms}) {
		t.Errorf("phase 2 took %v, want its own two reloads", got)
	}
}

// An agent is not connected from the end of its stream to its next one; its first
// connection is no gap.
func TestGapsRunFromStreamEndToNextStream(t *testing.T) {
	g := newGaps()
	t0 := time.Unix(1_000_000, 0)
	g.connected("a", t0) // the first connection
	g.ended("a", t0.Add(time.Second))
	g.ended("b", t0.Add(time.Second))
	g.connected("b", t0.Add(1500*time.Millisecond))
	g.connected("a", t0.Add(3*time.Second))
	g.connected("a", t0.Add(4*time.Second)) // no stream ended before it: no gap
	if got := g.since(0); !slices.Equal(got, []time.Duration{500 * time.Millisecond, 2 * time.Second}) {
		t.Errorf("gaps %v, want 500ms and 2s", got)
	}
}

// The summary shows how long agents were not connected, and says which phases the
// machine's CPU bound (their gaps are waits for a core), and only those.
func TestSummarySaysWhenTheCPUSetThePace(t *testing.T) {
	ms := time.Millisecond
	calm := PhaseResult{Name: "calm phase", Gaps: []time.Duration{4 * ms, 6 * ms}, NotConnectedP50: 4 * ms, NotConnectedMax: 6 * ms, CPUWaitP50: ms / 10, CPUWaitP99: 2 * ms}
	busy := PhaseResult{Name: "busy phase", Gaps: []time.Duration{1500 * ms, 7000 * ms}, NotConnectedP50: 1500 * ms, NotConnectedMax: 7000 * ms, CPUWaitP50: 30 * ms, CPUWaitP99: 400 * ms}
	var out strings.Builder
	writeSummary(&out, &Result{Phases: []PhaseResult{calm}})
	if s := out.String(); !strings.Contains(s, "not connected p50/max") || !strings.Contains(s, "4.0ms / 6.0ms") || strings.Contains(s, "CPU-bound") {
		t.Errorf("a calm run's summary:\n%s", s)
	}
	out.Reset()
	writeSummary(&out, &Result{Phases: []PhaseResult{calm, busy}})
	s := out.String()
	if !strings.Contains(s, "1500.0ms / 7000.0ms (CPU-bound)") || !strings.Contains(s, "CPU-bound phases: the machine's CPU, not hotcert, set their pace") ||
		!strings.Contains(s, "  busy phase: CPU wait p50 30.0ms, p99 400.0ms\n") ||
		strings.Contains(s, "  calm phase: CPU wait") {
		t.Errorf("a CPU-bound phase is not said as such:\n%s", s)
	}
}

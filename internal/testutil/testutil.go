// Package testutil holds small helpers shared by hotcert's tests: a goroutine-safe
// log sink, an Observer that counts, a bounded condition poll, and ports for the
// programs tests start (FreePort).
package testutil

import (
	"bytes"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hotcert/hotcert"
)

// LogBuffer is a goroutine-safe io.Writer for slog handlers.
type LogBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write implements io.Writer.
func (b *LogBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

// String returns everything written so far.
func (b *LogBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// Count returns how many text-handler lines carry the message msg.
func (b *LogBuffer) Count(msg string) int { return strings.Count(b.String(), `msg="`+msg+`"`) }

// Observer is a hotcert.Observer that counts calls.
type Observer struct {
	mu       sync.Mutex
	initial  int
	loads    int
	failures []error
}

var _ hotcert.Observer = (*Observer)(nil)

// ObserveLoad implements hotcert.Observer.
func (o *Observer) ObserveLoad(_ string, _ *hotcert.Material, initial bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if initial {
		o.initial++
	} else {
		o.loads++
	}
}

// ObserveFailure implements hotcert.Observer.
func (o *Observer) ObserveFailure(_ string, err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.failures = append(o.failures, err)
}

// Loads returns the number of reloads (initial load excluded).
func (o *Observer) Loads() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.loads
}

// Failures returns the reported failures.
func (o *Observer) Failures() []error {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]error(nil), o.failures...)
}

// WaitFor polls cond every 2 ms until it holds, failing the test after 10 s. It
// waits for a condition, never for a fixed time.
func WaitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	WaitForWithin(t, 10*time.Second, what, cond)
}

// WaitForWithin is WaitFor failing the test after limit: for a condition that
// waits on a backoff of its own longer than WaitFor's 10 s.
func WaitForWithin(t testing.TB, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// ReportLatencies reports min, median and p99 of lat in milliseconds ("min-ms",
// "p50-ms", "p99-ms"), the figures of hotcert's latency benchmarks.
func ReportLatencies(b *testing.B, lat []time.Duration) {
	b.Helper()
	if len(lat) == 0 {
		b.Fatal("no latencies to report")
	}
	slices.Sort(lat)
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	b.ReportMetric(ms(lat[0]), "min-ms")
	b.ReportMetric(ms(lat[len(lat)/2]), "p50-ms")
	b.ReportMetric(ms(lat[len(lat)*99/100]), "p99-ms")
}

package drain

import (
	"crypto/x509"
	"math/rand/v2"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/hotcert/hotcert"
	"github.com/hotcert/hotcert/hotcerttest"
)

// benchTarget is a connection as the expiry drain sees it, without a socket.
type benchTarget struct{ peer []*x509.Certificate }

func (b *benchTarget) servedIdentity() *hotcert.Material { return nil }
func (b *benchTarget) peerChain() []*x509.Certificate    { return b.peer }
func (b *benchTarget) RemoteAddr() net.Addr              { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)} }
func (b *benchTarget) netConn() net.Conn                 { return nil }

// BenchmarkExpiryDrain10k plans the expiry drains of 10,000 connections whose
// client certificates share one NotAfter, and runs a fake clock through the window.
// It reports the planning cost per connection on the wall clock's timers against
// a bare time.AfterFunc per connection in the same run (ratio), and the largest
// number of drains in any second of the window as a multiple of N/W, for the
// sequence the drain uses and for uniform random offsets (the baseline). Goal:
// peak ≤ 1.5 × N/W, every connection drained once, before NotAfter − margin.
func BenchmarkExpiryDrain10k(b *testing.B) {
	const n = 10000
	const margin, window = time.Minute, 100 * time.Second
	ca := hotcerttest.MustNewCA()
	leaf := ca.MustIssue(hotcerttest.WithLifetime(time.Hour))
	targets := make([]target, n)
	for i := range targets {
		targets[i] = &benchTarget{peer: []*x509.Certificate{leaf.Cert}}
	}
	for range b.N {
		// Planning cost on the wall clock, and its baseline.
		cfg := defaultConfig()
		cfg.expiry = &expiryConfig{margin: margin, window: window}
		e := newExpiry(&cfg, func(target, string) bool { return true })
		start := time.Now()
		for _, t := range targets {
			e.schedule(t, t.peerChain())
		}
		planNs := float64(time.Since(start).Nanoseconds()) / n
		e.close()
		stops := make([]*time.Timer, n)
		start = time.Now()
		for i := range stops {
			stops[i] = time.AfterFunc(time.Hour, func() {})
		}
		baseNs := float64(time.Since(start).Nanoseconds()) / n
		for _, t := range stops {
			t.Stop()
		}

		// The drains on a fake clock, counted per second of the window from the schedule.
		now := leaf.Cert.NotAfter.Add(-margin - window - time.Minute)
		clk := hotcerttest.NewFakeClock(now)
		cfg = defaultConfig()
		cfg.expiry, cfg.clock = &expiryConfig{margin: margin, window: window}, clk
		var wg sync.WaitGroup
		e = newExpiry(&cfg, func(target, string) bool { wg.Done(); return true })
		wg.Add(n)
		for _, t := range targets {
			e.schedule(t, t.peerChain())
		}
		perSecond := map[int]int{}
		late := 0
		for _, at := range e.pending() { // the schedule: when each drain is due
			perSecond[int(at.Sub(leaf.Cert.NotAfter.Add(-margin-window))/time.Second)]++
			if at.After(leaf.Cert.NotAfter.Add(-margin)) {
				late++
			}
		}
		clk.Advance(time.Minute)
		for range int(window / time.Second) {
			clk.Advance(time.Second)
		}
		wg.Wait() // every connection drained
		peak := 0
		for _, c := range perSecond {
			peak = max(peak, c)
		}
		// Baseline: uniform random offsets over the same window.
		random := map[int]int{}
		randomPeak := 0
		for range n {
			k := int(rand.Float64() * window.Seconds())
			random[k]++
			randomPeak = max(randomPeak, random[k])
		}
		rate := float64(n) / window.Seconds()
		b.ReportMetric(planNs, "plan-ns/conn")
		b.ReportMetric(planNs/baseNs, "plan/afterfunc")
		b.ReportMetric(float64(peak)/rate, "peak/(N/W)")
		b.ReportMetric(float64(randomPeak)/rate, "random-peak/(N/W)")
		b.ReportMetric(float64(late), "late-drains")
	}
}

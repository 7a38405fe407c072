package controlplane_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hotcert/hotcert"
	"github.com/hotcert/hotcert/cmd/hotcert/internal/controlplane"
	"github.com/hotcert/hotcert/grpccreds"
	"github.com/hotcert/hotcert/hotcerttest"
	"github.com/hotcert/hotcert/tlsconfig"
)

const (
	// scaleExpiry is the server kind of BenchmarkScaleExpiry: the control plane
	// with mTLS, tokens and DrainBeforeExpiry on an expiry clock the benchmark
	// moves (the pace command).
	scaleExpiry = "cpexpiry"
	// scaleExpiryMargin is its DrainBeforeExpiry.
	scaleExpiryMargin = time.Minute
)

// BenchmarkScaleExpiry lets the client certificates of N agents, all sharing one
// NotAfter, come up to their expiry while the agents hold their streams to a
// control plane replica (DrainBeforeExpiry 1m, DrainWindow W; in a child process
// as in BenchmarkScaleAgents). The agents' certificate is renewed (a new one in
// their store, which they present at their next handshake) but nothing makes them
// reconnect: the replica's expiry drain must move each of them, within W before
// NotAfter − 1m. The replica's expiry clock is frozen while the agents connect and
// then set to NotAfter − 1m − W, from where it runs at the wall clock's pace, so
// the window passes in W of real time without waiting for the certificates' real
// lifetime.
//
// It reports the peak number of reconnects (TLS handshakes completed by agents) in
// any one second as a multiple of N/W (goal ≤ 1.5) and, beside it, that of the
// drains the replica began (when its expiry timers fired: the schedule as the
// replica ran it, before any handshake's latency), failed stream opens and streams
// lost with an error (goal 0 and 0), the reconnects in all (N: each agent once),
// how long after the window's start the last one came and every agent held a stream
// again, and how many agents the replica sees on the renewed certificate (the
// serial of their connection's verified client certificate; goal N).
//
// Sizes as BenchmarkScaleAgents (-short: 100 agents), W as BenchmarkScaleRotation's
// (1k: 5 s, 10k: 50 s). With HOTCERT_SCALE_TSV=DIR each size updates its row of
// DIR/expiry-scale.tsv.
func BenchmarkScaleExpiry(b *testing.B) {
	for _, n := range scaleSizes(b) {
		b.Run(fmt.Sprintf("agents=%d", n), func(b *testing.B) {
			if err := raiseNoFile(uint64(n) + 512); err != nil {
				b.Skip(err)
			}
			window := scaleDrainWindow(n)
			var r expiryResult
			loadBefore := loadAverage()
			for range b.N {
				r = runExpiry(b, n, window)
			}
			b.Logf("machine load average (1, 5, 15 min) before: %s, after: %s", loadBefore, loadAverage())
			rate := float64(n) / window.Seconds()
			b.Logf("%d agents sharing one NotAfter, drain window %s (N/W = %.0f/s): peak %d reconnects/s (%.2f × N/W; the replica's drains: peak %d/s, %.2f × N/W), %d reconnects, last %s and all back %s after the window's start; %d failed stream opens, %d lost streams; %d on the renewed certificate\nreconnects per second: %v\ndrains per second:     %v",
				n, window, rate, r.peak, float64(r.peak)/rate, r.drainPeak(), float64(r.drainPeak())/rate, r.reconnects, r.lastReconnect.Round(time.Millisecond), r.allBack.Round(time.Millisecond),
				r.failures, r.losses, r.renewed, r.perSecond, r.drainsPerSecond)
			b.ReportMetric(window.Seconds(), "window-s")
			b.ReportMetric(float64(r.peak), "peak/s")
			b.ReportMetric(float64(r.peak)/rate, "peak-x")
			b.ReportMetric(float64(r.drainPeak())/rate, "drain-peak-x")
			b.ReportMetric(float64(r.reconnects), "reconnects")
			b.ReportMetric(r.lastReconnect.Seconds(), "last-reconnect-s")
			b.ReportMetric(r.allBack.Seconds(), "allback-s")
			b.ReportMetric(float64(r.failures+r.losses), "failed-rpcs")
			b.ReportMetric(float64(r.renewed), "renewed")
			writeScaleTSV(b, "expiry-scale.tsv", expiryTSVHeader, n, map[string]string{
				"window_s":         fmtFloat(window.Seconds(), 0),
				"n_per_w":          fmtFloat(rate, 0),
				"peak_per_s":       strconv.Itoa(r.peak),
				"peak_x":           fmtFloat(float64(r.peak)/rate, 2),
				"drain_peak_per_s": strconv.Itoa(r.drainPeak()),
				"drain_peak_x":     fmtFloat(float64(r.drainPeak())/rate, 2),
				"reconnects":       strconv.Itoa(r.reconnects),
				"last_reconnect_s": fmtFloat(r.lastReconnect.Seconds(), 1),
				"allback_s":        fmtFloat(r.allBack.Seconds(), 1),
				"failures":         strconv.FormatInt(r.failures, 10),
				"losses":           strconv.FormatInt(r.losses, 10),
				"renewed":          strconv.Itoa(r.renewed),
			})
			if r.failures != 0 || r.losses != 0 {
				b.Errorf("%d failed stream opens and %d lost streams, want 0 (first: %v)", r.failures, r.losses, r.firstErr)
			}
			if r.renewed != n {
				b.Errorf("%d of %d agents on the renewed certificate", r.renewed, n)
			}
		})
	}
}

// expiryTSVHeader is docs/data/expiry-scale.tsv's.
var expiryTSVHeader = []string{"agents", "window_s", "n_per_w", "peak_per_s", "peak_x", "drain_peak_per_s", "drain_peak_x", "reconnects",
	"last_reconnect_s", "allback_s", "failures", "losses", "renewed"}

type expiryResult struct {
	phaseResult
	drainsPerSecond []int // expiry drains begun by the replica in each second from the window's start
	renewed         int   // agents the replica sees on the renewed certificate
}

// drainPeak is the largest number of drains begun in one second.
func (r expiryResult) drainPeak() int { return slices.Max(append(r.drainsPerSecond, 0)) }

func runExpiry(b *testing.B, n int, window time.Duration) expiryResult {
	b.Helper()
	pki := newScalePKI(b, true)
	now := time.Now()
	// One NotAfter for every agent, hours away on the wall clock (so that every
	// handshake verifies); the replica's expiry clock is moved there.
	expiring := pki.ca.MustIssue(hotcerttest.WithCommonName("agent"), hotcerttest.WithValidity(now.Add(-time.Minute), now.Add(3*time.Hour)))
	renewed := pki.ca.MustIssue(hotcerttest.WithCommonName("agent"))
	srv := startScaleServer(b, pki, scaleExpiry, n, scaleEnvWindow+"="+window.String())
	defer srv.stop(b)
	store := hotcert.NewStore(pki.clientMaterial(b, expiring))
	var log openLog
	agents, stopAgents := startRotationAgents(b, srv.addr, grpccreds.NewClient(store, tlsconfig.WithServerName("localhost")), readTokens(b, pki), &log)
	defer stopAgents()
	before := make([]int64, n)
	for i, a := range agents {
		before[i] = a.opens.Load()
	}

	store.Set(pki.clientMaterial(b, renewed)) // renewed before the window: the next handshake presents it
	start := time.Now()
	srv.ask(b, "pace "+expiring.Cert.NotAfter.Add(-scaleExpiryMargin-window).Format(time.RFC3339Nano), "paced")
	waitAll(b, "every agent back after its expiry drain", window+5*time.Minute, func() bool {
		for i, a := range agents {
			if a.streamFP.Load() == nil || a.opens.Load() <= before[i] {
				return false
			}
		}
		return true
	})
	r := expiryResult{phaseResult: log.phase(start)}
	r.allBack = time.Since(start)
	if err := json.Unmarshal([]byte(srv.ask(b, "drains", "drains")), &r.drainsPerSecond); err != nil {
		b.Fatal(err)
	}
	var serials map[string]int
	if err := json.Unmarshal([]byte(srv.ask(b, "serials", "serials")), &serials); err != nil {
		b.Fatal(err)
	}
	r.renewed = serials[hotcert.FormatSerial(renewed.Cert.SerialNumber)]
	return r
}

// loadAverage is the machine's load average as /proc/loadavg gives it (the drain's
// spread on the wall clock depends on the replica getting the CPU it needs).
func loadAverage() string {
	data, err := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(data)); err == nil && len(f) >= 3 {
		return strings.Join(f[:3], " ")
	}
	return "unknown"
}

// drainClock is scaleExpiry's expiry clock: a FakeClock that records, on the wall
// clock, when each of its timers fires (each one is a connection's expiry drain).
type drainClock struct {
	*hotcerttest.FakeClock

	mu     sync.Mutex
	paced  time.Time   // when the pace command set it
	drains []time.Time // when its timers fired
}

func (c *drainClock) AfterFunc(d time.Duration, f func()) func() bool {
	return c.FakeClock.AfterFunc(d, func() {
		c.mu.Lock()
		c.drains = append(c.drains, time.Now())
		c.mu.Unlock()
		f()
	})
}

// expiryCommand answers, in the server process, the commands of scaleExpiry:
//
//   - "pace T" sets the expiry clock clk to T (RFC 3339) and lets it run from
//     there at the wall clock's pace, in steps of 10 ms, until ctx ends;
//   - "drains" answers how many expiry drains began in each second since then,
//     as JSON;
//   - "serials" answers the number of registered agents per client certificate
//     serial, as JSON.
//
// ok is false for any other command.
func expiryCommand(ctx context.Context, t failer, cp *controlplane.Server, clk *drainClock, cmd, arg string) (answer string, ok bool) {
	switch {
	case cmd == "pace" && clk != nil:
		at, err := time.Parse(time.RFC3339Nano, arg)
		if err != nil {
			t.Fatal(err)
		}
		clk.mu.Lock()
		clk.paced = time.Now()
		clk.mu.Unlock()
		clk.Advance(at.Sub(clk.Now()))
		go func() {
			tick := time.NewTicker(10 * time.Millisecond)
			defer tick.Stop()
			last := time.Now()
			for {
				select {
				case <-ctx.Done():
					return
				case now := <-tick.C:
					clk.Advance(now.Sub(last))
					last = now
				}
			}
		}()
		return "paced", true
	case cmd == "drains" && clk != nil:
		clk.mu.Lock()
		perSecond := countPerSecond(clk.drains, clk.paced)
		clk.mu.Unlock()
		data, err := json.Marshal(perSecond)
		if err != nil {
			t.Fatal(err)
		}
		return "drains " + string(data), true
	case cmd == "serials" && cp != nil:
		serials := map[string]int{}
		for _, a := range cp.Agents() {
			serials[a.ClientSerial]++
		}
		data, err := json.Marshal(serials)
		if err != nil {
			t.Fatal(err)
		}
		return "serials " + string(data), true
	}
	return "", false
}

package drain_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"

	"github.com/hotcert/hotcert"
	"github.com/hotcert/hotcert/drain"
	"github.com/hotcert/hotcert/grpccreds"
	"github.com/hotcert/hotcert/hotcerttest"
	"github.com/hotcert/hotcert/internal/testutil"
	"github.com/hotcert/hotcert/metrics"
)

const (
	expiryMargin = time.Minute
	expiryWindow = 10 * time.Second
)

// expiryFixture serves m with the expiry drain on a fake clock, counting drains.
func expiryFixture(t testing.TB, m *hotcert.Material, clk *hotcerttest.FakeClock) (*fixture, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	dm, err := metrics.NewDrain(reg)
	if err != nil {
		t.Fatal(err)
	}
	f := newFixture(t, m, func(s *hotcert.Store) []drain.Option {
		return []drain.Option{drain.WithExpiryDrain(s, expiryMargin, expiryWindow), drain.WithClock(clk), drain.WithObserver(dm), drain.WithGrace(10 * time.Second)}
	})
	return f, reg
}

// dialStore is dial with the client's material in a store the test can renew.
func dialStore(t testing.TB, f *fixture, s *hotcert.Store) *agent {
	t.Helper()
	cc, err := grpc.NewClient(f.addr, grpc.WithTransportCredentials(grpccreds.NewClient(s)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return &agent{cc: cc, serials: make(chan string, 100)}
}

func drained(t *testing.T, reg *prometheus.Registry, reason string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "hotcert_tls_connections_drained_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "reason" && l.GetValue() == reason {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}

func TestExpiryDrainEndsAStreamBeforeItsClientCertificateExpires(t *testing.T) {
	now := time.Now()
	clk := hotcerttest.NewFakeClock(now)
	ca := hotcerttest.MustNewCA()
	notAfter := now.Add(time.Hour)
	f, reg := expiryFixture(t, material(t, ca.MustIssue(hotcerttest.WithLifetime(24*time.Hour)), ca), clk)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	expiringLeaf := ca.MustIssue(hotcerttest.WithCommonName("agent-expiring"), hotcerttest.WithValidity(now.Add(-time.Hour), notAfter))
	notAfter = expiringLeaf.Cert.NotAfter // as encoded: to the second
	expiring := dial(t, f, expiringLeaf, ca)
	other := dial(t, f, ca.MustIssue(hotcerttest.WithCommonName("agent-other"), hotcerttest.WithLifetime(24*time.Hour)), ca)
	for _, a := range []*agent{expiring, other} {
		wg.Go(func() { a.watch(ctx) })
		<-a.serials
	}
	testutil.WaitFor(t, "both connections' expiry drains planned", func() bool { return len(f.srv.ExpiryPending()) == 2 })

	// Up to the window's start nothing is drained.
	clk.Advance(notAfter.Add(-expiryMargin - expiryWindow - time.Second).Sub(now))
	if got := len(f.srv.ExpiryPending()); got != 2 {
		t.Fatalf("%d drains pending before the window, want 2", got)
	}
	// Past the window's end the expiring agent was drained: its stream ended
	// cleanly and it re-opened it (its certificate is still valid for a minute).
	clk.Advance(expiryWindow + time.Second)
	select {
	case <-expiring.serials:
	case <-time.After(10 * time.Second):
		t.Fatal("the stream of the expiring certificate was not ended before its NotAfter")
	}
	testutil.WaitFor(t, "the drain to be counted", func() bool { return drained(t, reg, drain.ReasonPeerCertExpiring) == 1 })
	if !strings.Contains(f.logs.String(), "CN=agent-expiring") || strings.Contains(f.logs.String(), "CN=agent-other") {
		t.Errorf("wrong connection drained:\n%s", f.logs.String())
	}
	select {
	case s := <-other.serials:
		t.Fatalf("the agent whose certificate is valid was disconnected (re-opened on %s)", s)
	default:
	}
	if n := expiring.failures.Load() + other.failures.Load(); n != 0 {
		t.Fatalf("%d streams failed", n)
	}
	// The reconnect within the margin is planned halfway to the expiry, not at once.
	testutil.WaitFor(t, "the reconnected stream's drain to be planned", func() bool { return len(f.srv.ExpiryPending()) == 2 })
	half := clk.Now().Add(notAfter.Sub(clk.Now()) / 2)
	var soon []time.Time
	for _, at := range f.srv.ExpiryPending() {
		if at.Before(notAfter) {
			soon = append(soon, at)
		}
	}
	if len(soon) != 1 || soon[0].After(half) || soon[0].Before(half.Add(-expiryWindow)) {
		t.Errorf("drains planned before the NotAfter %s: %v, want one within the window before halfway there (%s)", notAfter, soon, half)
	}
}

func TestExpiryDrainEndsConnectionsBeforeTheServedLeafExpires(t *testing.T) {
	now := time.Now()
	clk := hotcerttest.NewFakeClock(now)
	ca := hotcerttest.MustNewCA()
	notAfter := now.Add(time.Hour)
	leaf := ca.MustIssue(hotcerttest.WithValidity(now.Add(-time.Hour), notAfter))
	notAfter = leaf.Cert.NotAfter
	f, reg := expiryFixture(t, material(t, leaf, ca), clk)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	agents := []*agent{dial(t, f, ca.MustIssue(hotcerttest.WithLifetime(24*time.Hour)), ca), dial(t, f, ca.MustIssue(hotcerttest.WithLifetime(24*time.Hour)), ca)}
	for _, a := range agents {
		wg.Go(func() { a.watch(ctx) })
		<-a.serials
	}
	testutil.WaitFor(t, "the expiry drains planned", func() bool { return len(f.srv.ExpiryPending()) == 2 })
	// The leaf is renewed, with no identity drain: only the expiry moves the
	// connections onto it.
	renewed := ca.MustIssue(hotcerttest.WithLifetime(24 * time.Hour))
	f.store.Set(material(t, renewed, ca))
	clk.Advance(notAfter.Add(-expiryMargin).Sub(now))
	for i, a := range agents {
		select {
		case s := <-a.serials:
			if s != renewed.Cert.SerialNumber.String() {
				t.Errorf("agent %d re-opened on serial %s, want the renewed %s", i, s, renewed.Cert.SerialNumber)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("agent %d was not moved off the expiring leaf", i)
		}
	}
	testutil.WaitFor(t, "the drains to be counted", func() bool { return drained(t, reg, drain.ReasonOwnCertExpiring) == 2 })
	if n := agents[0].failures.Load() + agents[1].failures.Load(); n != 0 {
		t.Fatalf("%d streams failed", n)
	}
}

func TestExpiryDrainSpreadsOneNotAfterOverTheWindow(t *testing.T) {
	const n = 100
	now := time.Now()
	clk := hotcerttest.NewFakeClock(now)
	ca := hotcerttest.MustNewCA()
	notAfter := now.Add(time.Hour)
	f, reg := expiryFixture(t, material(t, ca.MustIssue(hotcerttest.WithLifetime(24*time.Hour)), ca), clk)
	// Every agent holds a certificate of the same NotAfter (a fleet issued at once).
	clientLeaf := ca.MustIssue(hotcerttest.WithValidity(now.Add(-time.Hour), notAfter))
	notAfter = clientLeaf.Cert.NotAfter
	clientCert := hotcert.NewStore(material(t, clientLeaf, ca))
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	agents := make([]*agent, n)
	for i := range agents {
		agents[i] = dialStore(t, f, clientCert)
		wg.Go(func() { agents[i].watch(ctx) })
	}
	for _, a := range agents {
		<-a.serials
	}
	testutil.WaitFor(t, "every expiry drain planned", func() bool { return len(f.srv.ExpiryPending()) == n })

	// The schedule: every drain within [NotAfter-margin-W, NotAfter-margin], at
	// most 1.5 N/W in any second.
	start, end := notAfter.Add(-expiryMargin-expiryWindow), notAfter.Add(-expiryMargin)
	buckets := map[int]int{}
	for _, at := range f.srv.ExpiryPending() {
		if at.Before(start) || at.After(end) {
			t.Fatalf("drain planned at %s, outside the window [%s, %s]", at, start, end)
		}
		buckets[int(at.Sub(start)/time.Second)]++
	}
	limit := 1.5 * n / expiryWindow.Seconds()
	for b, c := range buckets {
		if float64(c) > limit {
			t.Errorf("%d drains in second %d of the window, more than 1.5 N/W = %.0f", c, b, limit)
		}
	}

	// The agents' certificate is renewed; the clock runs through the window and
	// every agent moves onto the renewed one, without a failed RPC.
	clientCert.Set(material(t, ca.MustIssue(hotcerttest.WithLifetime(24*time.Hour)), ca))
	clk.Advance(start.Sub(now))
	for range int(expiryWindow / time.Second) {
		clk.Advance(time.Second)
	}
	for i, a := range agents {
		select {
		case <-a.serials:
		case <-time.After(20 * time.Second):
			t.Fatalf("agent %d was not drained within the window", i)
		}
	}
	testutil.WaitFor(t, "every drain counted", func() bool { return drained(t, reg, drain.ReasonPeerCertExpiring) == n })
	var failures int64
	for _, a := range agents {
		failures += a.failures.Load()
	}
	if failures != 0 {
		t.Fatalf("%d failed RPCs during the expiry drain", failures)
	}
	// The reconnected streams run on the renewed certificate: their drains are a day away.
	testutil.WaitFor(t, "the renewed connections' drains planned", func() bool { return len(f.srv.ExpiryPending()) == n })
	for _, at := range f.srv.ExpiryPending() {
		if at.Before(now.Add(23 * time.Hour)) {
			t.Fatalf("a reconnected stream's drain is planned at %s: it did not present the renewed certificate", at)
		}
	}
}

func TestHTTPExpiryDrainClosesAConnectionBeforeItsClientCertificateExpires(t *testing.T) {
	for _, h2 := range []bool{true, false} {
		name := "HTTP/1.1"
		if h2 {
			name = "HTTP/2"
		}
		t.Run(name, func(t *testing.T) {
			now := time.Now()
			clk := hotcerttest.NewFakeClock(now)
			ca := hotcerttest.MustNewCA()
			f := newHTTPFixture(t, material(t, ca.MustIssue(hotcerttest.WithLifetime(24*time.Hour)), ca), true, func(s *hotcert.Store) []drain.Option {
				return []drain.Option{drain.WithExpiryDrain(s, expiryMargin, expiryWindow), drain.WithClock(clk), drain.WithGrace(5 * time.Second)}
			})
			leaf := ca.MustIssue(hotcerttest.WithValidity(now.Add(-time.Hour), now.Add(time.Hour)))
			c := httpClient(t, h2, ca, leaf)
			if _, _, err := get(t, c, f.url); err != nil {
				t.Fatal(err)
			}
			testutil.WaitFor(t, "the expiry drain planned", func() bool { return clk.Waiting() == 1 })
			if _, reused, err := get(t, c, f.url); err != nil || !reused {
				t.Fatalf("second request before the window: reused %v, %v; want the same connection", reused, err)
			}
			clk.Advance(leaf.Cert.NotAfter.Add(-expiryMargin).Sub(now))
			// An idle HTTP/1 connection is closed at once; an HTTP/2 one gets a GOAWAY
			// with its next response.
			testutil.WaitFor(t, "the connection to be replaced", func() bool {
				_, _, err := get(t, c, f.url)
				if err != nil {
					t.Fatalf("a request failed during the drain: %v", err)
				}
				return f.conns.Load() == 2
			})
			if !strings.Contains(f.logs.String(), "draining connection before its certificate expires") {
				t.Errorf("no drain line:\n%s", f.logs.String())
			}
		})
	}
}

package spiffe_test

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"log/slog"
	"math/big"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spiffe/go-spiffe/v2/svid/x509svid"
	"github.com/spiffe/go-spiffe/v2/workloadapi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"

	"github.com/hotcert/hotcert"
	"github.com/hotcert/hotcert/internal/spiretest"
	"github.com/hotcert/hotcert/internal/testutil"
	"github.com/hotcert/hotcert/metrics"
	"github.com/hotcert/hotcert/source/spiffe"
	"github.com/hotcert/hotcert/tlsconfig"
)

// fastRetry is go-spiffe's stream retry with a short constant interval instead of
// its 1s..30s linear backoff, so the test sees the agent come back at once.
type fastRetry time.Duration

func (f fastRetry) NewBackoff() workloadapi.Backoff { return f }
func (f fastRetry) Next() time.Duration             { return time.Duration(f) }
func (fastRetry) Reset()                            {}

// TestSPIREFollowsRotationAndAgentRestart runs a real SPIRE server and agent: an
// unregistered workload reads as missing; once registered, the Reloader serves the workload's SVID over mutual TLS, follows the agent's
// rotations of a short-lived SVID, keeps the last good SVID serving while the agent
// is gone (one log line, one failure, however many reads), and recovers when the
// agent is back.
func TestSPIREFollowsRotationAndAgentRestart(t *testing.T) {
	sp := spiretest.Start(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	reg := prometheus.NewRegistry()
	rec, err := metrics.New(reg)
	if err != nil {
		t.Fatal(err)
	}
	var logs testutil.LogBuffer
	src, err := spiffe.New(ctx, spiffe.WithAddr("unix://"+sp.AgentSock), spiffe.WithClientOptions(
		workloadapi.WithBackoffStrategy(fastRetry(100*time.Millisecond)),
		workloadapi.WithDialOptions(grpc.WithConnectParams(grpc.ConnectParams{
			Backoff: backoff.Config{BaseDelay: 50 * time.Millisecond, Multiplier: 1.6, MaxDelay: 200 * time.Millisecond}})),
	))
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	if want := "SPIFFE Workload API unix://" + sp.AgentSock; src.String() != want {
		t.Fatalf("String() = %q, want %q", src, want)
	}
	// Before the workload has a registration entry, the agent issues nothing.
	waitUntil(t, 30*time.Second, "the agent to answer that it issued nothing", func() bool {
		_, err := src.Read(ctx)
		return hotcert.ReasonOf(err) == hotcert.ReasonMissing && strings.Contains(err.Error(), "no X.509-SVID issued to this workload")
	})
	sp.RegisterWorkload()

	// No polling: every re-read after the first load comes from Watch.
	r, err := hotcert.New(ctx, src, hotcert.WithComponent("spiffe"), hotcert.WithObserver(rec),
		hotcert.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))),
		hotcert.WithInitialWait(time.Minute), // the agent syncs the new entry within a second or so
		hotcert.WithSettle(0), hotcert.WithPollInterval(0),
		hotcert.WithValidation(hotcert.WithRequireIdentity(), hotcert.WithRequireTrust(), hotcert.WithChainToOwnTrust()))
	if err != nil {
		t.Fatalf("first load: %v\nagent log:\n%s", err, sp.AgentLog())
	}
	started := make(chan error, 1)
	go func() { started <- r.Start(ctx) }()
	defer func() {
		_ = r.Close()
		if err := <-started; err != nil {
			t.Error(err)
		}
	}()

	m := r.Current()
	if uris := m.Leaf().URIs; len(uris) != 1 || uris[0].String() != spiretest.WorkloadID {
		t.Fatalf("serving %v, want the SVID %s", uris, spiretest.WorkloadID)
	}
	if !strings.Contains(m.Source(), spiretest.WorkloadID) {
		t.Fatalf("Material.Source() = %q does not name the SPIFFE ID", m.Source())
	}

	// A picker chooses among the workload's SVIDs; choosing none is a clear error.
	for _, tc := range []struct {
		pick func([]*x509svid.SVID) *x509svid.SVID
		want string
	}{
		{func([]*x509svid.SVID) *x509svid.SVID { return nil }, "none of the workload's 1 X.509-SVIDs was chosen"},
		{func(s []*x509svid.SVID) *x509svid.SVID { return s[len(s)-1] }, ""},
	} {
		picked, err := spiffe.New(ctx, spiffe.WithAddr("unix://"+sp.AgentSock), spiffe.WithSVIDPicker(tc.pick))
		if err != nil {
			t.Fatal(err)
		}
		c, err := picked.Read(ctx)
		picked.Close()
		switch {
		case tc.want != "" && (hotcert.ReasonOf(err) != hotcert.ReasonMissing || !strings.Contains(err.Error(), tc.want)):
			t.Fatalf("picker choosing nothing: %v, want %q", err, tc.want)
		case tc.want == "" && err != nil:
			t.Fatalf("picker choosing the last SVID: %v", err)
		case tc.want == "" && !strings.Contains(c.Cert.Name, spiretest.WorkloadID):
			t.Fatalf("picker choosing the last SVID read %q", c.Cert.Name)
		}
	}

	// The SVID serves mutual TLS both ways: the server presents it, the client
	// presents it, each verifies the other against the trust domain's bundle.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go serveTLS(ln, tlsconfig.MTLSServerConfig(r))
	dialer := tlsconfig.NewDialer(r)
	addr := net.JoinHostPort("localhost", portOf(ln)) // the SVID's DNS SAN
	served := func(step string) *big.Int {
		t.Helper()
		dctx, dcancel := context.WithTimeout(ctx, 10*time.Second)
		defer dcancel()
		conn, err := dialer.DialContext(dctx, "tcp", addr)
		if err != nil {
			t.Fatalf("%s: handshake: %v", step, err)
		}
		defer conn.Close()
		buf := make([]byte, 2)
		if _, err := io.ReadFull(conn, buf); err != nil {
			t.Fatalf("%s: the server refused the client's SVID: %v", step, err)
		}
		return conn.(*tls.Conn).ConnectionState().PeerCertificates[0].SerialNumber
	}
	if got := served("first SVID"); got.Cmp(m.Leaf().SerialNumber) != 0 {
		t.Fatalf("served serial %x, want %x", got, m.Leaf().SerialNumber)
	}

	// Rotation: the agent renews the 20s SVID at its half-life, the stream
	// delivers it, the Reloader serves it.
	first := m.Leaf().SerialNumber
	waitUntil(t, time.Minute, "the agent to rotate the SVID", func() bool {
		return r.Current().Leaf().SerialNumber.Cmp(first) != 0
	})
	// (It may rotate once more before the handshake: it must not be the first.)
	if got := served("rotated SVID"); got.Cmp(first) == 0 {
		t.Fatalf("still serving the first SVID %x after the rotation", first)
	}
	reloads := counter(t, reg, "hotcert_tls_cert_reload_total", "success")
	if want := float64(r.Current().Generation() - 1); reloads < 1 || reloads > want {
		t.Fatalf("%v reloads counted for %d generations", reloads, r.Current().Generation())
	}
	if n := logs.Count("TLS certificate reload failed"); n != 0 {
		t.Fatalf("%d failures logged before the agent went away:\n%s", n, logs.String())
	}

	// The agent goes away: the last good SVID keeps serving, and the outage is
	// one failure however often the source is read.
	sp.StopAgent()
	waitUntil(t, 30*time.Second, "the outage to be reported", func() bool { return r.Status().Failures > 0 })
	lastGood := r.Current()
	if got := served("agent gone"); got.Cmp(lastGood.Leaf().SerialNumber) != 0 {
		t.Fatalf("agent gone: served %x, want the last good SVID %x", got, lastGood.Leaf().SerialNumber)
	}
	for range 5 {
		err := r.Reload(ctx)
		if hotcert.ReasonOf(err) != hotcert.ReasonRead || !strings.Contains(err.Error(), "the Workload API is unavailable") {
			t.Fatalf("reading without an agent: %v (reason %q)", err, hotcert.ReasonOf(err))
		}
	}
	if st := r.Status(); st.Failures != 1 || st.LastError == nil {
		t.Fatalf("after 5 more reads: %d failures (last %v), want the outage counted once", st.Failures, st.LastError)
	}
	if n := logs.Count("TLS certificate reload failed"); n != 1 {
		t.Fatalf("%d failure lines logged for one outage, want 1:\n%s", n, logs.String())
	}
	if n := counter(t, reg, "hotcert_tls_reload_failures_total", ""); n != 1 {
		t.Fatalf("failure counter %v for one outage, want 1", n)
	}

	// The agent comes back (its own SVID from disk, no new token): the stream
	// reconnects, the failure clears, and SVIDs flow again.
	sp.StartAgent()
	waitUntil(t, time.Minute, "the source to recover", func() bool {
		st := r.Status()
		return st.LastError == nil && r.Current() != lastGood
	})
	back := r.Current()
	if got := served("agent back"); got.Cmp(lastGood.Leaf().SerialNumber) == 0 {
		t.Fatalf("agent back: still serving the SVID of before the outage")
	}
	waitUntil(t, time.Minute, "a rotation after the restart", func() bool {
		return r.Current().Leaf().SerialNumber.Cmp(back.Leaf().SerialNumber) != 0
	})
	if st := r.Status(); st.Failures != 1 {
		t.Fatalf("%d failures after the recovery, want the one outage", st.Failures)
	}
	if n := counter(t, reg, "hotcert_tls_reload_failures_total", ""); n != 1 {
		t.Fatalf("failure counter %v after the recovery, want 1", n)
	}
	if s := logs.String(); strings.Contains(s, "PRIVATE KEY") {
		t.Fatalf("key material in the logs:\n%s", s)
	}
	t.Logf("generations served: %d; reloads counted: %v; failures: %d",
		r.Current().Generation(), counter(t, reg, "hotcert_tls_cert_reload_total", "success"), r.Status().Failures)
}

// serveTLS accepts connections, completes each handshake and writes "ok".
func serveTLS(ln net.Listener, cfg *tls.Config) {
	for {
		raw, err := ln.Accept()
		if err != nil {
			return
		}
		go func() {
			defer raw.Close()
			_ = raw.SetDeadline(time.Now().Add(10 * time.Second))
			c := tls.Server(raw, cfg)
			if c.Handshake() == nil {
				_, _ = c.Write([]byte("ok"))
				_, _ = io.Copy(io.Discard, c)
			}
		}()
	}
}

func portOf(ln net.Listener) string {
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	return port
}

// waitUntil polls cond until it holds, failing after limit. It waits for an
// event, never for a fixed time.
func waitUntil(t *testing.T, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", limit, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// counter returns the value of the counter name{component="spiffe"[,result]}.
func counter(t *testing.T, reg *prometheus.Registry, name, result string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	series:
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "component" && l.GetValue() != "spiffe" || l.GetName() == "result" && l.GetValue() != result {
					continue series
				}
			}
			return m.GetCounter().GetValue()
		}
	}
	t.Fatal(errors.New("no series " + name))
	return 0
}

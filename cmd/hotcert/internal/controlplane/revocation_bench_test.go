package controlplane_test

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/credentials"

	"github.com/hotcert/hotcert"
	"github.com/hotcert/hotcert/cmd/hotcert/internal/agentrpc"
	"github.com/hotcert/hotcert/hotcerttest"
)

// scaleRevoke is the server kind of BenchmarkRevocationCut: the control plane with
// mTLS and a deny list read from DIR/deny/deny.list.
const scaleRevoke = "cprevoke"

// BenchmarkRevocationCut revokes one agent certificate by serial while N agents
// hold their streams to a control plane replica (in a child process, as in
// BenchmarkScaleAgents); one agent in a hundred presents that certificate, so it
// has N/100 live connections. It reports the time from the deny list's write
// (a kubelet-style ..data swap) to the first and to the last of those connections
// ending (p50 and p99 over them too), and checks what must not happen: another
// agent that reconnected or failed a heartbeat, a revoked connection left, a
// revoked agent whose reconnect registered. Sizes as BenchmarkScaleAgents
// (-short: 100 agents; HOTCERT_SCALE_AGENTS=1000,10000).
func BenchmarkRevocationCut(b *testing.B) {
	for _, n := range scaleSizes(b) {
		b.Run(fmt.Sprintf("agents=%d", n), func(b *testing.B) {
			if err := raiseNoFile(uint64(n) + 512); err != nil {
				b.Fatal(err)
			}
			var r revokeResult
			for range b.N {
				r = runRevokeCut(b, n)
			}
			b.Logf("%d agents, %d on the revoked certificate: cut from %s (p50 %s, p99 %s) to %s after the deny list's write; others: %d reconnects, %d failed heartbeats; revoked: %d still connected, %d re-registered",
				n, r.revoked, r.first.Round(time.Millisecond), r.p50.Round(time.Millisecond), r.p99.Round(time.Millisecond), r.last.Round(time.Millisecond),
				r.otherReconnects, r.otherFailed, r.revokedLeft, r.revokedBack)
			b.ReportMetric(float64(r.revoked), "revoked-conns")
			b.ReportMetric(r.first.Seconds(), "first-cut-s")
			b.ReportMetric(r.p99.Seconds(), "p99-cut-s")
			b.ReportMetric(r.last.Seconds(), "last-cut-s")
			b.ReportMetric(float64(r.otherReconnects), "other-reconnects")
			b.ReportMetric(float64(r.otherFailed), "other-failed-rpcs")
			if r.otherReconnects+r.otherFailed != 0 || r.revokedLeft+int(r.revokedBack) != 0 {
				b.Errorf("the cut touched other agents or missed revoked ones (first error: %v)", r.firstErr)
			}
		})
	}
}

type revokeResult struct {
	revoked               int
	first, p50, p99, last time.Duration
	otherReconnects       int64
	otherFailed           int64
	revokedLeft           int
	revokedBack           int64
	firstErr              error
}

func runRevokeCut(b *testing.B, n int) revokeResult {
	b.Helper()
	pki := newScalePKI(b, true)
	deny := hotcerttest.MustNewAtomicWriter(filepath.Join(pki.dir, "deny"))
	deny.MustWrite(map[string][]byte{"deny.list": []byte("# nothing revoked\n")})
	srv := startScaleServer(b, pki, scaleRevoke, n)
	defer srv.stop(b)
	tokens := readTokens(b, pki)
	revokedLeaf := pki.ca.MustIssue(hotcerttest.WithCommonName("revoked agent"))
	var otherShakes, revokedShakes atomic.Int64
	otherCreds := handshakeCounter{pki.clientCreds(b), &otherShakes}
	revokedCreds := handshakeCounter{pki.clientCredsFor(b, revokedLeaf), &revokedShakes}

	ctx, cancel := context.WithCancel(context.Background())
	agents := make([]*cutAgent, n)
	var readers sync.WaitGroup
	defer func() {
		cancel()
		for _, a := range agents {
			if a != nil && a.cc != nil {
				a.cc.Close()
			}
		}
		readers.Wait()
	}()
	var r revokeResult
	for i := range agents {
		agents[i] = &cutAgent{id: scaleAgentID(i), token: tokens[i], untrusted: i%100 == 0}
		if agents[i].untrusted {
			r.revoked++
		}
	}
	if err := forEach(agents, func(a *cutAgent) error {
		creds := credentials.TransportCredentials(otherCreds)
		if a.untrusted {
			creds = revokedCreds
		}
		var err error
		a.cc, a.st, err = scaleAgent(ctx, srv.addr, creds, a.id, a.token)
		return err
	}); err != nil {
		b.Fatalf("connecting %d agents: %v", n, err)
	}
	others := slices.DeleteFunc(slices.Clone(agents), func(a *cutAgent) bool { return a.untrusted })
	revoked := slices.DeleteFunc(slices.Clone(agents), func(a *cutAgent) bool { return !a.untrusted })
	for _, a := range revoked {
		readers.Go(func() {
			for {
				if _, err := agentrpc.Recv(a.st); err != nil {
					a.endedAt.Store(time.Now().UnixNano())
					return
				}
			}
		})
	}
	shakesBefore := otherShakes.Load()
	var failed atomic.Int64
	var firstErr firstError
	round := func(seq uint64) {
		_ = forEach(others, func(a *cutAgent) error {
			if err := scaleHeartbeat(a.st, seq); err != nil {
				failed.Add(1)
				firstErr.set(fmt.Errorf("%s: %w", a.id, err))
			}
			return nil
		})
	}

	write := time.Now()
	deny.MustWrite(map[string][]byte{"deny.list": fmt.Appendf(nil, "serial %s issuer %s\n",
		hotcert.FormatSerial(revokedLeaf.Cert.SerialNumber), hotcert.FingerprintOf(pki.ca.Cert))})
	during := make(chan struct{})
	go func() { round(2); close(during) }()
	cut := func() bool {
		for _, a := range revoked {
			if a.endedAt.Load() == 0 {
				return false
			}
		}
		return true
	}
	deadline := time.Now().Add(2 * time.Minute)
	for !cut() && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	<-during
	round(3)

	var ds []time.Duration
	for _, a := range revoked {
		at := a.endedAt.Load()
		if at == 0 {
			r.revokedLeft++
			continue
		}
		ds = append(ds, time.Unix(0, at).Sub(write))
	}
	if len(ds) > 0 {
		sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
		r.first, r.last = ds[0], ds[len(ds)-1]
		r.p50, r.p99 = ds[len(ds)/2], ds[min(len(ds)-1, len(ds)*99/100)]
	}
	r.otherReconnects = otherShakes.Load() - shakesBefore
	r.otherFailed = failed.Load()

	// A revoked agent that tries again is refused at the handshake.
	var back atomic.Int64
	_ = forEach(revoked, func(a *cutAgent) error {
		octx, ocancel := context.WithTimeout(ctx, 20*time.Second)
		defer ocancel()
		st, err := a.cc.NewStream(octx, &agentrpc.StreamDesc, agentrpc.ConnectMethod)
		if err == nil {
			err = agentrpc.Send(st, agentrpc.Message{Type: agentrpc.TypeRegister, AgentID: a.id})
		}
		if err == nil {
			if m, err := agentrpc.Recv(st); err == nil && m.Type == agentrpc.TypeRegistered {
				back.Add(1)
			}
		}
		return nil
	})
	r.revokedBack = back.Load()
	r.firstErr = firstErr.get()
	return r
}

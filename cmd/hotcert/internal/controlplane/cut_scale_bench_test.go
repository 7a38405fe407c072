package controlplane_test

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/hotcert/hotcert/cmd/hotcert/internal/agentrpc"
	"github.com/hotcert/hotcert/drain"
)

// BenchmarkScaleCut changes the client CA bundle of a control plane replica
// (CutUntrusted, in a child process as in BenchmarkScaleAgents) while N agents hold
// their streams: one agent in ten presents a certificate from a CA that the new
// bundle drops (a kubelet-style swap of the bundle's volume). It reports how long
// after the swap the first and the last untrusted agent lost its stream (the drain
// cuts them at once: a GOAWAY, and drain.Draining ends their stream
// drain.DrainNotifyDelay later), and checks what must not happen: a trusted agent
// that reconnected (a TLS handshake after the swap), a trusted agent whose
// heartbeat failed (one round during the cut, one after), an untrusted agent that
// still holds its stream, or one whose re-opened stream is served.
//
// Sizes as BenchmarkScaleAgents (-short: 100 agents). With HOTCERT_SCALE_TSV=DIR
// each size updates its row of DIR/cut-scale.tsv.
func BenchmarkScaleCut(b *testing.B) {
	for _, n := range scaleSizes(b) {
		b.Run(fmt.Sprintf("agents=%d", n), func(b *testing.B) {
			if err := raiseNoFile(uint64(n) + 512); err != nil {
				b.Skip(err)
			}
			var r cutResult
			for range b.N {
				r = runCut(b, n)
			}
			b.Logf("%d agents, %d untrusted: cut from %s to %s after the bundle swap; trusted: %d reconnects, %d failed heartbeats; untrusted: %d still connected, %d re-opened streams served",
				n, r.untrusted, r.firstCut.Round(time.Millisecond), r.lastCut.Round(time.Millisecond),
				r.trustedReconnects, r.trustedFailed, r.untrustedLeft, r.untrustedBack)
			b.ReportMetric(float64(r.untrusted), "untrusted")
			b.ReportMetric(r.firstCut.Seconds(), "first-cut-s")
			b.ReportMetric(r.lastCut.Seconds(), "last-cut-s")
			b.ReportMetric(float64(r.trustedReconnects), "trusted-reconnects")
			b.ReportMetric(float64(r.trustedFailed), "trusted-failed-rpcs")
			b.ReportMetric(float64(r.untrustedLeft), "untrusted-left")
			b.ReportMetric(float64(r.untrustedBack), "untrusted-back")
			writeScaleTSV(b, "cut-scale.tsv", cutTSVHeader, n, map[string]string{
				"untrusted":          strconv.Itoa(r.untrusted),
				"first_cut_s":        fmtFloat(r.firstCut.Seconds(), 3),
				"last_cut_s":         fmtFloat(r.lastCut.Seconds(), 3),
				"trusted_reconnects": strconv.FormatInt(r.trustedReconnects, 10),
				"trusted_failed":     strconv.FormatInt(r.trustedFailed, 10),
				"untrusted_left":     strconv.Itoa(r.untrustedLeft),
				"untrusted_back":     strconv.FormatInt(r.untrustedBack, 10),
			})
			if r.trustedReconnects+r.trustedFailed != 0 || r.untrustedLeft+int(r.untrustedBack) != 0 {
				b.Errorf("the cut touched trusted agents or missed untrusted ones (first error: %v)", r.firstErr)
			}
		})
	}
}

// cutTSVHeader is docs/data/cut-scale.tsv's.
var cutTSVHeader = []string{"agents", "untrusted", "first_cut_s", "last_cut_s",
	"trusted_reconnects", "trusted_failed", "untrusted_left", "untrusted_back"}

type cutResult struct {
	untrusted         int
	firstCut, lastCut time.Duration // from the bundle swap until the first / last untrusted stream ended
	trustedReconnects int64         // TLS handshakes of trusted agents after the swap
	trustedFailed     int64         // failed heartbeats of trusted agents
	untrustedLeft     int           // untrusted agents whose stream did not end
	untrustedBack     int64         // untrusted agents whose re-opened stream registered
	firstErr          error
}

// handshakeCounter counts the TLS handshakes its agents complete.
type handshakeCounter struct {
	credentials.TransportCredentials
	n *atomic.Int64
}

func (c handshakeCounter) ClientHandshake(ctx context.Context, authority string, raw net.Conn) (net.Conn, credentials.AuthInfo, error) {
	conn, info, err := c.TransportCredentials.ClientHandshake(ctx, authority, raw)
	if err == nil {
		c.n.Add(1)
	}
	return conn, info, err
}

func (c handshakeCounter) Clone() credentials.TransportCredentials {
	return handshakeCounter{TransportCredentials: c.TransportCredentials.Clone(), n: c.n}
}

type cutAgent struct {
	id, token string
	untrusted bool
	cc        *grpc.ClientConn
	st        grpc.ClientStream
	endedAt   atomic.Int64 // UnixNano when an untrusted agent's stream ended; 0 while it holds it
}

func runCut(b *testing.B, n int) cutResult {
	b.Helper()
	pki := newScalePKI(b, true)
	srv := startScaleServer(b, pki, scaleDrain, n)
	defer srv.stop(b)
	tokens := readTokens(b, pki)
	var trustedShakes, untrustedShakes atomic.Int64
	trustedCreds := handshakeCounter{pki.clientCreds(b), &trustedShakes}
	droppedCreds := handshakeCounter{pki.clientCredsFor(b, pki.dropLeaf), &untrustedShakes}

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
	var r cutResult
	for i := range agents {
		agents[i] = &cutAgent{id: scaleAgentID(i), token: tokens[i], untrusted: i%10 == 0}
		if agents[i].untrusted {
			r.untrusted++
		}
	}
	err := forEach(agents, func(a *cutAgent) error {
		creds := credentials.TransportCredentials(trustedCreds)
		if a.untrusted {
			creds = droppedCreds
		}
		var err error
		a.cc, a.st, err = scaleAgent(ctx, srv.addr, creds, a.id, a.token)
		return err
	})
	if err != nil {
		b.Fatalf("connecting %d agents: %v", n, err)
	}
	trusted := slices.DeleteFunc(slices.Clone(agents), func(a *cutAgent) bool { return a.untrusted })
	untrusted := slices.DeleteFunc(slices.Clone(agents), func(a *cutAgent) bool { return !a.untrusted })
	// An untrusted agent reads its stream until it ends; trusted agents' streams are
	// read by their heartbeat rounds.
	for _, a := range untrusted {
		readers.Go(func() {
			for {
				if _, err := agentrpc.Recv(a.st); err != nil {
					a.endedAt.Store(time.Now().UnixNano())
					return
				}
			}
		})
	}
	shakesBefore := trustedShakes.Load()

	var failed atomic.Int64
	var firstErr firstError
	round := func(seq uint64) {
		_ = forEach(trusted, func(a *cutAgent) error {
			if err := scaleHeartbeat(a.st, seq); err != nil {
				failed.Add(1)
				firstErr.set(fmt.Errorf("%s: %w", a.id, err))
			}
			return nil
		})
	}
	swap := time.Now()
	pki.trust(b, pki.ca) // the dropped CA leaves the bundle
	during := make(chan struct{})
	go func() { round(2); close(during) }()
	cut := func() bool {
		for _, a := range untrusted {
			if a.endedAt.Load() == 0 {
				return false
			}
		}
		return true
	}
	deadline := time.Now().Add(2 * time.Minute)
	for !cut() && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	<-during
	// Every drain decision was taken in the one pass that cut the untrusted agents;
	// a trusted stream drained by it would end DrainNotifyDelay after its GOAWAY, so
	// a round after twice that sees it.
	time.Sleep(2 * drain.DrainNotifyDelay)
	round(3)

	r.firstCut, r.lastCut = time.Duration(1<<63-1), 0
	for _, a := range untrusted {
		at := a.endedAt.Load()
		if at == 0 {
			r.untrustedLeft++
			continue
		}
		d := time.Unix(0, at).Sub(swap)
		r.firstCut, r.lastCut = min(r.firstCut, d), max(r.lastCut, d)
	}
	if r.untrustedLeft == len(untrusted) {
		r.firstCut = 0
	}
	r.trustedReconnects = trustedShakes.Load() - shakesBefore
	r.trustedFailed = failed.Load()

	// An untrusted agent that tries again is refused: its new connection's handshake
	// fails, so its stream never registers.
	var back atomic.Int64
	_ = forEach(untrusted, func(a *cutAgent) error {
		octx, ocancel := context.WithTimeout(ctx, 20*time.Second)
		defer ocancel()
		st, err := a.cc.NewStream(octx, &agentrpc.StreamDesc, agentrpc.ConnectMethod)
		if err == nil {
			err = agentrpc.Send(st, agentrpc.Message{Type: agentrpc.TypeRegister, AgentID: a.id})
		}
		if err == nil {
			var m agentrpc.Message
			if m, err = agentrpc.Recv(st); err == nil && m.Type == agentrpc.TypeRegistered {
				back.Add(1)
				firstErr.set(fmt.Errorf("%s: re-opened stream registered", a.id))
			}
		}
		return nil // any error: refused, as it should be
	})
	r.untrustedBack = back.Load()
	r.firstErr = firstErr.get()
	return r
}

// forEach runs f for every agent, 64 at a time (as the other scale benchmarks
// connect), and returns the first error.
func forEach(agents []*cutAgent, f func(*cutAgent) error) error {
	sem := make(chan struct{}, 64)
	var wg sync.WaitGroup
	var first firstError
	for _, a := range agents {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			first.set(f(a))
		})
	}
	wg.Wait()
	return first.get()
}

// firstError keeps the first non-nil error it is given.
type firstError struct {
	mu  sync.Mutex
	err error
}

func (f *firstError) set(err error) {
	f.mu.Lock()
	if f.err == nil {
		f.err = err
	}
	f.mu.Unlock()
}

func (f *firstError) get() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.err
}

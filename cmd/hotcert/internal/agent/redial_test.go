package agent_test

import (
	"context"
	"crypto/tls"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hotcert/hotcert/cmd/hotcert/internal/agent"
	"github.com/hotcert/hotcert/hotcerttest"
	"github.com/hotcert/hotcert/internal/testutil"
)

// countingTLSServer accepts TCP connections and runs the server side of a TLS
// handshake on each, counting both: what the client really dialed.
func countingTLSServer(t *testing.T, cfg *tls.Config) (addr string, accepts, handshakes *atomic.Int64) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	accepts, handshakes = new(atomic.Int64), new(atomic.Int64)
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepts.Add(1)
			wg.Go(func() {
				defer c.Close()
				tc := tls.Server(c, cfg)
				_ = tc.SetDeadline(time.Now().Add(5 * time.Second))
				_ = tc.Handshake() // the client refuses the certificate
				handshakes.Add(1)
			})
		}
	})
	return ln.Addr().String(), accepts, handshakes
}

// Every failed attempt is one real dial and one log line: a retry after the
// agent's backoff dials again (re-reading the bundle) instead of returning the
// error gRPC cached from the previous attempt.
func TestEveryFailedAttemptDials(t *testing.T) {
	ca, other := hotcerttest.MustNewCA(), hotcerttest.MustNewCA()
	addr, accepts, handshakes := countingTLSServer(t, serverConfig(other.MustIssue()))

	var logs testutil.LogBuffer
	var mu sync.Mutex
	var acceptsAtFailure []int64
	a, err := agent.New(agent.Config{
		Server: addr, CAFile: writeBundle(t, ca),
		MinBackoff: 5 * time.Millisecond, MaxBackoff: 10 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(&logs, nil)),
		OnEvent: func(e agent.Event) {
			if e.Kind == agent.EventConnectFailed {
				mu.Lock()
				acceptsAtFailure = append(acceptsAtFailure, accepts.Load())
				mu.Unlock()
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	const attempts = 6
	testutil.WaitFor(t, "failed attempts", func() bool { return logs.Count("control plane connection failed") >= attempts })
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}

	mu.Lock()
	defer mu.Unlock()
	lines := logs.Count("control plane connection failed")
	if lines != len(acceptsAtFailure) {
		t.Errorf("%d log lines for %d failed attempts; want one line per attempt", lines, len(acceptsAtFailure))
	}
	for i, n := range acceptsAtFailure {
		// The i-th failure is reported after the i-th dial and before the next one.
		if n != int64(i+1) {
			t.Fatalf("failed attempt %d reported with %d TCP connections accepted, want %d (every attempt a real dial): %v", i+1, n, i+1, acceptsAtFailure)
		}
	}
	if got := a.Stats().HandshakeFailures; got < uint64(len(acceptsAtFailure)) {
		t.Errorf("%d client handshake failures for %d attempts", got, len(acceptsAtFailure))
	}
	testutil.WaitFor(t, "the server to see every handshake", func() bool { return handshakes.Load() >= int64(len(acceptsAtFailure)) })
}

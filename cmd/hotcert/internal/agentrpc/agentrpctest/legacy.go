// Package agentrpctest holds test helpers for the agent protocol.
package agentrpctest

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/hotcert/hotcert/cmd/hotcert/internal/agentrpc"
)

// heartbeatInterval is how often a legacy agent heartbeats.
const heartbeatInterval = 20 * time.Millisecond

// StartLegacyAgent holds a stream to the control plane at addr the way an agent of
// an older release does: it registers as id and heartbeats, without a trust report
// (such an agent read its bundle once, at start). It verifies the server against
// roots and serverName. The returned function closes the stream and waits for the
// heartbeat goroutine; it also runs when the test ends.
func StartLegacyAgent(t testing.TB, addr, serverName, id string, roots *x509.CertPool) (stop func()) {
	t.Helper()
	creds := credentials.NewTLS(&tls.Config{RootCAs: roots, ServerName: serverName, MinVersion: tls.VersionTLS12})
	cc, err := grpc.NewClient("passthrough:///"+addr, grpc.WithTransportCredentials(creds))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	stream, err := cc.NewStream(ctx, &agentrpc.StreamDesc, agentrpc.ConnectMethod)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	if err := agentrpc.Send(stream, agentrpc.Message{Type: agentrpc.TypeRegister, AgentID: id}); err != nil {
		cancel()
		t.Fatal(err)
	}
	if m, err := agentrpc.Recv(stream); err != nil || m.Type != agentrpc.TypeRegistered {
		cancel()
		t.Fatalf("legacy agent %s: %+v, %v", id, m, err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(heartbeatInterval)
		defer tick.Stop()
		for seq := uint64(1); ; seq++ {
			if agentrpc.Send(stream, agentrpc.Message{Type: agentrpc.TypeHeartbeat, Seq: seq}) != nil {
				return
			}
			if _, err := agentrpc.Recv(stream); err != nil {
				return
			}
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			<-done
			cc.Close()
		})
	}
	t.Cleanup(stop)
	return stop
}

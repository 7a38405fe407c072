package agent_test

import (
	"context"
	"crypto/tls"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/hotcert/hotcert/cmd/hotcert/internal/agent"
	"github.com/hotcert/hotcert/cmd/hotcert/internal/agentrpc"
	"github.com/hotcert/hotcert/hotcerttest"
	"github.com/hotcert/hotcert/internal/testutil"
)

// fakeServer speaks the control plane protocol with a static TLS config (or none),
// so that tests can serve what hotcert's own reloader would refuse (an expired
// certificate). silent servers register agents and then never answer.
func fakeServer(t *testing.T, cfg *tls.Config, silent bool) string {
	t.Helper()
	var opts []grpc.ServerOption
	if cfg != nil {
		opts = append(opts, grpc.Creds(credentials.NewTLS(cfg)))
	}
	gs := grpc.NewServer(opts...)
	gs.RegisterService(agentrpc.ServiceDesc(func(s grpc.ServerStream) error {
		if _, err := agentrpc.Recv(s); err != nil {
			return err
		}
		if err := agentrpc.Send(s, agentrpc.Message{Type: agentrpc.TypeRegistered, Replica: "fake"}); err != nil {
			return err
		}
		for {
			m, err := agentrpc.Recv(s)
			if err != nil {
				return nil
			}
			if !silent {
				if err := agentrpc.Send(s, agentrpc.Message{Type: agentrpc.TypeHeartbeatAck, Seq: m.Seq}); err != nil {
					return err
				}
			}
		}
	}), nil)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = gs.Serve(ln) }()
	t.Cleanup(gs.Stop)
	return ln.Addr().String()
}

func serverConfig(leaf *hotcerttest.Leaf) *tls.Config {
	return &tls.Config{Certificates: []tls.Certificate{leaf.TLSCertificate()}}
}

func writeBundle(t *testing.T, cas ...*hotcerttest.CA) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "ca.crt")
	if err := os.WriteFile(p, hotcerttest.BundlePEM(cas...), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

type recorder struct {
	mu     sync.Mutex
	events []agent.Event
}

func (r *recorder) on(e agent.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, e)
}

func (r *recorder) first(kind agent.EventKind) (agent.Event, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, e := range r.events {
		if e.Kind == kind {
			return e, true
		}
	}
	return agent.Event{}, false
}

func start(t *testing.T, cfg agent.Config) (*agent.Agent, *recorder) {
	t.Helper()
	rec := &recorder{}
	cfg.OnEvent = rec.on
	if cfg.MinBackoff == 0 {
		cfg.MinBackoff = 20 * time.Millisecond
	}
	if cfg.HeartbeatInterval == 0 {
		cfg.HeartbeatInterval = 20 * time.Millisecond
	}
	a, err := agent.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	return a, rec
}

// Every way a connection attempt fails is classified, fast: the agent never waits
// for a deadline when the handshake has already failed.
func TestConnectFailuresAreFastAndClassified(t *testing.T) {
	ca, other := hotcerttest.MustNewCA(), hotcerttest.MustNewCA()
	good := serverConfig(ca.MustIssue())
	expired := serverConfig(ca.MustIssue(hotcerttest.WithValidity(time.Now().Add(-48*time.Hour), time.Now().Add(-time.Hour))))
	hang, err := net.Listen("tcp", "127.0.0.1:0") // accepts, never answers
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { hang.Close() })
	go func() {
		for {
			c, err := hang.Accept()
			if err != nil {
				return
			}
			t.Cleanup(func() { c.Close() })
		}
	}()
	closed, _ := net.Listen("tcp", "127.0.0.1:0")
	closedAddr := closed.Addr().String()
	closed.Close()

	// Fast means without waiting for the connect timeout: it is an hour, longer than
	// the wait for a failed attempt, except where the timeout is the reason.
	for _, tc := range []struct {
		name, addr, serverName, reason, text string
		timeout                              time.Duration
	}{
		{"server certificate from another CA", fakeServer(t, serverConfig(other.MustIssue()), false), "", agentrpc.ReasonUnknownAuthority, "x509: certificate signed by unknown authority", time.Hour},
		{"wrong name", fakeServer(t, good, false), "cp.example.com", agentrpc.ReasonHostname, "x509: certificate is valid for", time.Hour},
		{"expired server certificate", fakeServer(t, expired, false), "", agentrpc.ReasonExpired, "x509: certificate has expired", time.Hour},
		{"plaintext server", fakeServer(t, nil, false), "", agentrpc.ReasonNotTLS, "", time.Hour},
		{"nothing listening", closedAddr, "", agentrpc.ReasonUnreachable, "connection refused", time.Hour},
		{"handshake never answered", hang.Addr().String(), "", agentrpc.ReasonTimeout, "", 500 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, rec := start(t, agent.Config{
				Server: tc.addr, ServerName: tc.serverName, CAFile: writeBundle(t, ca),
				ConnectTimeout: tc.timeout,
			})
			testutil.WaitFor(t, "a failed attempt", func() bool { _, ok := rec.first(agent.EventConnectFailed); return ok })
			e, _ := rec.first(agent.EventConnectFailed)
			if e.Reason != tc.reason || !strings.Contains(e.Err.Error(), tc.text) {
				t.Fatalf("reason %q, error %q; want %q, %q", e.Reason, e.Err, tc.reason, tc.text)
			}
			if st := a.Stats(); st.Connected || st.ConnectFailuresByReason[tc.reason] == 0 {
				t.Fatalf("stats %+v", st)
			}
		})
	}
}

// A server that stops answering is noticed by the heartbeat and the agent
// reconnects.
func TestSilentServerIsDropped(t *testing.T) {
	ca := hotcerttest.MustNewCA()
	a, rec := start(t, agent.Config{Server: fakeServer(t, serverConfig(ca.MustIssue()), true), CAFile: writeBundle(t, ca)})
	testutil.WaitFor(t, "the silent stream to be dropped", func() bool { _, ok := rec.first(agent.EventStreamDropped); return ok })
	e, _ := rec.first(agent.EventStreamDropped)
	if !strings.Contains(e.Err.Error(), "nothing received from the control plane") {
		t.Fatalf("drop error %v", e.Err)
	}
	testutil.WaitFor(t, "a reconnect", func() bool { return a.Stats().Connects >= 2 })
}

func TestConfigErrors(t *testing.T) {
	ca := writeBundle(t, hotcerttest.MustNewCA())
	for _, tc := range []struct {
		cfg  agent.Config
		want string
	}{
		{agent.Config{CAFile: ca}, "Server"},
		{agent.Config{Server: "x:1"}, "CAFile"},
		{agent.Config{Server: "x:1", CAFile: ca, CertFile: "c"}, "both"},
		{agent.Config{Server: "x:1", CAFile: ca, MinBackoff: -1}, "negative"},
	} {
		if _, err := agent.New(tc.cfg); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("New(%+v) = %v, want an error about %s", tc.cfg, err, tc.want)
		}
	}
}

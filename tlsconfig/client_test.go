package tlsconfig_test

import (
	"context"
	"crypto/tls"
	"log/slog"
	"net"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hotcert/hotcert"
	"github.com/hotcert/hotcert/hotcerttest"
	"github.com/hotcert/hotcert/internal/testutil"
	"github.com/hotcert/hotcert/source/file"
	"github.com/hotcert/hotcert/tlsconfig"
)

// An IP address is never sent as SNI: without an explicit name, verifying by the
// SNI would skip the name check (trap 4). ClientConfig refuses instead.
func TestClientConfigWithoutNameFailsClosedOnIP(t *testing.T) {
	ca := hotcerttest.MustNewCA()
	srv := tlsServerSide(tlsconfig.ServerConfig(hotcert.NewStore(full(t, ca.MustIssue(), ca))))
	cfg := tlsconfig.ClientConfig(hotcert.NewStore(trust(t, ca)), "")
	r := connect(t, srv, tlsClientSide(cfg), "127.0.0.1")
	if r.ok || !strings.Contains(errString(r.clientErr), "no server name") {
		t.Fatalf("dialing an IP without a name: %v, want refused for lack of a name", r)
	}
	if r := connect(t, srv, tlsClientSide(cfg), "localhost"); !r.ok {
		t.Fatalf("dialing a name without an explicit name: %v", r)
	}
	if r := connect(t, srv, tlsClientSide(tlsconfig.ClientConfig(hotcert.NewStore(trust(t, ca)), "127.0.0.1")), "127.0.0.1"); !r.ok {
		t.Fatalf("dialing an IP with the IP as name: %v", r)
	}
}

func TestClientCertificateFollowsProvider(t *testing.T) {
	ca := hotcerttest.MustNewCA()
	srv := tlsServerSide(tlsconfig.MTLSServerConfig(hotcert.NewStore(full(t, ca.MustIssue(), ca))))
	first, second := ca.MustIssue(hotcerttest.WithCommonName("agent-1")), ca.MustIssue(hotcerttest.WithCommonName("agent-2"))
	store := hotcert.NewStore(full(t, first, ca))
	clients := map[string]clientSide{
		"ClientConfig": tlsClientSide(tlsconfig.ClientConfig(store, "localhost")),
		"Dialer": func(ctx context.Context, addr string) (net.Conn, error) {
			return tlsconfig.NewDialer(store).DialContext(ctx, "tcp", addr)
		},
	}
	for name, cli := range clients {
		for _, leaf := range []*hotcerttest.Leaf{first, second} {
			store.Set(full(t, leaf, ca))
			r := connect(t, srv, cli, "localhost")
			if !r.ok {
				t.Fatalf("%s: %v", name, r)
			}
			if got := r.serverState.PeerCertificates[0].Subject.CommonName; got != leaf.Cert.Subject.CommonName {
				t.Fatalf("%s: server saw client %q, want %q", name, got, leaf.Cert.Subject.CommonName)
			}
		}
	}
}

func TestHookClientConfigKeepsBase(t *testing.T) {
	ca := hotcerttest.MustNewCA()
	srv := tlsServerSide(tlsconfig.ServerConfig(hotcert.NewStore(full(t, ca.MustIssue(), ca)), tlsconfig.WithNextProtos("h2")))
	var userCalls atomic.Int32
	base := &tls.Config{
		NextProtos:   []string{"h2"},
		Certificates: []tls.Certificate{ca.MustIssue().TLSCertificate()},
		VerifyConnection: func(tls.ConnectionState) error {
			userCalls.Add(1)
			return nil
		},
	}
	tlsconfig.HookClientConfig(base, hotcert.NewStore(trust(t, ca)), "127.0.0.1")
	if len(base.Certificates) != 0 || !base.InsecureSkipVerify || base.ServerName != "127.0.0.1" {
		t.Fatal("HookClientConfig did not set its fields")
	}
	r := connect(t, srv, tlsClientSide(base), "127.0.0.1")
	if !r.ok || r.clientState.NegotiatedProtocol != "h2" || userCalls.Load() != 1 {
		t.Fatalf("connect: %v, ALPN %q, base VerifyConnection calls %d", r, r.clientState.NegotiatedProtocol, userCalls.Load())
	}
}

func TestDialer(t *testing.T) {
	ca1, ca2 := hotcerttest.MustNewCA(), hotcerttest.MustNewCA()
	t.Run("no bundle fails closed", func(t *testing.T) {
		leaf := ca1.MustIssue()
		d := tlsconfig.NewDialer(hotcert.NewStore(identity(t, leaf.ChainPEM, leaf.KeyPEM, time.Now())))
		if _, err := d.Config(context.Background()); err == nil || !strings.Contains(err.Error(), "no CA bundle") {
			t.Fatalf("Config without a bundle: %v", err)
		}
	})
	t.Run("one config per material", func(t *testing.T) {
		store := hotcert.NewStore(trust(t, ca1))
		d := tlsconfig.NewDialer(store, tlsconfig.WithServerName("api.example.com"))
		a, _ := d.Config(context.Background())
		b, _ := d.Config(context.Background())
		if a != b || a.RootCAs != store.Current().TrustPool() || a.ServerName != "api.example.com" || d.ServerName() != "api.example.com" {
			t.Fatal("Config did not return the shared prepared config")
		}
		store.Set(trust(t, ca2))
		if c, _ := d.Config(context.Background()); c == a || c.RootCAs != store.Current().TrustPool() {
			t.Fatal("Config did not follow the new bundle")
		}
	})
	t.Run("notify on trust and identity changes only", func(t *testing.T) {
		store := hotcert.NewStore(trust(t, ca1))
		d := tlsconfig.NewDialer(store)
		calls := make(chan struct{}, 8)
		stop := d.Notify(func() { calls <- struct{}{} })
		defer stop()
		store.Set(trust(t, ca1)) // same bundle, new Material
		store.Set(trust(t, ca1, ca2))
		waitFor(t, calls)
		leaf := ca1.MustIssue()
		store.Set(full(t, leaf, ca1, ca2))
		waitFor(t, calls)
		select {
		case <-calls:
			t.Fatal("an unchanged bundle notified")
		case <-time.After(50 * time.Millisecond):
		}
	})
}

func waitFor(t *testing.T, ch <-chan struct{}) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(5 * time.Second):
		t.Fatal("timed out waiting for a notification")
	}
}

// TestReloadOnDial is an agent that re-reads its CA bundle per dial: the CA bundle file is re-read on every new
// connection, with no watcher running, and a broken file keeps the last good bundle
// and is logged once.
func TestReloadOnDial(t *testing.T) {
	ca1, ca2 := hotcerttest.MustNewCA(), hotcerttest.MustNewCA()
	srvStore := hotcert.NewStore(full(t, ca1.MustIssue(), ca1))
	srv := tlsServerSide(tlsconfig.ServerConfig(srvStore))

	dir := t.TempDir()
	w := hotcerttest.MustNewAtomicWriter(dir)
	w.MustWrite(map[string][]byte{"ca.crt": hotcerttest.BundlePEM(ca1)})
	src, err := file.New(file.WithCA(filepath.Join(dir, "ca.crt")))
	if err != nil {
		t.Fatal(err)
	}
	var logs testutil.LogBuffer
	r, err := hotcert.New(context.Background(), src, hotcert.WithSettle(0), hotcert.WithPollInterval(0),
		hotcert.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))),
		hotcert.WithLogMessages("", "", "agent TLS CA bundle reload failed"))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close() // never started: only the per-dial re-read sees changes

	clients := map[string]clientSide{
		"Dialer": func(ctx context.Context, addr string) (net.Conn, error) {
			return tlsconfig.NewDialer(r, tlsconfig.WithReloadOnDial(r)).DialContext(ctx, "tcp", addr)
		},
		"ClientConfig": tlsClientSide(tlsconfig.ClientConfig(r, "127.0.0.1", tlsconfig.WithReloadOnDial(r))),
	}
	for name, cli := range clients {
		t.Run(name, func(t *testing.T) {
			w.MustWrite(map[string][]byte{"ca.crt": hotcerttest.BundlePEM(ca1)})
			srvStore.Set(full(t, ca1.MustIssue(), ca1))
			if res := connect(t, srv, cli, "127.0.0.1"); !res.ok {
				t.Fatalf("first connect: %v", res)
			}
			// Step 1 of the CA rotation: union bundle. Step 2: server on the new CA.
			w.MustWrite(map[string][]byte{"ca.crt": hotcerttest.BundlePEM(ca1, ca2)})
			srvStore.Set(full(t, ca2.MustIssue(), ca2))
			if res := connect(t, srv, cli, "127.0.0.1"); !res.ok {
				t.Fatalf("reconnect after the union bundle: %v", res)
			}
			// A broken bundle keeps the last good one (which trusts ca2).
			w.MustWrite(map[string][]byte{"ca.crt": hotcerttest.Truncate(hotcerttest.BundlePEM(ca2, ca1))})
			for range 3 {
				if res := connect(t, srv, cli, "127.0.0.1"); !res.ok {
					t.Fatalf("reconnect with a broken bundle: %v", res)
				}
			}
			// Step 3: the old CA leaves; a server still on it is refused.
			w.MustWrite(map[string][]byte{"ca.crt": hotcerttest.BundlePEM(ca2)})
			srvStore.Set(full(t, ca1.MustIssue(), ca1))
			if res := connect(t, srv, cli, "127.0.0.1"); res.ok {
				t.Fatal("a server on the removed CA was accepted")
			}
		})
	}
	if n := strings.Count(logs.String(), "agent TLS CA bundle reload failed"); n != 2 {
		t.Fatalf("failure logged %d times over two clients' dials, want once per distinct bad content per episode (2):\n%s", n, logs.String())
	}
}

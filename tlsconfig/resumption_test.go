package tlsconfig_test

import (
	"context"
	"crypto/tls"
	"errors"
	"math/big"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/hotcert/hotcert"
	"github.com/hotcert/hotcert/grpccreds"
	"github.com/hotcert/hotcert/hotcerttest"
	"github.com/hotcert/hotcert/tlsconfig"
)

// TestServerRefusesResumptionAfterClientCARemoved: a client whose CA is removed
// from the server's client-CA bundle cannot get back in with a session ticket
// issued before the removal, while a rotation that keeps its CA still resumes
// (session ticket keys survive configs returned by GetConfigForClient).
func TestServerRefusesResumptionAfterClientCARemoved(t *testing.T) {
	caA, caB := hotcerttest.MustNewCA(), hotcerttest.MustNewCA()
	servers := map[string]func(id, tr *hotcert.Store) serverSide{
		"MTLSServerConfig": func(id, tr *hotcert.Store) serverSide {
			return tlsServerSide(tlsconfig.MTLSServerConfig(id, tlsconfig.WithTrust(tr), tlsconfig.WithNextProtos("h2")))
		},
		"grpccreds.NewMTLSServer": func(id, tr *hotcert.Store) serverSide {
			creds := grpccreds.NewMTLSServer(id, tlsconfig.WithTrust(tr))
			return func(raw net.Conn) (net.Conn, error) {
				conn, info, err := creds.ServerHandshake(raw)
				if err != nil {
					return nil, err
				}
				return stateConn{conn, info}, nil
			}
		},
	}
	for _, v := range tlsVersions {
		for name, mk := range servers {
			t.Run(v.name+"/"+name, func(t *testing.T) {
				t.Parallel()
				id := hotcert.NewStore(full(t, caA.MustIssue(), caA))
				tr := hotcert.NewStore(trust(t, caA, caB))
				srv := mk(id, tr)
				cli := tlsClientSide(&tls.Config{
					RootCAs:            hotcerttest.Pool(caA),
					Certificates:       []tls.Certificate{caB.MustIssue(hotcerttest.WithCommonName("agent")).TLSCertificate()},
					ServerName:         "localhost",
					MaxVersion:         v.max,
					NextProtos:         []string{"h2"},
					ClientSessionCache: tls.NewLRUClientSessionCache(8),
				})

				mustConnect(t, srv, cli, false)
				mustConnect(t, srv, cli, true)

				// Renewing the server certificate (same CAs) keeps resumption working.
				id.Set(full(t, caA.MustIssue(), caA))
				mustConnect(t, srv, cli, true)

				// The client's CA leaves the bundle: the old session must not get in.
				tr.Set(trust(t, caA))
				if r := connect(t, srv, cli, "127.0.0.1"); r.ok {
					t.Fatalf("after removing the client's CA: %v (resumed=%v), want refused", r, r.serverState.DidResume)
				}
			})
		}
	}
}

// TestClientRefusesResumptionAfterServerCARemoved: with a client session cache, a
// client whose bundle no longer holds the server's CA refuses a resumed session,
// in every client mode.
func TestClientRefusesResumptionAfterServerCARemoved(t *testing.T) {
	caA, caB := hotcerttest.MustNewCA(), hotcerttest.MustNewCA()
	clients := map[string]func(tr *hotcert.Store, base *tls.Config) clientSide{
		"ClientConfig": func(tr *hotcert.Store, base *tls.Config) clientSide {
			return tlsClientSide(tlsconfig.ClientConfig(tr, "localhost", tlsconfig.WithBase(base)))
		},
		"Dialer": func(tr *hotcert.Store, base *tls.Config) clientSide {
			d := tlsconfig.NewDialer(tr, tlsconfig.WithBase(base), tlsconfig.WithServerName("localhost"))
			return func(ctx context.Context, addr string) (net.Conn, error) { return d.DialContext(ctx, "tcp", addr) }
		},
		"grpccreds.NewClient": func(tr *hotcert.Store, base *tls.Config) clientSide {
			creds := grpccreds.NewClient(tr, tlsconfig.WithBase(base))
			return func(ctx context.Context, addr string) (net.Conn, error) {
				raw, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
				if err != nil {
					return nil, err
				}
				conn, info, err := creds.ClientHandshake(ctx, "localhost", raw)
				if err != nil {
					raw.Close()
					return nil, err
				}
				return stateConn{conn, info}, nil
			}
		},
	}
	for _, v := range tlsVersions {
		for name, mk := range clients {
			t.Run(v.name+"/"+name, func(t *testing.T) {
				t.Parallel()
				srvID := hotcert.NewStore(full(t, caB.MustIssue(), caB))
				srv := tlsServerSide(tlsconfig.ServerConfig(srvID, tlsconfig.WithNextProtos("h2")))
				tr := hotcert.NewStore(trust(t, caA, caB))
				cli := mk(tr, &tls.Config{MaxVersion: v.max, NextProtos: []string{"h2"}, ClientSessionCache: tls.NewLRUClientSessionCache(8)})

				mustConnect(t, srv, cli, false)
				mustConnect(t, srv, cli, true)

				tr.Set(trust(t, caA))
				r := connect(t, srv, cli, "127.0.0.1")
				if r.ok {
					t.Fatalf("after removing the server's CA: %v (resumed=%v), want refused", r, r.clientState.DidResume)
				}
				var ve *tls.CertificateVerificationError
				if !errors.As(r.clientErr, &ve) && !strings.Contains(errString(r.clientErr), "resumed session refused") {
					t.Errorf("client error %v, want a certificate verification error", r.clientErr)
				}
			})
		}
	}
}

// TestResumptionCheckOwnCheck exercises the VerifyConnection the prepared configs
// carry, independently of crypto/tls's own re-check of resumed sessions.
func TestResumptionCheckOwnCheck(t *testing.T) {
	caA, caB := hotcerttest.MustNewCA(), hotcerttest.MustNewCA()
	client := caB.MustIssue(hotcerttest.WithCommonName("agent"))
	id := hotcert.NewStore(full(t, caA.MustIssue(), caA, caB))
	outer := tlsconfig.MTLSServerConfig(id)
	prepared := func() *tls.Config {
		cfg, err := outer.GetConfigForClient(&tls.ClientHelloInfo{})
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	resumed := tls.ConnectionState{DidResume: true, PeerCertificates: []*x509Cert{client.Cert}}
	if err := prepared().VerifyConnection(resumed); err != nil {
		t.Fatalf("resumed session of a trusted client refused: %v", err)
	}
	id.Set(full(t, caA.MustIssue(), caA))
	err := prepared().VerifyConnection(resumed)
	if err == nil || !strings.Contains(err.Error(), "resumed session refused") {
		t.Fatalf("resumed session after its CA was removed: %v, want refused", err)
	}
	full := tls.ConnectionState{PeerCertificates: resumed.PeerCertificates}
	if err := prepared().VerifyConnection(full); err != nil {
		t.Fatalf("a full handshake is left to crypto/tls, got %v", err)
	}

	// The client side: the Dialer's configs carry the same check.
	tr := hotcert.NewStore(trust(t, caA))
	d := tlsconfig.NewDialer(tr)
	cfg, err := d.Config(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	server := caB.MustIssue()
	err = cfg.VerifyConnection(tls.ConnectionState{DidResume: true, PeerCertificates: []*x509Cert{server.Cert}})
	if err == nil {
		t.Fatal("Dialer config accepted a resumed session from an untrusted server")
	}
}

// mustConnect connects and checks success and whether the session was resumed
// (on both ends where the end exposes its state).
func mustConnect(t *testing.T, srv serverSide, cli clientSide, wantResumed bool) {
	t.Helper()
	r := connect(t, srv, cli, "127.0.0.1")
	if !r.ok {
		t.Fatalf("connect: %v", r)
	}
	if r.clientHasState && r.clientState.DidResume != wantResumed {
		t.Fatalf("client DidResume = %v, want %v", r.clientState.DidResume, wantResumed)
	}
	if r.serverState.HandshakeComplete && r.serverState.DidResume != wantResumed {
		t.Fatalf("server DidResume = %v, want %v", r.serverState.DidResume, wantResumed)
	}
	if !r.clientHasState && !r.serverState.HandshakeComplete {
		t.Fatal("neither end exposes its connection state")
	}
}

// sharedSessionCache hands every server name the last session it was given, as a
// client that ignores the name (or shares sessions across names) would: it offers
// a session established for one name when it dials another.
type sharedSessionCache struct {
	mu sync.Mutex
	cs *tls.ClientSessionState
}

func (c *sharedSessionCache) Get(string) (*tls.ClientSessionState, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cs, c.cs != nil
}

func (c *sharedSessionCache) Put(_ string, cs *tls.ClientSessionState) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if cs != nil {
		c.cs = cs
	}
}

// TestServerRefusesResumptionUnderAnotherName: a session established for one SNI
// name does not resume under another (RFC 6066 §3). With several identities, a
// session of a.test offered for b.test gets a full handshake and b.test's own
// certificate, never a.test's session; a session offered again for its own name
// still resumes, so the test proves resumption works at all. The a.test certificate
// also covers b.test, so that the Go client, which checks the session's
// certificate against the name it dials, does offer it.
func TestServerRefusesResumptionUnderAnotherName(t *testing.T) {
	ca := hotcerttest.MustNewCA()
	leafA := ca.MustIssue(hotcerttest.WithDNSNames("a.test", "b.test"))
	leafB := ca.MustIssue(hotcerttest.WithDNSNames("b.test"))
	servers := map[string]func() *tls.Config{
		// b.test's own identity first: a.test's certificate serves a.test only.
		"IdentitiesServerConfig": func() *tls.Config {
			return tlsconfig.IdentitiesServerConfig([]hotcert.Provider{hotcert.NewStore(full(t, leafB, ca)), hotcert.NewStore(full(t, leafA, ca))})
		},
		"ServerConfig": func() *tls.Config { return tlsconfig.ServerConfig(hotcert.NewStore(full(t, leafA, ca))) },
	}
	for _, v := range tlsVersions {
		for name, mk := range servers {
			t.Run(v.name+"/"+name, func(t *testing.T) {
				t.Parallel()
				srv := tlsServerSide(mk())
				cache := &sharedSessionCache{}
				client := func(serverName string) clientSide {
					return tlsClientSide(&tls.Config{RootCAs: hotcerttest.Pool(ca), ServerName: serverName, MaxVersion: v.max, ClientSessionCache: cache})
				}
				served := func(r result) *big.Int { return r.clientState.PeerCertificates[0].SerialNumber }
				wantB := leafA.Cert.SerialNumber
				if name == "IdentitiesServerConfig" {
					wantB = leafB.Cert.SerialNumber
				}

				mustConnect(t, srv, client("a.test"), false)
				mustConnect(t, srv, client("a.test"), true) // resumption works

				r := connect(t, srv, client("b.test"), "127.0.0.1")
				if !r.ok || r.serverState.DidResume || r.clientState.DidResume {
					t.Fatalf("a.test's session offered for b.test: %v, resumed (server %v, client %v); want a full handshake",
						r, r.serverState.DidResume, r.clientState.DidResume)
				}
				if got := served(r); got.Cmp(wantB) != 0 {
					t.Fatalf("b.test served serial %s, want %s", got, wantB)
				}
				// The cache now holds b.test's session: it resumes for b.test, not for a.test.
				mustConnect(t, srv, client("b.test"), true)
				r = connect(t, srv, client("a.test"), "127.0.0.1")
				if !r.ok || r.serverState.DidResume {
					t.Fatalf("b.test's session offered for a.test: %v, resumed %v; want a full handshake", r, r.serverState.DidResume)
				}
				if got := served(r); got.Cmp(leafA.Cert.SerialNumber) != 0 {
					t.Fatalf("a.test served serial %s, want a.test's %s", got, leafA.Cert.SerialNumber)
				}
			})
		}
	}
}

// TestNameBoundSessionsKeepTheCallersTicketKeysAndHooks: replicas that share
// session ticket keys (SetSessionTicketKeys on the base config) resume each other's
// sessions, and a WrapSession/UnwrapSession of the base config still runs.
func TestNameBoundSessionsKeepTheCallersTicketKeysAndHooks(t *testing.T) {
	ca := hotcerttest.MustNewCA()
	id := hotcert.NewStore(full(t, ca.MustIssue(), ca))
	var wraps, unwraps atomic.Int32
	replica := func() serverSide {
		base := &tls.Config{MinVersion: tls.VersionTLS13}
		base.SetSessionTicketKeys([][32]byte{{1, 2, 3}})
		base.WrapSession = func(cs tls.ConnectionState, ss *tls.SessionState) ([]byte, error) {
			wraps.Add(1)
			return base.EncryptTicket(cs, ss)
		}
		base.UnwrapSession = func(b []byte, cs tls.ConnectionState) (*tls.SessionState, error) {
			unwraps.Add(1)
			return base.DecryptTicket(b, cs)
		}
		tlsconfig.HookServerConfig(base, id)
		return tlsServerSide(base)
	}
	one, two := replica(), replica()
	cli := tlsClientSide(&tls.Config{RootCAs: hotcerttest.Pool(ca), ServerName: "localhost", ClientSessionCache: tls.NewLRUClientSessionCache(4)})
	mustConnect(t, one, cli, false)
	mustConnect(t, two, cli, true) // one's ticket, two's keys: the same
	if wraps.Load() == 0 || unwraps.Load() == 0 {
		t.Fatalf("the base config's hooks ran %d (wrap) and %d (unwrap) times", wraps.Load(), unwraps.Load())
	}
}

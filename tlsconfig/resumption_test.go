package tlsconfig_test

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"strings"
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

package tlsconfig_test

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"fmt"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hotcert/hotcert"
	"github.com/hotcert/hotcert/grpccreds"
	"github.com/hotcert/hotcert/hotcerttest"
	"github.com/hotcert/hotcert/revocation"
	"github.com/hotcert/hotcert/tlsconfig"
)

// denyHolder is a tlsconfig.DenyList a test swaps.
type denyHolder struct {
	p atomic.Pointer[revocation.List]
}

func (d *denyHolder) Current() *revocation.List { return d.p.Load() }

// denyKinds revoke leaf (issued by ca) one way each: by serial, by SPKI, by CRL.
var denyKinds = map[string]func(t testing.TB, leaf *hotcerttest.Leaf, ca *hotcerttest.CA) *revocation.List{
	"serial": func(t testing.TB, leaf *hotcerttest.Leaf, ca *hotcerttest.CA) *revocation.List {
		return mustList(t, revocation.Content{DenyList: hotcert.Input{Name: "deny.list", Data: fmt.Appendf(nil,
			"serial %s issuer %s\n", hotcert.FormatSerial(leaf.Cert.SerialNumber), hotcert.FingerprintOf(ca.Cert))}}, nil)
	},
	"spki": func(t testing.TB, leaf *hotcerttest.Leaf, _ *hotcerttest.CA) *revocation.List {
		h := sha256.Sum256(leaf.Cert.RawSubjectPublicKeyInfo)
		return mustList(t, revocation.Content{DenyList: hotcert.Input{Name: "deny.list", Data: []byte("spki " + hex.EncodeToString(h[:]) + "\n")}}, nil)
	},
	"crl": func(t testing.TB, leaf *hotcerttest.Leaf, ca *hotcerttest.CA) *revocation.List {
		now := time.Now()
		crl := ca.MustCRL(1, now.Add(-time.Hour), now.Add(time.Hour), leaf.Cert.SerialNumber)
		return mustList(t, revocation.Content{CRLs: hotcert.Input{Name: "ca.crl", Data: crl}}, trust(t, ca))
	},
}

func mustList(t testing.TB, c revocation.Content, tr *hotcert.Material) *revocation.List {
	t.Helper()
	l, err := revocation.Validate(c, tr, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// TestServerDenyList: a server given a deny list refuses the client it revokes —
// on a full handshake and on the resumption of a session issued before the
// revocation — and keeps admitting every other client, for each kind of entry.
func TestServerDenyList(t *testing.T) {
	ca := hotcerttest.MustNewCA()
	for _, v := range tlsVersions {
		for kind, revoke := range denyKinds {
			for _, mode := range []string{"MTLSServerConfig", "IdentitiesServerConfig", "grpccreds.NewMTLSServer"} {
				t.Run(v.name+"/"+kind+"/"+mode, func(t *testing.T) {
					t.Parallel()
					id := hotcert.NewStore(full(t, ca.MustIssue(), ca))
					deny := &denyHolder{}
					var srv serverSide
					switch mode {
					case "MTLSServerConfig":
						srv = tlsServerSide(tlsconfig.MTLSServerConfig(id, tlsconfig.WithDenyList(deny)))
					case "IdentitiesServerConfig":
						srv = tlsServerSide(tlsconfig.IdentitiesServerConfig([]hotcert.Provider{id},
							tlsconfig.WithBase(&tls.Config{ClientAuth: tls.RequireAndVerifyClientCert}), tlsconfig.WithDenyList(deny)))
					default:
						creds := grpccreds.NewMTLSServer(id, tlsconfig.WithDenyList(deny))
						srv = func(raw net.Conn) (net.Conn, error) {
							conn, info, err := creds.ServerHandshake(raw)
							if err != nil {
								return nil, err
							}
							return stateConn{conn, info}, nil
						}
					}
					agent, other := ca.MustIssue(hotcerttest.WithCommonName("agent")), ca.MustIssue(hotcerttest.WithCommonName("other"))
					client := func(leaf *hotcerttest.Leaf) clientSide {
						return tlsClientSide(&tls.Config{RootCAs: hotcerttest.Pool(ca), Certificates: []tls.Certificate{leaf.TLSCertificate()},
							ServerName: "localhost", MaxVersion: v.max, NextProtos: []string{"h2"}, ClientSessionCache: tls.NewLRUClientSessionCache(8)})
					}
					cli, otherCli := client(agent), client(other)
					mustConnect(t, srv, cli, false)
					mustConnect(t, srv, cli, true)
					mustConnect(t, srv, otherCli, false)

					deny.p.Store(revoke(t, agent, ca))
					r := connect(t, srv, cli, "127.0.0.1")
					if r.ok || !strings.Contains(errString(r.serverErr), "resumed session refused") {
						t.Fatalf("resuming a session of the revoked client: %v, want refused as a resumption", r)
					}
					fresh := tlsClientSide(&tls.Config{RootCAs: hotcerttest.Pool(ca), Certificates: []tls.Certificate{agent.TLSCertificate()},
						ServerName: "localhost", MaxVersion: v.max, NextProtos: []string{"h2"}})
					if r := connect(t, srv, fresh, "127.0.0.1"); r.ok || !strings.Contains(errString(r.serverErr), "revocation:") {
						t.Fatalf("full handshake of the revoked client: %v, want refused by the deny list", r)
					}
					mustConnect(t, srv, otherCli, true)
				})
			}
		}
	}
}

// TestClientDenyList: every client mode refuses a server whose certificate the
// deny list revokes, resumed sessions included, and still reaches another server.
func TestClientDenyList(t *testing.T) {
	ca := hotcerttest.MustNewCA()
	clients := map[string]func(tr *hotcert.Store, deny *denyHolder, base *tls.Config) clientSide{
		"ClientConfig": func(tr *hotcert.Store, deny *denyHolder, base *tls.Config) clientSide {
			return tlsClientSide(tlsconfig.ClientConfig(tr, "localhost", tlsconfig.WithBase(base), tlsconfig.WithDenyList(deny)))
		},
		"Dialer": func(tr *hotcert.Store, deny *denyHolder, base *tls.Config) clientSide {
			d := tlsconfig.NewDialer(tr, tlsconfig.WithBase(base), tlsconfig.WithServerName("localhost"), tlsconfig.WithDenyList(deny))
			return func(ctx context.Context, addr string) (net.Conn, error) { return d.DialContext(ctx, "tcp", addr) }
		},
		"grpccreds.NewClient": func(tr *hotcert.Store, deny *denyHolder, base *tls.Config) clientSide {
			creds := grpccreds.NewClient(tr, tlsconfig.WithBase(base), tlsconfig.WithDenyList(deny))
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
		for kind, revoke := range denyKinds {
			for name, mk := range clients {
				t.Run(v.name+"/"+kind+"/"+name, func(t *testing.T) {
					t.Parallel()
					leaf := ca.MustIssue()
					srv := tlsServerSide(tlsconfig.ServerConfig(hotcert.NewStore(full(t, leaf, ca)), tlsconfig.WithNextProtos("h2")))
					otherSrv := tlsServerSide(tlsconfig.ServerConfig(hotcert.NewStore(full(t, ca.MustIssue(), ca)), tlsconfig.WithNextProtos("h2")))
					deny := &denyHolder{}
					cli := mk(hotcert.NewStore(trust(t, ca)), deny, &tls.Config{MaxVersion: v.max, NextProtos: []string{"h2"}, ClientSessionCache: tls.NewLRUClientSessionCache(8)})
					mustConnect(t, srv, cli, false)
					mustConnect(t, srv, cli, true)

					deny.p.Store(revoke(t, leaf, ca))
					r := connect(t, srv, cli, "127.0.0.1")
					if r.ok || !strings.Contains(errString(r.clientErr), "resumed session refused: revocation:") {
						t.Fatalf("resuming a session with the revoked server: %v, want refused by the deny list", r)
					}
					fresh := mk(hotcert.NewStore(trust(t, ca)), deny, &tls.Config{MaxVersion: v.max, NextProtos: []string{"h2"}})
					if r := connect(t, srv, fresh, "127.0.0.1"); r.ok || !strings.Contains(errString(r.clientErr), "peer refused: revocation:") {
						t.Fatalf("full handshake with the revoked server: %v, want refused by the deny list", r)
					}
					mustConnect(t, otherSrv, cli, false)
				})
			}
		}
	}
}

package tlsconfig_test

import (
	"crypto/tls"
	"strings"
	"testing"

	"github.com/hotcert/hotcert"
	"github.com/hotcert/hotcert/hotcerttest"
	"github.com/hotcert/hotcert/tlsconfig"
)

func TestServerServesCurrentCertificateByIPAndName(t *testing.T) {
	ca := hotcerttest.MustNewCA()
	first, second := ca.MustIssue(), ca.MustIssue()
	store := hotcert.NewStore(full(t, first, ca))
	cfg := tlsconfig.ServerConfig(store)
	if len(cfg.Certificates) != 0 || cfg.GetCertificate != nil {
		t.Fatal("the outer config must leave Certificates and GetCertificate empty")
	}
	cli := tlsClientSide(&tls.Config{RootCAs: hotcerttest.Pool(ca)})
	for _, leaf := range []*hotcerttest.Leaf{first, second} {
		store.Set(full(t, leaf, ca))
		for _, host := range []string{"127.0.0.1", "localhost"} {
			r := connect(t, tlsServerSide(cfg), cli, host)
			if !r.ok {
				t.Fatalf("%s: %v", host, r)
			}
			if got := r.clientState.PeerCertificates[0].SerialNumber; got.Cmp(leaf.Cert.SerialNumber) != 0 {
				t.Fatalf("%s: served serial %x, want %x", host, got, leaf.Cert.SerialNumber)
			}
		}
	}
}

func TestServerPreparesOneConfigPerMaterial(t *testing.T) {
	ca := hotcerttest.MustNewCA()
	store := hotcert.NewStore(full(t, ca.MustIssue(), ca))
	cfg := tlsconfig.MTLSServerConfig(store)
	get := func() *tls.Config {
		c, err := cfg.GetConfigForClient(&tls.ClientHelloInfo{})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	a, b := get(), get()
	if a != b {
		t.Fatal("two handshakes on the same Material got different configs")
	}
	if a.ClientCAs != store.Current().TrustPool() || len(a.Certificates) != 1 {
		t.Fatal("prepared config does not hold the current certificate and client CAs")
	}
	store.Set(full(t, ca.MustIssue(), ca))
	if c := get(); c == a || c.Certificates[0].Leaf != store.Current().Leaf() {
		t.Fatal("a new Material did not produce a new prepared config")
	}
	hello := &tls.ClientHelloInfo{}
	if n := testing.AllocsPerRun(100, func() { _, _ = cfg.GetConfigForClient(hello) }); n != 0 {
		t.Fatalf("GetConfigForClient allocates %v times per handshake, want 0", n)
	}
}

func TestHookServerConfigKeepsBase(t *testing.T) {
	ca := hotcerttest.MustNewCA()
	store := hotcert.NewStore(full(t, ca.MustIssue(), ca))
	userCalled := make(chan struct{}, 4)
	base := &tls.Config{
		MinVersion:   tls.VersionTLS13,
		Certificates: []tls.Certificate{ca.MustIssue().TLSCertificate()},
		ClientAuth:   tls.RequireAndVerifyClientCert,
		NextProtos:   []string{"h2"},
		VerifyConnection: func(tls.ConnectionState) error {
			userCalled <- struct{}{}
			return nil
		},
	}
	tlsconfig.HookServerConfig(base, store)
	if len(base.Certificates) != 0 || base.GetConfigForClient == nil {
		t.Fatal("HookServerConfig must clear Certificates and set GetConfigForClient")
	}
	prepared, err := base.GetConfigForClient(&tls.ClientHelloInfo{})
	if err != nil {
		t.Fatal(err)
	}
	if prepared.MinVersion != tls.VersionTLS13 || prepared.NextProtos[0] != "h2" || prepared.ClientCAs != store.Current().TrustPool() {
		t.Fatal("prepared config lost the base's fields")
	}
	cli := tlsClientSide(&tls.Config{RootCAs: hotcerttest.Pool(ca), Certificates: []tls.Certificate{ca.MustIssue().TLSCertificate()}, NextProtos: []string{"h2"}})
	if r := connect(t, tlsServerSide(base), cli, "127.0.0.1"); !r.ok || r.serverState.NegotiatedProtocol != "h2" {
		t.Fatalf("connect: %v, ALPN %q", r, r.serverState.NegotiatedProtocol)
	}
	select {
	case <-userCalled:
	default:
		t.Fatal("the base's VerifyConnection did not run")
	}
}

func TestServerFailsClosed(t *testing.T) {
	ca := hotcerttest.MustNewCA()
	leaf := ca.MustIssue()
	cli := tlsClientSide(&tls.Config{RootCAs: hotcerttest.Pool(ca), Certificates: []tls.Certificate{leaf.TLSCertificate()}})

	// No certificate to serve.
	r := connect(t, tlsServerSide(tlsconfig.ServerConfig(hotcert.NewStore(trust(t, ca)))), cli, "127.0.0.1")
	if r.ok || !strings.Contains(errString(r.serverErr), "holds no certificate and key") {
		t.Fatalf("server without identity: %v", r)
	}
	// Client certificates required but no bundle: never fall back to system roots.
	r = connect(t, tlsServerSide(tlsconfig.MTLSServerConfig(hotcert.NewStore(identity(t, leaf.ChainPEM, leaf.KeyPEM, leaf.Cert.NotBefore)))), cli, "127.0.0.1")
	if r.ok || !strings.Contains(errString(r.serverErr), "no CA bundle") {
		t.Fatalf("mTLS server without bundle: %v", r)
	}
	// An empty store.
	r = connect(t, tlsServerSide(tlsconfig.ServerConfig(hotcert.NewStore(nil))), cli, "127.0.0.1")
	if r.ok {
		t.Fatal("server with an empty store accepted a connection")
	}
}

func TestServerWithSeparateTrust(t *testing.T) {
	srvCA, cliCA := hotcerttest.MustNewCA(), hotcerttest.MustNewCA()
	id := hotcert.NewStore(full(t, srvCA.MustIssue(), srvCA)) // its own ca.crt must not become ClientCAs
	tr := hotcert.NewStore(trust(t, cliCA))
	cfg := tlsconfig.MTLSServerConfig(id, tlsconfig.WithTrust(tr))
	good := tlsClientSide(&tls.Config{RootCAs: hotcerttest.Pool(srvCA), Certificates: []tls.Certificate{cliCA.MustIssue().TLSCertificate()}})
	bad := tlsClientSide(&tls.Config{RootCAs: hotcerttest.Pool(srvCA), Certificates: []tls.Certificate{srvCA.MustIssue().TLSCertificate()}})
	if r := connect(t, tlsServerSide(cfg), good, "localhost"); !r.ok {
		t.Fatalf("client of the trusted CA: %v", r)
	}
	// crypto/tls's client sends no certificate the server's CA list excludes.
	if r := connect(t, tlsServerSide(cfg), bad, "localhost"); r.ok {
		t.Fatalf("client of the identity's own CA: %v, want refused", r)
	}
}

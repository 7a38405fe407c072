package tlsconfig_test

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"math/big"
	"net"
	"path/filepath"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/credentials"

	"github.com/hotcert/hotcert"
	"github.com/hotcert/hotcert/hotcerttest"
	"github.com/hotcert/hotcert/internal/testutil"
	"github.com/hotcert/hotcert/metrics"
	"github.com/hotcert/hotcert/source/file"
	"github.com/hotcert/hotcert/tlsconfig"
)

// Client shapes that make crypto/tls choose different certificates: TLS 1.2 with
// only RSA or only ECDSA key exchange, and TLS 1.3 (which supports both).
var (
	idsRSAOnly = &tls.Config{MaxVersion: tls.VersionTLS12,
		CipherSuites: []uint16{tls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256}}
	idsECDSAOnly = &tls.Config{MaxVersion: tls.VersionTLS12,
		CipherSuites: []uint16{tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256}}
	idsTLS13 = &tls.Config{MinVersion: tls.VersionTLS13}
)

// idsClient is a client of shape base that sends serverName as SNI ("" sends the
// dialed host's name, none for an IP) and verifies the server against ca.
func idsClient(base *tls.Config, ca *hotcerttest.CA, serverName string) clientSide {
	cfg := base.Clone()
	cfg.RootCAs = hotcerttest.Pool(ca)
	cfg.ServerName = serverName
	return tlsClientSide(cfg)
}

// idsServed makes one real handshake and returns the serial of the leaf served.
func idsServed(t *testing.T, srv *tls.Config, cli clientSide, host string) *big.Int {
	t.Helper()
	r := connect(t, tlsServerSide(srv), cli, host)
	if !r.ok {
		t.Fatalf("dialing %s: %v", host, r)
	}
	return r.clientState.PeerCertificates[0].SerialNumber
}

// TestIdentitiesChooseAsCryptoTLSDoes serves four identities (two host names, each
// with an ECDSA and an RSA certificate) and checks, over real handshakes, that
// every kind of client gets the certificate crypto/tls itself picks from the same
// certificates in Config.Certificates, and that this is the expected one.
func TestIdentitiesChooseAsCryptoTLSDoes(t *testing.T) {
	ca := hotcerttest.MustNewCA()
	local := []hotcerttest.Option{hotcerttest.WithDNSNames("localhost")} // and 127.0.0.1
	other := []hotcerttest.Option{hotcerttest.WithDNSNames("other.test"), hotcerttest.WithIPAddresses()}
	leaves := map[string]*hotcerttest.Leaf{
		"local-ecdsa": ca.MustIssue(local...),
		"local-rsa":   ca.MustIssue(append(local, hotcerttest.WithKeyType(hotcerttest.RSA2048))...),
		"other-ecdsa": ca.MustIssue(other...),
		"other-rsa":   ca.MustIssue(append(other, hotcerttest.WithKeyType(hotcerttest.RSA2048))...),
	}
	order := []string{"local-ecdsa", "local-rsa", "other-ecdsa", "other-rsa"}
	var (
		providers []hotcert.Provider
		static    = &tls.Config{}
	)
	for _, name := range order {
		providers = append(providers, hotcert.NewStore(full(t, leaves[name], ca)))
		static.Certificates = append(static.Certificates, keyPair(t, leaves[name].ChainPEM, leaves[name].KeyPEM))
	}
	cfg := tlsconfig.IdentitiesServerConfig(providers)
	if len(cfg.Certificates) != 0 || cfg.GetCertificate != nil {
		t.Fatal("the outer config must leave Certificates and GetCertificate empty (trap 1)")
	}

	for _, tc := range []struct {
		name       string
		client     *tls.Config
		host, sni  string
		wantServed string
	}{
		{"TLS 1.3 by IP (no SNI)", idsTLS13, "127.0.0.1", "", "local-ecdsa"},
		{"TLS 1.3 by name", idsTLS13, "localhost", "", "local-ecdsa"},
		{"TLS 1.3 SNI other.test", idsTLS13, "127.0.0.1", "other.test", "other-ecdsa"},
		{"TLS 1.2 RSA by IP", idsRSAOnly, "127.0.0.1", "", "local-rsa"},
		{"TLS 1.2 RSA by name", idsRSAOnly, "localhost", "", "local-rsa"},
		{"TLS 1.2 RSA SNI other.test", idsRSAOnly, "127.0.0.1", "other.test", "other-rsa"},
		{"TLS 1.2 ECDSA by name", idsECDSAOnly, "localhost", "", "local-ecdsa"},
		{"TLS 1.2 ECDSA SNI other.test", idsECDSAOnly, "127.0.0.1", "other.test", "other-ecdsa"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cli := idsClient(tc.client, ca, tc.sni)
			got := idsServed(t, cfg, cli, tc.host)
			want := idsServed(t, static, cli, tc.host)
			if got.Cmp(want) != 0 {
				t.Fatalf("served serial %x, crypto/tls with the same Certificates serves %x", got, want)
			}
			if w := leaves[tc.wantServed].Cert.SerialNumber; got.Cmp(w) != 0 {
				t.Fatalf("served serial %x, want %s (%x)", got, tc.wantServed, w)
			}
		})
	}

	t.Run("unknown SNI falls back to the first", func(t *testing.T) {
		// Neither side can verify the name: compare what each serves.
		hello := &tls.ClientHelloInfo{ServerName: "unknown.test", SupportedVersions: []uint16{tls.VersionTLS13},
			SignatureSchemes: []tls.SignatureScheme{tls.ECDSAWithP256AndSHA256, tls.PSSWithSHA256},
			SupportedCurves:  []tls.CurveID{tls.X25519, tls.CurveP256}, CipherSuites: []uint16{tls.TLS_AES_128_GCM_SHA256}}
		c, err := cfg.GetConfigForClient(hello)
		if err != nil {
			t.Fatal(err)
		}
		if got := c.Certificates[0].Leaf.SerialNumber; got.Cmp(leaves[order[0]].Cert.SerialNumber) != 0 {
			t.Fatalf("served %x, want the first identity", got)
		}
	})
}

// idsIdentity is one identity served from a kubelet-faithful Secret volume by a
// real file source and Reloader.
type idsIdentity struct {
	w *hotcerttest.AtomicWriter
	r *hotcert.Reloader
}

func idsStart(t *testing.T, ctx context.Context, component string, rec *metrics.Recorder, leaf *hotcerttest.Leaf, cas ...*hotcerttest.CA) *idsIdentity {
	t.Helper()
	dir := t.TempDir()
	w := hotcerttest.MustNewAtomicWriter(dir)
	payload := map[string][]byte{"tls.crt": leaf.ChainPEM, "tls.key": leaf.KeyPEM}
	if len(cas) > 0 {
		payload["ca.crt"] = hotcerttest.BundlePEM(cas...)
	}
	w.MustWrite(payload)
	opts := []file.Option{file.WithKeyPair(filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key"))}
	if len(cas) > 0 {
		opts = append(opts, file.WithCA(filepath.Join(dir, "ca.crt")))
	}
	src, err := file.New(opts...)
	if err != nil {
		t.Fatal(err)
	}
	r, err := hotcert.New(ctx, src, hotcert.WithComponent(component), hotcert.WithObserver(rec),
		hotcert.WithSettle(0), hotcert.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- r.Start(ctx) }()
	t.Cleanup(func() {
		_ = r.Close()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	return &idsIdentity{w: w, r: r}
}

// rotate writes leaf (and cas) as the identity's next Secret generation and waits
// until the Reloader serves it.
func (id *idsIdentity) rotate(t *testing.T, leaf *hotcerttest.Leaf, cas ...*hotcerttest.CA) {
	t.Helper()
	payload := map[string][]byte{"tls.crt": leaf.ChainPEM, "tls.key": leaf.KeyPEM}
	if len(cas) > 0 {
		payload["ca.crt"] = hotcerttest.BundlePEM(cas...)
	}
	id.w.MustWrite(payload)
	testutil.WaitFor(t, "the rotated certificate", func() bool {
		return id.r.Current().Leaf().SerialNumber.Cmp(leaf.Cert.SerialNumber) == 0
	})
}

// idsCount returns the value of the counter series name{component, result...}.
func idsCount(t *testing.T, reg *prometheus.Registry, name, component string, result string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	series:
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				switch {
				case l.GetName() == "component" && l.GetValue() != component,
					l.GetName() == "result" && l.GetValue() != result:
					continue series
				}
			}
			return m.GetCounter().GetValue()
		}
	}
	t.Fatalf("no series %s{component=%q,result=%q}", name, component, result)
	return 0
}

// idsMetrics is how often each component reloaded and failed.
func idsMetrics(t *testing.T, reg *prometheus.Registry, components ...string) string {
	t.Helper()
	var s string
	for _, c := range components {
		s += fmt.Sprintf("%s: %v reloads, %v failures; ", c,
			idsCount(t, reg, "hotcert_tls_cert_reload_total", c, "success"),
			idsCount(t, reg, "hotcert_tls_reload_failures_total", c, ""))
	}
	return s
}

// TestIdentitiesRSAAndECDSARotateIndependently serves an RSA and an ECDSA
// certificate for the same name, each from its own Secret volume and Reloader:
// rotating one (and then breaking it) never changes what the other serves, and the
// metrics count each under its own component.
func TestIdentitiesRSAAndECDSARotateIndependently(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	reg := prometheus.NewRegistry()
	rec, err := metrics.New(reg)
	if err != nil {
		t.Fatal(err)
	}
	ca := hotcerttest.MustNewCA()
	rsaLeaf := func() *hotcerttest.Leaf { return ca.MustIssue(hotcerttest.WithKeyType(hotcerttest.RSA2048)) }
	rsa1, ec1 := rsaLeaf(), ca.MustIssue()
	rsaID := idsStart(t, ctx, "api_rsa", rec, rsa1)
	ecID := idsStart(t, ctx, "api_ecdsa", rec, ec1)
	cfg := tlsconfig.IdentitiesServerConfig([]hotcert.Provider{rsaID.r, ecID.r})

	check := func(step string, wantRSA, wantEC *hotcerttest.Leaf, wantMetrics string) {
		t.Helper()
		for _, host := range []string{"127.0.0.1", "localhost"} {
			if got := idsServed(t, cfg, idsClient(idsRSAOnly, ca, ""), host); got.Cmp(wantRSA.Cert.SerialNumber) != 0 {
				t.Fatalf("%s: RSA client dialing %s got serial %x, want %x", step, host, got, wantRSA.Cert.SerialNumber)
			}
			if got := idsServed(t, cfg, idsClient(idsECDSAOnly, ca, ""), host); got.Cmp(wantEC.Cert.SerialNumber) != 0 {
				t.Fatalf("%s: ECDSA client dialing %s got serial %x, want %x", step, host, got, wantEC.Cert.SerialNumber)
			}
			// TLS 1.3 supports both: the first identity (RSA) is served.
			if got := idsServed(t, cfg, idsClient(idsTLS13, ca, ""), host); got.Cmp(wantRSA.Cert.SerialNumber) != 0 {
				t.Fatalf("%s: TLS 1.3 client dialing %s got serial %x, want the first identity %x", step, host, got, wantRSA.Cert.SerialNumber)
			}
		}
		if got := idsMetrics(t, reg, "api_rsa", "api_ecdsa"); got != wantMetrics {
			t.Fatalf("%s: metrics %q, want %q", step, got, wantMetrics)
		}
	}

	check("start", rsa1, ec1, "api_rsa: 0 reloads, 0 failures; api_ecdsa: 0 reloads, 0 failures; ")

	rsa2 := rsaLeaf()
	rsaID.rotate(t, rsa2)
	check("RSA rotated", rsa2, ec1, "api_rsa: 1 reloads, 0 failures; api_ecdsa: 0 reloads, 0 failures; ")

	ec2 := ca.MustIssue()
	ecID.rotate(t, ec2)
	check("ECDSA rotated", rsa2, ec2, "api_rsa: 1 reloads, 0 failures; api_ecdsa: 1 reloads, 0 failures; ")

	// A broken ECDSA update keeps the last good ECDSA certificate serving, and is
	// counted once, for the ECDSA identity only.
	ecID.w.MustWrite(map[string][]byte{"tls.crt": hotcerttest.Truncate(ca.MustIssue().ChainPEM), "tls.key": ec2.KeyPEM})
	testutil.WaitFor(t, "the broken ECDSA update to be reported", func() bool { return ecID.r.Status().Failures == 1 })
	check("ECDSA broken", rsa2, ec2, "api_rsa: 1 reloads, 0 failures; api_ecdsa: 1 reloads, 1 failures; ")
}

// TestIdentitiesTwoHostNamesRotateIndependently serves two host names, each with
// its own certificate and client CA, over mutual TLS: each is rotated while the
// other keeps serving; a client is verified against the CA of the identity it
// reaches; and a session resumed under the other identity is refused.
func TestIdentitiesTwoHostNamesRotateIndependently(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rec, err := metrics.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	serverCA, caA, caB := hotcerttest.MustNewCA(), hotcerttest.MustNewCA(), hotcerttest.MustNewCA()
	leafA := func() *hotcerttest.Leaf { return serverCA.MustIssue(hotcerttest.WithDNSNames("localhost")) }
	leafB := func() *hotcerttest.Leaf {
		return serverCA.MustIssue(hotcerttest.WithDNSNames("b.test"), hotcerttest.WithIPAddresses())
	}
	a1, b1 := leafA(), leafB()
	idA := idsStart(t, ctx, "tenant_a", rec, a1, caA) // clients of tenant A
	idB := idsStart(t, ctx, "tenant_b", rec, b1, caB) // clients of tenant B
	cfg := tlsconfig.IdentitiesServerConfig([]hotcert.Provider{idA.r, idB.r},
		tlsconfig.WithBase(&tls.Config{ClientAuth: tls.RequireAndVerifyClientCert}))

	clientA, clientB := caA.MustIssue(), caB.MustIssue()
	mtls := func(client *hotcerttest.Leaf, sni string, cache tls.ClientSessionCache) clientSide {
		return tlsClientSide(&tls.Config{RootCAs: hotcerttest.Pool(serverCA), ServerName: sni,
			Certificates: []tls.Certificate{client.TLSCertificate()}, ClientSessionCache: cache})
	}
	// Host A is reached by IP (no SNI: the first identity) and by name; host B by
	// its SNI name.
	check := func(step string, wantA, wantB *hotcerttest.Leaf) {
		t.Helper()
		for _, host := range []string{"127.0.0.1", "localhost"} {
			if got := idsServed(t, cfg, mtls(clientA, "", nil), host); got.Cmp(wantA.Cert.SerialNumber) != 0 {
				t.Fatalf("%s: host A by %s served %x, want %x", step, host, got, wantA.Cert.SerialNumber)
			}
		}
		if got := idsServed(t, cfg, mtls(clientB, "b.test", nil), "127.0.0.1"); got.Cmp(wantB.Cert.SerialNumber) != 0 {
			t.Fatalf("%s: host B served %x, want %x", step, got, wantB.Cert.SerialNumber)
		}
		// Each identity trusts its own tenant's clients only.
		if r := connect(t, tlsServerSide(cfg), mtls(clientB, "", nil), "localhost"); r.ok {
			t.Fatalf("%s: a client of CA B got into host A", step)
		}
		if r := connect(t, tlsServerSide(cfg), mtls(clientA, "b.test", nil), "127.0.0.1"); r.ok {
			t.Fatalf("%s: a client of CA A got into host B", step)
		}
	}

	check("start", a1, b1)
	b2 := leafB()
	idB.rotate(t, b2, caB)
	check("B rotated", a1, b2)
	a2 := leafA()
	idA.rotate(t, a2, caA)
	check("A rotated", a2, b2)

	t.Run("a session resumes only under the identity that trusts its client", func(t *testing.T) {
		cache := &idsOneSession{}
		first := connect(t, tlsServerSide(cfg), mtls(clientA, "", cache), "localhost")
		if !first.ok || first.clientState.DidResume {
			t.Fatalf("first handshake: %v (resumed %v)", first, first.clientState.DidResume)
		}
		again := connect(t, tlsServerSide(cfg), mtls(clientA, "", cache), "localhost")
		if !again.ok || !again.serverState.DidResume {
			t.Fatalf("the session must resume under its own identity (else the next check proves nothing): %v, resumed %v", again, again.serverState.DidResume)
		}
		// A client that offers host A's session to host B (its cache ignores the
		// name; it skips verification so that crypto/tls offers the session at
		// all) must neither resume nor get in: host B does not trust CA A.
		cross := &tls.Config{InsecureSkipVerify: true, ServerName: "b.test", ClientSessionCache: cache,
			Certificates: []tls.Certificate{clientA.TLSCertificate()}}
		r := connect(t, tlsServerSide(cfg), tlsClientSide(cross), "127.0.0.1")
		if r.ok || r.serverState.DidResume {
			t.Fatalf("host A's session got into host B: %v (resumed %v)", r, r.serverState.DidResume)
		}
	})
}

// idsOneSession is a client session cache that holds one session and offers it for
// every server name: a misbehaving client.
type idsOneSession struct {
	cs *tls.ClientSessionState
}

func (c *idsOneSession) Get(string) (*tls.ClientSessionState, bool) { return c.cs, c.cs != nil }
func (c *idsOneSession) Put(_ string, cs *tls.ClientSessionState) {
	if cs != nil {
		c.cs = cs
	}
}

// TestIdentitiesOverGRPCKeepH2 passes the config through credentials.NewTLS, as a
// gRPC server does: both identities are served with ALPN h2 (trap 2).
func TestIdentitiesOverGRPCKeepH2(t *testing.T) {
	ca := hotcerttest.MustNewCA()
	rsaLeaf, ecLeaf := ca.MustIssue(hotcerttest.WithKeyType(hotcerttest.RSA2048)), ca.MustIssue()
	creds := credentials.NewTLS(tlsconfig.IdentitiesServerConfig([]hotcert.Provider{
		hotcert.NewStore(full(t, ecLeaf, ca)), hotcert.NewStore(full(t, rsaLeaf, ca))}))
	srv := func(raw net.Conn) (net.Conn, error) {
		conn, info, err := creds.ServerHandshake(raw)
		if err != nil {
			return nil, err
		}
		return stateConn{conn, info}, nil
	}
	for _, tc := range []struct {
		client *tls.Config
		want   *hotcerttest.Leaf
	}{{idsTLS13, ecLeaf}, {idsRSAOnly, rsaLeaf}} {
		cfg := tc.client.Clone()
		cfg.NextProtos = []string{"h2"}
		for _, host := range []string{"127.0.0.1", "localhost"} {
			r := connect(t, srv, idsClient(cfg, ca, ""), host)
			if !r.ok {
				t.Fatalf("%s: %v", host, r)
			}
			if got := r.clientState.PeerCertificates[0].SerialNumber; got.Cmp(tc.want.Cert.SerialNumber) != 0 {
				t.Fatalf("%s: served %x, want %x", host, got, tc.want.Cert.SerialNumber)
			}
			if p := r.clientState.NegotiatedProtocol; p != "h2" {
				t.Fatalf("%s: negotiated ALPN %q, want h2", host, p)
			}
		}
	}
}

func TestIdentitiesWithoutACertificate(t *testing.T) {
	ca := hotcerttest.MustNewCA()
	trustOnly, leaf := hotcert.NewStore(trust(t, ca)), ca.MustIssue()
	cfg := tlsconfig.IdentitiesServerConfig([]hotcert.Provider{trustOnly, hotcert.NewStore(full(t, leaf, ca))})
	// A provider without an identity is passed over.
	if got := idsServed(t, cfg, idsClient(idsTLS13, ca, ""), "127.0.0.1"); got.Cmp(leaf.Cert.SerialNumber) != 0 {
		t.Fatalf("served %x, want the only certificate %x", got, leaf.Cert.SerialNumber)
	}
	// None at all: the handshake fails with a clear error.
	none := tlsconfig.IdentitiesServerConfig([]hotcert.Provider{trustOnly})
	r := connect(t, tlsServerSide(none), idsClient(idsTLS13, ca, ""), "127.0.0.1")
	if r.ok || r.serverErr == nil {
		t.Fatalf("a server with no certificate accepted a handshake: %v", r)
	}
	if _, err := none.GetConfigForClient(&tls.ClientHelloInfo{}); err == nil {
		t.Fatal("no error without any certificate")
	} else if want := "tlsconfig: none of the 1 identities holds a certificate and key to serve"; err.Error() != want {
		t.Fatalf("error %q, want %q", err, want)
	}
}

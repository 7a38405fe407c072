//go:build unix

package tlsconfig_test

import (
	"context"
	"crypto/tls"
	"net"
	"testing"

	"github.com/hotcert/hotcert"
	"github.com/hotcert/hotcert/hotcerttest"
	"github.com/hotcert/hotcert/internal/handshakebench"
	"github.com/hotcert/hotcert/tlsconfig"
)

func tlsServer(cfg *tls.Config) func(net.Conn) error {
	return func(c net.Conn) error { return tls.Server(c, cfg).Handshake() }
}

func tlsClient(cfg *tls.Config) func(net.Conn) error {
	return func(c net.Conn) error { return tls.Client(c, cfg).Handshake() }
}

// BenchmarkMTLSHandshake compares full mutual-TLS handshakes (TLS 1.3, ECDSA P-256,
// no resumption) of static standard-library configs with hotcert's, both ends in
// this process. Run it with -benchtime=2000x or more for ratios to 0.5%.
func BenchmarkMTLSHandshake(b *testing.B) {
	ca := hotcerttest.MustNewCA()
	srvLeaf, cliLeaf := ca.MustIssue(), ca.MustIssue(hotcerttest.WithCommonName("agent"))
	base := &tls.Config{MinVersion: tls.VersionTLS13, SessionTicketsDisabled: true}

	staticSrv := base.Clone()
	staticSrv.Certificates = []tls.Certificate{srvLeaf.TLSCertificate()}
	staticSrv.ClientAuth = tls.RequireAndVerifyClientCert
	staticSrv.ClientCAs = hotcerttest.Pool(ca)
	staticCli := base.Clone()
	staticCli.Certificates = []tls.Certificate{cliLeaf.TLSCertificate()}
	staticCli.RootCAs = hotcerttest.Pool(ca)
	staticCli.ServerName = "localhost"

	srvStore := hotcert.NewStore(materialOf(b, srvLeaf, ca))
	cliStore := hotcert.NewStore(materialOf(b, cliLeaf, ca))
	hotSrv := tlsconfig.MTLSServerConfig(srvStore, tlsconfig.WithBase(base))
	hotCli := tlsconfig.ClientConfig(cliStore, "localhost", tlsconfig.WithBase(base))
	dialer := tlsconfig.NewDialer(cliStore, tlsconfig.WithBase(base))
	perDial := func(c net.Conn) error {
		cfg, err := dialer.Config(context.Background())
		if err != nil {
			return err
		}
		cfg = cfg.Clone() // as Dialer.DialContext does to set the name
		cfg.ServerName = "localhost"
		return tls.Client(c, cfg).Handshake()
	}

	handshakebench.Interleave(b, []handshakebench.Handshaker{
		{Name: "static", Server: tlsServer(staticSrv), Client: tlsClient(staticCli)},
		{Name: "hotcert", Server: tlsServer(hotSrv), Client: tlsClient(hotCli)},
		{Name: "hotcert-dialer", Server: tlsServer(hotSrv), Client: perDial},
		{Name: "hotcert-server-only", Server: tlsServer(hotSrv), Client: tlsClient(staticCli)},
		{Name: "hotcert-client-only", Server: tlsServer(staticSrv), Client: tlsClient(hotCli)},
	})
}

func materialOf(tb testing.TB, leaf *hotcerttest.Leaf, cas ...*hotcerttest.CA) *hotcert.Material {
	tb.Helper()
	m, err := hotcert.Validate(hotcert.Content{
		Cert: hotcert.Input{Name: "tls.crt", Data: leaf.ChainPEM},
		Key:  hotcert.Input{Name: "tls.key", Data: leaf.KeyPEM},
		CA:   hotcert.Input{Name: "ca.crt", Data: hotcerttest.BundlePEM(cas...)},
	})
	if err != nil {
		tb.Fatal(err)
	}
	return m
}
